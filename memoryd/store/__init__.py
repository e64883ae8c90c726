"""memoryd's own SQLite store (``memory.db``): jobs, stage-1 outputs, modes, usage, model calls.

:class:`Store` is the only object the pipeline talks to; its methods are grouped by concern in
mixins: :mod:`memoryd.store.stage1` and :mod:`memoryd.store.global_job` (the two job state
machines, sharing :mod:`memoryd.store.jobs`), :mod:`memoryd.store.outputs`,
:mod:`memoryd.store.ledger`, :mod:`memoryd.store.owners` and :mod:`memoryd.store.tombstones`. Every
write is one ``BEGIN IMMEDIATE`` transaction. The store migrates itself on open and refuses files
written by a newer memoryd.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memoryd.clock import Clock, SystemClock
from memoryd.store.db import connect
from memoryd.store.global_job import GlobalJobMixin
from memoryd.store.jobs import GLOBAL, STAGE1, Claim
from memoryd.store.ledger import CallUsage, LedgerMixin
from memoryd.store.outputs import MemoryMode, Output, OutputsMixin
from memoryd.store.owners import OwnersMixin
from memoryd.store.stage1 import Stage1Mixin
from memoryd.store.tombstones import SyncMixin

__all__ = ["GLOBAL", "STAGE1", "CallUsage", "Claim", "MemoryMode", "Output", "Store"]


class Store(Stage1Mixin, GlobalJobMixin, OutputsMixin, LedgerMixin, OwnersMixin, SyncMixin):
    def __init__(
        self, path: Path | str, *, clock: Clock | None = None, quick_check: bool = True
    ) -> None:
        self._clock = clock or SystemClock()
        self.path = path
        self._conn: sqlite3.Connection = connect(
            path, now_ms=self._clock.now_ms(), quick_check=quick_check
        )

    @property
    def clock(self) -> Clock:
        return self._clock

    def close(self) -> None:
        self._conn.close()

    def shrink(self) -> None:
        """Drop SQLite's page cache (the daemon calls this between passes)."""
        self._conn.execute("PRAGMA shrink_memory")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
