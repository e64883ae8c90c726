"""The stage-1 job state machine: one ``memory_stage1`` row per session, and its save points.

Split from the global job because the two share only the lease rules (:mod:`memoryd.store.jobs`):

* A stage-1 failure burns one of three retries and backs off for an hour; an exhausted or finished
  job is revived (retries reset) only when the session itself moves forward (its watermark, the
  session's ``time.updated``, grows).
* The cap on running stage-1 jobs is counted inside the claim transaction, so it holds across
  processes that share the file; a claim whose owner is provably gone does not count against it
  and is taken over without burning a retry.
* Releasing on shutdown returns the job to ``pending`` without burning a retry.
* A success stores the output, the save point (after a compaction) and the phase-2 enqueue in one
  transaction.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from memoryd.clock import Clock
from memoryd.owner import Owner, current_owner
from memoryd.store.db import write_tx
from memoryd.store.jobs import (
    STAGE1,
    Claim,
    SavePoint,
    cut_error,
    enqueue_global,
    lease_held,
    leases_held,
    owned_row,
)
from memoryd.tuning import DEFAULT_RETRIES, STAGE1_LEASE_MS, STAGE1_RETRY_DELAY_MS


def _save_point(
    c: sqlite3.Connection, session_id: str, started: int | None, sp: SavePoint | None, now: int
) -> None:
    # A compaction seen while this job ran is newer than what it read: it stays pending.
    c.execute(
        "DELETE FROM compactions WHERE session_id = ? AND seen_at <= ?",
        (session_id, started if started is not None else now),
    )
    if sp is None:
        return
    c.execute(
        """INSERT INTO save_points (session_id, message_id, raw_memory, rollout_summary, compactions,
                                    updated_at) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (session_id) DO UPDATE SET message_id = excluded.message_id,
               raw_memory = excluded.raw_memory, rollout_summary = excluded.rollout_summary,
               compactions = excluded.compactions, updated_at = excluded.updated_at""",
        (session_id, sp.message_id, sp.raw_memory, sp.rollout_summary, sp.compactions, now),
    )


class Stage1Jobs:
    """The per-session stage-1 jobs and their save points: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    def claim_stage1(
        self,
        session_id: str,
        watermark: int,
        *,
        max_running: int,
        worker_id: str,
        owner: Owner | None = None,
    ) -> Claim:
        now = self._clock.now_ms()
        me = (owner or current_owner()).encode()
        with write_tx(self._conn) as c:
            out = c.execute(
                "SELECT source_updated_at FROM stage1_outputs WHERE session_id = ?", (session_id,)
            ).fetchone()
            row = c.execute(
                "SELECT * FROM jobs WHERE kind = ? AND job_key = ?", (STAGE1, session_id)
            ).fetchone()
            if (out and out["source_updated_at"] >= watermark) or (
                row
                and row["status"] == "done"
                and (row["last_success_watermark"] or 0) >= watermark
            ):
                return Claim("skipped_up_to_date", session_id)
            if lease_held(row, now):
                return Claim("skipped_running", session_id)
            # A crashed owner's claim is taken over as it stood: its backoff and retries unchanged.
            orphan = row is not None and row["status"] == "running"
            advanced = row is not None and watermark > (row["input_watermark"] or 0)
            if row and not advanced and not orphan:
                if row["retry_at"] is not None and row["retry_at"] > now:
                    return Claim("skipped_backoff", session_id)
                if row["retry_remaining"] <= 0:
                    return Claim("skipped_exhausted", session_id)
            if leases_held(c, STAGE1, now) >= max_running:
                return Claim("skipped_cap", session_id)
            token = uuid.uuid4().hex
            retries = DEFAULT_RETRIES if row is None or advanced else row["retry_remaining"]
            c.execute(
                """
                INSERT INTO jobs (kind, job_key, status, worker_id, ownership_token, started_at, finished_at,
                                  lease_until, retry_at, retry_remaining, last_error, input_watermark,
                                  last_success_watermark, owner)
                VALUES (?, ?, 'running', ?, ?, ?, NULL, ?, NULL, ?, NULL, ?, NULL, ?)
                ON CONFLICT (kind, job_key) DO UPDATE SET
                    status = 'running', worker_id = excluded.worker_id, owner = excluded.owner,
                    ownership_token = excluded.ownership_token, started_at = excluded.started_at,
                    finished_at = NULL, lease_until = excluded.lease_until, retry_at = NULL,
                    retry_remaining = excluded.retry_remaining, last_error = NULL,
                    input_watermark = excluded.input_watermark
                """,
                (
                    STAGE1,
                    session_id,
                    worker_id,
                    token,
                    now,
                    now + STAGE1_LEASE_MS,
                    retries,
                    watermark,
                    me,
                ),
            )
            return Claim("claimed", session_id, token, watermark)

    def record_compaction(self, session_id: str) -> None:
        """opencode compacted a session: extract it at the next pass, idle or not (once)."""
        with write_tx(self._conn) as c:
            c.execute(
                "INSERT INTO compactions (session_id, seen_at) VALUES (?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET seen_at = excluded.seen_at",
                (session_id, self._clock.now_ms()),
            )

    def pending_compactions(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT session_id FROM compactions")}

    def save_point(self, session_id: str) -> SavePoint | None:
        r = self._conn.execute(
            "SELECT * FROM save_points WHERE session_id = ?", (session_id,)
        ).fetchone()
        if r is None:
            return None
        return SavePoint(r["message_id"], r["raw_memory"], r["rollout_summary"], r["compactions"])

    def _finish_stage1(
        self, c: sqlite3.Connection, session_id: str, watermark: int, now: int
    ) -> None:
        c.execute(
            """
            UPDATE jobs SET status = 'done', finished_at = ?, lease_until = NULL, retry_at = NULL,
                last_error = NULL, ownership_token = NULL, last_success_watermark = ?
            WHERE kind = ? AND job_key = ?
            """,
            (now, watermark, STAGE1, session_id),
        )

    def mark_stage1_succeeded(
        self,
        session_id: str,
        token: str,
        *,
        raw_memory: str,
        rollout_summary: str,
        rollout_slug: str | None,
        cwd: str | None,
        title: str | None,
        project_id: str | None = None,
        worktree: str | None = None,
        save_point: SavePoint | None = None,
    ) -> bool:
        """Store the output and finish the job, only if ``token`` still owns it.

        ``save_point`` (after a compaction) is stored in the same transaction, so the output and
        the mark of how far it reaches can never disagree.
        """
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            job = owned_row(c, STAGE1, session_id, token)
            if job is None:
                return False
            wm = job["input_watermark"]
            c.execute(
                """
                INSERT INTO stage1_outputs (session_id, source_updated_at, raw_memory, rollout_summary,
                                            rollout_slug, cwd, title, generated_at, project_id, worktree)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (session_id) DO UPDATE SET
                    source_updated_at = excluded.source_updated_at, raw_memory = excluded.raw_memory,
                    rollout_summary = excluded.rollout_summary, rollout_slug = excluded.rollout_slug,
                    cwd = excluded.cwd, title = excluded.title, generated_at = excluded.generated_at,
                    project_id = COALESCE(excluded.project_id, stage1_outputs.project_id),
                    worktree = COALESCE(excluded.worktree, stage1_outputs.worktree)
                WHERE excluded.source_updated_at >= stage1_outputs.source_updated_at
                """,
                (
                    session_id,
                    wm,
                    raw_memory,
                    rollout_summary,
                    rollout_slug,
                    cwd,
                    title,
                    now,
                    project_id,
                    worktree,
                ),
            )
            self._finish_stage1(c, session_id, wm, now)
            _save_point(c, session_id, job["started_at"], save_point, now)
            enqueue_global(c, wm)
            return True

    def advance_stage1_claim(self, session_id: str, token: str, watermark: int) -> bool:
        """The session as read now is newer than when it was claimed: the output will claim it."""
        with write_tx(self._conn) as c:
            if owned_row(c, STAGE1, session_id, token) is None:
                return False
            c.execute(
                "UPDATE jobs SET input_watermark = MAX(input_watermark, ?) WHERE kind = ? AND job_key = ?",
                (watermark, STAGE1, session_id),
            )
            return True

    def mark_stage1_no_output(
        self, session_id: str, token: str, *, save_point: SavePoint | None = None
    ) -> bool:
        """Finish with nothing worth remembering; a stale output row for the session is removed."""
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            job = owned_row(c, STAGE1, session_id, token)
            if job is None:
                return False
            _save_point(c, session_id, job["started_at"], save_point, now)
            deleted = c.execute(
                "DELETE FROM stage1_outputs WHERE session_id = ?", (session_id,)
            ).rowcount
            self._finish_stage1(c, session_id, job["input_watermark"], now)
            if deleted:
                enqueue_global(c, job["input_watermark"])
            return True

    def mark_stage1_failed(self, session_id: str, token: str, error: str) -> bool:
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            if owned_row(c, STAGE1, session_id, token) is None:
                return False
            c.execute(
                """
                UPDATE jobs SET retry_remaining = MAX(retry_remaining - 1, 0),
                    status = CASE WHEN retry_remaining - 1 > 0 THEN 'pending' ELSE 'failed' END,
                    finished_at = ?, lease_until = NULL, ownership_token = NULL, retry_at = ?, last_error = ?
                WHERE kind = ? AND job_key = ?
                """,
                (now, now + STAGE1_RETRY_DELAY_MS, cut_error(error), STAGE1, session_id),
            )
            return True

    def release_stage1(
        self, session_id: str, token: str, note: str = "released at shutdown"
    ) -> bool:
        """Give a claim back without burning a retry (shutdown, budget waits)."""
        with write_tx(self._conn) as c:
            if owned_row(c, STAGE1, session_id, token) is None:
                return False
            c.execute(
                """
                UPDATE jobs SET status = 'pending', lease_until = NULL, ownership_token = NULL,
                    retry_at = NULL, last_error = ?
                WHERE kind = ? AND job_key = ?
                """,
                (cut_error(note), STAGE1, session_id),
            )
            return True

    def stage1_job(self, session_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._conn.execute(
            "SELECT * FROM jobs WHERE kind = ? AND job_key = ?", (STAGE1, session_id)
        ).fetchone()
        return row

    def stage1_jobs(self) -> dict[str, sqlite3.Row]:
        """Every session's extraction job, by session id (for the web UI's session list)."""
        rows = self._conn.execute("SELECT * FROM jobs WHERE kind = ?", (STAGE1,))
        return {r["job_key"]: r for r in rows}

    def stage1_counts(self) -> dict[str, int]:
        counts = {"pending": 0, "running": 0, "done": 0, "failed": 0}
        for status, n in self._conn.execute(
            "SELECT status, COUNT(*) FROM jobs WHERE kind = ? GROUP BY status", (STAGE1,)
        ):
            counts[status] = n
        return counts

    def stage1_last_errors(self, limit: int = 5) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            """SELECT job_key, status, last_error, finished_at, retry_at, retry_remaining FROM jobs
               WHERE kind = ? AND last_error IS NOT NULL ORDER BY finished_at DESC LIMIT ?""",
            (STAGE1, limit),
        )
        return [
            {
                "session_id": r["job_key"],
                "status": r["status"],
                "error": r["last_error"],
                "at": r["finished_at"],
                "retry_at": r["retry_at"],
                "retries_left": r["retry_remaining"],
            }
            for r in rows
        ]
