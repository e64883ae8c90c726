"""The stage-1 job state machine, outputs, modes, usage and the model-call ledger."""

from __future__ import annotations

import pytest

from memoryd.clock import DAY, HOUR, MINUTE, ManualClock
from memoryd.owner import Owner, current_owner, owner_gone
from memoryd.paths import Paths
from memoryd.store import Store, jobs
from memoryd.store.jobs import STAGE1, Claim
from memoryd.store.ledger import CallUsage
from tests.narrow import present


def claim(store: Store, sid: str = "ses_a", wm: int = 100, cap: int = 2) -> Claim:
    return store.stage1.claim_stage1(sid, wm, max_running=cap, worker_id="w1")


def succeed(store: Store, sid: str, token: str, text: str = "mem") -> bool:
    return store.stage1.mark_stage1_succeeded(
        sid,
        token,
        raw_memory=text,
        rollout_summary=f"summary {text}",
        rollout_slug="slug",
        cwd="/p",
        title="t",
    )


def test_claim_then_second_claim_is_skipped_while_leased(store: Store) -> None:
    first = claim(store)
    assert first.claimed and first.token
    again = claim(store)
    assert again.status == "skipped_running"


def test_lease_expiry_allows_takeover_and_old_token_cannot_finalize(
    store: Store, clock: ManualClock
) -> None:
    first = claim(store)
    clock.advance(HOUR + 1)
    second = claim(store)
    assert second.claimed and second.token != first.token
    assert succeed(store, "ses_a", present(first.token)) is False
    assert store.stage1.mark_stage1_failed("ses_a", present(first.token), "late") is False
    assert store.outputs.output("ses_a") is None
    assert succeed(store, "ses_a", present(second.token)) is True
    assert present(store.outputs.output("ses_a")).raw_memory == "mem"


def test_success_stores_output_and_enqueues_phase2(store: Store) -> None:
    c = claim(store, wm=500)
    assert succeed(store, "ses_a", present(c.token))
    out = present(store.outputs.output("ses_a"))
    assert out.source_updated_at == 500 and out.rollout_summary == "summary mem"
    job = present(store.stage1.stage1_job("ses_a"))
    assert (
        job["status"] == "done"
        and job["last_success_watermark"] == 500
        and job["ownership_token"] is None
    )
    p2 = present(store.phase2.phase2_job())
    assert p2["status"] == "pending" and p2["input_watermark"] == 500


def test_up_to_date_session_is_not_claimed_again(store: Store) -> None:
    c = claim(store, wm=500)
    succeed(store, "ses_a", present(c.token))
    assert claim(store, wm=500).status == "skipped_up_to_date"
    assert claim(store, wm=400).status == "skipped_up_to_date"


def test_no_output_deletes_stale_row_and_enqueues_only_then(store: Store) -> None:
    c = claim(store, "ses_new", 10)
    assert store.stage1.mark_stage1_no_output("ses_new", present(c.token))
    assert store.phase2.phase2_job() is None  # nothing deleted, nothing to forget
    c = claim(store, "ses_b", 10)
    succeed(store, "ses_b", present(c.token))
    c = claim(store, "ses_b", 20)
    assert c.claimed
    assert store.stage1.mark_stage1_no_output("ses_b", present(c.token))
    assert store.outputs.output("ses_b") is None
    assert present(store.phase2.phase2_job())["input_watermark"] == 20
    assert claim(store, "ses_b", 20).status == "skipped_up_to_date"


def test_failures_back_off_then_exhaust(store: Store, clock: ManualClock) -> None:
    for attempt in range(3):
        c = claim(store)
        assert c.claimed, attempt
        assert store.stage1.mark_stage1_failed("ses_a", present(c.token), f"boom {attempt}")
        job = present(store.stage1.stage1_job("ses_a"))
        assert job["retry_remaining"] == 2 - attempt
        assert job["retry_at"] == clock.now_ms() + HOUR
        assert claim(store).status == "skipped_backoff"
        clock.advance(HOUR)
    job = present(store.stage1.stage1_job("ses_a"))
    assert job["status"] == "failed" and job["last_error"] == "boom 2"
    assert claim(store).status == "skipped_exhausted"
    clock.advance(10 * DAY)
    assert claim(store).status == "skipped_exhausted"


def test_newer_session_update_revives_exhausted_and_backoff_jobs(
    store: Store, clock: ManualClock
) -> None:
    for _ in range(3):
        c = claim(store, wm=100)
        store.stage1.mark_stage1_failed("ses_a", present(c.token), "boom")
        clock.advance(HOUR)
    assert claim(store, wm=100).status == "skipped_exhausted"
    revived = claim(store, wm=101)
    assert revived.claimed
    assert present(store.stage1.stage1_job("ses_a"))["retry_remaining"] == 3
    store.stage1.mark_stage1_failed("ses_a", present(revived.token), "again")
    assert claim(store, wm=101).status == "skipped_backoff"
    assert claim(store, wm=102).claimed  # new activity cancels the backoff


def test_done_job_revived_by_newer_watermark(store: Store) -> None:
    c = claim(store, wm=100)
    succeed(store, "ses_a", present(c.token), "v1")
    c2 = claim(store, wm=200)
    assert c2.claimed
    succeed(store, "ses_a", present(c2.token), "v2")
    assert present(store.outputs.output("ses_a")).raw_memory == "v2"
    assert present(store.outputs.output("ses_a")).source_updated_at == 200


def test_release_does_not_burn_a_retry(store: Store) -> None:
    c = claim(store)
    assert store.stage1.release_stage1("ses_a", present(c.token))
    job = present(store.stage1.stage1_job("ses_a"))
    assert job["status"] == "pending" and job["retry_remaining"] == 3 and job["retry_at"] is None
    assert claim(store).claimed


def test_running_cap_counts_live_leases_only(store: Store, clock: ManualClock) -> None:
    assert claim(store, "s1", cap=2).claimed
    assert claim(store, "s2", cap=2).claimed
    assert claim(store, "s3", cap=2).status == "skipped_cap"
    clock.advance(HOUR + 1)
    assert claim(store, "s3", cap=2).claimed


def test_running_cap_asks_each_owner_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass claims its sessions one by one: counting the running ones must not ask about the
    owner again for every running row (that made a pass of n claims n² owner checks)."""
    asked: list[Owner | None] = []

    def counted(owner: Owner | None) -> bool:
        asked.append(owner)
        return owner_gone(owner)

    monkeypatch.setattr(jobs, "owner_gone", counted)
    for i in range(30):
        assert claim(store, f"s{i}", cap=100).claimed
    assert len(asked) == 29  # one owner: asked once per claim that found running jobs


def test_running_cap_skips_a_gone_owners_leases(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = Owner(current_owner().host, "boot", 1, "1", current_owner().space)
    for i in range(3):
        d = store.stage1.claim_stage1(f"d{i}", 1, max_running=3, worker_id="x", owner=gone)
        assert d.claimed
    monkeypatch.setattr(jobs, "owner_gone", lambda o: o == gone)
    assert claim(store, "s1", cap=2).claimed
    assert claim(store, "s2", cap=2).claimed
    assert claim(store, "s3", cap=2).status == "skipped_cap"


def test_running_cap_holds_across_processes(paths: Paths, clock: ManualClock) -> None:
    """Two connections to one file (as two processes would have) share one cap."""
    paths.ensure_dir(paths.data_dir)
    a = Store(paths.db, clock=clock)
    b = Store(paths.db, clock=clock)
    try:
        assert a.stage1.claim_stage1("s1", 1, max_running=2, worker_id="a").claimed
        assert b.stage1.claim_stage1("s2", 1, max_running=2, worker_id="b").claimed
        assert a.stage1.claim_stage1("s3", 1, max_running=2, worker_id="a").status == "skipped_cap"
        assert b.stage1.claim_stage1("s3", 1, max_running=2, worker_id="b").status == "skipped_cap"
        # b cannot finalize a's job with its own token
        tok_b = present(b.stage1.stage1_job("s2"))["ownership_token"]
        assert b.stage1.mark_stage1_failed("s1", tok_b, "not mine") is False
    finally:
        a.close()
        b.close()


def test_upsert_never_goes_back_in_time_and_keeps_usage(store: Store) -> None:
    c = claim(store, wm=200)
    succeed(store, "ses_a", present(c.token), "new")
    store.outputs.record_usage(["ses_a"])
    c2 = claim(store, wm=300)
    succeed(store, "ses_a", present(c2.token), "newer")
    out = present(store.outputs.output("ses_a"))
    assert out.raw_memory == "newer" and out.usage_count == 1


def test_record_usage_ignores_unknown_and_dedupes(store: Store, clock: ManualClock) -> None:
    c = claim(store, wm=1)
    succeed(store, "ses_a", present(c.token))
    assert store.outputs.record_usage(["ses_a", "ses_a", "ses_unknown"]) == 1
    out = present(store.outputs.output("ses_a"))
    assert out.usage_count == 1 and out.last_usage == clock.now_ms()


def test_prune_drops_only_stale_unselected_rows(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    for sid, wm in (
        ("old", now - 40 * DAY),
        ("fresh", now - 1 * DAY),
        ("old_used", now - 40 * DAY),
    ):
        c = claim(store, sid, wm, cap=10)
        succeed(store, sid, present(c.token))
    store.outputs.record_usage(["old_used"])
    assert store.outputs.prune_outputs(max_unused_days=30) == 1
    assert {o.session_id for o in store.outputs.newest_first()} == {"fresh", "old_used"}


def test_modes_stamp_and_set(store: Store) -> None:
    assert store.outputs.memory_mode("s") is None
    assert store.outputs.stamp_mode_if_absent("s", "enabled") == "enabled"
    assert store.outputs.stamp_mode_if_absent("s", "disabled") == "enabled"
    store.outputs.set_mode("s", "polluted", "webfetch")
    assert store.outputs.memory_mode("s") == "polluted"
    with pytest.raises(ValueError):
        store.outputs.set_mode("s", "bogus")  # type: ignore[arg-type]


def test_delete_session_memory(store: Store) -> None:
    c = claim(store)
    succeed(store, "ses_a", present(c.token))
    assert "ses_a" in store.outputs.known_session_ids()
    store.outputs.delete_session_memory("ses_a")
    assert store.outputs.output("ses_a") is None and store.stage1.stage1_job("ses_a") is None


def test_model_call_ledger(store: Store, clock: ManualClock) -> None:
    store.ledger.record_model_call(
        phase="phase1",
        job_kind=STAGE1,
        job_key="s",
        model="mock/m",
        outcome="ok",
        usage=CallUsage(input_tokens=100, output_tokens=20, cache_read_tokens=5, cost=0.01),
    )
    clock.advance(MINUTE)
    store.ledger.record_model_call(
        phase="phase1",
        job_kind=STAGE1,
        job_key="s",
        model=None,
        outcome="error",
        usage=CallUsage(input_tokens=7),
    )
    totals = store.ledger.token_totals()
    assert (
        totals["phase1"]["calls"] == 2
        and totals["phase1"]["input"] == 107
        and totals["phase1"]["output"] == 20
    )
    assert store.ledger.job_tokens(STAGE1, "s").input_tokens == 107
    assert store.ledger.token_totals(since_ms=clock.now_ms())["phase1"]["calls"] == 1


def test_error_text_is_bounded(store: Store) -> None:
    c = claim(store)
    store.stage1.mark_stage1_failed("ses_a", present(c.token), "x" * 10_000)
    assert len(present(store.stage1.stage1_job("ses_a"))["last_error"]) <= 4_000
    errs = store.stage1.stage1_last_errors()
    assert errs[0]["session_id"] == "ses_a" and errs[0]["retries_left"] == 2
