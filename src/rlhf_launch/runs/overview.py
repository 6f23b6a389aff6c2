"""`runs`: every run this machine recorded or the cluster knows, with its status read live
from Ray where the cluster answers within a few seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster.auth import find_token
from rlhf_launch.cluster.connection import Cluster, address_from
from rlhf_launch.errors import ClusterError, RecordUnreadable
from rlhf_launch.runs import lifecycle, remote
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run

TIMEOUT = 3.0


@dataclass(frozen=True)
class Overview:
    rows: list[dict[str, Any]]
    unreadable: list[RecordUnreadable]

    def as_json(self) -> list[dict[str, Any]]:
        return self.rows + [{"record": bad.path, "unreadable": bad.reason} for bad in self.unreadable]


def row(run: Run, live: bool) -> dict[str, Any]:
    attempt = run.current
    progress = run.progress or {}
    return {
        "run_id": run.run_id,
        "status": run.status,
        "attempts": len(run.attempts),
        "job_id": attempt.job_id if attempt else None,
        "job_status": attempt.status if attempt else None,
        "openrlhf_version": run.openrlhf_version,
        "address": run.address,
        "live": live,
        "auto_resume": f"{run.auto_resumes_used}/{run.auto_resume}" if run.auto_resume else "",
        "supervisor": run.supervisor_job,
        "step": progress.get("step"),
        "total_steps": progress.get("total_steps") or run.total_steps,
        "steps_per_hour": progress.get("steps_per_hour"),
        "eta_seconds": progress.get("eta_seconds"),
        "reward": progress.get("reward"),
        "kl": progress.get("kl"),
        "diagnosis": run.diagnosis,
        "created": run.created,
    }


def overview(address: str | None = None, token_file: str | None = None) -> Overview:
    """Every record, and every run of the cluster at `address` (or the default address),
    refreshed from its cluster when that answers."""
    token = find_token(token_file=token_file)
    addresses = {r.address for r in runs.listing().runs if not r.final}
    addresses.add(address_from(address))
    reachable = set()
    for target in sorted(addresses):
        try:
            jobs = Cluster(target, token, timeout=TIMEOUT).checked().jobs
            on_cluster = {r.run_id for r in remote.cluster_runs(jobs)}
        except ClusterError:
            continue
        reachable.add(target)
        for run in runs.listing().runs:
            if run.address == target and not run.final and run.run_id not in on_cluster:
                try:
                    lifecycle.observe(run, jobs)  # its jobs are gone: the cluster restarted
                except ClusterError:
                    pass
    listing = runs.listing()
    return Overview([row(r, r.address in reachable) for r in listing.runs], listing.unreadable)
