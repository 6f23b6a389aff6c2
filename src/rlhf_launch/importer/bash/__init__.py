"""Read a shell script that launches OpenRLHF's PPO trainer, without running anything.

`parse_script` finds the one `openrlhf.cli.train_ppo_ray` call in a bash script (direct
`python3 -m`, `deepspeed --module`, `torchrun -m`, or the entrypoint of `ray job submit ...
--`) and returns the trainer's argv as bash would build it: backslash continuations joined,
comments dropped, quotes removed, and `$X`, `${X}`, `${X:-default}`, `${ARR[@]}` and `$((...))`
expanded from the assignments the script makes before the call.

Nothing is executed. What cannot be known without running the script stays literal, with a
warning: command substitutions (`$(...)`, backticks), variables the script does not set (unless
the caller's `environ` has them), script arguments (`$1`, `$@`), and assignments made inside
`if`/`case`/loops/functions that close before the trainer call (they are not applied, because
whether they ran is unknown).

The parse follows bash, including its traps: a full comment line inside a backslash-continued
command ends that command (bash does not continue through a comment), so the lines after it
are not trainer arguments; the parser reports that in a warning rather than guessing intent.

Modules: lex (tokens), expand (parameter and quote expansion), arith (`$((...))`), interp (the
walk over the commands), trainer (which command is the trainer's, and its launcher).
"""

from rlhf_launch.importer.bash.interp import TrainerCall, parse_script
from rlhf_launch.importer.bash.lex import ScriptError
from rlhf_launch.importer.bash.trainer import TRAINER_MODULE

__all__ = ["TRAINER_MODULE", "ScriptError", "TrainerCall", "parse_script"]
