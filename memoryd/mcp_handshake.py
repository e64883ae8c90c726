"""``memoryd mcp`` starts here: answer ``initialize`` at once, then hand the wire to the SDK.

Codex waits about a second for an MCP server at start, and importing the ``mcp`` SDK alone takes
longer than that on a loaded machine, so a server that lets the SDK answer the handshake is often
missing from the first request. This module imports only the standard library. It takes the
stdio wire (fd 0 and 1 are pointed at the null device and stderr, so a stray print cannot corrupt
it), starts the heavy imports in a thread, reads the first message and, when it is
``initialize``, answers it from the same constants the SDK server is built from. While the SDK
is still loading it also answers ``tools/list`` from the copy the SDK server itself gave the last
time (:func:`tools_cache`, keyed on memoryd's version and the files that define the tools and
the SDK), since Codex also waits only so long for the list. The SDK then gets the wire with every
message read so far replayed; its own answers to the ones already answered are dropped
(:func:`memoryd.cli.mcp_server.serve_wire`), so the session state is the SDK's as if it had answered.
Anything else stops the early answers: it is replayed, and the SDK answers everything from there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import select
import sys
import threading
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.errors import MemorydError
from memoryd.fsutil import read_regular
from memoryd.paths import Paths
from memoryd.tuning import MCP_INSTRUCTIONS as INSTRUCTIONS
from memoryd.tuning import MCP_SERVER_NAME as SERVER_NAME

# What the SDK's server negotiates through ``initialize`` and the capabilities it announces for
# memoryd's server; a unit test holds both to the installed SDK.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}
MAX_FIRST_LINE = 1 << 20
MAX_CACHE_BYTES = 1 << 20
POLL_S = 0.02  # how often the early reader looks whether the SDK has finished loading


def tools_cache_key() -> str:
    """What the tool list depends on: memoryd's version, the Python, and the bytes of the
    module that defines the tools and of the installed SDK's entry file (found, not imported)."""
    digest = hashlib.sha256(f"{__version__}\n{sys.version}\n".encode())
    here = Path(__file__).parent / "cli" / "mcp_server.py"
    digest.update(here.read_bytes())
    spec = importlib.util.find_spec("mcp")
    origin = spec.origin if spec is not None else None
    if origin:
        st = os.stat(origin)
        digest.update(f"{origin}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


def tools_cache(paths: Paths) -> Path:
    return paths.state_dir / "mcp" / "tools-list.json"


def cached_tools(paths: Paths, key: str) -> dict[str, Any] | None:
    """The ``tools/list`` result the SDK server gave last time, if it was for this ``key``."""
    try:
        raw = read_regular(tools_cache(paths), limit=MAX_CACHE_BYTES)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, MemorydError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    result = data.get("result")
    return result if isinstance(result, dict) and isinstance(result.get("tools"), list) else None


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


def _reply(rid: Any, result: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n").encode()


def early_more(line: bytes, tools: dict[str, Any] | None) -> tuple[bool, bytes | None, Any]:
    """A later message read before the SDK is up: (keep answering early?, reply, its id).

    ``notifications/initialized`` needs no answer; ``tools/list`` (first page) gets the cached
    list; anything else ends the early answers.
    """
    try:
        msg = json.loads(line)
    except ValueError:
        return False, None, None
    if not isinstance(msg, dict):
        return False, None, None
    method = msg.get("method")
    if method == "notifications/initialized" and "id" not in msg:
        return True, None, None
    rid = msg.get("id")
    params = msg.get("params") or {}
    if (
        method == "tools/list"
        and tools is not None
        and isinstance(rid, (str, int))
        and not isinstance(rid, bool)
        and isinstance(params, dict)
        and params.get("cursor") is None
    ):
        return True, _reply(rid, tools), rid
    return False, None, None


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
    paths = Paths.from_env()
    key = tools_cache_key()

    def load() -> None:
        try:
            from memoryd.cli import mcp_server
            from memoryd.runtime.logconfig import configure
            from memoryd.store.home import App

            configure(0)
            app = App(paths)
            loaded["run"] = lambda wire_in, wire_out, lines, drops: mcp_server.serve_wire(
                app, wire_in, wire_out, lines, drops, tools_cache(paths), key
            )
        except BaseException as exc:  # reported below, on the main thread
            loaded["error"] = exc

    wire_in, wire_out = claim_wire()
    loader = threading.Thread(target=load, name="memoryd-mcp-load", daemon=True)
    loader.start()
    lines = [read_line(wire_in)]
    drops: set[Any] = set()
    reply, rid = early_answer(lines[0]) if lines[0] else (None, None)
    if reply is not None:
        write_all(wire_out, reply)
        drops.add(rid)
        tools = cached_tools(paths, key)
        while loader.is_alive():  # answer what we can until the SDK takes over
            if not select.select([wire_in], [], [], POLL_S)[0]:
                continue
            line = read_line(wire_in)
            if not line:
                break
            lines.append(line)
            more, reply, rid = early_more(line, tools)
            if reply is not None:
                write_all(wire_out, reply)
                drops.add(rid)
            if not more:
                break
    loader.join()
    if "error" in loaded:
        print(f"memoryd mcp: cannot start: {loaded['error']}", file=sys.stderr)
        return 1
    if not lines[0]:
        return 0  # the client went away before saying anything
    code: int = loaded["run"](wire_in, wire_out, [ln for ln in lines if ln], drops)
    return code
