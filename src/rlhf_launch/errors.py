"""Errors a user can cause: one message naming the key or file, a hint, exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix. The CLI prints it without a traceback and exits 2."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"
