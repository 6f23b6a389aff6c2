"""Local Python files a run ships with its job: the reward function and the agent function.

Each is a config key naming a local `.py` file (a relative path in a YAML file is relative to
that file; see config.load_config). The job uploads `runtime_env.working_dir`, or, when none
is set, the directory holding the files; the trainer gets each file's path inside it, which is
where Ray starts every worker. A file is read, never imported or run: `ast` says whether it
defines what OpenRLHF loads from it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from rlhf_launch.core.config import LaunchConfig, read_text
from rlhf_launch.core.findings import Finding, error
from rlhf_launch.errors import UserError

# config key -> (what OpenRLHF loads from the file, the names any one of which it needs)
FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "models.reward_func": ("a reward function", ("reward_func",)),
    "models.agent_func": ("an agent", ("AgentExecutor", "step")),  # a class from 0.8.11, a step() function before
}


@dataclass(frozen=True)
class Shipped:
    working_dir: str | None  # what runtime_env.working_dir becomes (None: nothing to upload)
    paths: dict[str, str]  # config key -> the path the trainer gets (inside working_dir)
    findings: list[Finding]


def _local(cfg: LaunchConfig) -> dict[str, Path]:
    out = {}
    for key in FILES:
        value = getattr(cfg.models, key.split(".")[1])
        if value:
            out[key] = Path(value).expanduser()
    return out


def plan(cfg: LaunchConfig) -> Shipped:
    """Where the files go, and what is wrong with them (missing, outside working_dir, no reward_func)."""
    files = _local(cfg)
    configured = cfg.runtime_env.working_dir
    if not files:
        return Shipped(configured, {}, [])
    findings: list[Finding] = []
    if configured is not None:
        root = Path(configured).expanduser().resolve()
    else:
        parents = {path.resolve().parent for path in files.values()}
        root = parents.pop() if len(parents) == 1 else Path("/")
        if parents:
            findings.append(
                error(
                    "runtime_env.working_dir",
                    f"{' and '.join(files)} are in different directories and no working_dir holds them all",
                    "set runtime_env.working_dir to a directory that holds them",
                )
            )
    paths: dict[str, str] = {}
    for key, path in files.items():
        findings += _check(key, path)
        try:
            paths[key] = path.resolve().relative_to(root).as_posix()
        except ValueError:
            paths[key] = str(path)
            findings.append(
                error(
                    key,
                    f"{path} is outside runtime_env.working_dir {configured}: it would not ship with the job",
                    "move it under the working_dir, or change runtime_env.working_dir",
                    reason="trainer_init",
                )
            )
    return Shipped(configured if configured is not None else str(root), paths, findings)


def _check(key: str, path: Path) -> list[Finding]:
    what, names = FILES[key]
    try:
        source = read_text(path, what="file")
    except UserError as exc:
        return [error(key, exc.message, "point it at a local .py file", reason="trainer_init")]
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        return [error(key, f"{path}:{exc.lineno}: not valid Python: {exc.msg}", reason="trainer_init")]
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    if not defined & set(names):
        wanted = " or ".join(names)
        return [
            error(
                key,
                f"{path} does not define {wanted}, which OpenRLHF loads as {what}",
                f"define {wanted} at the top level",
                reason="trainer_init",
            )
        ]
    return []
