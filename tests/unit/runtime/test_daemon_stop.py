"""A SIGTERM while a pass runs is a clean stop: the pass is cancelled and releases its
work, and the log reads as a stop (no scheduler error with a ``CancelledError`` traceback)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from memoryd.paths import Paths

pytestmark = pytest.mark.anyio


async def no_tick(app: object, *, judge_edits: bool) -> None:
    """The daemon's tick, left out (this test drives a pass only)."""


async def test_sigterm_during_a_pass_stops_cleanly(
    monkeypatch: pytest.MonkeyPatch, paths: Paths, caplog: pytest.LogCaptureFixture
) -> None:
    from memoryd.runtime import daemon as daemon_mod
    from memoryd.store.home import App

    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hanging_pass(app: App, **kw: object) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()  # the pass sees the cancellation (it releases its claims so)
            raise

    monkeypatch.setattr(daemon_mod, "run_pass", hanging_pass)
    monkeypatch.setattr(daemon_mod, "daemon_tick", no_tick)
    caplog.set_level(logging.DEBUG)
    d = daemon_mod.Daemon(App(paths), interval_s=3600)
    serving = asyncio.create_task(d.serve())
    await asyncio.wait_for(started.wait(), 10)
    d.handle_exit(15)  # what SIGTERM does
    await asyncio.wait_for(serving, 10)
    await asyncio.sleep(0.1)  # the scheduler's job callbacks run after the task ends
    assert cancelled.is_set()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [(r.name, r.getMessage(), r.exc_info) for r in errors]
    assert not any(r.exc_info for r in caplog.records)
    stops = [r.getMessage() for r in caplog.records if "daemon stopped" in r.getMessage()]
    assert stops == ["memoryd daemon stopped"]
