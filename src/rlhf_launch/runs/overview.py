"""`runs`: every recorded run with its status read live from Ray where the cluster answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster.auth import find_token
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.errors import ClusterError, RecordUnreadable
from rlhf_launch.runs import lifecycle, supervisor
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run

TIMEOUT = 3.0


@dataclass(frozen=True)
class Overview:
    rows: list[dict[str, Any]]
    unreadable: list[RecordUnreadable]

    def as_json(self) -> list[dict[str, Any]]:
        return self.rows + [{"record": bad.path, "unreadable": bad.reason} for bad in self.unreadable]


def _row(run: Run, live: bool) -> dict[str, Any]:
    attempt = run.current
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
        "watcher": supervisor.watcher_alive(run.run_id),
        "created": run.created,
    }


def overview(token_file: str | None = None) -> Overview:
    """Every record, refreshed from its cluster when that answers within a few seconds."""
    listing = runs.listing()
    token = find_token(token_file=token_file)
    clients: dict[str, Jobs | None] = {}
    rows = []
    for run in listing.runs:
        if run.address not in clients:
            try:
                clients[run.address] = Cluster(run.address, token, timeout=TIMEOUT).checked().jobs
            except ClusterError:
                clients[run.address] = None
        jobs = clients[run.address]
        live = jobs is not None
        if jobs is not None and not run.final:
            try:
                run = lifecycle.observe(run, jobs)
            except ClusterError:
                live = False
        rows.append(_row(run, live))
    return Overview(rows, listing.unreadable)
