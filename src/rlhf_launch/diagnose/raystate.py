"""Ray's view of an attempt as log-like lines (`[ray state] ...`), appended after the log
so the same rules read them: the job message, dead actors with their death causes, pending
placement groups, a SIGKILLed driver."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["any_pending", "state_lines"]


def any_pending(pending_groups: Sequence[Mapping[str, Any]]) -> bool:
    return any(str(g.get("state", "PENDING")).upper() == "PENDING" for g in pending_groups)


def state_lines(
    job_message: str, dead_actors: Sequence[Mapping[str, Any]], pending_groups: Sequence[Mapping[str, Any]], exit_code: int | None
) -> list[str]:
    lines = [line for line in job_message.splitlines() if line.strip()]
    for actor in dead_actors:
        who = f"actor {actor.get('class_name') or actor.get('name') or '?'} {str(actor.get('actor_id') or '')[:12]}".rstrip()
        node = str(actor.get("node_id") or "")[:12]
        head = f"[ray state] {who} {actor.get('state') or 'DEAD'}" + (f" on node {node}" if node else "")
        for text in death_texts(actor.get("death_cause")) or death_texts(actor.get("error_message") or actor.get("exit_detail")):
            for part in text.splitlines() or [""]:
                if part.strip():
                    lines.append(f"{head}: {part.strip()}")
    for group in pending_groups:
        if str(group.get("state", "PENDING")).upper() != "PENDING":
            continue
        bundles = group.get("bundles") or []
        lines.append(
            f"[ray state] placement group {str(group.get('placement_group_id') or group.get('name') or '')[:12]} PENDING: "
            f"{len(bundles)} bundles {_bundle_summary(bundles)}".rstrip()
        )
    if exit_code is not None and exit_code in (137, -9):
        lines.append(f"[ray state] driver exit code 137 (SIGKILL), reported {exit_code}")
    return lines


def death_texts(cause: Any) -> list[str]:
    """Ray's ActorDeathCause (state API dict, snake or camel case) as readable text."""
    if cause is None or cause == "":
        return []
    if not isinstance(cause, Mapping):
        return [str(cause)]
    out: list[str] = []
    for key, value in cause.items():
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", str(key)).lower()
        if isinstance(value, Mapping):
            message = str(value.get("error_message") or value.get("errorMessage") or value.get("formatted_exception_string") or "")
            message = message or str(value.get("formattedExceptionString") or "")
            reason = str(value.get("reason") or "")
            info = value.get("node_death_info") or value.get("nodeDeathInfo") or {}
            detail = str(info.get("reason_message") or info.get("reasonMessage") or "") if isinstance(info, Mapping) else ""
            label = {"oom_context": "OUT_OF_MEMORY (oom_context)", "runtime_env_failed_context": "runtime env failed to be created"}.get(
                name, name
            )
            first = f"{label}" + (f" reason {reason}" if reason else "") + (f" ({detail})" if detail else "")
            out.append(first + (f": {message}" if message else ""))
        elif value not in (None, ""):
            out.append(f"{name}: {value}")
    return out


def _bundle_summary(bundles: Sequence[Any]) -> str:
    totals: dict[str, float] = {}
    for bundle in bundles:
        resources = bundle.get("unit_resources", bundle) if isinstance(bundle, Mapping) else {}
        for name, amount in (resources or {}).items():
            if isinstance(amount, (int, float)):
                totals[str(name)] = totals.get(str(name), 0.0) + float(amount)
    return ", ".join(f"{name} {amount:g}" for name, amount in sorted(totals.items()))
