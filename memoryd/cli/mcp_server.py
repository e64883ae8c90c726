"""``memoryd mcp``: the memory tools over MCP (stdio), on the official ``mcp`` SDK.

The tools are thin: each one calls the same function the CLI calls (:mod:`memoryd.tools`) and
returns its readable text. A failure reaches the host as a tool error (``isError: true``) whose
text starts with ``<tool> error:``, so the model can tell it from an answer and act on it. Tool
descriptions are written for a model deciding when and how to call them.

Results are plain text (``structured_output=False``: the SDK would otherwise wrap a ``str``
return as ``{"result": …}`` structured content, which both Claude Code and Codex show the model).
The four reading tools say ``readOnlyHint``, so Codex runs them under ``approval_policy =
"never"``; the note tool does not, so a client that gates writes keeps gating it. ``memoryd mcp``
is entered through :mod:`memoryd.mcp_handshake`, which answers ``initialize`` before this module
(and the SDK) has finished importing; :func:`serve_wire` takes over from there.

Only looking and noting are offered (:data:`MODEL_TOOLS`). Erasing or excluding memory
(``memoryd forget``, ``memoryd mode``, ``memoryd reset``) is the user's decision, and a model's
``confirm=true`` is not the user's consent: a model steered by text it read would give it just
as readily. Those operations live in the CLI only, so with no one at the keyboard nothing can be
erased.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import ToolAnnotations

from memoryd import __version__, tools
from memoryd.errors import MemorydError
from memoryd.fsutil import atomic_write, read_regular
from memoryd.host.live import LiveServer, find_server
from memoryd.store.home import App
from memoryd.tools.hits import SearchQuery
from memoryd.tools.proposed import MCP, model_note
from memoryd.tools.scope import Scope, ScopeMode
from memoryd.tuning import MCP_INSTRUCTIONS as INSTRUCTIONS
from memoryd.tuning import MCP_SERVER_NAME as SERVER_NAME

log = logging.getLogger(__name__)

__all__ = ["MODEL_TOOLS", "READ_ONLY_TOOLS", "build_server"]

# Everything a model may call. Forgetting, session modes and reset are deliberately absent.
MODEL_TOOLS = ("memory_read", "memory_list", "memory_search", "memory_add_note", "memory_inspect")
# The ones that change nothing; the note tool is the only one left out.
READ_ONLY_TOOLS = ("memory_read", "memory_list", "memory_search", "memory_inspect")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


class MemoryTools:
    """The tool implementations bound to one memoryd home; created once per server process."""

    def __init__(self, app: App) -> None:
        self.app = app

    @cached_property
    def index(self) -> tools.SearchIndex:
        return tools.SearchIndex(
            tools.default_index_path(self.app.paths.data_dir),
            self.app.paths.memories,
            self.app.store,
        )

    def note_server(self) -> LiveServer | None:
        """Where the calling session is read: the configured opencode, else the shim's record."""
        host = self.app.settings.host
        if host.url:
            return LiveServer(host.url.rstrip("/"), host.username, host.resolved_password())
        return find_server(self.app.paths)

    def call(self, name: str, fn: Callable[[], Any]) -> str:
        """Run one tool; a failure becomes a :class:`ToolError` (an ``isError`` result, never a crash)."""
        try:
            text: str = fn().to_text()
            return text
        except MemorydError as exc:
            raise ToolError(f"{name} error: {exc}") from exc
        except Exception as exc:
            log.exception("%s failed", name)
            raise ToolError(f"{name} error: internal error ({type(exc).__name__}: {exc})") from exc


def build_server(app: App, caller: Scope | None = None) -> MCPServer:
    """The server for one opencode instance: ``caller`` is its project (from the folder opencode
    starts us in), which bounds what the tools show by default and what they may ever change."""
    t = MemoryTools(app)
    root = app.paths.memories
    me = caller or Scope.for_folder(os.getcwd())
    server = MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)

    @server.tool(
        annotations=READ_ONLY,
        structured_output=False,
        description=(
            "Read a file from the memory folder (paths relative to it, e.g. 'MEMORY.md' or "
            "'rollout_summaries/<file>.md'). Use line_offset (1-based) and max_lines to page through long "
            "files; output is capped at 256 KiB with a hint for the next page."
        ),
    )
    def memory_read(
        path: str,
        line_offset: int | None = None,
        max_lines: int | None = None,
        scope: ScopeMode = "project",
    ) -> str:
        return t.call(
            "memory_read",
            lambda: tools.memory_read(root, path, line_offset, max_lines, me.with_mode(scope)),
        )

    @server.tool(
        annotations=READ_ONLY,
        structured_output=False,
        description=(
            "List one folder of the memory (default: the top). Entries are marked d (folder) or f (file)."
        ),
    )
    def memory_list(
        path: str = "", max_results: int | None = None, scope: ScopeMode = "project"
    ) -> str:
        return t.call(
            "memory_list", lambda: tools.memory_list(root, path, max_results, me.with_mode(scope))
        )

    @server.tool(
        annotations=READ_ONLY,
        structured_output=False,
        description=(
            "Search memory. Give one or more queries. ranked=true uses a full-text index (best matches first, "
            "covers every session memory) — good for topics; ranked=false scans files line by line — good for "
            "exact strings, with match_mode any | all_on_same_line | all_within_lines (needs line_count), "
            "context_lines, case_sensitive (default true) and normalized (ignore case, accents and "
            "punctuation). since/until (date or ISO time) restrict to dated files (session summaries, notes). "
            "Page with the returned cursor. scope: project (default: this project + global), global, all."
        ),
    )
    def memory_search(
        queries: list[str] | None = None,
        match_mode: Literal["any", "all_on_same_line", "all_within_lines"] = "any",
        line_count: int | None = None,
        path: str | None = None,
        context_lines: int = 0,
        case_sensitive: bool = True,
        normalized: bool = False,
        since: str | None = None,
        until: str | None = None,
        cursor: str | None = None,
        max_results: int | None = None,
        ranked: bool = False,
        scope: ScopeMode = "project",
    ) -> str:
        return t.call(
            "memory_search",
            lambda: tools.memory_search(
                root,
                SearchQuery(
                    queries,
                    match_mode=match_mode,
                    line_count=line_count,
                    path=path,
                    context_lines=context_lines,
                    case_sensitive=case_sensitive,
                    normalized=normalized,
                    since=since,
                    until=until,
                    cursor=cursor,
                    max_results=max_results,
                    ranked=ranked,
                ),
                index=t.index if ranked else None,
                scope=me.with_mode(scope),
            ),
        )

    @server.tool(
        annotations=WRITES,
        structured_output=False,
        description=(
            "Save a note the user explicitly asked you to remember (1–4000 characters, optional title). Notes "
            "are kept verbatim and folded into memory at the next consolidation; one the user did not ask for "
            "waits for their review. Notes containing secrets are refused."
        ),
    )
    def memory_add_note(
        note: str, title: str | None = None, scope: Literal["project", "global"] = "project"
    ) -> str:
        return t.call(
            "memory_add_note",
            lambda: model_note(
                app.paths,
                app.clock,
                app.store,
                note,
                title,
                session_id=None,
                project=me.project if scope == "project" else None,
                server=t.note_server(),
                host=MCP,
                directory=os.getcwd(),
            ),
        )

    @server.tool(
        annotations=READ_ONLY,
        structured_output=False,
        description="Report memoryd's state: jobs, consolidation, budget, recent errors, memory folder.",
    )
    def memory_inspect() -> str:
        return t.call(
            "memory_inspect", lambda: tools.memory_inspect(app.store, app.settings, app.paths)
        )

    return server


def serve(app: App) -> None:
    """The SDK's own stdio server, answering the handshake itself (the path before the early
    answer; ``bench/mcp_startup.py`` still times it)."""
    build_server(app).run("stdio")


class _Wire:
    """What the two ends share: the ids already answered early, and the ids of ``tools/list``
    requests, whose first-page answer is kept for the next start's early answer."""

    def __init__(self, drops: set[Any], cache: Path, key: str) -> None:
        self.drops, self.cache, self.key = set(drops), cache, key
        self.list_ids: set[Any] = set()

    def saw(self, line: str) -> None:
        if '"tools/list"' not in line:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if (
            isinstance(msg, dict)
            and msg.get("method") == "tools/list"
            and "id" in msg
            and not (msg.get("params") or {}).get("cursor")
        ):
            self.list_ids.add(msg["id"])

    def keep(self, result: Any) -> None:
        if not isinstance(result, dict) or result.get("nextCursor"):
            return
        data = json.dumps({"key": self.key, "result": result}, sort_keys=True)
        try:
            if read_regular(self.cache) != data.encode():
                self.cache.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.cache, data)
        except (OSError, MemorydError) as exc:
            log.warning("tool list not kept for the next start: %s", exc)


class _Replay:
    """The wire's lines for the SDK, the ones the handshake already read replayed first."""

    def __init__(self, first: list[str], rest: Any, wire: _Wire) -> None:
        self.first, self.rest, self.wire = first, rest, wire

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        for line in self.first:
            self.wire.saw(line)
            yield line
        async for line in self.rest:
            self.wire.saw(line)
            yield line


class _DropAnswer:
    """The wire towards the client, minus the SDK's answers to requests already answered."""

    def __init__(self, out: Any, wire: _Wire) -> None:
        self.out, self.wire = out, wire

    async def write(self, text: str) -> None:
        if self.wire.drops or self.wire.list_ids:
            try:
                msg = json.loads(text)
            except ValueError:
                msg = None
            if isinstance(msg, dict) and "method" not in msg:
                rid = msg.get("id")
                if rid in self.wire.list_ids:
                    self.wire.list_ids.discard(rid)
                    self.wire.keep(msg.get("result"))
                if rid in self.wire.drops:
                    self.wire.drops.discard(rid)
                    return
        await self.out.write(text)

    async def flush(self) -> None:
        await self.out.flush()


def serve_wire(
    app: App,
    wire_in: int,
    wire_out: int,
    lines: list[bytes],
    drops: set[Any],
    cache: Path,
    key: str,
) -> int:
    """Run the SDK server on the claimed wire (:mod:`memoryd.mcp_handshake`): ``lines`` are the
    messages the handshake read, ``drops`` the ids of the requests it already answered, ``cache``
    where the tool list is kept for the next start's early answer (valid for ``key``)."""
    server = build_server(app)
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, on our streams
    wire = _Wire(drops, cache, key)
    reader = anyio.wrap_file(open(wire_in, encoding="utf-8", errors="replace"))  # noqa: SIM115
    writer = anyio.wrap_file(open(wire_out, "w", encoding="utf-8"))  # noqa: SIM115

    async def run() -> None:
        first = [ln.decode("utf-8", "replace") for ln in lines]
        stdin = _Replay(first, reader, wire)
        stdout = _DropAnswer(writer, wire)
        async with stdio_server(cast(Any, stdin), cast(Any, stdout)) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(run)
    return 0
