"""The MCP server over stdio, driven by the official SDK client: list the tools, call each one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

from memoryd.cli.mcp_server import MODEL_TOOLS
from memoryd.clock import ManualClock
from memoryd.paths import Paths
from memoryd.store import Store
from tests.narrow import checked, present

pytestmark = pytest.mark.anyio
EXPECTED = {
    "memory_read",
    "memory_list",
    "memory_search",
    "memory_add_note",
    "memory_inspect",
}


def seed(home: Path) -> str:
    paths = Paths.from_env({"MEMORYD_HOME": str(home)})
    paths.ensure_dir(paths.memories)
    (paths.memories / "MEMORY.md").write_text(
        "# Memory\n- The team deploys with `make ship` on Fridays.\n"
    )
    store = Store(paths.db, clock=ManualClock())
    c = store.stage1.claim_stage1("ses_mcpseed0001", 1, max_running=2, worker_id="t")
    store.stage1.mark_stage1_succeeded(
        "ses_mcpseed0001",
        present(c.token),
        raw_memory="deploys with make ship",
        rollout_summary="shipping",
        rollout_slug=None,
        cwd="/p",
        title="ship",
    )
    store.close()
    return "ses_mcpseed0001"


async def test_list_and_call_every_tool(memoryd_home: Path) -> None:
    sid = seed(memoryd_home)
    env = {"MEMORYD_HOME": str(memoryd_home), "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memoryd", "mcp"], env=env)

    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == EXPECTED == set(MODEL_TOOLS)
        assert all(t.description and len(t.description) > 30 for t in tools.values())

        async def call(name: str, **args: object) -> str:
            res = await session.call_tool(name, args)
            assert not res.is_error, res
            return checked(TextContent, res.content[0]).text

        assert "make ship" in await call("memory_read", path="MEMORY.md")
        assert "MEMORY.md" in await call("memory_list")
        assert "make ship" in await call("memory_search", queries=["make ship"])
        assert "make ship" in await call("memory_search", queries=["ship"], ranked=True)
        # no opencode shows the user asking for it: held for the user, not in memory
        assert "held for the user's review" in await call(
            "memory_add_note", note="Prefer small PRs.", title="pr size"
        )
        assert "phase 2" in await call("memory_inspect")

        async def failing(name: str, **args: object) -> str:
            res = await session.call_tool(name, args)
            assert res.is_error, res
            return checked(TextContent, res.content[0]).text

        assert "refused" in await failing(
            "memory_add_note", note="token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
        )
        assert "memory_read error:" in await failing("memory_read", path="../../etc/passwd")
        assert "memory_list error:" in await failing("memory_list", path="nope/none")
        assert "memory_search error:" in await failing("memory_search", queries=[])
        # erasing is the user's call: a model cannot reach it, confirm or not
        for name, args in (
            ("memory_reset", {"confirm": True}),
            ("memory_forget", {"session_id": sid}),
            ("memory_mode", {"mode": "polluted", "session_id": sid}),
        ):
            assert "unknown tool" in (await failing(name, **args)).lower()
        assert "make ship" in await call("memory_read", path="MEMORY.md")

    store = Store(Paths.from_env({"MEMORYD_HOME": str(memoryd_home)}).db, clock=ManualClock())
    try:
        assert store.outputs.output_count() == 1
        assert store.outputs.memory_mode(sid) in (None, "enabled")
    finally:
        store.close()
