#!/usr/bin/env python3
"""Derive src/rlhf_launch/openrlhf/renames.json from the shipped flag sets: for every trainer
flag that disappears between two consecutive releases, what it became.

A change is a rename (`new`: one flag, or several when one old flag now exists per role, e.g.
`--adam_betas` -> `--actor.adam.betas` and `--critic.adam.betas`) or a removal (`new` empty,
with `replacement` when other flags now do the job). Only the flag sets are read (names,
actions, types, defaults, choices, nargs); nothing of OpenRLHF's code.

How a disappearing flag is matched to a flag that appears in the same release:
  1. same kind: action, type, nargs and choices equal (a switch never matches a value);
  2. score: the share of name words (split on `_` and `.`) the two names have in common, +0.1
     when the defaults are equal too; scores under 0.3 do not count;
  3. best pairs first, each new flag taken once; a tie is decided only when the tied flags are
     the same setting per role (`actor.X` / `critic.X`, roles being the `<role>.num_nodes`
     flags), which maps the old flag to all of them; any other tie, or a flag with no match
     that is not in TABLE, stops the script.
TABLE holds what the data cannot decide (names with no word in common, a switch that became a
value, removals with a replacement), each with its reason. A TABLE entry for a flag that does
not disappear at that release stops the script too, so the table cannot go stale silently.

    python scripts/gen_renames.py           # rewrite renames.json
    python scripts/gen_renames.py --check   # exit 1 if renames.json is not what the data gives

Run it after scripts/gen_flagsets.py adds a release; tests/openrlhf/test_renames.py checks the file is
current.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlhf_launch.openrlhf.flagset import Flag, FlagSet, load, supported_versions  # noqa: E402

OUT = ROOT / "src" / "rlhf_launch" / "openrlhf" / "renames.json"
THRESHOLD = 0.3
DEFAULT_BONUS = 0.1

# (release where the flag disappears, old flag) -> what it became, and why the data cannot say.
TABLE: dict[tuple[str, str], dict[str, Any]] = {
    ("0.8.10", "flash_attn"): {
        "new": ["attn_implementation"],
        "values": [[True, "flash_attention_2"], [False, "eager"]],
        "why": "a switch became a value: on = flash_attention_2, off = the eager attention it fell back to",
    },
    ("0.9.2", "bf16"): {
        "new": ["param_dtype"],
        "values": [[True, "bf16"]],
        "why": "a switch became the choice bf16/fp16; off (DeepSpeed without bf16, i.e. fp32) has no choice to map to",
    },
    ("0.9.3", "use_icepop"): {
        "new": ["vllm_is_correction_type"],
        "values": [[True, "icepop"], [False, "tis"]],
        "why": "a switch became one choice of the correction type (tis is that flag's default)",
    },
    ("0.9.8", "prompt_max_len"): {
        "replacement": ["max_len"],
        "why": "no per-prompt limit any more: max_len bounds prompt + generation together",
    },
    ("0.9.8", "generate_max_len"): {
        "new": ["max_new_tokens"],
        "why": "the names share only 'max'; both are the tokens generated per sample",
    },
    ("0.10.2", "pretrain"): {"new": ["actor.model_name_or_path"], "why": "the names share no word"},
    ("0.10.2", "reward_pretrain"): {"new": ["reward.model_name_or_path"], "why": "the names share only the role"},
    ("0.10.2", "critic_pretrain"): {"new": ["critic.model_name_or_path"], "why": "the names share only the role"},
    ("0.10.2", "save_path"): {"new": ["ckpt.output_dir"], "why": "the names share no word; both are where the final model is saved"},
    ("0.10.2", "l2"): {
        "new": ["actor.adam.weight_decay", "critic.adam.weight_decay"],
        "why": "the one weight-decay flag of both optimizers became one per role; the names share no word",
    },
    ("0.11.2", "algo.advantage.is_correction_enable"): {
        "replacement": ["algo.advantage.is_correction_level", "algo.advantage.is_correction_mode", "algo.advantage.is_correction_gating"],
        "why": "the switch and the type became level (off/token/seq), mode (mask/clip) and gating; no one-to-one value map",
    },
    ("0.11.2", "algo.advantage.is_correction_type"): {
        "replacement": ["algo.advantage.is_correction_level", "algo.advantage.is_correction_mode", "algo.advantage.is_correction_gating"],
        "why": "its choices (tis/icepop/seq-mask-tis) are now combinations of level, mode and gating",
    },
}


def words(name: str) -> set[str]:
    return set(re.split(r"[._]", name))


def kind(flag: Flag) -> tuple[Any, ...]:
    return (flag.action, flag.type, flag.nargs, flag.choices)


def score(old: Flag, new: Flag) -> float:
    a, b = words(old.name), words(new.name)
    return round(len(a & b) / len(a | b) + (DEFAULT_BONUS if old.default == new.default else 0.0), 6)


def roles(flags: FlagSet) -> set[str]:
    return {name.split(".")[0] for name in flags.flags if name.endswith(".num_nodes")} | {
        name[: -len("_num_nodes")] for name in flags.flags if name.endswith("_num_nodes")
    }


def per_role(names: list[str], known_roles: set[str]) -> bool:
    """True when `names` are one setting per role: `actor.X`, `critic.X`, ..."""
    heads = [n.split(".", 1) for n in names]
    return all(len(h) == 2 for h in heads) and len({h[1] for h in heads}) == 1 and {h[0] for h in heads} <= known_roles


def derive(old: FlagSet, new: FlagSet) -> list[dict[str, Any]]:
    since = new.version
    gone = [f for name, f in old.flags.items() if name not in new.flags]
    fresh = [f for name, f in new.flags.items() if name not in old.flags]
    for (at, name), _ in TABLE.items():
        if at == since and name not in {f.name for f in gone}:
            raise SystemExit(f"TABLE entry ({at}, {name}): --{name} does not disappear at {at}")
    changes: dict[str, dict[str, Any]] = {}
    for flag in gone:
        entry = TABLE.get((since, flag.name))
        if entry is not None:
            changes[flag.name] = {
                "new": list(entry.get("new", [])),
                "replacement": list(entry.get("replacement", [])),
                **({"values": entry["values"]} if "values" in entry else {}),
                "basis": f"table: {entry['why']}",
            }
    taken = {n for c in changes.values() for n in c["new"]}
    pairs = sorted(
        ((score(g, f), g.name, f.name) for g in gone if g.name not in changes for f in fresh if kind(g) == kind(f)),
        key=lambda p: (-p[0], p[1], p[2]),
    )
    pairs = [p for p in pairs if p[0] >= THRESHOLD]
    known_roles = roles(new)
    undecided: list[str] = []
    for best, old_name, _ in pairs:
        if old_name in changes or old_name in undecided:
            continue
        tied = [n for s, o, n in pairs if o == old_name and s == best and n not in taken]
        if not tied:
            continue  # its best candidates went to better matches; a lower one may still fit
        if len(tied) > 1 and not per_role(tied, known_roles):
            undecided.append(old_name)
            continue
        taken.update(tied)
        how = "one per role; " if len(tied) > 1 else ""
        changes[old_name] = {"new": tied, "replacement": [], "basis": f"derived: {how}same kind, name words and defaults score {best:g}"}
    if undecided:
        raise SystemExit(f"{since}: cannot decide {undecided}: add them to TABLE with a reason")
    for flag in gone:
        changes.setdefault(
            flag.name,
            {"new": [], "replacement": [], "basis": f"derived: no flag new in {since} has its kind and a similar name"},
        )
    return [{"since": since, "old": name, **changes[name]} for name in sorted(changes)]


def build() -> dict[str, Any]:
    versions = list(supported_versions())
    changes: list[dict[str, Any]] = []
    for a, b in zip(versions, versions[1:], strict=False):
        changes += derive(load(a), load(b))
    for (at, name), _ in TABLE.items():
        if at not in versions:
            raise SystemExit(f"TABLE entry ({at}, {name}): {at} is not a shipped release")
    renamed = [c for c in changes if c["new"]]
    return {
        "about": "What each trainer flag that disappears between consecutive OpenRLHF releases became. "
        "Generated by scripts/gen_renames.py from flagsets/*.json; do not edit.",
        "releases": versions,
        "counts": {
            "renamed": len(renamed),
            "renamed_with_values": len([c for c in renamed if "values" in c]),
            "removed_with_replacement": len([c for c in changes if not c["new"] and c["replacement"]]),
            "removed": len([c for c in changes if not c["new"] and not c["replacement"]]),
        },
        "changes": changes,
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if renames.json is out of date")
    args = parser.parse_args()
    text = render(build())
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            raise SystemExit(f"{OUT.relative_to(ROOT)} is out of date: run scripts/gen_renames.py")
        print(f"{OUT.relative_to(ROOT)} is current")
        return
    OUT.write_text(text)
    counts = json.loads(text)["counts"]
    print(f"{OUT.relative_to(ROOT)}: {counts}")


if __name__ == "__main__":
    main()
