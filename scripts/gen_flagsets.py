#!/usr/bin/env python3
"""Regenerate src/rlhf_launch/openrlhf/flagsets/*.json from OpenRLHF's published wheels.

For each version: `pip download openrlhf==X --no-deps`, open the wheel (or sdist), read
`openrlhf/cli/train_ppo_ray.py` with `ast` (rlhf_launch.openrlhf.extract) and write the
flag set as data, with the Ray version the release pins. Nothing from OpenRLHF is copied:
only flag names, types, actions, defaults, choices and nargs, and the advantage
estimators its startup check refuses with one sample per prompt.

    python scripts/gen_flagsets.py                 # every version in VERSIONS
    python scripts/gen_flagsets.py 0.11.3          # add or refresh one version
    python scripts/gen_flagsets.py --wheels DIR    # use wheels already downloaded to DIR
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

OUT = ROOT / "src" / "rlhf_launch" / "openrlhf" / "flagsets"
TRAINER = "openrlhf/cli/train_ppo_ray.py"

# Every release from 0.8.0 through 0.11.2 (pip index versions openrlhf).
VERSIONS = """
0.8.0 0.8.0.post1 0.8.1 0.8.1.post1 0.8.2 0.8.3 0.8.4 0.8.5 0.8.6 0.8.7 0.8.8 0.8.9 0.8.9.post1
0.8.10 0.8.11 0.9.0 0.9.1 0.9.1.post1 0.9.2 0.9.3 0.9.4 0.9.5 0.9.6 0.9.7 0.9.8 0.9.9 0.9.10
0.10.0 0.10.1 0.10.1.post1 0.10.1.post2 0.10.2 0.10.3 0.10.4 0.11.0 0.11.1 0.11.2
""".split()


def download(version: str, dest: Path) -> Path:
    found = sorted(dest.glob(f"openrlhf-{version}-*.whl")) + sorted(dest.glob(f"openrlhf-{version}.tar.gz"))
    if found:
        return found[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"openrlhf=={version}", "--no-deps", "-q", "-d", str(dest)],
        check=True,
    )
    found = sorted(dest.glob(f"openrlhf-{version}-*.whl")) + sorted(dest.glob(f"openrlhf-{version}.tar.gz"))
    if not found:
        raise SystemExit(f"pip download gave no openrlhf {version} archive in {dest}")
    return found[0]


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
        text = archive.extractfile(source).read().decode()
        return text, archive.extractfile(meta).read().decode() if meta else ""


def ray_pin(metadata: str) -> str | None:
    match = re.search(r"^Requires-Dist: ray(?:\[[^\]]*\])?\s*==\s*([0-9][^\s;,]*)", metadata, re.M)
    return match.group(1) if match else None


def build(version: str, archive: Path) -> dict:
    source, metadata = read_archive(archive)
    return {
        "version": version,
        "archive": archive.name,
        "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(),
        "ray_pin": ray_pin(metadata),
        "flags": extract_flags(source),
        "group_estimators": extract_group_estimators(source),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", help="versions to (re)generate; default: all known")
    parser.add_argument("--wheels", type=Path, help="directory with downloaded archives (also the download target)")
    args = parser.parse_args()
    versions = args.versions or VERSIONS
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        dest = args.wheels or Path(tmp)
        dest.mkdir(parents=True, exist_ok=True)
        for version in versions:
            data = build(version, download(version, dest))
            target = OUT / f"{version}.json"
            target.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
            print(f"{version}: {len(data['flags'])} flags, ray {data['ray_pin']} -> {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
