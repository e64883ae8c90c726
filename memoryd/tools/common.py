"""Small pieces every tool shares: argument checks, time bounds, result serialisation.

Timestamps in file names follow the memory folder's convention (``%Y-%m-%dT%H-%M-%S``, UTC,
see :mod:`memoryd.folder.workspace`); a time filter is expressed in epoch milliseconds like everything
else in memoryd (:mod:`memoryd.clock`).
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from memoryd.errors import InvalidArgument
from memoryd.folder.layout import STAMP_FORMAT

STAMP_LEN = 19
_STAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


class Result:
    """Mixin for tool results: ``to_dict`` for ``--json`` and MCP metadata, ``to_text`` for people."""

    def to_dict(self) -> dict[str, Any]:
        assert dataclasses.is_dataclass(self)
        return dataclasses.asdict(self)

    def to_text(self) -> str:  # pragma: no cover - every result overrides it
        raise NotImplementedError


def check_int(
    name: str, value: object, *, low: int, high: int | None = None, default: int | None = None
) -> int:
    """An integer parameter within ``[low, high]``; ``None`` takes the default. Bools are not ints here."""
    if value is None:
        if default is None:
            raise InvalidArgument(f"{name} is required")
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        span = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidArgument(f"{name} must be {span}, got {value}")
    return value


def parse_cursor(cursor: object) -> int:
    """Cursors are non-negative integers, given as a string (MCP) or an int (Python callers)."""
    if cursor is None or cursor == "":
        return 0
    if isinstance(cursor, bool):
        raise InvalidArgument(f"cursor must be a non-negative integer, got {cursor!r}")
    if isinstance(cursor, int):
        value = cursor
    elif isinstance(cursor, str) and cursor.strip().isdigit():
        value = int(cursor.strip())
    else:
        raise InvalidArgument(f"cursor must be a non-negative integer, got {cursor!r}")
    if value < 0:
        raise InvalidArgument(f"cursor must be a non-negative integer, got {cursor!r}")
    return value


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def stamp_ms(text: str) -> int | None:
    """Epoch ms of a ``%Y-%m-%dT%H-%M-%S`` prefix (UTC), or ``None`` when the name has none."""
    if len(text) < STAMP_LEN or not _STAMP_RE.fullmatch(text[:STAMP_LEN]):
        return None
    try:
        return _ms(datetime.strptime(text[:STAMP_LEN], STAMP_FORMAT).replace(tzinfo=UTC))
    except ValueError:
        return None


def stamp_text(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime(STAMP_FORMAT)


def parse_bound(name: str, value: object, *, end: bool) -> int | None:
    """A ``since``/``until`` bound in epoch ms (inclusive).

    Accepts a date (``2027-01-15``), an ISO datetime (``2027-01-15T08:00``, ``...Z``, ``...+02:00``)
    or the file-name form (``2027-01-15T08-00-00``). Naive times are UTC. A date-only ``until``
    covers the whole day, so ``until=2027-01-15`` includes a note written at 23:59:59 that day.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return _ms(dt)
    if isinstance(value, date):
        value = value.isoformat()
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a date or an ISO datetime, got {value!r}")
    text = value.strip()
    if _DATE_RE.fullmatch(text):
        try:
            day = date.fromisoformat(text)
        except ValueError as exc:
            raise InvalidArgument(f"{name}: {text!r} is not a valid date") from exc
        start = datetime.combine(day, time(0, 0), tzinfo=UTC)
        return _ms(start + timedelta(days=1)) - 1 if end else _ms(start)
    if len(text) == STAMP_LEN and _STAMP_RE.fullmatch(text):
        ms = stamp_ms(text)
        if ms is None:
            raise InvalidArgument(f"{name}: {text!r} is not a valid timestamp")
        return ms + 999 if end else ms
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"{name}: {text!r} is not a date (YYYY-MM-DD) or an ISO datetime (YYYY-MM-DDTHH:MM:SS)"
        ) from exc
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return _ms(dt)


def time_window(since: object, until: object) -> tuple[int | None, int | None]:
    lo = parse_bound("since", since, end=False)
    hi = parse_bound("until", until, end=True)
    if lo is not None and hi is not None and lo > hi:
        raise InvalidArgument("since is later than until")
    return lo, hi


def in_window(ms: int | None, lo: int | None, hi: int | None) -> bool:
    if ms is None:
        return False
    return (lo is None or ms >= lo) and (hi is None or ms <= hi)


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
