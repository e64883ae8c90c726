"""Time in memoryd is one unit everywhere: integer milliseconds since the Unix epoch.

opencode stamps sessions in epoch ms, so job leases, retries, watermarks and usage all use the
same unit and never need converting. Code asks a :class:`Clock` for the time so tests can inject
a :class:`ManualClock` and move it by hand.
"""

from __future__ import annotations

import time
from datetime import UTC
from typing import Protocol

SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (tests, simulations)."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        self._now += ms

    def set(self, ms: int) -> None:
        self._now = ms


def iso_ms(ms: int | None) -> str | None:
    """Render epoch ms as an ISO-8601 UTC timestamp (seconds precision)."""
    if ms is None:
        return None
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
