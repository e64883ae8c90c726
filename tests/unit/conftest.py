"""Unit-test fixtures: time is faked at the boundaries."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_host_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idempotent host requests retry after 0.5 s and 1.5 s; every fault test would sleep those
    2 s for real. The retries still happen, only the waits are gone (tests that count retries
    set their own delays)."""
    monkeypatch.setattr("memoryd.tuning.HOST_RETRY_DELAYS_S", (0.0, 0.0))
