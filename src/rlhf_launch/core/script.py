"""Read a shell script that launches OpenRLHF's PPO trainer, without running anything.

`parse_script` finds the one `openrlhf.cli.train_ppo_ray` call in a bash script (direct
`python3 -m`, `deepspeed --module`, `torchrun -m`, or the entrypoint of `ray job submit ...
--`) and returns the trainer's argv as bash would build it: backslash continuations joined,
comments dropped, quotes removed, and `$X`, `${X}`, `${X:-default}`, `${ARR[@]}` and `$((...))`
expanded from the assignments the script makes before the call.

Nothing is executed. What cannot be known without running the script stays literal, with a
warning: command substitutions (`$(...)`, backticks), variables the script does not set (unless
the caller's `environ` has them), script arguments (`$1`, `$@`), and assignments made inside
`if`/`case`/loops/functions that close before the trainer call (they are not applied, because
whether they ran is unknown).

The parse follows bash, including its traps: a full comment line inside a backslash-continued
command ends that command (bash does not continue through a comment), so the lines after it
are not trainer arguments; the parser reports that in a warning rather than guessing intent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TRAINER_MODULE = "openrlhf.cli.train_ppo_ray"
_TRAINER_PATH = re.compile(r"(?:^|/)openrlhf/cli/train_ppo_ray\.py$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?$")
_SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw")
_RESERVED = {
    "if", "then", "elif", "else", "fi", "while", "until", "for", "select", "do", "done",
    "case", "esac", "{", "}", "function", "!", "time",
}  # fmt: skip
_IFS = re.compile(r"([ \t\n]+)")


class ScriptError(ValueError):
    """The script has no trainer call, two of them, or cannot be tokenised."""


@dataclass(frozen=True)
class TrainerCall:
    argv: list[str]
    launcher: str
    ray_address: str | None
    runtime_env: dict[str, Any] | None
    line: int
    variables: dict[str, str]
    warnings: list[str]


def parse_script(text: str, environ: Mapping[str, str] | None = None) -> TrainerCall:
    """The one trainer call in `text`. `environ` supplies variables the script does not set.

    Only `environ` is consulted, never this process's environment, so the result depends on
    the text and the mapping alone.
    """
    warnings: list[str] = []
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
        warnings.append("the script has CRLF line endings; read as LF")
    script = _Script(text, dict(environ or {}), line_offset=0)
    call = script.run()
    return _with_warnings(call, warnings + call.warnings)


def _with_warnings(call: TrainerCall, warnings: list[str]) -> TrainerCall:
    seen: dict[str, None] = {}
    for w in warnings:
        seen.setdefault(w, None)
    return TrainerCall(
        argv=call.argv,
        launcher=call.launcher,
        ray_address=call.ray_address,
        runtime_env=call.runtime_env,
        line=call.line,
        variables=call.variables,
        warnings=list(seen),
    )


# ----------------------------------------------------------------------------- tokens


@dataclass
class _Lit:
    text: str
    quoted: bool


@dataclass
class _Param:
    raw: str  # as written: "$X", "${X:-a}"
    name: str  # "X", "1", "@", ... ; "" when the expansion could not be read
    quoted: bool
    line: int
    index: str | None = None
    op: str | None = None
    arg: list[_Part] = field(default_factory=list)
    arg_raw: str = ""
    length: bool = False


@dataclass
class _CmdSub:
    raw: str  # "$(...)", "`...`", "<(...)"
    body: str
    quoted: bool
    line: int


@dataclass
class _Arith:
    raw: str
    expr: str
    quoted: bool
    line: int


_Part = _Lit | _Param | _CmdSub | _Arith


@dataclass
class _Word:
    parts: list[_Part]
    line: int
    raw: str
    array: list[_Word] | None = None  # NAME=( ... )

    def literal(self) -> str | None:
        """The text of a word made only of unquoted literal characters."""
        if self.array is None and len(self.parts) == 1:
            p = self.parts[0]
            if isinstance(p, _Lit) and not p.quoted:
                return p.text
        return None


@dataclass
class _Tok:
    kind: str  # "word" | "op" | "redir" | "newline" | "arith" | "eof"
    value: str
    line: int
    word: _Word | None = None
    comment_line: int | None = None  # newline ending a comment inside a continued command


_PARAM_OPS = (
    ":-", ":=", ":+", ":?", "-", "=", "+", "?", "##", "#", "%%", "%",
    "//", "/#", "/%", "/", "^^", "^", ",,", ",", "@", ":",
)  # fmt: skip


class _Lexer:
    """Bash tokens: words (with their quoting and expansions kept apart), operators, newlines."""

    def __init__(self, text: str, line: int = 1) -> None:
        self.s = text
        self.i = 0
        self.line = line
        self.toks: list[_Tok] = []
        self.comments: list[tuple[int, str]] = []
        self.heredocs: list[tuple[int, str]] = []
        self.blank_escapes: list[int] = []  # lines ending in "\ " (an escaped blank)
        self._pending: list[tuple[str, bool, int]] = []
        self._cmd_start = True
        self._after_for = False
        self._continued = False  # this line was reached through a backslash-newline
        self._words_in_cmd = 0
        self._comment_in_continuation: int | None = None

    def error(self, line: int, message: str) -> ScriptError:
        return ScriptError(f"line {line}: {message}")

    # -- driver

    def tokenize(self) -> list[_Tok]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and s.startswith("\n", self.i + 1):
                self.i += 2
                self.line += 1
                self._continued = True
            elif c == "\n":
                self._newline()
            elif c == "#":
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                self.comments.append((self.line, s[self.i : end]))
                if self._continued and self._words_in_cmd and self._comment_in_continuation is None:
                    self._comment_in_continuation = self.line
                self.i = end
            elif c in "<>" and s.startswith("(", self.i + 1):
                self._word()
            elif c in ";&|()":
                self._operator()
            elif c in "<>":
                self._redirect("")
            else:
                self._word()
        self._newline(final=True)
        self.toks.append(_Tok("eof", "", self.line))
        return self.toks

    def _emit(self, tok: _Tok) -> None:
        self.toks.append(tok)

    def _separator(self) -> None:
        self._cmd_start = True
        self._words_in_cmd = 0

    def _newline(self, final: bool = False) -> None:
        tok = _Tok("newline", "\n", self.line, comment_line=self._comment_in_continuation)
        self._emit(tok)
        self._comment_in_continuation = None
        self._continued = False
        self._separator()
        if not final:
            self.i += 1
            self.line += 1
            self._read_heredocs()
        elif self._pending:
            self._pending.clear()

    def _read_heredocs(self) -> None:
        s = self.s
        for delim, strip, _line in self._pending:
            body: list[str] = []
            start = self.line
            while self.i < len(s):
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                text = s[self.i : end]
                self.i = min(end + 1, len(s))
                self.line += 1
                if (text.lstrip("\t") if strip else text) == delim:
                    break
                body.append(text)
            self.heredocs.append((start, "\n".join(body)))
        self._pending.clear()

    def _operator(self) -> None:
        s, i = self.s, self.i
        if s.startswith("((", i) and (self._cmd_start or self._after_for):
            end = self._balanced(i + 2, "(", ")", depth=2)
            if end is None:
                raise self.error(self.line, "unterminated '(('")
            self._emit(_Tok("arith", s[i:end], self.line))
            self._count_lines(i, end)
            self.i = end
            self._cmd_start = False
            self._after_for = False
            return
        for op in (";;&", ";;", ";&", "&&", "&>>", "&>", "||", "|&", ";", "&", "|", "(", ")"):
            if s.startswith(op, i):
                break
        if op in ("&>", "&>>"):
            self._redirect("")
            return
        self._emit(_Tok("op", op, self.line))
        self.i = i + len(op)
        if op != ")":
            self._separator()
        self._after_for = False

    def _redirect(self, fd: str) -> None:
        s, i = self.s, self.i
        for op in ("<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "&>>", "&>", "<", ">"):
            if s.startswith(op, i):
                break
        self.i = i + len(op)
        tok = _Tok("redir", fd + op, self.line)
        self._emit(tok)
        if op in ("<<", "<<-"):
            while self.i < len(s) and s[self.i] in " \t":
                self.i += 1
            word = self._read_word()
            if word is None:
                raise self.error(tok.line, "here-document without a delimiter")
            delim = "".join(p.text if isinstance(p, _Lit) else p.raw for p in word.parts)
            self._pending.append((delim, op == "<<-", tok.line))
            self._emit(_Tok("word", word.raw, word.line, word=word))

    def _word(self) -> None:
        start_line = self.line
        word = self._read_word()
        if word is None:
            return
        text = word.literal()
        if text is not None and text.isdigit() and self.i < len(self.s) and self.s[self.i] in "<>":
            self._redirect(text)
            return
        self._emit(_Tok("word", word.raw, start_line, word=word))
        self._words_in_cmd += 1
        if self._cmd_start:
            self._after_for = text == "for"
            self._cmd_start = text in _RESERVED and text not in ("for", "case", "function", "}")
        else:
            self._after_for = False

    def _count_lines(self, start: int, end: int) -> None:
        self.line += self.s.count("\n", start, end)

    # -- words

    def _read_word(self, stop: str = " \t\n;&|()<>", whole: bool = False, quoted: bool = False) -> _Word | None:
        """One word starting at self.i; `whole` reads to the end of the text (a ${X:-...} operand)."""
        s = self.s
        start, line = self.i, self.line
        parts: list[_Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(_Lit("".join(buf), quoted))
                buf.clear()

        while self.i < len(s):
            c = s[self.i]
            if c == "(" and not whole and self._array_start(parts, buf):
                flush()
                return self._array(start, line, parts)
            if not whole and c in stop:
                if c in "<>" and self.i == start and s.startswith("(", self.i + 1):
                    end = self._balanced(self.i + 2, "(", ")")
                    if end is None:
                        raise self.error(self.line, f"unterminated '{c}('")
                    parts.append(_CmdSub(s[self.i : end], s[self.i + 2 : end - 1], quoted, self.line))
                    self._count_lines(self.i, end)
                    self.i = end
                    continue
                break
            if c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt == "\n":
                    self.i += 2
                    self.line += 1
                    self._continued = True
                    continue
                if nxt == "":
                    buf.append("\\")
                    self.i += 1
                    continue
                flush()
                if nxt in " \t" and s[self.i + 2 : self.i + 3] in ("\n", ""):
                    self.blank_escapes.append(self.line)
                parts.append(_Lit(nxt, True))
                self.i += 2
            elif c == "'":
                flush()
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise self.error(self.line, "unterminated single quote")
                parts.append(_Lit(s[self.i + 1 : end], True))
                self._count_lines(self.i, end)
                self.i = end + 1
            elif c == "$" and s.startswith("'", self.i + 1):
                flush()
                parts.append(self._ansi_c())
            elif c == '"' or (c == "$" and s.startswith('"', self.i + 1)):
                flush()
                if c == "$":
                    self.i += 1
                parts.extend(self._double_quoted())
            elif c == "`":
                flush()
                parts.append(self._backtick(quoted))
            elif c == "$":
                flush()
                parts.append(self._dollar(quoted))
            else:
                buf.append(c)
                if c == "\n":
                    self.line += 1
                self.i += 1
        flush()
        if self.i == start:
            return None
        return _Word(parts, line, s[start : self.i])

    @staticmethod
    def _array_start(parts: list[_Part], buf: list[str]) -> bool:
        """The word so far is NAME= or NAME+= (unquoted), so "(" opens an array assignment."""
        if parts:
            return False
        return _ASSIGN.fullmatch("".join(buf)) is not None

    def _array(self, start: int, line: int, parts: list[_Part]) -> _Word:
        s = self.s
        self.i += 1  # "("
        items: list[_Word] = []
        while True:
            if self.i >= len(s):
                raise self.error(line, "unterminated array assignment '('")
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\n":
                self.i += 1
                self.line += 1
            elif c == "\\" and s.startswith("\n", self.i + 1):
                self.i += 2
                self.line += 1
            elif c == "#":
                end = s.find("\n", self.i)
                end = len(s) if end < 0 else end
                self.comments.append((self.line, s[self.i : end]))
                self.i = end
            elif c == ")":
                self.i += 1
                break
            else:
                word = self._read_word(stop=" \t\n;&|()<>")
                if word is None:
                    raise self.error(self.line, f"unexpected {c!r} in array assignment")
                items.append(word)
        return _Word(parts, line, s[start : self.i], array=items)

    def _double_quoted(self) -> list[_Part]:
        s = self.s
        open_line = self.line
        self.i += 1
        parts: list[_Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(_Lit("".join(buf), True))
                buf.clear()

        while True:
            if self.i >= len(s):
                raise self.error(open_line, "unterminated double quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt == "\n":
                    self.i += 2
                    self.line += 1
                    continue
                if nxt in ('"', "\\", "$", "`"):
                    buf.append(nxt)
                    self.i += 2
                    continue
                buf.append("\\")
                self.i += 1
            elif c == "$":
                flush()
                parts.append(self._dollar(True))
            elif c == "`":
                flush()
                parts.append(self._backtick(True))
            else:
                buf.append(c)
                if c == "\n":
                    self.line += 1
                self.i += 1
        flush()
        if not parts:
            parts.append(_Lit("", True))  # "" is one (empty) argument
        return parts

    def _ansi_c(self) -> _Lit:
        s = self.s
        open_line = self.line
        self.i += 2
        out: list[str] = []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "e": "\x1b"}
        while True:
            if self.i >= len(s):
                raise self.error(open_line, "unterminated $'...' quote")
            c = s[self.i]
            if c == "'":
                self.i += 1
                return _Lit("".join(out), True)
            if c == "\\" and self.i + 1 < len(s):
                nxt = s[self.i + 1]
                out.append(escapes.get(nxt, "\\" + nxt))
                self.i += 2
                continue
            if c == "\n":
                self.line += 1
            out.append(c)
            self.i += 1

    def _backtick(self, quoted: bool) -> _CmdSub:
        s = self.s
        line = self.line
        j = self.i + 1
        while j < len(s) and s[j] != "`":
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise self.error(line, "unterminated backtick command substitution")
        raw = s[self.i : j + 1]
        self._count_lines(self.i, j)
        self.i = j + 1
        return _CmdSub(raw, raw[1:-1], quoted, line)

    def _balanced(self, j: int, open_: str, close: str, depth: int = 1) -> int | None:
        """Index just past the `close` that brings `depth` to zero; quotes are skipped over."""
        s = self.s
        while j < len(s):
            c = s[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                end = s.find("'", j + 1)
                if end < 0:
                    return None
                j = end + 1
                continue
            if c == '"':
                k = j + 1
                while k < len(s) and s[k] != '"':
                    k += 2 if s[k] == "\\" else 1
                if k >= len(s):
                    return None
                j = k + 1
                continue
            if c == "$" and s.startswith("{", j + 1) and open_ != "{":
                close_at = self._balanced(j + 2, "{", "}")
                if close_at is None:
                    return None
                j = close_at
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return None

    def _dollar(self, quoted: bool) -> _Part:
        s, i, line = self.s, self.i, self.line
        if s.startswith("$((", i):
            end = self._balanced(i + 3, "(", ")", depth=2)
            if end is None:
                raise self.error(line, "unterminated '$(('")
            self._count_lines(i, end)
            self.i = end
            return _Arith(s[i:end], s[i + 3 : end - 2], quoted, line)
        if s.startswith("$(", i):
            end = self._balanced(i + 2, "(", ")")
            if end is None:
                raise self.error(line, "unterminated command substitution '$('")
            self._count_lines(i, end)
            self.i = end
            return _CmdSub(s[i:end], s[i + 2 : end - 1], quoted, line)
        if s.startswith("${", i):
            end = self._balanced(i + 2, "{", "}")
            if end is None:
                raise self.error(line, "unterminated '${'")
            self._count_lines(i, end)
            self.i = end
            return self._braced(s[i:end], s[i + 2 : end - 1], quoted, line)
        m = _NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return _Param(s[i : m.end()], m.group(), quoted, line)
        nxt = s[i + 1 : i + 2]
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i = i + 2
            return _Param(s[i : i + 2], nxt, quoted, line)
        self.i = i + 1
        return _Lit("$", quoted)

    def _braced(self, raw: str, inner: str, quoted: bool, line: int) -> _Param:
        length = False
        body = inner
        if body.startswith("#") and len(body) > 1 and body[1] not in "}":
            length = True
            body = body[1:]
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?", body)
        if not m:
            return _Param(raw, "", quoted, line)
        name = m.group(1)
        index = m.group(2)[1:-1] if m.group(2) else None
        rest = body[m.end() :]
        param = _Param(raw, name, quoted, line, index=index, length=length)
        if not rest:
            return param
        if length:
            return _Param(raw, "", quoted, line)
        for op in _PARAM_OPS:
            if rest.startswith(op):
                param.op = op
                param.arg_raw = rest[len(op) :]
                break
        else:
            return _Param(raw, "", quoted, line)
        if param.op in (":-", ":=", ":+", ":?", "-", "=", "+", "?"):
            sub = _Lexer(param.arg_raw, line)
            word = sub._read_word(whole=True, quoted=quoted)
            param.arg = word.parts if word else []
        return param


# ----------------------------------------------------------------------------- expansion


@dataclass
class _Var:
    value: str | list[str] | None  # None: unset by the script (`unset X`)
    line: int
    raw: str  # the assignment's value as written
    opaque: bool = False  # set from something not evaluated: kept as its reference
    why: str = ""
    nosplit: bool = False  # holds literal text kept from the script ($(...), $UNKNOWN)
    warnings: list[str] = field(default_factory=list)


class _Unknown(Exception):
    pass


def _show(name: str, value: str) -> str:
    return "<hidden>" if _SECRET_NAME.search(name) else value


class _Expander:
    """Expands words against the script's variables as they stand; collects warnings."""

    def __init__(self, script: _Script, warnings: list[str]) -> None:
        self.script = script
        self.warnings = warnings
        self.kept_literal = False

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    # -- whole words

    def fields(self, word: _Word) -> list[str]:
        """The arguments one command word becomes (word splitting on unquoted expansions)."""
        segs: list[tuple[str, object, bool]] = []
        parts = self._tilde(word.parts)
        for part in parts:
            segs.extend(self._part(part))
        out: list[str] = []
        cur = ""
        have = False
        for kind, value, flag in segs:
            if kind == "multi":
                assert isinstance(value, list)
                if value:
                    cur += value[0]
                    have = True
                    for item in value[1:]:
                        out.append(cur)
                        cur = item
            elif flag:  # splittable
                assert isinstance(value, str)
                for piece in _IFS.split(value):
                    if not piece:
                        continue
                    if piece.isspace():
                        if have:
                            out.append(cur)
                        cur, have = "", False
                    else:
                        cur += piece
                        have = True
            else:
                assert isinstance(value, str)
                cur += value
                have = have or kind == "quoted" or bool(value)
        if have:
            out.append(cur)
        return out

    def string(self, parts: list[_Part]) -> str:
        """A word's value without word splitting (assignment values, ${X:-...} operands)."""
        out: list[str] = []
        for part in self._tilde(parts):
            for _kind, value, _flag in self._part(part):
                out.append(" ".join(value) if isinstance(value, list) else str(value))
        return "".join(out)

    def _tilde(self, parts: list[_Part]) -> list[_Part]:
        if parts and isinstance(parts[0], _Lit) and not parts[0].quoted:
            text = parts[0].text
            if text == "~" or text.startswith("~/"):
                home = self.script.lookup_plain("HOME")
                if home is None:
                    self.warn("'~' is not expanded (HOME is not known); kept as '~'")
                    return parts
                return [_Lit(home + text[1:], True), *parts[1:]]
        return parts

    # -- parts: (kind, value, splittable); kind "text" | "quoted" | "multi"

    def _part(self, part: _Part) -> list[tuple[str, object, bool]]:
        if isinstance(part, _Lit):
            return [("quoted" if part.quoted else "text", part.text, False)]
        if isinstance(part, _CmdSub):
            if _is_comment_only(part.body):
                return [("text", "", False)]
            self.kept_literal = True
            self.warn(f"line {part.line}: command substitution {_clip(part.raw)} not evaluated; kept literally")
            return [("quoted" if part.quoted else "text", part.raw, False)]
        if isinstance(part, _Arith):
            try:
                value = str(self.arith(part.expr))
            except _Unknown as exc:
                self.kept_literal = True
                self.warn(f"line {part.line}: arithmetic {_clip(part.raw)} not evaluated ({exc}); kept literally")
                return [("quoted" if part.quoted else "text", part.raw, False)]
            return [("quoted" if part.quoted else "text", value, not part.quoted)]
        return self._param(part)

    def _literal(self, p: _Param) -> list[tuple[str, object, bool]]:
        self.kept_literal = True
        return [("quoted" if p.quoted else "text", p.raw, False)]

    def _param(self, p: _Param) -> list[tuple[str, object, bool]]:
        split = not p.quoted
        kind = "quoted" if p.quoted else "text"
        if not p.name:
            self.warn(f"line {p.line}: cannot expand {p.raw}; kept literally")
            return self._literal(p)
        args = self.script.positional[-1] if self.script.positional else None
        if p.name in ("@", "*") and not p.op and not p.length:
            if args is None:
                self.warn(f"line {p.line}: {p.raw} (the script's arguments) assumed empty")
                args = []
            if p.name == "@" and p.quoted:
                return [("multi", list(args), False)]
            return [(kind, " ".join(args), split)]
        if p.name == "#" and not p.op:
            if args is None:
                self.warn(f"line {p.line}: {p.raw} (the number of script arguments) assumed 0")
                args = []
            return [(kind, str(len(args)), False)]
        if p.name in ("?", "$", "!", "-") or p.name == "0":
            self.warn(f"line {p.line}: {p.raw} is only known when the script runs; kept literally")
            return self._literal(p)

        state, value, var = self.script.lookup(p.name)
        if var is not None:
            self.warnings.extend(var.warnings)
            if var.nosplit:
                split = False
            for line in self.script.conditional.get(p.name, []):
                self.warn(
                    f"variable ${p.name} is also set at line {line}, inside a block that is "
                    f"not evaluated; using the value from line {var.line}"
                )
        elif state == "unknown":
            for line in self.script.conditional.get(p.name, []):
                self.warn(f"variable ${p.name} is set only at line {line}, inside a block that is not evaluated")
        if state == "opaque":
            assert var is not None
            self.warn(f"variable ${p.name} is set at line {var.line} {var.why}, which is not evaluated; kept as '{p.raw}'")
            return self._literal(p)

        if value is not None and p.index is not None:
            try:
                value = self._index(value, p.index)
            except _Unknown:
                self.warn(f"line {p.line}: cannot evaluate the index in {p.raw}; kept literally")
                return self._literal(p)
        elif isinstance(value, list):
            value = value[0] if value else ""

        if p.length:
            if value is None:
                return self._unknown(p, state)
            n = len(value) if isinstance(value, list) and p.index in ("@", "*") else len(_join(value))
            return [(kind, str(n), False)]

        op = p.op
        is_set = value is not None
        is_empty = value is None or _join(value) == ""
        if op in (":-", "-", ":=", "=", ":+", "+", ":?", "?"):
            use_default = (not is_set) or (op.startswith(":") and is_empty)
            if op in (":+", "+"):
                if use_default:
                    if state == "unknown":
                        self.warn(f"variable ${p.name} is not set in the script; {p.raw} gives ''")
                    return [(kind, "", False)]
                return [(kind, self.string(p.arg), split)]
            if not use_default:
                assert value is not None
                return self._value(value, p, split)
            if op in (":?", "?"):
                return self._unknown(p, state)
            default = self.string(p.arg)
            notes: list[str] = []
            if state == "unknown":
                shown = _show(p.name, default)
                if p.name.isdigit():
                    notes.append(
                        f"line {p.line}: positional parameter ${p.name} (a script argument) is not known; using the default '{shown}'"
                    )
                else:
                    notes.append(f"variable ${p.name} is not set in the script; using the default '{shown}'")
            self.warnings.extend(notes)
            if op in (":=", "=") and not p.name.isdigit():
                self.script.assign(p.name, _Var(default, p.line, p.arg_raw, warnings=notes))
            return [(kind, default, split)]
        if value is None:
            return self._unknown(p, state)
        if op is None:
            return self._value(value, p, split)
        try:
            if isinstance(value, list):
                return self._value([self._transform(v, p) for v in value], p, split)
            return self._value(self._transform(value, p), p, split)
        except _Unknown as exc:
            self.warn(f"line {p.line}: cannot evaluate {p.raw} ({exc}); kept literally")
            return self._literal(p)

    def _unknown(self, p: _Param, state: str) -> list[tuple[str, object, bool]]:
        if p.name.isdigit():
            self.warn(f"line {p.line}: positional parameter ${p.name} (a script argument) is not known; kept as '{p.raw}'")
        elif state == "unset":
            return [("quoted" if p.quoted else "text", "", False)]
        else:
            self.warn(f"variable ${p.name} is not set in the script; kept as '{p.raw}'")
        return self._literal(p)

    def _value(self, value: str | list[str], p: _Param, split: bool) -> list[tuple[str, object, bool]]:
        if isinstance(value, list):
            if p.quoted and p.index == "@":
                return [("multi", list(value), False)]
            return [("quoted" if p.quoted else "text", " ".join(value), split)]
        return [("quoted" if p.quoted else "text", value, split)]

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

    def _transform(self, value: str, p: _Param) -> str:
        op, arg = p.op, p.arg_raw
        assert op is not None
        if op in ("#", "##", "%", "%%"):
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
        if op in ("/", "//", "/#", "/%"):
            pat_raw, _, rep_raw = _split_unescaped(arg, "/")
            pattern = self._pattern(pat_raw)
            rep = self.string(_operand(rep_raw)) if rep_raw else ""
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
            out, k, done = [], 0, False
            while k <= len(value):
                hit = None
                if not done:
                    for e in range(len(value), k, -1):
                        if pattern.fullmatch(value[k:e]):
                            hit = e
                            break
                if hit is not None:
                    out.append(rep)
                    k = hit
                    done = op == "/"
                    continue
                if k < len(value):
                    out.append(value[k])
                k += 1
            return "".join(out)
        if op == "^^":
            return value.upper()
        if op == ",,":
            return value.lower()
        if op == "^":
            return value[:1].upper() + value[1:]
        if op == ",":
            return value[:1].lower() + value[1:]
        if op == ":":
            off_raw, sep, len_raw = arg.partition(":")
            off = self.arith(off_raw)
            if off < 0:
                off = max(0, len(value) + off)
            if not sep:
                return value[off:]
            n = self.arith(len_raw)
            return value[off : off + n] if n >= 0 else value[off : len(value) + n]
        raise _Unknown(f"the '{op}' operator")

    def _pattern(self, raw: str) -> re.Pattern[str]:
        return _glob(self.string(_operand(raw)) if raw else "")

    # -- arithmetic: integers, variables, + - * / % ** << >> & | ^ ~ ! comparisons && || ?:

    def arith(self, expr: str) -> int:
        text = self.string(_operand(expr)) if "$" in expr or "`" in expr else expr
        tokens: list[str] = re.findall(r"\s*(0[xX][0-9a-fA-F]+|\d+|[A-Za-z_][A-Za-z0-9_]*|\*\*|<<|>>|<=|>=|==|!=|&&|\|\||\S)", text)
        pos = 0

        def peek() -> str:
            return tokens[pos] if pos < len(tokens) else ""

        def take() -> str:
            nonlocal pos
            pos += 1
            return tokens[pos - 1]

        binary = [
            ["||"], ["&&"], ["|"], ["^"], ["&"], ["==", "!="], ["<", ">", "<=", ">="],
            ["<<", ">>"], ["+", "-"], ["*", "/", "%"],
        ]  # fmt: skip

        def ternary() -> int:
            cond = level(0)
            if peek() == "?":
                take()
                a = ternary()
                if take() != ":":
                    raise _Unknown("bad ?: expression")
                b = ternary()
                return a if cond else b
            return cond

        def level(n: int) -> int:
            if n == len(binary):
                return power()
            left = level(n + 1)
            while peek() in binary[n]:
                op = take()
                right = level(n + 1)
                left = _binop(op, left, right)
            return left

        def power() -> int:
            base = unary()
            if peek() == "**":
                take()
                exp = power()
                if exp < 0:
                    raise _Unknown("negative exponent")
                return int(base**exp)
            return base

        def unary() -> int:
            t = peek()
            if t in ("+", "-", "!", "~"):
                take()
                v = unary()
                return {"+": v, "-": -v, "!": int(not v), "~": ~v}[t]
            return atom()

        def atom() -> int:
            t = take() if pos < len(tokens) else ""
            if t == "(":
                v = ternary()
                if take() != ")":
                    raise _Unknown("unbalanced parentheses")
                return v
            if re.fullmatch(r"0[xX][0-9a-fA-F]+", t):
                return int(t, 16)
            if t.isdigit():
                return int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)
            if _NAME.fullmatch(t):
                nxt = peek()
                if nxt == "=" or (nxt in ("+", "-") and tokens[pos + 1 : pos + 2] == [nxt]):
                    raise _Unknown("assignment")
                state, value, var = self.script.lookup(t)
                if var is not None:
                    self.warnings.extend(var.warnings)
                if state == "unset":
                    return 0
                if state != "set" or value is None:
                    raise _Unknown(f"${t} is not known")
                text = value[0] if isinstance(value, list) and value else value
                if not isinstance(text, str) or not re.fullmatch(r"\s*-?\d+\s*", text or "0"):
                    raise _Unknown(f"${t} is not an integer")
                return int(text or "0")
            raise _Unknown("unsupported syntax")

        if not tokens:
            return 0
        result = ternary()
        if pos != len(tokens):
            raise _Unknown("unsupported syntax")
        return result


def _binop(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise _Unknown("division by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "/" else a - b * q
    table = {
        "||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
        "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
        "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
        ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
        "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b, "-": lambda: a - b,
        "*": lambda: a * b,
    }  # fmt: skip
    return table[op]()


def _join(value: str | list[str]) -> str:
    return " ".join(value) if isinstance(value, list) else value


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _is_comment_only(body: str) -> bool:
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


# ----------------------------------------------------------------------------- commands


@dataclass
class _Block:
    kind: str  # "if" | "loop" | "case" | "subshell" | "group" | "call" (a function body being run)
    line: int
    undo: list[tuple[str, _Var | None, int]] = field(default_factory=list)
    expect_pattern: bool = False
    # if/case branches: "unknown" (condition not known: assignments undone at the end of the
    # branch), "certain" (known to run: assignments kept), "skip" (known not to run: not read)
    branch: str = "unknown"
    cond: bool | None = None  # the pending if/elif condition, applied at `then`
    taken: bool = False  # an earlier branch certainly ran
    uncertain: bool = False  # an earlier branch may have run
    subject: str | None = None  # a case's word, when known


@dataclass
class _Command:
    words: list[_Word]
    line: int
    end: _Tok  # the token that ended it


class _Script:
    def __init__(self, text: str, environ: dict[str, str], line_offset: int) -> None:
        self.text = text
        self.environ = environ
        self.offset = line_offset
        self.vars: dict[str, _Var] = {}
        self.conditional: dict[str, list[int]] = {}
        self.blocks: list[_Block] = []
        self.sourced: list[tuple[int, str]] = []
        self.mentions: list[int] = []
        self.found: TrainerCall | None = None
        self.functions: dict[str, tuple[int, int, int]] = {}  # name -> (body start, closing "}", line)
        self.calls: list[tuple[str, int]] = []  # functions being run: (name, line of the call)
        self.positional: list[list[str]] = []  # their arguments
        self._called: set[str] = set()
        self._uncalled: str | None = None
        self.skipped_calls: list[int] = []  # trainer calls in branches known not to run
        self.decisions: list[str] = []

    # -- variables

    def lookup(self, name: str) -> tuple[str, str | list[str] | None, _Var | None]:
        """("set" | "unset" | "opaque" | "unknown", value, the script's record)."""
        if name.isdigit() and self.positional and name != "0":
            args = self.positional[-1]
            n = int(name)
            return ("set", args[n - 1], None) if n <= len(args) else ("unset", None, None)
        var = self.vars.get(name)
        if var is not None:
            if var.opaque:
                if name in self.environ:
                    return "set", self.environ[name], None
                return "opaque", None, var
            if var.value is None:
                return "unset", None, var
            return "set", var.value, var
        if name in self.environ:
            return "set", self.environ[name], None
        return "unknown", None, None

    def lookup_plain(self, name: str) -> str | None:
        state, value, _var = self.lookup(name)
        return _join(value) if state == "set" and value is not None else None

    def assign(self, name: str, var: _Var, local: bool = False) -> None:
        prev = self.vars.get(name)
        self.vars[name] = var
        for block in reversed(self.blocks):
            if block.kind == "call" and not local:
                continue  # a function's plain assignments outlive the call
            if block.branch == "certain":
                continue  # a branch known to run: as if unconditional
            block.undo.append((name, prev, var.line))
            break

    def skipping(self) -> bool:
        return any(b.branch == "skip" for b in self.blocks)

    def _undo(self, block: _Block) -> None:
        for name, prev, line in reversed(block.undo):
            if prev is None:
                self.vars.pop(name, None)
            else:
                self.vars[name] = prev
            if block.kind not in ("group", "call"):
                self.conditional.setdefault(name, [])
                if line not in self.conditional[name]:
                    self.conditional[name].append(line)
        block.undo.clear()

    def _close(self, kinds: tuple[str, ...]) -> None:
        for k in range(len(self.blocks) - 1, -1, -1):
            if self.blocks[k].kind in kinds:
                while len(self.blocks) > k:
                    block = self.blocks.pop()
                    if block.kind == "group" and self.blocks:
                        self.blocks[-1].undo.extend(block.undo)
                    elif block.kind != "group":
                        self._undo(block)
                return

    # -- driver

    def run(self) -> TrainerCall:
        lexer = _Lexer(self.text)
        toks = lexer.tokenize()
        self.lexer = lexer
        self.toks = toks
        k = 0
        while toks[k].kind != "eof":
            k = self._step(k)
        for name in list(self.functions):
            if self.found is None and name not in self._called:
                self._uncalled = name
                self._call(name, [], self.functions[name][2])
                self._uncalled = None
        if self.found is None:
            raise ScriptError(self._not_found_message())
        return self.found

    def _not_found_message(self) -> str:
        n = self.text.count("\n") + 1
        hints: list[str] = []
        for line, text in self.lexer.comments:
            if "train_ppo_ray" in text:
                hints.append(f"line {line + self.offset} mentions it in a comment")
        for line, body in self.lexer.heredocs:
            if "train_ppo_ray" in body:
                hints.append(f"the here-document at line {line + self.offset} mentions it (not read as commands)")
        for line in self.mentions:
            hints.append(f"line {line + self.offset} mentions it, but not as `-m {TRAINER_MODULE}`")
        for line in self.skipped_calls:
            hints.append(f"line {line + self.offset} calls it in a branch that does not run")
        msg = f"no `{TRAINER_MODULE}` call found in lines 1-{n + self.offset}"
        return msg + ("; " + "; ".join(hints[:4]) if hints else "")

    def _step(self, k: int) -> int:
        toks = self.toks
        tok = toks[k]
        block = self.blocks[-1] if self.blocks else None
        if block is not None and block.kind == "case" and block.expect_pattern and tok.kind != "eof":
            if tok.kind == "newline" or (tok.kind == "op" and tok.value in (";", "&")):
                return k + 1
            if tok.kind == "word" and tok.word is not None and tok.word.literal() == "esac":
                self._close(("case",))
                return k + 1
            patterns: list[_Word] = []
            while toks[k].kind != "eof" and not (toks[k].kind == "op" and toks[k].value == ")"):
                pattern = toks[k].word
                if toks[k].kind == "word" and pattern is not None:
                    patterns.append(pattern)
                k += 1
            block.expect_pattern = False
            self._case_branch(block, patterns)
            return k + 1 if toks[k].kind != "eof" else k
        if tok.kind == "newline":
            return k + 1
        if tok.kind == "op":
            if tok.value == "(":
                self.blocks.append(_Block("subshell", tok.line))
            elif tok.value == ")":
                self._close(("subshell",))
            elif tok.value in (";;", ";&", ";;&"):
                for b in reversed(self.blocks):
                    if b.kind == "case":
                        self._undo(b)
                        b.expect_pattern = True
                        b.branch = "unknown"
                        break
            return k + 1
        words: list[_Word] = []
        line = tok.line
        while toks[k].kind in ("word", "redir", "arith"):
            t = toks[k]
            if t.kind == "redir":
                k += 1
                if toks[k].kind == "word":
                    k += 1
                continue
            if t.kind == "word" and t.word is not None:
                words.append(t.word)
            k += 1
        end = toks[k]
        lits = [w.literal() or "" for w in words]
        if lits[:1] == ["function"] and len(lits) in (2, 3) and _NAME.fullmatch(lits[1]):
            if len(lits) == 3 and lits[2] == "{":  # function name {
                brace = max(j for j in range(k) if toks[j].kind == "word" and toks[j].word is words[2])
                return self._define(lits[1], brace, line)
            if len(lits) == 2:
                if end.kind == "op" and end.value == "(" and toks[k + 1].value == ")":
                    k += 1
                return self._define(lits[1], k + 1, line)  # function name [()] { ... }
        if (
            len(lits) == 1
            and _NAME.fullmatch(lits[0])
            and end.kind == "op"
            and end.value == "("
            and toks[k + 1].kind == "op"
            and toks[k + 1].value == ")"
        ):
            return self._define(lits[0], k + 2, line)  # name() { ... }
        self._command(_Command(words, line, end), k)
        if end.kind == "op" and end.value in (";;", ";&", ";;&", "(", ")"):
            return k
        return k + 1 if end.kind != "eof" else k

    def _define(self, name: str, k: int, line: int) -> int:
        """Record a function body (run where the function is called); the index after it."""
        toks = self.toks
        while toks[k].kind == "newline":
            k += 1
        brace = toks[k].word
        if not (toks[k].kind == "word" and brace is not None and brace.literal() == "{"):
            return k  # a body that is not { ... } (a subshell): read in place
        depth = 0
        for j in range(k, len(toks)):
            t = toks[j]
            text = t.word.literal() if t.kind == "word" and t.word is not None else None
            prev = toks[j - 1] if j > k else None
            at_start = prev is None or prev.kind == "newline" or (prev.kind == "op" and prev.value != ")")
            if text == "{" and at_start:
                depth += 1
            elif text == "}" and at_start:
                depth -= 1
                if depth == 0:
                    if not self.skipping():  # not defined when its definition does not run
                        self.functions[name] = (k + 1, j, line)
                    return j + 1
        raise ScriptError(f"line {line + self.offset}: function {name} has no closing '}}'")

    def _call(self, name: str, args: list[str], line: int) -> None:
        if len(self.calls) >= 8 or any(n == name for n, _ in self.calls):
            return
        start, end, _line = self.functions[name]
        self._called.add(name)
        self.calls.append((name, line))
        self.positional.append(args)
        self.blocks.append(_Block("call", line))
        depth = len(self.blocks)
        k = start
        while k < end:
            k = self._step(k)
        while len(self.blocks) > depth:
            self._undo(self.blocks.pop())
        self._undo(self.blocks.pop())
        self.positional.pop()
        self.calls.pop()

    def _command(self, cmd: _Command, end_index: int) -> None:
        words = list(cmd.words)
        while words:
            head = words[0].literal()
            if head not in _RESERVED:
                break
            words.pop(0)
            if head in ("if", "elif"):
                if head == "if":
                    skipping = self.skipping()
                    self.blocks.append(_Block("if", cmd.line))
                else:
                    self._end_branch("if")
                    skipping = self.skipping()
                block = self._innermost("if")
                if block is not None and not skipping and not block.taken:
                    block.cond = self._condition(words, cmd, head)
                return
            elif head == "then":
                block = self._innermost("if")
                if block is not None:
                    self._start_branch(block, block.cond)
            elif head in ("do", "!", "time"):
                pass
            elif head == "else":
                block = self._innermost("if")
                if block is not None:
                    self._end_branch("if")
                    self._start_branch(block, True)
            elif head == "fi":
                self._close(("if",))
            elif head in ("while", "until"):
                self.blocks.append(_Block("loop", cmd.line))
            elif head in ("for", "select"):
                self.blocks.append(_Block("loop", cmd.line))
                if words and words[0].literal() and _NAME.fullmatch(words[0].literal() or ""):
                    name = words[0].literal() or ""
                    self.assign(name, _Var(None, words[0].line, "", opaque=True, why="as a loop variable"))
                return
            elif head == "done":
                self._close(("loop",))
            elif head == "case":
                subject: str | None = None
                if not self.skipping() and words:
                    subject = self._known(words[:1], cmd.line, "case")
                self.blocks.append(_Block("case", cmd.line, expect_pattern=True, subject=subject))
                return
            elif head == "esac":
                self._close(("case",))
            elif head == "function":
                return
            elif head == "{":
                self.blocks.append(_Block("group", cmd.line))
            elif head == "}":
                self._close(("group",))
        if not words:
            return
        if self.skipping():
            if any(TRAINER_MODULE in w.raw for w in words):
                self.skipped_calls.append(cmd.line)
            return
        assigns: list[_Word] = []
        while words and _assignment(words[0]) is not None:
            assigns.append(words.pop(0))
        if not words:
            for w in assigns:
                self._assign_word(w)
            return
        program = words[0].literal()
        if program in ("export", "declare", "typeset", "local", "readonly"):
            local = program in ("declare", "typeset", "local") and bool(self.calls)
            for w in words[1:]:
                if _assignment(w) is not None:
                    self._assign_word(w, local=local)
            return
        if program in self.functions:
            args: list[str] = []
            for w in words[1:]:
                args.extend(_Expander(self, []).fields(w))
            self._call(program, args, cmd.line)
            return
        if program == "unset":
            for w in words[1:]:
                text = w.literal()
                if text and _NAME.fullmatch(text):
                    self.assign(text, _Var(None, w.line, ""))
            return
        if program == "read":
            for w in words[1:]:
                text = w.literal()
                if text and _NAME.fullmatch(text):
                    self.assign(text, _Var(None, w.line, "", opaque=True, why="by `read`"))
            return
        if program in ("source", "."):
            self.sourced.append((cmd.line, words[1].raw if len(words) > 1 else ""))
            return
        self._maybe_trainer(cmd, assigns, words, end_index)

    # -- if / case branches

    def _innermost(self, kind: str) -> _Block | None:
        for b in reversed(self.blocks):
            if b.kind == kind:
                return b
        return None

    def _end_branch(self, kind: str) -> None:
        block = self._innermost(kind)
        if block is not None:
            while self.blocks[-1] is not block:
                self._close((self.blocks[-1].kind,))
            self._undo(block)
            block.branch = "unknown"

    def _start_branch(self, block: _Block, cond: bool | None) -> None:
        if block.taken or cond is False:
            block.branch = "skip"
        elif cond is None or block.uncertain:
            block.branch = "unknown"
            block.uncertain = True
        else:
            block.branch = "certain"
            block.taken = True

    def _known(self, words: list[_Word], line: int, what: str) -> str | None:
        """The words' value when nothing in it is unknown (defaults count as known, with a note)."""
        warnings: list[str] = []
        ex = _Expander(self, warnings)
        items: list[str] = []
        for w in words:
            items.extend(ex.fields(w))
        if ex.kept_literal or len(items) != 1:
            return None
        if warnings:
            self.decisions.append(
                f"line {line + self.offset}: the `{what}` is decided by values the script does not set itself ({'; '.join(warnings)})"
            )
        return items[0]

    def _condition(self, words: list[_Word], cmd: _Command, head: str) -> bool | None:
        """An if/elif condition when it is a test of known values: `[ ]`, `[[ ]]`, `test`, true/false."""
        if cmd.end.kind == "op" and cmd.end.value in ("&&", "||", "|", "|&", "&"):
            return None
        negate = False
        while words and words[0].literal() == "!":
            negate = not negate
            words = words[1:]
        if not words:
            return None
        warnings: list[str] = []
        ex = _Expander(self, warnings)
        argv: list[str] = []
        for w in words:
            argv.extend(ex.fields(w))
        if ex.kept_literal:
            return None
        result = _test(argv)
        if result is None:
            return None
        if warnings:
            self.decisions.append(
                f"line {cmd.line + self.offset}: the `{head}` is decided by values the script does not set itself ({'; '.join(warnings)})"
            )
        return not result if negate else result

    def _case_branch(self, block: _Block, patterns: list[_Word]) -> None:
        if any(b.branch == "skip" for b in self.blocks if b is not block):
            return  # inside a branch that does not run
        if block.taken:
            block.branch = "skip"
            return
        if block.subject is None:
            block.branch = "unknown"
            block.uncertain = True
            return
        ex = _Expander(self, [])
        values = [ex.string(p.parts) for p in patterns]
        if ex.kept_literal:
            block.branch = "unknown"
            block.uncertain = True
            return
        if any(_glob(v).fullmatch(block.subject) for v in values):
            self._start_branch(block, True)
        else:
            block.branch = "skip"

    def _assign_word(self, word: _Word, local: bool = False) -> None:
        parsed = _assignment(word)
        assert parsed is not None
        name, index, append, value_parts, raw = parsed
        warnings: list[str] = []
        ex = _Expander(self, warnings)
        if word.array is not None:
            items: list[str] = []
            for item in word.array:
                items.extend(ex.fields(item))
            if append:
                state, old, _v = self.lookup(name)
                old_items = old if isinstance(old, list) else ([old] if isinstance(old, str) else [])
                items = list(old_items) + items
            self.assign(name, _Var(items, word.line, raw, warnings=warnings, nosplit=ex.kept_literal), local=local)
            return
        sole = [p for p in value_parts if not (isinstance(p, _Lit) and p.text == "")]
        if len(sole) == 1 and isinstance(sole[0], _CmdSub) and not _is_comment_only(sole[0].body):
            why = f"by command substitution {_clip(sole[0].raw)}"
            self.assign(name, _Var(None, word.line, raw, opaque=True, why=why), local=local)
            return
        value = ex.string(value_parts)
        if len(sole) == 1 and isinstance(sole[0], _Arith) and ex.kept_literal:
            self.assign(name, _Var(None, word.line, raw, opaque=True, why=f"by arithmetic {_clip(sole[0].raw)}"), local=local)
            return
        if index is not None:
            state, old, _v = self.lookup(name)
            items = list(old) if isinstance(old, list) else ([old] if isinstance(old, str) else [])
            try:
                n = ex.arith(index)
            except _Unknown:
                self.assign(name, _Var(None, word.line, raw, opaque=True, why="by an element assignment"), local=local)
                return
            while len(items) <= n:
                items.append("")
            items[n] = items[n] + value if append else value
            self.assign(name, _Var(items, word.line, raw, warnings=warnings), local=local)
            return
        if append:
            state, old, _v = self.lookup(name)
            if state == "set" and old is not None:
                value = _join(old) + value
        self.assign(name, _Var(value, word.line, raw, warnings=warnings, nosplit=ex.kept_literal), local=local)

    # -- the trainer

    def _maybe_trainer(self, cmd: _Command, assigns: list[_Word], words: list[_Word], end_index: int) -> None:
        mentions = any(TRAINER_MODULE in w.raw or "train_ppo_ray" in w.raw for w in words + assigns)
        argv: list[str] = []
        spans: list[tuple[int, int, list[str]]] = []  # argv[start:end] came from one word, with its warnings
        for w in words:
            word_warnings: list[str] = []
            items = _Expander(self, word_warnings).fields(w)
            spans.append((len(argv), len(argv) + len(items), word_warnings))
            argv.extend(items)
        at = _trainer_index(argv)
        if at is None:
            inner = self._embedded(argv, cmd, spans)
            if inner is None and mentions:
                self.mentions.append(cmd.line)
            return
        if self.found is not None:
            raise ScriptError(
                f"two trainer calls: line {self.found.line} and line {cmd.line + self.offset}; keep one (or split the script)"
            )
        env_prefix = [a.raw for a in assigns]
        self.found = self._build(argv, at, cmd, env_prefix, spans, end_index)

    def _embedded(self, argv: list[str], cmd: _Command, spans: list[tuple[int, int, list[str]]]) -> TrainerCall | None:
        """A trainer call inside `bash -c '...'` (e.g. under srun), or a one-string Ray entrypoint."""
        for k, arg in enumerate(argv):
            if TRAINER_MODULE not in arg or not any(ch in arg for ch in " \t\n"):
                continue
            before = argv[:k]
            via_shell = len(before) >= 2 and before[-1].startswith("-") and "c" in before[-1] and before[-2].rsplit("/", 1)[-1] in _SHELLS
            via_ray = "--" in before and _ray_index(before) is not None and before[-1] == "--"
            if not (via_shell or via_ray):
                continue
            environ = dict(self.environ)
            for name in self.vars:
                value = self.lookup_plain(name)
                if value is not None:
                    environ[name] = value
            inner = _Script(arg, environ, line_offset=cmd.line - 1 + self.offset)
            try:
                call = inner.run()
            except ScriptError:
                return None
            where = "a `bash -c` string" if via_shell else "a single-string `ray job submit` entrypoint"
            note = [f"line {cmd.line + self.offset}: the trainer command is inside {where}; read from that string"]
            if via_ray:
                note.append(
                    "Ray quotes each entrypoint argument, so an entrypoint passed as one quoted "
                    "string fails on the cluster with 'not found'"
                )
            if self.found is not None:
                raise ScriptError(
                    f"two trainer calls: line {self.found.line} and line {cmd.line + self.offset}; keep one (or split the script)"
                )
            self.found = _with_warnings(
                TrainerCall(
                    argv=call.argv,
                    launcher=call.launcher,
                    ray_address=call.ray_address,
                    runtime_env=call.runtime_env,
                    line=cmd.line + self.offset,
                    variables={**self._variables(), **call.variables},
                    warnings=[],
                ),
                note + _warnings_from(spans, k, k + 1) + call.warnings,
            )
            return self.found
        return None

    def _variables(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, var in self.vars.items():
            if var.opaque:
                out[name] = var.raw or f"<set {var.why}>"
            elif var.value is not None:
                out[name] = _join(var.value)
        return out

    def _build(
        self,
        argv: list[str],
        at: int,
        cmd: _Command,
        env_prefix: list[str],
        spans: list[tuple[int, int, list[str]]],
        end_index: int,
    ) -> TrainerCall:
        line = cmd.line + self.offset
        notes: list[str] = []
        launcher, launcher_at = _launcher(argv, at, notes)
        ray_at = _ray_index(argv[:launcher_at])
        warnings = _warnings_from(spans, launcher_at if ray_at is None else ray_at, len(argv))
        ray_address: str | None = None
        runtime_env: dict[str, Any] | None = None
        if ray_at is not None:
            launcher = "ray job submit"
            ray_address, runtime_env = self._ray_options(argv, ray_at, launcher_at, notes)
            dashdash = argv.index("--", ray_at) if "--" in argv[ray_at:launcher_at] else None
            entry_env = [a for a in argv[(dashdash or launcher_at) + 1 : launcher_at] if _ASSIGN.match(a)]
            if entry_env:
                notes.append(
                    "the Ray entrypoint sets environment variables before the trainer "
                    f"({', '.join(_env_name(a) for a in entry_env)}); they are not trainer arguments"
                )
        elif self.lookup_plain("RAY_ADDRESS") is not None:
            notes.append("RAY_ADDRESS is set, so the trainer's ray.init() connects to that cluster")
        if env_prefix:
            names = ", ".join(_env_name(a) for a in env_prefix)
            notes.append(f"line {line}: the command sets environment variables ({names}); they are not trainer arguments")
        trainer_argv = argv[at + 1 :]
        if self._uncalled is not None:
            notes.append(f"the trainer command is inside function {self._uncalled}, which the script never calls")
        elif self.calls:
            fn, call_line = self.calls[-1]
            notes.append(f"the trainer command is inside function {fn}, called at line {call_line + self.offset}")
        notes.extend(self._continuation_traps(cmd, end_index))
        notes.extend(self.decisions)
        for src_line, path in self.sourced:
            if any(w.startswith("variable $") and "is not set in the script" in w for w in warnings):
                notes.append(f"line {src_line + self.offset}: `source {path}` is not read; variables it sets are unknown here")
        return TrainerCall(
            argv=trainer_argv,
            launcher=launcher,
            ray_address=ray_address,
            runtime_env=runtime_env,
            line=line,
            variables=self._variables(),
            warnings=_dedupe(warnings + notes),
        )

    def _ray_options(self, argv: list[str], ray_at: int, launcher_at: int, notes: list[str]) -> tuple[str | None, dict[str, Any] | None]:
        opts: dict[str, str] = {}
        k = ray_at + 3
        end = launcher_at
        if "--" in argv[ray_at:launcher_at]:
            end = argv.index("--", ray_at)
        while k < end:
            arg = argv[k]
            if arg.startswith("--") and "=" in arg:
                key, _, value = arg.partition("=")
                opts[key] = value
            elif arg in ("--address", "--runtime-env-json", "--working-dir", "--runtime-env", "--submission-id",
                         "--job-id", "--metadata-json", "--entrypoint-num-cpus", "--entrypoint-num-gpus",
                         "--entrypoint-memory", "--entrypoint-resources", "--entrypoint-label-selector",
                         "--headers", "--log-style", "--log-color") and k + 1 < end:  # fmt: skip
                opts[arg] = argv[k + 1]
                k += 1
            k += 1
        address = opts.get("--address")
        if address is None:
            env_address = self.lookup_plain("RAY_ADDRESS")
            if env_address is not None:
                address = env_address
                notes.append(f"ray job submit has no --address; using RAY_ADDRESS={env_address}")
            else:
                notes.append("ray job submit has no --address and RAY_ADDRESS is not set in the script")
        runtime_env: dict[str, Any] | None = None
        raw = opts.get("--runtime-env-json")
        if raw is not None:
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError as exc:
                notes.append(f"--runtime-env-json is not valid JSON ({exc.msg} at column {exc.colno}): {_clip(raw)}")
            else:
                if isinstance(parsed, dict):
                    runtime_env = parsed
                else:
                    notes.append("--runtime-env-json is not a JSON object")
        if "--runtime-env" in opts:
            notes.append(f"--runtime-env {opts['--runtime-env']} names a YAML file, which is not read")
        if "--working-dir" in opts:
            runtime_env = dict(runtime_env or {})
            runtime_env["working_dir"] = opts["--working-dir"]
            notes.append(f"--working-dir {opts['--working-dir']} is taken as runtime_env working_dir")
        return address, runtime_env

    def _continuation_traps(self, cmd: _Command, end_index: int) -> list[str]:
        notes: list[str] = []
        end = cmd.end
        for line in self.lexer.blank_escapes:
            if cmd.line <= line <= end.line:
                notes.append(
                    f"line {line + self.offset}: the backslash is followed by a blank, so the line does not "
                    "continue: bash passes ' ' as an argument and runs the next line as a separate command"
                )
        if end.kind == "newline" and end.comment_line is not None:
            nxt = self._next_command_text(end_index + 1)
            if nxt is not None and nxt[1].startswith("-"):
                notes.append(
                    f"line {end.comment_line + self.offset}: this comment line ends the trainer command (bash "
                    f"does not continue a command through a comment); line {nxt[0] + self.offset} "
                    f"'{_clip(nxt[1], 50)}' runs as a separate command, so those arguments do not reach the trainer"
                )
        return notes

    def _next_command_text(self, k: int) -> tuple[int, str] | None:
        toks = self.toks
        while toks[k].kind == "newline":
            k += 1
        if toks[k].kind != "word":
            return None
        line = toks[k].line
        words: list[str] = []
        while toks[k].kind == "word":
            words.append(toks[k].value)
            k += 1
        return line, " ".join(words)


def _assignment(word: _Word) -> tuple[str, str | None, bool, list[_Part], str] | None:
    """(name, index, append, value parts, raw value) when `word` is NAME=..., NAME+=..., NAME[i]=..."""
    if not word.parts:
        return None
    first = word.parts[0]
    if not isinstance(first, _Lit) or first.quoted:
        return None
    m = _ASSIGN.match(first.text)
    if m is None:
        return None
    rest = first.text[m.end() :]
    value_parts: list[_Part] = ([_Lit(rest, False)] if rest else []) + list(word.parts[1:])
    raw = word.raw.split("=", 1)[1] if "=" in word.raw else ""
    index = m.group(2)[1:-1] if m.group(2) else None
    return m.group(1), index, m.group(3) == "+", value_parts, raw


def _operand(text: str) -> list[_Part]:
    """The parts of `text` read as one word (a ${X:-...} operand, a pattern, an arithmetic body)."""
    word = _Lexer(text)._read_word(whole=True)
    return word.parts if word is not None else []


def _glob(text: str) -> re.Pattern[str]:
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


def _test(argv: list[str]) -> bool | None:
    """`true`, `false`, `[ ... ]`, `[[ ... ]]`, `test ...` with string/integer comparisons; None otherwise."""
    if argv in (["true"], [":"]):
        return True
    if argv == ["false"]:
        return False
    if (argv[:1], argv[-1:]) in ((["["], ["]"]), (["[["], ["]]"])):
        args = argv[1:-1]
    elif argv[:1] == ["test"]:
        args = argv[1:]
    else:
        return None
    negate = False
    if args[:1] == ["!"]:
        negate, args = True, args[1:]
    result: bool | None = None
    if not args:
        result = False
    elif len(args) == 1:
        result = args[0] != ""
    elif len(args) == 2 and args[0] in ("-n", "-z"):
        result = (args[1] != "") == (args[0] == "-n")
    elif len(args) == 3:
        a, op, b = args
        ints = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__, "-ge": int.__ge__}
        if op in ("=", "=="):
            result = a == b
        elif op == "!=":
            result = a != b
        elif op in ints and re.fullmatch(r"\s*-?\d+\s*", a) and re.fullmatch(r"\s*-?\d+\s*", b):
            result = bool(ints[op](int(a), int(b)))
    if result is None:
        return None
    return not result if negate else result


def _warnings_from(spans: list[tuple[int, int, list[str]]], start: int, end: int) -> list[str]:
    """The warnings of the words that produced argv[start:end]."""
    out: list[str] = []
    for lo, hi, warnings in spans:
        if (lo < end and hi > start) or (lo == hi and start <= lo <= end):
            out.extend(warnings)
    return out


def _env_name(assignment: str) -> str:
    return assignment.split("=", 1)[0]


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


_NOT_LAUNCHERS = {
    "echo", "printf", "pkill", "pgrep", "kill", "killall", "grep", "ps", "cat", "tail", "head",
    "ls", "cp", "mv", "rm", "logger", "test", "[", "[[", "true", ":", "nvidia-smi",
}  # fmt: skip


def _is_launcher(arg: str) -> bool:
    base = arg.rsplit("/", 1)[-1]
    return bool(_PYTHON.match(base)) or base in ("deepspeed", "torchrun")


def _trainer_index(argv: list[str]) -> int | None:
    """Index of the trainer module (after -m/--module) or of a .../openrlhf/cli/train_ppo_ray.py path."""
    if not argv or argv[0].rsplit("/", 1)[-1] in _NOT_LAUNCHERS:
        return None
    for k, arg in enumerate(argv):
        if arg == TRAINER_MODULE and k > 0:
            prev = argv[k - 1]
            if prev in ("-m", "--module") or re.fullmatch(r"-[A-Za-z]*m", prev):
                return k
        if _TRAINER_PATH.search(arg) and any(_is_launcher(a) for a in argv[:k]):
            return k
    return None


def _ray_index(argv: list[str]) -> int | None:
    for k in range(len(argv) - 2):
        if argv[k].rsplit("/", 1)[-1] == "ray" and argv[k + 1] == "job" and argv[k + 2] == "submit":
            return k
    return None


def _launcher(argv: list[str], at: int, notes: list[str]) -> tuple[str, int]:
    """The program that runs the trainer module, and its index in argv."""
    for k in range(at - 1, -1, -1):
        base = argv[k].rsplit("/", 1)[-1]
        if base == "torchrun" or argv[k] in ("torch.distributed.run", "torch.distributed.launch"):
            j = k
            if argv[k].startswith("torch.") and k >= 2 and _PYTHON.match(argv[k - 2].rsplit("/", 1)[-1]):
                j = k - 2
            return "torchrun", j
        if base == "deepspeed":
            return "deepspeed", k
        if _PYTHON.match(base):
            return "python", k
        if argv[k] == "--":
            break
    guess = at - 2 if argv[at - 1] in ("-m", "--module") else at - 1
    guess = max(guess, 0)
    notes.append(f"the program that runs the trainer ({argv[guess]!r}) is not python, deepspeed or torchrun; taken as python")
    return "python", guess
