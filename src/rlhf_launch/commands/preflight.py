"""Live checks before a submission (`submit`, `plan --cluster`): snapshot + placement
simulation, and optionally a real reservation of the placement groups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch import auth, preflight, snapshot
from rlhf_launch.dashboard import Dashboard
from rlhf_launch.findings import Finding, error
from rlhf_launch.launch import Launch
from rlhf_launch.versions import local_ray_version


@dataclass
class Live:
    snapshot: snapshot.Snapshot
    findings: list[Finding]
    reserve: Any = None  # reserve.ReserveResult

    def as_json(self) -> dict[str, Any]:
        out = {"cluster": self.snapshot.as_json(), "findings": [f.as_dict() for f in self.findings]}
        if self.reserve is not None:
            out["reserve_check"] = self.reserve.as_json()
        return out


def run(
    launch: Launch,
    address: str,
    token_file: str | None = None,
    *,
    reserve: bool = False,
    reserve_timeout: float = 60.0,
) -> Live:
    token = auth.find_token(token_file=token_file)
    snap = snapshot.read(Dashboard(address, token), memory=False)
    findings = preflight.check(launch.plan, snap, local_ray_version(), launch.flags.ray_pin)
    live = Live(snap, findings)
    # The reservation is the ground truth, so it runs whenever it was asked for and the
    # config itself is valid, also when the simulation above predicts a failure.
    if reserve and launch.ok:
        from rlhf_launch import reserve as reserve_check
        from rlhf_launch.jobs import Jobs

        result = reserve_check.check(Jobs(address, token), launch.plan, reserve_timeout)
        live.reserve = result
        if not result.ok:
            failure = reserve_check.describe_failure(result, reserve_timeout)
            live.findings.append(error("reserve_check", failure.message, failure.hint or ""))
        if result.leftover:
            live.findings.append(error("reserve_check", f"{result.leftover} placement group(s) were left reserved"))
    return live
