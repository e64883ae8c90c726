"""``memory_search``: substring search over the memory folder, with a ranked (BM25) variant.

Plain search is exhaustive and predictable, which is what a model needs to be sure something is
*not* remembered: every visible regular file is scanned in path order, files containing NUL are
skipped as binary, and every match is counted before the page is cut, so ``total`` is exact and
an integer ``cursor`` pages through a stable order (path, then line).

Only the current file is held in memory: matches arrive already in (path, line) order because the
walk visits names sorted per folder, so the page is materialised while walking.

``ranked=True`` delegates to :class:`memoryd.tools.index.SearchIndex`, which also covers the
stage-1 outputs that are not (yet) in the folder.
"""

from __future__ import annotations

import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memoryd.errors import InvalidArgument, ToolError
from memoryd.folder.guard import read_file, split_path, walk_files
from memoryd.tools.common import (
    check_int,
    in_window,
    iso,
    parse_cursor,
    stamp_ms,
    time_window,
)
from memoryd.tools.files import decode, split_lines
from memoryd.tools.hits import SearchMatch, SearchQuery, SearchResult, clip
from memoryd.tools.scope import ALL, Scope
from memoryd.tuning import (
    SEARCH_MAX_CONTEXT_LINES,
    SEARCH_MAX_QUERIES,
    SEARCH_MAX_QUERY_CHARS,
    SEARCH_MAX_RESULTS,
    SEARCH_MAX_WINDOW_LINES,
)

if TYPE_CHECKING:
    from memoryd.tools.index import SearchIndex

MatchMode = Literal["any", "all_on_same_line", "all_within_lines"]
MATCH_MODES: tuple[str, ...] = ("any", "all_on_same_line", "all_within_lines")
_HEADER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_ -]{0,40}: ")


# -- query matching ------------------------------------------------------------------------------


def _normalize(text: str) -> str:
    """Alphanumerics only, casefolded and without accents: ``Café-Bar`` and ``cafebar`` compare equal."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if c.isalnum())


def transform(case_sensitive: bool, normalized: bool) -> Callable[[str], str]:
    if normalized:
        return _normalize
    if not case_sensitive:
        return str.casefold
    return lambda s: s


def check_queries(queries: Sequence[str] | str | None) -> list[str]:
    if queries is None:
        return []
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, Sequence):
        raise InvalidArgument("queries must be a list of strings")
    out = []
    for q in queries:
        if not isinstance(q, str) or not q.strip():
            raise InvalidArgument(f"every query must be a non-empty string, got {q!r}")
        if len(q) > SEARCH_MAX_QUERY_CHARS:
            raise InvalidArgument(f"a query may have at most {SEARCH_MAX_QUERY_CHARS} characters")
        out.append(q)
    if len(out) > SEARCH_MAX_QUERIES:
        raise InvalidArgument(f"at most {SEARCH_MAX_QUERIES} queries at once")
    return out


def _line_hits(tlines: list[str], tq: list[str]) -> list[frozenset[int]]:
    return [frozenset(j for j, q in enumerate(tq) if q in tl) for tl in tlines]


def _windows(hits: list[frozenset[int]], n_queries: int, span: int) -> list[tuple[int, int]]:
    """Minimal line windows (0-based, inclusive) of at most ``span`` lines holding every query.

    For each end line the latest start still covering all queries is ``min(last seen line of each
    query)``; that start only moves forward, and a window is minimal exactly when its start moved
    since the previous end line (otherwise a shorter window with the same start already existed).
    """
    last = [-1] * n_queries
    prev_start = -1
    out = []
    for end, found in enumerate(hits):
        if not found:
            continue
        for j in found:
            last[j] = end
        start = min(last)
        if start < 0 or start == prev_start:
            continue
        prev_start = start
        if end - start + 1 <= span:
            out.append((start, end))
    return out


def _file_matches(
    lines: list[str], tq: list[str], mode: str, span: int, fold: Callable[[str], str]
) -> list[tuple[int, int, frozenset[int]]]:
    hits = _line_hits([fold(line) for line in lines], tq)
    everything = frozenset(range(len(tq)))
    if mode == "any":
        return [(i, i, h) for i, h in enumerate(hits) if h]
    if mode == "all_on_same_line":
        return [(i, i, h) for i, h in enumerate(hits) if h == everything]
    return [(s, e, everything) for s, e in _windows(hits, len(tq), span)]


def _content(lines: list[str], start: int, end: int, context: int) -> tuple[int, str]:
    lo = max(0, start - context)
    hi = min(len(lines) - 1, end + context)
    return lo + 1, "\n".join(clip(lines[i]) for i in range(lo, hi + 1))


def first_content_line(lines: list[str]) -> tuple[int, str]:
    """The first line worth showing: after a leading ``key: value`` header block, not blank."""
    i = 0
    while i < len(lines) and _HEADER_RE.match(lines[i]):
        i += 1
    if i == len(lines) or lines[i].strip():
        i = 0  # no header block followed by a blank line: start from the top
    for j in range(i, len(lines)):
        if lines[j].strip():
            return j + 1, clip(lines[j])
    return 1, ""


# -- the plain and timeline searches --------------------------------------------------------------


def _page(cursor: int, limit: int, total: int) -> tuple[str | None, bool]:
    more = cursor + limit < total
    return (str(cursor + limit) if more else None), more


@dataclass(frozen=True)
class CheckedQuery:
    """A :class:`SearchQuery` after its checks, as the plain search runs it: the queries, the
    span of ``all_within_lines`` (0 otherwise), the window in epoch ms and the page."""

    queries: list[str]
    match_mode: str
    line_count: int
    path: str | None
    context_lines: int
    case_sensitive: bool
    normalized: bool
    window: tuple[int | None, int | None]
    cursor: int
    max_results: int


def plain_search(root: Path, q: CheckedQuery, *, scope: Scope = ALL) -> SearchResult:
    queries, match_mode, line_count, cursor, max_results = (
        q.queries, q.match_mode, q.line_count, q.cursor, q.max_results
    )  # fmt: skip
    started = time.perf_counter()
    fold = transform(q.case_sensitive, q.normalized)
    tq = [fold(q) for q in queries]
    if any(not q for q in tq):
        raise InvalidArgument(
            "a query has no letters or digits left to compare after normalization"
        )
    lo, hi = q.window
    timed = lo is not None or hi is not None
    need_all = match_mode != "any"
    total = searched = 0
    page: list[SearchMatch] = []
    for entry in walk_files(root, q.path):
        if not scope.allows(entry.rel):
            continue
        if timed and not in_window(stamp_ms(entry.name), lo, hi):
            continue
        got = entry.read()
        if got is None or b"\x00" in got[0]:
            continue
        searched += 1
        text = decode(got[0])
        whole = fold(text)
        present = [q in whole for q in tq]
        if not (all(present) if need_all else any(present)):
            continue
        lines = split_lines(text)
        for start, end, found in _file_matches(lines, tq, match_mode, line_count, fold):
            if cursor <= total < cursor + max_results:
                first, content = _content(lines, start, end, q.context_lines)
                page.append(
                    SearchMatch(
                        path=entry.rel,
                        line=start + 1,
                        end_line=end + 1,
                        content_start_line=first,
                        content=content,
                        matched_queries=[queries[j] for j in sorted(found)],
                    )
                )
            total += 1
    next_cursor, truncated = _page(cursor, max_results, total)
    return SearchResult(
        matches=page,
        total=total,
        cursor=cursor,
        next_cursor=next_cursor,
        truncated=truncated,
        mode="plain",
        files_searched=searched,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def timeline(
    root: Path,
    *,
    path: str | None,
    window: tuple[int | None, int | None],
    cursor: int,
    max_results: int,
    scope: Scope = ALL,
) -> SearchResult:
    """Timestamp-named files in the window, oldest first, each with its first content line."""
    started = time.perf_counter()
    lo, hi = window
    found: list[tuple[int, str]] = []
    for entry in walk_files(root, path):
        if not scope.allows(entry.rel):
            continue
        ms = stamp_ms(entry.name)
        if in_window(ms, lo, hi):
            assert ms is not None
            found.append((ms, entry.rel))
    found.sort()
    page = []
    for ms, rel in found[cursor : cursor + max_results]:
        try:
            data, _ = read_file(root, rel)
        except ToolError:  # vanished or swapped since the walk: leave it out of this page
            continue
        if b"\x00" in data:
            line, content = 1, "(binary file)"
        else:
            line, content = first_content_line(split_lines(decode(data)))
        page.append(SearchMatch(rel, line, line, line, content, kind="file", updated=iso(ms)))
    next_cursor, truncated = _page(cursor, max_results, len(found))
    return SearchResult(
        matches=page,
        total=len(found),
        cursor=cursor,
        next_cursor=next_cursor,
        truncated=truncated,
        mode="timeline",
        files_searched=len(found),
        elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
    )


def memory_search(
    root: Path, query: SearchQuery, *, index: SearchIndex | None = None, scope: Scope = ALL
) -> SearchResult:
    """Search the memory folder (see the module docstring and :class:`SearchQuery`); the one
    entry point for the CLI, MCP, the web UI and the shim. Ranked search needs ``index``;
    ``scope`` leaves out other projects' folders and session memories (:mod:`memoryd.tools.scope`).
    """
    q = query
    queries, match_mode, line_count, path = q.queries, q.match_mode, q.line_count, q.path
    case_sensitive, normalized, ranked = q.case_sensitive, q.normalized, q.ranked
    qs = check_queries(queries)
    if match_mode not in MATCH_MODES:
        raise InvalidArgument(
            f"match_mode must be one of {', '.join(MATCH_MODES)}, got {match_mode!r}"
        )
    span = 0
    if match_mode == "all_within_lines":
        if line_count is None:
            raise InvalidArgument("match_mode all_within_lines needs line_count")
        span = check_int("line_count", line_count, low=1, high=SEARCH_MAX_WINDOW_LINES)
    ctx = check_int(
        "context_lines", q.context_lines, low=0, high=SEARCH_MAX_CONTEXT_LINES, default=0
    )
    limit = check_int(
        "max_results", q.max_results, low=1, high=SEARCH_MAX_RESULTS, default=SEARCH_MAX_RESULTS
    )
    start = parse_cursor(q.cursor)
    window = time_window(q.since, q.until)
    if split_path(path):
        scope.check("/".join(split_path(path)))
    timed = window != (None, None)
    if not split_path(path) and not root.exists() and not root.is_symlink():
        empty: Literal["plain", "ranked", "timeline"] = (
            "timeline" if not qs else "ranked" if ranked else "plain"
        )
        return SearchResult(
            matches=[], total=0, cursor=start, next_cursor=None, truncated=False, mode=empty
        )
    if not qs:
        if not timed:
            raise InvalidArgument("queries is required unless since or until is given")
        return timeline(
            root, path=path, window=window, cursor=start, max_results=limit, scope=scope
        )
    if ranked:
        if index is None:
            raise InvalidArgument("ranked search is not available here (no search index)")
        return index.search(
            qs,
            match_mode=match_mode,
            path=path,
            window=window,
            cursor=start,
            max_results=limit,
            scope=scope,
        )
    checked = CheckedQuery(
        queries=qs,
        match_mode=match_mode,
        line_count=span,
        path=path,
        context_lines=ctx,
        case_sensitive=bool(case_sensitive),
        normalized=bool(normalized),
        window=window,
        cursor=start,
        max_results=limit,
    )
    return plain_search(root, checked, scope=scope)
