"""`resume RUN --fit`: re-plan a stopped or failed run onto the live cluster by hand, the way
the supervisor does after a lost node (fit/replan.py), then resume it on the new layout."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster import snapshot
from rlhf_launch.cluster.connection import Cluster
from rlhf_launch.core.launch import Launch
from rlhf_launch.core.placement import NodeFree
from rlhf_launch.errors import UserError
from rlhf_launch.fit import replan as fit
from rlhf_launch.runs import lifecycle, replanning
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run


@dataclass
class Refit:
    run: Run
    plan: fit.Replan | fit.Refusal
    revision: fit.Revision | None
    live: list[NodeFree]
    launch: Launch | None = None  # the new layout's launch (None: refused)

    @property
    def ok(self) -> bool:
        return self.revision is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run.run_id,
            "old": {"layout": self.plan.old.plan.breakdown(), "gpus": self.plan.old.plan.gpus_required}
            if isinstance(self.plan, fit.Replan)
            else None,
            "new": {"layout": self.launch.plan.breakdown(), "gpus": self.launch.plan.gpus_required} if self.launch else None,
            "revision": self.revision.as_json() if self.revision else None,
            "refused": self.plan.reason if isinstance(self.plan, fit.Refusal) else None,
            "live_gpus": sum(n.gpus for n in self.live),
        }


def pick_nodes(live: list[NodeFree], nodes: int | None) -> list[NodeFree]:
    """The live nodes to plan on: all, or `nodes` of those with GPUs (the most free first;
    nodes without GPUs stay, they hold no bundle)."""
    if nodes is None:
        return live
    with_gpus = sorted((n for n in live if n.gpus >= 1), key=lambda n: -n.gpus)
    if len(with_gpus) < nodes:
        raise UserError(
            f"--nodes {nodes}: the cluster has {len(with_gpus)} alive node(s) with free GPUs",
            hint="rlhf-launch status shows the nodes; use fewer, or leave --nodes out",
        )
    chosen = {n.node_id for n in with_gpus[:nodes]}
    return [n for n in live if n.node_id in chosen or n.gpus < 1]


def plan(record: Run, cluster: Cluster, nodes: int | None = None) -> Refit:
    """What `resume --fit` would do: the run's new layout on the live cluster, or why none."""
    jobs = cluster.checked().jobs
    record = lifecycle.observe(record, jobs)
    current = record.current
    if current is not None and current.status.is_live():
        raise UserError(
            f"run {record.run_id} is still running (attempt {current.number}, {current.job_id}: {current.status})",
            hint=f"rlhf-launch stop {record.run_id} first",
        )
    live = pick_nodes(snapshot.read(cluster.dashboard, memory=False).free_nodes(), nodes)
    launch = replanning.replanned_launch(record, record.config)
    replanned = fit.replan(launch.cfg, live, replanning.checkpoint_facts(record, launch), version=record.openrlhf_version)
    if isinstance(replanned, fit.Refusal):
        return Refit(record, replanned, None, live)
    new = replanning.replanned_launch(record, replanning.apply_overrides(record.config, list(replanned.overrides)))
    step = (record.progress or {}).get("step")
    rev = fit.revision(replanned, len(record.revisions) + 1, reason="by hand", at=time.time(), from_step=step)
    return Refit(record, replanned, rev, live, new)


def adopt(refit: Refit, jobs: Any, say: Callable[[str], None], converter: replanning.Converter | None = None) -> Run:
    """Convert the checkpoint when the DP size changes, then make the new layout the run's
    (a plan revision on its record). UserError when the conversion fails."""
    assert isinstance(refit.plan, fit.Replan) and refit.revision is not None and refit.launch is not None
    run, rev, new = refit.run, refit.revision, refit.launch
    if refit.plan.convert:
        convert = converter or (lambda r, roles, bound: replanning.convert_by_probe(jobs, r, roles, bound))
        converted = replanning.convert(run, list(refit.plan.convert), convert, say)
        if isinstance(converted, str):
            raise UserError(
                f"not resumed: {converted}", hint="the original checkpoint is untouched; resume without --fit once the nodes are back"
            )
        if converted is not None:
            rev = fit.Revision(**{**rev.as_json(), "from_step": converted})
    shown = rev.as_json()

    def change(record: Run) -> None:
        before = record.config
        replanning.adopt_layout(record, new)
        record.revisions.append({**shown, "from_config": before})

    return runs.update(run.run_id, change)


def undo(before: Run) -> Run:
    """Back to the layout before `adopt` (the resume did not submit)."""

    def change(record: Run) -> None:
        record.config, record.argv, record.gpus_required, record.nodes = before.config, before.argv, before.gpus_required, before.nodes
        record.revisions = list(before.revisions)

    return runs.update(before.run_id, change)


def text(refit: Refit) -> str:
    old = refit.plan.old.plan if isinstance(refit.plan, fit.Replan) else None
    gpus = sum(n.gpus for n in refit.live)
    lines = [f"live cluster: {sum(1 for n in refit.live if n.gpus >= 1)} node(s) with {gpus:g} free GPUs"]
    if isinstance(refit.plan, fit.Refusal):
        lines.append(f"no layout to resume {refit.run.run_id} on: {refit.plan.reason}")
        return "\n".join(lines)
    assert refit.launch is not None and refit.revision is not None and old is not None
    lines.append(f"layout now:  {old.breakdown()} ({old.gpus_required} GPUs)")
    lines.append(f"re-planned:  {refit.launch.plan.breakdown()} ({refit.launch.plan.gpus_required} GPUs)")
    lines.append(f"  {refit.revision.summary}")
    if refit.plan.convert:
        lines.append(
            f"  the DP size of {', '.join(refit.plan.convert)} changes: the latest checkpoint is converted to a universal one "
            "first (new <tag>_uni folders beside the original) and loaded with the universal-load flag"
        )
    return "\n".join(lines)
