"""memoryd's helper sessions in the host: make sure the agent exists, run, always clean up.

Both phases talk to the model the same way: a dedicated opencode session (tagged with a
``memoryd-`` title and metadata so discovery never mistakes it for user work), one prompt naming
memoryd's own agent, and a delete afterwards — also when the prompt failed or was cancelled, so
no helper session is ever left behind in the user's session list.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from memoryd.clock import Clock
from memoryd.errors import HostError, MemorydError
from memoryd.host.models import PromptResult, Session
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.store import CallUsage, Store
from memoryd.write.budget import Budget

log = logging.getLogger(__name__)

# opencode adds these whenever an MCP server is configured, whatever the agent's permissions say;
# memoryd's helpers must not browse other servers' resources, so every helper prompt removes them.
UNGOVERNED_TOOLS = ("list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource")


async def ensure_agent(client: OpencodeClient, name: str, directory: str) -> None:
    """Fail clearly unless opencode knows ``name`` for sessions in ``directory``."""
    names = {a.get("name") for a in await client.agents(directory=directory)}
    if name not in names:
        # opencode reads agent files once per instance; a dispose makes it look again.
        await client.dispose_instance(directory)
        names = {a.get("name") for a in await client.agents(directory=directory)}
    if name not in names:
        raise MemorydError(
            f"opencode does not know the {name!r} agent; run `memoryd install opencode` "
            "(and restart opencode if it was running)"
        )


@asynccontextmanager
async def helper_session(
    client: OpencodeClient,
    *,
    directory: str,
    title: str,
    metadata: dict[str, Any],
    permission: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Session]:
    session = await client.create_session(
        directory=directory, title=title, metadata=metadata, permission=permission
    )
    try:
        yield session
    finally:
        await asyncio.shield(_delete(client, session.id))


async def _delete(client: OpencodeClient, session_id: str) -> None:
    try:
        if not await client.delete_session(session_id):
            log.warning("helper session %s could not be confirmed deleted", session_id)
    except HostError as exc:
        log.warning("could not delete helper session %s: %s", session_id, exc)


def usage_of(result: PromptResult) -> CallUsage:
    u = result.usage
    return CallUsage(
        u.input, u.output, u.reasoning, u.cache_read, u.cache_write, result.info.cost or 0.0
    )


def session_usage(session: Session) -> CallUsage:
    """Token totals opencode keeps on a session (all steps of an agent loop, not just the last)."""
    extra = session.model_extra or {}
    tokens = extra.get("tokens") or {}
    cache = tokens.get("cache") or {}

    def num(v: Any) -> int:
        return int(v) if isinstance(v, (int, float)) else 0

    cost = extra.get("cost")
    return CallUsage(
        num(tokens.get("input")),
        num(tokens.get("output")),
        num(tokens.get("reasoning")),
        num(cache.get("read")),
        num(cache.get("write")),
        float(cost) if isinstance(cost, (int, float)) else 0.0,
    )


def model_name(configured: str | None, result: PromptResult) -> str | None:
    info = result.info
    return configured or (f"{info.providerID}/{info.modelID}" if info.modelID else None)


class PhaseBase:
    """What both phases work with: the store, the host, settings, paths, the clock and the budget."""

    def __init__(
        self,
        *,
        store: Store,
        client: OpencodeClient,
        settings: Settings,
        paths: Paths,
        clock: Clock,
        worker_id: str,
    ) -> None:
        self.store = store
        self.client = client
        self.settings = settings
        self.paths = paths
        self.clock = clock
        self.worker_id = worker_id
        self.budget = Budget(store, settings, clock)
