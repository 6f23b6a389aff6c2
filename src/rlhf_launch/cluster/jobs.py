"""Ray jobs: submit, info, logs, follow, stop, list.

Through Ray's Jobs REST API on the dashboard (POST /api/jobs/, GET /api/jobs/{id},
GET /api/jobs/{id}/logs, POST /api/jobs/{id}/stop, GET /api/jobs/): the same requests
Ray's JobSubmissionClient sends, without importing Ray (about a second, in every submit,
resume, runs and supervisor poll). Ray's JobSubmissionClient is used where only it can do
the work: packaging and uploading a local working_dir / py_modules, and streaming logs.

Names: a job's `job_id` is its submission id (what `ray job status` takes, and what
rlhf-launch sets: `<run>-<attempt>`); `driver_job_id` is the hex id of the Ray job its driver
opened, which Ray's state API uses for the job's actors and placement groups.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rlhf_launch.cluster.dashboard import Dashboard, NotFound
from rlhf_launch.errors import ClusterError, ClusterRefused, ClusterTimeout, JobExists, JobNotFound
from rlhf_launch.util.enums import StrEnum
from rlhf_launch.util.poll import poll_until


class JobStatus(StrEnum):
    """Ray's job status (ray.job_submission.JobStatus), read from the job API."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self in (JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED)


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    status: JobStatus
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    message: str
    start_time: float | None
    end_time: float | None
    driver_job_id: str | None = None
    driver_exit_code: int | None = None
    driver_node_id: str | None = None

    @classmethod
    def from_api(cls, raw: dict[str, Any]) -> JobInfo:
        def seconds(ms: Any) -> float | None:
            return ms / 1000 if ms else None

        try:
            status = JobStatus(str(raw.get("status", "")))
        except ValueError:
            raise ClusterRefused(f"Ray reported an unknown job status {raw.get('status')!r}") from None
        return cls(
            job_id=raw.get("submission_id") or raw.get("job_id") or "",
            status=status,
            entrypoint=raw.get("entrypoint", ""),
            runtime_env=raw.get("runtime_env") or {},
            metadata=raw.get("metadata") or {},
            message=raw.get("message") or "",
            start_time=seconds(raw.get("start_time")),
            end_time=seconds(raw.get("end_time")),
            driver_job_id=raw.get("job_id"),
            driver_exit_code=raw.get("driver_exit_code"),
            driver_node_id=raw.get("driver_node_id"),
        )


def _needs_upload(runtime_env: dict[str, Any]) -> bool:
    """A local working_dir or py_modules must be packaged and uploaded by Ray's SDK."""
    working_dir = runtime_env.get("working_dir")
    local_dir = isinstance(working_dir, str) and "://" not in working_dir
    modules = runtime_env.get("py_modules") or []
    return local_dir or any(isinstance(m, str) and "://" not in m for m in modules)


class Jobs:
    """The job API of one cluster (see cluster.connection.Cluster for how it is built)."""

    def __init__(self, dashboard: Dashboard):
        self.dashboard = dashboard

    @property
    def address(self) -> str:
        return self.dashboard.address

    def _sdk(self) -> Any:
        from ray.job_submission import JobSubmissionClient

        token = self.dashboard.token
        try:
            return JobSubmissionClient(self.address, headers=token.headers() if token else None)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterRefused(f"cannot use the Ray jobs API at {self.address}: {exc}") from None

    def submit(self, entrypoint: str, runtime_env: dict[str, Any], job_id: str, metadata: dict[str, str]) -> str:
        if _needs_upload(runtime_env or {}):
            try:
                return str(self._sdk().submit_job(entrypoint=entrypoint, runtime_env=runtime_env, submission_id=job_id, metadata=metadata))
            except RuntimeError as exc:
                if "already exists" in str(exc):
                    raise JobExists(f"the cluster already has a job {job_id}") from None
                raise ClusterRefused(f"Ray refused the job: {str(exc).splitlines()[0][:500]}", detail=str(exc)) from None
            except (ConnectionError, TimeoutError, OSError) as exc:  # requests' errors are OSErrors
                raise ClusterTimeout(f"uploading the job to {self.address} did not finish: {exc}", hint="try again") from None
        body: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": job_id, "metadata": metadata}
        if runtime_env:
            body["runtime_env"] = runtime_env
        try:
            answer = self.dashboard.post("/api/jobs/", body)
        except ClusterRefused as exc:
            if "already exists" in exc.detail or "already exists" in exc.message:
                raise JobExists(f"the cluster already has a job {job_id}") from None
            raise ClusterRefused(f"Ray refused the job: {exc.message[:500]}", detail=exc.detail) from None
        return str((answer or {}).get("submission_id", job_id))

    def info(self, job_id: str) -> JobInfo:
        try:
            raw = self.dashboard.get(f"/api/jobs/{job_id}")
        except NotFound:
            raise JobNotFound(f"the cluster at {self.address} has no job {job_id}") from None
        return JobInfo.from_api(raw)

    def status(self, job_id: str) -> JobStatus:
        return self.info(job_id).status

    def logs(self, job_id: str) -> str:
        try:
            return str((self.dashboard.get(f"/api/jobs/{job_id}/logs") or {}).get("logs", ""))
        except NotFound:
            raise JobNotFound(f"the cluster at {self.address} has no job {job_id}") from None

    def follow(self, job_id: str) -> Iterator[str]:
        """Log chunks as they come, until the job ends (Ray's websocket tail).

        The websocket is read by an event loop on a thread of its own, so a Ctrl-C (which
        lands on the main thread) or an abandoned iterator never interrupts the async
        generator mid-step: closing this iterator cancels the reading task and the loop
        shuts it down cleanly (no "async generator ignored GeneratorExit")."""
        sdk = self._sdk()
        chunks: queue.Queue[Any] = queue.Queue(maxsize=256)
        done, stop = object(), threading.Event()
        running: dict[str, Any] = {}

        async def read() -> None:
            agen = sdk.tail_job_logs(job_id)
            try:
                async for chunk in agen:
                    while not stop.is_set():
                        try:
                            chunks.put(chunk, timeout=0.2)
                            break
                        except queue.Full:
                            await asyncio.sleep(0)
                    if stop.is_set():
                        return
            finally:
                await agen.aclose()

        def pump() -> None:
            loop = asyncio.new_event_loop()
            try:
                task = loop.create_task(read())
                running["loop"], running["task"] = loop, task
                loop.run_until_complete(task)
                chunks.put(done)
            except asyncio.CancelledError:
                chunks.put(done)
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                chunks.put(exc)
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

        thread = threading.Thread(target=pump, daemon=True, name=f"rlhf-launch-follow-{job_id}")
        thread.start()
        try:
            while True:
                try:
                    item = chunks.get(timeout=0.5)
                except queue.Empty:
                    if not thread.is_alive() and chunks.empty():
                        return
                    continue
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            loop, task = running.get("loop"), running.get("task")
            if loop is not None and task is not None:
                try:
                    loop.call_soon_threadsafe(task.cancel)
                except RuntimeError:
                    pass  # the loop has finished already
            thread.join(timeout=2.0)

    def wait_terminal(self, job_id: str, seconds: float, interval: float = 0.3) -> JobStatus:
        """The job's status once it ends, or when `seconds` have passed."""
        return poll_until(lambda: self._terminal_or_none(job_id), seconds, interval) or self.status(job_id)

    def _terminal_or_none(self, job_id: str) -> JobStatus | None:
        status = self.status(job_id)
        return status if status.is_terminal() else None

    def delete(self, job_id: str) -> None:
        """Forget a finished job (its logs too); a job Ray no longer has is fine."""
        try:
            self.dashboard.delete(f"/api/jobs/{job_id}")
        except NotFound:
            pass

    def stop(self, job_id: str) -> bool:
        """Ask Ray to stop the job; False when Ray says it was not running (or does not exist)."""
        try:
            return bool((self.dashboard.post(f"/api/jobs/{job_id}/stop", {}) or {}).get("stopped"))
        except NotFound:
            return False

    def list(self) -> list[JobInfo]:
        out = []
        for raw in self.dashboard.get("/api/jobs/") or []:
            if isinstance(raw, dict):
                try:
                    out.append(JobInfo.from_api(raw))
                except ClusterError:
                    continue
        return out
