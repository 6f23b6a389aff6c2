"""Read the flag definitions of OpenRLHF's `train_ppo_ray.py` with `ast`, without importing it.

Every stock trainer flag is a `parser.add_argument(...)` call in that one file, some inside a
`for prefix in ("actor", "critic"):` loop (from v0.10.2) whose f-string names are expanded
here. Values that are not literals (e.g. a default built from `datetime.now()`) are kept as
their source text under `{"expr": ...}`. An `add_argument` call counts on any object (a parser,
an argument group) whatever its name.

A fork may build its parser elsewhere in its checkout (EIT-EAST-Lab/C3: `parser = build_parser()`
imported from `openrlhf/cli/train_ppo_ray_tooling.py`, whose `_add_*(p)` helpers add the flags).
Given `load` (a module's dotted name -> its source in the same checkout, or None), a call that
makes or extends a parser (its result is assigned to a name used as a parser, or a parser is
passed to it) of a function imported from such a module is followed into that function, and
from there into the functions it calls the same way. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_TYPES = {"int", "float", "str"}
BOOLEAN_OPTIONAL = "boolean_optional"  # `action=argparse.BooleanOptionalAction`: --x sets True, --no-x False


class ExtractError(ValueError):
    """The source does not look like an OpenRLHF trainer entry point."""


def _value(node: ast.AST, env: dict[str, Any], source: str) -> Any:
    """Evaluate a keyword value: literals, loop variables, f-strings and simple calls."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in _TYPES:
            return node.id
    if isinstance(node, ast.JoinedStr):
        parts = []
        for piece in node.values:
            if isinstance(piece, ast.Constant):
                parts.append(str(piece.value))
            elif isinstance(piece, ast.FormattedValue):
                inner = _value(piece.value, env, source)
                if isinstance(inner, dict):  # a name the reader cannot know: the string is unknown too
                    return {"expr": ast.get_source_segment(source, node)}
                parts.append(str(inner))
        return "".join(parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        inner = _value(node.args[0], env, source)
        if node.func.id in ("list", "tuple") and isinstance(inner, (list, tuple)):
            return list(inner)  # choices=list(_MODES), a module constant
        if node.func.id == "int" and isinstance(inner, (int, float)):
            return int(inner)
        if node.func.id == "float" and isinstance(inner, (int, float, str)):
            number = float(inner)
            return number if number not in (float("inf"), float("-inf")) else {"expr": ast.get_source_segment(source, node)}
    if isinstance(node, ast.IfExp):
        test = _value(node.test, env, source)
        if isinstance(test, bool):
            return _value(node.body if test else node.orelse, env, source)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        left, right = _value(node.left, env, source), _value(node.comparators[0], env, source)
        if not isinstance(left, dict) and not isinstance(right, dict):
            return (left == right) if isinstance(node.ops[0], ast.Eq) else (left != right)
    return {"expr": ast.get_source_segment(source, node)}


def _flag_from_call(call: ast.Call, env: dict[str, Any], source: str) -> dict[str, Any] | None:
    names = [_value(arg, env, source) for arg in call.args]
    long_names = [n for n in names if isinstance(n, str) and n.startswith("--")]
    if not long_names:
        return None
    name = long_names[0][2:]
    flag: dict[str, Any] = {"name": name, "dest": name.replace("-", "_")}
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg in ("help", "metavar"):
            continue
        flag[keyword.arg] = _value(keyword.value, env, source)
    flag.setdefault("action", "store")
    if isinstance(flag["action"], dict) and str(flag["action"]["expr"]).split(".")[-1] == "BooleanOptionalAction":
        flag["action"] = BOOLEAN_OPTIONAL  # argparse's --x / --no-x pair
    if flag["action"] == "store_true":
        flag.setdefault("default", False)
    elif flag["action"] == "store_false":
        flag.setdefault("default", True)
    else:
        flag.setdefault("default", None)
    return flag


Loader = Callable[[str], str | None]
TRAINER_MODULE = "openrlhf.cli.train_ppo_ray"
_PARSER_METHODS = {"add_argument", "add_argument_group", "add_mutually_exclusive_group", "parse_args", "parse_known_args", "set_defaults"}
_MAX_MODULES = 32  # a bound on how far a fork's parser is followed through its checkout


@dataclass
class _Module:
    name: str
    source: str
    tree: ast.Module
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None for the module itself)
    parsers: set[str]  # names used as a parser or an argument group (`X.add_argument`, `X.parse_args`...)
    constants: dict[str, Any]  # top-level `NAME = <literal>`: what a flag's default or choices may name


def _absolute(module: str, level: int, name: str | None) -> str:
    """`from .x import y` in `module` -> the dotted name of `.x` (a module's package is its parent)."""
    if level == 0:
        return name or ""
    parts = module.split(".")[:-level]
    return ".".join([*parts, name] if name else parts)


def _module(name: str, source: str) -> _Module:
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    imports: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(name, node.level, node.module)
            for alias in node.names:
                imports[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None)
    parsers = {
        n.func.value.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in _PARSER_METHODS
        and isinstance(n.func.value, ast.Name)
    }
    constants: dict[str, Any] = {}
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else getattr(stmt, "target", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name) and stmt.value is not None:
            try:
                constants[target.id] = ast.literal_eval(stmt.value)
            except (ValueError, SyntaxError, TypeError):
                continue
    return _Module(name, source, tree, functions, imports, parsers, constants)


@dataclass
class _Reader:
    load: Loader | None
    out: list[dict[str, Any]] = field(default_factory=list)
    modules: dict[str, _Module | None] = field(default_factory=dict)
    seen: set[tuple[str, str]] = field(default_factory=set)
    unresolved: list[str] = field(default_factory=list)  # add_argument calls whose flag name cannot be evaluated

    def module(self, name: str) -> _Module | None:
        if name not in self.modules:
            if self.load is None or len(self.modules) >= _MAX_MODULES:
                return None
            text = self.load(name)
            try:
                self.modules[name] = _module(name, text) if text is not None else None
            except SyntaxError as exc:
                raise ExtractError(f"{name} (which builds the trainer's parser) does not parse: {exc}") from None
        return self.modules[name]

    def walk(self, body: list[ast.stmt], env: dict[str, Any], mod: _Module, local: bool) -> None:
        """Collect add_argument calls in `body`; follow parser-building calls (to `mod`'s own
        functions too when `local`: the trainer's own are walked with the whole file)."""
        for stmt in body:
            if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                values = _value(stmt.iter, env, mod.source)  # a literal, or a module constant naming one
                if isinstance(values, (tuple, list)):
                    for value in values:
                        self.walk(stmt.body, {**env, stmt.target.id: value}, mod, local)
                    continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                func = stmt.value.func
                if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                    flag = _flag_from_call(stmt.value, env, mod.source)
                    if flag is not None:
                        self.out.append(flag)
                    elif any(isinstance(_value(a, env, mod.source), dict) for a in stmt.value.args):
                        self.unresolved.append(ast.get_source_segment(mod.source, stmt.value) or "add_argument(...)")
                    continue
            call = self._parser_call(stmt, mod, local)
            if call is not None:
                self.follow(call.func, mod, local)
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self.walk(inner, env, mod, local)

    @staticmethod
    def _parser_call(stmt: ast.stmt, mod: _Module, local: bool) -> ast.Call | None:
        """A call that makes a parser (`parser = f()`) or is handed one (`f(parser)`); in a
        followed function, also the call it returns (`def build_parser(): return _make()`)."""
        value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) else None
        if not isinstance(value, ast.Call):
            return None
        made = isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(t, ast.Name) and t.id in mod.parsers for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        )
        given = any(isinstance(a, ast.Name) and a.id in mod.parsers for a in [*value.args, *(k.value for k in value.keywords)])
        return value if made or given or (local and isinstance(stmt, ast.Return)) else None

    def follow(self, func: ast.expr, mod: _Module, local: bool) -> None:
        if isinstance(func, ast.Name):
            if func.id in mod.functions and local:
                self.function(mod, func.id)
            elif func.id in mod.imports:
                self.imported(*mod.imports[func.id])
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in mod.imports:
            base, attr = mod.imports[func.value.id]
            self.imported(f"{base}.{attr}" if attr else base, func.attr)

    def imported(self, module: str, name: str | None) -> None:
        if name is None:
            return
        target = self.module(module)
        if target is not None and name in target.functions:
            self.function(target, name)
        elif target is not None and name in target.imports:  # re-exported from another module
            self.imported(*target.imports[name])

    def function(self, mod: _Module, name: str) -> None:
        if (mod.name, name) in self.seen:
            return
        self.seen.add((mod.name, name))
        self.walk(mod.functions[name].body, dict(mod.constants), mod, local=True)


def extract_flags(
    source: str, load: Loader | None = None, module: str = TRAINER_MODULE, unresolved: list[str] | None = None
) -> list[dict[str, Any]]:
    """Return the trainer's flags in definition order: name, dest, type, action, default, choices, nargs.
    `load` gives the source of other modules of the same checkout, to follow a parser built there.
    `add_argument` calls whose flag name the reader cannot evaluate (a loop over a computed list)
    are left out and, when `unresolved` is given, appended to it as source text."""
    reader = _Reader(load)
    mod = _module(module, source)
    reader.walk(mod.tree.body, dict(mod.constants), mod, local=False)
    if unresolved is not None:
        unresolved.extend(reader.unresolved)
    flags = reader.out
    if not flags:
        raise ExtractError("no parser.add_argument(...) calls found")
    seen: set[str] = set()
    for flag in flags:
        if flag["name"] in seen:
            raise ExtractError(f"flag --{flag['name']} is defined twice")
        seen.add(flag["name"])
    return flags


def _mentions(node: ast.AST, word: str) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr == word) or (isinstance(n, ast.Name) and n.id == word) for n in ast.walk(node))


def extract_group_estimators(source: str) -> list[str]:
    """Advantage estimators the trainer refuses with n_samples_per_prompt == 1.

    Reads the startup check `if <estimator> in [...]: assert <n_samples_per_prompt> > 1`.
    """
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            continue
        test = node.test
        if len(test.ops) != 1 or not isinstance(test.ops[0], ast.In):
            continue
        if not (_mentions(test.left, "advantage_estimator") or _mentions(test.left, "estimator")):
            continue
        if not any(isinstance(s, ast.Assert) and _mentions(s.test, "n_samples_per_prompt") for s in node.body):
            continue
        try:
            values = ast.literal_eval(test.comparators[0])
        except ValueError:
            continue
        return [str(v) for v in values]
    return []
