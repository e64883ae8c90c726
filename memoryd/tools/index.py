"""A ranked (BM25) search index over the memory folder and the stage-1 outputs.

Plain search answers "where does this string occur"; a model asking "what do we know about
deploying staging" needs relevance instead. This index keeps an SQLite FTS5 table of *chunks*
(a Markdown section, or a run of paragraphs up to ~1,500 characters, each with its path and
line range) next to ``memory.db``, in its own file, so memory.db's schema never changes for it.

Decisions:

* **It is a cache.** Everything in it can be rebuilt from the folder and ``memory.db``; a file
  from another schema version, for another memory folder, or that SQLite cannot read is wiped and
  rebuilt, never repaired.
* **Incremental, and no scan per query.** Files are compared by ``(mtime_ns, size)`` and outputs
  by ``(session_id, source_updated_at, generated_at)`` with what was indexed; only changed or
  removed ones are touched. That comparison walks the whole folder (~0.2 s at 50 MB), so a query
  first compares a *watermark* instead: the mtimes of the folders that held indexed files
  (adding, removing or atomically replacing a file changes its folder's mtime), the change mark
  writers bump after editing files in place (:func:`memoryd.paths.bump_change_mark`; phase 2
  does, for the consolidator's writes) and one aggregate over the enabled outputs. Equal
  watermark, no walk. An in-place edit nobody marked (a hand edit) is caught by the full
  comparison at least every :data:`~memoryd.tuning.INDEX_FULL_CHECK_S` seconds. When only
  files changed, the outputs' aggregate (kept apart) still matches and their signatures (one
  row per session) are not compared until their own full comparison is due (timed apart from
  the files', and never trusted when memory.db moved while it was read).
* **Outputs replace their renders.** With a store attached, ``raw_memories.md`` and
  ``rollout_summaries/`` are not indexed as files: they are renders of the outputs, which are
  indexed directly with their session ids (so one memory is not ranked twice, and a forgotten
  session disappears from ranked search at once). Only sessions in ``enabled`` mode are indexed:
  disabled and polluted sessions must not be recalled.
* **User text never reaches FTS5 syntax.** Queries are split into word tokens, each wrapped in
  double quotes, so ``"``, ``-``, ``AND``, ``NEAR`` or ``col:`` are searched for, not parsed.
* **Relaxation.** Each query's words must all occur (queries OR'ed for ``any``, AND'ed for the
  ``all_*`` modes). When that finds nothing the words are retried as prefixes (``deploy*``), and
  for ``any`` finally as "any word". The result says which stage answered.
* **Order.** BM25 (a heading/path column weighs more than body text), then newest first on ties,
  then path and line so paging is stable.
* **Bounded work per query.** FTS5 computes BM25 for every matching chunk before it can sort
  (~2 µs each: a word in every chunk of a 50 MB folder cost 0.25 s). So the count stops at
  a window (:data:`~memoryd.tuning.RANKED_WINDOW` chunks for a one-word query, fewer for more
  words: :func:`window_for`) and, past it, only the window's most recently indexed matches
  are scored; the result says so (``total_capped``, "of 2000+"). Changes are
  indexed oldest first, so the highest chunk ids are the newest memories. Each output's project
  key is stored with it, so a project-scoped query lists no outputs either. A refresh that added
  many chunks (:data:`~memoryd.tuning.INDEX_OPTIMIZE_ADDED`, e.g. the first build) optimises
  the FTS index into one segment, which makes frequent-word and prefix queries ~1.5× cheaper.
* **Forgetting.** ``secure_delete`` is on, and whenever a refresh removed words the index no
  longer holds (a file or session deleted or forgotten, an edit that took words out) the FTS
  index is optimised, so removed text does not linger in the file as index terms (~17 ms per MB
  of index, paid by the first query after the change). An edit that only adds (a line appended
  to ``MEMORY.md``, a session's next version that keeps its words) re-indexes that document
  alone: its old chunks' terms are all held by the new ones, so there is nothing to scrub.

This module holds the file, its schema and the query side; keeping the index fresh lives in
:mod:`memoryd.tools.index_refresh` and cutting text into chunks in :mod:`memoryd.tools.chunks`,
so each part stays small enough to read on its own.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
import unicodedata
from dataclasses import asdict
from pathlib import Path
from typing import Self

from memoryd.errors import InvalidArgument, Refused
from memoryd.folder.guard import open_path, read_file, split_path
from memoryd.folder.layout import SUMMARIES_DIR
from memoryd.scopes import PROJECTS_DIR
from memoryd.store import Store
from memoryd.tools.common import iso
from memoryd.tools.files import decode
from memoryd.tools.hits import SearchMatch, SearchResult, clip
from memoryd.tools.index_refresh import IndexRefresh
from memoryd.tools.scope import ALL, REMOTE_RESOURCES, Scope
from memoryd.tuning import INDEX_BUSY_TIMEOUT_S, RANKED_WINDOW

__all__ = [
    "INDEX_FILE",
    "SCHEMA_VERSION",
    "SearchIndex",
    "build_match",
    "default_index_path",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: docs.scope (an output's project key), so scoped queries list no outputs
INDEX_FILE = "search.db"
HEAD_WEIGHT = 2.5
MAX_TERMS = 64
_TERM_RE = re.compile(r"\w+")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL CHECK (source IN ('file', 'output')),
    key TEXT NOT NULL,
    sig_a INTEGER NOT NULL,
    sig_b INTEGER NOT NULL,
    stamp INTEGER NOT NULL,
    name_stamp INTEGER,
    scope TEXT,
    UNIQUE (source, key)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (body, head, tokenize = 'unicode61 remove_diacritics 2');
"""


def default_index_path(data_dir: Path) -> Path:
    """Where the index lives by default: ``<data dir>/search.db``, beside ``memory.db``."""
    return Path(data_dir) / INDEX_FILE


# -- queries --------------------------------------------------------------------------------------


def _terms(query: str) -> list[str]:
    return _TERM_RE.findall(query)


def build_match(queries: list[str], *, match_mode: str, stage: str) -> str | None:
    """An FTS5 MATCH expression from user queries; every term is a quoted string (see module doc)."""
    star = "*" if stage in ("prefix", "any_term") else ""
    groups = []
    flat: list[str] = []
    for q in queries:
        terms = [f'"{t}"{star}' for t in _terms(q)][:MAX_TERMS]
        if terms:
            groups.append("(" + " AND ".join(terms) + ")")
            flat += terms
    if not groups:
        return None
    if stage == "any_term":
        return " OR ".join(dict.fromkeys(flat[:MAX_TERMS]))
    return (" OR " if match_mode == "any" else " AND ").join(groups)


def window_for(expr: str) -> int:
    """How many matching chunks a query scores at most: BM25's cost grows with chunks × terms, so
    :data:`~memoryd.tuning.RANKED_WINDOW` chunks for one term, fewer for more (never below a
    quarter of it)."""
    terms = max(1, expr.count('"') // 2)  # every term is one quoted string (build_match)
    return max(RANKED_WINDOW // terms, RANKED_WINDOW // 4, 1)


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()  # the same as below for ASCII, ~50× faster on a page of 200 chunks
    return "".join(
        c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c)
    )


def _matched(queries: list[str], body: str) -> list[str]:
    folded = _fold(body)
    return [q for q in queries if all(_fold(t) in folded for t in _terms(q))]


# -- the index ------------------------------------------------------------------------------------


class SearchIndex(IndexRefresh):
    """The ranked index for one memory folder (``root``) and, optionally, one store's outputs.

    Safe to share between threads (one lock) and between processes (SQLite WAL; refreshes take
    ``BEGIN IMMEDIATE`` and re-check what they found, so two refreshers never index twice).
    """

    def __init__(self, db_path: Path, root: Path, store: Store | None = None) -> None:
        self.db_path = Path(db_path)
        self.root = Path(root)
        self.store = store
        self._lock = threading.RLock()
        self._conn = self._open()

    # -- connection -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.db_path.is_symlink():
            raise Refused(
                f"{self.db_path} is a symlink; refusing to open the search index through it"
            )
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.db_path),
            timeout=INDEX_BUSY_TIMEOUT_S,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(INDEX_BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA secure_delete = ON")
            if self._stale(conn):
                self._rebuild_schema(conn, force=False)
        except BaseException:
            conn.close()
            raise
        return conn

    def _stale(self, conn: sqlite3.Connection) -> bool:
        """Whether the file holds another schema version or another memory folder's index."""
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return True
        row = conn.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
        return row is None or row[0] != str(self.root)

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            log.warning(
                "search index %s is unreadable (%s); deleting it and rebuilding", self.db_path, exc
            )
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)
            return self._connect()

    def _rebuild_schema(self, conn: sqlite3.Connection, *, force: bool) -> None:
        """Drop and recreate every table; unless ``force``, only if still stale once the lock is held."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not force and not self._stale(conn):
                conn.execute("COMMIT")  # another process rebuilt it while we waited for the lock
                return
            log.info("search index %s: (re)building for %s", self.db_path, self.root)
            for table in ("fts", "chunks", "docs", "meta"):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO meta (key, value) VALUES ('root', ?)", (str(self.root),))
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def clear(self) -> None:
        """Drop everything indexed (after a reset); the next query rebuilds from what is left."""
        with self._lock:
            self._rebuild_schema(self._conn, force=True)
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- querying ---------------------------------------------------------------------------

    @staticmethod
    def _limit(scope: Scope) -> tuple[str, list[object]]:
        """SQL leaving out other projects' files and session memories (each output's project key
        is stored with it, so no query lists the outputs)."""
        if scope.mode == "all":
            return "", []
        mine = scope.project if scope.mode == "project" and scope.project else None
        folder = f"{PROJECTS_DIR}/{mine}/" if mine else ""
        sql = (
            " AND ((d.source = 'file' AND (substr(d.key, 1, ?) != ?"
            + (" OR substr(d.key, 1, ?) = ?" if mine else "")
            + ")) OR (d.source = 'output' AND (d.scope IS NULL"
            + (" OR d.scope = ?" if mine else "")
            + ")))"
        )
        args: list[object] = [len(PROJECTS_DIR) + 1, PROJECTS_DIR + "/"]
        if mine:
            args += [len(folder), folder, mine]
        # Other machines' sessions matched to a local project (see Scope.key_of).
        remote = "/".join(REMOTE_RESOURCES) + f"/%/{PROJECTS_DIR}/"
        sql += " AND (d.source != 'file' OR d.key NOT LIKE ?" + (" OR d.key LIKE ?" if mine else "")
        sql += ")"
        args.append(remote + "%")
        if mine:
            args.append(f"{remote}{mine}/%")
        return sql, args

    def _scope(self, prefix: str | None) -> tuple[str, list[object]]:
        """SQL narrowing hits to a path; the renders of outputs map back to the outputs themselves."""
        if prefix is None:
            return "", []
        if self.store is not None and (prefix == SUMMARIES_DIR or self._skip(prefix)):
            sid = None
            if prefix.startswith(SUMMARIES_DIR + "/"):
                data, _ = read_file(self.root, prefix)
                first = decode(data[:512]).split("\n", 1)[0]
                if first.startswith("session_id: "):
                    sid = first.removeprefix("session_id: ").strip()
            if sid:
                return " AND d.source = 'output' AND d.key = ?", [sid]
            return " AND d.source = 'output'", []
        return " AND d.source = 'file' AND (d.key = ? OR substr(d.key, 1, ?) = ?)", [
            prefix,
            len(prefix) + 1,
            prefix + "/",
        ]

    @staticmethod
    def _window(window: tuple[int | None, int | None]) -> tuple[str, list[object]]:
        lo, hi = window
        if lo is None and hi is None:
            return "", []
        sql, args = " AND d.name_stamp IS NOT NULL", list[object]()
        if lo is not None:
            sql += " AND d.name_stamp >= ?"
            args.append(lo)
        if hi is not None:
            sql += " AND d.name_stamp <= ?"
            args.append(hi)
        return sql, args

    def _page(
        self, base: str, args: list[object], window: int | None, cursor: int, max_results: int
    ) -> list[tuple[sqlite3.Row, float]]:
        """One page of hits with their BM25 scores, best first; text is read for the page alone.

        ``window``: more chunks match than that (see :func:`window_for`), so only the most
        recently indexed ones (highest rowid, which FTS5 walks backwards and stops) are scored.
        """
        newest = " ORDER BY fts.rowid DESC LIMIT ?" if window else ""
        ranked = self._conn.execute(
            f"""SELECT id, score FROM (
                    SELECT fts.rowid AS id, bm25(fts, 1.0, {HEAD_WEIGHT}) AS score,
                           d.stamp AS stamp, d.key AS key, c.start_line AS line {base}{newest})
                ORDER BY score, stamp DESC, key, line LIMIT ? OFFSET ?""",
            [*args, *([window] if window else []), max_results, cursor],
        ).fetchall()
        if not ranked:
            return []
        # The page's text in one statement; FTS5 answers the correlated rowid lookups one by one.
        found = {
            r["id"]: r
            for r in self._conn.execute(
                f"""SELECT c.id, d.source, d.key, d.stamp, c.kind, c.start_line, c.end_line,
                           (SELECT body FROM fts WHERE fts.rowid = c.id) AS body
                    FROM chunks c JOIN docs d ON d.id = c.doc_id
                    WHERE c.id IN ({",".join("?" * len(ranked))})""",
                [chunk_id for chunk_id, _ in ranked],
            )
        }
        return [(found[i], score) for i, score in ranked if i in found]

    def search(
        self,
        queries: list[str],
        *,
        match_mode: str = "any",
        path: str | None = None,
        window: tuple[int | None, int | None] = (None, None),
        cursor: int = 0,
        max_results: int = 200,
        scope: Scope = ALL,
    ) -> SearchResult:
        """Ranked hits for ``queries`` after an incremental :meth:`refresh` (see the module doc)."""
        started = time.perf_counter()
        parts = split_path(path)
        prefix = "/".join(parts) if parts else None
        if prefix is not None:
            with open_path(self.root, prefix):
                pass  # the same NotFound / Refused answers as plain search
        stats = self.refresh()
        scope_sql, scope_args = self._scope(prefix)
        window_sql, window_args = self._window(window)
        limit_sql, limit_args = self._limit(scope)
        where = scope_sql + window_sql + limit_sql
        args = scope_args + window_args + limit_args
        base = (
            "FROM fts JOIN chunks c ON c.id = fts.rowid JOIN docs d ON d.id = c.doc_id WHERE fts MATCH ?"
            + where
        )
        stages = ["strict", "prefix"] + (["any_term"] if match_mode == "any" else [])
        total, expr, used, cap = 0, None, None, RANKED_WINDOW
        with self._lock:
            for stage in stages:
                expr = build_match(queries, match_mode=match_mode, stage=stage)
                if expr is None:
                    raise InvalidArgument(
                        "ranked search needs at least one word (letters or digits) in the queries"
                    )
                cap = window_for(expr)
                total = self._conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 {base} LIMIT ?)", [expr, *args, cap + 1]
                ).fetchone()[0]
                used = stage
                if total:
                    break
            capped = total > cap
            total = min(total, cap)
            scored = cap if capped else None
            rows = self._page(base, [expr, *args], scored, cursor, max_results) if total else []
        matches = []
        when: dict[int, str | None] = {}  # chunks of one file share its time
        for r, score in rows:
            is_file = r["source"] == "file"
            if r["stamp"] not in when:
                when[r["stamp"]] = iso(r["stamp"])
            content = "\n".join(clip(line) for line in r["body"].split("\n"))
            matches.append(
                SearchMatch(
                    path=r["key"] if is_file else "",
                    line=r["start_line"],
                    end_line=r["end_line"],
                    content_start_line=r["start_line"],
                    content=content,
                    matched_queries=_matched(queries, r["body"]),
                    kind=r["kind"],
                    session_id=None if is_file else r["key"],
                    score=-score,
                    updated=when[r["stamp"]],
                )
            )
        more = cursor + max_results < total
        return SearchResult(
            matches=matches,
            total=total,
            cursor=cursor,
            next_cursor=str(cursor + max_results) if more else None,
            truncated=more,
            mode="ranked",
            total_capped=capped,
            files_searched=stats.files_seen,
            strategy=used,
            refresh=asdict(stats),
            elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
        )
