"""A script's trainer call -> a launch config (the YAML schema of core/config.py) and findings. Pure.

`import_call` takes the `TrainerCall` that core/script.py found, reads its argv with the
parser of the script's release (detected: the newest release whose parser accepts every
flag; or given), and builds the config mapping by inverting `dialect.SPELLINGS`: each config
key gets the value the script gives its flag(s), or, when the script leaves the flag out,
the value the script's release would use (its parser default), so the rendered argv keeps
that release's behaviour. Flags without a config key go to `extra_args`, spelled for the
target release (renames.json applies renames; removed flags are reported with their
replacement and left out). An optional key (dialect.SOFT) is set only where a value of it renders
the script's flags back exactly; else those flags stay in extra_args. Launcher-owned flags are
not copied: the W&B key (reported, its
value never written or shown: export WANDB_API_KEY instead) and the checkpoint load flag
(`rlhf-launch resume` adds it). `ray job submit --runtime-env-json` maps to `runtime_env`.

The result is checked before it is returned: rendered for the script's release and parsed
back, every flag must equal the script's (else a finding says which and why), and keys that
change nothing in the target's parsed argv are dropped, so the YAML holds only what matters.
"""

from __future__ import annotations

import argparse
import copy
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from rlhf_launch.core import flags as flag_render
from rlhf_launch.core.config import DeepSpeedSection, LaunchConfig
from rlhf_launch.core.findings import Finding, error, errors, warning
from rlhf_launch.core.launch import Launch, prepare
from rlhf_launch.core.plan import build_plan
from rlhf_launch.core.script import TrainerCall
from rlhf_launch.core.secrets import REDACTED, SECRET_ENV
from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.flagset import FlagSet, load, supported_versions

SECTIONS = tuple(LaunchConfig.model_fields)  # the YAML's section order
DEFAULT_GPUS_PER_NODE = 8
_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw")
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")  # `$WANDB_API_KEY` left unexpanded: a name, not a key
# Config keys whose value the config cannot leave unset, where the trainer treats unset and
# this value alike (OpenRLHF starts vLLM only for a number of engines > 0).
_SAME_AS_UNSET: dict[str, Any] = {"placement.vllm.engines": 0}


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

    @property
    def ok(self) -> bool:
        return not errors(self.findings)

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
            f"# Flags read as openrlhf {self.source}"
            + (f" (detected: the newest release that accepts them all; accepted by {_span(self.accepted_by)})" if self.detected else "")
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


# ----------------------------------------------------------------------------- reading the argv


_PARSERS: dict[int, tuple[FlagSet, argparse.ArgumentParser]] = {}  # building one takes ~10 ms; an import parses ~100 times


def _parser(flags: FlagSet) -> argparse.ArgumentParser:
    held = _PARSERS.get(id(flags))
    if held is None or held[0] is not flags:
        held = _PARSERS[id(flags)] = (flags, flags.parser())
    return held[1]


def _parse(flags: FlagSet, argv: list[str]) -> tuple[argparse.Namespace | None, list[str], str]:
    """(namespace, unrecognized tokens, problem) as the release's parser reads `argv`."""
    try:
        namespace, unknown = _parser(flags).parse_known_args(argv)
    except UserError as exc:
        return None, [], exc.message
    return namespace, unknown, ""


def detect(argv: list[str]) -> tuple[FlagSet, tuple[str, ...]]:
    """The newest release whose parser accepts every token, and all that do. With none: a
    UserError when a release's parser refuses the argv outright (a value it cannot read, most
    likely a variable the script does not set, kept literally; an ambiguous abbreviation), else
    the release that leaves the fewest tokens unrecognized (newest first)."""
    accepted: list[str] = []
    fallback: tuple[int, str] | None = None
    problem = ""
    for version in reversed(supported_versions()):
        namespace, unknown, why = _parse(load(version), argv)
        if namespace is None:
            problem = problem or why
            continue
        if not unknown:
            accepted.append(version)
        elif fallback is None or len(unknown) < fallback[0]:
            fallback = (len(unknown), version)
    if accepted:
        return load(accepted[0]), tuple(reversed(accepted))
    if problem or fallback is None:
        raise UserError(
            f"no OpenRLHF release can read the trainer's flags: {problem}",
            hint="a variable the script does not set stays as written: give it with --var NAME=VALUE",
        )
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


def _unknown_findings(unknown: list[str], flags: FlagSet) -> list[Finding]:
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
    return out


# ----------------------------------------------------------------------------- flags -> config keys


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _drop(data: dict[str, Any], path: str) -> None:
    parts = path.split(".")
    nodes = [data]
    for part in parts[:-1]:
        child = nodes[-1].get(part)
        if not isinstance(child, dict):
            return
        nodes.append(child)
    nodes[-1].pop(parts[-1], None)
    for depth in range(len(parts) - 1, 0, -1):  # drop sections left empty
        if not nodes[depth]:
            nodes[depth - 1].pop(parts[depth - 1], None)


def _tail(flag: str) -> str:
    return flag.rsplit(".", 1)[-1]


def _inverse(path: str, values: dict[str, Any]) -> tuple[dict[str, Any], list[Finding]]:
    """Config values from the values of the flags that spell `path` (the inverse of core/flags.py)."""
    by_tail = {_tail(f): v for f, v in values.items()}
    first_flag, first = next(iter(values.items()))
    if path.startswith("placement.colocate."):
        return {path: bool(first)}, []
    if "max_len" in by_tail and "max_new_tokens" in by_tail:
        total, new_tokens = by_tail["max_len"], by_tail["max_new_tokens"]
        flag_len, flag_new = (f for f in values)
        if total is None:
            return {}, []
        if new_tokens is None:
            new_tokens = total - min(1024, max(1, total // 2))
            found = warning(
                f"--{flag_new}",
                f"is not set in the script (OpenRLHF then generates up to --{flag_len} minus each prompt's length); the config "
                f"has no 'unset' for it: data.generate_max_len={new_tokens} renders --{flag_new} {new_tokens} "
                f"(--{flag_len} stays {total})",
                "set data.prompt_max_len + data.generate_max_len to the split you want",
            )
            return {"data.prompt_max_len": total - new_tokens, "data.generate_max_len": new_tokens}, [found]
        if total - new_tokens < 1:
            found = warning(f"--{flag_len}", f"{total} leaves no room for a prompt beside --{flag_new} {new_tokens}; kept at the default")
            return {"data.generate_max_len": new_tokens}, [found]
        return {"data.prompt_max_len": total - new_tokens, "data.generate_max_len": new_tokens}, []
    if "prompt_max_len" in by_tail and "generate_max_len" in by_tail:
        return {"data.prompt_max_len": by_tail["prompt_max_len"], "data.generate_max_len": by_tail["generate_max_len"]}, []
    if "param_dtype" in by_tail:
        return {path: by_tail["param_dtype"] == "bf16"}, []
    if "attn_implementation" in by_tail:
        attn = by_tail["attn_implementation"]
        if attn in ("flash_attention_2", "eager"):
            return {path: attn == "flash_attention_2"}, []
        if "attn_implementation" in DeepSpeedSection.model_fields:
            return {"deepspeed.attn_implementation": attn}, []
        found = warning(
            f"--{first_flag}",
            f"{attn!r} has no config key: {path} renders flash_attention_2 (true) or eager (false); kept at flash_attention_2",
            f"the config chooses between these two only ({path})",
        )
        return {}, [found]
    if len(values) == 2 and isinstance(first, bool) and not isinstance(list(values.values())[1], bool):
        return {path: list(values.values())[1] if first else None}, []  # a switch and what it switches on
    if len(values) > 1 and len({repr(v) for v in values.values()}) > 1:
        shown = ", ".join(f"--{f} {v}" for f, v in values.items())
        return {}, [warning(path, f"one config key sets {', '.join(values)} alike, but the script gives them different values ({shown})")]
    return ({path: first} if first is not None else {}), []


# ----------------------------------------------------------------------------- the import


@dataclass
class _Draft:
    data: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    explained: set[str] = field(default_factory=set)  # flags whose differences a finding already explains
    owned: set[str] = field(default_factory=set)  # the script's flags a config key (or the launcher) carries
    soft: dict[str, dict[str, Any]] = field(default_factory=dict)  # optional key -> its values, kept if they render back


def import_call(
    call: TrainerCall,
    *,
    name: str,
    script_version: str | None = None,
    target_version: str | None = None,
) -> Imported:
    """The config for the trainer call `call`, written for `target_version` (default: the script's release)."""
    argv = call.argv
    accepted: tuple[str, ...]
    if script_version is not None:
        source, accepted = load(script_version), ()
    else:
        source, accepted = detect(argv)
    target = load(target_version) if target_version else source
    namespace, unknown, problem = _parse(source, argv)
    if namespace is None:
        raise UserError(f"openrlhf {source.version} cannot read the trainer's flags: {problem}", hint="check the script's flag values")
    draft = _Draft(data={"name": name, "openrlhf": {"version": target.version}})
    draft.findings += [warning("script", w) for w in call.warnings]
    draft.findings += _unknown_findings(unknown, source)
    written, notes = written_flags(argv, source)
    draft.findings += notes

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
    _check_round_trip(draft, cfg, source, namespace, written, extra)
    if target is not source:
        _check_target(draft, cfg, source, target, namespace, written)
    minimal = _minimal(draft.data, target)
    return Imported(
        data=minimal,
        config=LaunchConfig.model_validate(minimal),
        source=source.version,
        target=target.version,
        detected=script_version is None,
        accepted_by=accepted,
        findings=_redacted(draft.findings, draft.secrets),
        secrets=tuple(s for s in draft.secrets if len(s) >= 4),
    )


def _optional_keys(draft: _Draft, source: FlagSet, namespace: argparse.Namespace) -> None:
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
                _set(trial, key, value)
            try:
                rendered = _render_namespace(LaunchConfig.model_validate(trial), source)
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


def _launcher_owned(draft: _Draft, source: FlagSet, namespace: argparse.Namespace, written: list[str]) -> None:
    key_flag = dialect.pick(source, dialect.WANDB_KEY_FLAG)
    if key_flag and key_flag in written:
        value = getattr(namespace, source.flags[key_flag].dest)
        if isinstance(value, str) and value and not _REFERENCE.fullmatch(value):
            draft.secrets.append(value)
        draft.findings.append(
            warning(
                f"--{key_flag}",
                "the script passes a W&B key; it is not written to the config (W&B stays on: logging.wandb.project is set)",
                f"export {SECRET_ENV} where you run rlhf-launch; it reaches the job through runtime_env only",
            )
        )
    load_flag = dialect.pick(source, dialect.LOAD_FLAG)
    if load_flag and load_flag in written:
        draft.findings.append(
            warning(
                f"--{load_flag}",
                "the script loads the latest checkpoint; rlhf-launch adds this flag itself when it resumes a run "
                "(rlhf-launch resume, or a restart after a failure), so `submit` starts fresh",
            )
        )


def _managed(draft: _Draft, source: FlagSet, namespace: argparse.Namespace, written: list[str]) -> None:
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
                found, _ = _inverse(path, values)
                draft.soft[path] = found  # kept only if it renders the script's flags back (_optional_keys)
            continue
        draft.owned.update(spelling)
        unset_wandb = path.startswith("logging.wandb.") and not any(f in written for f in spelling)
        if unset_wandb and not (wandb_on and path == "logging.wandb.project"):
            continue  # unset W&B settings stay unset: the trainer's defaults apply, and W&B stays off
        found, notes = _inverse(path, values)
        draft.findings += notes
        if notes:
            draft.explained.update(spelling)
        for key, value in found.items():
            if key.startswith("placement.colocate."):
                if value:
                    colocate.append(key.rsplit(".", 1)[-1])
                continue
            _set(draft.data, key, value)
    draft.data.setdefault("placement", {})["colocate"] = colocate
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
    draft: _Draft,
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
    target_owned = {f: p for f, p in dialect.managed_flags(target).items() if p not in soft or _get(draft.data, p) is not None}
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
        for flag, flag_value in found.flags:
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
            extra[flag] = flag_value
            origin[name] = value
    if moved:
        draft.findings.append(warning("extra_args", f"openrlhf {target.version} spells these differently: {', '.join(moved)}"))
    if extra:
        draft.data["extra_args"] = extra
        kept = ", ".join(f"--{n}" for n in extra)
        draft.findings.append(warning("extra_args", f"no config key carries {kept}; passed through extra_args as the script sets them"))
    return origin


def _runtime_env(draft: _Draft, call: TrainerCall) -> None:
    env = call.runtime_env
    if not env:
        return
    known = set(LaunchConfig.model_fields["runtime_env"].annotation.model_fields)  # type: ignore[union-attr]
    section: dict[str, Any] = {}
    for key, value in env.items():
        if key not in known:
            draft.findings.append(
                warning(f"runtime_env.{key}", f"the script's --runtime-env-json sets {key}, which the config has no key for; not imported")
            )
            continue
        if key == "working_dir" and isinstance(value, str) and ("$" in value or "`" in value):
            draft.findings.append(
                warning(
                    "runtime_env.working_dir",
                    f"{value!r} is not known without running the script; not imported",
                    "set runtime_env.working_dir to the directory the job should upload",
                )
            )
            continue
        if key == "env_vars" and isinstance(value, dict):
            value = dict(value)
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
            if not value:
                continue
        section[key] = value
    if section:
        draft.data["runtime_env"] = section


def _validated(draft: _Draft, source: FlagSet) -> LaunchConfig:
    """Validate, fixing or dropping (with a finding) each value the schema refuses, e.g. 0 nodes."""
    for _ in range(50):
        try:
            return LaunchConfig.model_validate(draft.data)
        except ValidationError as exc:
            problem = exc.errors()[0]
        if not problem["loc"]:
            raise UserError(f"the imported config is not valid: {problem['msg']}")
        path = ".".join(str(p) for p in problem["loc"])
        value = _get(draft.data, path)
        if isinstance(value, str) and "," in value and _accepts(draft.data, path, value.split(",")):
            _set(draft.data, path, value.split(","))  # a comma-separated list, which the schema takes as a list
            continue
        spelling = dialect.spelling_for(path, source) if path in dialect.SPELLINGS else None
        draft.explained.update(spelling or ())
        what = " ".join(f"--{f}" for f in spelling) + f" {value!r}" if spelling else f"the value {value!r}"
        draft.findings.append(warning(path, f"{what} cannot be written to {path} ({problem['msg']}); the config's default renders instead"))
        _drop(draft.data, path)
    raise UserError("the imported config could not be made valid")


def _accepts(data: dict[str, Any], path: str, value: Any) -> bool:
    trial = copy.deepcopy(data)
    _set(trial, path, value)
    try:
        LaunchConfig.model_validate(trial)
    except ValidationError as exc:
        return not any(".".join(str(p) for p in e["loc"]).startswith(path) for e in exc.errors())
    return True


def _cluster_size(cfg: LaunchConfig, target: FlagSet, source: FlagSet) -> dict[str, int]:
    """Nodes x GPUs per node that fit the layout: 8 GPUs per node unless a role needs more on one."""
    launch = _launch(cfg, target) or _launch(cfg, source)
    if launch is None:
        return {}
    plan = launch.plan
    per_node = max([DEFAULT_GPUS_PER_NODE, plan.vllm_tp] + [r.gpus_per_node for r in plan.roles if r.enabled])
    nodes = max([math.ceil(plan.gpus_required / per_node), 1] + [r.nodes for r in plan.roles if r.enabled])
    return {"nodes": nodes, "gpus_per_node": per_node}


def _launcher_dests(flags: FlagSet) -> set[str]:
    names = [dialect.pick(flags, dialect.WANDB_KEY_FLAG), dialect.pick(flags, dialect.LOAD_FLAG)]
    return {flags.flags[n].dest for n in names if n}


def _launch(cfg: LaunchConfig, flags: FlagSet) -> Launch | None:
    """What `plan` makes of the config for this release (argv, plan, findings); None if it refuses."""
    try:
        return prepare(cfg, flags=flags, environ={})
    except UserError:
        return None


def _render_namespace(cfg: LaunchConfig, flags: FlagSet) -> argparse.Namespace | None:
    """The release's parse of the argv `plan` renders for the config (None if it has unknown tokens)."""
    launch = _launch(cfg, flags)
    if launch is None:
        return None
    namespace, unknown, _ = _parse(flags, launch.argv)
    return namespace if not unknown else None


def _argv_namespace(cfg: LaunchConfig, flags: FlagSet) -> argparse.Namespace | None:
    """The parse of the config's trainer argv alone: what `prepare` renders, without its checks
    (start-up settings, memory, the parser run), which an import needs dozens of times."""
    try:
        rendered = flag_render.render(cfg, build_plan(cfg), flags)
    except (TypeError, ValueError):
        return None
    namespace, unknown, _ = _parse(flags, rendered.argv)
    return namespace if not unknown else None


def _check_round_trip(
    draft: _Draft, cfg: LaunchConfig, source: FlagSet, script: argparse.Namespace, written: list[str], extra: dict[str, Any]
) -> None:
    """Render the config for the script's release and compare with the script, flag by flag."""
    as_source = cfg.model_copy(update={"extra_args": extra})
    namespace = _render_namespace(as_source, source)
    if namespace is None:
        return  # the config cannot be rendered for the script's release (a target-only key): nothing to compare
    skip = _launcher_dests(source) | {source.flags[f].dest for f in draft.explained if f in source.flags}
    same_as_unset = {dialect.flag_for(path, source): value for path, value in _SAME_AS_UNSET.items()}
    for name, flag in source.flags.items():
        if flag.dest in skip:
            continue
        want, got = getattr(script, flag.dest, None), getattr(namespace, flag.dest, None)
        if want == got or (want is None and name in same_as_unset and got == same_as_unset[name]):
            continue
        skip.add(flag.dest)
        set_by = "the script sets" if name in written else f"openrlhf {source.version}'s default is"
        draft.findings.append(warning(f"--{name}", f"{set_by} {want!r}; the config renders {got!r}"))


def _check_target(
    draft: _Draft, cfg: LaunchConfig, source: FlagSet, target: FlagSet, script: argparse.Namespace, written: list[str]
) -> None:
    """Render the config for the target release and compare each flag the script sets with what
    it became there (renames.json). Memory, batch sizes and the like are `plan`'s to report."""
    launch = _launch(cfg, target)
    namespace = _render_namespace(cfg, target) if launch is not None else None
    if launch is None or namespace is None:
        draft.findings.append(error("openrlhf.version", f"openrlhf {target.version} cannot render this config", "see rlhf-launch plan"))
        return
    draft.findings += [f for f in launch.findings if f.key.startswith("extra_args")]
    skip = _launcher_dests(source)
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


def _minimal(data: dict[str, Any], target: FlagSet) -> dict[str, Any]:
    """`data` without the keys that change nothing: the target's parsed argv, the cluster and the
    runtime env stay the same without them."""
    full = LaunchConfig.model_validate(data)
    reference = _argv_namespace(full, target)
    result = copy.deepcopy(data)
    defaults = LaunchConfig.model_validate({"name": data["name"]}).model_dump()
    values = full.model_dump()
    for path in _leaves(data):
        if path in ("name", "openrlhf.version"):
            continue
        section = path.split(".", 1)[0]
        trial = copy.deepcopy(result)
        _drop(trial, path)
        try:
            cfg = LaunchConfig.model_validate(trial)
        except ValidationError:
            continue
        if _get(defaults, path) == _get(values, path):
            result = trial  # the schema's default: the same config without it
            continue
        if section in ("cluster", "runtime_env", "extra_args") or reference is None:
            continue
        namespace = _argv_namespace(cfg, target)
        if namespace == reference and cfg.logging.wandb.project == full.logging.wandb.project:
            result = trial
    return {section: result[section] for section in SECTIONS if section in result}


def _leaves(data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key != "env_vars" and path != "extra_args":
            out += _leaves(value, path + ".")
        else:
            out.append(path)
    return out
