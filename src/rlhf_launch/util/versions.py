"""Version strings, parsed one way everywhere: `packaging.version` (PEP 440).

`parse` reads any version (ValueError if it is none), `maybe` the same or None, `release`
only a published release as OpenRLHF tags them (`0.9.1`, `0.9.1.post1`: no pre, dev or local
part), `base` the release part alone (`0.10.1rc1+cu128` -> 0.10.1).
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

__all__ = ["Version", "base", "maybe", "parse", "release"]


def parse(text: str) -> Version:
    """Any PEP 440 version; ValueError (packaging's InvalidVersion) otherwise."""
    return Version(text)


def maybe(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def release(text: str) -> Version:
    """A published release (post releases after the base); ValueError for anything else."""
    try:
        version = Version(text)
    except InvalidVersion:
        raise ValueError(f"not a release version: {text!r}") from None
    if version.is_prerelease or version.is_devrelease or version.local or version.epoch or str(version) != text:
        raise ValueError(f"not a release version: {text!r}")
    return version


def base(text: str) -> Version:
    """The release part of a version (`0.10.1.post1+cu128` -> 0.10.1); ValueError if there is none."""
    return Version(parse(text).base_version)
