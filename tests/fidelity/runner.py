"""Run OpenRLHF's real `train_ppo_ray.py` start-up on fakes and print one JSON verdict per argv.

    python runner.py VERSION '["--pretrain", "m", ...]'     # one argv
    python runner.py VERSION < argvs.json                     # a JSON list of argvs, one verdict line each

FIDELITY_TIMEOUT (seconds per argv) and FIDELITY_VALUES (a JSON object of real values for the
fakes, e.g. {"vllm.__version__": "0.10.1"}; null leaves one a Fake) tune a run.

The script is compiled once and the modules it imports are imported once; then each argv runs the
script as `__main__` (as runpy.run_path(..., run_name="__main__") would, but in a namespace kept
for reading `args` back) in a forked child: a fresh copy of every module's state, a time limit.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import contextlib
import io
import json
import math
import os
import signal
import sys
import traceback
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FAKES = HERE / "fakes"
PER_RUN_TIMEOUT = 60.0
OUTPUT_TAIL = 4000

_entered: dict[str, Any] = {}


def _flat(ns: Any, prefix: str = "") -> dict[str, Any]:
    """vars(args) with nested namespaces (from 0.10.2's hierarchize) flattened back to dotted dest names."""
    import ray  # the fake; its jsonable() knows placement groups

    out: dict[str, Any] = {}
    for key, value in vars(ns).items():
        if isinstance(value, (argparse.Namespace, types.SimpleNamespace)):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = ray.jsonable(value)
    return out


def _harness_cause(exc: BaseException, frames: list[traceback.FrameSummary]) -> str:
    """Why this exception is the harness's fault, or "" when OpenRLHF (or argparse) raised it."""
    from autofake import HarnessError

    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    text = f"{type(exc).__name__}: {exc}{where}"
    if isinstance(exc, HarnessError) or (frames and frames[-1].filename.startswith(str(FAKES))):
        return text
    if isinstance(exc, ImportError) and not (exc.name or "openrlhf").startswith("openrlhf"):
        return text
    if "<fake " in str(exc) or "Fake" in str(exc):
        return text
    if not any("/openrlhf/" in f.filename or f.filename == argparse.__file__ for f in frames):
        return text  # raised before the trainer's code ran: the runner itself
    return ""


def run_one(code: types.CodeType, script: Path, argv: list[str]) -> dict[str, Any]:
    import autofake
    import ray

    ray.reset()
    autofake.incidents.clear()
    _entered.clear()
    train_code = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == "train")

    def on_call(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is train_code:
            _entered["args"] = _flat(frame.f_locals["args"])
            sys.setprofile(None)

    scope: dict[str, Any] = {"__name__": "__main__", "__file__": str(script), "__builtins__": builtins}
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [str(script), *argv]
    verdict: dict[str, Any] = {"ok": True, "stage": "done", "error_type": "", "message": "", "harness_error": ""}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            sys.setprofile(on_call)
            try:
                exec(code, scope)  # noqa: S102 - the trainer's own script, as runpy would
            finally:
                sys.setprofile(None)
    except BaseException as exc:  # noqa: BLE001 - every failure is a verdict
        frames = traceback.extract_tb(exc.__traceback__)
        in_argparse = any(f.filename == argparse.__file__ for f in frames)
        message = str(exc)
        if isinstance(exc, SystemExit) and in_argparse:
            stage = "parse"
            lines = [line for line in err.getvalue().splitlines() if ": error: " in line]
            message = lines[-1].split(": error: ", 1)[1] if lines else message
        else:
            stage = "train" if _entered else "checks"
        verdict = {
            "ok": False,
            "stage": stage,
            "error_type": type(exc).__name__,
            "message": message,
            "harness_error": _harness_cause(exc, frames),
        }
        if verdict["harness_error"]:
            verdict["harness_error"] += "\n" + "".join(traceback.format_exception(exc))[-OUTPUT_TAIL:]
    if autofake.incidents and not verdict["harness_error"]:
        verdict["harness_error"] = "a fake was misused (the trainer caught it): " + "; ".join(autofake.incidents)
    if "args" in _entered:
        args = _entered["args"]
    elif isinstance(scope.get("args"), (argparse.Namespace, types.SimpleNamespace)):
        args = _flat(scope["args"])
    else:
        args = {}
    return {
        **verdict,
        "placement_groups": list(ray.placement_groups),
        "actors": list(ray.actors),
        "args": args,
        "output": (out.getvalue() + err.getvalue())[-OUTPUT_TAIL:],
    }


def run_forked(code: types.CodeType, script: Path, argv: list[str], timeout: float) -> dict[str, Any]:
    """run_one in a forked child, so that no module state leaks from one argv to the next."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # keep stray writes out of the verdict stream
        signal.alarm(max(1, math.ceil(timeout)))
        try:
            payload = json.dumps(run_one(code, script, argv))
        except BaseException as exc:  # noqa: BLE001
            payload = json.dumps(_failure(f"runner: {''.join(traceback.format_exception(exc))}"))
        with os.fdopen(write_end, "w") as pipe:
            pipe.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if payload:
        return json.loads(payload)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        return _failure(f"timed out after {timeout:g}s")
    return _failure(f"runner child died (wait status {status})")


def _failure(harness_error: str) -> dict[str, Any]:
    return {
        "ok": False,
        "stage": "",
        "error_type": "",
        "message": "",
        "harness_error": harness_error,
        "placement_groups": [],
        "actors": [],
        "args": {},
        "output": "",
    }


def prepare(version: str) -> tuple[types.CodeType, Path]:
    """Fakes first on sys.path, then the unpacked wheel; the release's pinned versions on the fakes."""
    from wheels import pins, trainer_root

    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # nothing of ours but the fakes

    root = trainer_root(version)
    sys.path[:0] = [str(FAKES), str(root)]
    import autofake
    import ray

    pinned = pins(root)
    values = {f"{name}.__version__": pinned[name] for name in ("vllm", "deepspeed", "transformers", "flash_attn") if name in pinned}
    if "deepspeed" in pinned:
        values["deepspeed.version"] = pinned["deepspeed"]
    values.update(json.loads(os.environ.get("FIDELITY_VALUES") or "{}"))
    autofake.install(values)
    ray.__version__ = pinned.get("ray", ray.__version__)
    script = root / "openrlhf" / "cli" / "train_ppo_ray.py"
    return compile(script.read_text(), str(script), "exec"), script


def warm_up(script: Path) -> None:
    """Import, once for all argvs, every module the script imports (at its top or inside train()).

    A statement that fails leaves nothing behind: each argv then meets, and reports, that failure.
    """
    for node in ast.walk(ast.parse(script.read_text())):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        before = set(sys.modules)
        statement = compile(ast.Module(body=[node], type_ignores=[]), str(script), "exec")
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(statement, {"__name__": "__warm_up__", "__builtins__": builtins})  # noqa: S102 - an import
        except BaseException:  # noqa: BLE001
            for name in set(sys.modules) - before:
                del sys.modules[name]


def main() -> None:
    version = sys.argv[1]
    argvs = [json.loads(sys.argv[2])] if len(sys.argv) > 2 else json.load(sys.stdin)
    timeout = float(os.environ.get("FIDELITY_TIMEOUT", PER_RUN_TIMEOUT))
    stdout = sys.stdout
    code, script = prepare(version)
    warm_up(script)
    for argv in argvs:
        if hasattr(os, "fork"):
            verdict = run_forked(code, script, argv, timeout)
        else:
            verdict = run_one(code, script, argv)
        stdout.write(json.dumps(verdict) + "\n")
        stdout.flush()


if __name__ == "__main__":
    main()
