"""Live checks before a submission (`submit`, `plan --cluster`): a snapshot of the cluster,
the placement simulation on what is free now, and, when asked, the reserve check."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster import preflight, snapshot
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.reserve import ReserveResult
from rlhf_launch.core.findings import Finding, error
from rlhf_launch.core.launch import Launch


@dataclass
class Live:
    snapshot: snapshot.Snapshot
    findings: list[Finding]
    reserve: ReserveResult | None = None

    @property
    def ok(self) -> bool:
        return not any(f.level == "error" for f in self.findings)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": self.snapshot.as_json(), "findings": [f.as_dict() for f in self.findings]}
        if self.reserve is not None:
            out["reserve_check"] = self.reserve.as_json()
        return out


FRACTION_RETRIES = 5


def check(launch: Launch, cluster: Cluster, *, reserve: bool = False, reserve_timeout: float = 60.0) -> Live:
    snap = snapshot.read(cluster.dashboard, memory=False)
    findings = preflight.check(launch.plan, snap, preflight.local_ray_version(), launch.flags.ray_pin)
    for _ in range(FRACTION_RETRIES):  # a fraction of a CPU held is a task or job of a moment (Ray's own, a probe): look again
        placement_refused = any(f.level == "error" and f.key.startswith("placement") for f in findings)
        if not placement_refused or all(float(n.cpus_free).is_integer() for n in snap.nodes):
            break
        time.sleep(1.0)
        snap = snapshot.read(cluster.dashboard, memory=False)
        findings = preflight.check(launch.plan, snap, preflight.local_ray_version(), launch.flags.ray_pin)
    live = Live(snap, findings)
    # The reservation is the ground truth, so it runs whenever it was asked for and the
    # config itself is valid, also when the simulation above predicts a failure.
    if reserve and launch.ok:
        from rlhf_launch.cluster import reserve as reserve_check

        result = reserve_check.check(cluster.jobs, launch.plan, reserve_timeout)
        live.reserve = result
        if not result.ok:
            failure = reserve_check.describe_failure(result, reserve_timeout)
            live.findings.append(error("reserve_check", failure.message, failure.hint or ""))
        if result.leftover:
            live.findings.append(error("reserve_check", f"{result.leftover} placement group(s) were left reserved"))
    return live
