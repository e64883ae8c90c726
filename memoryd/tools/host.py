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

from memoryd import tools
from memoryd.app import App
from memoryd.errors import InvalidArgument

SEARCH_RESULTS = 20

SPECS: dict[str, dict[str, Any]] = {
    "memory_search": {
        "description": (
            "Search long-term memory of this user's past coding sessions (decisions, preferences, "
            "fixes). Best matches first; open one with memory_read."
        ),
        "args": {"query": {"type": "string"}},
    },
    "memory_read": {
        "description": "Read a memory file (path as memory_search shows it) from a line (1 = start).",
        "args": {"path": {"type": "string"}, "line": {"type": "integer"}},
    },
    "memory_note": {
        "description": "Save a note the user explicitly asked you to remember.",
        "args": {"note": {"type": "string"}},
    },
}


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


def call(app: App, name: str, args: dict[str, Any], session_id: str | None = None) -> str:
    """Run one tool call; memoryd errors propagate (the CLI edge turns them into messages)."""
    root = app.paths.memories
    if name == "memory_search":
        index = tools.SearchIndex(tools.default_index_path(app.paths.data_dir), root, app.store)
        try:
            return tools.memory_search(
                root,
                [_text(args, "query")],
                ranked=True,
                index=index,
                max_results=SEARCH_RESULTS,
            ).to_text()
        finally:
            index.close()
    if name == "memory_read":
        return tools.memory_read(root, _text(args, "path"), _line(args.get("line"))).to_text()
    if name == "memory_note":
        sid = session_id if session_id and session_id.startswith("ses_") else None
        return tools.memory_add_note(
            root, _text(args, "note"), None, sid, clock=app.clock, store=app.store
        ).to_text()
    raise InvalidArgument(f"unknown tool {name!r} (known: {', '.join(SPECS)})")


def parse_args(raw: str) -> dict[str, Any]:
    try:
        data = json.loads(raw or "{}")
    except ValueError as exc:
        raise InvalidArgument(f"arguments are not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise InvalidArgument("arguments must be a JSON object")
    return data
