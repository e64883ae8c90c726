"""``memoryd mcp``: the memory tools over MCP (stdio), on the official ``mcp`` SDK.

The tools are thin: each one calls the same function the CLI calls (:mod:`memoryd.tools`) and
returns its readable text. A failure reaches the host as a tool error (``isError: true``) whose
text starts with ``<tool> error:``, so the model can tell it from an answer and act on it. Tool
descriptions are written for a model deciding when and how to call them.

Only looking and noting are offered (:data:`MODEL_TOOLS`). Erasing or excluding memory
(``memoryd forget``, ``memoryd mode``, ``memoryd reset``) is the user's decision, and a model's
``confirm=true`` is not the user's consent: a model steered by text it read would give it just
as readily. Those operations live in the CLI only, so with no one at the keyboard nothing can be
erased.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import cached_property
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memoryd import __version__, tools
from memoryd.errors import MemorydError
from memoryd.host.live import LiveServer, find_server
from memoryd.store.home import App
from memoryd.tools.hits import SearchQuery
from memoryd.tools.proposed import MCP, model_note
from memoryd.tools.scope import Scope, ScopeMode

log = logging.getLogger(__name__)

SERVER_NAME = "memoryd"
INSTRUCTIONS = (
    "Long-term memory of this user's earlier coding sessions (decisions, preferences, conventions, "
    "fixes). Start with memory_search; open what it finds with memory_read. Save something only when "
    "the user asks you to remember it (memory_add_note). Reads default to this project and global "
    "memory (scope='project'); scope='global' or 'all' narrows or widens them."
)

# Everything a model may call. Forgetting, session modes and reset are deliberately absent.
MODEL_TOOLS = ("memory_read", "memory_list", "memory_search", "memory_add_note", "memory_inspect")


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
        description=(
            "Read a file from the memory folder (paths relative to it, e.g. 'MEMORY.md' or "
            "'rollout_summaries/<file>.md'). Use line_offset (1-based) and max_lines to page through long "
            "files; output is capped at 256 KiB with a hint for the next page."
        )
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
        description=(
            "List one folder of the memory (default: the top). Entries are marked d (folder) or f (file)."
        )
    )
    def memory_list(
        path: str = "", max_results: int | None = None, scope: ScopeMode = "project"
    ) -> str:
        return t.call(
            "memory_list", lambda: tools.memory_list(root, path, max_results, me.with_mode(scope))
        )

    @server.tool(
        description=(
            "Search memory. Give one or more queries. ranked=true uses a full-text index (best matches first, "
            "covers every session memory) — good for topics; ranked=false scans files line by line — good for "
            "exact strings, with match_mode any | all_on_same_line | all_within_lines (needs line_count), "
            "context_lines, case_sensitive (default true) and normalized (ignore case, accents and "
            "punctuation). since/until (date or ISO time) restrict to dated files (session summaries, notes). "
            "Page with the returned cursor. scope: project (default: this project + global), global, all."
        )
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
        description=(
            "Save a note the user explicitly asked you to remember (1–4000 characters, optional title). Notes "
            "are kept verbatim and folded into memory at the next consolidation; one the user did not ask for "
            "waits for their review. Notes containing secrets are refused."
        )
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
        description="Report memoryd's state: jobs, consolidation, budget, recent errors, memory folder."
    )
    def memory_inspect() -> str:
        return t.call(
            "memory_inspect", lambda: tools.memory_inspect(app.store, app.settings, app.paths)
        )

    return server


def serve(app: App) -> None:
    build_server(app).run("stdio")
