"""The three memory tools opencode's model gets through memoryd's shim, and their one dispatcher.

Every byte of a tool definition is sent with every user request, so the model gets only what it
needs to use memory: search it, read what the search found, and save what the user asked to
keep. Management (forget, modes, reset, inspect) belongs to the user (CLI). The shim registers
these definitions (rendered in at install) and answers each call by running
``memoryd tool NAME ARGS_JSON`` once: no process stays up per opencode instance.

opencode 1.18 turns a plugin tool whose arguments are plain JSON-schema objects into a schema in
which every property is required, so each tool has only required arguments.
"""

from __future__ import annotations

import json
from typing import Any

from memoryd.clock import Clock
from memoryd.errors import InvalidArgument
from memoryd.paths import Paths
from memoryd.prompts import tool_specs
from memoryd.scopes import is_scope_key
from memoryd.store import Store
from memoryd.tools.files import memory_read
from memoryd.tools.hits import SearchQuery
from memoryd.tools.index import SearchIndex, default_index_path
from memoryd.tools.scope import Scope
from memoryd.tools.search import memory_search

SEARCH_RESULTS = 20

# The definitions live in the template the shim is rendered with; read here for the names.
SPECS: dict[str, dict[str, Any]] = tool_specs()


def _text(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{key} must be a string")
    return value


def _line(value: Any) -> int:
    """opencode does not validate plugin tool arguments; a model may send ``"12"`` or nothing."""
    if value is None or value == "":
        return 1
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise InvalidArgument("line must be a whole number (1 = the start)")


def call(
    paths: Paths,
    clock: Clock,
    name: str,
    args: dict[str, Any],
    session_id: str | None = None,
    *,
    project: str | None = None,
    server: str | None = None,
) -> str:
    """Run one tool call; memoryd errors propagate (the CLI edge turns them into messages).

    Kept to what the three tools need (no settings, no host client): this runs once per call.
    ``project`` is the key the shim computed for its instance: the call sees that project and
    the global layer, and a note lands in that project. The lean definitions have no ``scope``
    argument (every argument costs bytes on every request and opencode makes it required); a
    wider look is the CLI's and the MCP server's (``scope=all``). ``server`` is the URL of the
    shim's own opencode, where a note's session is read to see whether the user asked for it.
    """
    root = paths.memories
    if project is not None and not is_scope_key(project):
        raise InvalidArgument(f"{project!r} is not a project key")
    scope = Scope("project", project)
    if name == "memory_search":
        store = _store(paths, clock)
        index = SearchIndex(default_index_path(paths.data_dir), root, store)
        try:
            return memory_search(
                root,
                SearchQuery([_text(args, "query")], ranked=True, max_results=SEARCH_RESULTS),
                index=index,
                scope=scope,
            ).to_text()
        finally:
            index.close()
            store.close()
    if name == "memory_read":
        return memory_read(
            root, _text(args, "path"), _line(args.get("line")), scope=scope
        ).to_text()
    if name == "memory_note":
        # Here, not at the top: the rule's patterns cost ~5 ms to compile, a search needs none.
        from memoryd.host.live import find_server
        from memoryd.tools.proposed import model_note

        sid = session_id if session_id and session_id.startswith("ses_") else None
        store = _store(paths, clock)
        try:
            return model_note(
                paths,
                clock,
                store,
                _text(args, "note"),
                session_id=sid,
                project=project,
                server=find_server(paths, server),
            ).to_text()
        finally:
            store.close()
    raise InvalidArgument(f"unknown tool {name!r} (known: {', '.join(SPECS)})")


def _store(paths: Paths, clock: Clock) -> Store:
    """No integrity check: it reads all of memory.db (~60 ms at 50 MB) on every call; the
    daemon checks at its start, and a damaged file still fails the call's own reads."""
    paths.ensure_dir(paths.data_dir)
    return Store(paths.db, clock=clock, quick_check=False)


def parse_args(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw or "{}")
    except ValueError as exc:
        raise InvalidArgument(f"arguments are not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidArgument("arguments must be a JSON object")
    return data
