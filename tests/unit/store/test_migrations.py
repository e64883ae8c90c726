from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memoryd.clock import ManualClock
from memoryd.errors import PathError, SchemaTooNew, StoreCorrupt
from memoryd.store import Store
from memoryd.store.migrations import MIGRATIONS, TABLE, applied, migrate

EXPECTED_TABLES = {
    "stage1_outputs",
    "jobs",
    "session_meta",
    "model_calls",
    "kv",
    "citation_seen",
    TABLE,
}


def tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_fresh_database_gets_every_migration(tmp_path: Path, clock: ManualClock) -> None:
    s = Store(tmp_path / "m.db", clock=clock)
    conn = s._conn
    assert tables(conn) >= EXPECTED_TABLES
    assert applied(conn) == [m.name for m in MIGRATIONS]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()
    # reopening applies nothing
    s2 = Store(tmp_path / "m.db", clock=clock)
    assert migrate(s2._conn, now_ms=0) == []
    s2.close()


def test_upgrade_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, now_ms=1, stop_before="m002_session_meta")
    assert "session_meta" not in tables(conn)
    conn.execute(
        "INSERT INTO stage1_outputs (session_id, source_updated_at, raw_memory, rollout_summary, generated_at)"
        " VALUES ('ses_x', 5, 'r', 's', 6)"
    )
    conn.close()
    s = Store(path, clock=ManualClock())
    out = s.outputs.output("ses_x")
    assert out is not None and out.raw_memory == "r" and out.title is None
    assert applied(s._conn) == [m.name for m in MIGRATIONS]
    s.close()


def test_newer_database_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "new.db"
    Store(path, clock=clock).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"INSERT INTO {TABLE} (name, applied_at) VALUES ('m999_from_the_future', 1)")
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer memoryd.*m999_from_the_future"):
        Store(path, clock=clock)


def test_failed_migration_rolls_back(tmp_path: Path) -> None:
    from memoryd.store import migrations as mig

    def m900_broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    conn = sqlite3.connect(tmp_path / "f.db", isolation_level=None)
    mig.MIGRATIONS.append(mig.Migration("m900_broken", m900_broken))
    try:
        with pytest.raises(RuntimeError):
            migrate(conn, now_ms=1)
    finally:
        mig.MIGRATIONS.pop()
    assert "half_done" not in tables(conn)
    assert "m900_broken" not in applied(conn)
    assert applied(conn) == [m.name for m in MIGRATIONS]


def test_garbage_file_is_reported_and_left_alone(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not sqlite at all\n" * 10)
    with pytest.raises(StoreCorrupt, match="left untouched"):
        Store(path, clock=clock)
    assert path.read_bytes().startswith(b"this is not sqlite")


def test_truncated_database_is_reported(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    Store(path, clock=clock).close()
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" * 5000)
    with pytest.raises(StoreCorrupt):
        Store(path, clock=clock)


def test_symlinked_db_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    real = tmp_path / "real.db"
    Store(real, clock=clock).close()
    link = tmp_path / "memory.db"
    link.symlink_to(real)
    with pytest.raises(PathError, match="symlink"):
        Store(link, clock=clock)
