#!/usr/bin/env python3
"""Add or refresh OpenRLHF releases: src/rlhf_launch/openrlhf/flagsets/<version>.json, from
the published wheels. With --default, make that release the default everywhere it must be.

For each version: `pip download openrlhf==X --no-deps`, open the wheel (or sdist), read
`openrlhf/cli/train_ppo_ray.py` with `ast` (rlhf_launch.openrlhf.extract) and write the
flag set as data, with the versions the release pins (`Requires-Dist: pkg==X`, the `vllm`
extra included). Nothing from OpenRLHF is copied: only flag names, types, actions,
defaults, choices and nargs, the advantage estimators its start-up check refuses with one
sample per prompt, and the pins.

    python scripts/gen_flagsets.py 0.11.3 --default   # add a release and make it the default
    python scripts/gen_flagsets.py 0.11.3             # add it, keep the default
    python scripts/gen_flagsets.py                    # refresh every shipped release
    python scripts/gen_flagsets.py --wheels DIR ...   # use (and keep) archives in DIR

Then it derives the renames between releases again (scripts/gen_renames.py).
--default rewrites: openrlhf/releases.py (DEFAULT), every preset's `openrlhf.version`, the
`cluster` extra of pyproject.toml, the version ARGs of docker/Dockerfile, the default image
of scripts/run-node.sh and the image tags in README.md. tests/core/test_releases.py checks that
they agree.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rlhf_launch.openrlhf.extract import extract_flags, extract_group_estimators  # noqa: E402
from rlhf_launch.openrlhf.flagset import version_key  # noqa: E402

OUT = ROOT / "src" / "rlhf_launch" / "openrlhf" / "flagsets"
TRAINER = "openrlhf/cli/train_ppo_ray.py"
# Requirements of a release that the cluster image pins, and the Dockerfile ARG of each.
IMAGE_ARGS = {
    "openrlhf": "OPENRLHF_VERSION",
    "vllm": "VLLM_VERSION",
    "deepspeed": "DEEPSPEED_VERSION",
    "transformers": "TRANSFORMERS_VERSION",
    "flash-attn": "FLASH_ATTN_VERSION",
    "ray": "RAY_VERSION",
}


def shipped_versions() -> list[str]:
    return sorted((p.stem for p in OUT.glob("*.json")), key=version_key)


def download(version: str, dest: Path) -> Path:
    def found() -> list[Path]:
        return sorted(dest.glob(f"openrlhf-{version}-*.whl")) + sorted(dest.glob(f"openrlhf-{version}.tar.gz"))

    if not found():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"openrlhf=={version}", "--no-deps", "-q", "-d", str(dest)],
            check=True,
        )
    if not found():
        raise SystemExit(f"pip download gave no openrlhf {version} archive in {dest}")
    return found()[0]


def read_archive(path: Path) -> tuple[str, str]:
    """The trainer source and the package metadata text from a wheel or sdist."""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            source = next(n for n in names if n.endswith(TRAINER))
            meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
            return archive.read(source).decode(), archive.read(meta).decode()
    with tarfile.open(path) as archive:
        names = archive.getnames()
        source = next(n for n in names if n.endswith(TRAINER))
        meta = next((n for n in names if n.endswith("PKG-INFO")), None)
        text = archive.extractfile(source).read().decode()  # type: ignore[union-attr]
        return text, archive.extractfile(meta).read().decode() if meta else ""  # type: ignore[union-attr]


def pins(metadata: str) -> dict[str, str]:
    """`Requires-Dist: name[extras]==X` (no marker, or the `vllm` extra) -> {name: X}."""
    out = {}
    pattern = r"^Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([0-9][^\s;,]*)\s*(?:;\s*(.*))?$"
    for name, version, marker in re.findall(pattern, metadata, re.M):
        if not marker or marker.replace("'", '"').strip() == 'extra == "vllm"':
            out[name.lower().replace("_", "-")] = version
    return out


def build(version: str, archive: Path) -> dict:
    source, metadata = read_archive(archive)
    pinned = pins(metadata)
    return {
        "version": version,
        "archive": archive.name,
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "ray_pin": pinned.get("ray"),
        "pins": pinned,
        "flags": extract_flags(source),
        "group_estimators": extract_group_estimators(source),
    }


def _rewrite(path: Path, pattern: str, replacement: str, count_at_least: int = 1) -> None:
    text = path.read_text()
    new, count = re.subn(pattern, replacement, text, flags=re.M)
    if count < count_at_least:
        raise SystemExit(f"{path.relative_to(ROOT)}: found no {pattern!r} to rewrite")
    path.write_text(new)


def make_default(version: str) -> None:
    """Point the launcher, the presets, the image and the scripts at `version`."""
    data = json.loads((OUT / f"{version}.json").read_text())
    pinned = {"openrlhf": version, **data.get("pins", {})}
    _rewrite(ROOT / "src/rlhf_launch/openrlhf/releases.py", r'^DEFAULT = "[^"]+"', f'DEFAULT = "{version}"')
    for preset in sorted((ROOT / "src/rlhf_launch/presets").glob("*.yaml")):
        _rewrite(preset, r'^(openrlhf:\n  version: )"[^"]+"', rf'\g<1>"{version}"')
    dockerfile = ROOT / "docker/Dockerfile"
    for package, arg in IMAGE_ARGS.items():
        if package in pinned:
            _rewrite(dockerfile, rf"^ARG {arg}=\S+", f"ARG {arg}={pinned[package]}")
    _rewrite(dockerfile, r"rlhf-launch:\d[\w.]*", f"rlhf-launch:{version}")
    _rewrite(dockerfile, r"openrlhf \d[\w.]*'s own", f"openrlhf {version}'s own")
    pyproject = ROOT / "pyproject.toml"
    _rewrite(pyproject, r'"openrlhf\[vllm\]==[^"]+"', f'"openrlhf[vllm]=={version}"')
    for package in ("deepspeed", "transformers", "flash-attn", "ray"):
        if package in pinned:
            extra = r"\[default\]" if package == "ray" else ""
            _rewrite(pyproject, rf'"{package}{extra}==[^"]+"', f'"{package}{"[default]" if extra else ""}=={pinned[package]}"')
    _rewrite(pyproject, r"openrlhf \d[\w.]*'s own", f"openrlhf {version}'s own")
    _rewrite(ROOT / "scripts/run-node.sh", r"rlhf-launch:\d[\w.]*", f"rlhf-launch:{version}")
    _rewrite(ROOT / "README.md", r"rlhf-launch:\d[\w.]*", f"rlhf-launch:{version}")
    print(f"default release is now {version}: releases.py, presets, pyproject.toml, Dockerfile, run-node.sh, README.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", help="versions to add or refresh; default: every shipped one")
    parser.add_argument("--default", action="store_true", help="make the (single) given version the default everywhere")
    parser.add_argument("--wheels", type=Path, help="directory with downloaded archives (also the download target)")
    args = parser.parse_args()
    if args.default and len(args.versions) != 1:
        parser.error("--default takes exactly one version")
    versions = args.versions or shipped_versions()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        dest = args.wheels or Path(tmp)
        dest.mkdir(parents=True, exist_ok=True)
        for version in versions:
            version_key(version)  # a release string, or ValueError
            data = build(version, download(version, dest))
            target = OUT / f"{version}.json"
            target.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
            print(f"{version}: {len(data['flags'])} flags, pins {data['pins']} -> {target.relative_to(ROOT)}")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_renames.py")], check=True)
    if args.default:
        make_default(versions[0])


if __name__ == "__main__":
    main()
