"""A script's trainer call -> a launch config (the YAML schema of core/config.py) and findings. Pure.

`import_call` takes the `TrainerCall` that importer/bash found, reads its argv with the
parser of the script's release (detected: of the releases whose parser accepts every flag,
the newest of the minor series where the oldest of them is; or given), and builds the config
mapping by inverting `dialect.SPELLINGS`: each config key gets the value the script gives its
flag(s), or, when the script leaves the flag out, the value the script's release would use (its parser default), so the rendered argv keeps
that release's behaviour. Flags without a config key go to `extra_args`, spelled for the
target release (renames.json applies renames; removed flags are reported with their
replacement and left out). An optional key (dialect.SOFT) is set only where a value of it renders
the script's flags back exactly; else those flags stay in extra_args. The W&B key is not
copied (reported, its value never written or shown: export WANDB_API_KEY instead).
`ray job submit --runtime-env-json` maps to `runtime_env`.

The result is checked before it is returned (importer/render.py): rendered for the script's
release and parsed back, every flag must equal the script's (else a finding says which and
why), and keys that change nothing in the target's parsed argv are dropped, so the YAML holds
only what matters.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, errors, warning
from rlhf_launch.core.secrets import REDACTED, SECRET_ENV
from rlhf_launch.core.settings import Settings, resolve
from rlhf_launch.errors import UserError
from rlhf_launch.importer.argv import detect, parse, unknown_findings, unread_hint, written_flags
from rlhf_launch.importer.bash import TrainerCall
from rlhf_launch.importer.draft import Draft, drop_path, get_path, set_path
from rlhf_launch.importer.inverse import inverse
from rlhf_launch.importer.render import argv_tokens, check_round_trip, check_target, minimal_data, prepared, render_namespace
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.flagset import FlagSet, load

DEFAULT_GPUS_PER_NODE = 8


_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw")


_KEY_IN_MESSAGE = re.compile(r"(?:Value error, )?([a-z_]+(?:\.[a-z_]+)+): ")
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")  # `$WANDB_API_KEY` left unexpanded: a name, not a key


@dataclass(frozen=True)
class Imported:
    """The config an import wrote (`data`: the minimal YAML mapping) and what to tell the user."""

    data: dict[str, Any]
    config: LaunchConfig
    source: str  # the release the script's flags were read with
    target: str  # the release the config is written for (openrlhf.version)
    detected: bool  # source was detected (not given)
    accepted_by: tuple[str, ...]  # releases whose parser accepts every flag of the script
    findings: list[Finding]
    secrets: tuple[str, ...] = field(default=(), repr=False)  # values never to show (redact with `clean`)
    call: TrainerCall | None = field(default=None, repr=False)  # the script's trainer call it was imported from
    read_by_target: bool = False  # the flags were read by the target release (given, and it accepts them all)

    @property
    def ok(self) -> bool:
        return not errors(self.findings)

    def _why_source(self) -> str:
        if self.read_by_target:
            return "the release the config is written for, which accepts them all"
        return "detected: the newest of its flags' series"

    def clean(self, text: str) -> str:
        """`text` with every secret found in the script replaced by a marker."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def yaml(self, script: str, line: int | None = None) -> str:
        """The config as YAML, with a header naming the script and listing the findings."""
        where = f"{script}:{line}" if line else script
        head = [
            f"# Imported by `rlhf-launch import` from {where}",
            f"# Flags read as {self.source if self.source.startswith('the OpenRLHF fork') else 'openrlhf ' + self.source}"
            + (f" ({self._why_source()}; accepted by {_span(self.accepted_by)})" if self.detected else "")
            + (f"; written for openrlhf {self.target}" if self.target != self.source else ""),
        ]
        if self.findings:
            head.append("# Findings:")
            head += [f"#   {f.level}: {f.key}: {f.message}".replace("\n", " ") for f in self.findings]
        body = yaml.safe_dump(self.data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)
        return self.clean("\n".join(head) + "\n" + body)


def _span(versions: tuple[str, ...]) -> str:
    if not versions:
        return "none"
    return versions[0] if len(versions) == 1 else f"{versions[0]} .. {versions[-1]}"


def config_name(stem: str) -> str:
    """A valid config name from a script's file name."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-_.")[:64]
    return name or "imported"


def import_call(
    call: TrainerCall,
    *,
    name: str,
    script_version: str | None = None,
    target_version: str | None = None,
    fork: FlagSet | None = None,
) -> Imported:
    """The config for the trainer call `call`, written for `target_version` (default: the script's
    release); with `fork` (an OpenRLHF fork's flags, openrlhf/fork.py), read and written for it."""
    argv = call.argv
    accepted: tuple[str, ...]
    if fork is not None:
        source, accepted = fork, ()
    elif script_version is not None:
        source, accepted = load(script_version), ()
    else:
        source, accepted = detect(argv)
        if target_version and target_version in accepted:
            source = load(target_version)  # the release that will run the script reads it, with its own defaults
    target = fork or (load(target_version) if target_version else source)
    namespace, unknown, problem = parse(source, argv)
    if namespace is None:
        raise UserError(f"{source.label} cannot read the trainer's flags: {problem}", hint=unread_hint(problem))
    if fork is not None:
        _refuse_unknown(fork, unknown)
    section = {"source": fork.fork.root} if fork is not None and fork.fork is not None else {"version": target.version}
    draft = Draft(data={"name": name, "openrlhf": section})
    draft.findings += [warning("script", w) for w in call.warnings]
    draft.findings += unknown_findings(unknown, source)
    if unknown and fork is not None and fork.fork is not None and fork.fork.unresolved:
        first = fork.fork.unresolved[0]
        draft.findings.append(
            warning(
                "openrlhf.source",
                f"the fork names {len(fork.fork.unresolved)} flag(s) in code the reader cannot evaluate ({first[:80]}): "
                "the flags left out above may be among them",
                "if the fork's trainer accepts them, give them in extra_args",
            )
        )
    written, notes = written_flags(argv, source)
    draft.findings += notes
    pinned = script_version is not None or bool(target_version and target_version in accepted)

    _launcher_owned(draft, source, namespace, written)
    _managed(draft, source, namespace, written)
    _runtime_env(draft, call)
    _validated(draft, source)
    _optional_keys(draft, source, namespace)
    extra = _extra_args(draft, source, target, namespace, written)
    cfg = _validated(draft, source)
    draft.data["cluster"] = {**draft.data.get("cluster", {}), **_cluster_size(cfg, target, source)}
    address = call.ray_address
    if address is None and call.variables.get("RAY_ADDRESS", "").startswith(("http://", "https://")):
        address = call.variables["RAY_ADDRESS"]  # a direct call: the trainer's ray.init() joins RAY_ADDRESS
    if address:
        if "$" in address or "`" in address:
            draft.findings.append(warning("cluster.address", f"the Ray address {address} is not known without running the script"))
        else:
            draft.data["cluster"]["address"] = address
    cfg = _validated(draft, source)
    check_round_trip(draft, cfg, source, namespace, written, extra)
    if not pinned:
        draft.findings += _default_drift(cfg, source, accepted, argv, written)
    if target is not source:
        check_target(draft, cfg, source, target, namespace, written)
    minimal = minimal_data(draft.data, target)
    return Imported(
        data=minimal,
        config=LaunchConfig.model_validate(minimal),
        source=source.version if source.fork is None else source.label,
        target=target.version if target.fork is None else target.label,
        detected=script_version is None and fork is None,
        accepted_by=accepted,
        findings=_redacted(draft.findings, draft.secrets),
        secrets=tuple(s for s in draft.secrets if len(s) >= 4),
        call=call,
        read_by_target=script_version is None and bool(target_version and target_version in accepted),
    )


def _refuse_unknown(fork: FlagSet, unknown: list[str]) -> None:
    """A fork's parser refuses words it has no flag for (argparse: "unrecognized arguments"), so
    the import does too: the fork would not start. Words the reader kept as written (an unset
    `$VAR`) are not the fork's doing: they stay errors of their own, with a config written."""
    if not any("$" not in t and "`" not in t for t in unknown):
        return
    if fork.fork is not None and fork.fork.unresolved:
        return  # the fork makes some flag names in code the reader cannot evaluate: these may be among them
    trainer = f"{fork.fork.root}/openrlhf/cli/train_ppo_ray.py" if fork.fork is not None else "its trainer"
    raise UserError(
        f"{fork.label} refuses the script's flags: unrecognized arguments: {' '.join(unknown)}",
        hint=f"the fork's parser ({trainer}) has no such flag, so its trainer would exit at start-up: remove it from the "
        "script, or name with --openrlhf-source the checkout (commit) of the fork the script was written for",
    )


# Flag -> the field of core/settings.Settings it sets (compared after OpenRLHF's start-up corrections).
_SETTING_NAMES = {"flash_attn": "attention", "attn_implementation": "attention", "bf16": "param_dtype"}
_SETTING_FIELDS = {f.name for f in dataclasses.fields(Settings)}
_SETTING_OF = {
    flag: _SETTING_NAMES.get(name, name)
    for name, spellings in dialect.TRAINER.items()
    if _SETTING_NAMES.get(name, name) in _SETTING_FIELDS
    for flag in spellings
}


def _default_drift(cfg: LaunchConfig, source: FlagSet, accepted: tuple[str, ...], argv: list[str], written: list[str]) -> list[Finding]:
    """A warning naming the flags the script leaves unset that the config pins to the detected
    release's default where another release that accepts the script defaults otherwise (0.9.x's
    micro batch sizes 4 and 8, 1 from 0.10.0): which release runs the script decides their value.
    Each such release gets the config rendered for it and compared with its own reading of the script."""
    drift: dict[tuple[str, str], list[tuple[Any, list[str]]]] = {}  # (flag, rendered) -> (default, releases)
    for version in accepted:
        if version == source.version:
            continue
        flags = load(version)
        rendered = argv_tokens(cfg, flags)
        config_ns = parse(flags, rendered)[0] if rendered is not None else None
        script_ns = parse(flags, argv)[0] if config_ns is not None else None
        if config_ns is None or script_ns is None:
            continue
        corrected: list[tuple[Settings, Settings] | None] = []  # computed once, when first needed
        for name in dialect.managed_flags(flags):
            dest = flags.flags[name].dest
            got, default = getattr(config_ns, dest), getattr(script_ns, dest)
            if name in written or got == default:
                continue
            setting = _SETTING_OF.get(name)
            if setting is not None and rendered is not None:
                corrected = corrected or [_corrected(cfg, flags, rendered, argv)]
                both = corrected[0]
                if both is not None and getattr(both[0], setting) == getattr(both[1], setting):
                    continue  # the trainer's start-up makes them equal (e.g. packing switches flash attention on)
            groups = drift.setdefault((name, repr(got)), [])
            held = next((versions for value, versions in groups if value == default), None)
            if held is None:
                groups.append((default, [version]))
            else:
                held.append(version)
    if not drift:
        return []
    shown = "; ".join(
        f"--{name} {got} where " + ", ".join(f"{_span(tuple(versions))} default to {value!r}" for value, versions in groups)
        for (name, got), groups in drift.items()
    )
    return [
        warning(
            "openrlhf.version",
            f"the script leaves flags unset whose defaults differ among the releases that accept it; the config keeps "
            f"openrlhf {source.version}'s: {shown}",
            "if another release runs the script, import with --openrlhf-version naming it, to keep that release's defaults",
        )
    ]


def _corrected(cfg: LaunchConfig, flags: FlagSet, rendered: list[str], argv: list[str]) -> tuple[Settings, Settings] | None:
    """The trainer's settings after the release's start-up corrections: for the config's argv, for the script's."""
    try:
        return resolve(cfg, flags, rendered)[0], resolve(cfg, flags, argv)[0]
    except (UserError, TypeError, ValueError):
        return None


def _optional_keys(draft: Draft, source: FlagSet, namespace: argparse.Namespace) -> None:
    """Optional config keys (dialect.SOFT) that the script's flags map to: each takes the first
    value (the flags' own, then each choice the schema lists for the key) for which the config,
    rendered for the script's release, gives those flags the script's values; with none, the
    flags go to extra_args as the script writes them."""
    for path, found in draft.soft.items():
        spelling = dialect.spelling_for(path, source) or ()
        dests = [source.flags[f].dest for f in spelling]
        for candidate in [found] + [{path: choice} for choice in _choices(path)]:
            if not candidate:
                continue
            trial = copy.deepcopy(draft.data)
            for key, value in candidate.items():
                set_path(trial, key, value)
            try:
                rendered = render_namespace(LaunchConfig.model_validate(trial), source)
            except (ValidationError, TypeError, ValueError):
                continue
            if rendered is not None and all(getattr(rendered, d) == getattr(namespace, d) for d in dests):
                draft.data = trial
                draft.owned.update(spelling)
                break


def _choices(path: str) -> list[Any]:
    """The values a config key's type lists (a Literal), if it does."""
    node: Any = LaunchConfig
    for part in path.split("."):
        fields = getattr(node, "model_fields", None)
        if not fields or part not in fields:
            return []
        node = fields[part].annotation
    out: list[Any] = []
    pending = [node]
    while pending:
        kind = pending.pop(0)
        if typing.get_origin(kind) is typing.Literal:
            out += list(typing.get_args(kind))
        else:
            pending += [a for a in typing.get_args(kind) if a is not type(None)]
    return out


def _redacted(findings: list[Finding], secrets: list[str]) -> list[Finding]:
    out = []
    for f in findings:
        message, hint = f.message, f.hint
        for secret in (s for s in secrets if len(s) >= 4):
            message, hint = message.replace(secret, REDACTED), hint.replace(secret, REDACTED)
        out.append(Finding(f.level, f.key, message, hint))
    return out


def _launcher_owned(draft: Draft, source: FlagSet, namespace: argparse.Namespace, written: list[str]) -> None:
    key_flag = dialect.pick(source, dialect.WANDB_KEY_FLAG)
    if key_flag and key_flag in written:
        value = getattr(namespace, source.flags[key_flag].dest)
        if isinstance(value, str) and value and not _REFERENCE.fullmatch(value):
            draft.secrets.append(value)
        draft.findings.append(
            warning(
                f"--{key_flag}",
                "the script passes a W&B key; it is not written to the config (logging.wandb.project is set: W&B logs "
                f"when {SECRET_ENV} is in the environment at submit, and stays off without it)",
                f"export {SECRET_ENV} where you run rlhf-launch; it reaches the job through runtime_env only",
            )
        )
    load_flag = dialect.pick(source, dialect.LOAD_FLAG)
    if load_flag and load_flag in written:
        set_path(draft.data, "checkpoint.load", True)  # every attempt loads the latest checkpoint, as the script did


def _managed(draft: Draft, source: FlagSet, namespace: argparse.Namespace, written: list[str]) -> None:
    """Every config key the source release has flags for: the script's value, else the release default."""
    key_flag = dialect.pick(source, dialect.WANDB_KEY_FLAG)
    wandb_on = bool(key_flag and key_flag in written)
    soft: frozenset[str] = getattr(dialect, "SOFT", frozenset())  # keys that own their flags only when set
    draft.owned.update(n for n in (key_flag, dialect.pick(source, dialect.LOAD_FLAG)) if n)
    colocate: list[str] = []
    for path in dialect.SPELLINGS:
        spelling = dialect.spelling_for(path, source)
        if spelling is None or draft.owned & set(spelling):
            continue  # no flag in this release, or its flags belong to a key before it
        values = {flag: getattr(namespace, source.flags[flag].dest) for flag in spelling}
        if path in soft:
            if any(f in written for f in spelling):
                found, _ = inverse(path, values)
                draft.soft[path] = found  # kept only if it renders the script's flags back (_optional_keys)
            continue
        draft.owned.update(spelling)
        unset_wandb = path.startswith("logging.wandb.") and not any(f in written for f in spelling)
        if unset_wandb and not (wandb_on and path == "logging.wandb.project"):
            continue  # unset W&B settings stay unset: the trainer's defaults apply, and W&B stays off
        found, notes = inverse(path, values)
        if not found and all(v is None for v in values.values()) and _accepts(draft.data, path, None):
            found = {path: None}  # left unset by the script: unset in the config too, where the key can say so
        draft.findings += notes
        if notes:
            draft.explained.update(spelling)
        _apply(draft, found, colocate)
    draft.data.setdefault("placement", {})["colocate"] = colocate
    _wandb_without_key(draft, source, written, wandb_on)


def _apply(draft: Draft, found: dict[str, Any], colocate: list[str]) -> None:
    """Set the config values one key's flags gave; colocation switches gather into `colocate`."""
    for key, value in found.items():
        if key.startswith("placement.colocate."):
            if value:
                colocate.append(key.rsplit(".", 1)[-1])
            continue
        set_path(draft.data, key, value)


def _wandb_without_key(draft: Draft, source: FlagSet, written: list[str], wandb_on: bool) -> None:
    project_flag = dialect.flag_for("logging.wandb.project", source)
    if project_flag and project_flag in written and not wandb_on:
        draft.findings.append(
            warning(
                "logging.wandb.project",
                f"the script sets --{project_flag} but passes no W&B key, so W&B was off; rlhf-launch turns W&B on for "
                f"logging.wandb.project when {SECRET_ENV} is exported",
                "remove logging.wandb.project to keep W&B off",
            )
        )


def _extra_args(
    draft: Draft,
    source: FlagSet,
    target: FlagSet,
    namespace: argparse.Namespace,
    written: list[str],
) -> dict[str, Any]:
    """Flags the script sets that no config key carries -> extra_args in the target's spelling.
    Returns the kept ones as the script spells them (flag -> value)."""
    extra: dict[str, Any] = {}
    origin: dict[str, Any] = {}
    soft: frozenset[str] = getattr(dialect, "SOFT", frozenset())
    target_owned = {f: p for f, p in dialect.managed_flags(target).items() if p not in soft or get_path(draft.data, p) is not None}
    moved: list[str] = []
    for name in written:
        if name in draft.owned:
            continue
        value = getattr(namespace, source.flags[name].dest)
        found = renames.resolve(name, value, target)
        if found is None or found.removed is not None:
            draft.explained.add(name)  # left out, with an error saying why
        if found is None:
            draft.findings.append(
                error(f"--{name}", f"openrlhf {target.version} has no flag for --{name} and no rename leads to one; left out", "drop it")
            )
            continue
        if found.removed is not None:
            _, message, hint = found.explain(name, value, target.version)
            draft.findings.append(error(f"--{name}", f"{message}; left out", hint))
            continue
        if found.chain:
            moved.append(f"--{name} as {found.shown(value)} ({found.why()})")
        carried = _unowned(draft, name, found.flags, target_owned, target)
        extra.update(carried)
        if carried:
            origin[name] = value
    if moved:
        draft.findings.append(warning("extra_args", f"openrlhf {target.version} spells these differently: {', '.join(moved)}"))
    if extra:
        draft.data["extra_args"] = extra
        kept = ", ".join(f"--{n}" for n in extra)
        draft.findings.append(warning("extra_args", f"no config key carries {kept}; passed through extra_args as the script sets them"))
    return origin


def _unowned(draft: Draft, name: str, flags: Iterable[tuple[str, Any]], target_owned: dict[str, str], target: FlagSet) -> dict[str, Any]:
    """The target flags script flag `name` becomes that no config key owns there (an error for each other)."""
    kept: dict[str, Any] = {}
    for flag, flag_value in flags:
        if flag in target_owned:
            draft.explained.add(name)
            draft.findings.append(
                error(
                    f"--{name}",
                    f"openrlhf {target.version} sets --{flag} from {target_owned[flag]}; left out",
                    f"set {target_owned[flag]}",
                )
            )
            continue
        kept[flag] = flag_value
    return kept


def _runtime_env(draft: Draft, call: TrainerCall) -> None:
    env = call.runtime_env
    if not env:
        return
    known = set(LaunchConfig.model_fields["runtime_env"].annotation.model_fields)  # type: ignore[union-attr]
    section: dict[str, Any] = {}
    for key, value in env.items():
        if key not in known:
            draft.findings.append(
                error(
                    f"runtime_env.{key}",
                    f"the script's --runtime-env-json sets {key}, which the config has no key for; not imported",
                    "the job will not get it: provide it on every node instead (e.g. in the image the nodes run)",
                )
            )
            continue
        if key == "working_dir" and isinstance(value, str) and ("$" in value or "`" in value):
            draft.findings.append(
                error(
                    "runtime_env.working_dir",
                    f"{value!r} is not known without running the script; not imported",
                    "set runtime_env.working_dir to the directory the job should upload",
                )
            )
            continue
        if key == "env_vars" and isinstance(value, dict):
            value = _env_vars(draft, value)
            if not value:
                continue
        section[key] = value
    if section:
        draft.data["runtime_env"] = section


def _env_vars(draft: Draft, env: dict[str, Any]) -> dict[str, Any]:
    """The job's environment variables to keep: never the W&B key (reported, its value kept secret)."""
    value = dict(env)
    secret = value.pop(SECRET_ENV, None)
    if secret is not None:
        if isinstance(secret, str) and secret and not _REFERENCE.fullmatch(secret):
            draft.secrets.append(secret)
        draft.findings.append(
            warning(
                f"runtime_env.env_vars.{SECRET_ENV}",
                "the script puts the W&B key in the job's environment; it is not written to the config",
                f"export {SECRET_ENV} where you run rlhf-launch; it reaches the job through runtime_env only",
            )
        )
    for var in value:
        if _SECRET_NAME.search(var):
            draft.findings.append(
                warning(f"runtime_env.env_vars.{var}", "looks like a secret and is written to the config as the script has it")
            )
    return value


def _validated(draft: Draft, source: FlagSet) -> LaunchConfig:
    """Validate, fixing or dropping (with a finding) each value the schema refuses, e.g. 0 nodes."""
    for _ in range(50):
        try:
            return LaunchConfig.model_validate(draft.data)
        except ValidationError as exc:
            problem = exc.errors()[0]
        path = ".".join(str(p) for p in problem["loc"]) or _named_key(problem["msg"])
        if not path:
            raise UserError(f"the imported config is not valid: {problem['msg']}")
        value = get_path(draft.data, path)
        if isinstance(value, str) and "," in value and _accepts(draft.data, path, value.split(",")):
            set_path(draft.data, path, value.split(","))  # a comma-separated list, which the schema takes as a list
            continue
        spelling = dialect.spelling_for(path, source) if path in dialect.SPELLINGS else None
        if _forks_own_default(source, spelling, value) and _accepts(draft.data, path, None):
            assert spelling is not None
            set_path(draft.data, path, None)  # unset: the fork's own default applies, as in the script
            draft.findings.append(
                warning(
                    path,
                    f"{source.label} defaults --{spelling[0]} to {value!r}, which {path} cannot hold; "
                    "left unset (null) so that default applies",
                )
            )
            continue
        draft.explained.update(spelling or ())
        what = " ".join(f"--{f}" for f in spelling) + f" {value!r}" if spelling else f"the value {value!r}"
        draft.findings.append(warning(path, f"{what} cannot be written to {path} ({problem['msg']}); the config's default renders instead"))
        drop_path(draft.data, path)
    raise UserError("the imported config could not be made valid")


def _forks_own_default(source: FlagSet, spelling: tuple[str, ...] | None, value: Any) -> bool:
    """Whether `value` is a fork's own default for the key's one flag (e.g. C3's -1 for "auto" vLLM engines)."""
    if source.fork is None or not spelling or len(spelling) != 1:
        return False
    flag = source.flags.get(spelling[0])
    return flag is not None and flag.default == value and not isinstance(flag.default, dict)


def _named_key(message: str) -> str:
    """The key a whole-config check names first ("placement.reward: ..."), or ''."""
    m = _KEY_IN_MESSAGE.match(message)
    return m.group(1) if m else ""


def _accepts(data: dict[str, Any], path: str, value: Any) -> bool:
    trial = copy.deepcopy(data)
    set_path(trial, path, value)
    try:
        LaunchConfig.model_validate(trial)
    except ValidationError as exc:
        return not any(".".join(str(p) for p in e["loc"]).startswith(path) for e in exc.errors())
    return True


def _cluster_size(cfg: LaunchConfig, target: FlagSet, source: FlagSet) -> dict[str, int]:
    """Nodes x GPUs per node that fit the layout: 8 GPUs per node unless a role needs more on one."""
    launch = prepared(cfg, target) or prepared(cfg, source)
    if launch is None:
        return {}
    plan = launch.plan
    per_node = max([DEFAULT_GPUS_PER_NODE, plan.vllm_tp] + [r.gpus_per_node for r in plan.roles if r.enabled])
    nodes = max([math.ceil(plan.gpus_required / per_node), 1] + [r.nodes for r in plan.roles if r.enabled])
    return {"nodes": nodes, "gpus_per_node": per_node}
