"""Sync bookkeeping in ``memory.db``: this machine's tombstones and honouring other machines' ones."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from memoryd.clock import DAY, Clock
from memoryd.scopes import scope_root
from memoryd.store.db import write_tx
from memoryd.store.jobs import GLOBAL, GLOBAL_KEY, STAGE1, enqueue_global


class Tombstones:
    """Sync tombstones and what this machine publishes: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    def add_tombstone(self, session_id: str) -> None:
        """Record that this machine forgot ``session_id``; sync publishes it to every other machine."""
        with write_tx(self._conn) as c:
            c.execute(
                "INSERT OR IGNORE INTO sync_tombstones (session_id, at) VALUES (?, ?)",
                (session_id, self._clock.now_ms()),
            )

    def tombstones(self) -> dict[str, int]:
        """This machine's tombstones: session id -> when it was forgotten (epoch ms)."""
        return {
            r[0]: r[1] for r in self._conn.execute("SELECT session_id, at FROM sync_tombstones")
        }

    def honour_tombstones(self, session_ids: Iterable[str]) -> list[str]:
        """Forget local sessions another machine forgot; returns the ids that were removed here.

        Same effect as a local forget (output and job gone, the session disabled so discovery
        never extracts it again), in one transaction; an urgent phase 2 follows when a removed
        output had been consolidated. Every tombstone seen is kept here too, as this machine's
        own: a later commit that drops ``tombstones.json`` from the remote cannot bring the
        session back (here, or through this machine's republished copy, anywhere).
        """
        wanted = sorted(set(session_ids))
        if not wanted:
            return []
        now = self._clock.now_ms()
        removed: list[str] = []
        urgent = False
        with write_tx(self._conn) as c:
            c.executemany(
                "INSERT OR IGNORE INTO sync_tombstones (session_id, at) VALUES (?, ?)",
                [(sid, now) for sid in wanted],
            )
            for sid in wanted:
                row = c.execute(
                    "SELECT selected_for_phase2 FROM stage1_outputs WHERE session_id = ?", (sid,)
                ).fetchone()
                job = c.execute(
                    "SELECT 1 FROM jobs WHERE kind = ? AND job_key = ?", (STAGE1, sid)
                ).fetchone()
                if row is None and job is None:
                    continue
                c.execute("DELETE FROM stage1_outputs WHERE session_id = ?", (sid,))
                c.execute("DELETE FROM jobs WHERE kind = ? AND job_key = ?", (STAGE1, sid))
                c.execute(
                    """INSERT INTO session_meta (session_id, memory_mode, reason, updated_at)
                       VALUES (?, 'disabled', 'forgotten on another machine', ?)
                       ON CONFLICT (session_id) DO UPDATE SET memory_mode = 'disabled',
                       reason = excluded.reason, updated_at = excluded.updated_at""",
                    (sid, now),
                )
                removed.append(sid)
                urgent = urgent or bool(row is not None and row["selected_for_phase2"])
            if urgent:
                enqueue_global(c, now, urgent=True)
        return removed

    def published_outputs(self, max_unused_days: int, limit: int) -> list[sqlite3.Row]:
        """What this machine publishes now: every current output phase 2 could use.

        The same rules as :meth:`phase2_selection`, applied at publish time rather than waiting
        for a consolidation: enabled (memory modes), not forgotten (tombstones), with content,
        and used or updated within the retention window. At most ``limit``, newest first, so a
        huge history never makes other machines skip this machine's whole folder.
        """
        cutoff = self._clock.now_ms() - max_unused_days * DAY
        return list(
            self._conn.execute(
                """
                SELECT o.* FROM stage1_outputs o LEFT JOIN session_meta m ON m.session_id = o.session_id
                WHERE COALESCE(m.memory_mode, 'enabled') = 'enabled'
                  AND (TRIM(o.raw_memory) != '' OR TRIM(o.rollout_summary) != '')
                  AND COALESCE(o.last_usage, o.source_updated_at) >= ?
                  AND o.session_id NOT IN (SELECT session_id FROM sync_tombstones)
                ORDER BY o.source_updated_at DESC, o.session_id
                LIMIT ?
                """,
                (cutoff, limit),
            )
        )

    def output_roots(self) -> list[str]:
        """Every checkout (scope root) this machine has outputs from: the projects remote
        sessions are matched against."""
        rows = self._conn.execute(
            "SELECT DISTINCT worktree, cwd FROM stage1_outputs WHERE cwd IS NOT NULL"
            " OR worktree IS NOT NULL"
        )
        roots = {scope_root(r[0], r[1]) for r in rows}
        return sorted(r for r in roots if r)

    def phase2_running(self) -> bool:
        """Whether a consolidation holds a live lease (its folder must not change under it)."""
        row = self._conn.execute(
            "SELECT 1 FROM jobs WHERE kind = ? AND job_key = ? AND status = 'running'"
            " AND lease_until > ?",
            (GLOBAL, GLOBAL_KEY, self._clock.now_ms()),
        ).fetchone()
        return row is not None
