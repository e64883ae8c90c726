"""The model runs in opencode, as it always has: memoryd's helper agents in helper sessions.

Phase 1's extraction is a tool-less helper session answering with structured output; phase 2's
consolidation is a helper session rooted in the memory folder under the permission rules of
:mod:`memoryd.host.permissions`, in an instance booted afresh from the swept folder and disposed
afterwards, and failed when a host session wrote the folder meanwhile. This module is that code
behind the :class:`~memoryd.runner.base.Runner` interface; the helpers it uses stay where they
were (:mod:`memoryd.write.helpers`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from memoryd.errors import ConfinementError, HostError, ModelCallError
from memoryd.folder import rollback
from memoryd.folder.confine import planted_parent_config
from memoryd.host.agents import CONSOLIDATE_AGENT, EXTRACT_AGENT, agent_homes, config_text
from memoryd.host.ids import OPENCODE
from memoryd.host.opencode import OpencodeClient
from memoryd.host.permissions import consolidator_rules
from memoryd.paths import Paths
from memoryd.runner.base import AgentRun, Answer, RecordRun
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.ledger import CallUsage
from memoryd.write import agent_edits
from memoryd.write.helpers import (
    UNGOVERNED_TOOLS,
    ensure_agent,
    helper_session,
    model_name,
    session_usage,
    usage_of,
)

log = logging.getLogger(__name__)


async def confinement(client: OpencodeClient, paths: Paths) -> list[dict[str, str]]:
    """Boot opencode afresh in the (swept) folder; the session rules for it, or refuse."""
    root = str(paths.memories)
    # An instance booted earlier may hold config loaded before the sweep: start a new one.
    await client.dispose_instance(root)
    worktree = await client.worktree(root)
    # memoryd's own agent definition sits in the parent: allowed while its bytes are ours
    home = agent_homes(paths)[CONSOLIDATE_AGENT]
    ours = {home.config_file: config_text(CONSOLIDATE_AGENT).encode("utf-8")}
    planted = planted_parent_config(paths.memories, worktree, managed=ours)
    if planted:
        raise ConfinementError(
            "opencode would load these into the consolidator's session from folders above "
            "the memory folder; remove them or move MEMORYD_HOME",
            [str(p) for p in planted],
        )
    return consolidator_rules(root, worktree)


class OpencodeRunner:
    name = OPENCODE

    def __init__(
        self, client: OpencodeClient, *, store: Store, paths: Paths, settings: Settings
    ) -> None:
        self.client = client
        self.store = store
        self.paths = paths
        self.settings = settings

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
        directory = str(self.paths.helper_dir)  # Phase1 defines the agent there before any claim
        async with helper_session(
            self.client,
            directory=directory,
            title=f"memoryd-extract-{key}",
            metadata={"memoryd": "extract", "source_session": key},
            store=self.store,
        ) as helper:
            result = await self.client.prompt(
                helper.id,
                directory=directory,
                text=text,
                agent=EXTRACT_AGENT,
                model=model,
                system=system,
                json_schema=schema,
                disable_tools=UNGOVERNED_TOOLS,
                timeout=timeout,
            )
        return Answer(result.structured, result.text, usage_of(result), model_name(model, result))

    async def consolidate(
        self, *, text: str, model: str | None, timeout: float, record: RecordRun
    ) -> None:
        root = str(self.paths.memories)
        rules = await confinement(self.client, self.paths)
        started = rollback.wall_ms()
        try:
            await self._run(root, rules, text, model, timeout, record)
        finally:
            try:  # nothing the run left behind stays loaded in a long-lived server
                await asyncio.shield(self.client.dispose_instance(root))
            except HostError as exc:
                log.warning("could not dispose the memory folder's opencode instance: %s", exc)
        await agent_edits.refuse_host_writes(self.client, self.store, self.paths, started)

    async def _run(
        self,
        root: str,
        rules: list[dict[str, str]],
        text: str,
        model: str | None,
        timeout: float,
        record: RecordRun,
    ) -> None:
        await ensure_agent(self.client, self.paths, CONSOLIDATE_AGENT)
        async with helper_session(
            self.client,
            directory=root,
            title="memoryd-consolidate",
            metadata={"memoryd": "consolidate"},
            store=self.store,
            permission=rules,
        ) as helper:
            outcome = "ok"
            try:
                await self.client.prompt(
                    helper.id,
                    directory=root,
                    text=text,
                    agent=CONSOLIDATE_AGENT,
                    # No per-prompt tools map: opencode 1.18 turns one into the session's whole
                    # permission list, replacing the rules above. Those rules deny the MCP
                    # resource tools' reads ("mcp:*") instead.
                    model=model,
                    timeout=timeout,
                )
            except ModelCallError:
                outcome = "error"
                raise
            except BaseException:
                outcome = "aborted"
                raise
            finally:
                usage = CallUsage()
                try:
                    usage = session_usage(await self.client.get_session(helper.id))
                except HostError as exc:
                    log.warning("could not read token usage of the consolidation session: %s", exc)
                record(AgentRun(usage, model, outcome))
