"""Config -> plan -> findings -> trainer argv -> job: the pure pipeline behind `plan` and `submit`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rlhf_launch.core import command, presets, rules, shipped, storage
from rlhf_launch.core import flags as flag_render
from rlhf_launch.core import settings as trainer_settings
from rlhf_launch.core.config import LaunchConfig, load_config
from rlhf_launch.core.estimate import StepEstimate, estimate_step
from rlhf_launch.core.findings import Finding, errors, warning
from rlhf_launch.core.memory import MemoryReport, estimate
from rlhf_launch.core.plan import Plan, TrainerExtras, build_plan
from rlhf_launch.core.secrets import wandb_key
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.storage import StorageBudget
from rlhf_launch.openrlhf import dialect, fork
from rlhf_launch.openrlhf.flagset import FlagSet, for_version


@dataclass(frozen=True)
class Launch:
    cfg: LaunchConfig
    flags: FlagSet
    plan: Plan
    argv: list[str]
    spec: command.JobSpec
    findings: list[Finding]
    memory: MemoryReport | None = None
    settings: Settings | None = None  # what the trainer runs with, after OpenRLHF's own corrections
    storage: StorageBudget | None = None  # free space checkpoint.ckpt_path needs
    address: str | None = None  # the dashboard the job goes to, when not the config's (--address, RAY_API_SERVER_ADDRESS)
    estimate: StepEstimate | None = None  # seconds per step by phase, run hours (None: the actor's size is unknown)

    @property
    def ok(self) -> bool:
        return not errors(self.findings)

    @property
    def target(self) -> str:
        """The dashboard address the equivalent `ray job submit` names."""
        return self.address or self.cfg.cluster.address

    def at(self, address: str | None) -> Launch:
        """This launch, submitted to `address` (None: the config's)."""
        return replace(self, address=address) if address and address != self.target else self

    @property
    def command(self) -> str:
        return command.ray_job_submit(self.target, self.spec)

    def as_json(self) -> dict[str, Any]:
        plan = self.plan
        roles = [
            {
                "role": r.role,
                "nodes": r.nodes,
                "gpus_per_node": r.gpus_per_node,
                "gpus": r.gpus if r.enabled else 0,
                "enabled": r.enabled,
                "colocated_with": plan.colocated_with(r.role) if r.enabled else [],
            }
            for r in plan.roles
        ]
        if plan.vllm_engines:
            roles.append(
                {
                    "role": "vllm",
                    "nodes": None,
                    "gpus_per_node": None,
                    "engines": plan.vllm_engines,
                    "tensor_parallel_size": plan.vllm_tp,
                    "gpus": plan.vllm_gpus,
                    "enabled": True,
                    "colocated_with": plan.colocated_with("vllm"),
                }
            )
        out: dict[str, Any] = {
            "name": self.cfg.name,
            "openrlhf_version": self.flags.version,
            "openrlhf_fork": fork.as_json(self.flags),
            "gpus_required": plan.gpus_required,
            "cluster_gpus": plan.cluster_gpus,
            "cluster": {"nodes": plan.cluster_nodes, "gpus_per_node": plan.cluster_gpus_per_node},
            "layout": plan.breakdown(),
            "roles": roles,
            "placement_groups": [{"name": g.name, "bundles": g.bundles, "roles": list(g.roles), "packed": g.packed} for g in plan.groups],
            "trainer_argv": self.argv,
            "entrypoint": self.spec.entrypoint,
            "runtime_env": self.spec.shown_runtime_env,
            "command": self.command,
            "findings": [f.as_dict() for f in self.findings],
            "ok": self.ok,
        }
        if self.memory is not None:
            out["memory"] = self.memory.as_json()
            out["memory_groups"] = self.memory.groups_json()
            out["host_gib_per_node"] = {k: round(v, 1) for k, v in self.memory.host_per_node.items()}
        if self.storage is not None:
            out["storage"] = self.storage.as_json()
        out["estimate"] = self.estimate.as_json() if self.estimate is not None else None
        return out


def prepare(
    cfg: LaunchConfig,
    *,
    version: str | None = None,
    environ: Mapping[str, str] | None = None,
    load_checkpoint: bool = False,
    flags: FlagSet | None = None,
) -> Launch:
    """Everything `plan` shows, from a validated config. `version` overrides openrlhf.version
    (not a fork's: openrlhf.source, or an openrlhf package in runtime_env.working_dir)."""
    said: list[Finding] = []
    if flags is None:
        flags, said = flag_set(cfg, version)
    secret = wandb_key(environ)
    use_wandb = bool(secret and cfg.logging.wandb.project)
    files = shipped.plan(cfg)
    # The argv needs only the placement of each role, which the trainer's settings do not change.
    builtin = TrainerExtras(builtin_reward=builtin_reward(flags))
    rendered = flag_render.render(cfg, build_plan(cfg, builtin), flags, wandb=use_wandb, load_checkpoint=load_checkpoint, files=files.paths)
    settings, startup = trainer_settings.resolve(cfg, flags, rendered.argv)
    refused = {f.key for f in errors(rendered.findings)}
    startup = [f for f in startup if not (f.key in refused and "refuses --" in f.message)]  # said once, by render
    plan = build_plan(cfg, replace(extras(settings), builtin_reward=builtin.builtin_reward))
    memory = estimate(cfg, plan, settings)
    findings = [
        *said,
        *fork_findings(flags, rendered.argv),
        *rendered.findings,
        *files.findings,
        *startup,
        *rules.check(cfg, plan, flags, wandb_key_present=secret is not None, settings=settings),
        *memory.findings,
    ]
    spec = command.job_spec(cfg, rendered.argv, secret if use_wandb else None, working_dir=files.working_dir)
    step = estimate_step(cfg, plan, settings=settings, version=flags.version)
    return Launch(cfg, flags, plan, rendered.argv, spec, findings, memory, settings, storage=storage.budget(cfg, plan), estimate=step)


def flag_set(cfg: LaunchConfig, version: str | None = None) -> tuple[FlagSet, list[Finding]]:
    """The flags the trainer will read: a fork's own (openrlhf.source, else an openrlhf package in
    runtime_env.working_dir, which Ray puts first on the trainer's path), else the release's."""
    said: list[Finding] = []
    source, via = cfg.openrlhf.source, "openrlhf.source"
    working_dir = cfg.runtime_env.working_dir
    if source is None and working_dir and fork.holds_package(working_dir):
        source, via = working_dir, "runtime_env.working_dir"
    if source is None:
        return for_version(version or cfg.openrlhf.version), said
    flags = fork.read(source, via=via)
    assert flags.fork is not None
    if via == "runtime_env.working_dir":
        said.append(
            warning(
                via,
                f"{working_dir} holds an openrlhf package, and Ray puts the working dir first on the trainer's path: "
                f"the trainer runs that copy, so its flags are used ({flags.label})",
                "set openrlhf.source to say so, or remove openrlhf/ from the working dir to run the installed release",
            )
        )
    ignored = [v for v in (version, cfg.openrlhf.version) if v and v != flags.version]
    if ignored:
        said.append(
            warning("openrlhf.version", f"openrlhf {ignored[0]} is not used: the trainer runs {flags.label}", f"remove it, or {via}")
        )
    return flags, said


def builtin_reward(flags: FlagSet) -> bool:
    """A fork with no flag for a reward model scores rollouts itself: no reward role is placed."""
    return flags.fork is not None and dialect.pick(flags, dialect.TRAINER["reward_model"]) is None


def fork_findings(flags: FlagSet, argv: list[str]) -> list[Finding]:
    """A fork's own flags the argv passes: said once, as passing through unchecked."""
    if flags.fork is None:
        return []
    only = set(flags.fork.only)
    passed = [t[2:].split("=", 1)[0] for t in argv if t.startswith("--") and t[2:].split("=", 1)[0] in only]
    if not passed:
        return []
    return [
        warning(
            "extra_args",
            f"the fork's own flags pass through unchecked: {', '.join('--' + n for n in dict.fromkeys(passed))} "
            f"(openrlhf {flags.version}, the nearest release, has none of them; only the fork's parser reads them)",
        )
    ]


def extras(settings: Settings) -> TrainerExtras:
    """The trainer settings that change the layout."""
    return TrainerExtras(
        async_train=settings.async_train,
        agent=bool(settings.agent),
        ring_attn_size=settings.ring_attn_size,
        ds_tensor_parallel_size=settings.ds_tensor_parallel_size,
    )


def from_config(config: str, overrides: list[str], version: str | None = None) -> Launch:
    """`plan CONFIG key=value ...`: a YAML file or a preset name, overridden, validated, prepared."""
    return prepare(load_config(presets.config_path(config), overrides), version=version)
