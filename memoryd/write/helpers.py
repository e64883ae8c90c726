"""memoryd's helper sessions in the host: make sure the agent exists, run, always clean up.

Both phases talk to the model the same way: a dedicated opencode session (tagged with a
``memoryd-`` title and metadata so discovery never mistakes it for user work), one prompt naming
memoryd's own agent, and a delete afterwards — also when the prompt failed or was cancelled, so
no helper session is ever left behind in the user's session list. Each helper is recorded in the
store (with its owning process) before it is prompted, so if memoryd is killed the next one can
delete it at once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from memoryd.errors import (
    AgentMissing,
    HostError,
    HostNotFound,
)
from memoryd.host.agents import agent_homes, write_agent_config
from memoryd.host.models import PromptResult, Session
from memoryd.host.opencode import HELPER_METADATA_KEY, OpencodeClient
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.store.ledger import CallUsage

log = logging.getLogger(__name__)

# the titles memoryd gives its helper sessions (a user's fork of one gets another title)
# (a Claude Code or Codex session's extraction names its namespaced id: memoryd.host.ids)
_HELPER_TITLE = re.compile(
    r"memoryd-(extract-(?:ses_[A-Za-z0-9]+|(?:claude-code|codex):[A-Za-z0-9-]+)|consolidate)"
)

NONCE_KEY = "memoryd_nonce"  # metadata that ties a helper session to its record in memory.db
PENDING_PREFIX = "pending:"  # a record made before the helper was created (its nonce)

# opencode adds these whenever an MCP server is configured, whatever the agent's permissions say;
# memoryd's helpers must not browse other servers' resources, so every helper prompt removes them.
UNGOVERNED_TOOLS = ("list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource")


def is_own_helper(s: Session) -> bool:
    """Both marks memoryd gives its helper sessions: the exact title form and the metadata tag.

    A user's fork of a helper copies the metadata but not the title, and a user's session may be
    titled anything: one mark alone never makes a session memoryd's.
    """
    tag = (s.metadata or {}).get(HELPER_METADATA_KEY)
    return tag in ("extract", "consolidate") and bool(_HELPER_TITLE.fullmatch(s.title))


async def ensure_agent(client: OpencodeClient, paths: Paths, name: str) -> str:
    """Define ``name`` where its sessions run and make sure opencode sees it; returns that folder.

    The definition lives in a project config only memoryd's own instances load
    (:mod:`memoryd.host.agents`), so the user's sessions never list memoryd's helpers.
    """
    directory = str(agent_homes(paths)[name].session_dir)
    if write_agent_config(paths, name):
        # opencode reads config once per instance; a dispose makes a booted one read it again.
        await client.dispose_instance(directory)
    names = {a.get("name") for a in await client.agents(directory=directory)}
    if name not in names:
        await client.dispose_instance(directory)
        names = {a.get("name") for a in await client.agents(directory=directory)}
    if name not in names:
        raise AgentMissing(name, str(agent_homes(paths)[name].config_file), directory)
    return directory


@asynccontextmanager
async def helper_session(
    client: OpencodeClient,
    *,
    directory: str,
    title: str,
    metadata: dict[str, Any],
    store: Store | None = None,
    permission: list[dict[str, Any]] | None = None,
) -> AsyncIterator[Session]:
    """Create, yield, always delete. With a store, the helper is recorded *before* it exists
    (under a nonce it carries in its metadata), so even one whose create answer was lost (a reset
    or garbled reply after opencode made it) can be found and deleted by the next pass."""
    pending = None
    if store is not None:
        nonce = uuid.uuid4().hex[:16]
        metadata = {**metadata, NONCE_KEY: nonce}
        pending = PENDING_PREFIX + nonce
        store.owners.record_helper(pending, str(metadata.get("memoryd", "helper")))
    try:
        session = await client.create_session(
            directory=directory, title=title, metadata=metadata, permission=permission
        )
    except BaseException:
        if store is not None and pending is not None:
            store.owners.mark_helper_lost(
                pending
            )  # it may exist anyway: the next pass looks for it
        raise
    try:
        if store is not None and pending is not None:
            store.owners.rename_helper(pending, session.id)
        yield session
    finally:
        await asyncio.shield(_delete(client, session.id, store))


async def _delete(client: OpencodeClient, session_id: str, store: Store | None = None) -> bool:
    try:
        if not await client.delete_session(session_id):
            log.warning("helper session %s could not be confirmed deleted", session_id)
            return False
    except HostNotFound:
        pass  # already gone: nothing left to clean
    except HostError as exc:
        log.warning("could not delete helper session %s: %s", session_id, exc)
        return False
    if store is not None:
        store.owners.forget_helper(session_id)
    return True


async def remove_orphaned_helpers(
    client: OpencodeClient, store: Store, listed: Sequence[Session] = ()
) -> int:
    """Delete the helper sessions of a memoryd that was killed (recorded, owner provably gone),
    and those whose create answer never arrived (found in ``listed`` by their nonce)."""
    removed = 0
    for sid in store.owners.orphaned_helpers():
        # Abort first: a delete alone does not stop a turn opencode is about to send to the
        # model (the storm saw such calls land after the helper was gone: paid for nothing).
        await client.abort(sid)
        if await _delete(client, sid, store):
            removed += 1
            log.info("removed helper session %s left by a memoryd that was killed", sid)
    lost = store.owners.lost_helper_nonces()
    for s in listed:
        nonce = (s.metadata or {}).get(NONCE_KEY)
        if not isinstance(nonce, str) or nonce not in lost:
            continue
        await client.abort(s.id)
        if await _delete(client, s.id, store):
            store.owners.forget_helper(PENDING_PREFIX + nonce)
            removed += 1
            log.info("removed helper session %s whose creation memoryd never heard back", s.id)
    return removed


async def remove_stale_helpers(
    client: OpencodeClient, listed: Sequence[Session], cutoff_ms: int
) -> int:
    """Helper sessions left by a memoryd killed mid-prompt are deleted once clearly dead (not
    updated since ``cutoff_ms``): the fallback for helpers no record names.

    Both marks must be ours (the exact title form and the metadata tag): a user's fork of a
    helper copies the metadata but not the title, and must never be deleted.
    """
    removed = 0
    for s in listed:
        if is_own_helper(s) and s.time.updated < cutoff_ms:
            await client.abort(s.id)
            try:
                if await client.delete_session(s.id):
                    removed += 1
                    log.info(
                        "removed helper session %s left behind by an interrupted memoryd", s.id
                    )
            except HostError as exc:
                log.warning("could not remove stale helper session %s: %s", s.id, exc)
    return removed


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
