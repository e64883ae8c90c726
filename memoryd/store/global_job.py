"""The singleton consolidation job: one ``memory_consolidate_global`` row for the whole machine.

Split from stage 1 because its rules differ: a live lease is checked before the failure backoff,
the six-hour cooldown starts only after a run that called the model, an urgent enqueue (a forget)
lifts that cooldown, and a reset wipes memory only while no consolidation holds the lease.
"""

from __future__ import annotations

import sqlite3
import uuid

from memoryd.clock import Clock
from memoryd.errors import LeaseHeld
from memoryd.owner import Owner, current_owner
from memoryd.store.db import write_tx
from memoryd.store.jobs import (
    GLOBAL,
    GLOBAL_KEY,
    Claim,
    cut_error,
    enqueue_global,
    lease_held,
    owned_row,
)
from memoryd.store.keys import PHASE2_URGENT
from memoryd.tuning import (
    DEFAULT_RETRIES,
    PHASE2_COOLDOWN_MS,
    PHASE2_LEASE_MS,
    PHASE2_RETRY_DELAY_MS,
)


def _urgent_input(conn: sqlite3.Connection) -> int:
    """The input version of the last urgent enqueue (0 when none)."""
    row = conn.execute("SELECT value FROM kv WHERE key = ?", (PHASE2_URGENT,)).fetchone()
    try:
        return int(row[0]) if row else 0
    except (TypeError, ValueError):
        return 0


class Phase2Job:
    """The singleton consolidation job: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    def enqueue_phase2(self, watermark: int | None = None, *, urgent: bool = False) -> None:
        with write_tx(self._conn) as c:
            enqueue_global(
                c, self._clock.now_ms() if watermark is None else watermark, urgent=urgent
            )

    def phase2_job(self) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._conn.execute(
            "SELECT * FROM jobs WHERE kind = ? AND job_key = ?", (GLOBAL, GLOBAL_KEY)
        ).fetchone()
        return row

    def claim_phase2(
        self, *, worker_id: str, ignore_cooldown: bool = False, owner: Owner | None = None
    ) -> Claim:
        """Take the machine-wide consolidation lease.

        Checked in order: a live lease (never bypassed), a failure backoff, the cooldown that
        follows a consolidation that actually called the model (``ignore_cooldown`` skips only
        this one). Phase 2 is time-gated, not pending-gated: after the cooldown any pump may
        claim it, and a run with a clean workspace ends without a model call.
        """
        now = self._clock.now_ms()
        token = uuid.uuid4().hex
        me = (owner or current_owner()).encode()
        with write_tx(self._conn) as c:
            row = c.execute(
                "SELECT * FROM jobs WHERE kind = ? AND job_key = ?", (GLOBAL, GLOBAL_KEY)
            ).fetchone()
            if row is None:
                c.execute(
                    """INSERT INTO jobs (kind, job_key, status, worker_id, ownership_token, started_at,
                       lease_until, retry_remaining, input_watermark, last_success_watermark, owner)
                       VALUES (?, ?, 'running', ?, ?, ?, ?, ?, 0, 0, ?)""",
                    (
                        GLOBAL,
                        GLOBAL_KEY,
                        worker_id,
                        token,
                        now,
                        now + PHASE2_LEASE_MS,
                        DEFAULT_RETRIES,
                        me,
                    ),
                )
                return Claim("claimed", GLOBAL_KEY, token, 0)
            if lease_held(row, now):
                return Claim("skipped_running", GLOBAL_KEY)
            if row["retry_at"] is not None and row["retry_at"] > now:
                return Claim("skipped_backoff", GLOBAL_KEY)
            if not ignore_cooldown and (row["cooldown_until"] or 0) > now:
                return Claim("skipped_cooldown", GLOBAL_KEY)
            c.execute(
                """UPDATE jobs SET status = 'running', worker_id = ?, ownership_token = ?, started_at = ?,
                   lease_until = ?, retry_at = NULL, last_error = NULL, finished_at = NULL, owner = ?
                   WHERE kind = ? AND job_key = ?""",
                (worker_id, token, now, now + PHASE2_LEASE_MS, me, GLOBAL, GLOBAL_KEY),
            )
            return Claim("claimed", GLOBAL_KEY, token, row["input_watermark"])

    def heartbeat_phase2(self, token: str) -> bool:
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            return (
                c.execute(
                    """UPDATE jobs SET lease_until = ? WHERE kind = ? AND job_key = ?
                       AND status = 'running' AND ownership_token = ?""",
                    (now + PHASE2_LEASE_MS, GLOBAL, GLOBAL_KEY, token),
                ).rowcount
                == 1
            )

    def mark_phase2_succeeded(
        self,
        token: str,
        consumed: list[tuple[str, int]],
        *,
        consolidated: bool,
        watermark: int,
        claimed_input: int | None = None,
    ) -> bool:
        """Finish a run; ``consumed`` (session id, source_updated_at) pairs become the selection snapshot.

        ``input_watermark`` is an input *version* (every enqueue raises it), not a session time:
        stage-1 jobs finish in any order, so the largest consumed ``source_updated_at``
        (``watermark``, kept for callers' logs) can sit below it after a run that used everything.
        What this run consumed is the version it saw at claim time (``claimed_input``; the current
        one when not given), and that is what ``last_success_watermark`` records, so "pending
        input" means exactly "enqueued after the last good run claimed".

        Only a run that called the model starts the cooldown: a clean no-op costs nothing, so it
        should not delay the first real consolidation (the anchor's install-time defect).
        """
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            job = owned_row(c, GLOBAL, GLOBAL_KEY, token)
            if job is None:
                return False
            # Input enqueued while this run worked is not in what it consumed: stay pending for it.
            current = job["input_watermark"] or 0
            seen = current if claimed_input is None else claimed_input
            status = "pending" if current > seen else "done"
            # Something was forgotten after this run claimed: no cooldown, run again soon.
            cooling = consolidated and _urgent_input(c) <= seen
            c.execute(
                """UPDATE jobs SET status = ?, finished_at = ?, lease_until = NULL, ownership_token = NULL,
                   last_error = NULL, retry_at = NULL, retry_remaining = ?,
                   last_success_watermark = MAX(COALESCE(last_success_watermark, 0), ?),
                   cooldown_until = CASE WHEN ? THEN ? ELSE cooldown_until END
                   WHERE kind = ? AND job_key = ?""",
                (
                    status,
                    now,
                    DEFAULT_RETRIES,
                    seen,
                    int(cooling),
                    now + PHASE2_COOLDOWN_MS,
                    GLOBAL,
                    GLOBAL_KEY,
                ),
            )
            c.execute(
                """UPDATE stage1_outputs SET selected_for_phase2 = 0, selected_for_phase2_source_updated_at = NULL
                   WHERE selected_for_phase2 != 0"""
            )
            c.executemany(
                """UPDATE stage1_outputs SET selected_for_phase2 = 1, selected_for_phase2_source_updated_at = ?
                   WHERE session_id = ? AND source_updated_at = ?""",
                [(wm, sid, wm) for sid, wm in consumed],
            )
            return True

    def mark_phase2_failed(self, token: str, error: str) -> bool:
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            n = c.execute(
                """UPDATE jobs SET status = 'failed', finished_at = ?, lease_until = NULL, ownership_token = NULL,
                   retry_at = ?, retry_remaining = MAX(retry_remaining - 1, 0), last_error = ?
                   WHERE kind = ? AND job_key = ? AND status = 'running'
                   AND (ownership_token = ? OR ownership_token IS NULL)""",
                (now, now + PHASE2_RETRY_DELAY_MS, cut_error(error), GLOBAL, GLOBAL_KEY, token),
            ).rowcount
            return n == 1

    def release_phase2(
        self, token: str, note: str | None = "released at shutdown", *, status: str = "pending"
    ) -> bool:
        """Give the lease back without finishing; ``status`` restores what a no-op claim found."""
        with write_tx(self._conn) as c:
            return (
                c.execute(
                    """UPDATE jobs SET status = ?, lease_until = NULL, ownership_token = NULL,
                       retry_at = NULL, last_error = ? WHERE kind = ? AND job_key = ?
                       AND status = 'running' AND ownership_token = ?""",
                    (status, cut_error(note) if note else None, GLOBAL, GLOBAL_KEY, token),
                ).rowcount
                == 1
            )

    def reset_memory_data(self) -> None:
        """Wipe outputs and jobs; leave a cooldown marker so the empty folder is not re-seeded at once.

        Session modes are kept (a disabled session stays disabled). Refused with
        :class:`LeaseHeld` while a consolidation holds a live lease; the check and the wipe are one
        transaction, so no pass can claim phase 2 in between.
        """
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            live = c.execute(
                "SELECT 1 FROM jobs WHERE kind = ? AND job_key = ? AND status = 'running'"
                " AND lease_until > ?",
                (GLOBAL, GLOBAL_KEY, now),
            ).fetchone()
            if live is not None:
                raise LeaseHeld()
            c.execute("DELETE FROM stage1_outputs")
            c.execute("DELETE FROM jobs")
            c.execute("DELETE FROM kv WHERE key = ?", (PHASE2_URGENT,))
            c.execute(
                """INSERT INTO jobs (kind, job_key, status, finished_at, retry_remaining, input_watermark,
                   last_success_watermark, cooldown_until) VALUES (?, ?, 'done', ?, ?, 0, 0, ?)""",
                (GLOBAL, GLOBAL_KEY, now, DEFAULT_RETRIES, now + PHASE2_COOLDOWN_MS),
            )
