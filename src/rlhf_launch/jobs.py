"""Ray jobs through Ray's JobSubmissionClient: submit, status, info, logs, follow, stop, list.

The only module that imports ray's job SDK, and only when a command needs it. A quick
dashboard check runs first so a cluster that is down or a wrong token fails in seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlhf_launch.auth import Token
from rlhf_launch.dashboard import Dashboard
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

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class Jobs:
    def __init__(self, address: str, token: Token | None, timeout: float = 10.0):
        self.dashboard = Dashboard(address, token, timeout=timeout)
        self.dashboard.check_auth()
        from ray.job_submission import JobSubmissionClient

        try:
            self.client = JobSubmissionClient(self.dashboard.address, headers=token.headers() if token else None)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UserError(f"cannot use the Ray jobs API at {self.dashboard.address}: {exc}") from None

    @property
    def address(self) -> str:
        return self.dashboard.address

    def submit(self, entrypoint: str, runtime_env: dict[str, Any], submission_id: str, metadata: dict[str, str]) -> str:
        try:
            return self.client.submit_job(
                entrypoint=entrypoint, runtime_env=runtime_env or None, submission_id=submission_id, metadata=metadata
            )
        except RuntimeError as exc:
            raise UserError(f"Ray refused the job: {str(exc).splitlines()[0][:500]}") from None

    def info(self, submission_id: str) -> JobInfo:
        try:
            raw = self.client.get_job_info(submission_id)
        except RuntimeError as exc:
            if "does not exist" in str(exc) or "404" in str(exc):
                raise UserError(f"the cluster at {self.address} has no job {submission_id}") from None
            raise
        return JobInfo(
            submission_id=raw.submission_id or submission_id,
            status=str(raw.status.value if hasattr(raw.status, "value") else raw.status),
            entrypoint=raw.entrypoint,
            runtime_env=raw.runtime_env or {},
            metadata=raw.metadata or {},
            message=raw.message or "",
            start_time=(raw.start_time / 1000) if raw.start_time else None,
            end_time=(raw.end_time / 1000) if raw.end_time else None,
        )

    def status(self, submission_id: str) -> str:
        return self.info(submission_id).status

    def logs(self, submission_id: str) -> str:
        return self.client.get_job_logs(submission_id)

    def follow(self, submission_id: str) -> Iterator[str]:
        """Log chunks as they come, until the job ends."""
        agen = self.client.tail_job_logs(submission_id)
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

    def stop(self, submission_id: str) -> bool:
        return bool(self.client.stop_job(submission_id))

    def list(self) -> list[JobInfo]:
        out = []
        for raw in self.client.list_jobs():
            out.append(
                JobInfo(
                    submission_id=raw.submission_id or "",
                    status=str(raw.status.value if hasattr(raw.status, "value") else raw.status),
                    entrypoint=raw.entrypoint,
                    runtime_env=raw.runtime_env or {},
                    metadata=raw.metadata or {},
                    message=raw.message or "",
                    start_time=(raw.start_time / 1000) if raw.start_time else None,
                    end_time=(raw.end_time / 1000) if raw.end_time else None,
                )
            )
        return out
