"""Named schema migrations, each applied together with its record in one transaction.

Migrations are keyed by name (not a counter) in ``_memoryd_migrations``: names survive branch
merges and give an audit trail. A database that records a migration this build does not know was
written by a newer memoryd and is refused rather than half-understood. ``PRAGMA user_version``
mirrors the count so outside tools can probe the schema cheaply.

The apply order is :data:`MIGRATIONS`, one explicit list at the end of the migrations, and not the
numbers in the names: they were numbered on parallel branches and merged in another order
(m010 before m008 before m006). A name is what existing databases recorded, so it never changes;
the order never changes either (``user_version`` is a position in it). A new migration is
appended with the next free number.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import SchemaTooNew

TABLE = "_memoryd_migrations"


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[sqlite3.Connection], None]


def _run(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it commits the open transaction first, which would make the
    # migration and its record non-atomic.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def m001_jobs_and_outputs(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE stage1_outputs (
            session_id TEXT PRIMARY KEY,
            source_updated_at INTEGER NOT NULL,
            raw_memory TEXT NOT NULL,
            rollout_summary TEXT NOT NULL,
            rollout_slug TEXT,
            cwd TEXT,
            generated_at INTEGER NOT NULL,
            usage_count INTEGER NOT NULL DEFAULT 0,
            last_usage INTEGER,
            selected_for_phase2 INTEGER NOT NULL DEFAULT 0,
            selected_for_phase2_source_updated_at INTEGER
        );
        CREATE INDEX idx_stage1_outputs_recency ON stage1_outputs (source_updated_at DESC, session_id DESC);

        CREATE TABLE jobs (
            kind TEXT NOT NULL,
            job_key TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
            worker_id TEXT,
            ownership_token TEXT,
            started_at INTEGER,
            finished_at INTEGER,
            lease_until INTEGER,
            retry_at INTEGER,
            retry_remaining INTEGER NOT NULL,
            last_error TEXT,
            input_watermark INTEGER,
            last_success_watermark INTEGER,
            cooldown_until INTEGER,
            PRIMARY KEY (kind, job_key)
        );
        CREATE INDEX idx_jobs_kind_status ON jobs (kind, status, retry_at, lease_until);
        """,
    )


def m002_session_meta(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE session_meta (
            session_id TEXT PRIMARY KEY,
            memory_mode TEXT NOT NULL CHECK (memory_mode IN ('enabled', 'disabled', 'polluted')),
            reason TEXT,
            updated_at INTEGER NOT NULL
        );
        ALTER TABLE stage1_outputs ADD COLUMN title TEXT;
        """,
    )


def m003_model_calls_and_state(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE model_calls (
            id INTEGER PRIMARY KEY,
            at INTEGER NOT NULL,
            phase TEXT NOT NULL,
            job_kind TEXT NOT NULL,
            job_key TEXT NOT NULL,
            model TEXT,
            outcome TEXT NOT NULL,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            cache_read_tokens INTEGER NOT NULL DEFAULT 0,
            cache_write_tokens INTEGER NOT NULL DEFAULT 0,
            cost REAL NOT NULL DEFAULT 0
        );
        CREATE INDEX idx_model_calls_at ON model_calls (at);
        CREATE INDEX idx_model_calls_job ON model_calls (job_kind, job_key);
        CREATE TABLE kv (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at INTEGER NOT NULL
        );
        """,
    )


def m004_citation_seen(conn: sqlite3.Connection) -> None:
    _run(
        conn,
        """
        CREATE TABLE citation_seen (
            key TEXT PRIMARY KEY,
            at INTEGER NOT NULL
        );
        CREATE INDEX idx_citation_seen_at ON citation_seen (at);
        """,
    )


def m005_claim_owner_and_helpers(conn: sqlite3.Connection) -> None:
    """Claims name their owning process; helper sessions are recorded before they are prompted."""
    _run(
        conn,
        """
        ALTER TABLE jobs ADD COLUMN owner TEXT;
        CREATE TABLE helper_sessions (
            session_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            owner TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        """,
    )


def m010_output_signature_index(conn: sqlite3.Connection) -> None:
    """A covering index of what identifies an output's version: the search index's watermark
    and its signature check then read this index, not every row's (large, overflowing) text."""
    _run(
        conn,
        """
        CREATE INDEX idx_stage1_outputs_signature
            ON stage1_outputs (session_id, source_updated_at, generated_at);
        """,
    )


def m008_sync_tombstones(conn: sqlite3.Connection) -> None:
    """Sessions forgotten on this machine, published so every other machine forgets them too."""
    _run(
        conn,
        """
        CREATE TABLE sync_tombstones (
            session_id TEXT PRIMARY KEY,
            at INTEGER NOT NULL
        );
        """,
    )


def m006_project_scopes(conn: sqlite3.Connection) -> None:
    """Every output learns its opencode project and worktree (filled in by the next discovery).

    ``compactions`` records a ``session.compacted`` event until the session is extracted for it;
    ``save_points`` holds what was extracted up to a session's last compaction, so later passes
    only read what came after it.
    """
    _run(
        conn,
        """
        ALTER TABLE stage1_outputs ADD COLUMN project_id TEXT;
        ALTER TABLE stage1_outputs ADD COLUMN worktree TEXT;
        CREATE TABLE compactions (
            session_id TEXT PRIMARY KEY,
            seen_at INTEGER NOT NULL
        );
        CREATE TABLE save_points (
            session_id TEXT PRIMARY KEY,
            message_id TEXT NOT NULL,
            raw_memory TEXT NOT NULL,
            rollout_summary TEXT NOT NULL,
            compactions INTEGER NOT NULL,
            updated_at INTEGER NOT NULL
        );
        """,
    )


def m011_output_version_index(conn: sqlite3.Connection) -> None:
    """The signature index also covers where an output belongs (worktree, cwd): the search
    index keeps each output's project key and must notice the backfill filling it in."""
    _run(
        conn,
        """
        DROP INDEX IF EXISTS idx_stage1_outputs_signature;
        CREATE INDEX idx_stage1_outputs_version
            ON stage1_outputs (session_id, source_updated_at, generated_at, worktree, cwd);
        """,
    )


def m012_model_call_runner(conn: sqlite3.Connection) -> None:
    """Which runner made each model call (opencode, claude-code) and whether its tokens were
    estimated because the runner reported none: ``status`` shows tokens per runner."""
    _run(
        conn,
        """
        ALTER TABLE model_calls ADD COLUMN runner TEXT;
        ALTER TABLE model_calls ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
        """,
    )


# The apply order, oldest first (see the module docstring: the list decides, not the numbers).
MIGRATIONS: list[Migration] = [
    Migration(fn.__name__, fn)
    for fn in (
        m001_jobs_and_outputs,
        m002_session_meta,
        m003_model_calls_and_state,
        m004_citation_seen,
        m005_claim_owner_and_helpers,
        m010_output_signature_index,
        m008_sync_tombstones,
        m006_project_scopes,
        m011_output_version_index,
        m012_model_call_runner,
    )
]


def applied(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)"
    )
    return [r[0] for r in conn.execute(f"SELECT name FROM {TABLE} ORDER BY rowid")]


def pending(conn: sqlite3.Connection) -> list[str]:
    done = set(applied(conn))
    return [m.name for m in MIGRATIONS if m.name not in done]


def migrate(
    conn: sqlite3.Connection,
    *,
    now_ms: int,
    db_path: Path | str = "memory.db",
    stop_before: str | None = None,
) -> list[str]:
    """Apply pending migrations in order; return the names applied.

    Each migration runs in its own ``BEGIN IMMEDIATE`` transaction, re-checking inside it, so two
    processes opening a fresh file at once cannot both apply the same step.
    """
    known = {m.name for m in MIGRATIONS}
    unknown = [n for n in applied(conn) if n not in known]
    if unknown:
        raise SchemaTooNew(db_path, unknown)
    ran: list[str] = []
    for m in MIGRATIONS:
        if m.name == stop_before:
            break
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute(f"SELECT 1 FROM {TABLE} WHERE name = ?", (m.name,)).fetchone():
                conn.execute("COMMIT")
                continue
            m.apply(conn)
            conn.execute(f"INSERT INTO {TABLE} (name, applied_at) VALUES (?, ?)", (m.name, now_ms))
            conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(m) + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        ran.append(m.name)
    return ran
