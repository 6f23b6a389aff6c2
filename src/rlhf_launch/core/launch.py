"""Config -> plan -> findings -> trainer argv -> job: the pure pipeline behind `plan` and `submit`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rlhf_launch.core import command, presets, rules, shipped, storage
from rlhf_launch.core import flags as flag_render
from rlhf_launch.core import settings as trainer_settings
from rlhf_launch.core.config import LaunchConfig, load_config
from rlhf_launch.core.findings import Finding, errors
from rlhf_launch.core.memory import MemoryReport, estimate
from rlhf_launch.core.plan import Plan, TrainerExtras, build_plan
from rlhf_launch.core.secrets import wandb_key
from rlhf_launch.core.settings import Settings
from rlhf_launch.core.storage import StorageBudget
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
        return out


def prepare(
    cfg: LaunchConfig,
    *,
    version: str | None = None,
    environ: Mapping[str, str] | None = None,
    load_checkpoint: bool = False,
    flags: FlagSet | None = None,
) -> Launch:
    """Everything `plan` shows, from a validated config. `version` overrides openrlhf.version."""
    flags = flags or for_version(version or cfg.openrlhf.version)
    secret = wandb_key(environ)
    use_wandb = bool(secret and cfg.logging.wandb.project)
    files = shipped.plan(cfg)
    # The argv needs only the placement of each role, which the trainer's settings do not change.
    rendered = flag_render.render(cfg, build_plan(cfg), flags, wandb=use_wandb, load_checkpoint=load_checkpoint, files=files.paths)
    settings, startup = trainer_settings.resolve(cfg, flags, rendered.argv)
    refused = {f.key for f in errors(rendered.findings)}
    startup = [f for f in startup if not (f.key in refused and "refuses --" in f.message)]  # said once, by render
    plan = build_plan(cfg, extras(settings))
    memory = estimate(cfg, plan, settings)
    findings = [
        *rendered.findings,
        *files.findings,
        *startup,
        *rules.check(cfg, plan, flags, wandb_key_present=secret is not None, settings=settings),
        *memory.findings,
    ]
    spec = command.job_spec(cfg, rendered.argv, secret if use_wandb else None, working_dir=files.working_dir)
    return Launch(cfg, flags, plan, rendered.argv, spec, findings, memory, settings, storage=storage.budget(cfg, plan))


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
