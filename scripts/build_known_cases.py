"""Rebuild src/rlhf_launch/diagnose/known_cases.json, the labelled cases diagnose's
nearest-neighbour vote reads (rlhf_launch/diagnose/neighbours.py), from the corpus the rules
were written against: tests/data/diagnose/corpus.yaml and the field corpus's `rules` halves.
The `heldout` halves only name the threads to leave out; none of their entries is shipped.

    python scripts/build_known_cases.py
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rlhf_launch.diagnose import neighbours

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "diagnose"


def main() -> int:
    entries = list(yaml.safe_load((DATA / "corpus.yaml").read_text()))
    held_out: list[dict] = []
    for path in sorted((DATA / "field" / "rules").glob("*.yaml")):
        entries += yaml.safe_load(path.read_text()) or []
    for path in sorted((DATA / "field" / "heldout").glob("*.yaml")):
        held_out += yaml.safe_load(path.read_text()) or []
    built = neighbours.build(entries, held_out)
    out = ROOT / "src" / "rlhf_launch" / "diagnose" / neighbours.DATA
    out.write_text(json.dumps(built, indent=0, sort_keys=True) + "\n")
    print(f"{len(built['cases'])} known cases -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
