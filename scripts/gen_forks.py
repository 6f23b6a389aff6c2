#!/usr/bin/env python3
"""Derive the fork test data: tests/data/forks/<owner>+<name>@<commit>.json and the launch
scripts in tests/data/scripts/forks/, from git snapshots of public OpenRLHF forks.

tests/data/forks/MANIFEST.yaml (written by hand) names each fork (repo, commit, the folder that
holds its `openrlhf/` package) and its launch scripts (path, and `vars` the script's caller
sets). For each fork this reads `openrlhf/cli/train_ppo_ray.py` and its version file at that
commit with the project's own reader (rlhf_launch.openrlhf.extract, openrlhf.fork; a parser
built in another module of the checkout is followed there, named in `parser_modules`) and writes
only derived facts: flag names, types, actions, defaults, choices, nargs, the estimators its
start-up check refuses with one sample, its version, the trainer file's sha256, its licence's
first line. No fork source is copied. Each script is copied with a header naming where it
comes from (scripts are short, attributed test material, like tests/data/scripts/field).

    python scripts/gen_forks.py --mirrors /work/.mirror   # <mirrors>/<owner>+<name>/repo is a git dir

The tests fetch nothing: they read these files (tests/importer/test_forks.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlhf_launch.errors import UserError  # noqa: E402
from rlhf_launch.openrlhf import fork  # noqa: E402
from rlhf_launch.openrlhf.extract import extract_flags, extract_group_estimators  # noqa: E402

DATA = ROOT / "tests" / "data" / "forks"
SCRIPTS = ROOT / "tests" / "data" / "scripts" / "forks"


# A W&B key some public scripts hold (the value after --use_wandb, or assigned to a key variable):
# replaced by a placeholder of the same length, never copied. The flag stays set, as it was.
WANDB_KEY = re.compile(r"((?:--use_wandb[ =]|(?:WANDB_API_KEY|WANDB_KEY|wandb_token)=)[\"']?)[0-9a-f]{40}\b")
PLACEHOLDER = "0" * 40


def redact(text: str) -> tuple[str, int]:
    return WANDB_KEY.subn(lambda m: m.group(1) + PLACEHOLDER, text)


def git(gitdir: Path, *args: str) -> str:
    done = subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True, check=False)
    return done.stdout if done.returncode == 0 else ""


def slug(repo: str) -> str:
    return repo.replace("/", "+")


def script_file(repo: str, path: str) -> str:
    return f"{slug(repo)}--{Path(path).name}"


def licence(gitdir: Path, commit: str) -> str:
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "License"):
        text = git(gitdir, "show", f"{commit}:{name}")
        if text.strip():
            first = next(line.strip() for line in text.splitlines() if line.strip())
            return "Apache-2.0" if "Apache" in text[:400] else first[:60]
    return "no licence file"


def derive(entry: dict, gitdir: Path) -> dict:
    repo, commit, root = entry["repo"], entry["commit"], entry.get("root", "")
    trainer = f"{root}{fork.TRAINER}"
    source = git(gitdir, "show", f"{commit}:{trainer}")
    if not source:
        raise SystemExit(f"{repo}@{commit}: no {trainer}")
    files = {n: t for n in fork.VERSION_FILES if (t := git(gitdir, "show", f"{commit}:{root}{n}"))}

    def load(name: str) -> str | None:  # a module of the same checkout, at that commit (a parser built there)
        return next((t for p in fork.module_paths(name) if (t := git(gitdir, "show", f"{commit}:{root}{p}"))), None)

    modules = fork.linked_modules(source, load)
    known = {
        "repo": repo,
        "commit": commit,
        "root": root,
        "trainer": trainer,
        "url": f"https://github.com/{repo}/blob/{commit}/{trainer}",
        "licence": licence(gitdir, commit),
    }
    try:
        flags = fork.from_source(source, root=repo, version=fork.version_from(files), modules=modules)
    except UserError as exc:  # the project's reader cannot read this fork: kept as the outcome, no flags
        return {**known, "error": str(exc).splitlines()[0], "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest()}
    assert flags.fork is not None
    return {
        **known,
        "version": flags.fork.version,
        "version_file": next((n for n in fork.VERSION_FILES if n in files), None),
        "sha256": hashlib.sha256(source.encode("utf-8")).hexdigest(),
        "nearest_release": flags.version,
        "own_flags": list(flags.fork.only),
        "flags": extract_flags(source, dict(modules).get),
        **({"parser_modules": [f"{root}{fork.module_paths(n)[0]}" for n, _ in modules]} if modules else {}),
        "group_estimators": extract_group_estimators(source),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of <owner>+<name>/repo git dirs")
    parser.add_argument("--wave", type=int, help="derive only the forks of this wave (MANIFEST.yaml's wave:, 1 when absent)")
    args = parser.parse_args()
    manifest = yaml.safe_load((DATA / "MANIFEST.yaml").read_text())
    SCRIPTS.mkdir(parents=True, exist_ok=True)
    for entry in manifest["forks"]:
        if args.wave is not None and entry.get("wave", 1) != args.wave:
            continue
        gitdir = args.mirrors / slug(entry["repo"]) / "repo"
        data = derive(entry, gitdir)
        out = DATA / f"{slug(entry['repo'])}@{entry['commit']}.json"
        out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        for script in entry["scripts"]:
            text = git(gitdir, "show", f"{entry['commit']}:{script['path']}")
            if not text:
                raise SystemExit(f"{entry['repo']}@{entry['commit']}: no {script['path']}")
            text, keys = redact(text)
            how = "copied unchanged below" if not keys else f"copied below, unchanged but for {keys} W&B key(s) replaced by zeros,"
            head = (
                f"# From https://github.com/{entry['repo']}/blob/{entry['commit']}/{script['path']}\n"
                f"# ({data['licence']}); {how} for rlhf-launch's fork import tests.\n"
            )
            (SCRIPTS / script_file(entry["repo"], script["path"])).write_text(head + text)
        if "error" in data:
            print(f"{out.name}: not read: {data['error']}")
            continue
        print(f"{out.name}: {len(data['flags'])} flags, {len(data['own_flags'])} of its own, nearest {data['nearest_release']}")


if __name__ == "__main__":
    main()
