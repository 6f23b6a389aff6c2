"""Ray jobs: submit, info, logs, follow, stop, list.

Through Ray's Jobs REST API on the dashboard (POST /api/jobs/, GET /api/jobs/{id},
GET /api/jobs/{id}/logs, POST /api/jobs/{id}/stop, GET /api/jobs/): the same requests
Ray's JobSubmissionClient sends, without importing Ray (about a second, in every submit,
resume, runs and watcher poll). Ray's JobSubmissionClient is used where only it can do the
work: packaging and uploading a local working_dir / py_modules, and streaming logs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlhf_launch.auth import Token
from rlhf_launch.dashboard import Dashboard, NotFound
from rlhf_launch.errors import UserError

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True)
class JobInfo:
    submission_id: str
    status: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    message: str
    start_time: float | None
    end_time: float | None
    job_id: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> "JobInfo":
        def seconds(ms: Any) -> float | None:
            return ms / 1000 if ms else None

        return cls(
            submission_id=raw.get("submission_id") or raw.get("job_id") or "",
            status=str(raw.get("status", "")),
            entrypoint=raw.get("entrypoint", ""),
            runtime_env=raw.get("runtime_env") or {},
            metadata=raw.get("metadata") or {},
            message=raw.get("message") or "",
            start_time=seconds(raw.get("start_time")),
            end_time=seconds(raw.get("end_time")),
            job_id=raw.get("job_id"),
        )


def _needs_upload(runtime_env: dict[str, Any]) -> bool:
    """A local working_dir or py_modules must be packaged and uploaded by Ray's SDK."""
    working_dir = runtime_env.get("working_dir")
    local_dir = isinstance(working_dir, str) and "://" not in working_dir
    modules = runtime_env.get("py_modules") or []
    return local_dir or any(isinstance(m, str) and "://" not in m for m in modules)


class Jobs:
    def __init__(self, address: str, token: Token | None, timeout: float = 10.0, *, checked: bool = False):
        """checked: the dashboard was just reached with this token (skip the quick check)."""
        self.dashboard = Dashboard(address, token, timeout=timeout)
        self.token = token
        if not checked:
            self.dashboard.check_auth()

    @property
    def address(self) -> str:
        return self.dashboard.address

    def _sdk(self):
        from ray.job_submission import JobSubmissionClient

        try:
            return JobSubmissionClient(self.address, headers=self.token.headers() if self.token else None)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"cannot use the Ray jobs API at {self.address}: {exc}") from None

    def submit(self, entrypoint: str, runtime_env: dict[str, Any], submission_id: str, metadata: dict[str, str]) -> str:
        if _needs_upload(runtime_env or {}):
            try:
                return self._sdk().submit_job(
                    entrypoint=entrypoint, runtime_env=runtime_env, submission_id=submission_id, metadata=metadata
                )
            except RuntimeError as exc:
                raise UserError(f"Ray refused the job: {str(exc).splitlines()[0][:500]}") from None
        body: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": submission_id, "metadata": metadata}
        if runtime_env:
            body["runtime_env"] = runtime_env
        try:
            answer = self.dashboard.post("/api/jobs/", body)
        except UserError as exc:
            raise UserError(f"Ray refused the job: {exc.message[:500]}") from None
        return (answer or {}).get("submission_id", submission_id)

    def info(self, submission_id: str) -> JobInfo:
        try:
            raw = self.dashboard.get(f"/api/jobs/{submission_id}")
        except NotFound:
            raise UserError(f"the cluster at {self.address} has no job {submission_id}") from None
        return JobInfo.from_api(raw)

    def status(self, submission_id: str) -> str:
        return self.info(submission_id).status

    def logs(self, submission_id: str) -> str:
        try:
            return (self.dashboard.get(f"/api/jobs/{submission_id}/logs") or {}).get("logs", "")
        except NotFound:
            raise UserError(f"the cluster at {self.address} has no job {submission_id}") from None

    def follow(self, submission_id: str) -> Iterator[str]:
        """Log chunks as they come, until the job ends (Ray's websocket tail)."""
        agen = self._sdk().tail_job_logs(submission_id)
        loop = asyncio.new_event_loop()
        try:
            while True:
                try:
                    yield loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            try:
                loop.run_until_complete(agen.aclose())
            except Exception:
                pass
            loop.close()

    def wait_terminal(self, submission_id: str, seconds: float, interval: float = 0.3) -> str:
        """The job's status once it ends, or when `seconds` have passed."""
        import time

        end = time.monotonic() + seconds
        status = self.status(submission_id)
        while status not in TERMINAL and time.monotonic() < end:
            time.sleep(interval)
            status = self.status(submission_id)
        return status

    def stop(self, submission_id: str) -> bool:
        try:
            return bool((self.dashboard.post(f"/api/jobs/{submission_id}/stop", {}) or {}).get("stopped"))
        except NotFound:
            return False

    def list(self) -> list[JobInfo]:
        return [JobInfo.from_api(raw) for raw in self.dashboard.get("/api/jobs/") or [] if isinstance(raw, dict)]
