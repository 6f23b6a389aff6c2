"""The trainer argv as a release's own parser reads it: which release accepts it, the flags it sets."""

from __future__ import annotations

import argparse
import re

from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.flagset import FlagSet, load, supported_versions, version_key

_PARSERS: dict[int, tuple[FlagSet, argparse.ArgumentParser]] = {}  # building one takes ~10 ms; an import parses ~100 times


def _parser(flags: FlagSet) -> argparse.ArgumentParser:
    held = _PARSERS.get(id(flags))
    if held is None or held[0] is not flags:
        held = _PARSERS[id(flags)] = (flags, flags.parser())
    return held[1]


def parse(flags: FlagSet, argv: list[str]) -> tuple[argparse.Namespace | None, list[str], str]:
    """(namespace, unrecognized tokens, problem) as the release's parser reads `argv`."""
    try:
        namespace, unknown = _parser(flags).parse_known_args(argv)
    except UserError as exc:
        return None, [], exc.message
    return namespace, unknown, ""


_UNSET = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def unread_hint(problem: str) -> str:
    """What to do when a parser refuses a value: most often a variable the script reads but never sets."""
    names = list(dict.fromkeys(_UNSET.findall(problem)))
    if names:
        given = " ".join(f"--var {name}=VALUE" for name in names)
        return f"the script reads {', '.join(names)} but never sets it (its caller does): give it with {given}"
    return "check the script's flag values; a variable the script does not set stays as written: give it with --var NAME=VALUE"


def _series(version: str) -> tuple[int, int]:
    parsed = version_key(version)
    return parsed.major, parsed.minor


def era(accepted: list[str]) -> str:
    """The release a script was most likely written for, of the releases (any order) whose parser
    accepts all its flags: the newest of the minor series where the oldest of them is, i.e. the
    series in which the script's newest flag first appeared. A script that uses no flag of a later
    series most likely predates it (OpenRLHF's example scripts change with each series), while
    within a series the newest patch reads the same flags. Over the example scripts that call
    the trainer at OpenRLHF's tags v0.8.0 to v0.11.0 (385), this names the tag's own series for
    313, the newest accepting release for 192."""
    ordered = sorted(accepted, key=version_key)
    first = _series(ordered[0])
    return [v for v in ordered if _series(v) == first][-1]


def detect(argv: list[str]) -> tuple[FlagSet, tuple[str, ...]]:
    """The release the script was written for (`era`), and all whose parser accepts every token. With none: a
    UserError when a release's parser refuses the argv outright (a value it cannot read, most
    likely a variable the script does not set, kept literally; an ambiguous abbreviation), else
    the release that leaves the fewest tokens unrecognized (newest first)."""
    accepted: list[str] = []
    fallback: tuple[int, str] | None = None
    problem = ""
    for version in reversed(supported_versions()):
        namespace, unknown, why = parse(load(version), argv)
        if namespace is None:
            problem = problem or why
            continue
        if not unknown:
            accepted.append(version)
        elif fallback is None or len(unknown) < fallback[0]:
            fallback = (len(unknown), version)
    if accepted:
        return load(era(accepted)), tuple(reversed(accepted))
    if problem or fallback is None:
        raise UserError(f"no OpenRLHF release can read the trainer's flags: {problem}", hint=unread_hint(problem))
    return load(fallback[1]), ()


def written_flags(argv: list[str], flags: FlagSet) -> tuple[list[str], list[Finding]]:
    """The full names of the flags argv sets, in order, once each; abbreviations and repeats noted."""
    names: list[str] = []
    notes: list[Finding] = []
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        raw = token[2:].split("=", 1)[0]
        matches = renames.expand_prefix(raw, flags.flags)
        if len(matches) != 1:
            continue  # unrecognized or ambiguous: the parser reports it
        full = matches[0]
        if full != raw:
            notes.append(warning(f"--{raw}", f"abbreviates --{full} (argparse accepts prefixes); written in full"))
        if full in names:
            notes.append(warning(f"--{full}", "is set more than once; the last value counts, as in the trainer"))
        else:
            names.append(full)
    return names, notes


def unknown_findings(unknown: list[str], flags: FlagSet) -> list[Finding]:
    out = []
    groups: list[list[str]] = []
    for token in unknown:
        if token.startswith("-") or not groups:
            groups.append([token])
        else:
            groups[-1].append(token)
    for group in groups:
        name = group[0].lstrip("-").split("=", 1)[0]
        guess = dialect.similar(name, flags)
        hint = f"openrlhf {flags.version} has --{guess}" if guess else "pass --script-version if the script targets another release"
        shown = " ".join(group)[:80]
        out.append(error(group[0], f"openrlhf {flags.version} does not accept '{shown}'; left out", hint))
    if flags.fork is None:
        names = [g[0].lstrip("-").split("=", 1)[0] for g in groups if g[0].startswith("--")]
        nowhere = [n for n in names if not any(n in load(v).flags for v in supported_versions())]
        if nowhere:  # flags no release has: most such scripts run a fork of OpenRLHF with flags of its own
            shown = ", ".join(f"--{n}" for n in nowhere[:4]) + (" ..." if len(nowhere) > 4 else "")
            out.append(
                warning(
                    f"--{nowhere[0]}",
                    f"{len(nowhere)} flag{'s' if len(nowhere) != 1 else ''} no OpenRLHF release has ({shown})",
                    "if the script runs a fork of OpenRLHF, import it with --openrlhf-source DIR (the fork's checkout): "
                    "its own flags are read from its source",
                )
            )
    return out
