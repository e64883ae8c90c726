"""MCP as Claude Code and Codex need it: read-only annotations, plain text, a fast handshake that
the SDK server then carries on from as if it had answered itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from memoryd.cli.mcp_server import READ_ONLY_TOOLS
from memoryd.host.client_config import READ_TOOLS
from memoryd.mcp_handshake import HANDSHAKE_VERSIONS, early_answer
from memoryd.paths import Paths


def init_line(version: object = "2025-06-18", rid: object = 7) -> bytes:
    msg = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    return (json.dumps(msg) + "\n").encode()


SDK_ONLY = (
    "from memoryd.store.home import App\nfrom memoryd.cli.mcp_server import serve\nserve(App())\n"
)


def sdk_answer(home: Path, line: bytes) -> dict[str, object]:
    """What the SDK's own stdio server answers (the path without the early answer)."""
    proc = subprocess.run(
        [sys.executable, "-c", SDK_ONLY],
        input=line,
        capture_output=True,
        env={**os.environ, "MEMORYD_HOME": str(home)},
        timeout=120,
    )
    answer: dict[str, object] = json.loads(proc.stdout.splitlines()[0])
    return answer


@pytest.mark.slow  # starts real processes and waits on them
def test_the_early_answer_is_the_sdk_servers_answer(memoryd_home: Path) -> None:
    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == HANDSHAKE_VERSIONS
    for version in ("2024-11-05", "1999-01-01"):
        line = init_line(version)
        reply, _ = early_answer(line)
        assert reply is not None
        assert json.loads(reply) == sdk_answer(memoryd_home, line)
    bad = init_line().replace(b', "version": "1"', b"")
    assert "error" in sdk_answer(memoryd_home, bad) and early_answer(bad) == (None, None)


def test_only_a_wellformed_initialize_is_answered_early() -> None:
    reply, rid = early_answer(init_line())
    assert rid == 7 and reply is not None and json.loads(reply)["id"] == 7
    for line in (
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        b"not json\n",
        init_line(version=None),
        init_line(rid=True),
        b'{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18"}}\n',
        init_line().replace(b', "version": "1"', b""),  # the SDK refuses it: so do we
    ):
        assert early_answer(line) == (None, None)


def test_one_answer_to_initialize_then_the_sdk_serves(memoryd_home: Path) -> None:
    """The SDK's own answer to the replayed initialize never reaches the client."""
    env = {**os.environ, "MEMORYD_HOME": str(memoryd_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(init_line(rid="a"))
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        assert first["id"] == "a" and first["result"]["serverInfo"]["name"] == "memoryd"
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.write(b'{"jsonrpc":"2.0","id":"b","method":"tools/list","params":{}}\n')
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline())
        assert second["id"] == "b", second  # not a second answer to "a"
        assert len(second["result"]["tools"]) == 5
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def test_read_tools_of_the_install_are_the_servers_read_only_tools() -> None:
    assert READ_TOOLS == READ_ONLY_TOOLS


@pytest.mark.anyio
async def test_annotations_plain_text_and_errors(memoryd_home: Path) -> None:
    paths = Paths.from_env({"MEMORYD_HOME": str(memoryd_home)})
    paths.ensure_dir(paths.memories)
    (paths.memories / "MEMORY.md").write_text("# Memory\n- Deploy with make ship.\n")
    env = {"MEMORYD_HOME": str(memoryd_home), "PATH": os.environ.get("PATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memoryd", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        for name, tool in tools.items():
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (name in READ_ONLY_TOOLS), name
            assert tool.output_schema is None  # no structured wrapper announced
        res = await session.call_tool("memory_read", {"path": "MEMORY.md"})
        assert not res.is_error and res.structured_content is None
        assert isinstance(res.content[0], TextContent)
        assert res.content[0].text.startswith("# Memory\n- Deploy with make ship.")
        bad = await session.call_tool("memory_read", {"path": "../../etc/passwd"})
        assert isinstance(bad.content[0], TextContent)
        assert bad.is_error and "memory_read error:" in bad.content[0].text


def start(home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "memoryd", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MEMORYD_HOME": str(home)},
    )


def session(home: Path) -> list[dict[str, object]]:
    """initialize, initialized, tools/list, ping: every line the server writes, in order."""
    proc = start(home)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(init_line(rid=1))
        proc.stdin.flush()
        out = [json.loads(proc.stdout.readline())]
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}\n')
        proc.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
        proc.stdin.flush()
        while out[-1].get("id") != 3:
            out.append(json.loads(proc.stdout.readline()))
        return out
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


@pytest.mark.slow  # starts real processes and waits on them
def test_the_tool_list_comes_early_from_what_the_sdk_answered_last_time(
    memoryd_home: Path,
) -> None:
    from memoryd.mcp_handshake import tools_cache, tools_cache_key

    paths = Paths.from_env({"MEMORYD_HOME": str(memoryd_home)})
    cache = tools_cache(paths)
    assert not cache.exists()
    first = session(memoryd_home)  # no copy yet: the SDK answers, and its answer is kept
    assert [m["id"] for m in first] == [1, 2, 3]
    kept = json.loads(cache.read_text())
    assert kept == {"key": tools_cache_key(), "result": first[1]["result"]}
    second = session(memoryd_home)
    assert [m["id"] for m in second] == [1, 2, 3]  # one answer each: the SDK's copy dropped
    assert second[1]["result"] == first[1]["result"]
    # a copy made for other code is never served: the SDK answers (and the copy is renewed)
    cache.write_text(json.dumps({"key": "other", "result": {"tools": []}}))
    third = session(memoryd_home)
    assert third[1]["result"] == first[1]["result"]
    assert json.loads(cache.read_text())["key"] == tools_cache_key()


def test_only_the_first_page_of_tools_and_initialized_are_answered_early() -> None:
    from memoryd.mcp_handshake import early_more

    tools = {"tools": [{"name": "t"}]}
    assert early_more(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', tools) == (
        True,
        None,
        None,
    )
    more, reply, rid = early_more(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}', tools)
    assert more and rid == 5 and reply is not None and json.loads(reply)["result"] == tools
    for line in (
        b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"x"}}',
        b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"memory_list"}}',
        b"nonsense",
    ):
        assert early_more(line, tools) == (False, None, None)
    assert early_more(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}', None) == (
        False,
        None,
        None,
    )
