"""The launcher against OpenRLHF's real start-up code, config by config, release by release.

For each release, every preset and every corpus row (corpus.py: each start-up check of the
release's `train_ppo_ray.py` seen failing and passing) goes through the launcher (`prepare`)
and, with the argv the launcher renders, through the release's real start-up (harness.py):

  launcher passes, OpenRLHF refuses: never.
  launcher refuses, OpenRLHF accepts: only with a reason each error names (the run would hang at
      placement, fail in DeepSpeed's batch check or at the actors' initialization, or run out of
      memory: what the start-up does not reach).
  both refuse: the launcher reproduces at least one check (an error with no such reason).
  both accept: the placement groups are the real ones, in order.

The default run covers the newest release, 0.10.2 (the first dotted one), the last flat one and
0.8.11; `-m slow` every release.
"""

from __future__ import annotations

import ast
from functools import cache

import pytest

from rlhf_launch.openrlhf.flagset import supported_versions, version_key

from .corpus import corpus
from .differential import REASONS, Row, compare, summary
from .wheels import trainer_root

pytestmark = pytest.mark.fidelity

RELEASES = supported_versions()
LAST_FLAT = max((v for v in RELEASES if version_key(v) < version_key("0.10.2")), key=version_key)
DEFAULT = sorted({RELEASES[-1], "0.10.2", LAST_FLAT, "0.8.11"}, key=version_key)
SLOW = [pytest.param(v, marks=pytest.mark.slow) for v in RELEASES if v not in DEFAULT]


@cache
def rows(version: str) -> tuple[Row, ...]:
    return tuple(compare(version, corpus(version)))


def _show(bad: list[Row]) -> str:
    return f"{len(bad)} rows:\n" + "\n".join(row.describe() for row in bad[:12])


@pytest.mark.parametrize("version", [*DEFAULT, *SLOW])
def test_the_launcher_agrees_with_openrlhf(version: str) -> None:
    got = rows(version)
    harness = [row for row in got if row.real is not None and row.real.harness_error]
    assert harness == [], "\n".join(f"{row.case.name}: {row.real.harness_error[:500]}" for row in harness if row.real)

    passed_refused = [row for row in got if row.kind == "launcher-pass/real-reject"]
    assert passed_refused == [], "the launcher passes what OpenRLHF refuses: " + _show(passed_refused)

    stricter = [row for row in got if row.kind == "launcher-reject/real-pass" and row.unexplained]
    assert stricter == [], "the launcher refuses what OpenRLHF runs, naming no reason: " + _show(stricter)

    unreproduced = [row for row in got if row.kind == "launcher-reject/real-reject" and all(f.reason for f in row.errors)]
    assert unreproduced == [], "OpenRLHF refuses for a check the launcher does not reproduce: " + _show(unreproduced)

    mismatched = [row for row in got if row.placement_mismatch]
    assert mismatched == [], "\n".join(f"{row.case.name}: {row.placement_mismatch}" for row in mismatched)

    counts = summary(list(got))
    assert counts["launcher-pass/real-pass"] >= 90 and counts["launcher-reject/real-reject"] >= 50, counts
    assert set(counts["reasons"]) == set(REASONS), counts  # every kind of "stricter" is exercised


@pytest.mark.parametrize("version", [*DEFAULT, *SLOW])
def test_the_corpus_fails_every_check_of_the_release(version: str) -> None:
    """Every assert of the release's train_ppo_ray.py (and the crashes the launcher knows) is met by some row."""
    source = (trainer_root(version) / "openrlhf" / "cli" / "train_ppo_ray.py").read_text()
    prefixes = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and node.msg is not None:
            parts = node.msg.values if isinstance(node.msg, ast.JoinedStr) else [node.msg]
            first = parts[0]
            prefix = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
            prefixes.add(prefix[:40])
    messages = [row.real.message for row in rows(version) if row.real is not None and not row.real.ok]
    unmet = sorted(p for p in prefixes if not any(m.startswith(p) for m in messages))
    assert unmet == [], unmet
    # and the checks train() reaches through get_strategy
    assert any("BF16 is required for tensor parallel" in m for m in messages)


@pytest.mark.parametrize("version", DEFAULT)
def test_every_correction_is_reported(version: str) -> None:
    """The start-up's silent changes show up as warnings saying what the trainer will do."""
    by_name = {row.case.name: row for row in rows(version)}

    def warned(case: str, *words: str) -> bool:
        launch = by_name[case].launch
        assert launch is not None
        return any(f.level == "warning" and all(w in f.message for w in words) for f in launch.findings)

    assert warned("separate:ring", "ring attention", "packing_samples on")
    assert warned("separate:dynamic_batch", "dynamic batching", "packing_samples on")
    assert warned("separate:critic_given_critic_free", "critic org/critic is dropped")
    assert warned("separate:input_template_no_braces", "is dropped")
    assert warned("separate:packing_eager", "flash_attention_2")
    # and the real trainer did change them
    real = by_name["separate:ring"].real
    assert real is not None and real.ok
    assert real.args["ds.packing_samples" if version_key(version) >= version_key("0.10.2") else "packing_samples"] is True


def test_the_official_async_agent_example_is_accepted() -> None:
    """OpenRLHF's own examples/scripts/train_reinforce_baseline_ray_agent_async.sh (0.10.2)."""
    row = next(row for row in rows("0.10.2") if row.case.name == "official:async_agent")
    assert row.kind == "launcher-pass/real-pass", row.describe()
    launch = row.launch
    assert launch is not None and launch.memory is not None
    actor = next(r for r in launch.memory.roles if r.role == "actor")
    assert actor.shape == "Qwen3-4B"
    # Dynamic batching packs up to max_tokens_per_gpu x ring size tokens per micro batch and the ring
    # splits them (utils/seqlen_balancing.py), so each GPU holds 16192 tokens, not 1 x 74240; the
    # training logits are 10 bytes per token per vocabulary entry (core/memory: fp32 logits, their
    # fp32 gradient and lm_head's bf16 dlogits).
    assert actor.parts["logits"] == pytest.approx(16192 * 151936 * 10 / 1024**3)
    assert not any(f.key == "placement.vllm.enable_sleep" for f in launch.findings)  # no advice that async refuses
