"""`rlhf-launch logs`, `stop`, `runs`, `checkpoints`: the job lifecycle around a run record."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from rlhf_launch import auth, lifecycle, runs, supervisor
from rlhf_launch.commands.resume import discover
from rlhf_launch.errors import UserError
from rlhf_launch.jobs import Jobs
from rlhf_launch.runs import Run


def _jobs(run: Run, address: str | None, token_file: str | None) -> Jobs:
    return Jobs(address or run.address, auth.find_token(token_file=token_file))


def logs(run_id: str | None, *, follow: bool, address: str | None, token_file: str | None) -> Iterator[str]:
    """The current attempt's logs; with follow, on into later attempts while a watcher runs."""
    run = runs.resolve(run_id)
    jobs = _jobs(run, address, token_file)
    attempt = run.current
    if attempt is None:
        raise UserError(f"run {run.run_id} has no attempts")
    if not follow:
        yield jobs.logs(attempt.job_id)
        return
    while True:
        yield f"--- {run.run_id} attempt {attempt.number} ({attempt.job_id})\n"
        yield from jobs.follow(attempt.job_id)
        run = lifecycle.observe(runs.load(run.run_id), jobs)
        nxt = _next_attempt(run.run_id, attempt.number, jobs)
        if nxt is None:
            yield f"--- {run.run_id}: {runs.load(run.run_id).status}\n"
            return
        attempt = nxt


def _next_attempt(run_id: str, after: int, jobs: Jobs, wait: float = 3600.0):
    end = time.monotonic() + wait
    while time.monotonic() < end:
        run = runs.load(run_id)
        if run.current and run.current.number > after and run.current.status != "SUBMITTING":
            return run.current
        if run.final or not supervisor.watcher_alive(run_id):
            return None
        time.sleep(1.0)
    return None


def stop(run_id: str | None, *, address: str | None, token_file: str | None, wait: float = 60.0) -> dict[str, Any]:
    run = runs.resolve(run_id)
    jobs = _jobs(run, address, token_file)
    run = lifecycle.mark_stopped(run.run_id)  # first, so a watcher never resubmits past this point
    attempt = run.current
    status = "NONE"
    if attempt is not None:
        if jobs.stop(attempt.job_id):
            status = jobs.wait_terminal(attempt.job_id, wait)
        else:
            try:
                status = jobs.status(attempt.job_id)  # already over
            except UserError:
                status = "LOST"
        lifecycle.observe(runs.load(run.run_id), jobs)
    return {"run_id": run.run_id, "job_id": attempt.job_id if attempt else None, "job_status": status, "status": "STOPPED"}


def list_runs(*, token_file: str | None) -> list[dict[str, Any]]:
    out = []
    clients: dict[str, Jobs | None] = {}
    for run in runs.all_runs():
        if run.address not in clients:
            try:
                clients[run.address] = Jobs(run.address, auth.find_token(token_file=token_file), timeout=3)
            except UserError:
                clients[run.address] = None
        jobs = clients[run.address]
        live = jobs is not None
        if live and not run.final:
            try:
                run = lifecycle.observe(run, jobs)
            except UserError:
                live = False
        attempt = run.current
        out.append(
            {
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
        )
    return out


def show_checkpoints(
    run_id: str | None, ckpt_path: str | None, *, address: str | None, token_file: str | None, local: bool
) -> dict[str, Any]:
    path = ckpt_path
    run = None
    if path is None:
        run = runs.resolve(run_id)
        path = run.ckpt_path
    jobs, note = None, ""
    target = None if local else address or (run.address if run else None)
    if target is not None:
        try:
            jobs = Jobs(target, auth.find_token(token_file=token_file), timeout=5)
        except UserError as exc:
            note = f"cluster not reachable ({exc.message}); read on this machine instead"
    state, findings = discover(jobs, path)
    out = state.as_json()
    out["run_id"] = run.run_id if run else None
    out["checked_on"] = "every alive node" if jobs else "this machine"
    out["note"] = note
    out["findings"] = [f.as_dict() for f in findings]
    return out
