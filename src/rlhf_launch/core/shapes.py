"""Model shapes for the memory estimate: a local config.json, a small table of common
models, or `models.params_billion` etc. in the config. Unknown means unknown: no guess."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlhf_launch.core.config import ModelsSection


@dataclass(frozen=True, kw_only=True)
class Shape:
    """A decoder's shape, built by keyword: `Shape(name=..., layers=..., hidden=...)`."""

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
    "llama-2-7b": Shape(name="Llama-2-7B", layers=32, hidden=4096, intermediate=11008, heads=32, kv_heads=32, vocab=32000),
    "llama-2-13b": Shape(name="Llama-2-13B", layers=40, hidden=5120, intermediate=13824, heads=40, kv_heads=40, vocab=32000),
    "llama-2-70b": Shape(name="Llama-2-70B", layers=80, hidden=8192, intermediate=28672, heads=64, kv_heads=8, vocab=32000),
    "llama-3-8b": Shape(name="Llama-3-8B", layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=128256),
    "llama-3-70b": Shape(name="Llama-3-70B", layers=80, hidden=8192, intermediate=28672, heads=64, kv_heads=8, vocab=128256),
    "qwen2.5-7b": Shape(name="Qwen2.5-7B", layers=28, hidden=3584, intermediate=18944, heads=28, kv_heads=4, vocab=152064),
    "qwen2.5-72b": Shape(name="Qwen2.5-72B", layers=80, hidden=8192, intermediate=29568, heads=64, kv_heads=8, vocab=152064),
    "qwen3-4b": Shape(
        name="Qwen3-4B",
        layers=36,
        hidden=2560,
        intermediate=9728,
        heads=32,
        kv_heads=8,
        vocab=151936,
        tied_embeddings=True,
        head_dim_override=128,
    ),
    "qwen3-8b": Shape(
        name="Qwen3-8B", layers=36, hidden=4096, intermediate=12288, heads=32, kv_heads=8, vocab=151936, head_dim_override=128
    ),
    "qwen2.5-0.5b": Shape(
        name="Qwen2.5-0.5B", layers=24, hidden=896, intermediate=4864, heads=14, kv_heads=2, vocab=151936, tied_embeddings=True
    ),
    "qwen2.5-1.5b": Shape(
        name="Qwen2.5-1.5B", layers=28, hidden=1536, intermediate=8960, heads=12, kv_heads=2, vocab=151936, tied_embeddings=True
    ),
    "qwen2.5-3b": Shape(
        name="Qwen2.5-3B", layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=2, vocab=151936, tied_embeddings=True
    ),
    "qwen2.5-14b": Shape(name="Qwen2.5-14B", layers=48, hidden=5120, intermediate=13824, heads=40, kv_heads=8, vocab=152064),
    "qwen2.5-32b": Shape(name="Qwen2.5-32B", layers=64, hidden=5120, intermediate=27648, heads=40, kv_heads=8, vocab=152064),
    "qwen3-0.6b": Shape(
        name="Qwen3-0.6B",
        layers=28,
        hidden=1024,
        intermediate=3072,
        heads=16,
        kv_heads=8,
        vocab=151936,
        tied_embeddings=True,
        head_dim_override=128,
    ),
    "qwen3-1.7b": Shape(
        name="Qwen3-1.7B",
        layers=28,
        hidden=2048,
        intermediate=6144,
        heads=16,
        kv_heads=8,
        vocab=151936,
        tied_embeddings=True,
        head_dim_override=128,
    ),
    "qwen3-14b": Shape(
        name="Qwen3-14B", layers=40, hidden=5120, intermediate=17408, heads=40, kv_heads=8, vocab=151936, head_dim_override=128
    ),
    "qwen3-32b": Shape(
        name="Qwen3-32B", layers=64, hidden=5120, intermediate=25600, heads=64, kv_heads=8, vocab=151936, head_dim_override=128
    ),
    "llama-3.2-1b": Shape(
        name="Llama-3.2-1B", layers=16, hidden=2048, intermediate=8192, heads=32, kv_heads=8, vocab=128256, tied_embeddings=True
    ),
    "llama-3.2-3b": Shape(
        name="Llama-3.2-3B", layers=28, hidden=3072, intermediate=8192, heads=24, kv_heads=8, vocab=128256, tied_embeddings=True
    ),
    "codellama-34b": Shape(name="CodeLlama-34B", layers=48, hidden=8192, intermediate=22016, heads=64, kv_heads=8, vocab=32000),
    "mistral-7b": Shape(name="Mistral-7B", layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=32000),
}

_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r"codellama[-_](7|13)b"), lambda m: f"llama-2-{m.group(1)}b"),  # CodeLlama keeps Llama-2's shape (vocab +16)
    (re.compile(r"codellama[-_]34b"), lambda m: "codellama-34b"),
    (re.compile(r"llama[-_]?2[-_](7|13|70)b"), lambda m: f"llama-2-{m.group(1)}b"),
    (re.compile(r"llama[-_]?3\.2[-_](1|3)b"), lambda m: f"llama-3.2-{m.group(1)}b"),
    (re.compile(r"llama[-_]?3(?:\.\d)?[-_](8|70)b"), lambda m: f"llama-3-{m.group(1)}b"),
    # DeepSeek's R1 distillations keep their base's shape (Qwen2.5-Math / Qwen2.5, Llama-3.1 / 3.3)
    (re.compile(r"r1-distill-qwen-(1\.5|7|14|32)b"), lambda m: f"qwen2.5-{m.group(1)}b"),
    (re.compile(r"r1-distill-llama-(8|70)b"), lambda m: f"llama-3-{m.group(1)}b"),
    (re.compile(r"qwen2(?:\.5)?-(?:math-|coder-)?(0\.5|1\.5|3|7|14|32|72)b"), lambda m: f"qwen2.5-{m.group(1)}b"),
    (re.compile(r"qwen3-(0\.6|1\.7|4|8|14|32)b"), lambda m: f"qwen3-{m.group(1)}b"),
    (re.compile(r"mistral-7b"), lambda m: "mistral-7b"),
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


_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)b(?![a-z])")


def stated_size(model: str | None) -> float | None:
    """The parameter count a model's name states ("Foo-14B-Chat": 14e9), if any."""
    match = _SIZE.search((model or "").lower().rsplit("/", 1)[-1])
    return float(match.group(1)) * 1e9 if match else None


def near_shapes(model: str | None) -> list[Shape]:
    """The known shapes within 15% of the size the name states, smallest first (for a range,
    never a guess: same-size models differ most in their vocabulary); [] when the name states
    no size, or no known shape is that size."""
    size = stated_size(model)
    if size is None:
        return []
    return sorted((s for s in KNOWN.values() if abs(s.params - size) <= 0.15 * size), key=lambda shape: shape.params)


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
