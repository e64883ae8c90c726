"""Keeping the ranked index in step with the memory folder and the stage-1 outputs.

This is the write side of :class:`memoryd.tools.index.SearchIndex`, kept apart from the query
side because it is the part with the subtle rules: the watermark that lets a query skip walking
the folder, the signature comparison that finds what changed, and the chunk bookkeeping that keeps
removed text out of the FTS file. The design is described in :mod:`memoryd.tools.index`; this
module is a mixin so every method still runs on the one connection and lock the index owns.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from memoryd.errors import InvalidArgument, NotFound, Refused
from memoryd.folder.guard import open_root, read_file, walk_files
from memoryd.folder.layout import RAW_MEMORIES_FILE, SUMMARIES_DIR
from memoryd.paths import change_mark_file
from memoryd.scopes import PROJECTS_DIR, scope_key, scope_root
from memoryd.store import Store
from memoryd.tools.chunks import Chunk, chunk_text
from memoryd.tools.common import stamp_ms
from memoryd.tools.files import decode
from memoryd.tuning import INDEX_FULL_CHECK_S, INDEX_OPTIMIZE_ADDED, RACY_WINDOW_NS

_PATH_SPLIT_RE = re.compile(r"[/_.\-]+")
Pending = tuple[int, str, Callable[[], None]]  # (stamp, key, index it): a change to apply


def output_sigs(store: Store | None) -> dict[str, tuple[int, int, str | None]]:
    """Enabled sessions' output signatures and project keys, from memory.db (read-only).

    The project key is part of the signature: learning a session's worktree later (the
    backfill) changes which projects may see it, without a new version of its text.
    """
    if store is None:
        return {}
    keys: dict[tuple[str | None, str | None], str | None] = {}
    out = {}
    for sid, updated, generated, worktree, cwd in store.outputs.enabled_signatures():
        if (worktree, cwd) not in keys:
            where = scope_root(worktree, cwd)
            keys[worktree, cwd] = scope_key(where) if where else None
        out[sid] = (updated, generated, keys[worktree, cwd])
    return out


def _words(*texts: str) -> set[str]:
    """The whitespace-separated words of ``texts``, exactly as written.

    Coarser than the FTS tokenizer (which also splits at punctuation and folds case), so when
    every old word is among the new ones, every index term the old chunks held is still held by
    the new ones and nothing removed lingers in the file: no optimise is needed (an appended line
    re-indexes its file without scrubbing the whole index).
    """
    return {word for text in texts for word in text.split()}


def _held_words(c: sqlite3.Connection, ids: list[tuple[int]]) -> set[str]:
    words: set[str] = set()
    for (chunk_id,) in ids:
        row = c.execute("SELECT body, head FROM fts WHERE rowid = ?", (chunk_id,)).fetchone()
        if row is not None:
            words |= _words(row[0], row[1])
    return words


def apply_oldest_first(todo: list[Pending]) -> None:
    """Index what changed oldest first, so chunk ids follow time: a ranked query with more
    matches than it scores takes the highest ids (see :meth:`SearchIndex._page`)."""
    todo.sort(key=lambda item: (item[0], item[1]))
    for _, _, index_one in todo:
        index_one()


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
    # Removed chunks held words the index keeps no longer: optimise to scrub them from the file.
    words_left: bool = False
    elapsed_ms: float = 0.0
    watermark_hit: bool = False  # answered from the watermark, without walking the folder

    @property
    def changed(self) -> bool:
        return bool(
            self.files_indexed or self.files_removed or self.outputs_indexed or self.outputs_removed
        )


class IndexRefresh:
    """Incremental refresh for :class:`~memoryd.tools.index.SearchIndex`, which owns the state.

    The attributes below are set by the index's constructor; callers hold ``_lock`` where the
    index's own methods do.
    """

    root: Path
    store: Store | None
    _conn: sqlite3.Connection
    _lock: threading.RLock
    _outputs_cache: tuple[tuple[int, int], str] | None = None  # see outputs_mark

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- writing ----------------------------------------------------------------------------

    def _drop_chunks(
        self, c: sqlite3.Connection, doc_id: int, words: set[str] | None = None
    ) -> int:
        """Remove a doc's chunks; with ``words``, also collect the words they held."""
        ids = [(r[0],) for r in c.execute("SELECT id FROM chunks WHERE doc_id = ?", (doc_id,))]
        if words is not None:
            words.update(_held_words(c, ids))
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
        scope: str | None = None,
    ) -> None:
        row = c.execute(
            "SELECT id FROM docs WHERE source = ? AND key = ?", (source, key)
        ).fetchone()
        if row is not None:
            doc_id = row[0]
            old_words: set[str] = set()
            stats.chunks_removed += self._drop_chunks(c, doc_id, old_words)
            if not stats.words_left and not old_words <= _words(
                *(part for _, chunk, head in pieces for part in (chunk.body, head))
            ):
                stats.words_left = True
            c.execute(
                "UPDATE docs SET sig_a = ?, sig_b = ?, stamp = ?, name_stamp = ?, scope = ? WHERE id = ?",
                (*sig, stamp, name_stamp, scope, doc_id),
            )
        else:
            doc_id = c.execute(
                "INSERT INTO docs (source, key, sig_a, sig_b, stamp, name_stamp, scope)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (source, key, *sig, stamp, name_stamp, scope),
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
        removed = self._drop_chunks(c, doc_id)
        stats.chunks_removed += removed
        stats.words_left = stats.words_left or removed > 0
        c.execute("DELETE FROM docs WHERE id = ?", (doc_id,))

    # -- refreshing -------------------------------------------------------------------------

    def _root_exists(self) -> bool:
        fd = open_root(self.root)
        if fd is None:
            return False
        os.close(fd)
        return True

    def _skip(self, rel: str) -> bool:
        if self.store is None:
            return False
        parts = rel.split("/")
        if len(parts) > 2 and parts[0] == PROJECTS_DIR:  # a project's renders of the same outputs
            rel = "/".join(parts[2:])
        return rel == RAW_MEMORIES_FILE or rel.startswith(SUMMARIES_DIR + "/")

    def _known(self, source: str) -> dict[str, tuple[int, int, int, str | None]]:
        rows = self._conn.execute(
            "SELECT key, id, sig_a, sig_b, scope FROM docs WHERE source = ?", (source,)
        )
        return {r["key"]: (r["id"], r["sig_a"], r["sig_b"], r["scope"]) for r in rows}

    def _sync_files(self, todo: list[Pending] | None, stats: RefreshStats) -> bool:
        """Compare the folder against the index; True if anything differs. With ``todo``, removed
        files leave the index at once and changed ones are queued there (see :func:`apply_oldest_first`)."""
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
                if todo is not None:
                    name_ms = stamp_ms(entry.name)
                    when = name_ms if name_ms is not None else entry.st.st_mtime_ns // 1_000_000
                    todo.append((when, entry.rel, partial(self._index_file, entry.rel, stats)))
        for rel, (doc_id, *_) in known.items():
            if rel not in seen:
                differs = True
                if todo is not None:
                    self._drop_doc(self._conn, doc_id, stats)
                    stats.files_removed += 1
        return differs

    def _index_file(self, rel: str, stats: RefreshStats) -> None:
        """Read ``rel`` again (the walk's descriptors are closed by now), refusing links as it did."""
        try:
            data, st = read_file(self.root, rel)
        except (NotFound, Refused, InvalidArgument):
            return  # vanished or swapped since the walk: the next refresh sees what is there
        name_ms = stamp_ms(rel.rpartition("/")[2])
        pieces = []
        if b"\x00" not in data:
            head = " ".join(_PATH_SPLIT_RE.split(rel))
            pieces = [
                ("file", ch, f"{head} {ch.heading}".strip()) for ch in chunk_text(decode(data))
            ]
        stamp = name_ms if name_ms is not None else st.st_mtime_ns // 1_000_000
        sig = (st.st_mtime_ns, st.st_size)
        self._put_doc(self._conn, "file", rel, sig, stamp, name_ms, pieces, stats)
        stats.files_indexed += 1

    def _sync_outputs(self, todo: list[Pending] | None, stats: RefreshStats) -> bool:
        known = self._known("output")
        current = output_sigs(self.store)
        stats.outputs_seen = len(current)
        differs = False
        assert self.store is not None or not current
        for sid, sig in current.items():
            have = known.get(sid)
            if have is not None and have[1:] == sig:
                continue
            differs = True
            if todo is not None:
                todo.append((sig[0], sid, partial(self._index_output, sid, sig[2], stats)))
        for sid, (doc_id, *_) in known.items():
            if sid not in current:
                differs = True
                if todo is not None:
                    self._drop_doc(self._conn, doc_id, stats)
                    stats.outputs_removed += 1
        return differs

    def _index_output(self, sid: str, scope: str | None, stats: RefreshStats) -> None:
        out = self.store.outputs.output(sid) if self.store is not None else None
        if out is None:
            return
        head = " ".join(x for x in (out.title, out.rollout_slug, out.cwd) if x)
        pieces = [("raw_memory", ch, head) for ch in chunk_text(out.raw_memory)]
        pieces += [("rollout_summary", ch, head) for ch in chunk_text(out.rollout_summary)]
        sig = (out.source_updated_at, out.generated_at)
        stamp = out.source_updated_at
        self._put_doc(self._conn, "output", sid, sig, stamp, stamp, pieces, stats, scope)
        stats.outputs_indexed += 1

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
        base = str(self.root)
        for rel in dirs:
            try:
                st = os.lstat(f"{base}/{rel}" if rel else base)  # str, not Path: ~3× cheaper
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
        if newest >= time.time_ns() - RACY_WINDOW_NS:
            return ""
        if self.store is not None:
            parts.append(outputs_mark(self, self.store))
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
            fresh = _within(checked, INDEX_FULL_CHECK_S)
            dirs = json.loads(self._meta("dirs") or "[]")
            before = self._watermark(dirs)
            if fresh and dirs and before and self._meta("watermark") == before:
                probe = RefreshStats(watermark_hit=True)
                probe.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
                return probe
            # The outputs' aggregate is compared on its own: while it stands (and their own
            # periodic check is not due) a file change does not compare every output's signature
            # (~50 ms at 10,000 sessions); when it moved, they surely differ: no probe for them,
            # nor for the files (the sync below walks them anyway).
            outputs, version, same_outputs, moved = _outputs_state(self)
            seen: OutputsSeen = (outputs, version, not same_outputs)
            probe = RefreshStats()
            if (
                not moved
                and not self._sync_files(None, probe)
                and (same_outputs or not self._sync_outputs(None, probe))
            ):
                self._remember(dirs, before, seen)
                probe.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
                return probe
            stats = RefreshStats()
            todo: list[Pending] = []
            with self._write():
                self._sync_files(todo, stats)
                if not same_outputs:
                    self._sync_outputs(todo, stats)
                apply_oldest_first(todo)
            if stats.words_left or stats.chunks_added >= INDEX_OPTIMIZE_ADDED:
                with self._write() as c:
                    c.execute("INSERT INTO fts (fts) VALUES ('optimize')")
            self._remember(dirs, before, seen)
            stats.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
            return stats

    def _remember(self, dirs: list[str], before: str, outputs: OutputsSeen) -> None:
        """Store the watermark the index now matches: the one taken before the sync, so a change
        racing with the sync shows at the next query. Only when the set of folders changed is it
        taken again afterwards (a change in that short window waits for the periodic check).
        The outputs' aggregate is kept only if memory.db did not move while it was read."""
        now_dirs = self._indexed_dirs()
        mark = before if now_dirs == dirs else self._watermark(now_dirs)
        dirs = now_dirs
        aggregate, version, compared = outputs
        if self.store is not None and self.store.data_version() != version:
            aggregate = ""  # never equal: the next refresh compares every output
        now = repr(time.time())
        rows = [("watermark", mark), ("outputs_mark", aggregate), ("dirs", json.dumps(dirs))]
        rows += [("checked_at", now)] + ([("outputs_checked_at", now)] if compared else [])
        with self._write() as c:
            c.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", rows)


OutputsSeen = tuple[str, tuple[int, int] | None, bool]  # aggregate, memory.db version, compared


def _within(stamp: str | None, seconds: float) -> bool:
    """Whether ``stamp`` (a stored ``time.time()``) is less than ``seconds`` old; a stamp from the
    future (the clock was set back) is not recent, or the full check would wait for it."""
    return stamp is not None and 0 <= time.time() - float(stamp) < seconds


def _outputs_state(index: IndexRefresh) -> tuple[str, tuple[int, int] | None, bool, bool]:
    """The outputs' aggregate now and memory.db's version it was read at; whether the index
    holds exactly it (compared within :data:`INDEX_FULL_CHECK_S`, however often files change),
    and whether it moved since it was stored."""
    if index.store is None:
        return "", None, False, False
    version = index.store.data_version()
    mark = outputs_mark(index, index.store)
    stored = index._meta("outputs_mark")
    recent = _within(index._meta("outputs_checked_at"), INDEX_FULL_CHECK_S)
    same = recent and bool(mark) and stored == mark
    return mark, version, same, bool(mark) and stored is not None and stored != mark


def outputs_mark(index: IndexRefresh, store: Store) -> str:
    """The outputs' aggregate, read again only when memory.db may have changed since.

    ``data_version`` moves when another connection (any process) commits, ``total_changes``
    when this one does; while both stand still the aggregate (~3 ms over 15 K outputs) is
    the one already read. A process that lives for one query gains nothing, a server does.
    """
    version = store.data_version()
    cached = index._outputs_cache
    if cached is not None and cached[0] == version:
        return cached[1]
    mark = store.outputs.enabled_mark()
    index._outputs_cache = (version, mark)
    return mark
