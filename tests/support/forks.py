"""Stand-in OpenRLHF fork checkouts for tests: a directory whose `openrlhf/cli/train_ppo_ray.py`
defines exactly a given flag set (as extract.py reads it back), and its version file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlhf_launch.openrlhf import fork
from rlhf_launch.openrlhf.flagset import _data_dir


def _literal(value: Any) -> str:
    if isinstance(value, dict) and "expr" in value:
        return str(value["expr"])
    return repr(value)


def trainer_source(flags: list[dict[str, Any]], group_estimators: list[str]) -> str:
    """A train_ppo_ray.py that defines exactly `flags` (each as extract.py reports it)."""
    lines = ["import argparse", "", "", "if __name__ == '__main__':", "    parser = argparse.ArgumentParser()"]
    for flag in flags:
        parts = [repr(f"--{flag['name']}")]
        if flag["dest"] != flag["name"].replace("-", "_"):
            parts.append(f"dest={flag['dest']!r}")
        for key in ("action", "type", "default", "choices", "nargs"):
            if key not in flag:
                continue
            value = flag[key]
            if key == "type":
                parts.append(f"type={value}" if isinstance(value, str) else f"type={_literal(value)}")
            elif key == "action" and value == "boolean_optional":
                parts.append("action=argparse.BooleanOptionalAction")  # as the fork writes it (extract.py's name for it)
            else:
                parts.append(f"{key}={_literal(value)}")
        lines.append(f"    parser.add_argument({', '.join(parts)})")
    lines.append("    args = parser.parse_args()")
    if group_estimators:
        lines += [f"    if args.advantage_estimator in {group_estimators!r}:", "        assert args.n_samples_per_prompt > 1"]
    return "\n".join(lines) + "\n"


def write_fork(root: Path, flags: list[dict[str, Any]], group_estimators: list[str], version: str | None) -> Path:
    """A stand-in checkout at `root`: the trainer defining `flags`, and version.txt."""
    (root / "openrlhf" / "cli").mkdir(parents=True, exist_ok=True)
    (root / "openrlhf" / "__init__.py").write_text("")
    (root / fork.TRAINER).write_text(trainer_source(flags, group_estimators))
    if version:
        (root / "version.txt").write_text(version + "\n")
    return root


def stock_flags(version: str) -> tuple[list[dict[str, Any]], list[str]]:
    """A shipped release's flags and group estimators, as extract.py reported them."""
    data = json.loads((_data_dir() / f"{version}.json").read_text())
    return list(data["flags"]), list(data.get("group_estimators", []))


def stock_plus(root: Path, version: str, extra: list[dict[str, Any]], own_version: str | None = None) -> Path:
    """A fork of a shipped release with `extra` flags of its own."""
    flags, groups = stock_flags(version)
    return write_fork(root, flags + extra, groups, own_version or f"{version}.fork1")


def write_sibling_fork(root: Path, version: str, extra: list[dict[str, Any]], outside_call: str = "") -> Path:
    """A stand-in checkout whose trainer builds its parser in another module of the checkout
    (EIT-EAST-Lab/C3's shape: `from openrlhf.cli.train_ppo_ray_tooling import build_parser`),
    defining release `version`'s flags and `extra`; `outside_call` names a function of a module
    outside the checkout that the trainer also hands the parser to."""
    (root / "openrlhf" / "cli").mkdir(parents=True)
    (root / "openrlhf" / "__init__.py").write_text("__version__ = '0.1.0'\n")
    outside = f"from elsewhere import {outside_call}\n" if outside_call else ""
    call = f"    {outside_call}(parser)\n" if outside_call else ""
    (root / "openrlhf" / "cli" / "train_ppo_ray.py").write_text(
        f"from openrlhf.cli.train_ppo_ray_tooling import build_parser\n{outside}\n"
        f"if __name__ == '__main__':\n    parser = build_parser()\n{call}    args = parser.parse_args()\n"
    )
    stock, _ = stock_flags(version)
    body = trainer_source(stock + extra, []).split("parser = argparse.ArgumentParser()\n", 1)[1].split("    args =")[0]
    (root / "openrlhf" / "cli" / "train_ppo_ray_tooling.py").write_text(
        "import argparse\n\ndef build_parser():\n    p = argparse.ArgumentParser()\n" + body.replace("parser.", "p.") + "    return p\n"
    )
    return root
