"""Ray token auth (RAY_AUTH_MODE=token, Ray >= 2.52): where the token lives, making one, headers.

The token is looked up as Ray itself does: RAY_AUTH_TOKEN (the value), RAY_AUTH_TOKEN_PATH
(a file), then ~/.ray/auth_token; `--token-file` overrides all of them. A generated token
is 256 random bits, written with mode 0600 before any byte of it reaches the file.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlhf_launch.errors import UserError

DEFAULT_TOKEN_PATH = Path.home() / ".ray" / "auth_token"


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # a file path, or "RAY_AUTH_TOKEN"
    path: Path | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.value}"}


def token_path(environ: Mapping[str, str] | None = None, token_file: str | None = None) -> Path:
    env = os.environ if environ is None else environ
    if token_file:
        return Path(token_file).expanduser()
    if env.get("RAY_AUTH_TOKEN_PATH"):
        return Path(env["RAY_AUTH_TOKEN_PATH"]).expanduser()
    return DEFAULT_TOKEN_PATH


def _read(path: Path) -> str | None:
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the Ray token {path}: {exc.strerror}") from None
    return value or None


def remembered_token_file(path: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A token file remembered with a run (`submit --token-file`): `path` when the environment
    names no token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH) and the file still holds one; else None
    (the environment's, or Ray's default place: a file gone or emptied since is no user error)."""
    env = os.environ if environ is None else environ
    if env.get("RAY_AUTH_TOKEN", "").strip() or env.get("RAY_AUTH_TOKEN_PATH"):
        return None
    return path if _read(Path(path).expanduser()) else None


def find_token(environ: Mapping[str, str] | None = None, token_file: str | None = None) -> Token | None:
    env = os.environ if environ is None else environ
    if token_file:
        path = Path(token_file).expanduser()
        value = _read(path)
        if value is None:
            raise UserError(f"token file {path} is missing or empty", hint="copy the head's token file here")
        return Token(value, str(path), path)
    if env.get("RAY_AUTH_TOKEN", "").strip():
        return Token(env["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN")
    path = token_path(env)
    value = _read(path)
    return Token(value, str(path), path) if value else None


def ensure_token(path: Path) -> tuple[Token, bool]:
    """The token at `path`, generated (0600) if there is none. Returns (token, created)."""
    existing = _read(path)
    if existing:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(0o600)
        return Token(existing, str(path), path), False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = secrets.token_hex(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, value.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return Token(value, str(path), path), True


def ray_env(token: Token | None, enabled: bool = True) -> dict[str, str]:
    """Environment for `ray start` and everything it starts (job drivers inherit it)."""
    if not enabled:
        return {"RAY_AUTH_MODE": "disabled"}
    env = {"RAY_AUTH_MODE": "token"}
    if token is not None and token.path is not None:
        env["RAY_AUTH_TOKEN_PATH"] = str(token.path)
    elif token is not None:
        env["RAY_AUTH_TOKEN"] = token.value
    return env
