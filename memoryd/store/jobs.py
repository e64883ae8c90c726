"""The job state machines: one ``memory_stage1`` row per session, one ``memory_consolidate_global`` row.

Semantics follow Codex's memory store:

* A claim hands out a lease and a fresh ownership token; every finalize is guarded by that token,
  so a worker whose lease expired and was taken over can no longer write anything.
* A stage-1 failure burns one of three retries and backs off for an hour; an exhausted or finished
  job is revived (retries reset) only when the session itself moves forward (its watermark, the
  session's ``time.updated``, grows).
* The cap on running stage-1 jobs is counted inside the claim transaction, so it holds across
  processes that share the file.
* Releasing on shutdown returns the job to ``pending`` without burning a retry.
* Every claim records its owning process (:mod:`memoryd.owner`); a live lease whose owner is
  provably gone (killed on this machine) is taken over at once, without burning a retry, and does
  not count against the running cap.

All times are epoch milliseconds (see :mod:`memoryd.clock`).
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from memoryd.clock import Clock
from memoryd.errors import LeaseHeld
from memoryd.owner import Owner, current_owner, owner_gone
from memoryd.redact import redact
from memoryd.store.db import write_tx
from memoryd.tuning import (
    DEFAULT_RETRIES,
    MAX_ERROR_CHARS,
    PHASE2_COOLDOWN_MS,
    PHASE2_LEASE_MS,
    PHASE2_RETRY_DELAY_MS,
    STAGE1_LEASE_MS,
    STAGE1_RETRY_DELAY_MS,
)

STAGE1 = "memory_stage1"
GLOBAL = "memory_consolidate_global"
GLOBAL_KEY = "global"
URGENT_KEY = "phase2_urgent_input"  # kv: input version of the last urgent enqueue


ClaimStatus = Literal[
    "claimed",
    "skipped_up_to_date",
    "skipped_running",
    "skipped_backoff",
    "skipped_exhausted",
    "skipped_cap",
    "skipped_cooldown",
]


@dataclass(frozen=True)
class Claim:
    status: ClaimStatus
    key: str
    token: str | None = None
    watermark: int | None = None

    @property
    def claimed(self) -> bool:
        return self.status == "claimed"


def _held(row: sqlite3.Row | None, now: int) -> bool:
    """A running job whose lease is live and whose owner is not provably gone."""
    return (
        row is not None
        and row["status"] == "running"
        and (row["lease_until"] or 0) > now
        and not owner_gone(Owner.decode(row["owner"]))
    )


def _cut(error: str) -> str:
    """Error text is stored and shown: redact it (provider errors can echo request content), bound it."""
    error = redact(error)
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"


@dataclass(frozen=True)
class SavePoint:
    """How far a compacted session has been extracted: the compaction's user message, and the
    memory extracted from everything before it (later extractions read only what follows)."""

    message_id: str
    raw_memory: str
    rollout_summary: str
    compactions: int


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


def _enqueue_global(conn: sqlite3.Connection, watermark: int, *, urgent: bool = False) -> None:
    """Mark phase 2 as having new input; keeps a running job running, cancels a failure backoff.

    ``urgent`` (something must be forgotten) also lifts the cost cooldown: a user who asks to
    forget should not see that memory injected for another six hours.
    """
    if urgent:
        conn.execute(
            "UPDATE jobs SET cooldown_until = NULL WHERE kind = ? AND job_key = ?",
            (GLOBAL, GLOBAL_KEY),
        )
    conn.execute(
        """
        INSERT INTO jobs (kind, job_key, status, retry_remaining, input_watermark, last_success_watermark)
        VALUES (?, ?, 'pending', ?, ?, 0)
        ON CONFLICT (kind, job_key) DO UPDATE SET
            status = CASE WHEN status = 'running' THEN 'running' ELSE 'pending' END,
            retry_at = CASE WHEN status = 'running' THEN retry_at ELSE NULL END,
            retry_remaining = MAX(retry_remaining, excluded.retry_remaining),
            input_watermark = CASE
                WHEN excluded.input_watermark > COALESCE(input_watermark, 0) THEN excluded.input_watermark
                ELSE COALESCE(input_watermark, 0) + 1 END
        """,
        (GLOBAL, GLOBAL_KEY, DEFAULT_RETRIES, watermark),
    )
    if urgent:
        # Remembered past the run that is (or will be) finishing: a run that claimed before this
        # input must not start the cooldown, or the forget would wait hours (review accept and
        # reject finish a run claimed long before).
        conn.execute(
            """INSERT INTO kv (key, value, updated_at)
               SELECT ?, CAST(input_watermark AS TEXT), ? FROM jobs WHERE kind = ? AND job_key = ?
               ON CONFLICT (key) DO UPDATE SET value = excluded.value,
               updated_at = excluded.updated_at""",
            (URGENT_KEY, watermark, GLOBAL, GLOBAL_KEY),
        )


def _urgent_input(conn: sqlite3.Connection) -> int:
    """The input version of the last urgent enqueue (0 when none)."""
    row = conn.execute("SELECT value FROM kv WHERE key = ?", (URGENT_KEY,)).fetchone()
    try:
        return int(row[0]) if row else 0
    except (TypeError, ValueError):
        return 0


class JobsMixin:
    _conn: sqlite3.Connection
    _clock: Clock

    # -- stage 1 --------------------------------------------------------------------------

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
            if _held(row, now):
                return Claim("skipped_running", session_id)
            # A crashed owner's claim is taken over as it stood: its backoff and retries unchanged.
            orphan = row is not None and row["status"] == "running"
            advanced = row is not None and watermark > (row["input_watermark"] or 0)
            if row and not advanced and not orphan:
                if row["retry_at"] is not None and row["retry_at"] > now:
                    return Claim("skipped_backoff", session_id)
                if row["retry_remaining"] <= 0:
                    return Claim("skipped_exhausted", session_id)
            running = sum(
                1
                for r in c.execute(
                    "SELECT * FROM jobs WHERE kind = ? AND status = 'running' AND lease_until > ?",
                    (STAGE1, now),
                )
                if _held(r, now)
            )
            if running >= max_running:
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

    def _owned(self, c: sqlite3.Connection, kind: str, key: str, token: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = c.execute(
            "SELECT * FROM jobs WHERE kind = ? AND job_key = ? AND status = 'running' AND ownership_token = ?",
            (kind, key, token),
        ).fetchone()
        return row

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
            job = self._owned(c, STAGE1, session_id, token)
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
            _enqueue_global(c, wm)
            return True

    def mark_stage1_no_output(
        self, session_id: str, token: str, *, save_point: SavePoint | None = None
    ) -> bool:
        """Finish with nothing worth remembering; a stale output row for the session is removed."""
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            job = self._owned(c, STAGE1, session_id, token)
            if job is None:
                return False
            _save_point(c, session_id, job["started_at"], save_point, now)
            deleted = c.execute(
                "DELETE FROM stage1_outputs WHERE session_id = ?", (session_id,)
            ).rowcount
            self._finish_stage1(c, session_id, job["input_watermark"], now)
            if deleted:
                _enqueue_global(c, job["input_watermark"])
            return True

    def mark_stage1_failed(self, session_id: str, token: str, error: str) -> bool:
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            if self._owned(c, STAGE1, session_id, token) is None:
                return False
            c.execute(
                """
                UPDATE jobs SET retry_remaining = MAX(retry_remaining - 1, 0),
                    status = CASE WHEN retry_remaining - 1 > 0 THEN 'pending' ELSE 'failed' END,
                    finished_at = ?, lease_until = NULL, ownership_token = NULL, retry_at = ?, last_error = ?
                WHERE kind = ? AND job_key = ?
                """,
                (now, now + STAGE1_RETRY_DELAY_MS, _cut(error), STAGE1, session_id),
            )
            return True

    def release_stage1(
        self, session_id: str, token: str, note: str = "released at shutdown"
    ) -> bool:
        """Give a claim back without burning a retry (shutdown, budget waits)."""
        with write_tx(self._conn) as c:
            if self._owned(c, STAGE1, session_id, token) is None:
                return False
            c.execute(
                """
                UPDATE jobs SET status = 'pending', lease_until = NULL, ownership_token = NULL,
                    retry_at = NULL, last_error = ?
                WHERE kind = ? AND job_key = ?
                """,
                (_cut(note), STAGE1, session_id),
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

    # -- phase 2 (global) -----------------------------------------------------------------

    def enqueue_phase2(self, watermark: int | None = None, *, urgent: bool = False) -> None:
        with write_tx(self._conn) as c:
            _enqueue_global(
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
            if _held(row, now):
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
            job = self._owned(c, GLOBAL, GLOBAL_KEY, token)
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
                (now, now + PHASE2_RETRY_DELAY_MS, _cut(error), GLOBAL, GLOBAL_KEY, token),
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
                    (status, _cut(note) if note else None, GLOBAL, GLOBAL_KEY, token),
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
            c.execute("DELETE FROM kv WHERE key = ?", (URGENT_KEY,))
            c.execute(
                """INSERT INTO jobs (kind, job_key, status, finished_at, retry_remaining, input_watermark,
                   last_success_watermark, cooldown_until) VALUES (?, ?, 'done', ?, ?, 0, 0, ?)""",
                (GLOBAL, GLOBAL_KEY, now, DEFAULT_RETRIES, now + PHASE2_COOLDOWN_MS),
            )
