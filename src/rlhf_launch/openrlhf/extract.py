"""Read the flag definitions of OpenRLHF's `train_ppo_ray.py` with `ast`, without importing it.

Every trainer flag is a `parser.add_argument(...)` call in that one file, some inside a
`for prefix in ("actor", "critic"):` loop (from v0.10.2) whose f-string names are expanded
here. Values that are not literals (e.g. a default built from `datetime.now()`) are kept as
their source text under `{"expr": ...}`.
"""

from __future__ import annotations

import ast
from typing import Any

_TYPES = {"int", "float", "str"}


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
                parts.append(str(_value(piece.value, env, source)))
        return "".join(parts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        inner = _value(node.args[0], env, source)
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
    if flag["action"] == "store_true":
        flag.setdefault("default", False)
    elif flag["action"] == "store_false":
        flag.setdefault("default", True)
    else:
        flag.setdefault("default", None)
    return flag


def _walk(body: list[ast.stmt], env: dict[str, Any], source: str, out: list[dict[str, Any]]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
            try:
                values = ast.literal_eval(stmt.iter)
            except ValueError:
                values = None
            if isinstance(values, (tuple, list)):
                for value in values:
                    _walk(stmt.body, {**env, stmt.target.id: value}, source, out)
                continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            func = stmt.value.func
            if isinstance(func, ast.Attribute) and func.attr == "add_argument":
                flag = _flag_from_call(stmt.value, env, source)
                if flag is not None:
                    out.append(flag)
                continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _walk(inner, env, source, out)


def extract_flags(source: str) -> list[dict[str, Any]]:
    """Return the trainer's flags in definition order: name, dest, type, action, default, choices, nargs."""
    tree = ast.parse(source)
    flags: list[dict[str, Any]] = []
    _walk(tree.body, {}, source, flags)
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
