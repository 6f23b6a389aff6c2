"""The folders are the architecture: every package has a rank, no package imports one above
it (nor a sibling verb package), the pure packages touch no files, processes or environment
beyond a named ledger of reads, and every CLI verb is one registered module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "rlhf_launch"
# Every package of rlhf_launch, lowest first. A package may import its own rank's shared
# modules only where the rank says so, and any package of a lower rank; never one above.
RANKS: dict[str, int] = {
    "errors": 0,  # shared: everyone may use these; they import nothing of the launcher's
    "util": 0,
    "openrlhf": 1,  # release knowledge as data
    "core": 2,  # config, plan, rules, memory, estimate, command
    "diagnose": 3,  # one-verb packages over the core (pure)
    "importer": 3,
    "doctor": 3,
    "bringup": 4,  # generated sbatch scripts and KubeRay manifests (uses doctor's thresholds)
    "fit": 4,
    "cluster": 5,  # edges: Ray, the dashboard, node agents
    "runs": 6,
    "cli": 7,
    "__main__": 8,
    "rlhf_launch": 8,  # the package's own __init__
    "presets": 8,  # shipped data (a preset's reward function), imported by nobody
}
PURE = ("openrlhf", "core", "diagnose", "importer", "doctor", "bringup", "fit")
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


def test_every_package_has_a_rank_and_imports_none_above_it():
    packages = {package_of(m) for m in modules()}
    assert packages - RANKS.keys() == set(), "give the new package a rank in RANKS"
    offenders = {}
    for module, path in modules().items():
        mine = package_of(module)
        imported = imports_of(path) - {"rlhf_launch"}  # `from rlhf_launch import x` names the namespace too
        above = sorted(m for m in imported if package_of(m) != mine and RANKS[package_of(m)] >= RANKS[mine])
        if above:
            offenders[module] = above
    assert offenders == {}


# The pure packages read only what a user names or the package ships, in these functions, and
# nothing else touches files, processes or the environment there (the edges do: cli/, runs/,
# cluster/). Each entry: (module, function) -> why.
READS = {
    ("rlhf_launch.core.config", "read_text"): "the config file the user names",
    ("rlhf_launch.core.config", "beside"): "a path in the config, relative to the config file",
    ("rlhf_launch.core.launch", "prepare"): "the config's own path, made absolute for the record",
    ("rlhf_launch.core.shapes", "lookup"): "a local model directory's config.json (the shape)",
    ("rlhf_launch.core.shapes", "from_config_json"): "the same",
    ("rlhf_launch.core.shipped", "_local"): "local paths the config names (shipped with the job)",
    ("rlhf_launch.core.shipped", "plan"): "the same",
    ("rlhf_launch.core.presets", "names"): "package data: the shipped presets",
    ("rlhf_launch.core.presets", "path_of"): "package data",
    ("rlhf_launch.core.presets", "summary"): "package data",
    ("rlhf_launch.core.presets", "describe"): "package data",
    ("rlhf_launch.core.presets", "config_path"): "a preset name or a path the user names",
    ("rlhf_launch.core.presets", "companions"): "package data",
    ("rlhf_launch.openrlhf.flagset", "load"): "package data: the flag sets",
    ("rlhf_launch.openrlhf.flagset", "supported_versions"): "package data",
    ("rlhf_launch.openrlhf.flagset", "for_version"): "an installed OpenRLHF's trainer source",
    ("rlhf_launch.openrlhf.renames", "changes"): "package data: the renames",
    ("rlhf_launch.openrlhf.fork", "read"): "an OpenRLHF fork the user names (openrlhf.source): its trainer and version file",
    ("rlhf_launch.openrlhf.fork", "holds_package"): "the same: does the directory hold a trainer",
    ("rlhf_launch.openrlhf.fork", "package_root"): "the same",
    ("rlhf_launch.openrlhf.fork", "_trainers_below"): "the same: the folders under it that hold a trainer (for the hint)",
    ("rlhf_launch.diagnose.neighbours", "_known"): "package data: the known failure cases",
    ("rlhf_launch.importer.render", "check_target"): "the output path the user names (is it there)",
    ("rlhf_launch.importer.to_config", "_extra_args"): "a path in the script, made absolute",
    ("rlhf_launch.core.secrets", "wandb_key"): "the W&B key from the launcher's environment (a mapping may be passed)",
}
FORBIDDEN_MODULES = {"os", "shutil", "subprocess", "tempfile", "socket", "ray", "urllib", "requests", "glob"}
ALLOWED_OS = {"path", "sep", "PathLike", "linesep", "fspath"}
WRITES = {"write_text", "write_bytes", "mkdir", "unlink", "rename", "touch", "rmdir", "chmod", "symlink_to", "hardlink_to"}
READ_CALLS = {"read_text", "read_bytes", "exists", "is_file", "is_dir", "glob", "rglob", "iterdir", "stat", "expanduser", "resolve"}


def _touches(path: Path) -> list[tuple[str, str, int]]:
    """(function, what, line) for every file, process or environment access in a module."""
    tree = ast.parse(path.read_text())
    owner: dict[int, str] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                owner.setdefault(id(node), fn.name)
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            what = "open()"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in FORBIDDEN_MODULES:
            if not (node.value.id == "os" and node.attr in ALLOWED_OS):
                what = f"{node.value.id}.{node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            what = f".{node.func.attr}()"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READ_CALLS:
            what = f".{node.func.attr}() read"
        if what:
            found.append((owner.get(id(node), "<module>"), what, node.lineno))
    return found


def test_pure_packages_touch_no_files_processes_or_environment_beyond_the_ledger():
    offenders = []
    used = set()
    for module, path in modules().items():
        if package_of(module) not in PURE:
            continue
        for function, what, line in _touches(path):
            if (what.endswith(" read") or what == "os.environ") and (module, function) in READS:
                used.add((module, function))
                continue
            offenders.append(f"{module}:{line} {function}: {what}")
    assert offenders == [], "move it to an edge (cli/, runs/, cluster/) or, for a read of user input or package data, name it in READS"
    assert set(READS) - used == set(), "a READS entry no longer reads: remove it"


def test_the_ledger_check_catches_what_it_bans(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os, shutil\ndef f(p):\n    shutil.copyfile(p, p)\n    p.write_text('x')\n    return os.environ, open(p)\n")
    whats = {what for _, what, _ in _touches(sample)}
    assert whats == {"shutil.copyfile", ".write_text()", "os.environ", "open()"}


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
