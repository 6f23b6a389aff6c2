"""Text for people: the plan table, findings and the command. Pure string building."""

from __future__ import annotations

import shlex

from rlhf_launch.findings import Finding
from rlhf_launch.launch import Launch


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def findings_text(findings: list[Finding]) -> list[str]:
    if not findings:
        return ["findings: none"]
    lines = ["findings:"]
    for f in sorted(findings, key=lambda f: f.level != "error"):
        lines.append(f"  {f.level:<7}  {f.key}: {f.message}")
        if f.hint:
            lines.append(f"  {'':<7}  hint: {f.hint}")
    return lines


def pretty_command(launch: Launch) -> str:
    """The `ray job submit` line broken before each flag: still one valid shell command."""
    head, _, _ = launch.command.partition(" -- ")
    lines = [head + " \\", f"    -- {shlex.join(shlex.split(launch.spec.entrypoint)[:3])} \\"]
    argv, pending = launch.argv, []
    for token in argv:
        if token.startswith("--") and pending:
            lines.append("    " + shlex.join(pending) + " \\")
            pending = []
        pending.append(token)
    if pending:
        lines.append("    " + shlex.join(pending))
    else:
        lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines)


def plan_text(launch: Launch) -> str:
    plan, cfg = launch.plan, launch.cfg
    lines = [f"plan {cfg.name}: openrlhf {launch.flags.version} ({'dotted' if launch.flags.dotted else 'flat'} flags)", ""]
    rows = [["role", "nodes x GPUs", "GPUs", "placement group"]]
    for role in plan.roles:
        if role.enabled:
            rows.append([role.role, f"{role.nodes} x {role.gpus_per_node}", str(role.gpus), role.group])
        else:
            rows.append([role.role, "-", "0", role.reason])
    if plan.vllm_engines:
        rows.append(
            ["vllm", f"{plan.vllm_engines} engines x TP {plan.vllm_tp}", str(plan.vllm_gpus), next(g.name for g in plan.groups if "vllm" in g.roles)]
        )
    lines += _table(rows)
    colocate = ", ".join(cfg.placement.colocate) or "none"
    status = "fits" if plan.gpus_required <= plan.cluster_gpus else "DOES NOT FIT"
    lines += [
        "",
        f"  GPUs needed: {plan.gpus_required} = {plan.breakdown()}",
        f"  cluster:     {plan.cluster_gpus} = {plan.cluster_nodes} nodes x {plan.cluster_gpus_per_node} GPUs ({status})",
        f"  colocation:  {colocate}",
        "",
    ]
    lines += findings_text(launch.findings)
    lines += ["", "command:" if launch.ok else "command (not runnable until the errors above are fixed):"]
    lines += ["  " + line for line in pretty_command(launch).splitlines()]
    return "\n".join(lines)
