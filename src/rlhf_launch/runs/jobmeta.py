"""What every Ray job of a run carries, so that any machine with the cluster's address and
token can rebuild the run, and every process of a job can be found on every node.

- Job ids are deterministic: attempt N of run R is `R-N`, its supervisor's K-th start is
  `R-supervisor-K`. Ray refuses a second job with an id it has, so two processes racing to
  submit the same attempt cannot both succeed.
- A user's stop is on the cluster too: `R-stopped-N`, a job that does nothing, says the run
  was stopped at attempt N. Every supervisor and every machine sees it; a `resume` (attempt
  N+1) is not stopped.
- Job metadata names the run, the job's role (trainer or supervisor), the attempt, why it
  was submitted, and the run's record (config, argv, release, policy) as JSON. It never
  holds the W&B key (records never do).
- runtime_env env_vars get RLHF_LAUNCH_RUN and RLHF_LAUNCH_JOB: Ray passes them to every
  process of the job, which is how `stop` and the supervisor find a trainer's processes.
"""

from __future__ import annotations

import json
from typing import Any

from rlhf_launch.runs.record import Run, from_json

SCHEMA = "1"
RUN_VAR = "RLHF_LAUNCH_RUN"
JOB_VAR = "RLHF_LAUNCH_JOB"
TRAINER, SUPERVISOR, STOP = "trainer", "supervisor", "stop"

# Record fields that belong to one machine's view, not to the run's definition.
_LOCAL_ONLY = ("attempts", "status", "stopped_by_user", "address", "diagnosis", "progress")


def attempt_job_id(run_id: str, number: int) -> str:
    return f"{run_id}-{number}"


def supervisor_job_id(run_id: str, generation: int) -> str:
    return f"{run_id}-supervisor-{generation}"


def stop_marker_id(run_id: str, number: int) -> str:
    return f"{run_id}-stopped-{number}"


def record_json(run: Run) -> str:
    data = {k: v for k, v in run.as_json().items() if k not in _LOCAL_ONLY}
    return json.dumps({"schema": SCHEMA, **data}, sort_keys=True, separators=(",", ":"), default=str)


def metadata(run: Run, role: str, number: int, reason: str) -> dict[str, str]:
    return {
        "rlhf_launch_run": run.run_id,
        "rlhf_launch_role": role,
        "rlhf_launch_attempt": str(number),
        "rlhf_launch_reason": reason,
        "rlhf_launch_config_hash": run.config_hash,
        "rlhf_launch_record": record_json(run),
    }


def with_markers(runtime_env: dict[str, Any], run_id: str, job_id: str) -> dict[str, Any]:
    env: dict[str, Any] = json.loads(json.dumps(runtime_env or {}))
    env.setdefault("env_vars", {}).update({RUN_VAR: run_id, JOB_VAR: job_id})
    return env


def role_of(meta: dict[str, str]) -> str | None:
    """TRAINER, SUPERVISOR, or None for a job rlhf-launch did not submit for a run."""
    if not meta.get("rlhf_launch_run"):
        return None
    return meta.get("rlhf_launch_role", TRAINER)


def number_of(meta: dict[str, str]) -> int:
    try:
        return int(meta.get("rlhf_launch_attempt", "0"))
    except ValueError:
        return 0


def run_from_metadata(meta: dict[str, str], address: str) -> Run | None:
    """The run a job belongs to, rebuilt from its metadata (None if it carries no record)."""
    raw = meta.get("rlhf_launch_record")
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    data.pop("schema", None)
    data["address"] = address
    try:
        return from_json(data)
    except (TypeError, ValueError, KeyError):
        return None
