"""The folders are the architecture: the core imports nothing from the edges, the packages
import each other in one direction only, and every CLI verb is one registered module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "rlhf_launch"
CORE = ("core", "openrlhf", "diagnose", "importer")  # pure: config, plan, rules, memory, release knowledge, command; log diagnosis; import
VERB_PACKAGES = ("diagnose", "importer")  # one-verb packages over the core: the core imports none of them
EDGES = ("cluster", "runs", "cli")
SHARED = ("errors", "util")  # everyone may use these; they import nothing of the launcher's


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(("rlhf_launch", *parts)).removesuffix(".__init__")] = path
    return out


def imports_of(path: Path) -> set[str]:
    """Every rlhf_launch module a file imports, at any depth of the file (lazy imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("rlhf_launch"):
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("rlhf_launch"))
    known = modules()
    return {name for name in found if name in known}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rlhf_launch"


def test_the_core_imports_nothing_from_the_edges():
    offenders = {}
    for module, path in modules().items():
        if package_of(module) in CORE:
            bad = sorted(m for m in imports_of(path) if package_of(m) in EDGES)
            if bad:
                offenders[module] = bad
    assert offenders == {}


def test_the_core_imports_no_verb_package():
    offenders = {}
    for module, path in modules().items():
        if package_of(module) in ("core", "openrlhf"):
            bad = sorted(m for m in imports_of(path) if package_of(m) in VERB_PACKAGES)
            if bad:
                offenders[module] = bad
    assert offenders == {}


def test_the_core_never_imports_ray_or_runs_processes():
    for module, path in modules().items():
        if package_of(module) not in CORE:
            continue
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {n for n in names if n.split(".")[0] in ("ray", "subprocess", "socket", "urllib")}, module


def test_shared_modules_import_nothing_of_the_launcher():
    for module, path in modules().items():
        if package_of(module) in SHARED:
            assert {package_of(m) for m in imports_of(path)} <= {package_of(module)}, module


def test_packages_import_each_other_in_one_direction():
    """cli -> runs -> cluster -> core (and openrlhf): no package imports one above it."""
    graph: dict[str, set[str]] = {}
    for module, path in modules().items():
        source = package_of(module)
        graph.setdefault(source, set()).update(package_of(m) for m in imports_of(path) if package_of(m) != source)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})) for nxt in graph.get(start, set()))

    cycles = sorted(p for p in graph if reaches(p, p, {p}))
    assert cycles == [], {p: sorted(graph[p]) for p in cycles}
    assert "cli" not in set().union(*(graph[p] for p in graph if p not in ("cli", "__main__")))


def test_every_verb_is_one_registered_module_and_no_verb_imports_another():
    from rlhf_launch.cli.app import VERBS

    helpers = {"__init__", "app", "examples", "options", "output", "report"}
    verb_files = {p.stem for p in (PACKAGE / "cli").glob("*.py")} - helpers
    registered = {verb.module for verb in VERBS}
    assert registered == verb_files
    for stem in verb_files:
        imported = imports_of(PACKAGE / "cli" / f"{stem}.py")
        assert not {m for m in imported if m.startswith("rlhf_launch.cli.") and m.rsplit(".", 1)[1] in verb_files}, stem


@pytest.mark.parametrize("name", ["ROLES", "kv_bytes_per_token", "takes_value", "terminal"])
def test_dead_code_stays_gone(name):
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        top = [*tree.body, *(n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body)]  # module and class level
        defined |= {
            t.id
            for n in top
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in getattr(n, "targets", [getattr(n, "target", None)])
            if isinstance(t, ast.Name)
        }
        assert name not in defined, path
