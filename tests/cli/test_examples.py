"""Every verb's `--help` ends with two or three examples (cli/examples.py), each of which
parses against that verb's real command and names only shipped presets or configs/ files;
`--help` lists every verb without importing one, and a verb imports only its own module."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rlhf_launch.cli import app as cli_app
from rlhf_launch.cli.examples import EXAMPLES
from rlhf_launch.core import presets

ROOT = Path(__file__).resolve().parents[2]
NAMES = [verb.name for verb in cli_app.VERBS]
CASES = [(verb, line) for verb in NAMES for line, _ in EXAMPLES.get(verb, [])]


def _args(verb: str, line: str) -> list[str]:
    words = shlex.split(line)
    if "|" in words:  # a pipe into another command: only what comes before is ours
        words = words[: words.index("|")]
    assert words[:2] == ["rlhf-launch", verb], line
    return words[2:]


def test_every_verb_has_two_or_three_examples_and_nothing_else_does():
    assert set(EXAMPLES) == set(NAMES)
    for verb in NAMES:
        assert 2 <= len(EXAMPLES[verb]) <= 3, verb
        for line, what in EXAMPLES[verb]:
            assert line.strip() and what.strip() and "\n" not in line + what, (verb, line)
            assert len(f"  {line}") <= 80 and len(f"  # {what}") <= 80, line  # one line of a terminal


@pytest.mark.parametrize(("verb", "line"), CASES, ids=[line for _, line in CASES])
def test_each_example_parses_against_its_verb(verb, line):
    command = cli_app.verb_command(verb)
    args = _args(verb, line)
    ctx = command.make_context(verb, list(args), resilient_parsing=True)
    assert ctx.args == [], f"{line}: left over {ctx.args}"
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    before_dashdash = args[: args.index("--")] if "--" in args else args
    for word in before_dashdash:
        if word.startswith("-") and len(word) > 1:
            assert word.split("=", 1)[0] in options, f"{line}: {word} is not an option of {verb}"
    for name in ("config", "preset"):
        value = ctx.params.get(name)
        if value is not None:
            assert value in presets.names() or (ROOT / value).is_file(), f"{line}: {value} is neither a preset nor a file"


@pytest.mark.parametrize("verb", NAMES)
def test_help_shows_the_examples_one_per_line(verb, capsys):
    assert cli_app.main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Examples:" in out
    for line, what in EXAMPLES[verb]:
        assert f"  {line}\n" in out, line  # not rewrapped
        assert f"  # {what}\n" in out


def test_help_lists_every_verb_without_importing_one():
    code = (
        "import sys, contextlib, io\n"
        "from rlhf_launch.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out: main(['--help'])\n"
        "print(out.getvalue())\n"
        "print(sorted(m for m in sys.modules if m.startswith('rlhf_launch.cli.') and m.rsplit('.', 1)[1] not in "
        "('app', 'examples', 'output')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    *text, loaded = done.stdout.strip().splitlines()
    assert loaded == "[]", loaded
    for verb in cli_app.VERBS:
        assert any(row.split()[:1] == [verb.name] and verb.help in row for row in text), verb.name


def test_the_verb_table_matches_the_modules():
    for verb in cli_app.VERBS:
        command = cli_app.verb_command(verb.name)
        assert command.name == verb.name
        assert len(verb.help) <= 60, verb.name  # one line in `--help`, never cut with "..."
        assert command.help and command.help.split()[0] == verb.help.split()[0], verb.name  # the docstring: the long help


def test_a_mistyped_verb_is_told_the_closest(capsys):
    assert cli_app.main(["plann"]) == 2
    assert "Did you mean 'plan'?" in capsys.readouterr().err
