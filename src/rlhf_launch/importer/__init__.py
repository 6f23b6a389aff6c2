"""`rlhf-launch import`: a bash launch script -> the trainer's argv -> a launch config.

One entry point, `import_script`: `bash` reads the script without running it (lex, expand,
arith, interp) and finds the trainer call; `to_config` turns its argv into the config whose
`plan` renders the same trainer arguments (`render` checks that round trip).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlhf_launch.importer.argv import written_flags
from rlhf_launch.importer.bash import ScriptError, TrainerCall, parse_script
from rlhf_launch.importer.to_config import Imported, config_name, import_call
from rlhf_launch.openrlhf.flagset import FlagSet

__all__ = ["Imported", "ScriptError", "TrainerCall", "config_name", "import_call", "import_script", "parse_script", "written_flags"]


def import_script(
    text: str,
    *,
    name: str,
    environ: Mapping[str, str] | None = None,
    script_version: str | None = None,
    target_version: str | None = None,
    pick: int | None = None,
    fork: FlagSet | None = None,
) -> Imported:
    """The config imported from the script `text` (its trainer call: `.call`).

    `environ` supplies variables the script reads but does not set; `script_version` is the
    release the script was written for (default: detected), `target_version` the release to
    write the config for (default: the script's), `pick` which of the trainer calls to import
    (1-based, in the order the script runs them; default: the only one, or the first run of a
    function called more than once), `fork` an OpenRLHF fork's flags (openrlhf/fork.py), which
    read the script and which the config is written for. Raises ScriptError when the script has
    no trainer call (or two different ones and no `pick`), UserError when no release can read
    its flags.
    """
    call = parse_script(text, environ=environ, pick=pick)
    return import_call(call, name=name, script_version=script_version, target_version=target_version, fork=fork)
