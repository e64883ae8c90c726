"""``memoryd mcp`` starts here: answer ``initialize`` at once, then hand the wire to the SDK.

Codex waits about a second for an MCP server at start, and importing the ``mcp`` SDK alone takes
longer than that on a loaded machine, so a server that lets the SDK answer the handshake is often
missing from the first request. This module imports only the standard library. It takes the
stdio wire (fd 0 and 1 are pointed at the null device and stderr, so a stray print cannot corrupt
it), starts the heavy imports in a thread, reads the first message and, when it is
``initialize``, answers it from the same constants the SDK server is built from. The SDK then
gets the wire with that first message replayed; its own answer to it is dropped
(:func:`memoryd.mcp_server.serve_wire`), so the session state is the SDK's as if it had answered.
A first message that is anything else is simply replayed, and the SDK answers everything.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from memoryd import __version__

SERVER_NAME = "memoryd"
INSTRUCTIONS = (
    "Long-term memory of this user's earlier coding sessions (decisions, preferences, conventions, "
    "fixes). Start with memory_search; open what it finds with memory_read. Save something only when "
    "the user asks you to remember it (memory_add_note). Reads default to this project and global "
    "memory (scope='project'); scope='global' or 'all' narrows or widens them."
)
# What the SDK's server negotiates through ``initialize`` and the capabilities it announces for
# memoryd's server; a unit test holds both to the installed SDK.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
MAX_FIRST_LINE = 1 << 20


def initialize_result(params: Any) -> dict[str, Any]:
    """The ``initialize`` result the SDK server would give for these request params."""
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": version,
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }


def early_answer(line: bytes) -> tuple[bytes | None, Any]:
    """The response to write for the first message (``None`` unless it is a valid
    ``initialize`` request), and the request id the SDK's own answer will carry."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(msg, dict) or msg.get("method") != "initialize" or "id" not in msg:
        return None, None
    rid = msg["id"]
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return None, None
    params = msg.get("params")
    if not _valid_params(params):
        return None, None  # let the SDK report a malformed handshake its own way
    reply = {"jsonrpc": "2.0", "id": rid, "result": initialize_result(params)}
    return (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8"), rid


def _valid_params(params: Any) -> bool:
    """The fields the SDK requires of ``initialize`` params, with their types."""
    if not isinstance(params, dict) or not isinstance(params.get("protocolVersion"), str):
        return False
    info = params.get("clientInfo")
    return (
        isinstance(params.get("capabilities"), dict)
        and isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
    )


def read_line(fd: int) -> bytes:
    """One line from ``fd``, byte by byte so nothing past it is consumed (the SDK reads the rest)."""
    out = bytearray()
    while len(out) < MAX_FIRST_LINE:
        b = os.read(fd, 1)
        if not b:
            break
        out += b
        if b == b"\n":
            break
    return bytes(out)


def claim_wire() -> tuple[int, int]:
    """Private copies of the stdio wire; fd 0 reads EOF and fd 1 goes to stderr from now on."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def main(argv: list[str]) -> int:
    """``memoryd mcp``: the fast handshake, then the SDK server until the client hangs up."""
    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            from memoryd import mcp_server
            from memoryd.app import App
            from memoryd.runtime.logconfig import configure

            configure(0)
            app = App()
            loaded["run"] = lambda wire_in, wire_out, first, drop: mcp_server.serve_wire(
                app, wire_in, wire_out, first, drop
            )
        except BaseException as exc:  # reported below, on the main thread
            loaded["error"] = exc

    wire_in, wire_out = claim_wire()
    loader = threading.Thread(target=load, name="memoryd-mcp-load", daemon=True)
    loader.start()
    first = read_line(wire_in)
    drop: Any = None
    if first:
        reply, drop = early_answer(first)
        if reply is not None:
            write_all(wire_out, reply)
    loader.join()
    if "error" in loaded:
        print(f"memoryd mcp: cannot start: {loaded['error']}", file=sys.stderr)
        return 1
    if not first:
        return 0  # the client went away before saying anything
    code: int = loaded["run"](wire_in, wire_out, first, drop)
    return code
