"""Walk a launch script's commands, without running anything, to the one trainer call.

Assignments made before the call are applied in order (`export`, `declare`, `local`, arrays,
`unset`, `${X:=a}`); `if`/`case` branches whose condition is known from the script's values
are followed, the others read but their assignments undone at the end of the block; function
bodies run where the function is called (an uncalled one, at the end, if no call was found).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlhf_launch.importer.bash import trainer
from rlhf_launch.importer.bash.arith import Unknown
from rlhf_launch.importer.bash.expand import Expander, Var, clip, glob, is_comment_only, join
from rlhf_launch.importer.bash.lex import ASSIGN, NAME, RESERVED, Arith, CmdSub, Lexer, Lit, Part, ScriptError, Tok, Word
from rlhf_launch.importer.bash.trainer import TRAINER_MODULE

_INTEGER = re.compile(r"\s*-?\d+\s*")


@dataclass(frozen=True)
class TrainerCall:
    argv: list[str]
    launcher: str
    ray_address: str | None
    runtime_env: dict[str, Any] | None
    line: int
    variables: dict[str, str]
    warnings: list[str]


def parse_script(text: str, environ: Mapping[str, str] | None = None, pick: int | None = None) -> TrainerCall:
    """The one trainer call in `text`. `environ` supplies variables the script does not set.

    Only `environ` is consulted, never this process's environment, so the result depends on
    the text and the mapping alone. A script that runs the trainer more than once: `pick` (1-based,
    in the order the script runs them) chooses one; without it, the first when one command runs
    each time (a function called more than once), else a ScriptError naming them.
    """
    warnings: list[str] = []
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
        warnings.append("the script has CRLF line endings; read as LF")
    script = Script(text, dict(environ or {}), line_offset=0, pick=pick)
    call = script.run()
    if _open_branches(call):
        # A trainer word comes from a variable set only in branches of a condition that was left
        # undecided. Where that condition reads a variable the script never sets (nor --var), bash
        # reads it as unset when the caller does not export it: read again that way, and keep it
        # when the same trainer call is found (a condition that decides which call runs stays open).
        again = Script(text, dict(environ or {}), line_offset=0, pick=pick, unset_unknown=True)
        try:
            second = again.run()
        except ScriptError:
            second = None
        if second is not None and second.line == call.line and _open_branches(second) < _open_branches(call):
            call = second
    return _with_warnings(call, warnings + call.warnings)


def _open_branches(call: TrainerCall) -> int:
    """How many trainer words come from a variable set in branches the reader left undecided."""
    return sum(1 for w in call.warnings if w.startswith("variable $") and "inside a block that is not evaluated" in w)


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


@dataclass
class Block:
    kind: str  # "if" | "loop" | "case" | "subshell" | "group" | "call" (a function body being run)
    line: int
    undo: list[tuple[str, Var | None, int]] = field(default_factory=list)
    expect_pattern: bool = False
    # if/case branches: "unknown" (condition not known: assignments undone at the end of the
    # branch), "certain" (known to run: assignments kept), "skip" (known not to run: not read)
    branch: str = "unknown"
    cond: bool | None = None  # the pending if/elif condition, applied at `then`
    taken: bool = False  # an earlier branch certainly ran
    uncertain: bool = False  # an earlier branch may have run
    subject: str | None = None  # a case's word, when known


@dataclass
class Command:
    words: list[Word]
    line: int
    end: Tok  # the token that ended it


class Script:
    def __init__(self, text: str, environ: dict[str, str], line_offset: int, pick: int | None = None, unset_unknown: bool = False) -> None:
        self.text = text
        self.unset_unknown = unset_unknown  # conditions read a variable the script never sets as unset
        self.pick = pick
        self.trainer_calls: list[tuple[TrainerCall, tuple[int, ...]]] = []  # each run of the trainer, with its call sites
        self.environ = environ
        self.offset = line_offset
        self.vars: dict[str, Var] = {}
        self.conditional: dict[str, list[int]] = {}
        self.blocks: list[Block] = []
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

    def lookup(self, name: str) -> tuple[str, str | list[str] | None, Var | None]:
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
        return join(value) if state == "set" and value is not None else None

    def assign(self, name: str, var: Var, local: bool = False) -> None:
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

    def _undo(self, block: Block) -> None:
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
        lexer = Lexer(self.text)
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
        return self._chosen()

    def _record(self, call: TrainerCall) -> TrainerCall:
        """Keep one run of the trainer (the first is `found`), with the lines of the function calls that ran it."""
        self.trainer_calls.append((call, tuple(line + self.offset for _, line in self.calls)))
        if self.found is None:
            self.found = call
        return call

    def _chosen(self) -> TrainerCall:
        """The trainer call to import: `pick`, or the only one, or the first run of one command."""
        calls = self.trainer_calls
        n = len(calls)
        where = _lines([_site(call, sites) for call, sites in calls])
        if self.pick is not None and not 1 <= self.pick <= n:
            raise ScriptError(f"--call {self.pick}: the script runs the trainer {_times(n)} ({where}); pick 1..{n}")
        if n == 1:
            return calls[0][0]
        same = len({call.line for call, _ in calls}) == 1
        if self.pick is None and not same:
            lines = _listing([f"line {call.line}" for call, _ in calls])
            raise ScriptError(f"{_count(n)} trainer calls: {lines}; keep one (or split the script), or import one with --call N (1..{n})")
        index = 0 if self.pick is None else self.pick - 1
        call, sites = calls[index]
        if same:  # one command run by a function called more than once: name the calls, not the body
            note = f"the trainer command at line {call.line} runs {_times(n)}, called at {where}"
        else:
            note = f"the script runs the trainer {_times(n)}, at {where}"
        rest = [str(i + 1) for i in range(n) if i != index]
        other = f"--call {rest[0]} imports the other" if n == 2 else f"--call N ({', '.join(rest)}) imports another"
        note += f"; imported call {index + 1} (line {_site(call, sites)}); {other}"
        return _with_warnings(call, [note] + call.warnings)

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
        """Run the command at token k; the index of the token after it."""
        toks = self.toks
        tok = toks[k]
        block = self.blocks[-1] if self.blocks else None
        if block is not None and block.kind == "case" and block.expect_pattern and tok.kind != "eof":
            return self._case_patterns(block, k)
        if tok.kind == "newline":
            return k + 1
        if tok.kind == "op":
            self._operator(tok)
            return k + 1
        words, k = self._words(k)
        end = toks[k]
        defined = self._definition(words, k, tok.line)
        if defined is not None:
            return defined
        self._command(Command(words, tok.line, end), k)
        if end.kind == "op" and end.value in (";;", ";&", ";;&", "(", ")"):
            return k
        return k + 1 if end.kind != "eof" else k

    def _case_patterns(self, block: Block, k: int) -> int:
        """A `case` waiting for its next `pattern)`: read it and open that branch."""
        toks = self.toks
        tok = toks[k]
        if tok.kind == "newline" or (tok.kind == "op" and tok.value in (";", "&")):
            return k + 1
        if tok.kind == "word" and tok.word is not None and tok.word.literal() == "esac":
            self._close(("case",))
            return k + 1
        patterns: list[Word] = []
        while toks[k].kind != "eof" and not (toks[k].kind == "op" and toks[k].value == ")"):
            pattern = toks[k].word
            if toks[k].kind == "word" and pattern is not None:
                patterns.append(pattern)
            k += 1
        block.expect_pattern = False
        self._case_branch(block, patterns)
        return k + 1 if toks[k].kind != "eof" else k

    def _operator(self, tok: Tok) -> None:
        if tok.value == "(":
            self.blocks.append(Block("subshell", tok.line))
        elif tok.value == ")":
            self._close(("subshell",))
        elif tok.value in (";;", ";&", ";;&"):
            for b in reversed(self.blocks):
                if b.kind == "case":
                    self._undo(b)
                    b.expect_pattern = True
                    b.branch = "unknown"
                    break

    def _words(self, k: int) -> tuple[list[Word], int]:
        """The words of the simple command at k (redirections dropped) and the index of its end."""
        toks = self.toks
        words: list[Word] = []
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
        return words, k

    def _definition(self, words: list[Word], k: int, line: int) -> int | None:
        """A function definition ending at token k: recorded, and the index after its body; else None."""
        toks = self.toks
        end = toks[k]
        lits = [w.literal() or "" for w in words]
        if lits[:1] == ["function"] and len(lits) in (2, 3) and NAME.fullmatch(lits[1]):
            if len(lits) == 3 and lits[2] == "{":  # function name {
                brace = max(j for j in range(k) if toks[j].kind == "word" and toks[j].word is words[2])
                return self._define(lits[1], brace, line)
            if len(lits) == 2:
                if end.kind == "op" and end.value == "(" and toks[k + 1].value == ")":
                    k += 1
                return self._define(lits[1], k + 1, line)  # function name [()] { ... }
        if len(lits) == 1 and NAME.fullmatch(lits[0]) and _is_op(end, "(") and _is_op(toks[k + 1], ")"):
            return self._define(lits[0], k + 2, line)  # name() { ... }
        return None

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
        self.blocks.append(Block("call", line))
        depth = len(self.blocks)
        k = start
        while k < end:
            k = self._step(k)
        while len(self.blocks) > depth:
            self._undo(self.blocks.pop())
        self._undo(self.blocks.pop())
        self.positional.pop()
        self.calls.pop()

    def _command(self, cmd: Command, end_index: int) -> None:
        words = self._keywords(list(cmd.words), cmd)
        if not words:
            return
        if self.skipping():
            if any(TRAINER_MODULE in w.raw for w in words):
                self.skipped_calls.append(cmd.line)
            return
        assigns: list[Word] = []
        while words and _assignment(words[0]) is not None:
            assigns.append(words.pop(0))
        if not words:
            for w in assigns:
                self._assign_word(w)
            return
        if not self._builtin(cmd, words):
            self._maybe_trainer(cmd, assigns, words, end_index)

    # -- reserved words: each handler returns True when it takes the rest of the command

    def _keywords(self, words: list[Word], cmd: Command) -> list[Word]:
        """Apply the reserved words that lead the command; the words after them ([] if one took them)."""
        while words:
            head = words[0].literal()
            if head not in RESERVED:
                break
            words = words[1:]
            if _KEYWORDS[head](self, head, words, cmd):
                return []
        return words

    def _kw_if(self, head: str, words: list[Word], cmd: Command) -> bool:
        if head == "if":
            skipping = self.skipping()
            self.blocks.append(Block("if", cmd.line))
        else:
            self._end_branch("if")
            skipping = self.skipping()
        block = self._innermost("if")
        if block is not None and not skipping and not block.taken:
            block.cond = self._condition(words, cmd, head)
        return True

    def _kw_then(self, head: str, words: list[Word], cmd: Command) -> bool:
        block = self._innermost("if")
        if block is not None:
            self._start_branch(block, block.cond)
        return False

    def _kw_else(self, head: str, words: list[Word], cmd: Command) -> bool:
        block = self._innermost("if")
        if block is not None:
            self._end_branch("if")
            self._start_branch(block, True)
        return False

    def _kw_open(self, head: str, words: list[Word], cmd: Command) -> bool:
        """while/until (a loop) and `{` (a group)."""
        self.blocks.append(Block("group" if head == "{" else "loop", cmd.line))
        return False

    def _kw_for(self, head: str, words: list[Word], cmd: Command) -> bool:
        self.blocks.append(Block("loop", cmd.line))
        name = words[0].literal() if words else None
        if name and NAME.fullmatch(name):
            self.assign(name, Var(None, words[0].line, "", opaque=True, why="as a loop variable"))
        return True

    def _kw_case(self, head: str, words: list[Word], cmd: Command) -> bool:
        subject: str | None = None
        if not self.skipping() and words:
            subject = self._known(words[:1], cmd.line, "case")
        self.blocks.append(Block("case", cmd.line, expect_pattern=True, subject=subject))
        return True

    def _kw_close(self, head: str, words: list[Word], cmd: Command) -> bool:
        """fi, done, esac, `}`: the end of the innermost block of that kind."""
        self._close(({"fi": "if", "done": "loop", "esac": "case", "}": "group"}[head],))
        return False

    def _kw_skip(self, head: str, words: list[Word], cmd: Command) -> bool:
        """do, !, time: nothing to apply; `function` (its definition is read by _definition): the rest."""
        return head == "function"

    # -- builtins that change what the script knows

    def _builtin(self, cmd: Command, words: list[Word]) -> bool:
        """Apply a builtin (or run a function the script defines); False for any other program."""
        program = words[0].literal()
        if program in ("export", "declare", "typeset", "local", "readonly"):
            local = program in ("declare", "typeset", "local") and bool(self.calls)
            for w in words[1:]:
                if _assignment(w) is not None:
                    self._assign_word(w, local=local)
        elif program is not None and program in self.functions:
            args: list[str] = []
            for w in words[1:]:
                args.extend(Expander(self, []).fields(w))
            self._call(program, args, cmd.line)
        elif program in ("unset", "read"):
            why = "by `read`" if program == "read" else ""
            for w in words[1:]:
                text = w.literal()
                if text and NAME.fullmatch(text):
                    self.assign(text, Var(None, w.line, "", opaque=bool(why), why=why))
        elif program in ("source", "."):
            self.sourced.append((cmd.line, words[1].raw if len(words) > 1 else ""))
        else:
            return False
        return True

    # -- if / case branches

    def _innermost(self, kind: str) -> Block | None:
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

    def _start_branch(self, block: Block, cond: bool | None) -> None:
        if block.taken or cond is False:
            block.branch = "skip"
        elif cond is None or block.uncertain:
            block.branch = "unknown"
            block.uncertain = True
        else:
            block.branch = "certain"
            block.taken = True

    def _known(self, words: list[Word], line: int, what: str) -> str | None:
        """The words' value when nothing in it is unknown (defaults count as known, with a note)."""
        warnings: list[str] = []
        ex = Expander(self, warnings)
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

    def _condition(self, words: list[Word], cmd: Command, head: str) -> bool | None:
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
        ex = Expander(self, warnings, unset_unknown=self.unset_unknown)
        argv: list[str] = []
        for w in words:
            argv.extend(ex.fields(w))
        if ex.kept_literal:
            return None
        result = _test(argv)
        if result is None:
            return None
        for name in ex.read_unset:
            self.decisions.append(
                f"line {cmd.line + self.offset}: the `{head}` reads ${name} as unset (empty): the script never sets it and "
                f"no --var gives it; pass --var {name}=... if the script's caller sets it"
            )
        if warnings:
            self.decisions.append(
                f"line {cmd.line + self.offset}: the `{head}` is decided by values the script does not set itself ({'; '.join(warnings)})"
            )
        return not result if negate else result

    def _case_branch(self, block: Block, patterns: list[Word]) -> None:
        if any(b.branch == "skip" for b in self.blocks if b is not block):
            return  # inside a branch that does not run
        if block.taken:
            block.branch = "skip"
            return
        if block.subject is None:
            block.branch = "unknown"
            block.uncertain = True
            return
        ex = Expander(self, [])
        values = [ex.string(p.parts) for p in patterns]
        if ex.kept_literal:
            block.branch = "unknown"
            block.uncertain = True
            return
        if any(glob(v).fullmatch(block.subject) for v in values):
            self._start_branch(block, True)
        else:
            block.branch = "skip"

    def _assign_word(self, word: Word, local: bool = False) -> None:
        parsed = _assignment(word)
        assert parsed is not None
        name, index, append, value_parts, raw = parsed
        warnings: list[str] = []
        ex = Expander(self, warnings)
        if word.array is not None:
            self._assign_array(name, word, append, raw, ex, local)
            return
        sole = [p for p in value_parts if not (isinstance(p, Lit) and p.text == "")]
        if len(sole) == 1 and isinstance(sole[0], CmdSub) and not is_comment_only(sole[0].body):
            why = f"by command substitution {clip(sole[0].raw)}"
            self.assign(name, Var(None, word.line, raw, opaque=True, why=why), local=local)
            return
        value = ex.string(value_parts)
        if len(sole) == 1 and isinstance(sole[0], Arith) and ex.kept_literal:
            self.assign(name, Var(None, word.line, raw, opaque=True, why=f"by arithmetic {clip(sole[0].raw)}"), local=local)
            return
        if index is not None:
            self._assign_element(name, index, value, append, word, raw, ex, local)
            return
        if append:
            state, old, _v = self.lookup(name)
            if state == "set" and old is not None:
                value = join(old) + value
        self.assign(name, Var(value, word.line, raw, warnings=warnings, nosplit=ex.kept_literal), local=local)

    def _assign_array(self, name: str, word: Word, append: bool, raw: str, ex: Expander, local: bool) -> None:
        """NAME=( ... ) and NAME+=( ... )."""
        items: list[str] = []
        for item in word.array or []:
            items.extend(ex.fields(item))
        if append:
            items = self._items(name) + items
        self.assign(name, Var(items, word.line, raw, warnings=ex.warnings, nosplit=ex.kept_literal), local=local)

    def _assign_element(self, name: str, index: str, value: str, append: bool, word: Word, raw: str, ex: Expander, local: bool) -> None:
        """NAME[i]=... and NAME[i]+=..."""
        items = self._items(name)
        try:
            n = ex.arith(index)
        except Unknown:
            self.assign(name, Var(None, word.line, raw, opaque=True, why="by an element assignment"), local=local)
            return
        while len(items) <= n:
            items.append("")
        items[n] = items[n] + value if append else value
        self.assign(name, Var(items, word.line, raw, warnings=ex.warnings), local=local)

    def _items(self, name: str) -> list[str]:
        """The variable's value as an array (a string is one element; unset is none)."""
        _state, old, _v = self.lookup(name)
        return list(old) if isinstance(old, list) else ([old] if isinstance(old, str) else [])

    # -- the trainer

    def _maybe_trainer(self, cmd: Command, assigns: list[Word], words: list[Word], end_index: int) -> None:
        mentions = any(TRAINER_MODULE in w.raw or "train_ppo_ray" in w.raw for w in words + assigns)
        argv: list[str] = []
        spans: list[tuple[int, int, list[str]]] = []  # argv[start:end] came from one word, with its warnings
        for w in words:
            word_warnings: list[str] = []
            items = Expander(self, word_warnings).fields(w)
            spans.append((len(argv), len(argv) + len(items), word_warnings))
            argv.extend(items)
        at = trainer.trainer_index(argv)
        if at is None:
            inner = self._embedded(argv, cmd, spans)
            if inner is None and mentions:
                self.mentions.append(cmd.line)
            return
        env_prefix = [a.raw for a in assigns]
        self._record(self._build(argv, at, cmd, env_prefix, spans, end_index))

    def _embedded(self, argv: list[str], cmd: Command, spans: list[tuple[int, int, list[str]]]) -> TrainerCall | None:
        """A trainer call inside `bash -c '...'` (e.g. under srun), or a one-string Ray entrypoint."""
        for k, arg in enumerate(argv):
            if TRAINER_MODULE not in arg or not any(ch in arg for ch in " \t\n"):
                continue
            before = argv[:k]
            via_shell = len(before) >= 2 and _shell_c(before[-2], before[-1])
            via_ray = "--" in before and trainer.ray_index(before) is not None and before[-1] == "--"
            if not (via_shell or via_ray):
                continue
            environ = dict(self.environ)
            for name in self.vars:
                value = self.lookup_plain(name)
                if value is not None:
                    environ[name] = value
            inner = Script(arg, environ, line_offset=cmd.line - 1 + self.offset, unset_unknown=self.unset_unknown)
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
            return self._record(
                _with_warnings(
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
            )
        return None

    def _variables(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, var in self.vars.items():
            if var.opaque:
                out[name] = var.raw or f"<set {var.why}>"
            elif var.value is not None:
                out[name] = join(var.value)
        return out

    def _build(
        self,
        argv: list[str],
        at: int,
        cmd: Command,
        env_prefix: list[str],
        spans: list[tuple[int, int, list[str]]],
        end_index: int,
    ) -> TrainerCall:
        line = cmd.line + self.offset
        notes: list[str] = []
        launcher, launcher_at = trainer.launcher(argv, at, notes)
        ray_at = trainer.ray_index(argv[:launcher_at])
        warnings = _warnings_from(spans, launcher_at if ray_at is None else ray_at, len(argv))
        ray_address: str | None = None
        runtime_env: dict[str, Any] | None = None
        if ray_at is not None:
            launcher = "ray job submit"
            ray_address, runtime_env = trainer.ray_options(argv, ray_at, launcher_at, self.lookup_plain("RAY_ADDRESS"), notes)
            dashdash = argv.index("--", ray_at) if "--" in argv[ray_at:launcher_at] else None
            entry_env = [a for a in argv[(dashdash or launcher_at) + 1 : launcher_at] if ASSIGN.match(a)]
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

    def _continuation_traps(self, cmd: Command, end_index: int) -> list[str]:
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
                    f"'{clip(nxt[1], 50)}' runs as a separate command, so those arguments do not reach the trainer"
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


def _site(call: TrainerCall, sites: tuple[int, ...]) -> str:
    """Where one run of the trainer came from: the line of the function call(s) that ran it, else of the command."""
    return " -> ".join(str(n) for n in sites) if sites else str(call.line)


def _lines(numbers: list[str]) -> str:
    return ("line " if len(numbers) == 1 else "lines ") + _listing(numbers)


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _count(n: int) -> str:
    return {2: "two", 3: "three"}.get(n, str(n))


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def _assignment(word: Word) -> tuple[str, str | None, bool, list[Part], str] | None:
    """(name, index, append, value parts, raw value) when `word` is NAME=..., NAME+=..., NAME[i]=..."""
    if not word.parts:
        return None
    first = word.parts[0]
    if not isinstance(first, Lit) or first.quoted:
        return None
    m = ASSIGN.match(first.text)
    if m is None:
        return None
    rest = first.text[m.end() :]
    value_parts: list[Part] = ([Lit(rest, False)] if rest else []) + list(word.parts[1:])
    raw = word.raw.split("=", 1)[1] if "=" in word.raw else ""
    index = m.group(2)[1:-1] if m.group(2) else None
    return m.group(1), index, m.group(3) == "+", value_parts, raw


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
    result = _test_expression(args)
    if result is None:
        return None
    return not result if negate else result


_INT_TESTS = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__, "-ge": int.__ge__}


def _test_expression(args: list[str]) -> bool | None:
    """The operands of `test`: a string, -n/-z, or a binary comparison; None for anything else."""
    if not args:
        return False
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2 and args[0] in ("-n", "-z"):
        return (args[1] != "") == (args[0] == "-n")
    if len(args) != 3:
        return None
    a, op, b = args
    if op in ("=", "=="):
        return a == b
    if op == "!=":
        return a != b
    if op in _INT_TESTS and _INTEGER.fullmatch(a) and _INTEGER.fullmatch(b):
        return bool(_INT_TESTS[op](int(a), int(b)))
    return None


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


def _is_op(tok: Tok, value: str) -> bool:
    return tok.kind == "op" and tok.value == value


_KEYWORDS = {
    "if": Script._kw_if, "elif": Script._kw_if, "then": Script._kw_then, "else": Script._kw_else,
    "fi": Script._kw_close, "done": Script._kw_close, "esac": Script._kw_close, "}": Script._kw_close,
    "while": Script._kw_open, "until": Script._kw_open, "{": Script._kw_open,
    "for": Script._kw_for, "select": Script._kw_for, "case": Script._kw_case,
    "do": Script._kw_skip, "!": Script._kw_skip, "time": Script._kw_skip, "function": Script._kw_skip,
}  # fmt: skip


def _shell_c(program: str, option: str) -> bool:
    """`bash -c` (or -lc, -xc ...): the next argument is a script."""
    return option.startswith("-") and "c" in option and program.rsplit("/", 1)[-1] in trainer.SHELLS
