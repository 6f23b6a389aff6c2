"""The errors rlhf-launch raises on purpose. The CLI catches them class by class.

    LauncherError            one message naming the key, file or node, and a hint; exit 2
      UserError              a mistake the user can fix (a config key, an argument, a file)
      RecordUnreadable       a run record that cannot be read (kept, never deleted)
      ClusterError           talking to the cluster went wrong; exit 4 (CLUSTER), so that a
                             wrapper (Slurm, KubeRay) can tell "not up yet, try again" from
                             "fix your config" (2)
        ClusterUnreachable   nothing answered: connection refused, DNS, no route
          ClusterTimeout     something accepted the connection but did not answer in time
        AuthRejected         the cluster wants a token (401) or refused ours (403)
        JobNotFound          the cluster answered and has no such job
        ClusterRefused       the cluster answered with another error (it refused a request)
          JobExists          the cluster already has a job with that id

A timeout or an unreachable cluster says nothing about a job: callers that decide whether a
trainer is dead catch `JobNotFound` alone, and treat every other `ClusterError` as unknown.
Anything else that escapes is a bug: the CLI prints a short message and the path of a log
holding the traceback, and exits 3.
"""

from __future__ import annotations


class LauncherError(Exception):
    """An expected failure: printed as one message and a hint, without a traceback."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UserError(LauncherError):
    """A mistake the user can fix: a config key, an argument, a file."""


class RecordUnreadable(LauncherError):
    """A run record exists but cannot be read; it is reported with its path and kept."""

    def __init__(self, path: str, reason: str):
        super().__init__(
            f"run record {path} is unreadable: {reason}",
            hint="the file is kept as it is; fix or move it by hand (rlhf-launch never deletes a record)",
        )
        self.path = path
        self.reason = reason


class ClusterError(LauncherError):
    """Talking to the Ray cluster went wrong."""

    exit_code = 4  # cli/output.py CLUSTER


class ClusterUnreachable(ClusterError):
    """Nothing answered at the address: the cluster may be down, or the address wrong."""


class ClusterTimeout(ClusterUnreachable):
    """The address accepted a connection but did not answer in time: state unknown."""


class AuthRejected(ClusterError):
    """The cluster requires a token (HTTP 401) or rejected ours (HTTP 403)."""


class JobNotFound(ClusterError):
    """The cluster answered, and it has no job with this id."""


class ClusterRefused(ClusterError):
    """The cluster answered a request with an error other than the ones above."""

    def __init__(self, message: str, hint: str | None = None, detail: str = ""):
        super().__init__(message, hint)
        self.detail = detail  # the cluster's whole answer (the message keeps its start)


class JobExists(ClusterRefused):
    """The cluster already has a job with this id (job ids are deterministic: someone else
    submitted it first)."""
