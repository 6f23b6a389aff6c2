"""`diagnose`: why an attempt failed or stalled, from its driver log (and, on a live
cluster, Ray's job message, dead actors and pending placement groups). Pure: text in (or bytes
by range through a callable: runs/logfile.py opens the file), a `Diagnosis` out.

  taxonomy.py  the failure classes, the phases, `Diagnosis`
  reader.py    reading a log of any size from its end (no classification)
  rules.py     the rules as a data table; checks.py the code they name
  context.py   what a rule sees around a line (traceback, phase)
  classify.py  the engine; raystate.py Ray's state as log lines
  signals.py   what a failure no rule names is decided on (component, exception, progress)
  neighbours.py  the closest known cases (known_cases.json), their vote
Redaction is core/secrets.py's one policy. docs/diagnose.md has the classes as a table.
"""

from __future__ import annotations

from rlhf_launch.diagnose.classify import classify, diagnose_reader
from rlhf_launch.diagnose.taxonomy import PHASES, Diagnosis, FailureClass

__all__ = ["PHASES", "Diagnosis", "FailureClass", "classify", "diagnose_reader"]
