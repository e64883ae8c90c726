"""A search as asked and as answered, whichever way it searches: the question
(:class:`SearchQuery`, built alike by the CLI, the MCP server, the web UI and the shim), one hit
(:class:`SearchMatch`), the page of hits (:class:`SearchResult`), and how a hit's line is clipped.

Shared by the plain search (:mod:`memoryd.tools.search`) and the ranked index
(:mod:`memoryd.tools.index`), so neither imports the other for these types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memoryd.tools.common import Result
from memoryd.tuning import SEARCH_MAX_LINE_CHARS


@dataclass(frozen=True)
class SearchQuery:
    """What a caller asks ``memory_search`` (checked there, so every edge gets the same errors).

    ``queries`` may be omitted only with ``since``/``until``: the answer is then a chronological
    listing of timestamp-named files (rollout summaries, notes). ``normalized`` compares only
    letters and digits, casefolded and without accents, whatever ``case_sensitive`` says.
    ``ranked`` uses the BM25 index; it ignores ``case_sensitive``, ``normalized`` and
    ``context_lines`` (a hit is a whole section or paragraph). ``since``, ``until`` and
    ``cursor`` are as the caller got them (text or numbers); the search parses them.
    """

    queries: Sequence[str] | str | None = None
    match_mode: str = "any"
    line_count: int | None = None
    path: str | None = None
    context_lines: int | None = 0
    case_sensitive: bool = True
    normalized: bool = False
    since: object = None
    until: object = None
    cursor: object = None
    max_results: int | None = None
    ranked: bool = False


@dataclass(frozen=True)
class SearchMatch:
    """One hit. ``line``..``end_line`` is what matched; ``content`` starts at ``content_start_line``.

    Ranked hits from stage-1 outputs have an empty ``path`` and carry ``session_id``; their
    ``kind`` says which field matched (``raw_memory`` or ``rollout_summary``).
    """

    path: str
    line: int
    end_line: int
    content_start_line: int
    content: str
    matched_queries: list[str] = field(default_factory=list)
    kind: str = "file"
    session_id: str | None = None
    score: float | None = None
    updated: str | None = None

    def header(self) -> str:
        span = f"{self.line}-{self.end_line}" if self.end_line != self.line else f"{self.line}"
        where = (
            f"{self.path}:{span}"
            if self.path
            else f"session {self.session_id} {self.kind} lines {span}"
        )
        extra = []
        if self.session_id and self.path:
            extra.append(f"session {self.session_id}")
        if self.updated:
            extra.append(self.updated)
        if self.score is not None:
            extra.append(f"score {self.score:.3g}")
        if self.matched_queries:
            extra.append("matched: " + ", ".join(repr(q) for q in self.matched_queries))
        return where + (f"  ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class SearchResult(Result):
    matches: list[SearchMatch]
    total: int
    cursor: int
    next_cursor: str | None
    truncated: bool
    mode: Literal["plain", "ranked", "timeline"]
    files_searched: int = 0
    strategy: str | None = None
    refresh: dict[str, Any] | None = None
    elapsed_ms: float = 0.0
    total_capped: bool = False  # ranked: more chunks match than are scored; total is that window

    def to_text(self) -> str:
        if not self.matches:
            if self.total and self.cursor >= self.total:
                more = "+" if self.total_capped else ""
                return f"no matches at cursor {self.cursor} (there are {self.total}{more})"
            return "no matches"
        what = {"timeline": "files", "ranked": "ranked results"}.get(self.mode, "matches")
        first, last = self.cursor + 1, self.cursor + len(self.matches)
        head = f"{what} {first}-{last} of {self.total}"
        if self.total_capped:
            head += f"+ (ranked among the {self.total} most recently indexed matches; add words to narrow)"
        if self.strategy and self.strategy != "strict":
            head += f" (no exact hit; relaxed to {self.strategy.replace('_', ' ')} matching)"
        out = [head]
        for m in self.matches:
            out.append("")
            out.append(m.header())
            width = len(str(m.content_start_line + m.content.count("\n")))
            for i, text in enumerate(m.content.split("\n")):
                out.append(f"{m.content_start_line + i:>{width}}: {text}")
        if self.next_cursor is not None:
            out += ["", f"[more results: continue with cursor={self.next_cursor}]"]
        return "\n".join(out)


def clip(line: str) -> str:
    """One line as a hit shows it: without its line break, cut at ``SEARCH_MAX_LINE_CHARS``."""
    line = line.rstrip("\r\n")
    return line if len(line) <= SEARCH_MAX_LINE_CHARS else line[:SEARCH_MAX_LINE_CHARS] + " […]"
