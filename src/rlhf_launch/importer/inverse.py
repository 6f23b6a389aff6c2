"""Config values from the values a script gives one config key's flags: the inverse of
core/flags.py's rendering, key by key (dialect.SPELLINGS names the flags)."""

from __future__ import annotations

from typing import Any

from rlhf_launch.core.config import DeepSpeedSection
from rlhf_launch.core.findings import Finding, warning

Found = tuple[dict[str, Any], list[Finding]]


def tail(flag: str) -> str:
    return flag.rsplit(".", 1)[-1]


def inverse(path: str, values: dict[str, Any]) -> Found:
    """Config values from the values of the flags that spell `path` (flag -> value, in spelling order)."""
    by_tail = {tail(f): v for f, v in values.items()}
    first_flag, first = next(iter(values.items()))
    if path.startswith("placement.colocate."):
        return {path: bool(first)}, []
    if "max_len" in by_tail and "max_new_tokens" in by_tail:
        return _total_length(values, by_tail)
    if "prompt_max_len" in by_tail and "generate_max_len" in by_tail:
        return {"data.prompt_max_len": by_tail["prompt_max_len"], "data.generate_max_len": by_tail["generate_max_len"]}, []
    if "param_dtype" in by_tail:
        return {path: by_tail["param_dtype"] == "bf16"}, []
    if "attn_implementation" in by_tail:
        return _attention(path, first_flag, by_tail["attn_implementation"])
    return _plain(path, values)


def _total_length(values: dict[str, Any], by_tail: dict[str, Any]) -> Found:
    """--max_len (prompt + generated) and --max_new_tokens -> data.prompt_max_len + data.generate_max_len."""
    total, new_tokens = by_tail["max_len"], by_tail["max_new_tokens"]
    flag_len, flag_new = (f for f in values)
    if total is None:
        return {}, []
    if new_tokens is None:  # OpenRLHF generates up to max_len minus each prompt: so does the config
        new_tokens = total - min(1024, max(1, total // 2))  # the split sizes the memory estimate only
        return {"data.prompt_max_len": total - new_tokens, "data.generate_max_len": new_tokens, "data.generate_to_max_len": True}, []
    if total - new_tokens < 1:
        found = warning(f"--{flag_len}", f"{total} leaves no room for a prompt beside --{flag_new} {new_tokens}; kept at the default")
        return {"data.generate_max_len": new_tokens}, [found]
    return {"data.prompt_max_len": total - new_tokens, "data.generate_max_len": new_tokens}, []


def _attention(path: str, flag: str, attn: Any) -> Found:
    if attn in ("flash_attention_2", "eager"):
        return {path: attn == "flash_attention_2"}, []
    if "attn_implementation" in DeepSpeedSection.model_fields:
        return {"deepspeed.attn_implementation": attn}, []
    found = warning(
        f"--{flag}",
        f"{attn!r} has no config key: {path} renders flash_attention_2 (true) or eager (false); kept at flash_attention_2",
        f"the config chooses between these two only ({path})",
    )
    return {}, [found]


def _plain(path: str, values: dict[str, Any]) -> Found:
    """One key for one flag, for a switch and what it switches on, or for flags set alike."""
    items = list(values.values())
    first = items[0]
    if len(values) == 2 and isinstance(first, bool) and not isinstance(items[1], bool):
        return {path: items[1] if first else None}, []  # a switch and what it switches on
    if len(values) > 1 and len({repr(v) for v in items}) > 1:
        shown = ", ".join(f"--{f} {v}" for f, v in values.items())
        return {}, [warning(path, f"one config key sets {', '.join(values)} alike, but the script gives them different values ({shown})")]
    return ({path: first} if first is not None else {}), []
