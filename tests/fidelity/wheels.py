"""Download a published OpenRLHF wheel (cached, never vendored) and unpack its `openrlhf/` package."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Every OpenRLHF release from 0.8.0 on is published as a CPython 3.11 manylinux1 wheel only; asking
# for exactly that wheel lets the harness run from any interpreter or platform.
_WHEEL_TARGET = [
    "--only-binary=:all:",
    "--platform",
    "manylinux1_x86_64",
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
]


class WheelError(RuntimeError):
    """The wheel could not be downloaded or does not hold an `openrlhf/` package."""


def cache_dir() -> Path:
    return Path(os.environ.get("RLHF_LAUNCH_CACHE") or Path.home() / ".cache" / "rlhf-launch")


def _wheel(version: str, wheels: Path) -> Path:
    pattern = f"openrlhf-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if found:
        return found[0]
    with tempfile.TemporaryDirectory(dir=wheels) as tmp:  # a racing process never sees half a wheel
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"openrlhf=={version}",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "-q",
            "-d",
            tmp,
            *_WHEEL_TARGET,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        got = sorted(Path(tmp).glob(pattern))
        if done.returncode != 0 or not got:
            raise WheelError(f"could not download openrlhf=={version} ({' '.join(cmd)}):\n{done.stderr.strip()}")
        os.replace(got[0], wheels / got[0].name)
        return wheels / got[0].name


def _package_prefix(names: list[str]) -> str:
    """Where `openrlhf/cli/train_ppo_ray.py` lies in the archive: at its root or under `*.data/purelib/`."""
    for name in names:
        if name.endswith("openrlhf/cli/train_ppo_ray.py"):
            return name[: -len("openrlhf/cli/train_ppo_ray.py")]
    raise WheelError("the wheel holds no openrlhf/cli/train_ppo_ray.py")


def _complete(root: Path) -> bool:
    return (root / "METADATA").is_file() and (root / "openrlhf" / "cli" / "train_ppo_ray.py").is_file()


def pins(root: Path) -> dict[str, str]:
    """The versions the release pins in its requirements (`vllm==0.29.0` gives {"vllm": "0.29.0"})."""
    found: dict[str, str] = {}
    for line in (root / "METADATA").read_text().splitlines():
        match = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*\(?(==|>=)\s*([^;,)\s]+)", line)
        if match and match[1].lower().replace("-", "_") not in found:
            found[match[1].lower().replace("-", "_")] = match[3]
    return found


def trainer_root(version: str) -> Path:
    """The directory holding the `openrlhf/` package of release `version` (downloaded once, then cached)."""
    root = cache_dir() / f"openrlhf-{version}"
    if _complete(root):
        return root
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = _wheel(version, wheels)
    tmp = Path(tempfile.mkdtemp(prefix=f".openrlhf-{version}-", dir=cache_dir()))
    try:
        with zipfile.ZipFile(wheel) as archive:
            prefix = _package_prefix(archive.namelist())
            for name in archive.namelist():
                if name.startswith(prefix + "openrlhf/") and not name.endswith("/"):
                    target = tmp / name[len(prefix) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(archive.read(name))
                elif name.endswith(".dist-info/METADATA"):
                    (tmp / "METADATA").write_bytes(archive.read(name))
        if root.exists() and not _complete(root):
            shutil.rmtree(root, ignore_errors=True)  # left by an older layout of this cache
        try:
            tmp.rename(root)  # atomic; loses harmlessly to a process that got there first
        except OSError:
            if not _complete(root):
                raise
    except (zipfile.BadZipFile, OSError) as exc:
        raise WheelError(f"could not unpack {wheel}: {exc}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root
