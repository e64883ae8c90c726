"""What a crashed memoryd left behind: claims it held and helper sessions it created.

Both carry their owner (:mod:`memoryd.owner`). The next memoryd on the same machine releases the
claims of owners that are provably gone (no retry burned: the crash was not the session's fault)
and deletes their helper sessions at once, instead of waiting an hour for leases and 90 minutes
for the helper sweep.
"""

from __future__ import annotations

import sqlite3

from memoryd.clock import Clock
from memoryd.owner import Owner, current_owner, owner_gone
from memoryd.store.db import write_tx


class Owners:
    """What a killed memoryd left: its claims and helper sessions: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    def release_orphaned_claims(self) -> list[tuple[str, str]]:
        """Return running jobs whose owner is gone to ``pending``; the (kind, key) pairs released."""
        released = []
        with write_tx(self._conn) as c:
            rows = c.execute(
                "SELECT kind, job_key, owner, ownership_token FROM jobs "
                "WHERE status = 'running' AND owner IS NOT NULL"
            ).fetchall()
            for r in rows:
                owner = Owner.decode(r["owner"])
                if owner is None or not owner_gone(owner):
                    continue
                c.execute(
                    """UPDATE jobs SET status = 'pending', lease_until = NULL, ownership_token = NULL,
                       retry_at = NULL, last_error = ?
                       WHERE kind = ? AND job_key = ? AND status = 'running' AND ownership_token IS ?""",
                    (
                        f"released: the memoryd that held it (pid {owner.pid}) is gone",
                        r["kind"],
                        r["job_key"],
                        r["ownership_token"],
                    ),
                )
                released.append((r["kind"], r["job_key"]))
        return released

    def record_helper(self, session_id: str, kind: str, owner: Owner | None = None) -> None:
        with write_tx(self._conn) as c:
            c.execute(
                """INSERT INTO helper_sessions (session_id, kind, owner, created_at) VALUES (?, ?, ?, ?)
                   ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner""",
                (session_id, kind, (owner or current_owner()).encode(), self._clock.now_ms()),
            )

    def rename_helper(self, old: str, new: str) -> None:
        with write_tx(self._conn) as c:
            c.execute("UPDATE helper_sessions SET session_id = ? WHERE session_id = ?", (new, old))

    def mark_helper_lost(self, session_id: str) -> None:
        """The create call failed: nobody holds this helper any more (an empty owner)."""
        with write_tx(self._conn) as c:
            c.execute("UPDATE helper_sessions SET owner = '' WHERE session_id = ?", (session_id,))

    def lost_helper_nonces(self) -> set[str]:
        """Nonces of helpers whose create answer never came back, and whose creator is done."""
        rows = self._conn.execute(
            "SELECT session_id, owner FROM helper_sessions WHERE session_id LIKE 'pending:%'"
        ).fetchall()
        return {
            r["session_id"].split(":", 1)[1]
            for r in rows
            if r["owner"] == "" or owner_gone(Owner.decode(r["owner"]))
        }

    def forget_helper(self, session_id: str) -> None:
        with write_tx(self._conn) as c:
            c.execute("DELETE FROM helper_sessions WHERE session_id = ?", (session_id,))

    def orphaned_helpers(self) -> list[str]:
        """Helper sessions whose creator is provably gone (to delete in the host now)."""
        rows = self._conn.execute(
            "SELECT session_id, owner FROM helper_sessions "
            "WHERE session_id NOT LIKE 'pending:%' ORDER BY created_at"
        ).fetchall()
        return [r["session_id"] for r in rows if owner_gone(Owner.decode(r["owner"]))]

    def orphaned_helpers_of_kind(self, kind: str) -> int:
        """Helpers of ``kind`` that were prompted and whose creator is provably gone: their agent
        may still be running in the host until the next pass deletes them."""
        rows = self._conn.execute(
            "SELECT owner FROM helper_sessions WHERE kind = ? AND session_id NOT LIKE 'pending:%'",
            (kind,),
        ).fetchall()
        return sum(1 for r in rows if owner_gone(Owner.decode(r["owner"])))

    def helper_count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM helper_sessions").fetchone()[0])
