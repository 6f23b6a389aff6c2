"""Bash arithmetic (`$((...))`, `((...))`, array indexes, substring offsets) over integers.

Operators: + - * / % ** << >> & | ^ ~ ! comparisons && || ?: and parentheses; numbers in
decimal, octal (leading 0) and hex (0x). Variables are read through a callback, so this module
knows nothing of the script. Assignments (`=`, `++`, `--`) are not evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+|\d+|[A-Za-z_][A-Za-z0-9_]*|\*\*|<<|>>|<=|>=|==|!=|&&|\|\||\S)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
# Binary operators by precedence, lowest first.
_BINARY = [
    ["||"], ["&&"], ["|"], ["^"], ["&"], ["==", "!="], ["<", ">", "<=", ">="],
    ["<<", ">>"], ["+", "-"], ["*", "/", "%"],
]  # fmt: skip


class Unknown(Exception):
    """The value is not known without running the script (the message says why)."""


def evaluate(text: str, variable: Callable[[str], int]) -> int:
    """The value of the arithmetic expression `text` (already expanded); `variable(name)` gives
    a variable's integer value or raises Unknown."""
    return _Parser(_TOKEN.findall(text), variable).run()


class _Parser:
    def __init__(self, tokens: list[str], variable: Callable[[str], int]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.variable = variable

    def run(self) -> int:
        if not self.tokens:
            return 0
        result = self.ternary()
        if self.pos != len(self.tokens):
            raise Unknown("unsupported syntax")
        return result

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self) -> str:
        self.pos += 1
        return self.tokens[self.pos - 1]

    def ternary(self) -> int:
        cond = self.level(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                raise Unknown("bad ?: expression")
            b = self.ternary()
            return a if cond else b
        return cond

    def level(self, n: int) -> int:
        if n == len(_BINARY):
            return self.power()
        left = self.level(n + 1)
        while self.peek() in _BINARY[n]:
            op = self.take()
            right = self.level(n + 1)
            left = binop(op, left, right)
        return left

    def power(self) -> int:
        base = self.unary()
        if self.peek() == "**":
            self.take()
            exp = self.power()
            if exp < 0:
                raise Unknown("negative exponent")
            return int(base**exp)
        return base

    def unary(self) -> int:
        t = self.peek()
        if t in ("+", "-", "!", "~"):
            self.take()
            v = self.unary()
            return {"+": v, "-": -v, "!": int(not v), "~": ~v}[t]
        return self.atom()

    def atom(self) -> int:
        t = self.take() if self.pos < len(self.tokens) else ""
        if t == "(":
            v = self.ternary()
            if self.take() != ")":
                raise Unknown("unbalanced parentheses")
            return v
        if _HEX.fullmatch(t):
            return int(t, 16)
        if t.isdigit():
            return int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)
        if _NAME.fullmatch(t):
            return self.name(t)
        raise Unknown("unsupported syntax")

    def name(self, t: str) -> int:
        nxt = self.peek()
        if nxt == "=" or (nxt in ("+", "-") and self.tokens[self.pos + 1 : self.pos + 2] == [nxt]):
            raise Unknown("assignment")
        return self.variable(t)


def binop(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise Unknown("division by zero")
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
