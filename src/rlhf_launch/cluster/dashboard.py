"""A small client for the Ray dashboard's REST API: GET/POST JSON with the token, short
timeouts, and typed errors (unreachable, timed out, auth rejected, not found). No ray import."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from rlhf_launch.cluster import gcs
from rlhf_launch.cluster.auth import Token
from rlhf_launch.core.address import check_address
from rlhf_launch.errors import AuthRejected, ClusterError, ClusterRefused, ClusterTimeout, ClusterUnreachable, UserError

DEFAULT_TIMEOUT = 5.0
GCS_PORT_HINT = f"port {gcs.GCS_PORT} is Ray's GCS port (what workers join); the dashboard listens on {gcs.DASHBOARD_PORT} by default"


class NotFound(ClusterError):
    """HTTP 404 for a path: the caller turns it into what was not found (a job, ...)."""


class NotADashboard(ClusterRefused):
    """Something answered at the address, but not in HTTP: the GCS port, a Redis, another service."""

    exit_code = 2  # the address is wrong (fix --address), not a cluster that is not up yet


def normalize(address: str) -> str:
    """`host:port` or a URL -> `http://host:port` (no trailing slash); UserError if malformed."""
    try:
        check_address(address)
    except ValueError as exc:
        raise UserError(f"cluster address {address!r}: {exc}", hint="e.g. http://127.0.0.1:8265 or head-node:8265") from None
    text = address.strip().rstrip("/")
    return text if "://" in text else f"http://{text}"


class Dashboard:
    def __init__(self, address: str, token: Token | None, timeout: float = DEFAULT_TIMEOUT):
        self.address = normalize(address)
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        url = self.address + path
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        if self.token:
            headers.update(self.token.headers())
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        wait = self.timeout if timeout is None else timeout
        try:
            with urllib.request.urlopen(request, timeout=wait) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc) from None
        except http.client.HTTPException as exc:  # an answer that is no HTTP/1.1 (BadStatusLine: its raw bytes)
            raise self._not_http(exc) from None
        except TimeoutError:
            raise ClusterTimeout(
                f"the Ray dashboard at {self.address} did not answer within {wait:g}s",
                hint="the cluster may be overloaded or paused; its state is unknown, try again",
            ) from None
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise ClusterTimeout(
                    f"the Ray dashboard at {self.address} did not answer within {wait:g}s",
                    hint="the cluster may be overloaded or paused; its state is unknown, try again",
                ) from None
            hint = "is the cluster up (rlhf-launch up --head)? set cluster.address or --address"
            if self._host_port()[1] == gcs.GCS_PORT:
                hint = GCS_PORT_HINT
            raise ClusterUnreachable(f"cannot reach the Ray dashboard at {self.address}: {reason}", hint=hint) from None
        if not payload:
            return None
        try:
            return json.loads(payload)
        except ValueError:
            return payload.decode(errors="replace")

    def _host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.address)
        try:
            port = parts.port
        except ValueError:
            port = None
        return parts.hostname or "", port or (443 if parts.scheme == "https" else 80)

    def _not_http(self, exc: Exception) -> ClusterError:
        host, port = self._host_port()
        found = gcs.not_the_dashboard(self.address, host, port, self.token)
        if found is not None:
            return NotADashboard(*found)
        hint = GCS_PORT_HINT if port == gcs.GCS_PORT else "check the address: it must be the Ray dashboard (default port 8265)"
        if isinstance(exc, ConnectionError):  # RemoteDisconnected: a dashboard restarting, too; its state is unknown
            return ClusterUnreachable(f"the Ray dashboard at {self.address} closed the connection without answering", hint=hint)
        return NotADashboard(f"{self.address} answered, but not in HTTP: it is not a Ray dashboard", hint=hint)

    def _http_error(self, exc: urllib.error.HTTPError) -> ClusterError:
        if exc.code == 401:
            return AuthRejected(
                f"the cluster at {self.address} requires a Ray auth token and none was found",
                hint="copy the head's token file and pass --token-file, or set RAY_AUTH_TOKEN_PATH / RAY_AUTH_TOKEN",
            )
        if exc.code == 403:
            source = self.token.source if self.token else "?"
            return AuthRejected(
                f"the cluster at {self.address} rejected the Ray auth token from {source}",
                hint="use the token the head printed at `rlhf-launch up --head`",
            )
        full = exc.read().decode(errors="replace")[:20000] if exc.fp else ""
        text = full[:500]
        if exc.code == 404:
            return NotFound(f"not found on the Ray dashboard {self.address}: {exc.url}")
        if exc.code in (502, 503, 504):  # a proxy or a busy head: whether it was done is unknown
            return ClusterTimeout(f"Ray dashboard {self.address} answered HTTP {exc.code}: {text.strip()[:200]}", hint="try again")
        return ClusterRefused(f"Ray dashboard {self.address} answered HTTP {exc.code}: {text.strip()}", detail=full)

    def get(self, path: str, timeout: float | None = None) -> Any:
        return self._request("GET", path, timeout=timeout)

    def post(self, path: str, body: Any, timeout: float | None = None) -> Any:
        return self._request("POST", path, body, timeout=timeout)

    def delete(self, path: str) -> Any:
        return self._request("DELETE", path)

    def version(self) -> dict[str, Any]:
        try:
            data = self.get("/api/version")
        except NotFound:
            raise self._no_version() from None
        if not isinstance(data, dict) or "ray_version" not in data:
            raise ClusterRefused(f"{self.address} does not look like a Ray dashboard", hint="check the address and port")
        return data

    def _answers(self, address: str, path: str) -> Any:
        """What a short GET of `address + path` returns: the payload, or None (no answer, an HTTP error)."""
        try:
            return Dashboard(address, self.token, timeout=2.0).get(path)
        except (ClusterError, UserError):
            return None

    def _no_version(self) -> ClusterError:
        """An HTTP server without /api/version: a Ray node's agent (the dashboard agent's HTTP port,
        which serves its raylet's health and the job agent), or another web service."""
        host, port = self._host_port()
        shown = f"[{host}]" if ":" in host else host
        agent = self._answers(self.address, "/api/local_raylet_healthz") == "success"
        if not agent:
            return NotADashboard(
                f"{self.address} answers HTTP but has no /api/version: it is not a Ray dashboard",
                hint=f"use the Ray dashboard's address (port {gcs.DASHBOARD_PORT} on the head by default)",
            )
        url = None
        if port != gcs.DASHBOARD_PORT:
            near = f"http://{shown}:{gcs.DASHBOARD_PORT}"
            found = self._answers(near, "/api/version")
            url = near if isinstance(found, dict) and "ray_version" in found else None
        if url is None and gcs.protocol(host, gcs.GCS_PORT) == "grpc":
            url = gcs.dashboard_of(host, gcs.GCS_PORT, self.token)
        where = f"the dashboard is {url}" if url else f"the dashboard listens on port {gcs.DASHBOARD_PORT} of the head node by default"
        return NotADashboard(
            f"{self.address} is a Ray node's agent (its dashboard agent's HTTP port), not the Ray dashboard: {where}",
            hint=f"use --address {url}"
            if url
            else f"use --address http://HEAD:{gcs.DASHBOARD_PORT} (or the --dashboard-port given to `rlhf-launch up`)",
        )

    def check_auth(self) -> None:
        """/api/version answers without a token; the jobs API needs one when auth is on."""
        self.get("/api/jobs/")
