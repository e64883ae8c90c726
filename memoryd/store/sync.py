"""Sync bookkeeping in ``memory.db``: this machine's tombstones and honouring other machines' ones."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from memoryd.clock import Clock
from memoryd.store.db import write_tx
from memoryd.store.jobs import STAGE1, _enqueue_global


class SyncMixin:
    _conn: sqlite3.Connection
    _clock: Clock

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
                _enqueue_global(c, now, urgent=True)
        return removed

    def published_outputs(self) -> list[sqlite3.Row]:
        """What this machine publishes: outputs its last validated consolidation used, still enabled."""
        return list(
            self._conn.execute(
                """
                SELECT o.* FROM stage1_outputs o LEFT JOIN session_meta m ON m.session_id = o.session_id
                WHERE o.selected_for_phase2 = 1 AND COALESCE(m.memory_mode, 'enabled') = 'enabled'
                  AND o.session_id NOT IN (SELECT session_id FROM sync_tombstones)
                ORDER BY o.session_id
                """
            )
        )
