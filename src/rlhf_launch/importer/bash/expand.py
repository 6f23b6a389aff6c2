"""Word expansion as bash does it, from the variables a script has set so far: parameters
(`$X`, `${X:-a}`, `${X#p}`, `${X/a/b}`, `${X:1:2}`, `${#X}`, `${A[@]}`), `~`, `$((...))`,
quote removal and word splitting. What cannot be known without running the script
(command substitutions, unknown variables) stays as written, with a warning."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rlhf_launch.importer.bash.arith import Unknown, evaluate
from rlhf_launch.importer.bash.lex import Arith, CmdSub, Lit, Param, Part, Word, operand

_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw")
_IFS = re.compile(r"([ \t\n]+)")
_INTEGER = re.compile(r"\s*-?\d+\s*")
_DEFAULT_OPS = (":-", "-", ":=", "=", ":+", "+", ":?", "?")
_CASE: dict[str, Callable[[str], str]] = {
    "^^": str.upper,
    ",,": str.lower,
    "^": lambda v: v[:1].upper() + v[1:],
    ",": lambda v: v[:1].lower() + v[1:],
}

# An expanded piece of a word: (kind, value, splittable); kind "text" | "quoted" | "multi"
# ("multi": a list of values that become separate arguments, as "$@" does).
Seg = tuple[str, object, bool]


# Variables a scheduler or launcher sets on the nodes (Slurm, PBS, LSF, MPI, torchrun, Kubernetes,
# Ray): a script branches on them to pick its layout, so "unset" is no safe reading of them; a
# condition on one stays undecided and import asks for it (--var NAME=VALUE).
LAUNCH_ENV = re.compile(
    r"^(?:SLURM_\w+|PBS_\w+|LSB_\w+|OMPI_\w+|PMI_\w+|PMIX_\w+|MV2_\w+|KUBERNETES_\w+|RAY_\w+|MLP_\w+"
    r"|WORLD_SIZE|RANK|LOCAL_RANK|NODE_RANK|GROUP_RANK|NNODES|NUM_NODES|N_NODES|NPROC_PER_NODE|GPUS_PER_NODE"
    r"|MASTER_ADDR|MASTER_PORT|HOSTNAME|HOST|CUDA_VISIBLE_DEVICES)$"
)


@dataclass
class Var:
    value: str | list[str] | None  # None: unset by the script (`unset X`)
    line: int
    raw: str  # the assignment's value as written
    opaque: bool = False  # set from something not evaluated: kept as its reference
    why: str = ""
    nosplit: bool = False  # holds literal text kept from the script ($(...), $UNKNOWN)
    warnings: list[str] = field(default_factory=list)


class Scope(Protocol):
    """What expansion reads of the script being walked (interp.Script)."""

    positional: list[list[str]]
    conditional: dict[str, list[int]]

    def lookup(self, name: str) -> tuple[str, str | list[str] | None, Var | None]: ...

    def lookup_plain(self, name: str) -> str | None: ...

    def assign(self, name: str, var: Var, local: bool = False) -> None: ...


def _show(name: str, value: str) -> str:
    return "<hidden>" if _SECRET_NAME.search(name) else value


def _kind(quoted: bool) -> str:
    return "quoted" if quoted else "text"


class _Fields:
    """The arguments a word's segments become (bash's field splitting)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.cur = ""
        self.have = False

    def multi(self, items: list[str]) -> None:
        if items:
            self.cur += items[0]
            self.have = True
            for item in items[1:]:
                self.out.append(self.cur)
                self.cur = item

    def split(self, value: str) -> None:
        for piece in _IFS.split(value):
            if not piece:
                continue
            if piece.isspace():
                if self.have:
                    self.out.append(self.cur)
                self.cur, self.have = "", False
            else:
                self.cur += piece
                self.have = True

    def text(self, value: str, quoted: bool) -> None:
        self.cur += value
        self.have = self.have or quoted or bool(value)

    def done(self) -> list[str]:
        if self.have:
            self.out.append(self.cur)
        return self.out


class Expander:
    """Expands words against the script's variables as they stand; collects warnings."""

    def __init__(self, script: Scope, warnings: list[str], *, unset_unknown: bool = False) -> None:
        self.script = script
        self.warnings = warnings
        self.kept_literal = False
        # In a condition: a variable the script never sets (nor --var) reads as unset, as bash
        # reads it when the caller does not export it; the names go to `read_unset`.
        self.unset_unknown = unset_unknown
        self.read_unset: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    # -- whole words

    def fields(self, word: Word) -> list[str]:
        """The arguments one command word becomes (word splitting on unquoted expansions)."""
        acc = _Fields()
        for part in self._tilde(word.parts):
            for kind, value, splittable in self._part(part):
                if kind == "multi":
                    assert isinstance(value, list)
                    acc.multi(value)
                elif splittable:
                    assert isinstance(value, str)
                    acc.split(value)
                else:
                    assert isinstance(value, str)
                    acc.text(value, kind == "quoted")
        return acc.done()

    def string(self, parts: list[Part]) -> str:
        """A word's value without word splitting (assignment values, ${X:-...} operands)."""
        out: list[str] = []
        for part in self._tilde(parts):
            for _kind, value, _flag in self._part(part):
                out.append(" ".join(value) if isinstance(value, list) else str(value))
        return "".join(out)

    def _tilde(self, parts: list[Part]) -> list[Part]:
        if parts and isinstance(parts[0], Lit) and not parts[0].quoted:
            text = parts[0].text
            if text == "~" or text.startswith("~/"):
                home = self.script.lookup_plain("HOME")
                if home is None:
                    self.warn("'~' is not expanded (HOME is not known); kept as '~'")
                    return parts
                return [Lit(home + text[1:], True), *parts[1:]]
        return parts

    # -- parts

    def _part(self, part: Part) -> list[Seg]:
        if isinstance(part, Lit):
            return [(_kind(part.quoted), part.text, False)]
        if isinstance(part, CmdSub):
            if is_comment_only(part.body):
                return [("text", "", False)]
            self.kept_literal = True
            self.warn(f"line {part.line}: command substitution {clip(part.raw)} not evaluated; kept literally")
            return [(_kind(part.quoted), part.raw, False)]
        if isinstance(part, Arith):
            try:
                value = str(self.arith(part.expr))
            except Unknown as exc:
                self.kept_literal = True
                self.warn(f"line {part.line}: arithmetic {clip(part.raw)} not evaluated ({exc}); kept literally")
                return [(_kind(part.quoted), part.raw, False)]
            return [(_kind(part.quoted), value, not part.quoted)]
        return self._param(part)

    def _literal(self, p: Param) -> list[Seg]:
        self.kept_literal = True
        return [(_kind(p.quoted), p.raw, False)]

    def _param(self, p: Param) -> list[Seg]:
        special = self._special(p)
        if special is not None:
            return special
        state, value, var = self.script.lookup(p.name)
        self._note_record(p, state, var)
        if state == "opaque":
            assert var is not None
            self.warn(f"variable ${p.name} is set at line {var.line} {var.why}, which is not evaluated; kept as '{p.raw}'")
            return self._literal(p)
        split = not p.quoted and not (var is not None and var.nosplit)
        try:
            value = self._subscript(value, p)
        except Unknown:
            self.warn(f"line {p.line}: cannot evaluate the index in {p.raw}; kept literally")
            return self._literal(p)
        if p.length:
            return self._length(p, state, value)
        if p.op in _DEFAULT_OPS:
            return self._defaulted(p, state, value, split)
        if value is None:
            return self._unknown(p, state)
        if p.op is None:
            return self._value(value, p, split)
        return self._transformed(p, value, split)

    def _special(self, p: Param) -> list[Seg] | None:
        """Parameters that are not variables: the script's arguments, $?, $$, $0...; None for a variable."""
        if not p.name:
            self.warn(f"line {p.line}: cannot expand {p.raw}; kept literally")
            return self._literal(p)
        if not p.op and ((p.name in ("@", "*") and not p.length) or p.name == "#"):
            return self._arguments(p)
        if p.name in ("?", "$", "!", "-", "0"):
            self.warn(f"line {p.line}: {p.raw} is only known when the script runs; kept literally")
            return self._literal(p)
        return None

    def _arguments(self, p: Param) -> list[Seg]:
        """$@, $* and $#: the arguments of the function being run; a script's own are not known."""
        args = self.script.positional[-1] if self.script.positional else None
        if p.name == "#":
            if args is None:
                self.warn(f"line {p.line}: {p.raw} (the number of script arguments) assumed 0")
                args = []
            return [(_kind(p.quoted), str(len(args)), False)]
        if args is None:
            self.warn(f"line {p.line}: {p.raw} (the script's arguments) assumed empty")
            args = []
        if p.name == "@" and p.quoted:
            return [("multi", list(args), False)]
        return [(_kind(p.quoted), " ".join(args), not p.quoted)]

    def _note_record(self, p: Param, state: str, var: Var | None) -> None:
        """Warnings carried by the variable's assignment, and assignments not applied."""
        if var is not None:
            self.warnings.extend(var.warnings)
            for line in self.script.conditional.get(p.name, []):
                self.warn(
                    f"variable ${p.name} is also set at line {line}, inside a block that is "
                    f"not evaluated; using the value from line {var.line}"
                )
        elif state == "unknown":
            for line in self.script.conditional.get(p.name, []):
                self.warn(f"variable ${p.name} is set only at line {line}, inside a block that is not evaluated")

    def _subscript(self, value: str | list[str] | None, p: Param) -> str | list[str] | None:
        if value is not None and p.index is not None:
            return self._index(value, p.index)
        if isinstance(value, list):
            return value[0] if value else ""
        return value

    def _length(self, p: Param, state: str, value: str | list[str] | None) -> list[Seg]:
        if value is None:
            return self._unknown(p, state)
        n = len(value) if isinstance(value, list) and p.index in ("@", "*") else len(join(value))
        return [(_kind(p.quoted), str(n), False)]

    def _defaulted(self, p: Param, state: str, value: str | list[str] | None, split: bool) -> list[Seg]:
        """${X:-a} ${X-a} ${X:=a} ${X=a} ${X:+a} ${X+a} ${X:?} ${X?}."""
        op = p.op or ""
        is_empty = value is None or join(value) == ""
        use_default = value is None or (op.startswith(":") and is_empty)
        if op in (":+", "+"):
            if use_default:
                if state == "unknown":
                    self.warn(f"variable ${p.name} is not set in the script; {p.raw} gives ''")
                return [(_kind(p.quoted), "", False)]
            return [(_kind(p.quoted), self.string(p.arg), split)]
        if value is not None and not use_default:
            return self._value(value, p, split)
        if op in (":?", "?"):
            return self._unknown(p, state)
        return self._default(p, state, split)

    def _default(self, p: Param, state: str, split: bool) -> list[Seg]:
        default = self.string(p.arg)
        notes: list[str] = []
        if state == "unknown":
            shown = _show(p.name, default)
            if p.name.isdigit():
                notes.append(f"line {p.line}: positional parameter ${p.name} (a script argument) is not known; using the default '{shown}'")
            else:
                notes.append(f"variable ${p.name} is not set in the script; using the default '{shown}'")
        self.warnings.extend(notes)
        if p.op in (":=", "=") and not p.name.isdigit():
            self.script.assign(p.name, Var(default, p.line, p.arg_raw, warnings=notes))
        return [(_kind(p.quoted), default, split)]

    def _unknown(self, p: Param, state: str) -> list[Seg]:
        if (
            self.unset_unknown
            and state == "unknown"
            and not p.name.isdigit()
            and p.name not in self.script.conditional
            and not LAUNCH_ENV.match(p.name)
        ):
            if p.name not in self.read_unset:
                self.read_unset.append(p.name)
            return [(_kind(p.quoted), "", False)]
        if p.name.isdigit():
            self.warn(f"line {p.line}: positional parameter ${p.name} (a script argument) is not known; kept as '{p.raw}'")
        elif state == "unset":
            return [(_kind(p.quoted), "", False)]
        else:
            self.warn(f"variable ${p.name} is not set in the script; kept as '{p.raw}'")
        return self._literal(p)

    def _value(self, value: str | list[str], p: Param, split: bool) -> list[Seg]:
        if isinstance(value, list):
            if p.quoted and p.index == "@":
                return [("multi", list(value), False)]
            return [(_kind(p.quoted), " ".join(value), split)]
        return [(_kind(p.quoted), value, split)]

    def _index(self, value: str | list[str], index: str) -> str | list[str]:
        items = value if isinstance(value, list) else [value]
        if index in ("@", "*"):
            return list(items)
        n = self.arith(index)
        if n < 0:
            n += len(items)
        if 0 <= n < len(items):
            return items[n]
        return ""

    # -- ${X#p} ${X%p} ${X/a/b} ${X^^} ${X:1:2}

    def _transformed(self, p: Param, value: str | list[str], split: bool) -> list[Seg]:
        try:
            if isinstance(value, list):
                return self._value([self._transform(v, p) for v in value], p, split)
            return self._value(self._transform(value, p), p, split)
        except Unknown as exc:
            self.warn(f"line {p.line}: cannot evaluate {p.raw} ({exc}); kept literally")
            return self._literal(p)

    def _transform(self, value: str, p: Param) -> str:
        op, arg = p.op, p.arg_raw
        assert op is not None
        if op in ("#", "##", "%", "%%"):
            return self._strip(value, op, arg)
        if op in ("/", "//", "/#", "/%"):
            return self._replace(value, op, arg)
        if op in _CASE:
            return _CASE[op](value)
        if op == ":":
            return self._substring(value, arg)
        raise Unknown(f"the '{op}' operator")

    def _strip(self, value: str, op: str, arg: str) -> str:
        """${X#p} ${X##p} (shortest/longest prefix) and ${X%p} ${X%%p} (suffix)."""
        pattern = self._pattern(arg)
        greedy = op in ("##", "%%")
        if op.startswith("#"):
            rng = range(len(value), -1, -1) if greedy else range(len(value) + 1)
            for k in rng:
                if pattern.fullmatch(value[:k]):
                    return value[k:]
            return value
        rng = range(len(value) + 1) if greedy else range(len(value), -1, -1)
        for k in rng:
            if pattern.fullmatch(value[k:]):
                return value[:k]
        return value

    def _replace(self, value: str, op: str, arg: str) -> str:
        """${X/a/b} (first match), ${X//a/b} (all), ${X/#a/b} (prefix), ${X/%a/b} (suffix)."""
        pat_raw, _, rep_raw = _split_unescaped(arg, "/")
        pattern = self._pattern(pat_raw)
        rep = self.string(operand(rep_raw)) if rep_raw else ""
        if op == "/#":
            for k in range(len(value), -1, -1):
                if pattern.fullmatch(value[:k]):
                    return rep + value[k:]
            return value
        if op == "/%":
            for k in range(len(value) + 1):
                if pattern.fullmatch(value[k:]):
                    return value[:k] + rep
            return value
        return _replace_matches(value, pattern, rep, once=op == "/")

    def _substring(self, value: str, arg: str) -> str:
        off_raw, sep, len_raw = arg.partition(":")
        off = self.arith(off_raw)
        if off < 0:
            off = max(0, len(value) + off)
        if not sep:
            return value[off:]
        n = self.arith(len_raw)
        return value[off : off + n] if n >= 0 else value[off : len(value) + n]

    def _pattern(self, raw: str) -> re.Pattern[str]:
        return glob(self.string(operand(raw)) if raw else "")

    # -- arithmetic

    def arith(self, expr: str) -> int:
        text = self.string(operand(expr)) if "$" in expr or "`" in expr else expr
        return evaluate(text, self._integer)

    def _integer(self, name: str) -> int:
        """A variable's value in arithmetic: unset is 0; anything but an integer is not known."""
        state, value, var = self.script.lookup(name)
        if var is not None:
            self.warnings.extend(var.warnings)
        if state == "unset":
            return 0
        if state != "set" or value is None:
            raise Unknown(f"${name} is not known")
        text = value[0] if isinstance(value, list) and value else value
        if not isinstance(text, str) or not _INTEGER.fullmatch(text or "0"):
            raise Unknown(f"${name} is not an integer")
        return int(text or "0")


def _replace_matches(value: str, pattern: re.Pattern[str], rep: str, once: bool) -> str:
    """`value` with the longest match of `pattern` at each position replaced (the first only if `once`)."""
    out: list[str] = []
    k, done = 0, False
    while k <= len(value):
        hit = None if done else _longest_match(pattern, value, k)
        if hit is not None:
            out.append(rep)
            k = hit
            done = once
            continue
        if k < len(value):
            out.append(value[k])
        k += 1
    return "".join(out)


def _longest_match(pattern: re.Pattern[str], value: str, k: int) -> int | None:
    for e in range(len(value), k, -1):
        if pattern.fullmatch(value[k:e]):
            return e
    return None


def join(value: str | list[str]) -> str:
    return " ".join(value) if isinstance(value, list) else value


def clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def is_comment_only(body: str) -> bool:
    """`# note` or `: note` inside backticks/$(...): the idiom for a comment in a continued line."""
    stripped = body.strip()
    return stripped.startswith(("#", ": ")) or stripped == ":"


def _split_unescaped(text: str, sep: str) -> tuple[str, str, str]:
    k = 0
    while k < len(text):
        if text[k] == "\\":
            k += 2
            continue
        if text[k] == sep:
            return text[:k], sep, text[k + 1 :]
        k += 1
    return text, "", ""


def glob(text: str) -> re.Pattern[str]:
    """A bash glob pattern (* ? [...] [!...] and backslash escapes) as a regex."""
    out: list[str] = []
    k = 0
    while k < len(text):
        c = text[k]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and "]" in text[k + 2 :]:
            end = text.index("]", k + 2)
            body = text[k + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            k = end
        elif c == "\\" and k + 1 < len(text):
            k += 1
            out.append(re.escape(text[k]))
        else:
            out.append(re.escape(c))
        k += 1
    return re.compile("".join(out), re.DOTALL)
