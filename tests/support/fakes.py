"""A stand-in for the cluster's job API (cluster.jobs.Jobs), for fast unit tests of the run
lifecycle without Ray: jobs live in a dict, and `fail_with` makes every call raise."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from rlhf_launch.cluster.jobs import JobInfo, JobStatus
from rlhf_launch.errors import ClusterError, JobExists, JobNotFound


class FakeJobs:
    address = "http://fake-cluster:8265"

    def __init__(self) -> None:
        self.jobs: dict[str, JobInfo] = {}
        self.driver_logs: dict[str, str] = {}
        self.fail_with: ClusterError | None = None
        self.calls: list[tuple[str, str]] = []

    def _call(self, verb: str, job_id: str = "") -> None:
        self.calls.append((verb, job_id))
        if self.fail_with is not None:
            raise self.fail_with

    def submit(self, entrypoint: str, runtime_env: dict[str, Any], job_id: str, metadata: dict[str, str]) -> str:
        self._call("submit", job_id)
        if job_id in self.jobs:
            raise JobExists(f"the cluster already has a job {job_id}")
        self.jobs[job_id] = JobInfo(job_id, JobStatus.PENDING, entrypoint, runtime_env, metadata, "", time.time(), None)
        return job_id

    def info(self, job_id: str) -> JobInfo:
        self._call("info", job_id)
        if job_id not in self.jobs:
            raise JobNotFound(f"no job {job_id}")
        return self.jobs[job_id]

    def status(self, job_id: str) -> JobStatus:
        return self.info(job_id).status

    def logs(self, job_id: str) -> str:
        self._call("logs", job_id)
        return self.driver_logs.get(job_id, "")

    def stop(self, job_id: str) -> bool:
        self._call("stop", job_id)
        info = self.jobs.get(job_id)
        if info is None or info.status.is_terminal():
            return False
        self.set(job_id, JobStatus.STOPPED)
        return True

    def wait_terminal(self, job_id: str, seconds: float, interval: float = 0.3) -> JobStatus:
        return self.status(job_id)

    def list(self) -> list[JobInfo]:
        self._call("list")
        return list(self.jobs.values())

    def set(self, job_id: str, status: JobStatus, message: str = "", log: str | None = None) -> None:
        ended = time.time() if status.is_terminal() else None
        self.jobs[job_id] = replace(self.jobs[job_id], status=status, message=message, end_time=ended)
        if log is not None:
            self.driver_logs[job_id] = log

    def submitted(self) -> list[str]:
        return [job for verb, job in self.calls if verb == "submit"]


class FakeCluster:
    """What cluster.connection.Cluster offers, over a FakeJobs."""

    def __init__(self, jobs: FakeJobs) -> None:
        self.jobs = jobs
        self.address = jobs.address

    def checked(self) -> FakeCluster:
        self.jobs._call("check")
        return self


def running_run(jobs: FakeJobs, auto_resume: int = 2):
    """A recorded run of the tiny preset whose first attempt Ray reports RUNNING."""
    from rlhf_launch.core.config import load_config
    from rlhf_launch.core.launch import prepare
    from rlhf_launch.runs import lifecycle
    from rlhf_launch.runs import record as runs
    from rlhf_launch.runs.status import AttemptStatus, RunStatus

    from conftest import CONFIGS

    launch = prepare(load_config(CONFIGS / "tiny-1node.yaml"), environ={})
    run = lifecycle.new_run(launch, jobs.address, "tiny-1node", [], lifecycle.Supervision(auto_resume=auto_resume, backoff=0, poll=0.01))
    attempt = lifecycle.submit_attempt(
        jobs, run.run_id, "submit", entrypoint=launch.spec.entrypoint, runtime_env=launch.spec.runtime_env, load_checkpoint=False
    )
    jobs.set(attempt.job_id, JobStatus.RUNNING)
    run = lifecycle.observe(runs.load(run.run_id), jobs)
    assert run.status is RunStatus.RUNNING and run.current.status is AttemptStatus.RUNNING
    return run


class FakeDashboard:
    """Ray's state API as the launcher reads it (actors and placement groups, filtered by one
    key), over lists a test fills; `fail_with` makes every call raise."""

    def __init__(self) -> None:
        self.actors: list[dict[str, Any]] = []
        self.groups: list[dict[str, Any]] = []
        self.fail_with: ClusterError | None = None

    def get(self, path: str, timeout: float | None = None) -> Any:
        from urllib.parse import parse_qs, urlsplit

        if self.fail_with is not None:
            raise self.fail_with
        parts = urlsplit(path)
        query = parse_qs(parts.query)
        rows = {"/api/v0/actors": self.actors, "/api/v0/placement_groups": self.groups}[parts.path]
        for key, value in zip(query.get("filter_keys", []), query.get("filter_values", []), strict=True):
            rows = [r for r in rows if str(r.get(key)) == value]
        return {"data": {"result": {"result": rows}}}
