"""What `plan` makes of an imported config, compared with the script: the round trip for the
script's release, the flags it became in the target release, and the minimal YAML."""

from __future__ import annotations

import argparse
import copy
from typing import Any

from pydantic import ValidationError

from rlhf_launch.core import flags as flag_render
from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import error, warning
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.core.plan import build_plan
from rlhf_launch.errors import UserError
from rlhf_launch.importer.argv import parse
from rlhf_launch.importer.draft import Draft, drop_path, get_path, leaves
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.flagset import FlagSet


def launcher_dests(flags: FlagSet) -> set[str]:
    """The flag the launcher sets from its own environment (the W&B key): never compared."""
    names = [dialect.pick(flags, dialect.WANDB_KEY_FLAG)]
    return {flags.flags[n].dest for n in names if n}


def prepared(cfg: LaunchConfig, flags: FlagSet) -> Launch | None:
    """What `plan` makes of the config for this release (argv, plan, findings); None if it refuses."""
    try:
        return prepare(cfg, flags=flags, environ={})
    except UserError:
        return None


def render_namespace(cfg: LaunchConfig, flags: FlagSet) -> argparse.Namespace | None:
    """The release's parse of the argv `plan` renders for the config (None if it has unknown tokens)."""
    launch = prepared(cfg, flags)
    if launch is None:
        return None
    namespace, unknown, _ = parse(flags, launch.argv)
    return namespace if not unknown else None


def argv_tokens(cfg: LaunchConfig, flags: FlagSet) -> list[str] | None:
    """The trainer argv `plan` renders for the config, without its checks (None if it cannot)."""
    try:
        return flag_render.render(cfg, build_plan(cfg), flags).argv
    except (TypeError, ValueError):
        return None


def argv_namespace(cfg: LaunchConfig, flags: FlagSet) -> argparse.Namespace | None:
    """The parse of the config's trainer argv alone: what `prepare` renders, without its checks
    (start-up settings, memory, the parser run), which an import needs dozens of times."""
    rendered = argv_tokens(cfg, flags)
    if rendered is None:
        return None
    namespace, unknown, _ = parse(flags, rendered)
    return namespace if not unknown else None


def check_round_trip(
    draft: Draft, cfg: LaunchConfig, source: FlagSet, script: argparse.Namespace, written: list[str], extra: dict[str, Any]
) -> None:
    """Render the config for the script's release and compare with the script, flag by flag."""
    as_source = cfg.model_copy(update={"extra_args": extra})
    namespace = render_namespace(as_source, source)
    if namespace is None:
        return  # the config cannot be rendered for the script's release (a target-only key): nothing to compare
    skip = launcher_dests(source) | {source.flags[f].dest for f in draft.explained if f in source.flags}
    for name, flag in source.flags.items():
        if flag.dest in skip:
            continue
        want, got = getattr(script, flag.dest, None), getattr(namespace, flag.dest, None)
        if want == got:
            continue
        skip.add(flag.dest)
        set_by = "the script sets" if name in written else f"openrlhf {source.version}'s default is"
        draft.findings.append(warning(f"--{name}", f"{set_by} {want!r}; the config renders {got!r}"))


def check_target(draft: Draft, cfg: LaunchConfig, source: FlagSet, target: FlagSet, script: argparse.Namespace, written: list[str]) -> None:
    """Render the config for the target release and compare each flag the script sets with what
    it became there (renames.json). Memory, batch sizes and the like are `plan`'s to report."""
    launch = prepared(cfg, target)
    namespace = render_namespace(cfg, target) if launch is not None else None
    if launch is None or namespace is None:
        draft.findings.append(error("openrlhf.version", f"openrlhf {target.version} cannot render this config", "see rlhf-launch plan"))
        return
    draft.findings += [f for f in launch.findings if f.key.startswith("extra_args")]
    skip = launcher_dests(source)
    source_managed, target_managed = _spelled(source), _spelled(target)
    for name in written:
        if name in draft.explained or source.flags[name].dest in skip:
            continue
        value = getattr(script, source.flags[name].dest)
        found = renames.resolve(name, value, target)
        if found is None:
            draft.findings.append(
                error(f"--{name}", f"openrlhf {target.version} has no flag for --{name} {value!r}; the config cannot carry it there")
            )
            continue
        if found.removed is not None:
            continue  # carried by a config key in its replacement's terms (e.g. prompt + generate lengths -> max_len)
        if name in source_managed and any(flag not in target_managed for flag, _ in found.flags):
            continue  # a key carries it here and other flags there (e.g. --max_len -> prompt + generate lengths)
        for flag, expected in found.flags:
            got = getattr(namespace, target.flags[flag].dest)
            if got != expected:
                draft.findings.append(
                    warning(f"--{name}", f"the script sets {value!r}; for openrlhf {target.version} the config renders --{flag} {got!r}")
                )


def _spelled(flags: FlagSet) -> set[str]:
    """The flags a config key renders in this release (each key's chosen spelling)."""
    return {flag for path in dialect.SPELLINGS for flag in dialect.spelling_for(path, flags) or ()}


def minimal_data(data: dict[str, Any], target: FlagSet) -> dict[str, Any]:
    """`data` without the keys that change nothing: the target's parsed argv, the cluster and the
    runtime env stay the same without them."""
    full = LaunchConfig.model_validate(data)
    reference = argv_namespace(full, target)
    result = copy.deepcopy(data)
    defaults = LaunchConfig.model_validate({"name": data["name"]}).model_dump()
    values = full.model_dump()
    for path in leaves(data):
        if path in ("name", "openrlhf.version", "openrlhf.source"):
            continue
        section = path.split(".", 1)[0]
        trial = copy.deepcopy(result)
        drop_path(trial, path)
        try:
            cfg = LaunchConfig.model_validate(trial)
        except ValidationError:
            continue
        if get_path(defaults, path) == get_path(values, path):
            result = trial  # the schema's default: the same config without it
            continue
        if section in ("cluster", "runtime_env", "extra_args") or reference is None:
            continue
        namespace = argv_namespace(cfg, target)
        if namespace == reference and cfg.logging.wandb.project == full.logging.wandb.project:
            result = trial
    return {section: result[section] for section in SECTIONS if section in result}


SECTIONS = tuple(LaunchConfig.model_fields)  # the YAML's section order
