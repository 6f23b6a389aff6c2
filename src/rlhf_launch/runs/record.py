"""The run registry: one JSON record per run under the state dir, written atomically.

A record holds a run's resolved config, rendered argv, OpenRLHF version, cluster address and
every attempt, so `resume` works after the cluster restarted and Ray's job table is gone.
Writes go to a temp file that is fsynced and renamed over the record, under a per-run lock:
a crash mid-write leaves the previous record intact. Records are never deleted; one that
cannot be read is reported with its path (`RecordUnreadable`) and left as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlhf_launch.errors import RecordUnreadable, UserError
from rlhf_launch.runs.status import AttemptStatus, RunStatus
from rlhf_launch.util import filelock


def state_dir() -> Path:
    if os.environ.get("RLHF_LAUNCH_HOME"):
        return Path(os.environ["RLHF_LAUNCH_HOME"]).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rlhf-launch"


def runs_dir() -> Path:
    return state_dir() / "runs"


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Attempt:
    number: int
    job_id: str
    reason: str  # submit | resume | auto-resume | placement-retry | grow
    load_checkpoint: bool
    submitted: float
    status: AttemptStatus = AttemptStatus.PENDING
    ended: float | None = None
    message: str = ""
    resumed_from_step: int | None = None
    diagnosis: dict[str, Any] | None = None  # why it failed or stalled (diagnose/)


@dataclass
class Run:
    run_id: str
    name: str
    created: float
    address: str
    openrlhf_version: str
    config: dict[str, Any]
    config_hash: str
    config_source: str
    overrides: list[str]
    argv: list[str]  # without the checkpoint load flag
    runtime_env: dict[str, Any]  # as shown: the W&B key redacted
    ckpt_path: str
    attempts: list[Attempt] = field(default_factory=list)
    status: RunStatus = RunStatus.PENDING
    stopped_by_user: bool = False
    # supervision (auto-resume): how many automatic resumes, backoff and poll seconds, which
    # failure classes to retry beyond the default policy, and what the plan needs
    auto_resume: int = 0
    backoff: float = 10.0
    poll: float = 5.0
    retry_on: list[str] = field(default_factory=list)
    no_retry_on: list[str] = field(default_factory=list)
    gpus_required: int = 0
    params_billion: float | None = None
    nodes: int = 1
    total_steps: int | None = None  # the plan's count from max_samples (an upper bound; the bar knows better)
    rollout_batch_size: int | None = None  # prompts per global step: reads a 0.9.1+ episode bar as steps
    # the plan's step-time estimate at submit (StepEstimate.as_json: step_s, phases_s, steps,
    # gpu, ...): progress compares the trainer's timing/* with it, and the ETA starts from it
    estimate: dict[str, Any] | None = None
    supervisor_job: str | None = None  # the cluster-side supervisor's Ray job
    diagnosis: dict[str, Any] | None = None  # why the last attempt failed or stalled
    progress: dict[str, Any] | None = None  # step N of M, steps per hour, ETA, reward, KL
    # plan revisions after lost nodes (fit/replan.py Revision.as_json), oldest first; the
    # config, argv and gpus_required above are the latest revision's
    revisions: list[dict[str, Any]] = field(default_factory=list)
    # the --token-file given at submit (its absolute path, never the token): later verbs on this
    # run use it when they are given no token themselves
    token_file: str = ""

    @property
    def current(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def auto_resumes_used(self) -> int:
        """Automatic resumes since a user last submitted or resumed the run (the budget)."""
        since = max((i for i, a in enumerate(self.attempts) if a.reason in ("submit", "resume")), default=0)
        return sum(1 for a in self.attempts[since:] if a.reason == "auto-resume")

    @property
    def final(self) -> bool:
        return self.status.is_final()

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Summary(Run):
    """A run as `runs` lists it: the record without its config, overrides, argv and
    runtime_env (empty here), read through the listing index. Never saved."""


_FIELDS: dict[type, frozenset[str]] = {}


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The fields `cls` has (records written by other launcher versions may have more)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return {k: v for k, v in data.items() if k in names}


def from_json(data: dict[str, Any], cls: type[Run] = Run) -> Run:
    attempts = []
    for raw in data.get("attempts", []):
        entry = _known(Attempt, raw)
        entry["status"] = AttemptStatus(entry.get("status", "PENDING"))
        attempts.append(Attempt(**entry))
    fields = _known(Run, data)
    fields["attempts"] = attempts
    fields["status"] = RunStatus(fields.get("status", "PENDING"))
    return cls(**fields)


def path_of(run_id: str) -> Path:
    return runs_dir() / f"{run_id}.json"


def new_run_id(name: str) -> str:
    """`<name>-<time>-<6 hex>`: unique across machines and parallel submits of one config
    (the run's job ids, `<run>-<attempt>`, are unique in the cluster only if runs are)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    runs_dir().mkdir(parents=True, exist_ok=True)
    while True:
        run_id = f"{name}-{stamp}-{secrets.token_hex(3)}"
        if not path_of(run_id).exists():
            return run_id


def save(run: Run) -> None:
    """Atomic: write a temp file, fsync, rename over the record, fsync the directory."""
    if isinstance(run, Summary):
        raise TypeError(f"run {run.run_id}: a Summary lacks the record's config; load() the run to change it")
    directory = runs_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = path_of(run.run_id)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    data = json.dumps(run.as_json(), indent=2, sort_keys=True, default=str).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _read(path: Path) -> Run:
    data = _parse(path)
    try:
        return from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RecordUnreadable(str(path), f"{type(exc).__name__}: {exc}") from None


def _parse(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordUnreadable(str(path), f"{type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise RecordUnreadable(str(path), exc.strerror or str(exc)) from None
    if not isinstance(data, dict):
        raise RecordUnreadable(str(path), f"TypeError: a record is a JSON object, not {type(data).__name__}")
    return data


def load(run_id: str) -> Run:
    path = path_of(run_id)
    if not path.exists():
        raise UserError(f"no run {run_id!r} in {runs_dir()}", hint="rlhf-launch runs lists the runs")
    return _read(path)


@dataclass(frozen=True)
class Listing:
    """Every record under the state dir: the readable runs (oldest first) and the others."""

    runs: list[Run]
    unreadable: list[RecordUnreadable]


def listing() -> Listing:
    directory = runs_dir()
    if not directory.is_dir():
        return Listing([], [])
    runs, bad = [], []
    for path in sorted(directory.glob("*.json")):
        try:
            runs.append(_read(path))
        except RecordUnreadable as exc:
            bad.append(exc)
    return Listing(sorted(runs, key=lambda r: r.created), bad)


# The listing index: each record's summary (the record without HEAVY), keyed by the file's
# inode, size, mtime and ctime, so `runs` parses only records that changed since. A record
# is indexed only once it is SETTLED_NS old: a rewrite within the file system's timestamp
# granularity (a few ms) can then never keep the key of what the index holds. The index is
# a cache: unreadable, missing or from another version, it is rebuilt; writers race
# harmlessly (each renames a whole file into place).
INDEX = ".listing-index"  # no .json suffix: not a record
INDEX_VERSION = 1
HEAVY = ("config", "overrides", "argv", "runtime_env")
SETTLED_NS = 2_000_000_000


def _index_entries(directory: Path) -> dict[str, Any]:
    try:
        index = json.loads((directory / INDEX).read_bytes())
    except (OSError, ValueError):
        return {}
    records = index.get("records") if isinstance(index, dict) and index.get("version") == INDEX_VERSION else None
    return records if isinstance(records, dict) else {}


def _write_index(directory: Path, records: dict[str, Any]) -> None:
    tmp = directory / f"{INDEX}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps({"version": INDEX_VERSION, "records": records}, default=str).encode())
        finally:
            os.close(fd)
        os.replace(tmp, directory / INDEX)
    except OSError:  # a read-only state dir: list without the index
        tmp.unlink(missing_ok=True)


def summaries() -> Listing:
    """Every record as `runs` lists it (Summary: no config, argv, runtime_env), oldest first,
    and the unreadable ones: what listing() gives, reading only the records that changed."""
    directory = runs_dir()
    if not directory.is_dir():
        return Listing([], [])
    cached = _index_entries(directory)
    kept: dict[str, Any] = {}
    now = time.time_ns()
    out, bad = [], []
    with os.scandir(directory) as entries:
        records = sorted((e for e in entries if e.name.endswith(".json")), key=lambda e: e.name)
    for entry in records:
        try:
            st = entry.stat()
            key = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
            hit = cached.get(entry.name)
            if isinstance(hit, list) and len(hit) == 2 and hit[0] == key:
                summary = hit[1]
            else:
                summary = {k: v for k, v in _parse(Path(entry.path)).items() if k not in HEAVY}
            run = from_json({**summary, "config": {}, "overrides": [], "argv": [], "runtime_env": {}}, Summary)
        except RecordUnreadable as exc:
            bad.append(exc)
            continue
        except OSError as exc:
            bad.append(RecordUnreadable(entry.path, exc.strerror or str(exc)))
            continue
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            bad.append(RecordUnreadable(entry.path, f"{type(exc).__name__}: {exc}"))
            continue
        if now - st.st_mtime_ns > SETTLED_NS:
            kept[entry.name] = [key, summary]
        out.append(run)
    if kept != cached:
        _write_index(directory, kept)
    return Listing(sorted(out, key=lambda r: r.created), bad)


def all_runs() -> list[Run]:
    return listing().runs


def find(run_id: str | None) -> Run:
    """A run by id (or unique prefix); None = the latest run."""
    if run_id:
        if path_of(run_id).exists():
            return load(run_id)
        matches = [r for r in all_runs() if r.run_id.startswith(run_id)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise UserError(f"{run_id!r} matches {len(matches)} runs", hint=", ".join(r.run_id for r in matches[:5]))
        return load(run_id)
    runs = all_runs()
    if not runs:
        raise UserError("no runs yet", hint="rlhf-launch submit CONFIG")
    return runs[-1]


@contextmanager
def locked(run_id: str) -> Iterator[None]:
    """Serialise read-modify-write of one record between processes."""
    with filelock.locked(runs_dir() / f".{run_id}.lock"):
        yield


def update(run_id: str, change: Callable[[Run], None]) -> Run:
    with locked(run_id):
        run = load(run_id)
        change(run)
        save(run)
        return run
