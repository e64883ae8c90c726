"""The memory tools: one implementation under both ``memoryd mcp`` and the ``memoryd`` CLI.

Every tool is a plain function that takes its dependencies (the memory folder, the store, the
search index) explicitly, returns a dataclass with ``to_text()`` (for people and models) and
``to_dict()`` (for ``--json`` and MCP metadata), and raises :class:`ToolError` subclasses with
messages meant to be shown as they are.

======================  =========================================================
``memory_read``         a window of one file (:mod:`memoryd.tools.files`)
``memory_list``         one folder's entries (:mod:`memoryd.tools.files`)
``memory_search``       plain, timeline or ranked search (:mod:`memoryd.tools.search`,
                        :mod:`memoryd.tools.index`)
``memory_add_note``     save a note verbatim (:mod:`memoryd.tools.notes`)
``memory_forget``       forget a session or delete a note (:mod:`memoryd.tools.notes`)
``memory_inspect``      pipeline and folder report (:mod:`memoryd.tools.admin`)
``memory_mode``         set a session's memory mode (:mod:`memoryd.tools.admin`)
``memory_reset``        forget everything, with confirmation (:mod:`memoryd.tools.admin`)
======================  =========================================================

Path safety for all of them lives in :mod:`memoryd.folder.guard`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memoryd.errors import InvalidArgument, NotFound, Refused, ToolError
from memoryd.tools.files import ListEntry, ListResult, ReadResult, memory_list, memory_read
from memoryd.tools.hits import SearchMatch, SearchResult
from memoryd.tools.index import SearchIndex, default_index_path
from memoryd.tools.index_refresh import RefreshStats
from memoryd.tools.notes import ForgetResult, NoteResult, memory_add_note, memory_forget
from memoryd.tools.search import memory_search

if TYPE_CHECKING:
    from memoryd.tools.admin import (
        InspectReport,
        ModeResult,
        ResetResult,
        memory_inspect,
        memory_mode,
        memory_reset,
    )

# The admin tools pull in settings, pydantic and the write side; `memoryd tool`, run once per
# model tool call, needs none of it, so they load on first use.
_ADMIN = {
    "InspectReport",
    "ModeResult",
    "ResetResult",
    "memory_inspect",
    "memory_mode",
    "memory_reset",
}


def __getattr__(name: str) -> Any:
    if name in _ADMIN:
        return getattr(importlib.import_module("memoryd.tools.admin"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ForgetResult",
    "InspectReport",
    "InvalidArgument",
    "ListEntry",
    "ListResult",
    "ModeResult",
    "NotFound",
    "NoteResult",
    "ReadResult",
    "RefreshStats",
    "Refused",
    "ResetResult",
    "SearchIndex",
    "SearchMatch",
    "SearchResult",
    "ToolError",
    "default_index_path",
    "memory_add_note",
    "memory_forget",
    "memory_inspect",
    "memory_list",
    "memory_mode",
    "memory_read",
    "memory_reset",
    "memory_search",
]
