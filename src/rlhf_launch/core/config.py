"""The launch config: one YAML file, version-independent, validated with key paths.

Schema, defaults and loading live here and nowhere else. `load_config` reads YAML (keeping
line numbers), applies `key=value` overrides, and validates; every mistake becomes a
`UserError` that names the key path, the YAML line where known, and a fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt, ValidationError, field_validator

from rlhf_launch.core.secrets import SECRET_ENV
from rlhf_launch.errors import UserError

Colocation = Literal["actor_ref", "critic_reward", "all"]
KeyPath = tuple[str | int, ...]  # a key's path in the YAML document, e.g. ("placement", "actor", "nodes")
DEFAULT_EXCLUDES = ["ckpt/", "checkpoints/", "*.safetensors", "*.pt", "*.bin", ".git"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OpenRLHFSection(_Section):
    version: str | None = Field(None, description="release, e.g. 0.11.2; 'auto' reads the installed one")


class ClusterSection(_Section):
    address: str = "http://127.0.0.1:8265"
    nodes: PositiveInt = 1
    gpus_per_node: PositiveInt = 8
    gpu_memory_gb: float = Field(80, gt=0)
    host_memory_gb: float | None = Field(None, gt=0)


class ModelsSection(_Section):
    actor: str | None = None
    reward: str | None = None
    critic: str | None = None
    reward_remote_url: str | None = None
    # The actor's shape, for the memory estimate, when models.actor is neither a local
    # directory with config.json nor a known model (see rlhf_launch/shapes.py).
    params_billion: float | None = Field(None, gt=0)
    layers: PositiveInt | None = None
    hidden: PositiveInt | None = None
    intermediate: PositiveInt | None = None
    heads: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    vocab: PositiveInt | None = None


class RolePlacement(_Section):
    nodes: PositiveInt | None = None
    gpus_per_node: PositiveInt | None = None


class VllmPlacement(_Section):
    engines: NonNegativeInt = 0
    tensor_parallel_size: PositiveInt = 1
    gpu_memory_utilization: float = Field(0.95, gt=0, le=1)
    enable_sleep: bool = False


class PlacementSection(_Section):
    actor: RolePlacement = RolePlacement()
    critic: RolePlacement = RolePlacement()
    ref: RolePlacement = RolePlacement()
    reward: RolePlacement = RolePlacement()
    vllm: VllmPlacement = VllmPlacement()
    colocate: list[Colocation] = []


class DeepSpeedSection(_Section):
    zero_stage: Literal[0, 1, 2, 3] = 2
    bf16: bool = True
    adam_offload: bool = False
    gradient_checkpointing: bool = False
    flash_attn: bool = True
    packing_samples: bool = False
    enable_sleep: bool = False
    ref_reward_offload: bool = False


class DataSection(_Section):
    prompt_dataset: str | None = None
    input_key: str = "input"
    apply_chat_template: bool = False
    prompt_max_len: PositiveInt = 1024
    generate_max_len: PositiveInt = 1024
    max_samples: PositiveInt | None = None


class TrainSection(_Section):
    micro_train_batch_size: PositiveInt = 1
    train_batch_size: PositiveInt = 128
    micro_rollout_batch_size: PositiveInt = 1
    rollout_batch_size: PositiveInt = 1024
    n_samples_per_prompt: PositiveInt = 1
    max_epochs: PositiveInt = 1
    num_episodes: PositiveInt = 1
    actor_learning_rate: float = Field(1e-6, gt=0)
    critic_learning_rate: float = Field(9e-6, gt=0)
    init_kl_coef: NonNegativeFloat = 0.01
    normalize_reward: bool = False
    advantage_estimator: str = "gae"
    seed: int = 42


class CheckpointSection(_Section):
    save_path: str = "./ckpt"
    ckpt_path: str = "./ckpt/checkpoints_ppo_ray"
    save_steps: int = -1
    save_hf: bool = False
    universal: bool = False
    save_value_network: bool = False
    max_num: PositiveInt = 3


class WandbSection(_Section):
    project: str | None = None
    org: str | None = None
    group: str | None = None
    run_name: str | None = None


class LoggingSection(_Section):
    logging_steps: PositiveInt = 1
    wandb: WandbSection = WandbSection()


class RuntimeEnvSection(_Section):
    working_dir: str | None = None
    env_vars: dict[str, str] = {}
    excludes: list[str] = DEFAULT_EXCLUDES

    @field_validator("env_vars", mode="before")
    @classmethod
    def _scalars_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (str(v).lower() if isinstance(v, bool) else str(v)) if isinstance(v, (int, float, bool)) else v for k, v in value.items()
            }
        return value

    @field_validator("env_vars")
    @classmethod
    def _no_secret(cls, value: dict[str, str]) -> dict[str, str]:
        if SECRET_ENV in value:
            raise ValueError(
                f"{SECRET_ENV} must not be written in a config; export it where you run rlhf-launch "
                "and it travels to the job without entering argv, logs or files"
            )
        return value


class LaunchConfig(_Section):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    openrlhf: OpenRLHFSection = OpenRLHFSection()
    cluster: ClusterSection = ClusterSection()
    models: ModelsSection = ModelsSection()
    placement: PlacementSection = PlacementSection()
    deepspeed: DeepSpeedSection = DeepSpeedSection()
    data: DataSection = DataSection()
    train: TrainSection = TrainSection()
    checkpoint: CheckpointSection = CheckpointSection()
    logging: LoggingSection = LoggingSection()
    runtime_env: RuntimeEnvSection = RuntimeEnvSection()
    extra_args: dict[str, Any] = {}

    def colocated(self, kind: Colocation) -> bool:
        return kind in self.placement.colocate


# ---------------------------------------------------------------- loading


def _line_index(text: str) -> dict[KeyPath, int]:
    """Map each key path in a YAML document to its 1-based line."""
    lines: dict[KeyPath, int] = {}

    def walk(node: yaml.Node, path: KeyPath) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = path + (key_node.value,)
                lines[key] = key_node.start_mark.line + 1
                walk(value_node, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[path + (i,)] = item.start_mark.line + 1
                walk(item, path + (i,))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines
    if root is not None:
        walk(root, ())
    return lines


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a","b","c"], YAML-typed value)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_.\-]+)*", key):
        raise UserError(f"override {text!r} is not key=value", hint="e.g. placement.actor.nodes=2")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"override {key}: value {raw!r} is not valid YAML ({problem})") from None
    if key.startswith("extra_args."):
        return ["extra_args", key[len("extra_args.") :]], value
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set each dotted key in a copy of the raw config mapping (before validation)."""
    import copy

    result = copy.deepcopy(data)
    for text in overrides:
        path, value = parse_override(text)
        node = result
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(path[: i + 1])
                raise UserError(f"override {text!r}: {where} is not a section", hint=f"{where} holds a value")
            node = child
        node[path[-1]] = value
    return result


def _model_at(loc: KeyPath) -> type[BaseModel] | None:
    """The pydantic model class found at a location inside LaunchConfig."""
    model: Any = LaunchConfig
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        model = field.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _describe(error: Mapping[str, Any], lines: dict[KeyPath, int], source: str) -> str:
    loc = tuple(error["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    line = lines.get(loc)
    where = f"{source}:{line}: " if line else f"{source}: "
    if error["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {'.'.join(map(str, (*loc[:-1], guess[0])))}?" if guess else f"known keys: {', '.join(known)}"
        return f"{where}unknown key {path} ({hint})"
    if error["type"] == "missing":
        return f"{where}{path} is required"
    got = error.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return f"{where}{path}: {error['msg']} (got {shown})"


def validate(data: Any, source: str = "config", lines: dict[KeyPath, int] | None = None) -> LaunchConfig:
    if not isinstance(data, dict):
        raise UserError(f"{source}: the config must be a YAML mapping of sections", hint="see configs/tiny-1node.yaml")
    try:
        return LaunchConfig.model_validate(data)
    except ValidationError as exc:
        messages = [_describe(e, lines or {}, source) for e in exc.errors()]
        first, rest = messages[0], messages[1:]
        more = ("\n  " + "\n  ".join(rest)) if rest else ""
        raise UserError(first + more, hint="fix the key in the YAML or pass key=value overrides") from None


def read_yaml(path: Path) -> tuple[dict[str, Any], dict[KeyPath, int]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"config file {path} not found", hint="rlhf-launch presets lists the shipped ones") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise UserError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserError(f"{where}: invalid YAML: {problem}", hint="check indentation and quoting") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: the config must be a YAML mapping of sections", hint="see configs/tiny-1node.yaml")
    return data, _line_index(text)


def load_config(path: Path, overrides: list[str] | None = None) -> LaunchConfig:
    """Read, override and validate. `name` defaults to the file's stem."""
    data, lines = read_yaml(path)
    data.setdefault("name", path.stem)
    data = apply_overrides(data, overrides or [])
    return validate(data, source=str(path), lines=lines)
