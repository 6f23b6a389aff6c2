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
        if self.run_id is None or not self.known:
            return f"no runs recorded on this machine ({where})"
        return f"no run {self.run_id!r} among the {self.known} runs recorded on this machine ({where})"

    @property
    def closest_text(self) -> str:
        return f"the closest: {', '.join(self.closest)}" if self.closest else "rlhf-launch runs lists them"


def closest(wanted: str, ids: Sequence[str], n: int = 3) -> list[str]:
    """The ids nearest to `wanted`: sharing its longest prefix, then by similarity."""

    def shared(other: str) -> int:
        size = 0
        for a, b in zip(wanted, other, strict=False):
            if a != b:
                break
            size += 1
        return size

    ranked = sorted(ids, key=lambda other: (-shared(other), -difflib.SequenceMatcher(None, wanted, other).ratio(), other))
    return ranked[:n]


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
