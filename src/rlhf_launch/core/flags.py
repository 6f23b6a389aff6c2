"""Config -> the exact trainer argv of one OpenRLHF release. Pure.

The spellings come from openrlhf/dialect.py; here each config key gets its value (the
plan's resolved placement, derived values such as `max_len` = prompt + generate), and
`extra_args` are checked against the release's flag set. A key whose value is on but that
the release cannot express is an error naming the release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlhf_launch.core.config import LaunchConfig
from rlhf_launch.core.findings import Finding, error
from rlhf_launch.core.plan import Plan, TrainerExtras
from rlhf_launch.openrlhf import dialect
from rlhf_launch.openrlhf.flagset import FlagSet


@dataclass(frozen=True)
class Ctx:
    cfg: LaunchConfig
    plan: Plan


Getter = Callable[[Ctx], Any]


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


def _dtype(ctx: Ctx) -> str:
    return "bf16" if ctx.cfg.deepspeed.bf16 else "fp16"


def _attn(ctx: Ctx) -> str:
    return "flash_attention_2" if ctx.cfg.deepspeed.flash_attn else "eager"


# The value of a config key, where it is not simply the config attribute of that name.
VALUES: dict[str, Getter] = {
    **{f"placement.{r}.{f}": _placement(r, f) for r in ("actor", "critic", "ref", "reward") for f in ("nodes", "gpus_per_node")},
    **{f"placement.colocate.{kind}": _colocated(kind) for kind in ("actor_ref", "critic_reward", "all")},
}
# The value of one flag, where a spelling's flags do not all carry the key's value (by the
# flag's last name segment).
FLAG_VALUES: dict[str, Getter] = {
    "param_dtype": _dtype,
    "attn_implementation": _attn,
    "max_len": _total_len,
    "max_new_tokens": _attr("data.generate_max_len"),
    "generate_max_len": _attr("data.generate_max_len"),
}


def value_of(path: str) -> Getter:
    return VALUES.get(path) or _attr(path)


def _flag_value(path: str, flag: str) -> Getter:
    return FLAG_VALUES.get(flag.rsplit(".", 1)[-1]) or value_of(path)


def _is_on(value: Any) -> bool:
    return value not in (None, False, [], "")


def extras(cfg: LaunchConfig, flags: FlagSet) -> TrainerExtras:
    """Trainer settings outside the schema that change the layout, read from extra_args."""
    values: dict[str, Any] = {}
    for field, names in dialect.EXTRAS.items():
        for name in names:
            if name in cfg.extra_args and name in flags:
                values[field] = cfg.extra_args[name]

    def size(field: str) -> int:
        value = values.get(field)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    return TrainerExtras(
        async_train=values.get("async_train") is True,
        agent=bool(values.get("agent")),
        ring_attn_size=size("ring_attn_size"),
        ds_tensor_parallel_size=size("ds_tensor_parallel_size"),
    )


def tokens(flags: FlagSet, name: str, value: Any) -> list[str]:
    """argv tokens for one flag; TypeError when the value does not suit the flag's kind."""
    flag = flags.flags[name]
    if flag.action in ("store_true", "store_false"):
        wanted = flag.action == "store_true"
        if not isinstance(value, bool):
            raise TypeError(f"--{name} is a switch; got {value!r}")
        return [f"--{name}"] if value == wanted else []
    if value is None:
        return []
    if isinstance(value, bool):
        raise TypeError(f"--{name} takes a value, not a switch")
    if isinstance(value, (list, tuple)):
        return [f"--{name}", *(str(v) for v in value)]
    return [f"--{name}", str(value)]


@dataclass(frozen=True)
class Rendered:
    argv: list[str]
    findings: list[Finding]


def render(cfg: LaunchConfig, plan: Plan, flags: FlagSet, *, wandb: bool = False, load_checkpoint: bool = False) -> Rendered:
    """The trainer's argv for this release, and errors for what the release cannot express."""
    ctx = Ctx(cfg, plan)
    argv: list[str] = []
    findings: list[Finding] = []
    for path in dialect.SPELLINGS:
        spelling = dialect.spelling_for(path, flags)
        if spelling is None:
            if _is_on(value_of(path)(ctx)):
                findings.append(error(path, f"openrlhf {flags.version} has no flag for {path}", "remove it or pick a release that has it"))
            continue
        for name in spelling:
            argv += tokens(flags, name, _flag_value(path, name)(ctx))
    if wandb:
        wandb_flag = dialect.pick(flags, dialect.WANDB_KEY_FLAG)
        if wandb_flag:
            argv += [f"--{wandb_flag}", dialect.WANDB_PLACEHOLDER]
    if load_checkpoint:
        load_flag = dialect.pick(flags, dialect.LOAD_FLAG)
        if load_flag is None:
            findings.append(error("resume", f"openrlhf {flags.version} has no checkpoint load flag"))
        else:
            argv.append(f"--{load_flag}")
    argv_extra, extra_findings = _render_extra(cfg, flags)
    return Rendered(argv + argv_extra, findings + extra_findings)


def _render_extra(cfg: LaunchConfig, flags: FlagSet) -> tuple[list[str], list[Finding]]:
    argv: list[str] = []
    findings: list[Finding] = []
    owned = dialect.managed_flags(flags)
    for name, value in cfg.extra_args.items():
        key = f"extra_args.{name}"
        if name.startswith("-"):
            findings.append(error(key, f"write flag names without dashes: {name.lstrip('-')}"))
            continue
        if name not in flags:
            guess = dialect.similar(name, flags)
            hint = f"openrlhf {flags.version} calls it {guess}" if guess else "see the release's train_ppo_ray flags"
            findings.append(error(key, f"openrlhf {flags.version} has no flag --{name}", hint))
            continue
        if name in owned:
            findings.append(error(key, f"--{name} is set by the launcher from {owned[name]}", f"set {owned[name]} instead"))
            continue
        try:
            argv += tokens(flags, name, value)
        except TypeError as exc:
            findings.append(error(key, str(exc)))
    return argv, findings
