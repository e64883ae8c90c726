"""The global consolidation job: singleton lease, cooldown, backoff, heartbeat, token guard, selection."""

from __future__ import annotations

from pathlib import Path

from memoryd.clock import DAY, HOUR, MINUTE, ManualClock
from memoryd.paths import Paths
from memoryd.store import Store
from tests.narrow import present


def add_output(store: Store, sid: str, wm: int) -> None:
    c = store.stage1.claim_stage1(sid, wm, max_running=100, worker_id="w")
    assert store.stage1.mark_stage1_succeeded(
        sid,
        present(c.token),
        raw_memory=f"mem {sid}",
        rollout_summary=f"sum {sid}",
        rollout_slug=None,
        cwd="/p",
        title="t",
    )


def test_singleton_claim_and_takeover_after_lease(store: Store, clock: ManualClock) -> None:
    first = store.phase2.claim_phase2(worker_id="a")
    assert first.claimed
    assert store.phase2.claim_phase2(worker_id="b").status == "skipped_running"
    assert (
        store.phase2.claim_phase2(worker_id="b", ignore_cooldown=True).status == "skipped_running"
    )
    clock.advance(HOUR + 1)
    second = store.phase2.claim_phase2(worker_id="b")
    assert second.claimed and second.token != first.token
    assert (
        store.phase2.mark_phase2_succeeded(present(first.token), [], consolidated=True, watermark=0)
        is False
    )
    assert (
        store.phase2.mark_phase2_succeeded(
            present(second.token), [], consolidated=True, watermark=0
        )
        is True
    )


def test_cooldown_only_after_a_consolidation(store: Store, clock: ManualClock) -> None:
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_succeeded(present(c.token), [], consolidated=False, watermark=0)
    assert store.phase2.claim_phase2(worker_id="a").claimed  # a clean no-op starts no cooldown
    c = present(store.phase2.phase2_job())["ownership_token"]
    store.phase2.mark_phase2_succeeded(c, [], consolidated=True, watermark=0)
    store.phase2.enqueue_phase2(5)  # new input does not bypass the cooldown
    assert store.phase2.claim_phase2(worker_id="a").status == "skipped_cooldown"
    assert store.phase2.claim_phase2(worker_id="a", ignore_cooldown=True).claimed
    tok = present(store.phase2.phase2_job())["ownership_token"]
    store.phase2.mark_phase2_succeeded(tok, [], consolidated=True, watermark=0)
    clock.advance(6 * HOUR)
    assert store.phase2.claim_phase2(worker_id="a").claimed


def test_failure_backs_off_and_never_exhausts(store: Store, clock: ManualClock) -> None:
    for _ in range(5):
        c = store.phase2.claim_phase2(worker_id="a")
        assert c.claimed
        assert store.phase2.mark_phase2_failed(present(c.token), "agent timed out")
        job = present(store.phase2.phase2_job())
        assert job["status"] == "failed" and job["retry_at"] == clock.now_ms() + HOUR
        assert (
            store.phase2.claim_phase2(worker_id="a", ignore_cooldown=True).status
            == "skipped_backoff"
        )
        clock.advance(HOUR)
    assert present(store.phase2.phase2_job())["retry_remaining"] == 0
    assert store.phase2.claim_phase2(worker_id="a").claimed


def test_new_input_cancels_failure_backoff(store: Store) -> None:
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_failed(present(c.token), "x")
    store.phase2.enqueue_phase2(10)
    job = present(store.phase2.phase2_job())
    assert job["status"] == "pending" and job["retry_at"] is None and job["last_error"] == "x"
    assert store.phase2.claim_phase2(worker_id="a").claimed


def test_enqueue_keeps_running_job_running_and_watermark_monotonic(store: Store) -> None:
    store.phase2.enqueue_phase2(100)
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.enqueue_phase2(50)
    job = present(store.phase2.phase2_job())
    assert job["status"] == "running" and job["input_watermark"] == 101
    store.phase2.enqueue_phase2(500)
    assert present(store.phase2.phase2_job())["input_watermark"] == 500
    assert store.phase2.heartbeat_phase2(present(c.token))


def test_heartbeat_extends_lease_only_for_owner(store: Store, clock: ManualClock) -> None:
    c = store.phase2.claim_phase2(worker_id="a")
    clock.advance(50 * MINUTE)
    assert store.phase2.heartbeat_phase2(present(c.token))
    clock.advance(50 * MINUTE)
    assert store.phase2.claim_phase2(worker_id="b").status == "skipped_running"
    assert store.phase2.heartbeat_phase2("not-the-token") is False
    clock.advance(HOUR + 1)
    other = store.phase2.claim_phase2(worker_id="b")
    assert other.claimed
    assert store.phase2.heartbeat_phase2(present(c.token)) is False  # ownership lost


def test_release_does_not_back_off(store: Store) -> None:
    c = store.phase2.claim_phase2(worker_id="a")
    assert store.phase2.release_phase2(present(c.token))
    job = present(store.phase2.phase2_job())
    assert job["status"] == "pending" and job["retry_at"] is None
    assert store.phase2.claim_phase2(worker_id="a").claimed


def test_success_rewrites_selection_snapshot(store: Store) -> None:
    add_output(store, "s1", 10)
    add_output(store, "s2", 20)
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_succeeded(
        present(c.token), [("s1", 10), ("s2", 999)], consolidated=True, watermark=20
    )
    assert (
        present(store.outputs.output("s1")).selected_for_phase2
        and not present(store.outputs.output("s2")).selected_for_phase2
    )
    assert store.outputs.consumed_count() == 1
    assert present(store.phase2.phase2_job())["last_success_watermark"] == 20


def test_selection_ranking_and_filters(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    add_output(store, "fresh", now - 1 * DAY)
    add_output(store, "older", now - 5 * DAY)
    add_output(store, "stale", now - 40 * DAY)
    add_output(store, "used_old", now - 40 * DAY)
    add_output(store, "off", now - 1 * DAY)
    store.outputs.record_usage(["used_old"])
    store.outputs.record_usage(["older"])
    store.outputs.record_usage(["older"])
    store.outputs.set_mode("off", "disabled")
    picked = [o.session_id for o in store.outputs.phase2_selection(10, 30)]
    assert picked == ["older", "used_old", "fresh"]
    assert [o.session_id for o in store.outputs.phase2_selection(2, 30)] == ["older", "used_old"]


def test_deleting_or_disabling_a_consumed_session_enqueues(store: Store) -> None:
    add_output(store, "s1", 10)
    add_output(store, "s2", 10)
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_succeeded(
        present(c.token), [("s1", 10), ("s2", 10)], consolidated=True, watermark=10
    )
    assert present(store.phase2.phase2_job())["status"] == "done"
    assert store.outputs.delete_session_memory("s1") is True
    assert present(store.phase2.phase2_job())["status"] == "pending"
    c = store.phase2.claim_phase2(worker_id="a", ignore_cooldown=True)
    store.phase2.mark_phase2_succeeded(
        present(c.token), [("s2", 10)], consolidated=True, watermark=10
    )
    store.outputs.set_mode("s2", "polluted", "webfetch")
    assert present(store.phase2.phase2_job())["status"] == "pending"


def test_reset_wipes_and_leaves_cooldown_marker(store: Store) -> None:
    add_output(store, "s1", 10)
    store.outputs.set_mode("s9", "disabled")
    store.phase2.reset_memory_data()
    assert store.outputs.output_count() == 0 and store.stage1.stage1_job("s1") is None
    assert store.outputs.memory_mode("s9") == "disabled"
    assert store.phase2.claim_phase2(worker_id="a").status == "skipped_cooldown"


def test_secrets_the_consolidator_wrote_are_scrubbed(tmp_path: Path) -> None:
    from memoryd.write.phase2 import redact_agent_files

    secret = "ghp_" + "Zq8XwV3mT1uP6yR4nL0kJ7hG2fD5sA9cB1xy"
    (tmp_path / "skills" / "deploy").mkdir(parents=True)
    (tmp_path / "MEMORY.md").write_text(f"# Memory\n- token {secret}\n")
    (tmp_path / "memory_summary.md").write_text("v1\n- clean\n")
    (tmp_path / "skills" / "deploy" / "SKILL.md").write_text(f"export GITHUB_TOKEN={secret}\n")
    assert redact_agent_files(tmp_path) == ["MEMORY.md", "skills/deploy/SKILL.md"]
    for p in ("MEMORY.md", "skills/deploy/SKILL.md"):
        assert secret not in (tmp_path / p).read_text()
    assert (tmp_path / "memory_summary.md").read_text() == "v1\n- clean\n"


def test_forgetting_lifts_the_cooldown(store: Store) -> None:
    add_output(store, "s1", 10)
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_succeeded(
        present(c.token), [("s1", 10)], consolidated=True, watermark=10
    )
    assert store.phase2.claim_phase2(worker_id="a").status == "skipped_cooldown"
    store.phase2.enqueue_phase2(11)  # ordinary new input waits for the cooldown
    assert store.phase2.claim_phase2(worker_id="a").status == "skipped_cooldown"
    assert store.outputs.delete_session_memory("s1") is True  # forgetting does not
    assert store.phase2.claim_phase2(worker_id="a").claimed


def test_input_arriving_during_a_run_keeps_the_job_pending(store: Store) -> None:
    store.phase2.enqueue_phase2(5)
    c = store.phase2.claim_phase2(worker_id="a")
    store.phase2.enqueue_phase2(9)  # a session finished extracting while the consolidator worked
    store.phase2.mark_phase2_succeeded(
        present(c.token), [], consolidated=False, watermark=5, claimed_input=c.watermark
    )
    assert present(store.phase2.phase2_job())["status"] == "pending"
    c2 = store.phase2.claim_phase2(worker_id="a")
    store.phase2.mark_phase2_succeeded(
        present(c2.token), [], consolidated=False, watermark=9, claimed_input=c2.watermark
    )
    assert present(store.phase2.phase2_job())["status"] == "done"


def test_out_of_order_stage1_finish_leaves_no_pending_input(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    """Issue 11: a newer session finalized first, an older one second, then one clean run that
    consumed both: nothing is pending any more."""
    from memoryd.settings import Settings
    from memoryd.write.snapshot import snapshot

    now = clock.now_ms()
    add_output(store, "ses_newer", now - 1_000)
    add_output(store, "ses_older", now - 2_000)  # finishes second, with the smaller watermark
    c = store.phase2.claim_phase2(worker_id="a")
    selected = store.outputs.phase2_selection(256, 30)
    consumed = [(o.session_id, o.source_updated_at) for o in selected]
    assert len(consumed) == 2
    assert store.phase2.mark_phase2_succeeded(
        present(c.token),
        consumed,
        consolidated=True,
        watermark=max(wm for _, wm in consumed),
        claimed_input=c.watermark,
    )
    assert present(store.phase2.phase2_job())["status"] == "done"
    assert snapshot(store, Settings(), paths)["phase2"]["pending_input"] is False
    add_output(store, "ses_third", now - 3_000)  # new input after the run: pending again
    assert snapshot(store, Settings(), paths)["phase2"]["pending_input"] is True


def test_a_cited_history_never_keeps_a_new_session_out(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    for i in range(8):  # a year's worth of well-cited sessions, more than the selection holds
        add_output(store, f"cited{i}", now - (10 + i) * DAY)
        store.outputs.record_usage([f"cited{i}"])
    add_output(store, "new", now - 1000)  # finished just now, never cited yet
    picked = [o.session_id for o in store.outputs.phase2_selection(4, 30)]
    assert "new" in picked and len(picked) == 4
    assert picked[:3] == ["cited0", "cited1", "cited2"]  # the best-cited keep the other places


def test_new_sessions_take_only_their_share(store: Store, clock: ManualClock) -> None:
    now = clock.now_ms()
    for i in range(4):
        add_output(store, f"cited{i}", now - (10 + i) * DAY)
        store.outputs.record_usage([f"cited{i}"])
    for i in range(4):
        add_output(store, f"new{i}", now - i * 1000)
    picked = [o.session_id for o in store.outputs.phase2_selection(4, 30)]
    assert picked == ["cited0", "cited1", "cited2", "new0"]
