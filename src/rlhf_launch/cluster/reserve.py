"""`--reserve-check`: prove the plan's placement groups can be reserved on the live cluster.

Submits probes/reserve.py as a Ray job that creates the groups in OpenRLHF's order, waits
up to a timeout, and removes them. The launcher waits for the job (with its own deadline),
stops it on Ctrl-C or overrun, and then checks that no group of that job is left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster import probe, state
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.core.plan import Plan
from rlhf_launch.errors import UserError
from rlhf_launch.util.poll import poll_until

STARTUP_GRACE = 90.0


@dataclass
class ReserveResult:
    ok: bool
    groups: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    leftover: int = 0
    job_id: str = ""
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "groups": self.groups,
            "seconds": round(self.seconds, 2),
            "leftover_placement_groups": self.leftover,
            "job_id": self.job_id,
            "error": self.error,
        }


def leftover_groups(jobs: Jobs, driver_job_id: str | None) -> int:
    """Placement groups the probe's job created that are still held (not REMOVED)."""
    return len(state.held_by(jobs.dashboard, driver_job_id).groups) if driver_job_id else 0


def check(jobs: Jobs, plan: Plan, timeout: float) -> ReserveResult:
    spec = {
        "groups": [{"name": g.name, "bundles": g.bundles, "packed": g.packed} for g in plan.groups],
        "timeout": timeout,
    }
    ran = probe.run(jobs, "reserve.py", json.dumps(spec), timeout + STARTUP_GRACE, "reserve")
    result = ReserveResult(ok=False, job_id=ran.job_id, seconds=ran.seconds)
    if ran.result is None:
        overran = f"did not finish within {timeout + STARTUP_GRACE:g}s" if ran.timed_out else f"ended {ran.status}"
        result.error = f"the reserve-check job {overran} without a result"
    else:
        result.ok = bool(ran.result["ok"])
        result.groups = ran.result["groups"]
    result.leftover = _wait_released(jobs, ran.driver_job_id)
    return result


def _wait_released(jobs: Jobs, driver_job_id: str | None, seconds: float = 15.0) -> int:
    """Placement groups of the probe still held once they are all gone or `seconds` passed."""
    if poll_until(lambda: leftover_groups(jobs, driver_job_id) == 0, seconds):
        return 0
    return leftover_groups(jobs, driver_job_id)


def describe_failure(result: ReserveResult, timeout: float) -> UserError:
    stuck = next((g for g in result.groups if not g["ready"]), None)
    if stuck:
        return UserError(
            f"reserve check: the placement group for {stuck['name']} ({stuck['bundles']} x 1 GPU + 1 CPU) was not "
            f"ready within {timeout:g}s: the trainer would wait forever there",
            hint="free GPUs (rlhf-launch runs / ray job list) or shrink the layout",
        )
    return UserError(f"reserve check failed: {result.error or 'no result'}")
