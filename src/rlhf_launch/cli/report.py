"""Text for people: the plan table, findings and the command. Pure string building."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rlhf_launch.core import picture
from rlhf_launch.core.findings import Finding
from rlhf_launch.util.text import plain

if TYPE_CHECKING:  # only for annotations: `plan` must not import the runs edge
    from rlhf_launch.cluster.live import Live
    from rlhf_launch.cluster.node import LocalNode, StopSummary
    from rlhf_launch.core.estimate import StepEstimate
    from rlhf_launch.core.launch import Launch
    from rlhf_launch.core.memory import MemoryReport
    from rlhf_launch.openrlhf.flagset import FlagSet
    from rlhf_launch.runs.overview import Overview
    from rlhf_launch.runs.record import Run
    from rlhf_launch.runs.resume import Resumed
    from rlhf_launch.runs.stop import Stopped
    from rlhf_launch.runs.submit import Submitted


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def findings_text(findings: list[Finding]) -> list[str]:
    if not findings:
        return ["findings: none"]
    lines = ["findings:"]
    for f in sorted(findings, key=lambda f: f.level != "error"):
        lines.append(f"  {f.level:<7}  {f.key}: {f.message}")
        if f.hint:
            lines.append(f"  {'':<7}  hint: {f.hint}")
    return lines


def pretty_command(launch: Launch) -> str:
    """The `ray job submit` line broken before each flag: still one valid shell command."""
    head, _, _ = launch.command.partition(" -- ")
    lines = [head + " \\", f"    -- {shlex.join(shlex.split(launch.spec.entrypoint)[:3])} \\"]
    argv, pending = launch.argv, list[str]()
    for token in argv:
        if token.startswith("--") and pending:
            lines.append("    " + shlex.join(pending) + " \\")
            pending = []
        pending.append(token)
    if pending:
        lines.append("    " + shlex.join(pending))
    else:
        lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines)


def memory_text(memory: MemoryReport) -> list[str]:
    """Per-role GPU GiB by part, the peak of what shares those GPUs, and host GiB per node."""
    lines = [f"memory per GPU (GiB, of {memory.gpu_limit:g}):"]
    rows = [["role", "parts", "own", "peak", "headroom"]]
    for r in memory.roles:
        group = memory.group_of(r.role)
        peak = group.peak if group else r.gpu
        shared = f" ({'+'.join(group.roles)}, {group.peak_phase})" if group and len(group.roles) > 1 else ""
        parts = " ".join(f"{k} {v:.1f}" for k, v in r.parts.items())
        head = 1 - peak / memory.gpu_limit
        rows.append([r.role, parts, f"{r.gpu:.1f}", f"{peak:.1f}{shared}", f"{head:.0%}"])
    lines += _table(rows)
    for r in memory.roles:
        for note in r.notes:
            lines.append(f"  {r.role}: {note}")
    lines += phases_text(memory)
    if memory.host_per_node:
        busiest = max(memory.host_per_node.values())
        limit = f" of {memory.host_limit:g}" if memory.host_limit else " (cluster.host_memory_gb not set)"
        per_node = ", ".join(f"{v:.0f}" for v in memory.host_per_node.values())
        lines.append(f"  host RAM per node (GiB): {per_node}; busiest {busiest:.0f}{limit}")
    return lines


def estimate_text(est: StepEstimate) -> list[str]:
    """Seconds per step by phase, the run's steps, hours and GPU-hours, the band and what it assumed."""
    phases = est.phases_s
    how = "max(generate, make_experience + train) + weight_sync" if est.overlapped else "phases one after another"
    lines = [f"estimate per step on {est.gpu} ({how}):"]
    rows = [["phase", "s/step", "share"]]
    rows += [[name.replace("_", " "), f"{seconds:.0f}", f"{seconds / est.step_s:.0%}"] for name, seconds in phases.items()]
    rows.append(["step", f"{est.step_s:.0f}", f"{est.band[0] * est.step_s:.0f}-{est.band[1] * est.step_s:.0f} s"])
    lines += _table(rows)
    if est.steps is not None and est.run_h is not None and est.gpu_hours is not None:
        lines.append(
            f"  run: {est.steps} steps, {est.run_h:.1f} h ({est.low_h:.1f}-{est.high_h:.1f} h), "
            f"{est.gpu_hours:.0f} GPU-hours on {est.gpus} GPUs"
        )
    else:
        per = 100 * est.step_s / 3600
        lines.append(
            f"  run: steps unknown (set data.max_samples); per 100 steps {per:.1f} h, {per * est.gpus:.0f} GPU-hours on {est.gpus} GPUs"
        )
    lines += [f"  limits: {'; '.join(est.limits)}"] + [f"  assumes: {a}" for a in est.assumptions]
    return lines


def phases_text(memory: MemoryReport, top: int = 4) -> list[str]:
    """Each role group's peak per phase (GiB per GPU), its margin and headroom, and the largest
    parts it is made of."""
    lines = ["  per phase (GiB per GPU: estimate, margin, headroom; largest parts):"]
    limit = memory.gpu_limit
    for g in memory.groups:
        label = "+".join(g.roles)
        lines.append(f"  {label}:" if g.name == label else f"  {label} ({g.name}):")
        rows = []
        for phase, total in g.phases.items():
            low, high = g.ranges.get(phase, (total, total))
            made = sorted(g.made_of.get(phase, {}).items(), key=lambda kv: -kv[1])[:top]
            mark = " <- peak" if phase == max(g.phases, key=lambda name: g.phases[name]) else ""
            rows.append(
                [
                    f"  {phase}",
                    f"{total:.1f}",
                    f"{low:.1f}-{high:.1f}",
                    f"{limit - total:+.1f}",
                    ", ".join(f"{k} {v:.1f}" for k, v in made) + mark,
                ]
            )
        lines += _table(rows, indent="    ")
    return lines


def plan_text(launch: Launch) -> str:
    plan, cfg = launch.plan, launch.cfg
    lines = [f"plan {cfg.name}: {launch.flags.label} ({'dotted' if launch.flags.dotted else 'flat'} flags)", ""]
    rows = [["role", "nodes x GPUs", "GPUs", "placement group"]]
    for role in plan.roles:
        if role.enabled:
            rows.append([role.role, f"{role.nodes} x {role.gpus_per_node}", str(role.gpus), role.group])
        else:
            rows.append([role.role, "-", "0", role.reason])
    if plan.vllm_engines:
        rows.append(
            [
                "vllm",
                f"{plan.vllm_engines} engines x TP {plan.vllm_tp}",
                str(plan.vllm_gpus),
                next(g.name for g in plan.groups if "vllm" in g.roles),
            ]
        )
    lines += _table(rows)
    colocate = ", ".join(cfg.placement.colocate) or "none"
    status = "fits" if plan.gpus_required <= plan.cluster_gpus else "DOES NOT FIT"
    lines += [
        "",
        f"  GPUs needed: {plan.gpus_required} = {plan.breakdown()}",
        f"  cluster:     {plan.cluster_gpus} = {plan.cluster_nodes} node{'s' if plan.cluster_nodes != 1 else ''} x "
        f"{plan.cluster_gpus_per_node} GPUs ({status})",
        f"  colocation:  {colocate}",
        "",
    ]
    lines += picture.draw(plan) + [""]
    if launch.memory is not None and launch.memory.roles:
        lines += memory_text(launch.memory) + [""]
    if launch.estimate is not None:
        lines += estimate_text(launch.estimate) + [""]
    if launch.storage is not None:
        lines += launch.storage.lines() + [""]
    lines += findings_text(launch.findings)
    lines += ["", "command:" if launch.ok else "command (not runnable until the errors above are fixed):"]
    lines += ["  " + line for line in pretty_command(launch).splitlines()]
    return "\n".join(lines)


def live_text(live: Live) -> str:
    snap = live.snapshot
    lines = [f"live cluster {snap.address}: {len(snap.nodes)} nodes, {snap.gpus_free:g}/{snap.gpus:g} GPUs free, ray {snap.ray_version}"]
    if live.reserve is not None:
        r = live.reserve
        state = "reserved and released" if r.ok else "NOT reservable"
        lines.append(f"  reserve check: {state} in {r.seconds:.1f}s ({len(r.groups)} groups, {r.leftover} left reserved)")
    lines += findings_text(live.findings)
    return "\n".join(lines)


def up_text(info: dict[str, Any]) -> str:
    lines = [f"Ray head started: {info['head_ip']}:{info['port']}  (ray {info['ray_version']}, {info['gpus']:g} GPUs)"]
    lines.append(f"  dashboard and job API: {info['dashboard']} (bound to {info['dashboard_host']})")
    if info["dashboard_host"] in ("127.0.0.1", "localhost", "::1"):
        lines.append(
            f"    from your machine: ssh -L {info['dashboard'].rsplit(':', 1)[1]}:127.0.0.1:{info['dashboard'].rsplit(':', 1)[1]} <head>"
        )
    if info["auth"]:
        made = "created" if info["token_created"] else "existing"
        lines.append(f"  auth: Ray token auth on; token ({made}, mode 0600): {info['token_path']}")
        lines.append("    copy it to each worker, e.g. scp <head>:{0} {0}".format(info["token_path"]))
    else:
        lines.append("  auth: OFF (--no-auth): anyone who reaches the ports can run code on the cluster")
    for key, value in info["nccl_env"].items():
        lines.append(f"  {key}={value} for every Ray process on this node")
    lines += ["", "on each worker node run:", f"  {info['join_command']}"]
    if info["blocking"]:
        lines.append("(running in the foreground: Ctrl-C stops Ray on this node)")
    return "\n".join(lines)


def down_text(nodes: list[LocalNode] | None, summary: StopSummary | None) -> str:
    """What `down` stopped: the Ray nodes of this machine (each raylet's address and cluster),
    or that nothing was running."""
    if (summary is not None and summary.found == 0) or (summary is None and nodes == []):
        return "nothing to stop: no Ray process runs on this machine"
    processes = f" ({summary.stopped} Ray processes)" if summary is not None else ""
    if not nodes:
        return f"stopped Ray on this machine{processes}"
    clusters = {n.gcs for n in nodes}
    listed = ", ".join(f"{n.ip} (cluster {n.gcs})" if len(clusters) > 1 else n.ip for n in nodes)
    line = f"stopped Ray on this machine{processes}: {len(nodes)} Ray node{'s' if len(nodes) > 1 else ''}: {listed}"
    if len(nodes) > 1:
        line += "\n  (like `ray stop`, down stops every Ray node this machine runs, not one of them)"
    return line


def status_text(data: dict[str, Any]) -> str:
    local = data.get("local_ray_version")
    match = "" if data.get("ray_version_match") else f"  (MISMATCH: this machine has ray {local})"
    lines = [f"cluster {data['address']}: ray {data['ray_version']}{match}"]
    rows = [["node", "head", "GPUs free/total", "CPUs free/total", "memory GiB free/total"]]
    for n in sorted(data["nodes"], key=lambda n: (not n["is_head"], n["ip"])):
        mem = f"{n['memory_free_gb']:.0f}/{n['memory_gb']:.0f}" if n.get("memory_gb") else "-"
        rows.append([n["ip"], "*" if n["is_head"] else "", f"{n['gpus_free']:g}/{n['gpus']:g}", f"{n['cpus_free']:g}/{n['cpus']:g}", mem])
    lines += _table(rows)
    lines.append(f"  {data['alive_nodes']} alive nodes, {data['gpus_free']:g}/{data['gpus']:g} GPUs free")
    lines += dead_nodes_lines(data.get("dead_nodes") or [])
    jobs = data.get("running_jobs") or []
    if jobs:
        lines.append("running jobs:")
        lines += [f"  {j['submission_id']}  {j['status']}  {j['entrypoint'][:80]}" for j in jobs]
    else:
        lines.append("running jobs: none")
    return "\n".join(lines)


DEAD_SHOWN = 5  # dead nodes `status` lists


def dead_nodes_lines(dead: list[dict[str, Any]], now: float | None = None) -> list[str]:
    """`status`'s dead nodes, the most recent first: address, id, GPUs, when and why."""
    from rlhf_launch.core.nodes import DeadNode

    if not dead:
        return []
    nodes = [DeadNode(**d) for d in dead]
    lines = [f"dead nodes ({len(nodes)}, the most recent first):"]
    lines += [f"  {n.text(now)}" for n in nodes[:DEAD_SHOWN]]
    if len(nodes) > DEAD_SHOWN:
        lines.append(f"  and {len(nodes) - DEAD_SHOWN} earlier (rlhf-launch status --json lists them all)")
    return lines


def submitted_text(done: Submitted) -> str:
    lines = [plan_text(done.launch)]
    if done.live is not None:
        lines += ["", live_text(done.live)]
    if done.run is None:
        lines += ["", "not submitted: fix the errors above"]
        return "\n".join(lines)
    run, attempt = done.run, done.attempt
    assert attempt is not None  # a recorded run was submitted
    lines += [
        "",
        f"submitted run {run.run_id}",
        f"  job:       {attempt.job_id}",
        f"  dashboard: {run.address}/#/jobs/{attempt.job_id}",
    ]
    lines += [f"  note: {note}" for note in done.notes]
    if done.supervisor_job:
        lines += [
            f"  auto-resume: up to {run.auto_resume} time{'s' if run.auto_resume != 1 else ''}, "
            f"supervised on the cluster by job {done.supervisor_job}",
            f"    (rlhf-launch watch {run.run_id})",
        ]
    lines += [
        "next:",
        f"  rlhf-launch logs {run.run_id} --follow",
        f"  rlhf-launch stop {run.run_id}",
        f"  rlhf-launch resume {run.run_id}",
    ]
    return "\n".join(lines)


def resumed_text(done: Resumed) -> str:
    lines = []
    ck = done.checkpoint
    if ck is not None and ck.latest_step is not None:
        lines.append(f"checkpoint {ck.path}: {ck.status}, step {ck.latest_step}")
    elif ck is not None and ck.status == "none":  # the findings say whether that is allowed (--allow-fresh)
        start = ": the new attempt starts from step 0 (--allow-fresh)" if done.attempt is not None else ""
        lines.append(f"checkpoint {ck.path}: none yet{start}")
    elif ck is not None:
        lines.append(f"checkpoint {ck.path}: {ck.status}")
    lines += findings_text(done.findings)
    if done.attempt is None:
        lines.append("not resumed: fix the errors above")
    else:
        lines.append(f"resumed run {done.run.run_id} as attempt {done.attempt.number} (job {done.attempt.job_id})")
        lines.append(f"  rlhf-launch logs {done.run.run_id} --follow")
    return "\n".join(lines)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def plain_number(value: float) -> str:
    """5750.3 -> `5,750`, 12.4 -> `12`, 3.14 -> `3.1`, 0.0512 -> `0.051`: never an exponent."""
    if value >= 10:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}" if value >= 1e-4 else f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def progress_text(row: dict[str, Any]) -> str:
    """`step 12/400, 3.1 steps/h, ETA 5h02m, reward 0.41, kl 0.012` from what is known; before
    a step's time is known the ETA is the plan's estimate, `ETA ~5h02m (estimated)`."""
    estimated = row.get("eta_basis") == "estimate"
    eta = row.get("eta_seconds")
    if row.get("step") is None:
        return f"no step yet, ETA ~{_duration(eta)} (estimated)" if eta is not None and estimated else "-"
    total = row.get("total_steps")
    parts = [f"step {row['step']}" + (f"/{total}" if total else "")]
    if row.get("steps_per_hour"):
        parts.append(f"{plain_number(row['steps_per_hour'])} steps/h")
    if eta is not None:
        parts.append(f"ETA ~{_duration(eta)} (estimated)" if estimated else f"ETA {_duration(eta)}")
    for name in ("reward", "kl"):
        if isinstance(row.get(name), (int, float)):
            parts.append(f"{name} {row[name]:.3g}")
    return ", ".join(parts)


def _timing_key(timing: dict[str, Any] | None, text: str | None) -> str:
    """What makes a measured-vs-estimated line new: the measured step time moved by a tenth or
    more (log buckets), not the median's step count."""
    import math

    step = (timing or {}).get("step_s")
    if step and isinstance(step[0], (int, float)) and step[0] > 0:
        return f"step~{round(math.log(step[0]) / math.log(1.1))}"
    return re.sub(r" \(median of \d+ steps?\)", "", text or "")


def timing_text(timing: dict[str, Any] | None) -> str | None:
    """`step 1,150 s measured vs 1,280 s estimated (median of 3 steps): generate 120/137,
    make_experience 380/386, train 600/700, weight_sync 50/57 s` (runs/progress.py versus)."""
    if not timing or not timing.get("phases_s"):
        return None
    n = timing.get("steps")
    head = ""
    step = timing.get("step_s")
    if step and step[1]:
        head = f"step {plain_number(step[0])} s measured vs {plain_number(step[1])} s estimated"
    elif step:
        head = f"step {plain_number(step[0])} s measured"
    if n:
        head += f" (median of {n} step{'s' if n != 1 else ''})"
    phases = ", ".join(f"{p} {plain_number(m)}/{plain_number(e)}" for p, (m, e) in timing["phases_s"].items())
    return f"{head}: {phases} s (measured/estimated)"


def progress_reader(run: Run) -> Callable[[str], str | None]:
    """Reads a run's log as it streams (`runs.logs.follow`: attempt after attempt, each
    after a `--- RUN attempt N` line); returns its progress line once a step is known."""
    import time

    from rlhf_launch.runs.progress import Tracker, known_total

    def fresh(total: int | None) -> Tracker:
        return Tracker(
            total_steps=total,
            release=run.openrlhf_version,
            started=time.time(),
            rollout_batch_size=run.rollout_batch_size,
            estimate=run.estimate,
        )

    tracker = fresh(known_total(run.progress, run.total_steps))
    marker = f"--- {run.run_id} attempt "

    def read(chunk: str) -> str | None:
        nonlocal tracker
        if chunk.startswith(marker):  # a new attempt: its own rate and steps (it resumes from a checkpoint)
            tracker = fresh(tracker.total)  # the M an earlier attempt's bar told: the dataset is the same
        tracker.feed(chunk, time.time())
        seen = tracker.progress(time.time()).as_json()
        return progress_text(seen) if seen.get("step") is not None else None

    return read


def diagnosis_text(diagnosis: dict[str, Any]) -> str:
    retry = "retriable" if diagnosis.get("retriable") else "not retriable"
    where = " ".join(
        x
        for x in (
            f"in {diagnosis['phase']}" if diagnosis.get("phase") else "",
            f"at step {diagnosis['step']}" if diagnosis.get("step") is not None else "",
        )
        if x
    )
    lines = [f"diagnosis: {diagnosis.get('class', 'unknown')} ({retry}){' ' + where if where else ''}"]
    if diagnosis.get("hint"):
        lines.append(f"  hint: {diagnosis['hint']}")
    lines += [f"  | {line}" for line in diagnosis.get("evidence", [])[:5]]
    return "\n".join(lines)


def _earlier(data: dict[str, Any]) -> list[str]:
    """The failures the run came through before this attempt (`diagnose --attempt N` reads each)."""
    lines = []
    for past in data.get("history", []):
        step = f"at step {past['step']}" if past.get("step") is not None else "before its first step"
        lines.append(f"  earlier: attempt {past['attempt']} {past['status']}: {past['class']} {step} (resumed)")
    if lines and data.get("running"):
        lines.append(f"  `rlhf-launch diagnose {data.get('run_id')} --attempt {data['history'][-1]['attempt']}` reads the last failure")
    return lines


def diagnose_text(data: dict[str, Any]) -> str:
    """`diagnose` for people: what was diagnosed, then the diagnosis (or, for an attempt that
    succeeded, the failures the run came through)."""
    if "log" in data:
        head = f"{data['log']}:"
    else:
        head = f"{data['run_id']} attempt {data['attempt']} ({data['job_id']}, {data['job_status']}):"
    if data.get("running") and "class" not in data:
        shown = data.get("progress")
        return "\n".join(
            [
                head,
                f"  {str(data.get('job_status', 'running')).lower()}: no failure to classify"
                + (f" ({shown})" if shown and shown != "-" else "")
                + "; no stall recorded",
                f"  follow it with `rlhf-launch logs {data.get('run_id')} --follow` or `rlhf-launch watch {data.get('run_id')}`",
                *_earlier(data),
            ]
        )
    if data.get("stopped") and "class" not in data:
        return "\n".join(
            [head, f"  stopped by `rlhf-launch stop`: nothing failed; `rlhf-launch resume {data.get('run_id')}` goes on", *_earlier(data)]
        )
    if data.get("job_status") == "SUCCEEDED" and "class" not in data:
        return "\n".join([head, "  nothing to diagnose: it succeeded", *_earlier(data)])
    lines = [head, diagnosis_text(data)]
    verdict = data.get("auto_resume")
    if verdict:
        lines.append(f"  auto-resume: {'would resume' if verdict.get('retry') else 'would stop'}: {verdict.get('reason', '')}")
    if data.get("stall"):
        lines.insert(1, f"  stalled: {data['stall'].get('message', data['stall'].get('milestone'))}")
    if data.get("note"):
        lines.append(f"  note: {data['note']}")
    return "\n".join(lines)


def runs_text(overview: Overview) -> str:
    lines = []
    if overview.rows:
        table = [["run", "status", "attempt", "progress", "auto-resume", "job"]]
        for r in overview.rows:
            status = str(r["status"]) + ("" if r["live"] else " (not live)")
            if r.get("diagnosis") and str(r["status"]) in ("FAILED", "GAVE_UP", "WAITING"):
                status += f" [{r['diagnosis'].get('class')}]"
            table.append([r["run_id"], status, str(r["attempts"]), progress_text(r), r["auto_resume"] or "-", r["job_id"] or "-"])
        lines += _table(table, indent="")
        lines += [f"{r['run_id']}: {timing_text(r.get('timing'))}" for r in overview.rows if timing_text(r.get("timing"))]
        lines += [f"{r['run_id']}: {r['waiting']}" for r in overview.rows if r.get("waiting")]
        lines += [f"{r['run_id']}: {r['revision']}" for r in overview.rows if r.get("revision")]
        lines += not_live_lines(overview)
    else:
        lines.append("no runs yet")
    for bad in overview.unreadable:
        lines.append(f"unreadable record (kept): {bad.path}: {bad.reason}")
    return "\n".join(lines)


def not_live_lines(overview: Overview) -> list[str]:
    """Why rows say "(not live)", once per cause: a cluster that did not answer, or ended
    runs whose cluster was not asked."""
    lines = []
    dark = {r["address"] for r in overview.rows if not r["live"]}
    for address in sorted(dark & set(overview.unreachable)):
        lines.append(
            f"(not live): the cluster at {address} did not answer ({overview.unreachable[address]}); "
            "its runs show their last recorded status"
        )
    if dark - set(overview.unreachable):
        lines.append("(not live): ended runs on clusters not asked show their recorded status")
    return lines


def failing_now(run: Run) -> bool:
    """Is the run's diagnosis about its current attempt (failed, or stalled), not its past?"""
    attempt = run.current
    return attempt is not None and (attempt.status.is_failure() or bool((attempt.diagnosis or {}).get("stall")))


def run_line(run: Run) -> str:
    """`r1: SUCCEEDED (attempt 2; step 40/40); resumed after nccl_timeout at step 5`, or
    with the diagnosis of the attempt that failed now."""
    from rlhf_launch.runs.history import history_text
    from rlhf_launch.runs.overview import row

    text = f"{run.run_id}: {run.status} (attempt {len(run.attempts)}; {progress_text(row(run, True))})"
    if run.revisions:
        from rlhf_launch.runs.overview import revision_text

        text += "\n" + revision_text(run.revisions[-1])
    if run.diagnosis and failing_now(run):
        return text + "\n" + diagnosis_text(run.diagnosis)
    past = history_text(run)
    return text + (f"; {past}" if past else "")


def stopped_text(done: Stopped) -> str:
    if done.gone and done.finished:
        from rlhf_launch.util.when import moment

        when = f" at {moment(done.stopped_at)}" if done.stopped_at else ""
        return (
            f"{done.run_id} had already {done.finished}{when}: nothing to stop; checked in {done.seconds:.1f}s: "
            f"no process of it is left, its GPUs are free (job {done.job_id}: {done.job_status})"
        )
    if done.gone and done.already:
        from rlhf_launch.util.when import moment

        when = f" at {moment(done.stopped_at)}" if done.stopped_at else ""
        return (
            f"{done.run_id} was already stopped{when}; checked again in {done.seconds:.1f}s: its trainer and every process "
            f"of it are gone, its GPUs free (job {done.job_id}: {done.job_status})"
        )
    if done.gone:
        return (
            f"stopped {done.run_id} in {done.seconds:.1f}s: its trainer and every process of it are gone, its GPUs free "
            f"(job {done.job_id}: {done.job_status})"
        )
    lines = [f"{done.run_id} is marked stopped, but after {done.bound:g}s this is left:"]
    lines += [f"  {line}" for lo in done.left for line in lo.describe()]
    lines.append(f"  hint: run `rlhf-launch stop {done.run_id}` again, or end these by hand (ray job stop / kill)")
    return "\n".join(lines)


def supervisor_lines(chunks: Iterable[str]) -> Iterator[str]:
    """A supervisor's log for people: state lines as one short line each."""
    from rlhf_launch.runs.supervisor import STATE
    from rlhf_launch.util.when import moment

    told_timing: set[tuple[str, str]] = set()  # each measured-vs-estimated line once
    pending = ""
    told: set[str] = set()  # each diagnosis once (the supervisor repeats its state every minute)
    hidden: list[str] = []  # the raylet's routine lines since the last line shown

    def summary() -> Iterator[str]:
        if hidden:
            yield raylet_summary(hidden)
            hidden.clear()

    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split("\n")
        for line in complete:
            if RAYLET_LINE.match(plain(line)):
                if not RAYLET_DECISIVE.search(line):
                    hidden.append(plain(line).strip())
                    continue
                yield from summary()
                yield plain(line) + "\n"
                continue
            yield from summary()
            if line.startswith(STATE + " "):
                try:
                    state = json.loads(line[len(STATE) + 1 :])
                except ValueError:
                    continue
                shown = {**(state.get("progress") or {})}
                if str(state.get("status")) != "RUNNING":
                    shown["eta_seconds"] = None  # no time left to count while nothing trains
                progress = progress_text(shown)
                when = state.get("time")
                # the supervisor's own clock: `watch` replays its log from the start, so lines say when they were true
                stamp = f"{moment(float(when))} " if isinstance(when, (int, float)) else ""
                yield f"{stamp}[{state.get('status')}] attempt {state.get('attempt')} {state.get('attempt_status')}; {progress}\n"
                from rlhf_launch.runs.progress import versus

                seen = state.get("progress") or {}
                measured = versus(seen.get("measured"), seen.get("estimated"))
                timing = timing_text(measured)
                moved = ("timing", _timing_key(measured, timing))
                if timing and moved not in told_timing:  # once per change of a tenth or more, not per step's new median
                    told_timing.add(moved)
                    yield f"  {timing}\n"
                found = state.get("diagnosis")
                key = json.dumps(found, sort_keys=True, default=str)
                if found and str(state.get("status")) in ("WAITING", "FAILED", "GAVE_UP") and key not in told:
                    told.add(key)
                    yield diagnosis_text(found) + "\n"
            else:
                yield line + "\n"
    yield from summary()
    if pending:
        yield pending


# Ray forwards its raylet's own log lines into a driver's output, `(raylet) ...` or
# `(raylet, ip=10.0.0.3) ...` (coloured on a terminal): worker start-ups, dedup notices,
# spilling; dozens a minute on a busy node. Only those about a death or memory matter here.
RAYLET_LINE = re.compile(r"^\s*\(raylet(?:, ip=[\d.]+)?\)")
RAYLET_DECISIVE = re.compile(
    r"(?i)\b(?:died|dead|killed|kill(?:ing)?|SIG(?:KILL|TERM|SEGV)|out of memory|OOM|memory monitor|fatal|crash(?:ed)?|exited|lost|"
    r"health check|disk (?:is )?full|no space)\b"
)


def raylet_summary(hidden: list[str]) -> str:
    """One line for a run of the raylet's routine lines: how many, and the first."""
    first = hidden[0] if len(hidden[0]) <= 120 else hidden[0][:117] + "..."
    more = f" and {len(hidden) - 1} more raylet line{'s' if len(hidden) > 2 else ''}" if len(hidden) > 1 else ""
    return f"[rlhf-launch] {first}{more} (routine; `rlhf-launch logs RUN` has the driver's log)\n"


def presets_text(rows: list[dict[str, Any]]) -> str:
    width = max(len(r["name"]) for r in rows)
    return "\n".join(f"{r['name']:<{width}}  {r['nodes']}x{r['gpus_per_node']} GPUs  {r['summary']}" for r in rows)


def versions_text(flagsets: list[FlagSet], default: str) -> str:
    lines = []
    for fs in flagsets:
        mark = " (default)" if fs.version == default else ""
        lines.append(f"{fs.version:<13} {'dotted' if fs.dotted else 'flat':<6}  {len(fs.flags)} flags  ray {fs.ray_pin}{mark}")
    return "\n".join(lines)


def checkpoints_text(data: dict[str, Any]) -> str:
    lines = [f"checkpoints at {data['path']} (read on {data['checked_on']}): {data['status']}"]
    if data.get("note"):
        lines.append(f"  note: {data['note']}")
    if data["latest_step"] is not None:
        lines.append(f"  latest step: {data['latest_step']}")
    for role, info in data["roles"].items():
        steps = ", ".join(map(str, info["steps"])) or "none"
        lines.append(f"  _{role}/: latest={info['latest'] or '-'}  steps: {steps}")
        if info["problem"]:
            lines.append(f"    problem: {info['problem']}")
    if data["hf_steps"]:
        lines.append(f"  HF checkpoints: {', '.join(f'global_step{s}_hf' for s in data['hf_steps'])}")
    if data["findings"]:
        lines += findings_text([Finding(**f) for f in data["findings"]])
    return "\n".join(lines)


_CELL = {"pass": "ok", "warn": "warn", "fail": "FAIL", "n/a": "-"}


def doctor_text(report: Any, picture: list[str] | None = None) -> str:
    """`doctor`: a node-by-check table (ok / warn / FAIL / - for not applicable), the findings
    naming node, value found, value wanted and fix, and the verdict."""
    from rlhf_launch.doctor.checks import NAMES

    checks = [c for c in NAMES if c not in report.skipped]
    rows = [["node", *checks]]
    for node in report.nodes:
        rows.append([node.name, *(_CELL.get(str(report.cells.get((c, node.node_id), "n/a")), "?") for c in checks)])
    answered = sum(1 for n in report.nodes if n.answered)
    lines = [f"doctor: {len(report.nodes)} alive node(s), {answered} answered, in {report.seconds:.1f}s", *_table(rows)]
    if report.skipped:
        lines.append(f"  skipped: {', '.join(report.skipped)}")
    if picture:
        lines += ["", *picture]
    lines.append("")
    if not report.findings:
        lines.append("findings: none")
    else:
        lines.append("findings:")
        for f in report.findings:
            level = "FAIL" if f.level == "error" else "warn"
            lines.append(f"  {level:<4}  {f.check} on {f.text()}")
            if f.fix:
                lines.append(f"        fix: {f.fix}")
    failed = len(report.failed())
    lines.append("")
    lines.append("ok: nothing blocks the run" if report.ok else f"not ready: {failed} check(s) failed (exit 1)")
    return "\n".join(lines)


def _fit_row(rank: str, describe: str, launch: Launch) -> list[str]:
    est = launch.estimate
    if est is None:
        return [rank, describe, str(launch.plan.gpus_required), "-", "-", "-", "-", "-", "-", "-", "actor size unknown"]
    p = est.phases_s
    run_h = f"{est.run_h:.1f}" if est.run_h is not None else "-"
    gpu_h = f"{est.gpu_hours:.0f}" if est.gpu_hours is not None else "-"
    return [
        rank,
        describe,
        str(est.gpus),
        f"{p['generate']:.0f}",
        f"{p['make_experience']:.0f}",
        f"{p['train']:.0f}",
        f"{p['weight_sync']:.0f}",
        f"{est.step_s:.0f}",
        run_h,
        gpu_h,
        est.limits[0] if est.limits else "",
    ]


def fit_text(
    result: Any, own: Launch, nodes: int, gpus_per_node: int, top: int, live: Any, written: str | None, calibration: str | None = None
) -> str:
    """`fit`: the top layouts as a table, the best one's overrides and placement picture;
    `calibration`: what the estimate's constants were calibrated on (fit --from RUN)."""
    where = "the live cluster's free GPUs" if live is not None else "empty nodes"
    lines = [
        f"fit {own.cfg.name} on {nodes} x {gpus_per_node} GPUs ({where}): {result.valid} of {result.tried} layouts accepted "
        f"in {result.seconds:.1f} s",
        *([f"  {calibration}"] if calibration else []),
        "",
    ]
    head = ["#", "layout", "GPUs", "gen s", "exp s", "train s", "sync s", "s/step", "run h", "GPU-h", "what limits it"]
    rows = [head] + [_fit_row(str(i + 1), f.layout.describe(), f.launch) for i, f in enumerate(result.layouts[:top])]
    same_shape = own.plan.cluster_nodes == nodes and own.plan.cluster_gpus_per_node == gpus_per_node
    if own.ok and same_shape:
        rows.append(_fit_row("yours", own.plan.breakdown(), own))
    lines += _table(rows)
    if not (own.ok and same_shape):
        why = next((f.message for f in own.findings if f.level == "error"), "")
        lines.append(
            f"  yours: {own.plan.breakdown()}" + (f": not accepted ({why})" if why else f" (planned for {own.plan.cluster_nodes} nodes)")
        )
    refused = ", ".join(f"{n} {why}" for why, n in sorted(result.refused.items(), key=lambda kv: -kv[1]))
    if refused:
        lines.append(f"  refused: {refused}")
    if result.truncated:
        lines.append(f"  the search stopped after {result.tried} layouts: more exist (fewer --nodes, or fix more of the layout in CONFIG)")
    best = result.layouts[0]
    from rlhf_launch.fit import changed

    lines += [
        "",
        f"best: {best.layout.describe()}",
        "  overrides: " + (" ".join(changed(own.cfg.model_dump(mode="json"), best.layout.overrides())) or "none: it is yours"),
        "",
    ]
    lines += picture.draw(best.launch.plan, live) + [""]
    if best.launch.estimate is not None:
        lines += [f"  assumes: {a}" for a in best.launch.estimate.assumptions[:3]]
    if written:
        lines.append(f"wrote {written}; check it with: rlhf-launch plan {written}")
    return "\n".join(lines)


def fit_json(result: Any, own: Launch, nodes: int, gpus_per_node: int, calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    from rlhf_launch.fit import changed

    return {
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node},
        "calibration": calibration,  # fit --from RUN: the run, its measured and estimated phases, the constants
        "tried": result.tried,
        "valid": result.valid,
        "seconds": round(result.seconds, 2),
        "refused": result.refused,
        "truncated": result.truncated,
        "layouts": [
            {
                "layout": f.layout.describe(),
                "overrides": changed(own.cfg.model_dump(mode="json"), f.layout.overrides()),
                "gpus": f.gpus,
                "estimate": f.launch.estimate.as_json() if f.launch.estimate is not None else None,
            }
            for f in result.layouts
        ],
        "yours": {
            "layout": own.plan.breakdown(),
            "ok": own.ok,
            "estimate": own.estimate.as_json() if own.estimate is not None else None,
        },
    }
