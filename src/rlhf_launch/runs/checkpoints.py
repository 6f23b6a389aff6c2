"""OpenRLHF checkpoints: read the layout, find the latest step, spot broken or unshared ones.

Layout (from OpenRLHF's trainer): <ckpt_path>/_actor/ and _critic/ are DeepSpeed
checkpoint dirs holding global_step<N>/ and a `latest` file naming the newest tag;
global_step<N>_hf/ sit beside them. With the load flag and no _actor/, training starts
fresh; _actor/ without `latest` makes the trainer fail.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlhf_launch.cluster import probe
from rlhf_launch.cluster.jobs import Jobs
from rlhf_launch.cluster.probes.ckpt import listing as local_listing
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.errors import ClusterRefused

_STEP = re.compile(r"^(?:best_)?global_step(\d+)$")
_HF = re.compile(r"^global_step(\d+)_hf$")


def _step(tag: str | None) -> int | None:
    match = _STEP.match(tag or "")
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class RoleState:
    role: str
    steps: tuple[int, ...]
    latest: str | None
    latest_step: int | None
    problem: str = ""


@dataclass(frozen=True)
class CheckpointState:
    path: str
    exists: bool
    roles: dict[str, RoleState] = field(default_factory=dict)
    hf_steps: tuple[int, ...] = ()
    seen_by: str = ""  # on a cluster: how the listing was read

    @property
    def actor(self) -> RoleState | None:
        return self.roles.get("actor")

    @property
    def status(self) -> str:
        """none (fresh start), ok, or broken."""
        if self.actor is None:
            return "none"
        return "broken" if any(r.problem for r in self.roles.values()) else "ok"

    @property
    def latest_step(self) -> int | None:
        return self.actor.latest_step if self.actor else None

    def problems(self) -> list[str]:
        return [f"{r.role}: {r.problem}" for r in self.roles.values() if r.problem]

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "exists": self.exists,
            "status": self.status,
            "latest_step": self.latest_step,
            "roles": {
                name: {"steps": list(r.steps), "latest": r.latest, "latest_step": r.latest_step, "problem": r.problem}
                for name, r in self.roles.items()
            },
            "hf_steps": list(self.hf_steps),
            "problems": self.problems(),
            **({"seen_by": self.seen_by} if self.seen_by else {}),
        }


def parse(data: dict[str, Any]) -> CheckpointState:
    """Pure: a listing (see probes/ckpt.listing) -> what is there."""
    roles = {}
    for raw_name, info in (data.get("roles") or {}).items():
        name = raw_name.lstrip("_")
        steps = tuple(sorted(s for s in (_step(e) for e in info.get("entries", [])) if s is not None))
        latest = info.get("latest")
        latest_step = _step(latest)
        problem = ""
        if latest is None:
            problem = f"_{name}/ has no `latest` file: the trainer cannot load it (remove the directory or restore `latest`)"
        elif latest not in info.get("entries", []):
            problem = f"`latest` names {latest}, which is not in _{name}/"
        roles[name] = RoleState(name, steps, latest, latest_step, problem)
    hf = tuple(sorted(int(m.group(1)) for m in (_HF.match(e) for e in data.get("root", [])) if m))
    return CheckpointState(path=data.get("path", ""), exists=bool(data.get("exists")), roles=roles, hf_steps=hf)


def read_local(path: str | Path) -> CheckpointState:
    return parse(local_listing(str(path)))


def compare_nodes(per_node: dict[str, dict[str, Any]]) -> list[Finding]:
    """Pure: the per-node listings of one ckpt_path must agree, or it is not shared storage."""
    views = {}
    for node_id, entry in per_node.items():
        state = parse(entry["listing"])
        views[entry.get("ip") or node_id[:8]] = (state.status, state.latest_step, state.actor.latest if state.actor else None)
    distinct = set(views.values())
    if len(distinct) <= 1:
        return []
    detail = "; ".join(f"{ip}: latest {v[2] or 'none'}" for ip, v in sorted(views.items()))
    return [
        error(
            "checkpoint.ckpt_path",
            f"nodes see different checkpoints under the same ckpt_path ({detail}): it is not on shared storage, "
            "and a multi-node resume would load different steps or fail",
            "put checkpoint.ckpt_path on storage every node mounts (NFS, Lustre, ...)",
        )
    ]


def state_findings(state: CheckpointState) -> list[Finding]:
    """Pure: a `latest` that names an older step than the newest on disk (a fresh run that
    wrote over another's, or a save that did not finish): the trainer resumes from `latest`."""
    out = []
    for role in state.roles.values():
        if role.latest_step is not None and role.steps and max(role.steps) > role.latest_step:
            out.append(
                warning(
                    f"checkpoint.{role.role}",
                    f"_{role.role}/latest names {role.latest} but global_step{max(role.steps)} is on disk: "
                    f"a resume loads step {role.latest_step}, not {max(role.steps)}",
                    f"if step {max(role.steps)} is complete, write `global_step{max(role.steps)}` into {state.path}/_{role.role}/latest",
                )
            )
    return out


def move_aside(jobs: Jobs, path: str) -> tuple[str, list[str]]:
    """Move the checkpoints at `path` into <path>/.rlhf-launch-aside/<stamp>/ on every node
    (never deleted): -> (where they went, what moved)."""
    import json
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    ran = probe.run(jobs, "aside.py", json.dumps({"path": path, "stamp": stamp}), 120, "aside")
    if not ran.result:
        raise ClusterRefused(f"could not move the checkpoints at {path} aside (probe job {ran.job_id} ended {ran.status})")
    errors = [f"{entry.get('ip')}: {e}" for entry in ran.result.values() for e in entry.get("errors", [])]
    if errors:
        raise ClusterRefused(f"moving the checkpoints at {path} aside failed: " + "; ".join(errors[:3]))
    moved = sorted({name for entry in ran.result.values() for name in entry.get("moved", [])})
    first: dict[str, Any] = next(iter(ran.result.values()), {})
    target = first.get("to", f"{path}/.rlhf-launch-aside/{stamp}")
    return str(target), moved


def resume_findings(state: CheckpointState, allow_fresh: bool) -> list[Finding]:
    if state.status == "broken":
        return [error("checkpoint", f"broken checkpoint at {state.path}: " + "; ".join(state.problems()))]
    if state.status == "none":
        message = f"no checkpoint under {state.path} yet (no _actor/)"
        if allow_fresh:
            return [warning("checkpoint", message + ": training starts from step 0")]
        return [error("checkpoint", message, "pass --allow-fresh to start again from step 0")]
    return []


def discover(jobs: Jobs | None, path: str) -> tuple[CheckpointState, list[Finding]]:
    """The trainer's view of ckpt_path: listed on every alive node when a cluster is at hand
    (they must agree, or the path is not shared storage), else on this machine."""
    if jobs is None:
        state = read_local(path)
        return state, state_findings(state)
    from rlhf_launch.cluster import ckptwatch

    per_node, seen_by = ckptwatch.read(jobs.dashboard, path), "the nodes' agents (watching it)"
    if per_node is None:  # no fresh watch on some node: ask the agents by a probe job (and start their watch)
        per_node, seen_by = ckptwatch.by_probe_job(jobs, path), "a probe job"
    first = replace(parse(next(iter(per_node.values()))["listing"]), seen_by=seen_by)
    return first, compare_nodes(per_node) + state_findings(first)
