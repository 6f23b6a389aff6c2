"""A rule-based reward function in the form OpenRLHF loads from `--remote_rm_url reward_func.py`."""

import re


def reward_func(queries, prompts, labels):
    """1.0 when the last number in the response equals the label, else 0.0."""
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        numbers = re.findall(r"-?\d+(?:\.\d+)?", query[len(prompt) :])
        rewards.append(1.0 if numbers and numbers[-1] == str(label).strip() else 0.0)
    return {"rewards": rewards, "scores": rewards, "extra_logs": {}}
