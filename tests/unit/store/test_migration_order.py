"""The migrations' ids and apply order are part of every existing memory.db: pinned here."""

from __future__ import annotations

import sqlite3

from memoryd.store.migrations import MIGRATIONS, applied, migrate

# What databases in the field recorded, in the order they applied it. Never edit a line of this
# list; a new migration is appended (to it and to MIGRATIONS).
RECORDED = [
    "m001_jobs_and_outputs",
    "m002_session_meta",
    "m003_model_calls_and_state",
    "m004_citation_seen",
    "m005_claim_owner_and_helpers",
    "m010_output_signature_index",
    "m008_sync_tombstones",
    "m006_project_scopes",
    "m011_output_version_index",
]


def test_the_apply_order_and_the_ids_are_the_recorded_ones() -> None:
    assert [m.name for m in MIGRATIONS][: len(RECORDED)] == RECORDED


def test_a_database_stopped_at_each_step_migrates_to_the_same_schema() -> None:
    fresh = sqlite3.connect(":memory:", isolation_level=None)
    migrate(fresh, now_ms=1)
    want = sorted(fresh.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
    for i, name in enumerate(RECORDED[1:], start=1):
        conn = sqlite3.connect(":memory:", isolation_level=None)
        migrate(conn, now_ms=1, stop_before=name)
        assert applied(conn) == RECORDED[:i]
        assert migrate(conn, now_ms=2) == [m.name for m in MIGRATIONS][i:]
        assert sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall()) == want
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
