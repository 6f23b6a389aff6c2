"""The memory estimate against public outcomes: launch flags users posted with their GPU and what
happened (out of memory, or ran), collected in tests/data/memory/*.yaml by people who did not
write the estimate. Each record's flags become the trainer argv, `import` makes it a config, the
record's GPU memory and node shape are set, and `prepare` runs the estimate and its judgement.

Flags a thread cut off (the record's `flags_complete: false` or `incomplete`) are completed as the
evidence allows (see `completed`): a run that ran with the memory savers of OpenRLHF's examples
for what it does not show, an OOM as posted. DeepSpeed- or torchrun-launched runs
(openrlhf.cli.train_ppo) put the four models on every GPU: scored as every role on every GPU.

Scored per half (`split`: fit | heldout; the estimate's constants are adjusted against the fit
half only): of the OOM reports, how many the estimate predicts (a memory finding that the peak
is over the GPU: refused, or warned "expect out-of-memory"; in the reported phase where the
report names one), and of the runs that ran, how many pass (no memory error).

Records of outcomes-wave2.yaml are wave 2 (collected after the estimate was fitted, scored unseen
first: tests/data/memory/README.md); the figures are kept over all waves and for wave 2 alone.

`python tests/core/test_memory_field.py` prints the figures per wave and every miss with its reason.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.errors import UserError
from rlhf_launch.importer import import_script

DATA = Path(__file__).parents[1] / "data" / "memory"
# Where the estimate's phases meet the reports' words for them.
PHASES = {
    "train": ("train",),
    "training": ("train",),
    "make_experience": ("experience",),
    "generation": ("generate",),
    "generate": ("generate",),
    "vllm_start": ("generate",),
    "kv_cache": ("generate",),
    "vllm_init": ("generate",),
    "weight_sync": ("sync",),
    "sync": ("sync",),
}
# half -> (share of OOM reports predicted, share of ran configs passing) it must keep, over all waves:
# the measured figures rounded down (see README "Memory model"); raise them, never lower them.
# Measured 2026-12-05 on 77 records (wave 1: 45, wave 2: 15, wave 3: 17; split by the collectors' rule):
#   wave 1  fit 6 of 9 OOMs predicted (67%), 15 of 15 ran pass; held out 6 of 9 (67%), 11 of 12 ran pass (92%)
#   wave 2  fit 1 of 1 OOM predicted, 9 of 9 ran pass; held out no OOM report, 5 of 5 ran pass
#   wave 3  no OOM report; fit 8 of 8 ran pass, held out 9 of 9
#   all     fit 7 of 10 (70%), 32 of 32; held out 6 of 9 (67%), 25 of 26 (96%)
# The margin's high end (GROWTH, NCCL communicators) now warns of a possible OOM where the central
# peak is under the GPU: it predicts no further report (none of the misses is within its reach) and
# warns 3 + 3 of the 41 ran configs. The goal on the held-out OOMs (80%) is NOT met; every
# miss is in EXPLAINED, and `python tests/core/test_memory_field.py` prints them with their reasons.
FLOORS = {"fit": (0.70, 1.0), "heldout": (0.66, 0.96)}
# Wave 2 (tests/data/memory/outcomes-wave2.yaml), scored unseen with the estimate as merged at
# 039ff57, before any change: fit 1 of 1 OOM predicted, 9 of 9 ran pass; held out no OOM report,
# 5 of 5 ran pass. The same after the change.
WAVE2_FLOORS = {"fit": (1.0, 1.0), "heldout": (1.0, 1.0)}
# Wave 3 (outcomes-wave3.yaml, 17 records, all `ran`: the search corpus holds no further OpenRLHF
# OOM report naming its model and GPU), scored unseen with the estimate as merged at 8cd290b (unchanged
# since): fit 8 of 8 ran pass, held out 9 of 9 (1 of the 17 warned of a possible OOM, none refused).
WAVE_FLOORS = {"2": WAVE2_FLOORS, "3": {"fit": (1.0, 1.0), "heldout": (1.0, 1.0)}}
GOAL = (0.80, 0.90)  # the target on the held-out half
# Every miss, and why: a new miss fails test_every_miss_is_explained until it is explained here
# (and in README's "Memory estimate") or fixed.
EXPLAINED = {
    # fit half
    "oi-776-70b-grpo-a800": "70B GRPO, ZeRO-3 + adam_offload over 32 actor GPUs: 16 GiB per GPU estimated; the thread's "
    "commenter OOMs with an 8B model at the same settings: a cause outside the sizes, not found in the source",
    "oi-329-72b-ppo-32gpu": "72B PPO, ZeRO-3 + adam_offload on 8 GPUs per model, eager attention: 30 (actor) and 44 (ref) "
    "GiB per GPU estimated; no phase or figure (a screenshot); not explained",
    "oi-763-reinforce-8xh800-2engines": "no model in the posted flags (nothing to size); the collector notes a vLLM start on "
    "a GPU already holding a model (placement), not a size",
    # held-out half
    "lmmr1-27-72b-rloo-a800": "model unnamed ('72B'; Qwen2.5-VL-72B per the thread): as the known 70-72B shapes it needs "
    "16-25 GiB per GPU over 28 GPUs, within; the vision tower is not modelled",
    "oi-756-8b-8xa100-40g-ran": "ran; flags cut off: with 32 rollouts of 2048 tokens per forward the fp32 logits alone "
    "reach 50 GB at the bound; the real sequences were shorter (or packed) than max_len",
    "oi-519-8b-8xh100-deepspeed": "four 8B models on every GPU (DeepSpeed launcher), 70 GiB estimated of 80; the OOM came "
    "'after some training updates': the margin's high end (10% fragmentation + 25% growth of the working "
    "sets, NCCL communicators) reaches 76 GiB; the four models in one process of the DeepSpeed launcher are not modelled as one",
    "oi-95-ppo-8xa100-80g-deepspeed": "no model and no flags in the stored excerpt (nothing to size)",
}


@dataclass
class Scored:
    id: str
    half: str
    outcome: str  # oom | ran
    phase: str
    predicted: bool = False  # the estimate says out of memory
    refused: bool = False  # ... as an error
    phase_ok: bool = True
    why: str = ""  # the reason of a miss, or why the record could not be scored
    peaks: list[str] = field(default_factory=list)
    wave: str = "1"  # "2": outcomes-wave2.yaml, collected after the estimate was fitted, scored unseen first

    @property
    def scored(self) -> bool:
        return not self.why.startswith("not scored")

    @property
    def right(self) -> bool:
        if self.outcome == "oom":
            return self.predicted and self.phase_ok
        return not self.refused


def records() -> list[dict[str, Any]]:
    out = []
    for path in sorted(DATA.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        for record in data.get("outcomes") or []:
            out.append({**record, "_file": path.name})
    return out


def half_of(record: dict[str, Any]) -> str:
    split = record.get("split")
    if split in ("fit", "heldout"):
        return str(split)
    # no split stated: the collectors' rule (tests/data/memory/README.md), from the id alone
    return "fit" if int(hashlib.sha256(str(record["id"]).encode()).hexdigest(), 16) % 2 == 0 else "heldout"


def wave_of(record: dict[str, Any]) -> str:
    """`N` for outcomes-waveN.yaml (collected after the estimate was fitted), else "1"."""
    m = re.match(r"outcomes-wave(\d+)", str(record.get("_file", "")))
    return m.group(1) if m else "1"


def argv_of(flags: dict[str, Any]) -> list[str]:
    """The trainer argv from a record's flags: `--name value`, `--name` for true, nothing for false."""
    argv: list[str] = []
    for name, value in flags.items():
        flag = name if name.startswith("--") else f"--{name}"
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            argv += [flag, *(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def models_of(record: dict[str, Any]) -> list[str]:
    """The models the record names in `model` ("Qwen/Qwen2.5-7B-Instruct (actor), 7B reward
    model"), in order, for a record whose flags (cut off, or a shell variable) do not name them."""
    out = []
    for item in re.split(r"[,;]", str(record.get("model") or "")):
        first = re.split(r"\s*\(", item.strip(), maxsplit=1)[0].strip()
        if first:
            out.append(first.split()[0])
    return out


def named(value: Any) -> bool:
    return bool(value) and "$" not in str(value)


def in_process(record: dict[str, Any]) -> bool:
    launcher = str(record.get("launcher") or "")
    return ("deepspeed" in launcher or "torchrun" in launcher) and "ray" not in launcher


def incomplete(record: dict[str, Any]) -> bool:
    """The posted flags are not all the run had: `flags_complete: false` (the source is cut or
    partly shown), `incomplete`, or (records without the field) notes saying the thread was cut off."""
    if record.get("flags_complete") is False or record.get("incomplete"):
        return True
    return record.get("flags_complete") is None and "cut off" in str(record.get("notes") or "")


# What a run could have had among the flags a cut-off post does not show: the memory savers of
# OpenRLHF's own example scripts of every release.
SAVERS = {"zero_stage": 3, "adam_offload": True, "gradient_checkpointing": True, "flash_attn": True}
SAVERS_COLOCATED = {"vllm_enable_sleep": True, "deepspeed_enable_sleep": True}


def completed(record: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """A record whose flags are incomplete is read as the evidence allows: a run that ran had some
    completion that fits, so its unstated memory settings take the savers of the examples (an
    estimate that refuses even that is wrong); an OOM is scored on the flags as posted."""
    if record["outcome"] != "ran" or not incomplete(record):
        return flags
    savers = {**SAVERS, **(SAVERS_COLOCATED if flags.get("colocate_all_models") else {})}
    return {**savers, **flags}


def launch_of(record: dict[str, Any]) -> Launch:
    flags = completed(record, dict(record.get("flags") or {}))
    models = models_of(record)
    if not named(flags.get("pretrain")) and models:
        flags["pretrain"] = models[0]
    rm_gpus = flags.get("reward_num_gpus_per_node") and not named(flags.get("remote_rm_url"))
    if rm_gpus and not named(flags.get("reward_pretrain")) and len(models) > 1:
        flags["reward_pretrain"] = models[1]
    if in_process(record):
        # DeepSpeed's or torchrun's launcher running openrlhf.cli.train_ppo: the four models on
        # every GPU, generation by the actor itself; as Ray's layout: every role on every GPU
        nodes, per_node = int(record.get("nodes") or 1), int(record.get("gpus_per_node") or 8)
        for role in ("actor", "critic", "ref", "reward"):
            flags.setdefault(f"{role}_num_nodes", nodes)
            flags.setdefault(f"{role}_num_gpus_per_node", per_node)
        flags["colocate_all_models"] = True
    argv = argv_of(flags)
    script = "python3 -m openrlhf.cli.train_ppo_ray " + shlex.join(argv) + "\n"
    imported = import_script(script, name="field", environ={})
    cfg = imported.config
    cluster = {
        "gpu_memory_gb": float(record["gpu_memory_gb"]),
        "nodes": int(record.get("nodes") or 1),
        "gpus_per_node": int(record.get("gpus_per_node") or 8),
    }
    data = imported.data | {"cluster": {**imported.data.get("cluster", {}), **cluster}}
    cfg = type(cfg).model_validate(data)  # gpu_memory_gb stated: the estimate may refuse
    return prepare(cfg, environ={})


def score(record: dict[str, Any]) -> Scored:
    s = Scored(str(record["id"]), half_of(record), str(record["outcome"]), str(record.get("phase") or "unknown"))
    s.wave = wave_of(record)
    try:
        launch = launch_of(record)
    except (UserError, ValueError) as exc:
        s.why = f"not scored: {str(exc).splitlines()[0][:160]}"
        return s
    memory = launch.memory
    over = [
        f
        for f in launch.findings
        if f.reason == "memory" or ("needs" in f.message and "but a GPU has" in f.message) or f.message.endswith("(over)")
    ]
    s.refused = any(f.level == "error" and f.reason == "memory" for f in launch.findings)
    s.predicted = bool(over)
    limit = launch.cfg.cluster.gpu_memory_gb
    over_phases = [p for g in (memory.groups if memory else []) for p, v in g.phases.items() if v > limit]
    if memory is not None:
        s.peaks = [f"{'+'.join(g.roles)} {g.peak:.0f}/{limit:g} ({g.peak_phase})" for g in memory.groups]
    wanted = PHASES.get(s.phase)
    if s.outcome == "oom" and s.predicted and wanted and over_phases:
        s.phase_ok = any(p.startswith(wanted) for p in over_phases)
    unsized = [f.message.split(":")[0] for f in launch.findings if "not estimated" in f.message]
    if s.outcome == "oom" and not s.predicted:
        s.why = "; ".join([*(["under the GPU: " + "; ".join(s.peaks)] if s.peaks else []), *unsized])
    elif s.outcome == "oom" and not s.phase_ok:
        s.why = f"over in {over_phases}, reported in {s.phase}"
    elif s.outcome == "ran" and s.refused:
        s.why = "refused: " + next(f.message for f in launch.findings if f.level == "error" and f.reason == "memory")[:200]
    return s


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    found = records()
    if not found:
        pytest.skip(f"no outcomes in {DATA}")
    return [score(r) for r in found]


def figures(items: list[Scored], half: str, wave: str | None = None) -> tuple[float, float, int, int]:
    mine = [s for s in items if s.half == half and s.scored and (wave is None or s.wave == wave)]
    ooms = [s for s in mine if s.outcome == "oom"]
    rans = [s for s in mine if s.outcome == "ran"]
    predicted = sum(s.right for s in ooms) / len(ooms) if ooms else 1.0
    passed = sum(s.right for s in rans) / len(rans) if rans else 1.0
    return predicted, passed, len(ooms), len(rans)


@pytest.mark.parametrize("half", ["fit", "heldout"])
def test_the_estimate_keeps_its_measured_figures(scored: list[Scored], half: str) -> None:
    predicted, passed, ooms, rans = figures(scored, half)
    floor = FLOORS[half]
    misses = [f"{s.id}: {s.why}" for s in scored if s.half == half and s.scored and not s.right]
    assert predicted >= floor[0] and passed >= floor[1], (predicted, passed, ooms, rans, misses)


@pytest.mark.parametrize("half", ["fit", "heldout"])
@pytest.mark.parametrize("wave", sorted(WAVE_FLOORS))
def test_each_later_wave_keeps_its_figures(scored: list[Scored], wave: str, half: str) -> None:
    assert any(s.wave == wave for s in scored), f"no records of wave {wave}"
    predicted, passed, ooms, rans = figures(scored, half, wave=wave)
    floor = WAVE_FLOORS[wave][half]
    misses = [f"{s.id}: {s.why}" for s in scored if s.half == half and s.wave == wave and s.scored and not s.right]
    assert predicted >= floor[0] and passed >= floor[1], (predicted, passed, ooms, rans, misses)


def test_every_miss_is_explained(scored: list[Scored]) -> None:
    unexplained = [f"{s.id} ({s.half}): {s.why}" for s in scored if s.scored and not s.right and s.id not in EXPLAINED]
    assert unexplained == [], unexplained


def test_most_records_can_be_scored(scored: list[Scored]) -> None:
    unscored = [f"{s.id}: {s.why}" for s in scored if not s.scored]
    assert len(unscored) <= len(scored) // 4, unscored


def main() -> None:
    items = [score(r) for r in records()]
    for wave in (None, *sorted({s.wave for s in items}, key=int)):
        for half in ("fit", "heldout"):
            predicted, passed, ooms, rans = figures(items, half, wave)
            warned = sum(
                1
                for s in items
                if s.half == half and (wave is None or s.wave == wave) and s.scored and s.outcome == "ran" and s.predicted and not s.refused
            )
            print(
                f"{'all waves' if wave is None else 'wave ' + wave} {half}: {predicted:.0%} of {ooms} OOM reports predicted, "
                f"{passed:.0%} of {rans} ran configs pass ({warned} of them warned over the GPU)"
            )
    for s in items:
        mark = "ok  " if s.right and s.scored else ("skip" if not s.scored else "MISS")
        print(f"{mark} {s.half:<7} {s.outcome:<4} {s.phase:<15} {s.id}: {s.why or '; '.join(s.peaks)}")
        if mark == "MISS" and s.id in EXPLAINED:
            print(f"     why: {EXPLAINED[s.id]}")


if __name__ == "__main__":
    sys.exit(main())
