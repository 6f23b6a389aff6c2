"""A rule-based reward for math answers: OpenRLHF loads reward_func from this file
(models.reward_func in the preset; the launcher ships it with the job).

The label is the reference answer (data.label_key); the response's last \\boxed{...} (or its
last number) must equal it. Reward 1.0 or 0.0; the same value is the score dynamic filtering
reads.
"""

import re

import torch

BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def _answer(text: str) -> str:
    boxed = BOXED.findall(text)
    if boxed:
        return str(boxed[-1])
    numbers = NUMBER.findall(text)
    return str(numbers[-1]) if numbers else ""


def _normal(answer: str) -> str:
    return answer.replace(" ", "").replace("\\!", "").rstrip(".").lower()


def reward_func(queries: list[str], prompts: list[str], labels: list[str], **kwargs: object) -> dict[str, object]:
    """queries: prompt + response texts; prompts: the prompts; labels: the reference answers."""
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt) :] if query.startswith(prompt) else query
        rewards.append(1.0 if _normal(_answer(response)) == _normal(str(label)) != "" else 0.0)
    reward = torch.tensor(rewards, dtype=torch.float)
    return {"rewards": reward, "scores": reward, "extra_logs": {"accuracy": reward}}
