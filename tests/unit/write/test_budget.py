"""Long-running behaviour with an injected clock: a day of idling costs nothing; budgets and circuits."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.clock import HOUR, MINUTE, ManualClock
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.runtime.events import session_event
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.write.phase1 import Phase1, Phase1Report
from memoryd.write.phase2 import Phase2, Phase2Result
from memoryd.write.snapshot import snapshot
from tests.fakehost import FakeOpencode, write_memory
from tests.narrow import present

pytestmark = pytest.mark.anyio


async def no_tick(app: object, *, judge_edits: bool) -> None:
    """The daemon's tick, left out (these tests drive passes only)."""


async def one_pass(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, **kw: Any
) -> tuple[Phase1Report, Phase2Result]:
    settings = Settings(**kw)
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    common: dict[str, Any] = dict(
        store=store, client=client, settings=settings, paths=paths, clock=clock, worker_id="d"
    )
    return await Phase1(**common).run_pass(), await Phase2(**common).run()


async def test_a_day_without_new_sessions_makes_no_model_calls(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    for i in range(4):
        host.add_session(f"ses_idle{i}xxxx", updated=clock.now_ms() - 7 * HOUR - i)
    p1, p2 = await one_pass(store, host, paths, clock, max_rollouts_per_startup=8)
    assert p1.succeeded == 4 and p2.status == "succeeded"
    first_day_prompts = len(host.prompts)
    assert first_day_prompts == 5  # 4 extractions + 1 consolidation
    statuses = set()
    for _ in range(24 * 12):  # a pass every 5 minutes for 24 hours
        clock.advance(5 * MINUTE)
        p1, p2 = await one_pass(store, host, paths, clock, max_rollouts_per_startup=8)
        statuses.add(p2.status)
    assert len(host.prompts) == first_day_prompts
    assert statuses == {"skipped_cooldown", "no_changes"}
    assert store.ledger.token_totals()["phase1"]["calls"] == 4


async def test_budget_blocks_before_any_call(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    host.add_session("ses_first00000", updated=clock.now_ms() - 8 * HOUR)
    await one_pass(store, host, paths, clock, daily_token_budget=100)
    spent_prompts = len(host.prompts)
    host.add_session("ses_second0000", updated=clock.now_ms() - 7 * HOUR)
    p1, p2 = await one_pass(store, host, paths, clock, daily_token_budget=100)
    assert len(host.prompts) == spent_prompts
    assert "daily token budget" in present(p1.waiting)
    assert (
        store.stage1.stage1_job("ses_second0000") is None
        or present(store.stage1.stage1_job("ses_second0000"))["status"] == "pending"
    )
    snap = snapshot(store, Settings(daily_token_budget=100), paths)
    assert "daily token budget" in snap["budget"]["waiting"] and snap["budget"]["left_today"] == 0
    clock.advance(24 * HOUR)
    p1, _ = await one_pass(
        store, host, paths, clock, daily_token_budget=100, max_rollout_age_days=10
    )
    assert p1.succeeded == 1


async def test_circuit_opens_on_429_storm_and_closes_after_an_hour(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    for i in range(3):
        host.add_session(f"ses_storm{i}xxxx", updated=clock.now_ms() - 7 * HOUR - i)
    host.reply = lambda b: {
        "error": {
            "name": "APIError",
            "data": {"message": "429 Too Many Requests", "statusCode": 429},
        }
    }
    p1, p2 = await one_pass(store, host, paths, clock, max_rollouts_per_startup=8)
    assert p1.failed == 0 and p1.released == 3
    snap = snapshot(store, Settings(), paths)
    assert snap["budget"]["circuits"] and "circuit open" in snap["budget"]["waiting"]
    storm_calls = len(host.prompts)
    for _ in range(11):
        clock.advance(5 * MINUTE)
        await one_pass(store, host, paths, clock, max_rollouts_per_startup=8)
    assert len(host.prompts) == storm_calls  # no retries while the circuit is open
    assert all(
        present(store.stage1.stage1_job(f"ses_storm{i}xxxx"))["retry_remaining"] == 3
        for i in range(3)
    )
    from tests.fakehost import good_reply

    host.reply = good_reply
    clock.advance(10 * MINUTE)
    p1, _ = await one_pass(store, host, paths, clock, max_rollouts_per_startup=8)
    assert p1.succeeded == 3
    assert snapshot(store, Settings(), paths)["budget"]["circuits"] == {}


def test_event_classification() -> None:
    assert session_event({"type": "session.idle", "properties": {"sessionID": "ses_a"}}) == (
        "idle",
        "ses_a",
    )
    assert session_event(
        {"type": "session.status", "properties": {"sessionID": "ses_a", "status": {"type": "idle"}}}
    ) == ("idle", "ses_a")
    assert (
        session_event(
            {
                "type": "session.status",
                "properties": {"sessionID": "ses_a", "status": {"type": "busy"}},
            }
        )
        is None
    )
    assert session_event({"type": "session.deleted", "properties": {"info": {"id": "ses_b"}}}) == (
        "deleted",
        "ses_b",
    )
    assert session_event({"type": "message.updated", "properties": {}}) is None
    assert session_event({"type": "session.idle", "properties": "garbage"}) is None


async def test_event_during_a_pass_runs_one_more_pass_right_after(
    monkeypatch: pytest.MonkeyPatch, paths: Paths
) -> None:
    """Issue 11: an idle event that lands while a pass runs is coalesced into one pass right after
    it, not dropped until the next timed pass (an hour here)."""
    import asyncio

    from memoryd.read.usage import IngestResult
    from memoryd.runtime import daemon as daemon_mod
    from memoryd.store.home import App
    from memoryd.write.passes import PassResult
    from memoryd.write.phase2 import Phase2Status

    monkeypatch.setenv("MEMORYD_MIN_ROLLOUT_IDLE_HOURS", "0")
    started: list[float] = []
    release = asyncio.Event()

    async def fake_pass(app: App, **kw: object) -> PassResult:
        started.append(asyncio.get_running_loop().time())
        if len(started) == 1:
            await release.wait()
        return PassResult(Phase1Report(), Phase2Result(Phase2Status.NO_CHANGES), IngestResult())

    monkeypatch.setattr(daemon_mod, "run_pass", fake_pass)
    monkeypatch.setattr(daemon_mod, "daemon_tick", no_tick)
    monkeypatch.setattr(daemon_mod, "EVENT_DEBOUNCE_S", 0.3)  # 2 s in the daemon
    d = daemon_mod.Daemon(App(paths), interval_s=3600)
    serving = asyncio.create_task(d.serve())
    try:
        for _ in range(100):
            if started:
                break
            await asyncio.sleep(0.05)
        assert len(started) == 1
        for _ in range(3):  # several events during the pass coalesce into one pass
            await d._on_event("idle", "ses_late")
        await asyncio.sleep(0.8)  # past the debounce: the request falls due mid-pass
        assert len(started) == 1
        release.set()
        for _ in range(100):
            if len(started) >= 2:
                break
            await asyncio.sleep(0.05)
        assert len(started) == 2, "the request made during the pass was dropped"
        await asyncio.sleep(0.8)
        assert len(started) == 2  # coalesced: one more pass, not one per event
    finally:
        d.handle_exit(15)
        await asyncio.wait_for(serving, 10)
