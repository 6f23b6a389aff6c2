"""What the cluster can tell about one attempt: the tail of its driver log, Ray's message and
exit code, its dead actors with their death causes and its pending placement groups; and
the diagnosis (diagnose/) made from them. Used by the supervisor and `diagnose`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rlhf_launch import diagnose
from rlhf_launch.cluster import snapshot, state
from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import JobInfo, Jobs
from rlhf_launch.core.nodes import DeadNode, dead_nodes, died_since
from rlhf_launch.errors import ClusterError, JobNotFound

TAIL_LINES = 20000  # the decisive lines are near the end; diagnose reads from the end anyway


@dataclass
class Evidence:
    job_id: str
    info: JobInfo | None = None
    log: str = ""
    dead_actors: list[dict[str, Any]] = field(default_factory=list)
    pending_groups: list[dict[str, Any]] = field(default_factory=list)
    dead_nodes: list[DeadNode] = field(default_factory=list)  # Ray's node table: died since the attempt started
    missing: str = ""  # what could not be read, and why

    def diagnosis(self) -> diagnose.Diagnosis:
        found = self._classified()
        if found.cls is diagnose.FailureClass.NODE_LOST and self.dead_nodes:
            found = replace(found, hint=name_lost_node(found.hint, self.dead_nodes))
        return found

    def _classified(self) -> diagnose.Diagnosis:
        info = self.info
        return diagnose.classify(
            self.log,
            job_message=info.message if info else self.missing,
            dead_actors=self.dead_actors,
            pending_groups=self.pending_groups,
            exit_code=info.driver_exit_code if info else None,
        )


LEADING_NODE = re.compile(r"^(?:a node|node (?P<id>[0-9a-f]{12})|node (?P<ip>[\d.]+)) ")


def name_lost_node(hint: str, dead: Sequence[DeadNode]) -> str:
    """The node_lost hint with the node Ray's node table names: the log said `a node`, or
    only its id (`node 2eea4cfb179c`), or only its IP; the table has both."""
    match = LEADING_NODE.match(hint)
    if not match or not dead:
        return hint
    node_id, ip = match.group("id"), match.group("ip")
    named = [n for n in dead if (node_id and n.node_id.startswith(node_id)) or (ip and n.ip == ip)] if node_id or ip else list(dead)
    if not named:
        return hint
    text = ", ".join(f"{n.ip} (node id {n.node_id[:12]})" for n in named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    return f"node{'s' if len(named) > 1 else ''} {text} " + hint[match.end() :]


def log_tail(jobs: Jobs, dashboard: Dashboard, info: JobInfo, lines: int = TAIL_LINES) -> str:
    """The end of a job's driver log: from the node it runs on when Ray says which, else the
    whole log from the job API."""
    if info.driver_node_id:
        try:
            return state.driver_log_tail(dashboard, info.job_id, info.driver_node_id, lines)
        except ClusterError:
            pass
    return jobs.logs(info.job_id)


def gather(jobs: Jobs, dashboard: Dashboard, job_id: str) -> Evidence:
    found = Evidence(job_id)
    try:
        found.info = jobs.info(job_id)
    except JobNotFound:
        found.missing = f"the cluster has no job {job_id} any more (restarted?): no log to read"
        return found
    try:
        found.log = log_tail(jobs, dashboard, found.info)
    except ClusterError as exc:
        found.missing = f"the log could not be read: {exc.message}"
    if found.info.driver_job_id:
        try:
            found.dead_actors = state.dead_actors(dashboard, found.info.driver_job_id)
            found.pending_groups = state.pending_groups(dashboard, found.info.driver_job_id)
        except ClusterError as exc:
            found.missing = found.missing or f"Ray's state API did not answer: {exc.message}"
    if dashboard is not None:
        try:
            found.dead_nodes = died_since(dead_nodes(snapshot.node_rows(dashboard)), found.info.start_time)
        except ClusterError:
            pass  # the log's own naming stands
    return found
