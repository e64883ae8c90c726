"""memoryd's own SQLite store (``memory.db``): jobs, stage-1 outputs, modes, usage, model calls.

:class:`Store` is the only object the pipeline talks to; its methods are grouped by concern in
:mod:`memoryd.store.jobs`, :mod:`memoryd.store.outputs` and :mod:`memoryd.store.sync`. Every write is one ``BEGIN IMMEDIATE``
transaction. The store migrates itself on open and refuses files written by a newer memoryd.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memoryd.clock import Clock, SystemClock
from memoryd.store.db import connect
from memoryd.store.jobs import GLOBAL, STAGE1, Claim, JobsMixin
from memoryd.store.outputs import CallUsage, MemoryMode, Output, OutputsMixin
from memoryd.store.owners import OwnersMixin
from memoryd.store.sync import SyncMixin

__all__ = ["GLOBAL", "STAGE1", "CallUsage", "Claim", "MemoryMode", "Output", "Store"]


class Store(JobsMixin, OutputsMixin, OwnersMixin, SyncMixin):
    def __init__(self, path: Path | str, *, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self.path = path
        self._conn: sqlite3.Connection = connect(path, now_ms=self._clock.now_ms())

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
