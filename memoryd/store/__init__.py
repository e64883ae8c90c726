"""memoryd's own SQLite store (``memory.db``): jobs, stage-1 outputs, modes, usage, model calls.

:class:`Store` is the only object the pipeline talks to. It owns the connection and is composed of
one sub-store per concern, each an attribute sharing that connection: ``stage1``
(:mod:`memoryd.store.stage1`) and ``phase2`` (:mod:`memoryd.store.global_job`), the two job state
machines, which share the public helpers of :mod:`memoryd.store.jobs`; ``outputs``
(:mod:`memoryd.store.outputs`), ``ledger`` (:mod:`memoryd.store.ledger`), ``owners``
(:mod:`memoryd.store.owners`) and ``tombstones`` (:mod:`memoryd.store.tombstones`). Every write
is one ``BEGIN IMMEDIATE`` transaction. The store migrates itself on open and refuses files
written by a newer memoryd.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memoryd.clock import Clock, SystemClock
from memoryd.store.db import connect
from memoryd.store.global_job import Phase2Job
from memoryd.store.ledger import Ledger
from memoryd.store.outputs import Outputs
from memoryd.store.owners import Owners
from memoryd.store.stage1 import Stage1Jobs
from memoryd.store.tombstones import Tombstones


class Store:
    def __init__(
        self, path: Path | str, *, clock: Clock | None = None, quick_check: bool = True
    ) -> None:
        self._clock = clock or SystemClock()
        self.path = path
        self._conn: sqlite3.Connection = connect(
            path, now_ms=self._clock.now_ms(), quick_check=quick_check
        )
        self.stage1 = Stage1Jobs(self._conn, self._clock)
        self.phase2 = Phase2Job(self._conn, self._clock)
        self.outputs = Outputs(self._conn, self._clock)
        self.ledger = Ledger(self._conn, self._clock)
        self.owners = Owners(self._conn, self._clock)
        self.tombstones = Tombstones(self._conn, self._clock)

    @property
    def clock(self) -> Clock:
        return self._clock

    def close(self) -> None:
        self._conn.close()

    def data_version(self) -> tuple[int, int]:
        """Moves when any connection (any process) commits to memory.db, or this one does."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0], self._conn.total_changes

    def shrink(self) -> None:
        """Drop SQLite's page cache (the daemon calls this between passes)."""
        self._conn.execute("PRAGMA shrink_memory")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
