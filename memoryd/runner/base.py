"""The one interface both phases prompt a model through, whoever runs the model.

Phase 1 needs a tool-less structured answer (:meth:`Runner.answer`); phase 2 needs a confined
file-editing agent run over the memory folder (:meth:`Runner.consolidate`). opencode does both
through its HTTP API (:mod:`memoryd.write.opencode_runner`); a client CLI the user is already signed
in to does both as a child process (:mod:`memoryd.runner.claude_cli`). Everything around the
call (the budget, the circuit breaker, the ledger, the sweep, rollback and validation) stays in
the phases and is the same for every runner.

Usage comes from the runner's own report; when it gives none, the tokens are estimated from the
bytes sent and received and the ledger row says so (``estimated``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from memoryd.store.ledger import CallUsage

# memoryd's own file tools for a client CLI's consolidator (runner/files_mcp.py serves them); named
# here so a runner can grant exactly these without importing the MCP SDK into the daemon
FILES_SERVER = "memoryd-folder"
FILES_TOOLS = ("read", "list", "write", "edit", "delete")

__all__ = [
    "FILES_SERVER",
    "FILES_TOOLS",
    "AgentRun",
    "Answer",
    "RecordRun",
    "Runner",
]


@dataclass(frozen=True)
class Answer:
    """A structured answer: the parsed object when the runner validated one, else its text."""

    structured: Any
    text: str
    usage: CallUsage
    model: str | None
    estimated: bool = False


@dataclass(frozen=True)
class AgentRun:
    """What one consolidation run cost, and how it ended (``ok``, ``error``, ``aborted``)."""

    usage: CallUsage
    model: str | None
    outcome: str = "ok"
    estimated: bool = False


# phase 2 records every run, also one that failed or was cancelled: the tokens were spent
RecordRun = Callable[[AgentRun], None]


class Runner(Protocol):
    name: str

    async def answer(
        self,
        *,
        key: str,
        system: str,
        text: str,
        schema: dict[str, Any],
        model: str | None,
        timeout: float,
    ) -> Answer:
        """One tool-less prompt whose answer must match ``schema`` (``key`` names the job)."""
        ...

    async def consolidate(
        self, *, text: str, model: str | None, timeout: float, record: RecordRun
    ) -> None:
        """One agent run that may change only the consolidator's files in the memory folder."""
        ...


def estimate_tokens(text: str) -> int:
    """About four characters a token: the label ``estimated`` says how rough this is."""
    return max(1, len(text) // 4) if text else 0


def estimated_usage(sent: str, received: str) -> CallUsage:
    return CallUsage(estimate_tokens(sent), estimate_tokens(received))
