"""A small client for the Ray dashboard's REST API: GET/POST JSON with the token, short timeouts,
and user-facing errors for "down", "no token" and "wrong token". No ray import."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

from rlhf_launch.auth import Token
from rlhf_launch.errors import UserError

DEFAULT_TIMEOUT = 5.0


class NotFound(UserError):
    """HTTP 404 from the dashboard."""


def normalize(address: str) -> str:
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = f"http://{address}"
    return address


class Dashboard:
    def __init__(self, address: str, token: Token | None, timeout: float = DEFAULT_TIMEOUT):
        self.address = normalize(address)
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        url = self.address + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        if self.token:
            headers.update(self.token.headers())
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError(
                f"cannot reach the Ray dashboard at {self.address}: {reason}",
                hint="is the cluster up (rlhf-launch up --head)? set cluster.address or --address",
            ) from None
        if not payload:
            return None
        try:
            return json.loads(payload)
        except ValueError:
            return payload.decode(errors="replace")

    def _http_error(self, exc: urllib.error.HTTPError) -> UserError:
        if exc.code == 401:
            return UserError(
                f"the cluster at {self.address} requires a Ray auth token and none was found",
                hint="copy the head's token file and pass --token-file, or set RAY_AUTH_TOKEN_PATH / RAY_AUTH_TOKEN",
            )
        if exc.code == 403:
            source = self.token.source if self.token else "?"
            return UserError(
                f"the cluster at {self.address} rejected the Ray auth token from {source}",
                hint="use the token the head printed at `rlhf-launch up --head`",
            )
        text = exc.read().decode(errors="replace")[:500] if exc.fp else ""
        if exc.code == 404:
            return NotFound(f"not found on the Ray dashboard {self.address}: {exc.url}")
        return UserError(f"Ray dashboard {self.address} answered HTTP {exc.code}: {text.strip()}")

    def get(self, path: str) -> Any:
        return self._request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self._request("POST", path, body)

    def version(self) -> dict[str, Any]:
        data = self.get("/api/version")
        if not isinstance(data, dict) or "ray_version" not in data:
            raise UserError(f"{self.address} does not look like a Ray dashboard", hint="check the address and port")
        return data

    def check_auth(self) -> None:
        """/api/version answers without a token; the jobs API needs one when auth is on."""
        self.get("/api/jobs/")


DEFAULT_ADDRESS = "http://127.0.0.1:8265"


def resolve_address(given: str | None, configured: str | None = None) -> str:
    """--address, else RAY_API_SERVER_ADDRESS, else an http RAY_ADDRESS, else the config's, else local."""
    import os

    if given:
        return normalize(given)
    for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        value = os.environ.get(name, "")
        if value.startswith("http"):
            return normalize(value)
    return normalize(configured or DEFAULT_ADDRESS)
