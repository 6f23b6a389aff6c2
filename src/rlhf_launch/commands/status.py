"""`rlhf-launch status`: nodes, GPUs, versions and running jobs of the live cluster."""

from __future__ import annotations

from typing import Any

from rlhf_launch import auth, dashboard, snapshot
from rlhf_launch.versions import local_ray_version


def connect(address: str, token_file: str | None = None, timeout: float = dashboard.DEFAULT_TIMEOUT) -> dashboard.Dashboard:
    return dashboard.Dashboard(address, auth.find_token(token_file=token_file), timeout=timeout)


def run(address: str, token_file: str | None = None) -> dict[str, Any]:
    snap = snapshot.read(connect(address, token_file))
    out = snap.as_json()
    out["local_ray_version"] = local_ray_version()
    out["ray_version_match"] = out["local_ray_version"] == snap.ray_version
    return out
