"""A run id (or prefix) as this machine's records know it, decided locally before any network
call: the one run it names, or why not (unknown: the closest ids; ambiguous: the matches)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from rlhf_launch.errors import UserError
from rlhf_launch.runs import record as runs
from rlhf_launch.runs.record import Run

SHOWN = 5  # ids listed in a message


@dataclass(frozen=True)
class Unknown:
    """No record here has this id or prefix (`run_id` None: there are no records at all)."""

    run_id: str | None
    known: int  # how many records this machine has
    closest: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        where = runs.runs_dir()
        if self.run_id is None:
            return f"no runs recorded on this machine ({where})"
        if not self.known:
            return f"no run {self.run_id!r} on this machine: no runs are recorded here ({where})"
        return f"no run {self.run_id!r} among the {self.known} runs recorded on this machine ({where})"

    @property
    def closest_text(self) -> str:
        return f"the closest: {', '.join(self.closest)}" if self.closest else "rlhf-launch runs lists them"


def closest(wanted: str, ids: Sequence[str], n: int = 3, cutoff: float = 0.6, margin: float = 0.1) -> list[str]:
    """The ids nearest to `wanted` by similarity (difflib's ratio, against the whole id or
    its end: `9f8e7e` for `...-9f8e7d`), best first: at most `n`, each at least `cutoff`
    similar and within `margin` of the best, so an id that is merely first is never offered."""

    def score(other: str) -> float:
        parts = other.split("-")
        tails = ["-".join(parts[i:]) for i in range(1, len(parts))]
        return max(difflib.SequenceMatcher(None, wanted, candidate).ratio() for candidate in (other, *tails))

    scored = sorted(((score(other), other) for other in ids), key=lambda pair: (-pair[0], pair[1]))
    if not scored or scored[0][0] < cutoff:
        return []
    best = scored[0][0]
    return [other for value, other in scored[:n] if value >= max(cutoff, best - margin)]


def choose(wanted: str, ids: Sequence[str]) -> str | list[str]:
    """The id `wanted` names (exactly, or as the prefix of one id); else every id it is a
    prefix of (an empty list: none)."""
    if wanted in ids:
        return wanted
    matches = sorted(i for i in ids if i.startswith(wanted))
    return matches[0] if len(matches) == 1 else matches


def recorded_ids() -> list[str]:
    """The run ids this machine has records for (from the file names: nothing is read)."""
    directory = runs.runs_dir()
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.json") if not p.name.startswith("."))


def local(run_id: str | None) -> Run | Unknown:
    """The run `run_id` names among this machine's records (None: the latest), or `Unknown`.
    An ambiguous prefix is a UserError listing the matches."""
    if run_id is None:
        listing = runs.all_runs()
        return listing[-1] if listing else Unknown(None, 0)
    ids = recorded_ids()
    chosen = choose(run_id, ids)
    if isinstance(chosen, str):
        return runs.load(chosen)
    if chosen:
        shown = ", ".join(chosen[:SHOWN]) + (f" and {len(chosen) - SHOWN} more" if len(chosen) > SHOWN else "")
        raise UserError(
            f"{run_id!r} matches {len(chosen)} runs recorded on this machine: {shown}",
            hint="give more of the run id",
        )
    return Unknown(run_id, len(ids), tuple(closest(run_id, ids)))
