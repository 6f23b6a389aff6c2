"""The supervisor: keeps one run going, from the cluster itself.

`submit --auto-resume N` starts it as a Ray job of its own, `<run>-supervisor-<k>`, running
`rlhf-launch supervise RUN` with the launcher installed in the cluster image. It lives on
the cluster (the head node, where Ray runs job drivers), so closing the laptop, losing the
tunnel or killing every local rlhf-launch process changes nothing. Everything it needs is on
the cluster: the run's record travels in the metadata of the run's jobs, the W&B key in
the previous attempt's runtime_env (the one place it already is), the token in the Ray
processes' environment. It reports through its own log: human lines, and one
`RLHF_LAUNCH_STATE {json}` line per change that `runs`, `watch` and `logs` read.

Each poll it reads the current attempt:
- unknown (timeout, unreachable, auth refused): it says so and waits; it never acts on it;
- running: progress from the driver log (step N of M, rate, ETA, reward, KL); stall
  detection (a milestone late past its deadline: runtime env, placement, models loaded,
  first step, next step; with auto-resume the attempt is stopped and resumed, counted as a
  `stall`; without, it is reported); the placement guard (alive GPUs short of the plan's
  need for two polls: the attempt would wait forever at placement; it is stopped and
  resubmitted, not counted);
- SUCCEEDED, or STOPPED (someone stopped the trainer): the run ends so;
- FAILED or LOST: the diagnosis (diagnose/, from the log tail and Ray's state) and
  the retry decision (runs/retry.py: only retriable classes, never the same class twice at
  the same step, --retry-on / --no-retry-on); to retry, the attempt must first be proven gone
  (runs/gone.py), the cluster must have the GPUs again, and the backoff must pass; then
  attempt N+1 is submitted with the checkpoint load flag, as job `<run>-<N+1>`. Ray refuses
  a second job with that id, so two supervisors can never both submit it.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.cluster import snapshot, state
from rlhf_launch.cluster.dashboard import Dashboard
from rlhf_launch.cluster.jobs import Jobs, JobStatus
from rlhf_launch.core import nodes
from rlhf_launch.errors import ClusterError, JobExists, JobNotFound, UserError
from rlhf_launch.runs import claim, evidence, gone, history, jobmeta, lifecycle, progress, replanning, retry
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Attempt, Run
from rlhf_launch.runs.status import AttemptStatus, RunStatus

STATE = "RLHF_LAUNCH_STATE"
MAX_CRASHES = 20  # consecutive unexpected errors before the supervisor gives up
PROGRESS_EVERY = 60.0  # seconds between progress state lines when the step does not change
MAX_BACKOFF = 600.0
CAPACITY_WAIT = 3600.0
GONE_WAIT = 120.0
TAIL_LINES = 2000  # of the driver log, read every poll
DOCTOR_SKIP = ("checkpoints", "disk")  # what a resubmission does not re-check (see _wait_nodes)
SHORT_POLLS = 2  # polls with too few GPUs before an attempt counts as stuck at placement


def state_line(payload: dict[str, Any]) -> str:
    return f"{STATE} {json.dumps(payload, sort_keys=True, default=str)}"


def latest_state(log: str) -> dict[str, Any] | None:
    """The last state line of a supervisor's log."""
    for line in reversed(log.splitlines()):
        if line.startswith(STATE + " "):
            try:
                data = json.loads(line[len(STATE) + 1 :])
            except ValueError:
                continue
            return data if isinstance(data, dict) else None
    return None


@dataclass
class Supervisor:
    run_id: str
    jobs: Jobs
    dashboard: Dashboard
    sweeper: gone.Sweeper
    say: Callable[[str], None] = print
    sleep: Callable[[float], None] = time.sleep
    capacity_wait: float = CAPACITY_WAIT
    # How the nodes are looked at before a resubmission (spec -> {node_id: facts}); None: a
    # probe job. The supervisor job passes cluster.doctor.in_driver (it is a Ray driver).
    doctor_look: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # The node checks themselves (launch -> doctor Report); None: doctor.examine with doctor_look.
    node_checks: Callable[[Any], Any] | None = None
    clock: Callable[[], float] = time.time
    # How a checkpoint becomes universal before a re-plan that changes a DP size
    # (run, roles, seconds -> the probe's result); None: a Ray job on a node that mounts it.
    converter: Callable[[Run, list[str], float], dict[str, Any]] | None = None
    # The live nodes a re-plan places onto; None: the dashboard's alive nodes and free GPUs.
    live_nodes: Callable[[], list[Any]] | None = None
    # The run's latest checkpoint step (None: none); None here: listed by a probe job.
    latest_step: Callable[[Run], int | None] | None = None
    _short: int = 0
    _grow_from: int | None = None  # the step at which the lost GPUs were seen back
    _grow_probed: int | None = None  # the step at which ckpt_path was last listed for it
    _last: tuple[Any, ...] = ()
    _told: set[str] = field(default_factory=set)
    _tracker: progress.Tracker | None = None
    _tracked: str = ""  # the job the tracker follows
    _tail: list[str] = field(default_factory=list)  # the end of the log already fed
    _read_to_end: str = ""  # the finished job whose log was read to its end
    _reported_at: float = 0.0

    # ------------------------------------------------------------------ reporting
    def report(self, run: Run, message: str = "", **extra: Any) -> None:
        attempt = run.current
        payload = {
            "run": run.run_id,
            "status": run.status,
            "attempt": attempt.number if attempt else None,
            "job": attempt.job_id if attempt else None,
            "attempt_status": attempt.status if attempt else None,
            "auto_resumes_used": run.auto_resumes_used,
            "auto_resume": run.auto_resume,
            "diagnosis": run.diagnosis,
            "diagnoses": {str(a.number): a.diagnosis for a in run.attempts if a.diagnosis},  # each attempt's, for history
            "progress": run.progress,
            "message": message,
            **extra,
        }
        step = (run.progress or {}).get("step")
        key = (payload["status"], payload["attempt"], payload["attempt_status"], message, step, bool(extra.get("stall")))
        if key != self._last or self.clock() - self._reported_at > PROGRESS_EVERY:
            self._reported_at = self.clock()
            if message:
                self.say(message)
            self.say(state_line({**payload, "time": time.time()}))
            self._last = key

    def _once(self, key: str, message: str) -> None:
        if key not in self._told:
            self._told.add(key)
            self.say(message)

    def _end(self, status: RunStatus, message: str) -> RunStatus:
        run = runs.update(self.run_id, lambda r: setattr(r, "status", status))
        self.report(run, message)
        return status

    # ------------------------------------------------------------------ the loop
    def run(self) -> RunStatus:
        """Supervise until the run ends; its final status. A cluster that does not answer is
        waited for; an unexpected error is reported and the loop goes on (a supervisor that
        died would leave the run unwatched), unless it keeps happening."""
        run = runs.load(self.run_id)
        self.say(f"supervising {self.run_id}: up to {run.auto_resume} automatic resumes, polling every {run.poll:g}s")
        crashes = 0
        while True:
            try:
                ended = self._step()
                crashes = 0
            except ClusterError as exc:
                self._once(f"unknown:{exc.message}", f"cluster not answering ({exc.message}): waiting, not acting")
                ended = None
            except Exception:  # noqa: BLE001 - a bug; say it with its traceback, go on a while
                crashes += 1
                self.say(f"supervisor error ({crashes}/{MAX_CRASHES}):\n{traceback.format_exc()}")
                if crashes >= MAX_CRASHES:
                    raise
                ended = None
            if ended is not None:
                return ended
            self.sleep(runs.load(self.run_id).poll)

    def _step(self) -> RunStatus | None:
        """One look at the run, and what it calls for. A final status ends supervision."""
        run = lifecycle.observe(runs.load(self.run_id), self.jobs, deciding=True)
        self._told = {k for k in self._told if not k.startswith("unknown:")}
        attempt = run.current
        if attempt is None:
            return self._end(RunStatus.FAILED, f"{self.run_id} has no attempt to supervise")
        if lifecycle.stopped_on_cluster(self.jobs, run):
            lifecycle.mark_stopped(self.run_id)
            return self._end(RunStatus.STOPPED, f"{self.run_id} was stopped by the user: not resuming")
        if attempt.status.is_terminal():
            run = self._last_read(run, attempt)
        if attempt.status is AttemptStatus.SUCCEEDED:
            return self._end(RunStatus.SUCCEEDED, f"{self.run_id}: SUCCEEDED")
        if attempt.status is AttemptStatus.STOPPED:
            lifecycle.stop_on_cluster(self.jobs, lifecycle.mark_stopped(self.run_id))  # every machine sees it
            return self._end(RunStatus.STOPPED, f"{self.run_id}: its trainer job was stopped: not resuming")
        if attempt.status.is_live():
            if not self._watch(run, attempt):
                self._guard_placement(run, attempt)
                self._maybe_grow(runs.load(self.run_id), attempt)
            return None
        return self._after_failure(run, attempt)

    def _watch(self, run: Run, attempt: Attempt) -> bool:
        """Progress and stalls of a live attempt. True when it stalled and was dealt with."""
        now = self.clock()
        if self._tracker is None or self._tracked != attempt.job_id:  # this machine's clock from here on
            self._tracker = progress.Tracker(
                total_steps=progress.known_total(run.progress, run.total_steps),
                release=run.openrlhf_version,
                started=now,
                rollout_batch_size=run.rollout_batch_size,
                estimate=run.estimate,
            )
            self._tracked, self._tail = attempt.job_id, []
        tracker = self._tracker
        try:
            info = self.jobs.info(attempt.job_id)
            if info.status is JobStatus.RUNNING and info.driver_node_id:
                tracker.mark(progress.Milestone.RUNTIME_ENV_READY, now)
                tail = state.driver_log_tail(self.dashboard, info.job_id, info.driver_node_id, TAIL_LINES)
                tracker.feed(self._new_text(tail), now)
        except ClusterError:
            return False  # unknown: no progress read, no stall called
        run = self._keep_progress(run, tracker, now)
        overrides = ((run.config.get("supervise") or {}).get("deadlines")) or {}
        deadlines = progress.parse_deadlines(overrides, progress.default_deadlines(run.params_billion or 7.0, run.nodes))
        stalled = progress.stall(tracker, now, deadlines)
        if stalled is None:
            self.report(run)
            return False
        try:
            return self._stalled(run, attempt, stalled)
        except ClusterError:
            return False  # unknown: look again next poll

    def _keep_progress(self, run: Run, tracker: progress.Tracker, now: float) -> Run:
        seen = tracker.progress(now).as_json()
        if seen != run.progress:
            run = runs.update(self.run_id, lambda r: setattr(r, "progress", seen))
        return run

    def _last_read(self, run: Run, attempt: Attempt) -> Run:
        """The end of a finished attempt's log, read once: the steps it made since the last
        poll (a run that ended at step 40 shows 40, not the 37 of the poll before)."""
        if self._tracker is None or self._tracked != attempt.job_id:
            return run  # this supervisor never followed it: the record's progress stands
        if self._read_to_end == attempt.job_id:
            return run
        now = self.clock()
        try:
            info = self.jobs.info(attempt.job_id)
            if info.driver_node_id and self.dashboard is not None:
                tail = state.driver_log_tail(self.dashboard, info.job_id, info.driver_node_id, TAIL_LINES)
            else:
                tail = "\n".join(self.jobs.logs(attempt.job_id).splitlines()[-TAIL_LINES:])
        except ClusterError:
            return run  # the log is gone with its node: what was read stands
        self._read_to_end = attempt.job_id
        self._tracker.feed(self._new_text(tail) + "\n", now)
        return self._keep_progress(run, self._tracker, now)

    def _new_text(self, tail: str) -> str:
        """What of the log's tail was not fed yet (tails overlap from poll to poll)."""
        lines = tail.splitlines()
        known = self._tail[-20:]
        start = 0
        if known:
            for i in range(len(lines) - len(known), -1, -1):
                if lines[i : i + len(known)] == known:
                    start = i + len(known)
                    break
        self._tail = lines
        fresh = lines[start:]
        return "\n".join(fresh) + ("\n" if fresh else "")

    def _stalled(self, run: Run, attempt: Attempt, stalled: progress.Stall) -> bool:
        """Report a stall with what Ray shows; with auto-resume, stop the attempt (counted)."""
        told = f"stall:{attempt.job_id}:{stalled.milestone}"
        if run.auto_resume <= 0 and told in self._told:
            return True
        found = evidence.gather(self.jobs, self.dashboard, attempt.job_id)
        diagnosis = progress.stall_diagnosis(found.diagnosis().as_json(), stalled)
        if run.auto_resume <= 0:
            self._once(
                f"stall:{attempt.job_id}:{stalled.milestone}",
                f"attempt {attempt.number} stalled: {stalled.message} (no auto-resume: not stopping it)",
            )
            run = runs.update(self.run_id, lambda r: setattr(r, "diagnosis", diagnosis))
            self.report(run, stall=diagnosis["stall"])
            return True
        self.say(f"attempt {attempt.number} stalled: {stalled.message}: stopping it to resume")

        def failed(record: Run) -> None:
            current = record.current
            if current is not None and current.job_id == attempt.job_id and current.status.is_live():
                current.status, current.message, current.ended = AttemptStatus.FAILED, f"stalled: {stalled.message}", time.time()
                current.diagnosis = record.diagnosis = diagnosis

        run = runs.update(self.run_id, failed)
        self.report(run, stall=diagnosis["stall"])
        try:
            self.jobs.stop(attempt.job_id)
        except ClusterError:
            pass
        return True

    def _guard_placement(self, run: Run, attempt: Attempt) -> None:
        """Before its placement groups are granted, an attempt the alive nodes cannot hold
        would wait forever; once placed, a lost node fails the trainer by itself (node_lost,
        diagnosed and counted)."""
        if self._tracker is not None and progress.Milestone.PLACEMENT_READY in self._tracker.seen:
            return
        try:
            have = snapshot.alive_gpus(self.dashboard)
        except ClusterError:
            return
        self._short = self._short + 1 if have < run.gpus_required else 0
        if self._short < SHORT_POLLS:
            return
        self._short = 0
        reason = f"alive nodes have {have:g} GPUs, the run needs {run.gpus_required}: it would wait forever at placement"
        self.say(f"attempt {attempt.number}: {reason}; stopping it to submit again once the GPUs are back")
        try:
            self.jobs.stop(attempt.job_id)
        except ClusterError:
            return

        def supersede(record: Run) -> None:
            current = record.current
            if current is not None and current.job_id == attempt.job_id and current.status.is_live():
                current.status, current.message, current.ended = (
                    AttemptStatus.SUPERSEDED,
                    f"stopped by the supervisor: {reason}",
                    time.time(),
                )
                record.status = RunStatus.WAITING

        runs.update(self.run_id, supersede)

    def _diagnose(self, run: Run, attempt: Attempt) -> Run:
        """Diagnose a failed attempt once (a stalled one was diagnosed when it stalled)."""
        if attempt.diagnosis is not None or attempt.status is AttemptStatus.SUPERSEDED:
            return run
        try:
            found = evidence.gather(self.jobs, self.dashboard, attempt.job_id).diagnosis().as_json()
        except ClusterError as exc:
            found = {
                "class": "unknown",
                "retriable": True,
                "phase": None,
                "step": None,
                "evidence": [],
                "hint": f"not diagnosed: {exc.message}",
            }

        if found.get("step") is None and self._tracker is not None and self._tracked == attempt.job_id:
            found["step"] = self._tracker.progress(self.clock()).step  # the last step this supervisor saw it reach

        def keep(record: Run) -> None:
            for a in record.attempts:
                if a.job_id == attempt.job_id:
                    a.diagnosis = found
            record.diagnosis = found

        return runs.update(self.run_id, keep)

    def _failures(self, run: Run) -> list[retry.Failure]:
        """The counted failures since the user last (re)submitted the run, oldest first."""
        return history.counted_failures(run)

    def _after_failure(self, run: Run, attempt: Attempt) -> RunStatus | None:
        """Diagnose, decide, and when retrying, resubmit. None: keep supervising."""
        free = attempt.status is AttemptStatus.SUPERSEDED
        run = self._diagnose(run, attempt)
        used = run.auto_resumes_used
        if not free and run.auto_resume <= 0:
            return self._end(RunStatus.FAILED, f"{self.run_id}: attempt {attempt.number} {attempt.status} (no auto-resume)")
        if not free:
            policy = retry.Policy(run.auto_resume, frozenset(run.retry_on), frozenset(run.no_retry_on))
            decision = retry.decide(self._failures(run), policy)
            if isinstance(decision, retry.Stop):
                return self._end(RunStatus(decision.status), f"{self.run_id}: attempt {attempt.number} {attempt.status}: {decision.reason}")
        run = runs.update(self.run_id, lambda r: setattr(r, "status", RunStatus.WAITING))
        self.report(run, f"attempt {attempt.number} {attempt.status}: resuming ({used + (0 if free else 1)}/{run.auto_resume})")
        left = gone.wait_gone(self.jobs, self.dashboard, [attempt.job_id], self.sweeper, GONE_WAIT)
        if left:
            self.report(run, "not resubmitting: attempt not proven gone: " + "; ".join(line for lo in left for line in lo.describe()))
            return None
        if attempt.status is AttemptStatus.SUPERSEDED and attempt.message.startswith(GROW):
            run = self._settle_universal(runs.load(self.run_id))  # what the checkpoint pins now, before the layout changes
            try:
                grown: Run | str = self._grow(run)
            except (ClusterError, UserError) as exc:
                grown = exc.message
            if isinstance(grown, str):
                self.say(f"not growing back: {grown}; resuming on the current layout")
            else:
                run = grown
        if not self._wait_capacity(run):
            return self._end(RunStatus.GAVE_UP, f"gave up waiting {self.capacity_wait:g}s for {run.gpus_required} GPUs")
        run = self._settle_universal(runs.load(self.run_id))  # a re-plan while waiting changed its layout
        if not claim.holds(self.jobs, run.ckpt_path, self.run_id):
            held = claim.current(self.jobs, run.ckpt_path)
            return self._end(
                RunStatus.FAILED,
                f"not resuming: checkpoint.ckpt_path {run.ckpt_path} was claimed by run {held.run_id if held else '?'} since "
                "(one writer per checkpoint directory)",
            )
        ready, ended = self._wait_nodes(run)
        if not ready:
            return ended
        delay = 0.0 if free else min(MAX_BACKOFF, run.backoff * (2**used))
        if delay:
            self.say(f"backing off {delay:g}s")
            self.sleep(delay)
        try:
            runtime_env = self._runtime_env(attempt)
        except JobNotFound:
            return self._end(
                RunStatus.FAILED,
                f"the cluster no longer has {attempt.job_id}, so its runtime_env (and the W&B key) is gone: "
                f"resume by hand with `rlhf-launch resume {self.run_id}` where WANDB_API_KEY is set",
            )
        except ClusterError:
            return None
        try:
            new = lifecycle.submit_attempt(
                self.jobs,
                self.run_id,
                ("grow" if attempt.message.startswith(GROW) else "placement-retry") if free else "auto-resume",
                entrypoint=lifecycle.resume_entrypoint(run),
                runtime_env=runtime_env,
                load_checkpoint=True,
            )
        except lifecycle.StoppedByUser:
            return self._end(RunStatus.STOPPED, f"{self.run_id} was stopped by the user: not resuming")
        except lifecycle.AttemptTaken as exc:
            self.say(f"{exc.message}: following it")
            return None  # the next look adopts it
        except ClusterError as exc:
            self.say(f"resubmission not confirmed ({exc.message}); the next look at the cluster decides")
            return None
        self.say(f"resubmitted as attempt {new.number} ({new.job_id}) with the checkpoint load flag")
        return None

    def _runtime_env(self, attempt: Attempt) -> dict[str, Any]:
        """The previous attempt's runtime_env as Ray holds it (W&B key included), minus its
        job markers (the next attempt gets its own)."""
        env = json.loads(json.dumps(self.jobs.info(attempt.job_id).runtime_env or {}))
        for name in (jobmeta.RUN_VAR, jobmeta.JOB_VAR):
            env.get("env_vars", {}).pop(name, None)
        return {k: v for k, v in env.items() if v not in ({}, None)}

    def _wait_nodes(self, run: Run) -> tuple[bool, RunStatus | None]:
        """The nodes' checks (doctor, as `submit` runs them; not the disk budget, which the
        run's own checkpoints already use) before a resubmission: waits, saying why, while
        one fails. -> (ready, the run's end if it gave up; None: unknown this time, look again)."""
        from rlhf_launch import doctor
        from rlhf_launch.cluster import doctor as node_probe

        look = self.doctor_look or (lambda request: node_probe.by_probe_job(self.jobs, request))

        def examine(launch: Any) -> Any:
            nodes = snapshot.read(self.dashboard, memory=False).nodes
            return doctor.examine(launch, look, skip=DOCTOR_SKIP, nodes_free=doctor.free_nodes(nodes))

        check = self.node_checks or examine
        launch = lifecycle.launch_for(run, load_checkpoint=True)
        deadline = time.monotonic() + self.capacity_wait
        said = ""
        while True:
            try:
                report = check(launch)
            except ClusterError as exc:
                self.say(f"the nodes' checks did not complete ({exc.message}); the next look decides")
                return False, None
            if report.ok:
                if said:
                    self.say("the nodes' checks pass again")
                return True, None
            text = "; ".join(f"{f.check} on {f.text()}" for f in report.failed())
            if text != said:
                self.say(f"waiting to resubmit: a node check fails: {text}")
                said = text
            if time.monotonic() > deadline:
                return False, self._end(RunStatus.GAVE_UP, f"gave up after {self.capacity_wait:g}s of failing node checks: {text}")
            if self._stopped(run):
                return False, self._end(RunStatus.STOPPED, f"{self.run_id} was stopped by the user: not resuming")
            self.sleep(run.poll)

    def _stopped(self, run: Run) -> bool:
        """Stopped by a user, here or from any machine (the stop marker on the cluster)."""
        if runs.load(self.run_id).stopped_by_user:
            return True
        try:
            return lifecycle.stopped_on_cluster(self.jobs, run)
        except ClusterError:
            return False  # unknown: the next look decides

    def _deaths(self, run: Run) -> str:
        """`: node 127.0.0.4 (id 3f2a1b2c, 8 GPUs) died 12:03:41: ...` for the nodes that died since
        the run's current attempt started ("" when none, or unknown)."""
        if self.dashboard is None:  # no state API to ask (a test's supervisor)
            return ""
        try:
            dead = snapshot.dead_nodes(self.dashboard)
        except ClusterError:
            return ""
        since = nodes.died_since(dead, run.current.submitted if run.current else None)
        return f": {nodes.deaths_text(since)}" if since else ""

    def _name_lost(self, run: Run) -> Run:
        """A node_lost diagnosis made before Ray's node table marked the node dead says `a node`:
        name it once the table does (the failed attempt's start is the earliest death counted)."""
        found = run.diagnosis or {}
        hint = str(found.get("hint") or "")
        if found.get("class") != "node_lost" or not hint.startswith("a node ") or self.dashboard is None:
            return run
        failed = next((a for a in reversed(run.attempts) if a.diagnosis is found or a.diagnosis == found), None)
        try:
            dead = nodes.died_since(snapshot.dead_nodes(self.dashboard), failed.submitted if failed else None)
        except ClusterError:
            return run
        named = evidence.name_lost_node(hint, dead)
        if named == hint:
            return run

        def rename(record: Run) -> None:
            for a in record.attempts:
                if a.diagnosis == found:
                    a.diagnosis = {**found, "hint": named}
            if record.diagnosis == found:
                record.diagnosis = {**found, "hint": named}

        return runs.update(self.run_id, rename)

    def _wait_capacity(self, run: Run) -> bool:
        """Until the alive nodes have the GPUs the run needs. After `supervise.node_wait`
        seconds short, the run is re-planned onto the nodes that are left (when a layout its
        checkpoint allows fits there); until then, or when none does, it waits, saying why."""
        deadline = time.monotonic() + self.capacity_wait
        told = False
        node_wait = replanning.node_wait(run)
        short_since: float | None = None
        refused = ""
        next_try = 0.0
        while True:
            try:
                have = snapshot.alive_gpus(self.dashboard)
            except ClusterError as exc:
                have = -1.0
                self._once(f"unknown:{exc.message}", f"cluster not answering ({exc.message})")
            if have >= run.gpus_required:
                return True
            if not told and have >= 0:
                after = f"; re-planning onto the nodes left after {node_wait:g}s" if node_wait > 0 else ""
                self.say(
                    f"waiting for the cluster to have {run.gpus_required} GPUs again (alive nodes have {have:g}){self._deaths(run)}{after}"
                )
                told = True
            run = self._name_lost(run)
            if have >= 0 and node_wait > 0:
                short_since = self.clock() if short_since is None else short_since
                if self.clock() - short_since >= node_wait and self.clock() >= next_try:
                    next_try = self.clock() + REPLAN_EVERY  # a refused re-plan is tried again a while later
                    try:
                        outcome = self._replan(self._settle_universal(run))
                    except ClusterError as exc:
                        outcome = f"the cluster did not answer ({exc.message})"
                    except UserError as exc:  # the run's config no longer prepares here (a fork's source not on this node)
                        outcome = exc.message
                    if isinstance(outcome, Run):
                        return True
                    if outcome != refused:
                        self.say(f"not re-planning {self.run_id}: {outcome}; waiting for the GPUs to return")
                        refused = outcome
            if time.monotonic() > deadline or self._stopped(run):
                return False
            self.sleep(run.poll)

    # ------------------------------------------------------------------ growing back
    def _maybe_grow(self, run: Run, attempt: Attempt) -> None:
        """A re-planned run whose lost GPUs are back: once the running attempt has saved a
        checkpoint since they returned, stop it (superseded, not counted) to resume on the
        run's own layout. Nothing happens while unknown."""
        if not run.revisions or run.revisions[-1].get("reason") != "node lost" or not replanning.supervise_key(run, "grow", True):
            self._grow_from = None
            return
        original = run.revisions[0]
        save_steps = int(((run.config.get("checkpoint") or {}).get("save_steps")) or -1)
        if save_steps <= 0 or self._tracker is None or self._tracked != attempt.job_id:
            return
        try:
            have = snapshot.alive_gpus(self.dashboard)
        except ClusterError:
            return
        step = self._tracker.progress(self.clock()).step or 0
        if have < int(original.get("old_gpus") or 0):
            self._grow_from = None
            return
        if self._grow_from is None:
            self._grow_from = step
            self._once(
                f"grow:{attempt.job_id}",
                f"the lost GPUs are back ({have:g} alive): growing back to the run's own layout at its next checkpoint save",
            )
            return
        target = (self._grow_from // save_steps + 1) * save_steps
        if step < target or step == self._grow_probed:
            return
        self._grow_probed = step  # one listing of ckpt_path per step seen (each is a probe job)
        try:
            latest = (self.latest_step or self._latest_by_probe)(run)
        except ClusterError:
            return
        if latest is None or latest < target:
            return
        self.say(f"attempt {attempt.number} saved step {latest}: stopping it to grow back to the run's own layout")
        try:
            self.jobs.stop(attempt.job_id)
        except ClusterError:
            return
        self._grow_from = None

        def supersede(record: Run) -> None:
            current = record.current
            if current is not None and current.job_id == attempt.job_id and current.status.is_live():
                current.status, current.ended = AttemptStatus.SUPERSEDED, time.time()
                current.message = f"{GROW}: the lost GPUs are back; saved step {latest}"
                record.status = RunStatus.WAITING

        runs.update(self.run_id, supersede)

    def _grow(self, run: Run) -> Run | str:
        """Back to the layout the run had before its first re-plan (a new plan revision),
        converting the checkpoint when a DP size changes. -> the run, or why not."""
        from rlhf_launch.core.placement import NodeFree, simulate
        from rlhf_launch.fit import replan as fit

        before = run.revisions[0].get("from_config") if run.revisions else None
        if not isinstance(before, dict):
            return "the record has no layout from before its first re-plan"
        current = replanning.replanned_launch(run, run.config)
        facts = replanning.checkpoint_facts(run, current)
        data = json.loads(json.dumps(before))
        target = replanning.replanned_launch(run, data)
        if not target.ok:
            return "the run's own layout is no longer valid"
        try:
            nodes = snapshot.read(self.dashboard, memory=False).nodes if self.live_nodes is None else None
        except ClusterError as exc:
            return f"the cluster did not answer ({exc.message})"
        whole = [NodeFree(n.node_id, n.ip, n.gpus, n.cpus) for n in nodes] if nodes is not None else self._live()
        if simulate(target.plan.groups, whole).failed is not None:
            return "the run's own layout does not place on the alive nodes"
        convert = [r for r in fit.TRAINED if facts.dp(r) is not None and fit.data_parallel(target, r) != facts.dp(r)]
        from_step = (run.progress or {}).get("step")
        if convert:
            converter = self.converter or (lambda r, roles, b: replanning.convert_by_probe(self.jobs, r, roles, b))
            converted = replanning.convert(run, convert, converter, self.say)
            if isinstance(converted, str):
                return converted
            from_step = converted if converted is not None else from_step
            data.setdefault("checkpoint", {})["universal"] = True
            target = replanning.replanned_launch(run, data)
        rev = fit.Revision(
            number=len(run.revisions) + 1,
            at=time.time(),
            reason="grow",
            lost="",
            old=current.plan.breakdown(),
            new=target.plan.breakdown(),
            old_gpus=current.plan.gpus_required,
            new_gpus=target.plan.gpus_required,
            old_step_s=current.estimate.step_s if current.estimate else None,
            new_step_s=target.estimate.step_s if target.estimate else None,
            summary=fit.change_text(current, target),
            convert=convert,
            from_step=from_step,
        )
        shown = rev.as_json()

        def change(record: Run) -> None:
            previous = record.config
            replanning.adopt_layout(record, target)
            record.revisions.append({**shown, "from_config": previous})

        run = runs.update(self.run_id, change)
        self.report(run, rev.text(), revision=shown)
        return run

    # ------------------------------------------------------------------ re-planning
    def _live(self) -> list[Any]:
        if self.live_nodes is not None:
            return self.live_nodes()
        return snapshot.read(self.dashboard, memory=False).free_nodes()

    def _replan(self, run: Run) -> Run | str:
        """Re-plan the run onto the live nodes (fit/replan.py), converting its checkpoint to a
        universal one first when a DP size changes; record the plan revision. -> the run as
        re-planned, or why not."""
        from rlhf_launch.fit import replan as fit

        launch = replanning.replanned_launch(run, run.config)
        facts = replanning.checkpoint_facts(run, launch)
        plan = fit.replan(launch.cfg, self._live(), facts, version=run.openrlhf_version)
        if isinstance(plan, fit.Refusal):
            return plan.reason
        new = replanning.replanned_launch(run, replanning.apply_overrides(run.config, list(plan.overrides)))
        from_step = (run.progress or {}).get("step")
        if plan.convert:
            converter = self.converter or (lambda r, roles, b: replanning.convert_by_probe(self.jobs, r, roles, b))
            converted = replanning.convert(run, list(plan.convert), converter, self.say)
            if isinstance(converted, str):
                return converted
            from_step = converted if converted is not None else from_step
        lost = self._deaths(run).removeprefix(": ")
        rev = fit.revision(plan, len(run.revisions) + 1, reason="node lost", lost=lost, at=time.time(), from_step=from_step)
        shown = rev.as_json()

        def change(record: Run) -> None:
            before = record.config
            replanning.adopt_layout(record, new)
            record.revisions.append({**shown, "from_config": before})

        run = runs.update(self.run_id, change)
        self.report(run, rev.text(), revision=shown)
        return run

    def _settle_universal(self, run: Run) -> Run:
        """replanning.settle_universal with this supervisor's view of the checkpoints."""
        return replanning.settle_universal(run, self.latest_step or self._latest_by_probe, self.say)

    def _latest_by_probe(self, run: Run) -> int | None:
        from rlhf_launch.runs import checkpoints

        state, _ = checkpoints.discover(self.jobs, run.ckpt_path)
        return state.latest_step


GROW = "grow back"  # the message of an attempt stopped to go back to the run's own layout
REPLAN_EVERY = 60.0  # seconds between re-plans while none fits (each searches the layouts; a conversion runs a job)


ENTRYPOINT = "python3 -m rlhf_launch supervise {run_id} --in-job"


def supervisor_jobs(run: Run, jobs: Jobs) -> list[Any]:
    """The run's supervisor jobs (JobInfo), oldest first."""
    found = []
    generation = 1
    while True:
        try:
            found.append(jobs.info(jobmeta.supervisor_job_id(run.run_id, generation)))
        except JobNotFound:
            return found
        generation += 1


def live_supervisor(run: Run, jobs: Jobs) -> Any | None:
    return next((info for info in reversed(supervisor_jobs(run, jobs)) if not info.status.is_terminal()), None)


def start(run: Run, jobs: Jobs) -> str:
    """Submit the run's supervisor as its own Ray job; refuses if one is already running."""
    existing = supervisor_jobs(run, jobs)
    live = next((info for info in existing if not info.status.is_terminal()), None)
    if live is not None:
        raise UserError(f"run {run.run_id} is already supervised by job {live.job_id}", hint=f"rlhf-launch watch {run.run_id}")
    generation = len(existing) + 1
    job_id = jobmeta.supervisor_job_id(run.run_id, generation)
    runtime_env = jobmeta.with_markers({"env_vars": {"PYTHONUNBUFFERED": "1"}}, run.run_id, job_id)
    metadata = jobmeta.metadata(run, jobmeta.SUPERVISOR, generation, "supervise")
    try:
        jobs.submit(ENTRYPOINT.format(run_id=run.run_id), runtime_env, job_id, metadata)
    except JobExists:
        raise UserError(
            f"run {run.run_id} was just given a supervisor ({job_id}) by someone else", hint=f"rlhf-launch watch {run.run_id}"
        ) from None
    runs.update(run.run_id, lambda r: setattr(r, "supervisor_job", job_id))
    return job_id
