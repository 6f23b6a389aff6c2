"""Every real launch script round-trips: `import` then `plan` gives the trainer the script's arguments.

For each script of tests/data/scripts/field/MANIFEST.yaml (OpenRLHF's own examples at every tag
from v0.8.0, and scripts from other public repositories), the test runs `rlhf-launch import`
and `rlhf-launch plan --json` through the CLI, then hands both argvs, the script's (its shell
resolved the way import resolved it) and the plan's, to OpenRLHF's real start-up at the same
release (tests/fidelity/harness.py). `vars(args)` as `train()` receives it, after the trainer's
own corrections, must be equal key by key, except the few keys of LEGITIMATE (each with its
reason). A refusal by `import` or by `plan` is a failure too, with its message.

The default run reads each distinct script once, with the parser of the first tag that holds it;
`-m slow` also reads every other (tag, release) copy the manifest lists. Held-out scripts
(`heldout: true`) are scored like the rest; import rules are not written against them.

`python tests/importer/test_import_roundtrip.py [--all]` prints the summary table (scripts, passed, failed
by reason, per half) and every failure.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlhf_launch.cli.app import app
from rlhf_launch.importer import parse_script

from fidelity.harness import Verdict, real_startup_many

pytestmark = pytest.mark.fidelity

FIELD = Path(__file__).parents[1] / "data" / "scripts" / "field"
MANIFEST = FIELD / "MANIFEST.yaml"
FAKE_KEY = "0123456789abcdef0123456789abcdef01234567"  # stands for the user's WANDB_API_KEY; never a real one

# The keys of vars(args) that may differ between the script and the plan, and why. Nothing else may.
LEGITIMATE: dict[str, str] = {
    "use_wandb": "the W&B key: the launcher passes it from WANDB_API_KEY in its own environment, never the "
    "script's value; compared as set / not set",
    "logger.wandb.key": "the W&B key (dotted releases): as use_wandb",
    "wandb_run_name": "OpenRLHF's default is the start time (ppo_%m%dT%H:%M): skipped only when both are such defaults",
    "logger.wandb.run_name": "as wandb_run_name (dotted releases)",
}
PRESENCE_ONLY = {"use_wandb", "logger.wandb.key"}
# OpenRLHF's default W&B run name is the start time, ppo_%m%dT%H:%M: two start-ups a minute apart differ.
CLOCK = re.compile(r"ppo_\d{4}T\d\d:\d\d")

MEMORY_WORDS = ("exceeds", "gpu memory", "gib per gpu", "out of memory")


@dataclass(frozen=True)
class Case:
    id: str  # the file name, or file@release for another copy's release
    file: str  # relative to FIELD
    release: str | None  # the release whose parser reads it; None: import picks
    origin: str  # "openrlhf" or owner/name
    heldout: bool
    variables: tuple[tuple[str, str], ...] = ()  # what the script's caller sets (the manifest's `vars`, given as --var)
    as_target: bool = False  # import with --openrlhf-version RELEASE (the release that runs it) instead of --script-version

    @property
    def half(self) -> str:
        if self.origin == "openrlhf":
            return "openrlhf"
        return "heldout" if self.heldout else "rules"


@dataclass
class Outcome:
    case: Case
    reason: str = ""  # "" when the round trip holds; else the failure's cause, short
    detail: list[str] = field(default_factory=list)  # one line per differing key, or the messages
    release: str = ""
    note: str = ""  # on a pass: flags OpenRLHF itself rejects, left out of the comparison
    import_output: str = ""

    @property
    def ok(self) -> bool:
        return not self.reason


def _cases() -> tuple[list[Case], list[Case]]:
    """(default cases, the extra copies for -m slow)."""
    data = yaml.safe_load(MANIFEST.read_text())
    first: list[Case] = []
    more: list[Case] = []
    for entry in data["scripts"]:
        name = Path(entry["file"]).name
        release = entry.get("release")
        variables = tuple((str(k), str(v)) for k, v in (entry.get("vars") or {}).items())
        case = Case(name, entry["file"], release, entry["origin"], bool(entry.get("heldout")), variables)
        first.append(case)
        others = sorted({c["release"] for c in entry.get("copies") or []} - {release})
        more += [Case(f"{name}@{r}", entry["file"], r, entry["origin"], case.heldout, variables) for r in others]
    return first, more


FIRST, MORE = _cases()


def _trainer_argv(text: str, variables: tuple[tuple[str, str], ...]) -> list[str]:
    """The script's trainer argv as import reads it, with what its caller sets."""
    return list(parse_script(text, dict(variables)).argv)


def _messages(findings: list[dict[str, Any]]) -> list[str]:
    return [f"{f['key']}: {f['message']}" for f in findings if f.get("level") == "error"]


def _is_memory(lines: list[str]) -> bool:
    return any(word in line.lower() for line in lines for word in MEMORY_WORDS)


@dataclass
class _Pending:
    outcome: Outcome
    script_argv: list[str] = field(default_factory=list)
    plan_argv: list[str] = field(default_factory=list)


def _import_and_plan(case: Case, tmp: Path, runner: CliRunner) -> _Pending:
    path = FIELD / case.file
    outcome = Outcome(case)
    pending = _Pending(outcome)
    config = tmp / (case.id.replace("/", "_") + ".yaml")
    args = ["import", str(path), "-o", str(config), "--force"]
    if case.release:
        args += ["--openrlhf-version" if case.as_target else "--script-version", case.release]
    for name, value in case.variables:
        args += ["--var", f"{name}={value}"]
    done = runner.invoke(app, args, env={"WANDB_API_KEY": None})
    outcome.import_output = done.output
    if not config.exists():
        lines = [line for line in done.output.splitlines() if line.strip()][-4:] or [repr(done.exception)]
        outcome.reason = "import refused (memory)" if _is_memory(lines) else "import refused"
        outcome.detail = lines
        return pending
    planned = runner.invoke(app, ["plan", str(config), "--json"], env={"WANDB_API_KEY": FAKE_KEY})
    try:
        data = json.loads(planned.stdout)
    except ValueError:
        outcome.reason = "plan crashed"
        outcome.detail = [line for line in planned.output.splitlines() if line.strip()][-4:] or [repr(planned.exception)]
        return pending
    outcome.release = data.get("openrlhf_version") or ""
    pending.script_argv = _trainer_argv(path.read_text(), case.variables)
    if planned.exit_code != 0 or not data.get("ok"):
        lines = _messages(data.get("findings") or [])
        outcome.reason = "plan refused (memory)" if _is_memory(lines) else "plan refused"
        outcome.detail = lines
        return pending
    pending.plan_argv = list(data["trainer_argv"])
    return pending


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


UNRECOGNIZED = "unrecognized arguments: "


def _without(argv: list[str], extras: list[str]) -> list[str]:
    """argv less the words argparse left over (they come in argv's order)."""
    kept, j = [], 0
    for word in argv:
        if j < len(extras) and word == extras[j]:
            j += 1
        else:
            kept.append(word)
    return kept


def _unknown_flags(verdict: Verdict) -> list[str]:
    if verdict.stage != "parse" or not verdict.message.startswith(UNRECOGNIZED):
        return []
    return verdict.message[len(UNRECOGNIZED) :].split()


def _compare(outcome: Outcome, script: Verdict, plan: Verdict) -> None:
    if script.harness_error or plan.harness_error:
        outcome.reason = "harness error"
        outcome.detail = [(script.harness_error or plan.harness_error).splitlines()[0]]
        return
    if script.stage == "parse":
        outcome.reason = f"script rejected by OpenRLHF's parser: {script.message[:200]}"
        return
    if plan.stage == "parse":
        outcome.reason = "plan argv rejected by OpenRLHF's parser"
        outcome.detail = [plan.message]
        return
    diffs = []
    for key in sorted(set(script.args) | set(plan.args)):
        want, got = script.args.get(key), plan.args.get(key)
        if key in ("wandb_run_name", "logger.wandb.run_name"):
            if all(isinstance(v, str) and CLOCK.fullmatch(v) for v in (want, got)):
                continue
        elif key in LEGITIMATE and key not in PRESENCE_ONLY:
            continue
        if key in PRESENCE_ONLY:
            want, got = bool(want), bool(got)
        if want != got:
            diffs.append(f"{key}: script {_show(want)} plan {_show(got)}")
    if diffs:
        outcome.reason = "arguments differ"
        outcome.detail = diffs
    elif script.ok != plan.ok:
        outcome.reason = "start-up verdict differs"
        outcome.detail = [f"script: {script.stage} {script.message[:100]}", f"plan: {plan.stage} {plan.message[:100]}"]


def run_cases(cases: list[Case]) -> list[Outcome]:
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        pendings = [_import_and_plan(case, Path(tmp), runner) for case in cases]
    by_release: dict[str, list[_Pending]] = defaultdict(list)
    for p in pendings:
        if p.outcome.ok:
            by_release[p.outcome.release].append(p)
    for release, group in by_release.items():
        argvs = [argv for p in group for argv in (p.script_argv, p.plan_argv)]
        verdicts = real_startup_many(release, argvs)
        retry = []
        for i, p in enumerate(group):
            extras = _unknown_flags(verdicts[2 * i])
            if extras:  # the trainer itself rejects these words: compare the rest, and import must say so
                p.script_argv = _without(p.script_argv, extras)
                p.outcome.note = " ".join(extras)
                retry.append((p, verdicts[2 * i + 1]))
            else:
                _compare(p.outcome, verdicts[2 * i], verdicts[2 * i + 1])
        again = real_startup_many(release, [p.script_argv for p, _ in retry])
        for (p, plan), script in zip(retry, again, strict=True):
            _compare(p.outcome, script, plan)
            unreported = [w for w in p.outcome.note.split() if w.startswith("--") and w not in p.outcome.import_output]
            if p.outcome.ok and unreported:
                p.outcome.reason = "import does not report flags OpenRLHF rejects"
                p.outcome.detail = unreported
    # For a refused plan: does OpenRLHF accept the script? (said beside the refusal)
    refused = [p for p in pendings if p.outcome.reason.startswith("plan refused") and p.outcome.release and p.script_argv]
    by_release = defaultdict(list)
    for p in refused:
        by_release[p.outcome.release].append(p)
    for release, group in by_release.items():
        for p, verdict in zip(group, real_startup_many(release, [p.script_argv for p in group]), strict=True):
            said = "accepts the script" if verdict.ok else f"refuses the script too ({verdict.stage}: {verdict.message[:120]})"
            p.outcome.detail.append(f"OpenRLHF {release} {said}")
    return [p.outcome for p in pendings]


@cache
def _outcomes(slow: bool) -> dict[str, Outcome]:
    return {o.case.id: o for o in run_cases(MORE if slow else FIRST)}


def _check(case: Case, slow: bool) -> None:
    outcome = _outcomes(slow)[case.id]
    assert outcome.ok, f"{case.id} ({case.half}, openrlhf {outcome.release or case.release}): {outcome.reason}\n  " + "\n  ".join(
        outcome.detail
    )


@pytest.mark.parametrize("case", FIRST, ids=[c.id for c in FIRST])
def test_script_round_trips(case: Case) -> None:
    _check(case, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("case", MORE, ids=[c.id for c in MORE])
def test_every_copy_round_trips(case: Case) -> None:
    _check(case, slow=True)


# Imported for the release that runs them (--openrlhf-version, the release detected otherwise being newer):
# 0.9.8's examples under --use_dynamic_batch keep the micro batch sizes at 0.9.x's defaults (4, 8; 1 from
# 0.10.0). Before the fix both rendered 1 and 1.
AS_TARGET = [
    Case(f"{c.id}@{c.release} as target", c.file, c.release, c.origin, c.heldout, c.variables, as_target=True)
    for c in FIRST
    if c.id
    in (
        "openrlhf-v0.9.8-train_ppo_ray_hybrid_engine.sh",
        "openrlhf-v0.9.8-train_prorlv2_math_hybrid_engine.sh",
    )
]


@cache
def _as_target() -> dict[str, Outcome]:
    return {o.case.id: o for o in run_cases(AS_TARGET)}


@pytest.mark.parametrize("case", AS_TARGET, ids=[c.id for c in AS_TARGET])
def test_imported_for_the_release_that_runs_it(case: Case) -> None:
    outcome = _as_target()[case.id]
    assert outcome.release == case.release
    assert outcome.ok, f"{case.id}: {outcome.reason}\n  " + "\n  ".join(outcome.detail)


def test_manifest_lists_every_stored_script_once() -> None:
    data = yaml.safe_load(MANIFEST.read_text())
    files = [entry["file"] for entry in data["scripts"]]
    assert len(files) == len(set(files))
    assert {f for f in files if "/" not in f} == {p.name for p in FIELD.glob("*.sh")}
    for entry in data["scripts"]:
        assert (FIELD / entry["file"]).is_file(), entry["file"]
        first = (FIELD / entry["file"]).read_text().splitlines()[0]
        assert first.startswith(f"# Source: {entry['url']} (") and entry["licence"] in first, entry["file"]
        for copy in entry.get("copies") or []:
            assert copy["release"] == copy["tag"].removeprefix("v")
    halves = Counter(c.half for c in FIRST)
    assert halves["heldout"] and abs(halves["heldout"] - halves["rules"]) <= 2, halves


def summary(outcomes: list[Outcome]) -> str:
    """The table: scripts, passed, failed by reason, per half; then every failure."""
    halves = ["openrlhf", "rules", "heldout"]
    reasons = sorted({o.reason for o in outcomes if o.reason})
    rows = [["", *halves, "all"]]
    picks: list[tuple[str, Callable[[Outcome], bool]]] = [("scripts", lambda o: True), ("passed", lambda o: o.ok)]
    picks += [(f"failed: {r}", lambda o, r=r: o.reason == r) for r in reasons]  # type: ignore[misc]
    for label, pick in picks:
        counts = [sum(1 for o in outcomes if o.case.half == h and pick(o)) for h in halves]
        rows.append([label, *map(str, counts), str(sum(counts))])
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width[i]) if i == 0 else cell.rjust(width[i]) for i, cell in enumerate(row)) for row in rows]
    noted = [o for o in outcomes if o.ok and o.note]
    if noted:
        lines.append(f"\npassed once the words OpenRLHF's parser rejects were left out (import reports them): {len(noted)}")
        lines += [f"    {o.case.id} [{o.case.half}, openrlhf {o.release}]: {o.note[:160]}" for o in noted]
    for o in outcomes:
        if not o.ok:
            lines.append(f"\n{o.case.id} [{o.case.half}, openrlhf {o.release or o.case.release}]: {o.reason}")
            lines += [f"    {d}" for d in o.detail]
    return "\n".join(lines)


if __name__ == "__main__":
    os.environ.pop("WANDB_API_KEY", None)
    print(summary(run_cases(FIRST + (MORE if "--all" in sys.argv else []))))
