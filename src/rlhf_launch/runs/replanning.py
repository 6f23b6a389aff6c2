"""Re-planning a run's layout (the supervisor after a lost node, `resume --fit` by hand):
the launch a config gives as the run renders it, what its checkpoint pins, the conversion to a
universal checkpoint on the cluster, and making a new layout the run's own."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.core.config import apply_overrides
from rlhf_launch.core.launch import Launch
from rlhf_launch.errors import ClusterError
from rlhf_launch.fit.replan import CheckpointFacts
from rlhf_launch.runs.record import Run

__all__ = ["apply_overrides"]

PROGRESS = "RLHF_LAUNCH_CONVERT"  # cluster/probes/universal.py's progress lines

CONVERT_WAIT = 7200.0  # seconds a checkpoint conversion may take (IO-bound: a 70B actor with Adam writes ~0.84 TB)


def supervise_key(run: Run, key: str, default: Any) -> Any:
    section = (run.config.get("supervise") or {}) if isinstance(run.config, dict) else {}
    value = section.get(key)
    return default if value is None else value


def node_wait(run: Run) -> float:
    """supervise.node_wait of the run (a record from before the key: never re-plan)."""
    return float(supervise_key(run, "node_wait", 0.0))


def convert_wait(run: Run) -> float:
    return float(supervise_key(run, "convert_wait", CONVERT_WAIT))


def tag_step(tag: str) -> int | None:
    """global_step10 -> 10 (None: not a step tag)."""
    from rlhf_launch.runs.checkpoints import _step

    return _step(tag)


def replanned_launch(run: Run, config: dict[str, Any]) -> Launch:
    """The run's launch for `config`, rendered as its argv was: W&B on when it was (the key
    itself is in the attempts' runtime_env, not here)."""
    from rlhf_launch.core.config import validate
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.openrlhf import dialect

    environ = {"WANDB_API_KEY": "x"} if dialect.WANDB_PLACEHOLDER in run.argv else {}
    return prepare(validate(config, source=f"run {run.run_id}"), version=run.openrlhf_version, environ=environ)


def checkpoint_facts(run: Run, launch: Launch) -> CheckpointFacts:
    """What the run's checkpoint pins: the DP sizes of the layout its last attempt trained
    with, unless that attempt loads a universal checkpoint (which loads at any DP size)."""
    from rlhf_launch.fit import replan as fit

    if launch.cfg.checkpoint.universal:
        return fit.CheckpointFacts(None, None)
    return fit.facts_of(launch, (run.progress or {}).get("step"))


def settle_universal(run: Run, latest: Callable[[Run], int | None], say: Callable[[str], None]) -> Run:
    """A re-plan that converted the checkpoint turned on the universal load; once the run has
    saved a newer step (at its new DP size) that load would go back to the converted one
    (DeepSpeed reads `latest_universal`), so it is turned off again. The supervisor and a
    `resume` by hand both settle it before they build the next attempt."""
    from rlhf_launch.runs import record as runs

    converted = next((r for r in reversed(run.revisions) if r.get("convert")), None)
    if converted is None or not (run.config.get("checkpoint") or {}).get("universal"):
        return run
    try:
        newest = latest(run)
    except ClusterError as exc:
        say(f"could not list {run.ckpt_path} ({exc.message}): loading the converted checkpoint")
        return run
    since = converted.get("from_step")
    if newest is None or since is None or newest <= since:
        return run
    data = json.loads(json.dumps(run.config))
    data.setdefault("checkpoint", {})["universal"] = False
    new = replanned_launch(run, data)
    say(f"the run saved step {newest} since its checkpoint of step {since} was converted: loading it as saved (no universal load)")
    return runs.update(run.run_id, lambda record: adopt_layout(record, new))


def adopt_layout(record: Run, launch: Launch) -> None:
    """Make `launch` the run's layout: its config, argv (without the load flag), GPUs."""
    from rlhf_launch.runs import lifecycle as life

    record.config = life.config_dict(launch.cfg)
    record.argv = list(launch.argv)
    record.gpus_required = launch.plan.gpus_required
    record.nodes = launch.plan.cluster_nodes


def convert_by_probe(jobs: Jobs, run: Run, roles: list[str], bound: float) -> dict[str, Any]:
    """cluster/probes/universal.py as a Ray job: the conversion runs as a task on a node
    that mounts ckpt_path; its progress lines come back with the result."""
    from rlhf_launch.cluster import probe

    argument = json.dumps({"path": run.ckpt_path, "roles": roles, "deadline": bound})
    ran = probe.run(jobs, "universal.py", argument, bound + 120, "convert")
    result: dict[str, Any] = dict(ran.result) if isinstance(ran.result, dict) else {}
    result["progress"] = [line.split(PROGRESS + " ", 1)[1] for line in ran.logs.splitlines() if PROGRESS + " " in line]
    if not ran.result:
        why = "it timed out" if ran.timed_out else f"it ended {ran.status}"
        result.setdefault("errors", []).append(f"the conversion job {ran.job_id} gave no result ({why})")
    return result


Converter = Callable[[Run, list[str], float], dict[str, Any]]  # run, roles, seconds -> the probe's result


def convert(run: Run, roles: list[str], converter: Converter, say: Callable[[str], None]) -> int | None | str:
    """Make the latest checkpoint of `roles` universal, saying how it goes. -> the step it
    holds (None: unknown), or why it was not converted."""
    bound = convert_wait(run)
    say(f"converting the latest checkpoint of {', '.join(roles)} in {run.ckpt_path} to a universal one (up to {bound:g}s)")
    started = time.monotonic()
    try:
        result = converter(run, roles, bound)
    except ClusterError as exc:
        return f"the checkpoint conversion did not complete ({exc.message})"
    for line in result.get("progress", []):
        say(f"conversion: {line}")
    if result.get("errors"):
        return "the checkpoint conversion failed: " + "; ".join(result["errors"])
    done = result.get("roles") or {}
    if set(done) != set(roles):
        return f"the checkpoint conversion converted {sorted(done)} of {roles}"
    say(
        f"converted in {time.monotonic() - started:.1f}s on {result.get('node') or 'the cluster'}: "
        + ", ".join(f"_{role}/{info['tag']} -> {info['universal']}" for role, info in done.items())
    )
    steps = {tag_step(str(info.get("tag"))) for info in done.values()}
    return steps.pop() if len(steps) == 1 else None


def adopt_revisions(run: Run, meta: dict[str, str]) -> bool:
    """A trainer job submitted after a re-plan (by the supervisor, on the cluster) carries the
    run's record as it was then: take its layout and plan revisions when it knows more of
    them than `run`. -> whether `run` changed."""
    from rlhf_launch.runs import jobmeta

    raw = meta.get("rlhf_launch_record")
    if not raw or '"revisions"' not in raw:
        return False
    theirs = jobmeta.run_from_metadata(meta, run.address)
    if theirs is None or len(theirs.revisions) <= len(run.revisions):
        return False
    run.config, run.argv, run.gpus_required, run.nodes = theirs.config, theirs.argv, theirs.gpus_required, theirs.nodes
    run.revisions = list(theirs.revisions)
    return True


SUPERSEDING = ("placement-retry", "grow")  # the supervisor stopped the attempt before, uncounted


def mark_superseded(run: Run) -> None:
    """An attempt the supervisor submitted as a placement retry or to grow back follows one
    it stopped itself (superseded, not a failure of the run): on a machine that saw that one
    only end in Ray (STOPPED or FAILED), say so."""
    from rlhf_launch.runs.status import AttemptStatus

    for before, after in zip(run.attempts, run.attempts[1:], strict=False):
        if after.reason in SUPERSEDING and before.status.is_terminal() and before.status is not AttemptStatus.SUCCEEDED:
            before.status = AttemptStatus.SUPERSEDED
