"""The launch config: one YAML file, version-independent, validated with key paths.

Schema, defaults and loading live here and nowhere else. `load_config` reads YAML (keeping
line numbers), applies `key=value` overrides, and validates; every mistake becomes a
`UserError` that names the key path, the YAML line where known, and a fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from rlhf_launch.core import gpus
from rlhf_launch.core.address import check_address
from rlhf_launch.core.secrets import SECRET_ENV
from rlhf_launch.errors import UserError

Colocation = Literal["actor_ref", "critic_reward", "all"]
KeyPath = tuple[str | int, ...]  # a key's path in the YAML document, e.g. ("placement", "actor", "nodes")
DEFAULT_EXCLUDES = ["ckpt/", "checkpoints/", "*.safetensors", "*.pt", "*.bin", ".git"]


def _interval(value: int | None) -> int | None:
    """A step interval: -1 (never) or a positive number of steps (the trainer divides by it)."""
    if value is not None and value != -1 and value < 1:
        raise ValueError("must be -1 (never) or a positive number of steps")
    return value


# http(s)://host[:port][/path?query]; a host as Docker and Kubernetes name services (underscores too) or [IPv6].
_REWARD_URL = re.compile(r"(?i:https?)://(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d{1,5}))?(?:[/?#]\S*)?")


def _split_urls(value: str | list[str]) -> list[str]:
    return [url for item in ([value] if isinstance(value, str) else value) for url in item.split(",")]


def check_reward_urls(urls: list[str]) -> None:
    """OpenRLHF's remote_rm_url, split on commas as its start-up does: http(s) reward servers
    (it spreads the batches over them), or one Python file on the nodes (its reward_func)."""
    if not urls:
        raise ValueError("give a URL, or a list of URLs")
    if len(urls) == 1 and urls[0].endswith(".py"):
        return
    for url in urls:
        if not url:
            raise ValueError("an empty URL (a stray comma?)" if len(urls) > 1 else "an empty URL")
        if url != url.strip() or any(c.isspace() for c in url):
            raise ValueError(f"{url!r} holds whitespace: OpenRLHF splits the URLs on commas alone")
        if url.endswith(".py"):
            raise ValueError(f"{url!r}: a reward function file cannot be combined with URLs (use models.reward_func alone)")
        match = _REWARD_URL.fullmatch(url)
        if match is not None and match["port"] is not None and not 1 <= int(match["port"]) <= 65535:
            raise ValueError(f"{url!r}: the port must be 1..65535")
        # Another form (a fork's `rule:http://...`) is passed on unchanged, as OpenRLHF's parser
        # takes it; core/rules.py warns that the published trainer posts to http(s) URLs only.


def odd_reward_urls(urls: list[str]) -> list[str]:
    """The items OpenRLHF's published trainer cannot post to: neither an http(s) URL nor one `.py` file."""
    if len(urls) == 1 and urls[0].endswith(".py"):
        return []
    return [url for url in urls if _REWARD_URL.fullmatch(url) is None]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OpenRLHFSection(_Section):
    version: str | None = Field(None, description="release, e.g. 0.11.2; 'auto' reads the installed one")
    # A fork: the checkout (or installed package directory) whose openrlhf/cli/train_ppo_ray.py the
    # trainer runs; its flags are read from that file (openrlhf/fork.py) and `version` is ignored.
    source: str | None = Field(None, description="an OpenRLHF fork's checkout: its own trainer flags")


class ClusterSection(_Section):
    address: str = "http://127.0.0.1:8265"
    nodes: PositiveInt = 1
    gpus_per_node: PositiveInt = 8
    # The GPU type (core/gpus.py: A100-80GB, H100-80GB, H200, ...): the estimate's speeds, and
    # its memory replaces gpu_memory_gb (so the memory plan reads one figure, gpu_memory_gb).
    gpu: str | None = None
    gpu_memory_gb: float = Field(80, gt=0)
    host_memory_gb: float | None = Field(None, gt=0)

    @field_validator("address")
    @classmethod
    def _dashboard_address(cls, value: str) -> str:
        return check_address(value)

    @field_validator("gpu")
    @classmethod
    def _gpu_type(cls, value: str | None) -> str | None:
        return None if value is None else gpus.get(value).name  # canonical name; unknown: the known names

    @model_validator(mode="before")
    @classmethod
    def _gpu_memory(cls, data: Any) -> Any:
        """A known cluster.gpu sets gpu_memory_gb (stated, as if written)."""
        if isinstance(data, dict) and isinstance(data.get("gpu"), str):
            gpu = gpus.find(data["gpu"])
            if gpu is not None:
                data = {**data, "gpu_memory_gb": gpu.memory_gib}
        return data


class ModelsSection(_Section):
    actor: str | None = None
    reward: str | None = None
    critic: str | None = None
    # A remote reward: one URL or several (OpenRLHF's remote_rm_url), or `reward_func`, a
    # local Python file defining reward_func(queries, prompts, labels) that ships with the job.
    reward_remote_url: str | list[str] | None = None
    reward_func: str | None = None
    agent_func: str | None = None  # a local Python file (OpenRLHF's agent_func_path), shipped with the job
    # The actor's shape, for the memory estimate, when models.actor is neither a local
    # directory with config.json nor a known model (see rlhf_launch/shapes.py).
    params_billion: float | None = Field(None, gt=0)
    layers: PositiveInt | None = None
    hidden: PositiveInt | None = None
    intermediate: PositiveInt | None = None
    heads: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    vocab: PositiveInt | None = None

    @field_validator("reward_remote_url")
    @classmethod
    def _urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is not None:
            check_reward_urls(_split_urls(value))
        return value

    @field_validator("reward_func", "agent_func")
    @classmethod
    def _python_file(cls, value: str | None) -> str | None:
        if value is not None and not value.endswith(".py"):
            raise ValueError("must be a Python file (.py)")
        return value

    @model_validator(mode="after")
    def _one_reward_source(self) -> ModelsSection:
        if self.reward_remote_url and self.reward_func:
            raise ValueError("reward_remote_url and reward_func are both set: OpenRLHF takes one remote reward")
        return self

    @property
    def remote_reward(self) -> bool:
        """Rollouts are scored outside the trainer: remote URLs or a reward-function file."""
        return bool(self.reward_remote_url or self.reward_func)

    @property
    def remote_urls(self) -> list[str]:
        """Each URL, as OpenRLHF splits its comma-separated remote_rm_url."""
        return _split_urls(self.reward_remote_url or [])


class RolePlacement(_Section):
    nodes: PositiveInt | None = None
    gpus_per_node: PositiveInt | None = None


class RewardPlacement(RolePlacement):
    # 0 x 0 places no reward model, as scripts with a remote reward write it (needs one)
    nodes: NonNegativeInt | None = None
    gpus_per_node: NonNegativeInt | None = None


class VllmPlacement(_Section):
    engines: NonNegativeInt | None = 0  # None: the flag left unset, the release's default (no vLLM)
    tensor_parallel_size: PositiveInt = 1
    gpu_memory_utilization: float = Field(0.95, gt=0, le=1)
    enable_sleep: bool = False


class PlacementSection(_Section):
    actor: RolePlacement = RolePlacement()
    critic: RolePlacement = RolePlacement()
    ref: RolePlacement = RolePlacement()
    reward: RewardPlacement = RewardPlacement()
    vllm: VllmPlacement = VllmPlacement()
    colocate: list[Colocation] = []


class DeepSpeedSection(_Section):
    zero_stage: Literal[0, 1, 2, 3] = 2
    bf16: bool = True
    param_dtype: Literal["bf16", "fp16"] | None = None  # the newer spelling of bf16; wins when set
    adam_offload: bool = False
    gradient_checkpointing: bool = False
    flash_attn: bool = True
    attn_implementation: str | None = None  # e.g. flash_attention_2, sdpa, eager; wins over flash_attn when set
    packing_samples: bool = False
    enable_sleep: bool = False
    ref_reward_offload: bool = False
    ring_attn_size: PositiveInt | None = None  # ring attention: each sequence split over this many GPUs
    tensor_parallel_size: PositiveInt | None = None  # DeepSpeed tensor parallelism of the trained models

    @property
    def dtype(self) -> str:
        return self.param_dtype or ("bf16" if self.bf16 else "fp16")

    @property
    def attention(self) -> str:
        return self.attn_implementation or ("flash_attention_2" if self.flash_attn else "eager")


class DataSection(_Section):
    prompt_dataset: str | None = None
    input_key: str = "input"
    label_key: str | None = None  # the dataset field handed to a reward function or remote reward as the label
    apply_chat_template: bool = False
    prompt_max_len: PositiveInt = 1024
    generate_max_len: PositiveInt = 1024
    # Leave the trainer's max_new_tokens unset (releases with --max_len, 0.9.8+), its default:
    # each sample generates up to prompt_max_len + generate_max_len (--max_len) minus its prompt.
    generate_to_max_len: bool = False
    max_samples: PositiveInt | None = None
    eval_dataset: str | None = None


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
    seed: int = Field(42, ge=0, lt=2**32)  # numpy's seed range, which the trainer's set_seed uses
    eval_steps: int | None = None  # -1 (never) or every N steps
    # Async training (vLLM generates the next batch while DeepSpeed trains).
    async_train: bool | None = None
    partial_rollout: bool | None = None  # generation may continue across a weight update (needs async_train)
    vllm_generate_batch_size: PositiveInt | None = None  # prompts per vLLM generation round (default: rollout_batch_size)
    # Dynamic filtering: drop prompts whose samples' rewards all fall outside the range.
    dynamic_filtering: bool | None = None
    dynamic_filtering_range: tuple[float, float] | None = None
    # Dynamic batching: micro batches filled up to a token budget per GPU (packs samples).
    dynamic_batch: bool | None = None
    train_max_tokens_per_gpu: PositiveInt | None = None
    rollout_max_tokens_per_gpu: PositiveInt | None = None
    # Importance-sampling correction of the vLLM/DeepSpeed log-prob mismatch.
    is_correction: Literal["tis", "icepop", "seq-mask-tis", "mis"] | None = None
    is_correction_threshold: list[float] | None = None  # HIGH, or LOW HIGH

    @field_validator("eval_steps")
    @classmethod
    def _steps(cls, value: int | None) -> int | None:
        return _interval(value)

    @field_validator("is_correction_threshold")
    @classmethod
    def _threshold(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and not 1 <= len(value) <= 2:
            raise ValueError("takes HIGH or [LOW, HIGH]")
        return value


class CheckpointSection(_Section):
    save_path: str = "./ckpt"
    ckpt_path: str = "./ckpt/checkpoints_ppo_ray"
    save_steps: int = -1
    save_hf: bool = False
    universal: bool = False
    save_value_network: bool = False
    max_num: PositiveInt = 3
    # Every attempt passes the release's load flag, so the first one loads the latest checkpoint
    # in ckpt_path when there is one (as a script's --load_checkpoint did) and starts fresh when none.
    load: bool = False

    @field_validator("save_steps")
    @classmethod
    def _steps(cls, value: int) -> int:
        return _interval(value) or -1


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


# The start-up milestones a supervisor watches (runs/progress.py Milestone), in order.
MILESTONES = ("runtime_env_ready", "placement_ready", "models_loaded", "first_step", "step")
Milestone = Literal["runtime_env_ready", "placement_ready", "models_loaded", "first_step", "step"]


class SuperviseSection(_Section):
    """How the run's supervisor judges it: seconds each milestone may take before the attempt
    counts as stalled (defaults scale with the model size and the node count)."""

    deadlines: dict[Milestone, float] = Field(default_factory=dict)
    # After a node is lost: seconds to wait for it before re-planning the run onto the nodes
    # that are left (fit/replan.py); 0 never re-plans (the run waits for the GPUs to return).
    node_wait: NonNegativeFloat = 600.0
    # Seconds a conversion of the checkpoint to a universal one may take (a re-plan that
    # changes the actor's or critic's DP size needs one; a 70B actor with Adam writes ~0.84 TB).
    convert_wait: float = Field(7200.0, gt=0)
    # After a re-plan, go back to the run's own layout when the lost GPUs return (at the
    # next checkpoint save, so no step is lost); `submit --no-grow` sets it false.
    grow: bool = True

    @field_validator("deadlines")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for name, seconds in value.items():
            if seconds <= 0:
                raise ValueError(f"deadline for {name} must be a positive number of seconds")
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
    supervise: SuperviseSection = SuperviseSection()
    extra_args: dict[str, Any] = {}

    def colocated(self, kind: Colocation) -> bool:
        return kind in self.placement.colocate

    @model_validator(mode="after")
    def _reward_placed(self) -> LaunchConfig:
        reward = self.placement.reward
        if 0 in (reward.nodes, reward.gpus_per_node) and not (self.models.remote_reward or self.models.agent_func):
            raise ValueError(
                "placement.reward: 0 nodes or GPUs place no reward model, so rollouts need a remote reward "
                "(models.reward_remote_url or models.reward_func) or an agent function"
            )
        return self


# ---------------------------------------------------------------- loading


MAX_CONFIG_BYTES = 1 << 20  # a config is a page of YAML; anything larger is a mistake (or a device)
MAX_YAML_VALUES = 100_000  # values after expanding aliases: enough for any config, far from a "billion laughs"
MAX_YAML_DEPTH = 64  # nested mappings and lists: a config has a few levels; deeper is a mistake, not a config


def _codepoint(character: int | str) -> int:
    return character if isinstance(character, int) else ord(character)


class _Document:
    """A composed YAML document, checked before it is built: no duplicate keys, aliases that
    expand to a bounded number of values and never into themselves."""

    def __init__(self, text: str, source: str):
        self.source = source
        try:
            loader = yaml.SafeLoader(text)  # the reader refuses NUL and other control characters here
            try:
                self.root = loader.get_single_node()
                self._check()
                self.data = loader.construct_document(self.root) if self.root is not None else None
            finally:
                loader.dispose()
        except yaml.reader.ReaderError as exc:
            line = text[: exc.position].count("\n") + 1
            raise UserError(
                f"{source}:{line}: character U+{_codepoint(exc.character):04X} at offset {exc.position} is not allowed in YAML "
                "(binary data, or a stray control character)",
                hint="a config is plain UTF-8 text: no NUL or other control characters",
            ) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{source}:{mark.line + 1}" if mark else source
            problem = getattr(exc, "problem", None) or str(exc)
            raise UserError(f"{where}: invalid YAML: {problem}", hint="check indentation and quoting") from None
        except RecursionError:
            raise UserError(f"{source}: YAML nested too deeply", hint="a config is a few levels of sections") from None

    def _check(self) -> None:
        sizes: dict[int, int] = {}
        heights: dict[int, int] = {}  # levels of nesting below a node (aliases included)
        open_nodes: set[int] = set()

        def size(node: yaml.Node, depth: int = 1) -> int:
            key = id(node)
            if key in sizes:
                self._deep(node, depth + heights[key])
                return sizes[key]
            self._deep(node, depth)
            if key in open_nodes:
                raise UserError(f"{self.source}:{node.start_mark.line + 1}: a YAML alias refers to the value that holds it")
            open_nodes.add(key)
            total = 1
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, value_node in node.value:
                    if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                        line = key_node.start_mark.line + 1
                        if key_node.value in seen:
                            raise UserError(
                                f"{self.source}:{line}: duplicate key {key_node.value!r} (first at line {seen[key_node.value]})",
                                hint="a key may appear once per section; remove one of them",
                            )
                        seen[key_node.value] = line
                    total += size(key_node, depth + 1) + size(value_node, depth + 1)
            elif isinstance(node, yaml.SequenceNode):
                total += sum(size(item, depth + 1) for item in node.value)
            open_nodes.discard(key)
            sizes[key] = total
            children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
            heights[key] = 1 + max((heights[id(n)] for n in children), default=0) if isinstance(children, list) else 0
            if total > MAX_YAML_VALUES:
                raise UserError(
                    f"{self.source}:{node.start_mark.line + 1}: YAML anchors and aliases expand to more than {MAX_YAML_VALUES} values",
                    hint="write the values out, or use fewer nested aliases",
                )
            return total

        if self.root is not None:
            size(self.root)

    def _deep(self, node: yaml.Node, depth: int) -> None:
        if depth > MAX_YAML_DEPTH:
            raise UserError(
                f"{self.source}:{node.start_mark.line + 1}: YAML nested more than {MAX_YAML_DEPTH} levels deep",
                hint="a config is a few levels of sections",
            )

    def lines(self) -> dict[KeyPath, int]:
        """Each key path in the document -> its 1-based line."""
        lines: dict[KeyPath, int] = {}

        def walk(node: yaml.Node, path: KeyPath) -> None:
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    key = path + (key_node.value,)
                    lines.setdefault(key, key_node.start_mark.line + 1)
                    walk(value_node, key)
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    lines.setdefault(path + (i,), item.start_mark.line + 1)
                    walk(item, path + (i,))

        if self.root is not None:
            walk(self.root, ())
        return lines


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` -> (["a","b","c"], YAML-typed value)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_.\-]+)*", key):
        raise UserError(f"override {text!r} is not key=value", hint="e.g. placement.actor.nodes=2")
    try:
        value = _Document(raw, f"override {key}").data if raw.strip() else None
    except UserError as exc:
        problem = exc.message.split("invalid YAML: ", 1)[1] if "invalid YAML: " in exc.message else exc.message.split(": ", 1)[-1]
        raise UserError(f"override {key}: value {raw!r} is not valid YAML ({problem})", hint=exc.hint) from None
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


def _override_of(loc: KeyPath, overrides: Sequence[str], lines: dict[KeyPath, int]) -> str | None:
    """The command-line override a validation error at `loc` comes from, if any: the last one
    that sets `loc` or a section above it, or that created `loc` (a key the YAML lacks)."""
    for text in reversed(overrides):
        path = tuple(parse_override(text)[0])
        if loc[: len(path)] == path or (path[: len(loc)] == loc and loc not in lines):
            return text
    return None


def _describe(error: Mapping[str, Any], lines: dict[KeyPath, int], source: str, overrides: Sequence[str] = ()) -> str:
    loc = tuple(error["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    line = lines.get(loc)
    where = f"{source}:{line}: " if line else f"{source}: "
    override = _override_of(loc, overrides, lines) if loc else None
    if override is not None:
        where = f"override {override!r} (command line): "
    if error["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        import difflib  # only for an unknown key (plan stays fast)

        guess = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {'.'.join(map(str, (*loc[:-1], guess[0])))}?" if guess else f"known keys: {', '.join(known)}"
        return f"{where}unknown key {path} ({hint})"
    if error["type"] == "missing":
        return f"{where}{path} is required"
    got = error.get("input")
    shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return f"{where}{path}: {error['msg']} (got {shown})"


def validate(data: Any, source: str = "config", lines: dict[KeyPath, int] | None = None, overrides: Sequence[str] = ()) -> LaunchConfig:
    """`overrides`: the key=value texts applied to `data`, so an error they caused names them."""
    if not isinstance(data, dict):
        raise UserError(f"{source}: the config must be a YAML mapping of sections", hint="see configs/tiny-1node.yaml")
    try:
        return LaunchConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        origins = [_override_of(tuple(e["loc"]), overrides, lines or {}) if e["loc"] else None for e in errors]
        messages = [_describe(e, lines or {}, source, overrides) for e in errors]
        first, rest = messages[0], messages[1:]
        more = ("\n  " + "\n  ".join(rest)) if rest else ""
        if all(o is not None for o in origins) and any(e.get("type") == "list_type" for e in errors):
            hint = "a list on the command line is written in brackets: key=[a,b] (placement.colocate=[actor_ref])"
        elif all(o is not None for o in origins):
            hint = "fix the key=value override on the command line"
        elif any(o is not None for o in origins):
            hint = "fix the key in the YAML and the key=value overrides on the command line"
        else:
            hint = "fix the key in the YAML or pass key=value overrides"
        raise UserError(first + more, hint=hint) from None


def read_text(path: Path, what: str = "config") -> str:
    """A small regular UTF-8 file's text; UserError naming the file otherwise (never a hang on a pipe or device)."""
    import stat

    try:
        info = path.stat()
    except FileNotFoundError:
        raise UserError(
            f"{what} {path} not found" if what == "file" else f"{what} file {path} not found",
            hint="rlhf-launch presets lists the shipped ones" if what == "config" else "",
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"cannot read {what} {path}: Is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{what} {path} is not a regular file")
    if info.st_size > MAX_CONFIG_BYTES:
        raise UserError(f"{what} {path} is {info.st_size} bytes; a {what} file is at most {MAX_CONFIG_BYTES}")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise UserError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            hint="save the file as UTF-8",
        ) from None


def read_yaml(path: Path) -> tuple[dict[str, Any], dict[KeyPath, int]]:
    document = _Document(read_text(path), str(path))
    data = document.data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"{path}: the config must be a YAML mapping of sections", hint="see configs/tiny-1node.yaml")
    return data, document.lines()


# Keys naming local files that a relative path in a YAML file locates next to that file.
FILE_KEYS = (("models", "reward_func"), ("models", "agent_func"), ("openrlhf", "source"))


def beside(data: dict[str, Any], path: Path) -> None:
    """Relative file paths written in the YAML file are relative to the file's directory."""
    for section, key in FILE_KEYS:
        values = data.get(section)
        if not isinstance(values, dict):
            continue
        value = values.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            values[key] = str((path.parent / value).resolve())


def load_config(path: Path, overrides: list[str] | None = None) -> LaunchConfig:
    """Read, override and validate. `name` defaults to the file's stem."""
    data, lines = read_yaml(path)
    data.setdefault("name", path.stem)
    beside(data, path)
    data = apply_overrides(data, overrides or [])
    return validate(data, source=str(path), lines=lines, overrides=overrides or [])
