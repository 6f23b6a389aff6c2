"""The launcher's verdict next to OpenRLHF's own, row by row (config x release).

    rows = compare("0.11.2", corpus("0.11.2"))
    [row for row in rows if row.kind == "launcher-pass/real-reject"]

A row runs the launcher (`prepare`) on a config, then the release's real start-up (harness.py)
on the argv the launcher rendered, whether the launcher accepted it or not.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.core.config import validate
from rlhf_launch.core.findings import Finding
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.errors import UserError

from .corpus import Case
from .harness import Verdict, real_startup_many

# Why the launcher may refuse what OpenRLHF's start-up accepts: the failure comes later.
REASONS = ("placement", "deepspeed_batch", "trainer_init", "memory")


@dataclass
class Row:
    version: str
    case: Case
    launch: Launch | None  # None: the launcher refused the config before planning (UserError)
    refused: str = ""  # the UserError's message, when launch is None
    real: Verdict | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.launch.findings if f.level == "error"] if self.launch else []

    @property
    def expressible(self) -> bool:
        """The release can say what the config asks (no 'has no flag' refusal): a real verdict is meaningful."""
        return self.launch is not None and not any("has no flag" in f.message or "cannot express" in f.message for f in self.errors)

    @property
    def launcher_ok(self) -> bool:
        return self.launch is not None and self.launch.ok

    @property
    def kind(self) -> str:
        if not self.expressible or self.real is None:
            return "not-expressible"
        launcher = "pass" if self.launcher_ok else "reject"
        real = "pass" if self.real.ok else "reject"
        return f"launcher-{launcher}/real-{real}"

    @property
    def unexplained(self) -> list[Finding]:
        """Launcher errors that name no reason for refusing what OpenRLHF accepts."""
        return [f for f in self.errors if getattr(f, "reason", "") not in REASONS]

    @property
    def placement_mismatch(self) -> str:
        """'' when the launcher's placement groups are the real ones, in order; else both."""
        if self.launch is None or self.real is None or not self.real.ok:
            return ""
        ours = [g.bundles for g in self.launch.plan.groups if g.packed]
        return "" if ours == self.real.bundle_counts else f"launcher {ours}, real {self.real.bundle_counts}"

    def describe(self) -> str:
        launcher = "refused: " + self.refused if self.launch is None else "; ".join(f"{f.key}: {f.message}" for f in self.errors) or "ok"
        real = (
            "-" if self.real is None else ("ok" if self.real.ok else f"{self.real.stage} {self.real.error_type}: {self.real.message[:160]}")
        )
        return f"{self.version} {self.case.name}\n    launcher: {launcher}\n    real:     {real}"


def launch_of(version: str, case: Case) -> tuple[Launch | None, str]:
    try:
        cfg = validate({"name": case.data.get("name", "corpus"), **case.data}, source=case.name)
        return prepare(cfg, version=version, environ={}), ""
    except UserError as exc:
        return None, exc.message


def compare(version: str, cases: list[Case]) -> list[Row]:
    rows = []
    for case in cases:
        launch, refused = launch_of(version, case)
        rows.append(Row(version, case, launch, refused))
    runnable = [row for row in rows if row.expressible]
    verdicts = real_startup_many(version, [row.launch.argv for row in runnable if row.launch is not None])
    for row, verdict in zip(runnable, verdicts, strict=True):
        row.real = verdict
    return rows


def summary(rows: list[Row]) -> dict[str, Any]:
    counts = Counter(row.kind for row in rows)
    unexplained = [row for row in rows if row.kind == "launcher-reject/real-pass" and row.unexplained]
    reasons = Counter(f.reason for row in rows if row.kind == "launcher-reject/real-pass" for f in row.errors if getattr(f, "reason", ""))
    return {
        "rows": len(rows),
        **counts,
        "launcher-reject/real-pass unexplained": len(unexplained),
        "reasons": dict(reasons),
        "placement mismatches": sum(1 for row in rows if row.placement_mismatch),
    }
