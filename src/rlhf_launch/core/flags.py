"""Config -> the exact trainer argv of one OpenRLHF release. Pure.

The spellings come from openrlhf/dialect.py; here each config key gets its value (the
plan's resolved placement, derived values such as `max_len` = prompt + generate), and
`extra_args` are checked against the release's flag set. A key whose value is on but that
the release cannot express is an error naming the release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error, warning
from rlhf_launch.core.plan import Plan
from rlhf_launch.openrlhf import dialect, renames
from rlhf_launch.openrlhf.extract import BOOLEAN_OPTIONAL
from rlhf_launch.openrlhf.flagset import FlagSet


@dataclass(frozen=True)
class Ctx:
    cfg: LaunchConfig
    plan: Plan
    files: dict[str, str] | None = None  # config key -> the path of a shipped file in the job


Getter = Callable[[Ctx], Any]


class Unexpressible(Exception):
    """The release has the key's flags, but not this value of it (`key`: the config key that set it)."""

    def __init__(self, message: str, key: str = ""):
        super().__init__(message)
        self.key = key


def _attr(path: str) -> Getter:
    parts = path.split(".")

    def get(ctx: Ctx) -> Any:
        node: Any = ctx.cfg
        for part in parts:
            node = getattr(node, part)
        return node

    return get


def _placement(role: str, field: str) -> Getter:
    """Placement keys render the plan's resolved values (defaults and colocation applied)."""

    def get(ctx: Ctx) -> int:
        resolved = ctx.plan.role(role)
        return resolved.nodes if field == "nodes" else resolved.gpus_per_node

    return get


def _colocated(kind: str) -> Getter:
    return lambda ctx: kind in ctx.cfg.placement.colocate


def _total_len(ctx: Ctx) -> int:
    return ctx.cfg.data.prompt_max_len + ctx.cfg.data.generate_max_len


def _new_tokens(ctx: Ctx) -> int | None:
    """--max_new_tokens: unset (OpenRLHF: up to max_len minus each prompt) under data.generate_to_max_len."""
    return None if ctx.cfg.data.generate_to_max_len else ctx.cfg.data.generate_max_len


def _generate_len(ctx: Ctx) -> int:
    """--generate_max_len (releases before --max_len): a fixed budget only."""
    if ctx.cfg.data.generate_to_max_len:
        raise Unexpressible("generation up to max_len (it has only --generate_max_len, a fixed length)", "data.generate_to_max_len")
    return ctx.cfg.data.generate_max_len


def _dtype(ctx: Ctx) -> str:
    return ctx.cfg.deepspeed.dtype


def _attn(ctx: Ctx) -> str:
    return ctx.cfg.deepspeed.attention


def _flash_switch(ctx: Ctx) -> bool:
    """Releases before 0.8.10 only switch flash attention on or off."""
    attention = ctx.cfg.deepspeed.attention
    if attention not in ("flash_attention_2", "eager"):
        raise Unexpressible(
            f"attention {attention!r} (it has only --flash_attn: flash_attention_2 or eager)", "deepspeed.attn_implementation"
        )
    return attention == "flash_attention_2"


def _bf16_switch(ctx: Ctx) -> bool:
    return ctx.cfg.deepspeed.dtype == "bf16"


def _remote(ctx: Ctx) -> str | None:
    """Remote reward URLs, comma-joined as OpenRLHF splits them, or the shipped reward-function file."""
    models = ctx.cfg.models
    if models.reward_func:
        return (ctx.files or {}).get("models.reward_func", models.reward_func)
    return ",".join(models.remote_urls) or None


def _agent(ctx: Ctx) -> str | None:
    agent = ctx.cfg.models.agent_func
    return (ctx.files or {}).get("models.agent_func", agent) if agent else None


# IS-correction schemes as 0.11.2's level and mode (its help: TIS = token clip, ICEPOP = token
# mask, seq-mask-tis = seq mask).
IS_SCHEMES = {"tis": ("token", "clip"), "icepop": ("token", "mask"), "seq-mask-tis": ("seq", "mask")}


def _is_part(index: int) -> Getter:
    def get(ctx: Ctx) -> str | None:
        scheme = ctx.cfg.train.is_correction
        if scheme is None:
            return None
        if scheme not in IS_SCHEMES:
            raise Unexpressible(f"IS correction {scheme!r} (its schemes: {', '.join(IS_SCHEMES)})")
        return IS_SCHEMES[scheme][index]

    return get


def _is_on(ctx: Ctx) -> bool:
    return ctx.cfg.train.is_correction is not None


def _is_switch_only(ctx: Ctx) -> bool:
    """Releases with an IS-correction switch and no type: token-level TIS only."""
    scheme = ctx.cfg.train.is_correction
    if scheme not in (None, "tis"):
        raise Unexpressible(f"IS correction {scheme!r} (it has only TIS)")
    return scheme is not None


# The value of a config key, where it is not simply the config attribute of that name.
VALUES: dict[str, Getter] = {
    **{f"placement.{r}.{f}": _placement(r, f) for r in ("actor", "critic", "ref", "reward") for f in ("nodes", "gpus_per_node")},
    **{f"placement.colocate.{kind}": _colocated(kind) for kind in ("actor_ref", "critic_reward", "all")},
    "models.reward_remote_url": _remote,
    "models.agent_func": _agent,
}
# The value of one flag, where a spelling's flags do not all carry the key's value (by the
# flag's last name segment).
FLAG_VALUES: dict[str, Getter] = {
    "param_dtype": _dtype,
    "attn_implementation": _attn,
    "max_len": _total_len,
    "max_new_tokens": _new_tokens,
    "generate_max_len": _generate_len,
    "flash_attn": _flash_switch,
    "bf16": _bf16_switch,
    "is_correction_level": _is_part(0),
    "is_correction_mode": _is_part(1),
    "is_correction_enable": _is_on,
    "enable_vllm_is_correction": _is_on,
    "is_correction_type": _attr("train.is_correction"),
    "vllm_is_correction_type": _attr("train.is_correction"),
}
# The releases with the switch alone (0.8.9 .. 0.9.2) have no type to carry the scheme.
SWITCH_ONLY = {("train.is_correction", "enable_vllm_is_correction"): _is_switch_only}


def value_of(path: str) -> Getter:
    return VALUES.get(path) or _attr(path)


def _flag_value(path: str, flag: str, spelling: tuple[str, ...] = ()) -> Getter:
    if len(spelling) == 1 and (path, flag) in SWITCH_ONLY:
        return SWITCH_ONLY[(path, flag)]
    return FLAG_VALUES.get(flag.rsplit(".", 1)[-1]) or value_of(path)


@cache
def _default(path: str) -> Any:
    """The config's default for key `path` (what a config that does not set it holds)."""
    node: Any = LaunchConfig.model_validate({"name": "default"})
    for part in path.split("."):
        node = getattr(node, part, None)
    return node


def _unset(cfg: LaunchConfig, path: str) -> bool:
    """Whether the config leaves key `path` at its default (a value the plan derives is not the user's)."""
    try:
        return bool(_config_value(cfg, path) == _default(path))
    except AttributeError:
        return False


def _set(value: Any) -> bool:
    return value not in (None, False, [], "")


def tokens(flags: FlagSet, name: str, value: Any) -> list[str]:
    """argv tokens for one flag; TypeError when the value does not suit the flag's kind."""
    flag = flags.flags[name]
    if value is None:
        return []  # unset: the release's default
    if flag.action in ("store_true", "store_false"):
        wanted = flag.action == "store_true"
        if not isinstance(value, bool):
            raise TypeError(f"--{name} is a switch; got {value!r}")
        return [f"--{name}"] if value == wanted else []
    if flag.action == BOOLEAN_OPTIONAL:  # a fork's argparse.BooleanOptionalAction: --x / --no-x
        if not isinstance(value, bool):
            raise TypeError(f"--{name} is a switch; got {value!r}")
        return [f"--{name}" if value else f"--no-{name}"]
    if isinstance(value, bool) and flag.type == {"expr": "bool"}:
        return [f"--{name}", "True" if value else ""]  # a fork's `type=bool`: any non-empty text reads as True
    if isinstance(value, bool):
        raise TypeError(f"--{name} takes a value, not a switch")
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return [f"--{name}", *(str(v) for v in values)]


def misfit(flags: FlagSet, name: str, value: Any) -> str:
    """Why the release's parser would refuse this value for the flag ('' if it would not)."""
    flag = flags.flags[name]
    if flag.action != "store" or value is None or isinstance(value, bool):
        return ""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    nargs = flag.nargs
    if nargs is None and len(values) != 1:
        return f"--{name} takes one value in {flags.label}; got {len(values)}"
    if isinstance(nargs, int) and len(values) != nargs:
        return f"--{name} takes {nargs} values in {flags.label}; got {len(values)}"
    if flag.choices and any(v not in flag.choices for v in values):
        shown = repr(values[0]) if len(values) == 1 else repr(values)
        return f"{flags.label} has no {shown} for --{name} (choices: {', '.join(map(str, flag.choices))})"
    return ""


@dataclass(frozen=True)
class Rendered:
    argv: list[str]
    findings: list[Finding]


def render(
    cfg: LaunchConfig,
    plan: Plan,
    flags: FlagSet,
    *,
    wandb: bool = False,
    load_checkpoint: bool = False,
    files: dict[str, str] | None = None,
) -> Rendered:
    """The trainer's argv for this release, and errors for what the release cannot express.

    `files`: config key -> where a shipped file lies in the job (core/shipped.py)."""
    ctx = Ctx(cfg, plan, files or {})
    argv: list[str] = []
    findings: list[Finding] = []
    for path in dialect.SPELLINGS:
        spelling = dialect.spelling_for(path, flags)
        if spelling is None:
            value = value_of(path)(ctx)
            if flags.fork is not None and (value == _default(path) or _unset(ctx.cfg, path)):
                continue  # a fork without the key's flag: left unset in the config, the fork's own default applies
            if _set(value):
                findings.append(error(path, f"{flags.label} has no flag for {path}", "remove it or pick a release that has it"))
            continue
        for name in spelling:
            try:
                value = _flag_value(path, name, spelling)(ctx)
                argv += tokens(flags, name, value)
            except Unexpressible as exc:
                findings.append(
                    error(exc.key or path, f"{flags.label} cannot express {exc}", "pick a release that has it, or another value")
                )
                break
            except TypeError as exc:
                findings.append(error(path, str(exc)))
                break
            problem = misfit(flags, name, value)  # rendered all the same: the trainer would refuse it too
            if problem:
                findings.append(error(path, problem))
    if wandb:
        wandb_flag = dialect.pick(flags, dialect.WANDB_KEY_FLAG)
        if wandb_flag:
            argv += [f"--{wandb_flag}", dialect.WANDB_PLACEHOLDER]
    if load_checkpoint or cfg.checkpoint.load:
        load_flag = dialect.pick(flags, dialect.LOAD_FLAG)
        if load_flag is None:
            findings.append(error("checkpoint.load" if cfg.checkpoint.load else "resume", f"{flags.label} has no checkpoint load flag"))
        else:
            argv.append(f"--{load_flag}")
    argv_extra, extra_findings = _render_extra(cfg, flags)
    findings += extra_findings + _foreign(argv + argv_extra, flags, findings + extra_findings)
    return Rendered(argv + argv_extra, findings)


def _foreign(argv: list[str], flags: FlagSet, said: list[Finding]) -> list[Finding]:
    """The last guard: every `--name` the argv holds is a flag of the target release by its
    exact name (its parser refuses any other: an unknown flag, or another era's spelling that
    a rename or an abbreviation let through). Flags an error already names are not said twice."""
    out = []
    for token in argv:
        if not token.startswith("--") or token == "--":
            continue
        name = token[2:].split("=", 1)[0]
        if name in flags or any(f.level == "error" and f"--{name}" in f.message for f in said):
            continue
        having = renames.releases_having(name)
        where = (
            f"a flag of openrlhf {having[0]}" + (f" .. {having[-1]}" if len(having) > 1 else "") if having else "a flag of no known release"
        )
        out.append(
            error(
                "openrlhf.version",
                f"{flags.label} has no flag --{name}: it is {where}, and its parser refuses any other",
                f"pick a release that has it ({', '.join(having[-3:])}) or drop the setting" if having else "drop the setting",
            )
        )
    return out


def _owned(cfg: LaunchConfig, flags: FlagSet) -> dict[str, str]:
    """Flags the config sets: every key's, except an unset SOFT key's (extra_args may carry those)."""
    return {
        flag: path
        for flag, path in dialect.managed_flags(flags).items()
        if path not in dialect.SOFT or _config_value(cfg, path) is not None
    }


def _config_value(cfg: LaunchConfig, path: str) -> Any:
    node: Any = cfg
    for part in path.split("."):
        node = getattr(node, part)
    return node


def _render_extra(cfg: LaunchConfig, flags: FlagSet) -> tuple[list[str], list[Finding]]:
    argv: list[str] = []
    findings: list[Finding] = []
    owned = _owned(cfg, flags)
    for name, value in cfg.extra_args.items():
        key = f"extra_args.{name}"
        if name.startswith("-"):
            findings.append(error(key, f"write flag names without dashes: {name.lstrip('-')}"))
            continue
        spelled = renames.for_target(name, value, flags)  # another era's spelling or an abbreviation
        if spelled is None:
            guess = dialect.similar(name, flags)
            nameless = renames.nameless(name, value, flags)  # another release's flag, with no name in this one
            if nameless is not None:
                findings.append(error(key, *nameless))
                continue
            hint = f"{flags.label} calls it {guess}" if guess else "see the release's train_ppo_ray flags"
            findings.append(error(key, f"{flags.label} has no flag --{name}", hint))
            continue
        if name not in flags:
            is_error, message, hint = spelled.explain(name, value, flags.version)
            findings.append((error if is_error else warning)(key, message, hint))
        for flag_name, flag_value in spelled.flags:
            if flag_name in owned:
                findings.append(
                    error(key, f"--{flag_name} is set by the launcher from {owned[flag_name]}", f"set {owned[flag_name]} instead")
                )
                continue
            try:
                argv += tokens(flags, flag_name, flag_value)
            except TypeError as exc:
                findings.append(error(key, str(exc)))
    return argv, findings
