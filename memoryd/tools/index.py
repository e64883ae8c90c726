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
  comparison at least every :data:`FULL_CHECK_S` seconds.
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
* **Forgetting.** ``secure_delete`` is on, and whenever a refresh removed chunks (a file edited or
  deleted, a session forgotten) the FTS index is optimised, so removed text does not linger in the
  file as index terms (~0.1 s on a 5 MB folder, paid by the first query after the change).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Self

from memoryd.errors import InvalidArgument, Refused
from memoryd.paths import change_mark_file
from memoryd.store import Store
from memoryd.tools.common import iso, stamp_ms
from memoryd.tools.files import decode
from memoryd.tools.guard import open_path, open_root, read_file, split_path, walk_files
from memoryd.tools.search import SearchMatch, SearchResult, _clip
from memoryd.tuning import INDEX_BUSY_TIMEOUT_S
from memoryd.workspace import RAW_MEMORIES_FILE, SUMMARIES_DIR

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
INDEX_FILE = "search.db"
FULL_CHECK_S = 300
RACY_NS = 1_000_000_000
SOFT_CHUNK_CHARS = 600
HARD_CHUNK_CHARS = 1500
HEAD_WEIGHT = 2.5
MAX_TERMS = 64
_HEADING_RE = re.compile(r" {0,3}#{1,6}[ \t]+\S")
_FENCE_RE = re.compile(r" {0,3}(```|~~~)")
_TERM_RE = re.compile(r"\w+")
_PATH_SPLIT_RE = re.compile(r"[/_.\-]+")

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


# -- chunking -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    heading: str
    body: str


def chunk_text(text: str) -> list[Chunk]:
    """Split Markdown into sections, and long sections into runs of paragraphs.

    A heading (outside a code fence) always starts a chunk. Paragraphs join the current chunk
    until it reaches ~600 characters, and no chunk grows past ~1,500 unless a single line is that
    long. Line numbers are 1-based and inclusive; trailing blank lines are not part of a chunk.
    """
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    chunks: list[Chunk] = []
    cur: list[tuple[int, str]] = []
    size = 0
    heading = cur_heading = ""
    fenced = False

    def flush() -> None:
        nonlocal cur, size
        while cur and not cur[-1][1].strip():
            cur.pop()
        if cur:
            chunks.append(Chunk(cur[0][0], cur[-1][0], cur_heading, "\n".join(t for _, t in cur)))
        cur, size = [], 0

    for n, line in enumerate(lines, 1):
        if _FENCE_RE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING_RE.match(line):
            flush()
            heading = cur_heading = line.strip().lstrip("#").strip()
            cur, size = [(n, line)], len(line) + 1
            continue
        if not line.strip():
            if cur and size >= SOFT_CHUNK_CHARS and not fenced:
                flush()
            elif cur:
                cur.append((n, line))
            continue
        if cur and size + len(line) > HARD_CHUNK_CHARS:
            flush()
        if not cur:
            cur_heading = heading
        cur.append((n, line))
        size += len(line) + 1
    flush()
    return chunks


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


def _fold(text: str) -> str:
    return "".join(
        c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c)
    )


def _matched(queries: list[str], body: str) -> list[str]:
    folded = _fold(body)
    return [q for q in queries if all(_fold(t) in folded for t in _terms(q))]


# -- the index ------------------------------------------------------------------------------------


@dataclass
class RefreshStats:
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    outputs_seen: int = 0
    outputs_indexed: int = 0
    outputs_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    elapsed_ms: float = 0.0
    watermark_hit: bool = False  # answered from the watermark, without walking the folder

    @property
    def changed(self) -> bool:
        return bool(
            self.files_indexed or self.files_removed or self.outputs_indexed or self.outputs_removed
        )


class SearchIndex:
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

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

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

    # -- writing ----------------------------------------------------------------------------

    def _drop_chunks(self, c: sqlite3.Connection, doc_id: int) -> int:
        ids = [(r[0],) for r in c.execute("SELECT id FROM chunks WHERE doc_id = ?", (doc_id,))]
        c.executemany("DELETE FROM fts WHERE rowid = ?", ids)
        c.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
        return len(ids)

    def _put_doc(
        self,
        c: sqlite3.Connection,
        source: str,
        key: str,
        sig: tuple[int, int],
        stamp: int,
        name_stamp: int | None,
        pieces: list[tuple[str, Chunk, str]],
        stats: RefreshStats,
    ) -> None:
        row = c.execute(
            "SELECT id FROM docs WHERE source = ? AND key = ?", (source, key)
        ).fetchone()
        if row is not None:
            doc_id = row[0]
            stats.chunks_removed += self._drop_chunks(c, doc_id)
            c.execute(
                "UPDATE docs SET sig_a = ?, sig_b = ?, stamp = ?, name_stamp = ? WHERE id = ?",
                (*sig, stamp, name_stamp, doc_id),
            )
        else:
            doc_id = c.execute(
                "INSERT INTO docs (source, key, sig_a, sig_b, stamp, name_stamp) VALUES (?, ?, ?, ?, ?, ?)",
                (source, key, *sig, stamp, name_stamp),
            ).lastrowid
        for kind, chunk, head in pieces:
            chunk_id = c.execute(
                "INSERT INTO chunks (doc_id, kind, start_line, end_line) VALUES (?, ?, ?, ?)",
                (doc_id, kind, chunk.start_line, chunk.end_line),
            ).lastrowid
            c.execute(
                "INSERT INTO fts (rowid, body, head) VALUES (?, ?, ?)", (chunk_id, chunk.body, head)
            )
        stats.chunks_added += len(pieces)

    def _drop_doc(self, c: sqlite3.Connection, doc_id: int, stats: RefreshStats) -> None:
        stats.chunks_removed += self._drop_chunks(c, doc_id)
        c.execute("DELETE FROM docs WHERE id = ?", (doc_id,))

    # -- refreshing -------------------------------------------------------------------------

    def _root_exists(self) -> bool:
        fd = open_root(self.root)
        if fd is None:
            return False
        os.close(fd)
        return True

    def _skip(self, rel: str) -> bool:
        return self.store is not None and (
            rel == RAW_MEMORIES_FILE or rel.startswith(SUMMARIES_DIR + "/")
        )

    def _known(self, source: str) -> dict[str, tuple[int, int, int]]:
        rows = self._conn.execute(
            "SELECT key, id, sig_a, sig_b FROM docs WHERE source = ?", (source,)
        )
        return {r["key"]: (r["id"], r["sig_a"], r["sig_b"]) for r in rows}

    def _output_sigs(self) -> dict[str, tuple[int, int]]:
        """Enabled sessions' output signatures, read from memory.db (read-only)."""
        if self.store is None:
            return {}
        rows = self.store._conn.execute(
            """SELECT o.session_id, o.source_updated_at, o.generated_at FROM stage1_outputs o
               LEFT JOIN session_meta m ON m.session_id = o.session_id
               WHERE COALESCE(m.memory_mode, 'enabled') = 'enabled'"""
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def _sync_files(self, write: bool, stats: RefreshStats) -> bool:
        """Compare (and with ``write``, apply) the folder against the index; True if anything differs."""
        known = self._known("file")
        seen: set[str] = set()
        differs = False
        if self._root_exists():
            for entry in walk_files(self.root):
                if self._skip(entry.rel):
                    continue
                seen.add(entry.rel)
                stats.files_seen += 1
                have = known.get(entry.rel)
                if have is not None and (have[1], have[2]) == (
                    entry.st.st_mtime_ns,
                    entry.st.st_size,
                ):
                    stats.files_unchanged += 1
                    continue
                differs = True
                if not write:
                    continue
                got = entry.read()
                if got is None:
                    continue
                data, st = got
                name_ms = stamp_ms(entry.name)
                pieces = []
                if b"\x00" not in data:
                    head = " ".join(_PATH_SPLIT_RE.split(entry.rel))
                    pieces = [
                        ("file", ch, f"{head} {ch.heading}".strip())
                        for ch in chunk_text(decode(data))
                    ]
                stamp = name_ms if name_ms is not None else st.st_mtime_ns // 1_000_000
                self._put_doc(
                    self._conn,
                    "file",
                    entry.rel,
                    (st.st_mtime_ns, st.st_size),
                    stamp,
                    name_ms,
                    pieces,
                    stats,
                )
                stats.files_indexed += 1
        for rel, (doc_id, _, _) in known.items():
            if rel not in seen:
                differs = True
                if write:
                    self._drop_doc(self._conn, doc_id, stats)
                    stats.files_removed += 1
        return differs

    def _sync_outputs(self, write: bool, stats: RefreshStats) -> bool:
        known = self._known("output")
        current = self._output_sigs()
        stats.outputs_seen = len(current)
        differs = False
        assert self.store is not None or not current
        for sid, sig in current.items():
            have = known.get(sid)
            if have is not None and (have[1], have[2]) == sig:
                continue
            differs = True
            if not write:
                continue
            out = self.store.output(sid) if self.store is not None else None
            if out is None:
                continue
            head = " ".join(x for x in (out.title, out.rollout_slug, out.cwd) if x)
            pieces = [("raw_memory", ch, head) for ch in chunk_text(out.raw_memory)]
            pieces += [("rollout_summary", ch, head) for ch in chunk_text(out.rollout_summary)]
            self._put_doc(
                self._conn,
                "output",
                sid,
                (out.source_updated_at, out.generated_at),
                out.source_updated_at,
                out.source_updated_at,
                pieces,
                stats,
            )
            stats.outputs_indexed += 1
        for sid, (doc_id, _, _) in known.items():
            if sid not in current:
                differs = True
                if write:
                    self._drop_doc(self._conn, doc_id, stats)
                    stats.outputs_removed += 1
        return differs

    def _indexed_dirs(self) -> list[str]:
        dirs = {""}
        for (key,) in self._conn.execute("SELECT key FROM docs WHERE source = 'file'"):
            dirs.add(key.rpartition("/")[0])
        return sorted(dirs)

    def _watermark(self, dirs: list[str]) -> str:
        """What must change when indexed content may have: folder mtimes, the mark, outputs.

        File times tick coarsely (a few ms): two changes in one tick leave the same mtime. So,
        as git does for its index, a watermark holding a time too close to now is *racy* and
        comes back empty, which never matches: the next query compares everything.
        """
        parts = []
        newest = 0
        for rel in dirs:
            try:
                st = os.lstat(self.root / rel if rel else self.root)
                parts.append(f"{rel}:{st.st_mtime_ns}:{st.st_ino}")
                newest = max(newest, st.st_mtime_ns)
            except OSError:
                parts.append(f"{rel}:-")
        try:
            mark = os.lstat(change_mark_file(self.root))
            parts.append(f"mark:{mark.st_mtime_ns}:{mark.st_size}:{mark.st_ino}")
            newest = max(newest, mark.st_mtime_ns)
        except OSError:
            parts.append("mark:-")
        if newest >= time.time_ns() - RACY_NS:
            return ""
        if self.store is not None:
            row = self.store._conn.execute(
                """SELECT COUNT(*), TOTAL(o.source_updated_at), TOTAL(o.generated_at)
                   FROM stage1_outputs o LEFT JOIN session_meta m ON m.session_id = o.session_id
                   WHERE COALESCE(m.memory_mode, 'enabled') = 'enabled'"""
            ).fetchone()
            parts.append(f"outputs:{row[0]}:{row[1]:.0f}:{row[2]:.0f}")
        return "|".join(parts)

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def refresh(self) -> RefreshStats:
        """Bring the index up to date with the folder and the outputs; returns what it did.

        An unchanged watermark (recent enough) answers at once. Otherwise a pass compares
        signatures without a write lock; if anything differs, the work is redone inside
        ``BEGIN IMMEDIATE`` so a concurrent refresher's work is seen.
        """
        started = time.perf_counter()
        with self._lock:
            checked = self._meta("checked_at")
            fresh = checked is not None and time.time() - float(checked) < FULL_CHECK_S
            dirs = json.loads(self._meta("dirs") or "[]")
            before = self._watermark(dirs)
            if fresh and dirs and before and self._meta("watermark") == before:
                probe = RefreshStats(watermark_hit=True)
                probe.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
                return probe
            probe = RefreshStats()
            if not (self._sync_files(False, probe) | self._sync_outputs(False, probe)):
                self._remember(dirs, before)
                probe.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
                return probe
            stats = RefreshStats()
            with self._write():
                self._sync_files(True, stats)
                self._sync_outputs(True, stats)
            if stats.chunks_removed:
                with self._write() as c:
                    c.execute("INSERT INTO fts (fts) VALUES ('optimize')")
            self._remember(dirs, before)
            stats.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
            return stats

    def _remember(self, dirs: list[str], before: str) -> None:
        """Store the watermark the index now matches: the one taken before the sync, so a change
        racing with the sync shows at the next query. Only when the set of folders changed is it
        taken again afterwards (a change in that short window waits for the periodic check)."""
        now_dirs = self._indexed_dirs()
        mark = before if now_dirs == dirs else self._watermark(now_dirs)
        dirs = now_dirs
        with self._write() as c:
            c.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [
                    ("watermark", mark),
                    ("dirs", json.dumps(dirs)),
                    ("checked_at", repr(time.time())),
                ],
            )

    # -- querying ---------------------------------------------------------------------------

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

    def search(
        self,
        queries: list[str],
        *,
        match_mode: str = "any",
        path: str | None = None,
        window: tuple[int | None, int | None] = (None, None),
        cursor: int = 0,
        max_results: int = 200,
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
        where, args = scope_sql + window_sql, scope_args + window_args
        base = (
            "FROM fts JOIN chunks c ON c.id = fts.rowid JOIN docs d ON d.id = c.doc_id WHERE fts MATCH ?"
            + where
        )
        stages = ["strict", "prefix"] + (["any_term"] if match_mode == "any" else [])
        total, expr, used = 0, None, None
        with self._lock:
            for stage in stages:
                expr = build_match(queries, match_mode=match_mode, stage=stage)
                if expr is None:
                    raise InvalidArgument(
                        "ranked search needs at least one word (letters or digits) in the queries"
                    )
                total = self._conn.execute(f"SELECT count(*) {base}", [expr, *args]).fetchone()[0]
                used = stage
                if total:
                    break
            rows = []
            if total:
                rows = self._conn.execute(
                    f"""SELECT d.source, d.key, d.stamp, c.kind, c.start_line, c.end_line, fts.body,
                               bm25(fts, 1.0, {HEAD_WEIGHT}) AS score {base}
                        ORDER BY score, d.stamp DESC, d.key, c.start_line
                        LIMIT ? OFFSET ?""",
                    [expr, *args, max_results, cursor],
                ).fetchall()
        matches = []
        for r in rows:
            is_file = r["source"] == "file"
            content = "\n".join(_clip(line) for line in r["body"].split("\n"))
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
                    score=-r["score"],
                    updated=iso(r["stamp"]),
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
            files_searched=stats.files_seen,
            strategy=used,
            refresh=asdict(stats),
            elapsed_ms=round((time.perf_counter() - started) * 1000, 3),
        )
