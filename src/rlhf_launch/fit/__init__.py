"""`fit`: the layouts the launcher accepts on a cluster, ranked by estimated step time. One
function, `search`; the supervisor's re-plan after a lost node uses the same search with a
`keep` that says what the checkpoint allows.

  space.py   the candidate layouts (sizes, engines x TP, colocation, offload): pure
  search.py  which of them `plan` accepts (rules, start-up checks, memory, placement), ranked
"""

from __future__ import annotations

from rlhf_launch.fit.search import FitResult, Fitted, changed, search, step_time
from rlhf_launch.fit.space import Layout, Size

__all__ = ["FitResult", "Fitted", "Layout", "Size", "changed", "search", "step_time"]
