"""Model shapes for the memory estimate: a local config.json, a small table of common
models, or `models.params_billion` etc. in the config. Unknown means unknown: no guess."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlhf_launch.core.config import ModelsSection


@dataclass(frozen=True)
class Shape:
    name: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool = False
    params_override: float | None = None  # billions, when given instead of derived
    head_dim_override: int | None = None  # config.json's head_dim, where it is not hidden / heads (Qwen3)

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden // self.heads

    @property
    def params(self) -> float:
        """Parameter count of a Llama-style decoder (attention, gated MLP, norms, embeddings)."""
        if self.params_override is not None:
            return self.params_override * 1e9
        kv = self.kv_heads * self.head_dim
        query = self.heads * self.head_dim
        attention = 2 * self.hidden * query + 2 * self.hidden * kv
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attention + mlp + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embeddings + self.hidden

    @property
    def largest_layer(self) -> float:
        """Parameters of the largest single module (DeepSpeed gathers one at a time)."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate, self.hidden * self.hidden)


# Published configs (config.json of each model on the Hugging Face hub).
KNOWN = {
    "llama-2-7b": Shape("Llama-2-7B", 32, 4096, 11008, 32, 32, 32000),
    "llama-2-13b": Shape("Llama-2-13B", 40, 5120, 13824, 40, 40, 32000),
    "llama-2-70b": Shape("Llama-2-70B", 80, 8192, 28672, 64, 8, 32000),
    "llama-3-8b": Shape("Llama-3-8B", 32, 4096, 14336, 32, 8, 128256),
    "llama-3-70b": Shape("Llama-3-70B", 80, 8192, 28672, 64, 8, 128256),
    "qwen2.5-7b": Shape("Qwen2.5-7B", 28, 3584, 18944, 28, 4, 152064),
    "qwen2.5-72b": Shape("Qwen2.5-72B", 80, 8192, 29568, 64, 8, 152064),
    "qwen3-4b": Shape("Qwen3-4B", 36, 2560, 9728, 32, 8, 151936, tied_embeddings=True, head_dim_override=128),
    "qwen3-8b": Shape("Qwen3-8B", 36, 4096, 12288, 32, 8, 151936, head_dim_override=128),
}

_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"llama-?2-(7|13|70)b"), lambda m: f"llama-2-{m.group(1)}b"),
    (re.compile(r"llama-?3(?:\.\d)?-(8|70)b"), lambda m: f"llama-3-{m.group(1)}b"),
    (re.compile(r"qwen2\.5-(7|72)b"), lambda m: f"qwen2.5-{m.group(1)}b"),
    (re.compile(r"qwen3-(4|8)b"), lambda m: f"qwen3-{m.group(1)}b"),
]


def from_config_json(path: Path) -> Shape:
    data = json.loads(path.read_text())
    heads = data["num_attention_heads"]
    return Shape(
        name=path.parent.name,
        layers=data["num_hidden_layers"],
        hidden=data["hidden_size"],
        intermediate=data["intermediate_size"],
        heads=heads,
        kv_heads=data.get("num_key_value_heads", heads),
        vocab=data["vocab_size"],
        tied_embeddings=bool(data.get("tie_word_embeddings", False)),
        head_dim_override=data.get("head_dim") if data.get("head_dim") != data["hidden_size"] // heads else None,
    )


def lookup(model: str | None) -> tuple[Shape | None, str]:
    """A shape and where it came from, or (None, reason)."""
    if not model:
        return None, "no model given"
    local = Path(model).expanduser()
    if (local / "config.json").is_file():
        try:
            return from_config_json(local / "config.json"), f"{local / 'config.json'}"
        except (KeyError, ValueError, OSError) as exc:
            return None, f"unreadable {local / 'config.json'}: {exc}"
    lowered = model.lower()
    for pattern, key in _PATTERNS:
        match = pattern.search(lowered)
        if match:
            return KNOWN[key(match)], f"built-in shape {KNOWN[key(match)].name}"
    return None, f"{model!r} is not a local directory with config.json nor a known shape"


def from_fields(models: ModelsSection) -> Shape | None:
    """`models.layers`, `models.hidden`, ... (and optionally `models.params_billion`) for the actor."""
    layers, hidden, intermediate, heads, vocab = models.layers, models.hidden, models.intermediate, models.heads, models.vocab
    if layers is None or hidden is None or intermediate is None or heads is None or vocab is None:
        return None
    return Shape(
        name="config",
        layers=layers,
        hidden=hidden,
        intermediate=intermediate,
        heads=heads,
        kv_heads=models.kv_heads or heads,
        vocab=vocab,
        params_override=models.params_billion,
    )


def attention_heads(models: ModelsSection) -> tuple[int, int, str] | None:
    """(attention heads, KV heads, where from) of the actor, the model vLLM serves; None if unknown."""
    if models.heads is not None:
        return models.heads, models.kv_heads or models.heads, "models.heads"
    shape, source = lookup(models.actor)
    return (shape.heads, shape.kv_heads, source) if shape is not None else None


def tp_refusal(heads: int, kv_heads: int, tp: int) -> str:
    """Why vLLM refuses tensor parallelism `tp` for a model with these heads ('' if it does not):
    its model config checks heads % TP, and its QKV layer splits the KV heads over TP (TP < KV
    heads) or replicates them (TP >= KV heads), each of which must divide the other."""
    if heads % tp:
        return f"the number of attention heads ({heads}) must be divisible by the tensor parallel size ({tp})"
    if (kv_heads % tp) if tp < kv_heads else (tp % kv_heads):
        relation = (
            f"{kv_heads} KV heads are not divisible by TP {tp}"
            if tp < kv_heads
            else f"TP {tp} is not a multiple of the {kv_heads} KV heads"
        )
        return f"{relation}: the KV heads can be neither split nor replicated evenly"
    return ""


def tp_sizes(heads: int, kv_heads: int, up_to: int) -> list[int]:
    """The tensor parallel sizes from 1 to `up_to` that vLLM accepts for these heads."""
    return [tp for tp in range(1, up_to + 1) if not tp_refusal(heads, kv_heads, tp)]
