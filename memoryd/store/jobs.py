"""Shared vocabulary of memoryd's two job state machines in the ``jobs`` table.

One ``memory_stage1`` row per session (:mod:`memoryd.store.stage1`) and one
``memory_consolidate_global`` row (:mod:`memoryd.store.global_job`) follow the same rules, taken
from Codex's memory store, so the pieces both use live here:

* A claim hands out a lease and a fresh ownership token; every finalize is guarded by that token
  (:func:`owned_row`), so a worker whose lease expired and was taken over can no longer write.
* Every claim records its owning process (:mod:`memoryd.owner`); a live lease whose owner is
  provably gone (killed on this machine) is not held (:func:`lease_held`) and is taken over at once.
* Stored error text is redacted and bounded (:func:`cut_error`).
* Anything that changes phase 2's input enqueues the global job (:func:`enqueue_global`); the
  output and tombstone sub-stores call it too, inside their own transactions.

All times are epoch milliseconds (see :mod:`memoryd.clock`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from memoryd.owner import Owner, owner_gone
from memoryd.store.keys import PHASE2_URGENT
from memoryd.tuning import DEFAULT_RETRIES, MAX_ERROR_CHARS

STAGE1 = "memory_stage1"
GLOBAL = "memory_consolidate_global"
GLOBAL_KEY = "global"


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


def lease_held(row: sqlite3.Row | None, now: int) -> bool:
    """A running job whose lease is live and whose owner is not provably gone."""
    return (
        row is not None
        and row["status"] == "running"
        and (row["lease_until"] or 0) > now
        and not owner_gone(Owner.decode(row["owner"]))
    )


def leases_held(conn: sqlite3.Connection, kind: str, now: int) -> int:
    """How many jobs of ``kind`` hold a live lease (:func:`lease_held`), each owner asked once:
    a pass claims its sessions one by one, and asking again for every running row made its
    claims quadratic (the owner check reads ``/proc``)."""
    rows = conn.execute(
        "SELECT owner, COUNT(*) FROM jobs WHERE kind = ? AND status = 'running' AND lease_until > ?"
        " GROUP BY owner",
        (kind, now),
    )
    return sum(n for owner, n in rows if not owner_gone(Owner.decode(owner)))


def cut_error(error: str) -> str:
    """Error text is stored and shown: redact it (provider errors can echo request content), bound it.

    The redactor is imported here, not at the top: its patterns cost ~40 ms to load, and every
    ``memoryd tool`` process opens the store without ever storing an error."""
    from memoryd.redact import redact

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


def owned_row(c: sqlite3.Connection, kind: str, key: str, token: str) -> sqlite3.Row | None:
    """The job row, only while ``token`` still owns its running claim (every finalize checks this)."""
    row: sqlite3.Row | None = c.execute(
        "SELECT * FROM jobs WHERE kind = ? AND job_key = ? AND status = 'running' AND ownership_token = ?",
        (kind, key, token),
    ).fetchone()
    return row


def enqueue_global(conn: sqlite3.Connection, watermark: int, *, urgent: bool = False) -> None:
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
            (PHASE2_URGENT, watermark, GLOBAL, GLOBAL_KEY),
        )
