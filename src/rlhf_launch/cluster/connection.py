"""`Cluster`: where the Ray cluster is and how to authenticate, built once per command.

The address is the Ray dashboard (which serves the job and state APIs):
`--address`, else RAY_API_SERVER_ADDRESS, else an http(s) RAY_ADDRESS, else the config's
`cluster.address` (or a run's recorded address), else http://127.0.0.1:8265. The token is
found as Ray finds it (see cluster.auth). Everything that talks to the cluster takes a
`Cluster` (or its `jobs` / `dashboard`), never an address and a token file separately.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from rlhf_launch.cluster.auth import Token, find_token
from rlhf_launch.cluster.dashboard import Dashboard, normalize
from rlhf_launch.cluster.jobs import Jobs

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
DEFAULT_TIMEOUT = 10.0


def address_from(given: str | None, configured: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    if given:
        return normalize(given)
    for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS"):
        value = env.get(name, "")
        if value.startswith("http"):
            return normalize(value)
    return normalize(configured or DEFAULT_ADDRESS)


@dataclass(frozen=True)
class Cluster:
    address: str
    token: Token | None
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def at(
        cls,
        address: str | None,
        token_file: str | None = None,
        *,
        configured: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Cluster:
        """The cluster a command talks to: `address` (or what the environment or `configured`
        says) with the token from `token_file` (or where Ray looks for it)."""
        return cls(address_from(address, configured), find_token(token_file=token_file), timeout)

    def with_timeout(self, timeout: float) -> Cluster:
        return replace(self, timeout=timeout)

    @cached_property
    def dashboard(self) -> Dashboard:
        return Dashboard(self.address, self.token, timeout=self.timeout)

    @cached_property
    def jobs(self) -> Jobs:
        return Jobs(self.dashboard)

    def checked(self) -> Cluster:
        """This cluster, after one request that needs the token (fails fast if it is wrong)."""
        self.dashboard.check_auth()
        return self
