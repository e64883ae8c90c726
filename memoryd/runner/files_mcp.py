"""``memoryd runner-files ROOT``: the consolidator's file tools (:mod:`memoryd.runner.folder_tools`)
over MCP on stdio, for a client CLI whose own file tools are switched off.

The client starts this process for one consolidation and ends it with the run. It loads no
settings, store or host: the one thing it knows is the memory folder it was given, so there is
nothing else for a steered model to reach through it. Every failure is an ``isError`` result
naming the problem, so the model can correct itself and the run goes on.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memoryd import __version__
from memoryd.errors import MemorydError
from memoryd.runner import folder_tools as files
from memoryd.runner.base import FILES_SERVER as SERVER_NAME

log = logging.getLogger(__name__)
INSTRUCTIONS = (
    "The memory folder you consolidate. Every path is relative to it. Read and list anything in "
    "it; write, edit or delete only MEMORY.md, memory_summary.md, skills/**/*.md and the project "
    "layers projects/<key>/memory_summary.md and projects/<key>/MEMORY.md."
)


def _call(name: str, fn: Callable[[], str]) -> str:
    try:
        return fn()
    except MemorydError as exc:
        raise ToolError(f"{name} error: {exc}") from exc
    except Exception as exc:  # a bug must not end the run: the model sees it as a failed call
        log.exception("%s failed", name)
        raise ToolError(f"{name} error: internal error ({type(exc).__name__})") from exc


def build_server(root: Path) -> MCPServer:
    server = MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)

    @server.tool(
        name="read",
        description="Read a file of the memory folder (or list a directory). line_offset is "
        "1-based; max_lines limits the window. The run's diff is phase2_workspace_diff.md.",
        structured_output=False,
    )
    def read_tool(path: str, line_offset: int | None = None, max_lines: int | None = None) -> str:
        return _call("read", lambda: files.read(root, path, line_offset, max_lines))

    @server.tool(
        name="list",
        description="List a directory of the memory folder (default: its top).",
        structured_output=False,
    )
    def list_tool(path: str | None = None) -> str:
        return _call("list", lambda: files.listing(root, path))

    @server.tool(
        name="write",
        description="Create or replace one of your files with the whole new content.",
        structured_output=False,
    )
    def write_tool(path: str, content: str) -> str:
        return _call("write", lambda: files.write(root, path, content))

    @server.tool(
        name="edit",
        description="Replace old with new in one of your files (old must occur exactly once "
        "unless replace_all is true).",
        structured_output=False,
    )
    def edit_tool(path: str, old: str, new: str, replace_all: bool = False) -> str:
        return _call("edit", lambda: files.edit(root, path, old, new, replace_all))

    @server.tool(
        name="delete",
        description="Delete one of your files (an outdated skill, for instance).",
        structured_output=False,
    )
    def delete_tool(path: str) -> str:
        return _call("delete", lambda: files.delete(root, path))

    return server


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_absolute():
        print("usage: memoryd runner-files /absolute/path/to/memories", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    build_server(Path(argv[0])).run("stdio")
    return 0
