"""Opening ``memory.db``: checks, pragmas, migrations, and the write-transaction helper.

The daemon, the CLI and the MCP server may all open the same file at once, so the database runs
in WAL mode with a busy timeout, and every write happens inside ``BEGIN IMMEDIATE`` (taking the
write lock up front instead of failing half-way through a read-then-write).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memoryd.errors import PathError, StoreCorrupt, StoreError
from memoryd.store.migrations import migrate
from memoryd.tuning import BUSY_TIMEOUT_MS

SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_file(path: Path) -> None:
    if path.is_symlink():
        raise PathError(path, "is a symlink; memoryd refuses to open its database through a link")
    if not path.exists():
        return
    if not path.is_file():
        raise PathError(path, "exists and is not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise PathError(path, f"cannot read ({exc.strerror or exc})") from exc
    if head and head != SQLITE_MAGIC:
        raise StoreCorrupt(path, "no SQLite header")


def connect(path: Path | str, *, now_ms: int, quick_check: bool = True) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the database at ``path``.

    ``quick_check=False`` skips the integrity check, which reads every page (~60 ms for a 100 MB
    file): for the one-call ``memoryd tool`` processes, which the daemon's own open has checked.
    """
    in_memory = str(path) == ":memory:"
    if not in_memory:
        path = Path(path)
        _check_file(path)
    try:
        conn = sqlite3.connect(
            str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open database ({exc})") from exc
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not in_memory:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if quick_check:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreCorrupt(path, f"integrity check: {check}")
        migrate(conn, now_ms=now_ms, db_path=path)
        if quick_check:
            conn.execute("PRAGMA shrink_memory")  # the check read every page; a daemon keeps none
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreError(f"{path}: database is locked by another process ({exc})") from exc
        raise StoreCorrupt(path, str(exc)) from exc
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def write_tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolls back on any exception."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise StoreError(f"database is busy: {exc}") from exc
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
