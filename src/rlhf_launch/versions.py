"""Versions of installed packages, read from their metadata (nothing is imported)."""

from __future__ import annotations

from importlib import metadata


def local_ray_version() -> str | None:
    try:
        return metadata.version("ray")
    except metadata.PackageNotFoundError:
        return None
