"""Errors the memory tools raise; the MCP layer and the CLI turn ``str(exc)`` into their answer.

Each message is written for the model or the user reading it: it says what was wrong and, where
there is one, what to do instead.
"""

from __future__ import annotations

from memoryd.errors import MemorydError


class ToolError(MemorydError):
    """Root of every error a memory tool raises on purpose."""


class NotFound(ToolError, LookupError):
    """The path, note or session does not exist (hidden entries report this too)."""


class Refused(ToolError):
    """The request was understood and declined: a secret, a symlink, a missing confirmation, a lease."""

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        self.reasons = list(reasons or [])
        super().__init__(message)


class InvalidArgument(ToolError, ValueError):
    """A parameter is out of range, malformed, or points outside the memory folder."""
