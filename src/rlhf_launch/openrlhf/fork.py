"""OpenRLHF forks: a checkout (or an installed package) whose trainer the job runs, with flags of its own.

`openrlhf.source: DIR` names it; without it, a `runtime_env.working_dir` that holds an `openrlhf/`
package is it (Ray puts the working dir first on the trainer's path, so that copy is the one `python
-m openrlhf.cli.train_ppo_ray` runs). Its flag set is read from its own
`openrlhf/cli/train_ppo_ray.py` with `ast` (extract.py), following a parser built in another module
of the same checkout, its version from the package's own version file. What the launcher knows of
stock releases (renames, start-up checks, memory, placement) applies through the fork's nearest
stock release: the shipped flag set that shares the most flags with it (Jaccard), the closest by
version among equals. Flags only the fork has pass through unchecked; the fork's parser (its own
choices, types, nargs) reads every flag.

`read` is the one function here that touches files (the directory the user names).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from rlhf_launch.errors import UserError
from rlhf_launch.openrlhf.extract import ExtractError, Loader, extract_flags, extract_group_estimators
from rlhf_launch.openrlhf.flagset import FlagSet, Fork, _from_data, load, supported_versions, version_key
from rlhf_launch.util import versions

TRAINER = "openrlhf/cli/train_ppo_ray.py"
# Where a fork keeps its version, relative to the directory that holds `openrlhf/`, first found wins.
VERSION_FILES = ("version.txt", "openrlhf/version.py", "openrlhf/__init__.py", "setup.py", "pyproject.toml")
_ASSIGNED = re.compile(r"""^\s*(?:__version__|version|VERSION)\s*=\s*["']([^"']+)["']""", re.M)
_SETUP_KW = re.compile(r"""\bversion\s*=\s*["']([^"']+)["']""")
_METADATA = re.compile(r"^Version:\s*(\S+)", re.M)


def package_root(root: Path) -> Path:
    """The directory that holds `openrlhf/`: `root` itself, or its parent when `root` is the
    package directory (`site-packages/openrlhf`)."""
    if root.name == "openrlhf" and (root / "cli" / "train_ppo_ray.py").is_file():
        return root.parent
    return root


def version_from(files: dict[str, str]) -> str | None:
    """The version a fork states, from its version files' texts (relative name -> text), or None."""
    for name in VERSION_FILES:
        text = files.get(name)
        if text is None:
            continue
        if name == "version.txt":
            line = text.strip().splitlines()[0].strip() if text.strip() else ""
            if line:
                return line
            continue
        if name == "setup.py":
            m = _SETUP_KW.search(text)
        else:
            m = _ASSIGNED.search(text)
        if m:
            return m.group(1)
    text = files.get("METADATA")
    m = _METADATA.search(text) if text else None
    return m.group(1) if m else None


def _distance(version: str | None, release: str, order: tuple[str, ...]) -> int:
    parsed = versions.maybe(version)
    if parsed is None:
        return 0
    below = sum(1 for v in order if version_key(v) <= parsed)  # where the fork's version sorts among releases
    return abs(order.index(release) + 1 - below)


def nearest_release(names: set[str], version: str | None) -> str:
    """The shipped release that shares the most flags with `names`, then the closest by version."""
    order = supported_versions()

    def score(release: str) -> tuple[float, int, object]:
        theirs = set(load(release).flags)
        overlap = len(names & theirs) / len(names | theirs) if names | theirs else 0.0
        return (round(overlap, 4), -_distance(version, release, order), version_key(release))

    return max(order, key=score)


def parser_sha256(trainer: bytes, modules: list[tuple[str, bytes]]) -> str:
    """What doctor compares on every node: sha256 of the trainer file alone, or, when its parser
    is built in other modules of the checkout too, of the trainer and those modules (by name).
    The probe on each node (cluster/probes/doctor.py) computes the same from the files it finds."""
    if not modules:
        return hashlib.sha256(trainer).hexdigest()
    digest = hashlib.sha256(b"train_ppo_ray.py\0" + trainer)
    for name, text in sorted(modules):
        digest.update(b"\0" + name.encode("utf-8") + b"\0" + text)
    return digest.hexdigest()


def module_paths(name: str) -> tuple[str, str]:
    """Where module `name` (dotted) lies in a checkout, relative to the folder holding `openrlhf/`."""
    path = name.replace(".", "/")
    return f"{path}.py", f"{path}/__init__.py"


def linked_modules(source: str, load: Loader) -> tuple[tuple[str, str], ...]:
    """The checkout's modules (name, source) that the trainer's parser is built in, beside the
    trainer file itself (extract.py follows the calls that make or extend it)."""
    reached: dict[str, str] = {}

    def recording(name: str) -> str | None:
        text = load(name)
        if text is not None:
            reached[name] = text
        return text

    try:
        extract_flags(source, recording)
    except (ExtractError, SyntaxError):
        pass  # from_source says why
    return tuple(sorted(reached.items()))


@lru_cache(maxsize=32)
def from_source(
    source: str, *, root: str, version: str | None, via: str = "openrlhf.source", modules: tuple[tuple[str, str], ...] = ()
) -> FlagSet:
    """The fork's flag set from its trainer's source text (and the checkout's `modules` its parser
    is built in: linked_modules): its own flags, the nearest release's version (what the
    launcher's knowledge of releases keys on) and pins."""
    unresolved: list[str] = []
    try:
        flags = extract_flags(source, dict(modules).get, unresolved=unresolved)
    except (ExtractError, SyntaxError) as exc:
        raise UserError(
            f"{root}/{TRAINER} does not read as OpenRLHF's trainer: {exc}",
            hint=f"{via} must name a checkout (or installed package) whose {TRAINER} defines the trainer's flags",
        ) from None
    data = {"version": "", "flags": flags, "group_estimators": extract_group_estimators(source)}
    names = {f["name"] for f in flags}
    base = nearest_release(names, version)
    stock = load(base)
    fork = Fork(
        root=root,
        version=version,
        sha256=parser_sha256(source.encode("utf-8"), [(name, text.encode("utf-8")) for name, text in modules]),
        only=tuple(f["name"] for f in flags if f["name"] not in stock.flags),
        via=via,
        modules=tuple(sorted(name for name, _ in modules)),
        unresolved=tuple(unresolved),
    )
    built = _from_data({**data, "version": base}, origin=f"{root}/{TRAINER}")
    return replace(built, pins=dict(stock.pins), fork=fork)


def as_json(flags: FlagSet) -> dict[str, object] | None:
    """What `plan --json` says of the fork (None for a stock release)."""
    f = flags.fork
    if f is None:
        return None
    return {
        "root": f.root,
        "version": f.version,
        "sha256": f.sha256,
        "via": f.via,
        "nearest_release": flags.version,
        "own_flags": list(f.only),
    }


def holds_package(directory: str) -> bool:
    """Whether `directory` holds an OpenRLHF trainer (a checkout, or the package itself)."""
    root = Path(directory).expanduser()
    return (root / TRAINER).is_file() or (root.name == "openrlhf" and (root / "cli" / "train_ppo_ray.py").is_file())


def _trainers_below(root: Path, depth: int = 3) -> list[Path]:
    """The folders under `root` (at most `depth` levels, hidden ones and site-packages skipped)
    that hold openrlhf/cli/train_ppo_ray.py: what a user who named a repository's root meant."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "site-packages")
            except OSError:
                continue
            for child in children:
                if (child / TRAINER).is_file():
                    found.append(child)
                below.append(child)
        level = below[:200]  # a large tree: the first folders only
        if found:
            break
    return found[:3]


def read(directory: str, via: str = "openrlhf.source") -> FlagSet:
    """The fork in `directory` (a checkout or an installed package's directory): its trainer's
    flags and its version file; UserError naming `via` when it holds no trainer."""
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"{via} {directory} is not a directory", hint="name the checkout that holds openrlhf/cli/train_ppo_ray.py")
    home = package_root(root)
    trainer = home / TRAINER
    if not trainer.is_file():
        below = _trainers_below(root)
        raise UserError(
            f"{via} {directory} holds no {TRAINER}",
            hint=(f"it is in {', '.join(str(p) for p in below)}: name that folder" if below else "")
            or "name the checkout (or the installed openrlhf package directory) the trainer runs from",
        )
    try:
        source = trainer.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {trainer}: {exc}") from None
    files: dict[str, str] = {}
    for name in VERSION_FILES:
        path = home / name
        if path.is_file():
            try:
                files[name] = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
    for meta in sorted(home.glob("openrlhf-*.dist-info/METADATA")):  # an installed package: its metadata
        files.setdefault("METADATA", meta.read_text(encoding="utf-8", errors="replace"))

    def load(name: str) -> str | None:
        """A module of this checkout only: a file under `home`, never one elsewhere on the path."""
        for relative in module_paths(name):
            path = (home / relative).resolve()
            if path.is_relative_to(home) and path.is_file():
                try:
                    return path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    return None
        return None

    modules = linked_modules(source, load)
    flags = from_source(source, root=str(home), version=version_from(files), via=via, modules=modules)
    if flags.fork is None:
        return flags
    # what doctor compares is the files' bytes as each node reads them (a CRLF checkout included)
    raw: list[tuple[str, bytes]] = []
    for name, _ in modules:
        for relative in module_paths(name):
            path = (home / relative).resolve()
            if path.is_relative_to(home) and path.is_file():
                raw.append((name, path.read_bytes()))
                break
    return replace(flags, fork=replace(flags.fork, sha256=parser_sha256(trainer.read_bytes(), raw)))
