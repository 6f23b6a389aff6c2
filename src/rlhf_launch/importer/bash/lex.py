"""Bash tokens for a launch script: words (their quoting and expansions kept apart), operators,
redirections, newlines; comments and here-documents are set aside, not read as commands."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=")
RESERVED = {
    "if", "then", "elif", "else", "fi", "while", "until", "for", "select", "do", "done",
    "case", "esac", "{", "}", "function", "!", "time",
}  # fmt: skip


class ScriptError(ValueError):
    """The script has no trainer call, two of them, or cannot be tokenised."""


@dataclass
class Lit:
    text: str
    quoted: bool


@dataclass
class Param:
    raw: str  # as written: "$X", "${X:-a}"
    name: str  # "X", "1", "@", ... ; "" when the expansion could not be read
    quoted: bool
    line: int
    index: str | None = None
    op: str | None = None
    arg: list[Part] = field(default_factory=list)
    arg_raw: str = ""
    length: bool = False


@dataclass
class CmdSub:
    raw: str  # "$(...)", "`...`", "<(...)"
    body: str
    quoted: bool
    line: int


@dataclass
class Arith:
    raw: str
    expr: str
    quoted: bool
    line: int


Part = Lit | Param | CmdSub | Arith


@dataclass
class Word:
    parts: list[Part]
    line: int
    raw: str
    array: list[Word] | None = None  # NAME=( ... )

    def literal(self) -> str | None:
        """The text of a word made only of unquoted literal characters."""
        if self.array is None and len(self.parts) == 1:
            p = self.parts[0]
            if isinstance(p, Lit) and not p.quoted:
                return p.text
        return None


@dataclass
class Tok:
    kind: str  # "word" | "op" | "redir" | "newline" | "arith" | "eof"
    value: str
    line: int
    word: Word | None = None
    comment_line: int | None = None  # newline ending a comment inside a continued command


_PARAM_OPS = (
    ":-", ":=", ":+", ":?", "-", "=", "+", "?", "##", "#", "%%", "%",
    "//", "/#", "/%", "/", "^^", "^", ",,", ",", "@", ":",
)  # fmt: skip


class Lexer:
    """Bash tokens: words (with their quoting and expansions kept apart), operators, newlines."""

    def __init__(self, text: str, line: int = 1) -> None:
        self.s = text
        self.i = 0
        self.line = line
        self.toks: list[Tok] = []
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

    def tokenize(self) -> list[Tok]:
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
        self.toks.append(Tok("eof", "", self.line))
        return self.toks

    def _emit(self, tok: Tok) -> None:
        self.toks.append(tok)

    def _separator(self) -> None:
        self._cmd_start = True
        self._words_in_cmd = 0

    def _newline(self, final: bool = False) -> None:
        tok = Tok("newline", "\n", self.line, comment_line=self._comment_in_continuation)
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
            self._emit(Tok("arith", s[i:end], self.line))
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
        self._emit(Tok("op", op, self.line))
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
        tok = Tok("redir", fd + op, self.line)
        self._emit(tok)
        if op in ("<<", "<<-"):
            while self.i < len(s) and s[self.i] in " \t":
                self.i += 1
            word = self._read_word()
            if word is None:
                raise self.error(tok.line, "here-document without a delimiter")
            delim = "".join(p.text if isinstance(p, Lit) else p.raw for p in word.parts)
            self._pending.append((delim, op == "<<-", tok.line))
            self._emit(Tok("word", word.raw, word.line, word=word))

    def _word(self) -> None:
        start_line = self.line
        word = self._read_word()
        if word is None:
            return
        text = word.literal()
        if text is not None and text.isdigit() and self.i < len(self.s) and self.s[self.i] in "<>":
            self._redirect(text)
            return
        self._emit(Tok("word", word.raw, start_line, word=word))
        self._words_in_cmd += 1
        if self._cmd_start:
            self._after_for = text == "for"
            self._cmd_start = text in RESERVED and text not in ("for", "case", "function", "}")
        else:
            self._after_for = False

    def _count_lines(self, start: int, end: int) -> None:
        self.line += self.s.count("\n", start, end)

    # -- words

    def _read_word(self, stop: str = " \t\n;&|()<>", whole: bool = False, quoted: bool = False) -> Word | None:
        """One word starting at self.i; `whole` reads to the end of the text (a ${X:-...} operand)."""
        s = self.s
        start, line = self.i, self.line
        parts: list[Part] = []
        buf: list[str] = []
        while self.i < len(s):
            c = s[self.i]
            if c == "(" and not whole and self._array_start(parts, buf):
                _flush(parts, buf, quoted)
                return self._array(start, line, parts)
            if not whole and c in stop:
                sub = self._process_substitution(start, quoted)
                if sub is None:
                    break
                parts.append(sub)
            elif c == "\\":
                self._backslash(parts, buf, quoted)
            elif c in "'\"`$":
                _flush(parts, buf, quoted)
                parts.extend(self._quoted_or_expansion(c, quoted))
            else:
                buf.append(c)
                self._count_lines(self.i, self.i + 1)
                self.i += 1
        _flush(parts, buf, quoted)
        if self.i == start:
            return None
        return Word(parts, line, s[start : self.i])

    def _process_substitution(self, start: int, quoted: bool) -> CmdSub | None:
        """`<(...)` / `>(...)` opening the word at self.i; None at any other stop character."""
        s, c = self.s, self.s[self.i]
        if not (c in "<>" and self.i == start and s.startswith("(", self.i + 1)):
            return None
        end = self._balanced(self.i + 2, "(", ")")
        if end is None:
            raise self.error(self.line, f"unterminated '{c}('")
        sub = CmdSub(s[self.i : end], s[self.i + 2 : end - 1], quoted, self.line)
        self._count_lines(self.i, end)
        self.i = end
        return sub

    def _backslash(self, parts: list[Part], buf: list[str], quoted: bool) -> None:
        """An unquoted backslash: a line continuation, a trailing backslash, or a quoted character."""
        s = self.s
        nxt = s[self.i + 1 : self.i + 2]
        if nxt == "\n":
            self.i += 2
            self.line += 1
            self._continued = True
            return
        if nxt == "":
            buf.append("\\")
            self.i += 1
            return
        _flush(parts, buf, quoted)
        if nxt in " \t" and s[self.i + 2 : self.i + 3] in ("\n", ""):
            self.blank_escapes.append(self.line)
        parts.append(Lit(nxt, True))
        self.i += 2

    def _quoted_or_expansion(self, c: str, quoted: bool) -> list[Part]:
        """The parts of the quote or expansion opening at self.i (`c` is its first character)."""
        s = self.s
        if c == "'":
            end = s.find("'", self.i + 1)
            if end < 0:
                raise self.error(self.line, "unterminated single quote")
            part = Lit(s[self.i + 1 : end], True)
            self._count_lines(self.i, end)
            self.i = end + 1
            return [part]
        if c == "$" and s.startswith("'", self.i + 1):
            return [self._ansi_c()]
        if c == '"' or (c == "$" and s.startswith('"', self.i + 1)):
            if c == "$":
                self.i += 1
            return self._double_quoted()
        if c == "`":
            return [self._backtick(quoted)]
        return [self._dollar(quoted)]

    @staticmethod
    def _array_start(parts: list[Part], buf: list[str]) -> bool:
        """The word so far is NAME= or NAME+= (unquoted), so "(" opens an array assignment."""
        if parts:
            return False
        return ASSIGN.fullmatch("".join(buf)) is not None

    def _array(self, start: int, line: int, parts: list[Part]) -> Word:
        s = self.s
        self.i += 1  # "("
        items: list[Word] = []
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
        return Word(parts, line, s[start : self.i], array=items)

    def _double_quoted(self) -> list[Part]:
        s = self.s
        open_line = self.line
        self.i += 1
        parts: list[Part] = []
        buf: list[str] = []
        while True:
            if self.i >= len(s):
                raise self.error(open_line, "unterminated double quote")
            c = s[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\":
                self._escape_in_double_quotes(buf)
            elif c == "$":
                _flush(parts, buf, True)
                parts.append(self._dollar(True))
            elif c == "`":
                _flush(parts, buf, True)
                parts.append(self._backtick(True))
            else:
                buf.append(c)
                self._count_lines(self.i, self.i + 1)
                self.i += 1
        _flush(parts, buf, True)
        if not parts:
            parts.append(Lit("", True))  # "" is one (empty) argument
        return parts

    def _escape_in_double_quotes(self, buf: list[str]) -> None:
        """A backslash inside "...": it quotes only " \\ $ ` and newline, else it is itself."""
        nxt = self.s[self.i + 1 : self.i + 2]
        if nxt == "\n":
            self.i += 2
            self.line += 1
        elif nxt in ('"', "\\", "$", "`"):
            buf.append(nxt)
            self.i += 2
        else:
            buf.append("\\")
            self.i += 1

    def _ansi_c(self) -> Lit:
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
                return Lit("".join(out), True)
            if c == "\\" and self.i + 1 < len(s):
                nxt = s[self.i + 1]
                out.append(escapes.get(nxt, "\\" + nxt))
                self.i += 2
                continue
            if c == "\n":
                self.line += 1
            out.append(c)
            self.i += 1

    def _backtick(self, quoted: bool) -> CmdSub:
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
        return CmdSub(raw, raw[1:-1], quoted, line)

    def _balanced(self, j: int, open_: str, close: str, depth: int = 1) -> int | None:
        """Index just past the `close` that brings `depth` to zero; quotes are skipped over."""
        s = self.s
        while j < len(s):
            c = s[j]
            skip_to = self._skip_quoted(j, open_)
            if skip_to is not None:
                if skip_to < 0:
                    return None
                j = skip_to
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return None

    def _skip_quoted(self, j: int, open_: str) -> int | None:
        """Where reading goes on after an escape, a quote or a `${...}` at j (-1: unterminated);
        None when j starts none of them."""
        s, c = self.s, self.s[j]
        if c == "\\":
            return j + 2
        if c == "'":
            end = s.find("'", j + 1)
            return -1 if end < 0 else end + 1
        if c == '"':
            k = j + 1
            while k < len(s) and s[k] != '"':
                k += 2 if s[k] == "\\" else 1
            return -1 if k >= len(s) else k + 1
        if c == "$" and s.startswith("{", j + 1) and open_ != "{":
            close_at = self._balanced(j + 2, "{", "}")
            return -1 if close_at is None else close_at
        return None

    def _dollar(self, quoted: bool) -> Part:
        s, i, line = self.s, self.i, self.line
        if s.startswith("$((", i):
            end = self._balanced(i + 3, "(", ")", depth=2)
            if end is None:
                raise self.error(line, "unterminated '$(('")
            self._count_lines(i, end)
            self.i = end
            return Arith(s[i:end], s[i + 3 : end - 2], quoted, line)
        if s.startswith("$(", i):
            end = self._balanced(i + 2, "(", ")")
            if end is None:
                raise self.error(line, "unterminated command substitution '$('")
            self._count_lines(i, end)
            self.i = end
            return CmdSub(s[i:end], s[i + 2 : end - 1], quoted, line)
        if s.startswith("${", i):
            end = self._balanced(i + 2, "{", "}")
            if end is None:
                raise self.error(line, "unterminated '${'")
            self._count_lines(i, end)
            self.i = end
            return self._braced(s[i:end], s[i + 2 : end - 1], quoted, line)
        m = NAME.match(s, i + 1)
        if m:
            self.i = m.end()
            return Param(s[i : m.end()], m.group(), quoted, line)
        nxt = s[i + 1 : i + 2]
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i = i + 2
            return Param(s[i : i + 2], nxt, quoted, line)
        self.i = i + 1
        return Lit("$", quoted)

    def _braced(self, raw: str, inner: str, quoted: bool, line: int) -> Param:
        length = False
        body = inner
        if body.startswith("#") and len(body) > 1 and body[1] not in "}":
            length = True
            body = body[1:]
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?", body)
        if not m:
            return Param(raw, "", quoted, line)
        name = m.group(1)
        index = m.group(2)[1:-1] if m.group(2) else None
        rest = body[m.end() :]
        param = Param(raw, name, quoted, line, index=index, length=length)
        if not rest:
            return param
        if length:
            return Param(raw, "", quoted, line)
        for op in _PARAM_OPS:
            if rest.startswith(op):
                param.op = op
                param.arg_raw = rest[len(op) :]
                break
        else:
            return Param(raw, "", quoted, line)
        if param.op in (":-", ":=", ":+", ":?", "-", "=", "+", "?"):
            sub = Lexer(param.arg_raw, line)
            word = sub._read_word(whole=True, quoted=quoted)
            param.arg = word.parts if word else []
        return param


def operand(text: str) -> list[Part]:
    """The parts of `text` read as one word (a ${X:-...} operand, a pattern, an arithmetic body)."""
    word = Lexer(text)._read_word(whole=True)
    return word.parts if word is not None else []


def _flush(parts: list[Part], buf: list[str], quoted: bool) -> None:
    """Move the literal characters gathered in `buf` into `parts`."""
    if buf:
        parts.append(Lit("".join(buf), quoted))
        buf.clear()
