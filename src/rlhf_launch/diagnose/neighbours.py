"""The closest known cases of a failure no rule names: a nearest-neighbour vote over the
labelled excerpts shipped with the package (known_cases.json), by token-set similarity. Pure
Python, no model: a log's tokens (words, exception types, function names; numbers, hex,
paths and quotes left out) are compared with each known case's by IDF-weighted Jaccard, and
the closest cases vote on (class, retriable), each with its similarity.

known_cases.json is built by `build()` from the corpus the rules were written against
(tests/data/diagnose/corpus.yaml and the `rules` halves of tests/data/diagnose/field/): never
from a held-out half, which is what the vote is measured on (tests/diagnose/test_decision.py
checks both; corpus.yaml cases from a thread a held-out half also holds are left out).
`python scripts/build_known_cases.py` rebuilds it (the held-out files only name threads to
leave out).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["K", "MIN_CONFIDENCE", "MIN_SIMILARITY", "Vote", "build", "tokens", "vote"]

DATA = "known_cases.json"
K = 5  # neighbours that vote
MIN_SIMILARITY = 0.15  # below this the closest case is not close (chosen on the rules halves, leave-one-out)
MIN_CONFIDENCE = 0.8  # share of the vote the winning label needs (likewise)

WORD = re.compile(r"[A-Za-z_][A-Za-z_]{2,}")
NOISE = re.compile(r"(?:/[\w.+-]+)+/|0x[0-9a-fA-F]+|\b[0-9a-f]{16,}\b|'[^']{40,}'|\"[^\"]{40,}\"")
STOP = frozenset(
    (
        "the",
        "and",
        "for",
        "with",
        "this",
        "that",
        "from",
        "are",
        "was",
        "not",
        "you",
        "your",
        "use",
        "line",
        "file",
        "self",
        "return",
        "none",
        "true",
        "false",
        "args",
        "kwargs",
        "func",
        "call",
        "wrapper",
        "site",
        "packages",
        "dist",
        "lib",
        "python",
        "usr",
        "local",
        "most",
        "recent",
        "last",
        "traceback",
        "info",
        "warning",
        "debug",
        "error",
        "errors",
        "exception",
        "pid",
        "repeated",
        "across",
        "cluster",
    )
)


def tokens(text: str) -> frozenset[str]:
    """The log's words that carry meaning: identifiers and words of 3+ letters, lower-cased,
    split on `_`/`.` too (`update_weight` -> update, weight, update_weight), paths, hex and
    long quotes dropped, common words dropped."""
    out: set[str] = set()
    for word in WORD.findall(NOISE.sub(" ", text)):
        low = word.lower()
        if low in STOP:
            continue
        out.add(low)
        for part in low.split("_"):
            if len(part) > 2 and part not in STOP:
                out.add(part)
    return frozenset(out)


@dataclass(frozen=True)
class Vote:
    """The winning (class, retriable) of the closest known cases, the share of the vote it
    got, and the closest case (its source and similarity)."""

    cls: str
    retriable: bool
    confidence: float
    closest: str
    similarity: float

    def describe(self) -> str:
        return (
            f"the closest known cases say {self.cls} ({'retriable' if self.retriable else 'not retriable'}, "
            f"{self.confidence:.0%} of the vote); closest: {self.closest} (similarity {self.similarity:.2f})"
        )


def _thread(source: object) -> str:
    return str(source).split("#", 1)[0]


def build(entries: Iterable[Mapping[str, Any]], held_out: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """known_cases.json's content from labelled entries (class, retriable, source, excerpt),
    leaving out every entry whose thread is also in a held-out entry (corpus.yaml shares some)."""
    excluded = {_thread(e["source"]) for e in held_out}
    cases = []
    for entry in entries:
        if _thread(entry["source"]) in excluded:
            continue
        toks = sorted(tokens(str(entry["excerpt"])))
        if toks:
            cases.append({"class": entry["class"], "retriable": bool(entry["retriable"]), "source": entry["source"], "tokens": toks})
    return {"note": "built by rlhf_launch.diagnose.neighbours.build from corpus.yaml and the field corpus's rules halves", "cases": cases}


@lru_cache(maxsize=1)
def _known() -> tuple[tuple[tuple[str, bool, str, frozenset[str]], ...], dict[str, float]]:
    data = json.loads((resources.files("rlhf_launch.diagnose") / DATA).read_text())
    cases = tuple((c["class"], bool(c["retriable"]), c["source"], frozenset(c["tokens"])) for c in data["cases"])
    return cases, _idf([c[3] for c in cases])


def _idf(sets: Sequence[frozenset[str]]) -> dict[str, float]:
    df = Counter(t for s in sets for t in s)
    n = len(sets)
    return {t: math.log((n + 1) / (d + 0.5)) for t, d in df.items()}


def _similarity(a: frozenset[str], b: frozenset[str], idf: Mapping[str, float], unseen: float) -> float:
    inter = sum(idf.get(t, unseen) for t in a & b)
    union = sum(idf.get(t, unseen) for t in a | b)
    return inter / union if union else 0.0


def vote(
    text: str,
    cases: Sequence[tuple[str, bool, str, frozenset[str]]] | None = None,
    idf: Mapping[str, float] | None = None,
    *,
    k: int = K,
) -> Vote | None:
    """The vote of the `k` known cases closest to `text` (None when there are none)."""
    if cases is None or idf is None:
        cases, idf = _known()
    query = tokens(text)
    if not query or not cases:
        return None
    unseen = math.log(len(cases) + 1)
    scored = sorted(((_similarity(query, c[3], idf, unseen), i) for i, c in enumerate(cases)), reverse=True)[:k]
    weights: dict[tuple[str, bool], float] = {}
    for sim, i in scored:
        key = (cases[i][0], cases[i][1])
        weights[key] = weights.get(key, 0.0) + sim
    total = sum(weights.values())
    if total <= 0:
        return None
    (cls, retriable), weight = max(weights.items(), key=lambda kv: kv[1])
    best_sim, best = scored[0]
    return Vote(cls, retriable, weight / total, cases[best][2], best_sim)
