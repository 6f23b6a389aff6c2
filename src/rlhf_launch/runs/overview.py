"""`runs`: every run this machine recorded or the cluster knows, with its status read live
from Ray where the cluster answers within a few seconds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster.auth import Token, find_token, remembered_token_file
from rlhf_launch.cluster.connection import Cluster, address_from
from rlhf_launch.core import nodes
from rlhf_launch.errors import ClusterError, RecordUnreadable
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.progress import versus
from rlhf_launch.runs.record import Run
from rlhf_launch.runs.status import RunStatus

TIMEOUT = 3.0


@dataclass(frozen=True)
class Overview:
    rows: list[dict[str, Any]]
    unreadable: list[RecordUnreadable]
    unreachable: dict[str, str] = field(default_factory=dict)  # address asked -> why it did not answer

    def as_json(self) -> list[dict[str, Any]]:
        return self.rows + [{"record": bad.path, "unreadable": bad.reason} for bad in self.unreadable]


def revision_text(rev: dict[str, Any]) -> str:
    """`plan revision 1 (node lost, 12:03:41): node 10.0.0.4 (...) lost; vLLM 4x1 -> 2x1 on 6 GPUs; ...`"""
    from rlhf_launch.fit.replan import Revision

    try:
        return Revision(**{k: v for k, v in rev.items() if k in Revision.__dataclass_fields__}).text()
    except TypeError:  # a record from another launcher version
        return f"plan revision {rev.get('number', '?')}: {rev.get('summary', '?')}"


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
        # the trainer's timing/* beside the plan's estimate; whether the ETA is still the estimate's
        "timing": versus(progress.get("measured"), progress.get("estimated") or run.estimate),
        "eta_basis": progress.get("eta_basis"),
        "step": progress.get("step"),
        "total_steps": progress.get("total_steps") or run.total_steps,
        "steps_per_hour": progress.get("steps_per_hour"),
        # time left counts only while the trainer trains: a waiting run's last ETA is stale
        "eta_seconds": progress.get("eta_seconds") if run.status is RunStatus.RUNNING else None,
        "reward": progress.get("reward"),
        "kl": progress.get("kl"),
        "diagnosis": run.diagnosis,
        "revision": revision_text(run.revisions[-1]) if run.revisions else None,  # the layout's latest re-plan
        "created": run.created,
        **({"waiting": waiting_for(run)} if run.status is RunStatus.WAITING else {}),
    }


def waiting_for(run: Run) -> str:
    """What a WAITING run waits for, from its record (`_say_waiting` says more when the
    cluster shows it short of GPUs): its failed attempt to be proven gone and resumed."""
    attempt = run.current
    if attempt is None:
        return "waiting for its first attempt"
    cls = (attempt.diagnosis or run.diagnosis or {}).get("class")
    why = f"{attempt.status}" + (f" ({cls})" if cls else "")
    budget = f" {run.auto_resumes_used}/{run.auto_resume}" if run.auto_resume else ""
    return f"waiting to resume{budget}: attempt {attempt.number} {why}; the supervisor resubmits once it is gone and the GPUs are free"


def _token_for(target: str, known: list[Run], token_file: str | None) -> Token | None:
    """The token for the cluster at `target`: --token-file; else the one the newest run there
    was submitted with (how that cluster is reached now), unless the environment names one;
    else Ray's default place."""
    if token_file:
        return find_token(token_file=token_file)
    newest = max((r for r in known if r.address == target), key=lambda r: r.created, default=None)
    remembered = remembered_token_file(newest.token_file) if newest is not None and newest.token_file else None
    return find_token(token_file=remembered)


def overview(address: str | None = None, token_file: str | None = None) -> Overview:
    """Every record, and every run of the cluster at `address` (or the default address),
    refreshed from its cluster when that answers."""
    known = runs.summaries().runs
    addresses = {r.address for r in known if not r.final}
    addresses.add(address_from(address))
    reachable: dict[str, Cluster] = {}
    unreachable: dict[str, str] = {}
    for target in sorted(addresses):
        try:
            cluster = Cluster(target, _token_for(target, known, token_file), timeout=TIMEOUT).checked()
            from rlhf_launch.runs import lifecycle, remote  # only with a cluster that answers: they import diagnose/

            on_cluster = {r.run_id for r in remote.cluster_runs(cluster.jobs)}
        except ClusterError as exc:
            unreachable[target] = exc.message
            continue
        reachable[target] = cluster
        for run in runs.summaries().runs:
            if run.address == target and not run.final and run.run_id not in on_cluster:
                try:
                    lifecycle.observe(runs.load(run.run_id), cluster.jobs)  # its jobs are gone: the cluster restarted
                except ClusterError:
                    pass
    listing = runs.summaries()  # the records without their configs: all a row shows
    rows = [row(r, r.address in reachable) for r in listing.runs]
    for target, cluster in reachable.items():
        waiting = [(r, out) for r, out in zip(listing.runs, rows, strict=True) if r.address == target and r.status is RunStatus.WAITING]
        if waiting:
            _say_waiting(cluster, waiting)
    return Overview(rows, listing.unreadable, unreachable)


def _say_waiting(cluster: Cluster, waiting: list[tuple[Run, dict[str, Any]]]) -> None:
    """Each WAITING run short of GPUs: what it waits for and which nodes died since its
    attempt started (row["waiting"]). One state-API call per cluster; unknown: nothing said."""
    from rlhf_launch.cluster import snapshot

    try:
        rows = snapshot.node_rows(cluster.dashboard)
    except ClusterError:
        return
    have, dead = nodes.alive_gpus(rows), nodes.dead_nodes(rows)
    for run, out in waiting:
        if run.gpus_required > have:
            since = run.current.submitted if run.current else None
            out["waiting"] = nodes.waiting_text(run.gpus_required, have, nodes.died_since(dead, since))
            out["dead_nodes"] = [n.as_json() for n in nodes.died_since(dead, since)]
