"""Review mode: phase 2 stages a validated consolidation; accept makes it live, reject drops it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.cli import main
from memoryd.clock import HOUR, ManualClock
from memoryd.errors import BaselineError, ReviewError
from memoryd.folder.baseline import Baseline
from memoryd.folder.layout import AD_HOC_NOTES, is_tracked
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.read.block import sync_block
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.write import review
from memoryd.write.phase1 import Phase1
from memoryd.write.phase2 import Phase2
from tests.fakehost import FakeOpencode
from tests.narrow import present

pytestmark = pytest.mark.anyio


def consolidator(fact: str) -> Callable[[Path], None]:
    def write(root: Path) -> None:
        (root / "MEMORY.md").write_text(f"# Memory\n- {fact}\n")
        (root / "memory_summary.md").write_text(f"v1\n- {fact}\n")

    return write


async def run_pass(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, **kw: Any
) -> str:
    settings = Settings(min_rollout_idle_hours=0, **kw)
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    common: dict[str, Any] = dict(
        store=store, client=client, settings=settings, paths=paths, clock=clock, worker_id="t"
    )
    await Phase1(**common).run_pass()
    return (await Phase2(**common).run(force=True)).status


def baseline(paths: Paths) -> Baseline:
    return Baseline(paths.baseline_git, paths.memories, exclude=lambda p: not is_tracked(p))


def block(paths: Paths) -> str:
    sync_block(paths, Settings())
    f = paths.readpath_block
    return f.read_text() if f.exists() else ""


@pytest.fixture
def host(clock: ManualClock) -> FakeOpencode:
    h = FakeOpencode(consolidate=consolidator("first fact"))
    h.add_session("ses_1", title="one", updated=clock.now_ms() - HOUR, turns=[("user", "use teal")])
    return h


async def test_without_review_mode_nothing_is_staged(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    assert await run_pass(store, host, paths, clock) == "succeeded"
    assert "first fact" in (paths.memories / "MEMORY.md").read_text()
    assert review.pending(paths) is None and not paths.review_dir.exists()
    assert baseline(paths).diff().empty


async def test_staged_then_accepted(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    # live memory first (review off), then review mode on for the next consolidation
    assert await run_pass(store, host, paths, clock) == "succeeded"
    live_block = block(paths)
    assert "first fact" in live_block
    host.consolidate = consolidator("second fact")
    host.add_session(
        "ses_2", title="two", updated=clock.now_ms() - HOUR, turns=[("user", "use navy")]
    )
    clock.advance(7 * HOUR)
    assert await run_pass(store, host, paths, clock, review=True) == "staged"

    staged = review.pending(paths)
    assert staged is not None and staged.changes
    # the folder and the block still hold the live memory; the staged one lives outside it
    assert "first fact" in (paths.memories / "MEMORY.md").read_text()
    assert block(paths) == live_block
    assert not any("second fact" in p.read_text() for p in paths.memories.rglob("*.md"))
    assert paths.memories not in paths.review_dir.parents
    diff = review.diff_text(paths)
    assert "-- first fact" in diff and "+- second fact" in diff
    assert present(store.phase2.phase2_job())["status"] == "pending"

    # while it waits, phase 2 does not run (no model call)
    prompts = len(host.prompts)
    assert await run_pass(store, host, paths, clock, review=True) == "skipped_review"
    assert len(host.prompts) == prompts

    # a note that arrives after staging is still a change after accepting
    note = paths.memories / AD_HOC_NOTES / "2027-01-15T09-00-00-late.md"
    note.write_text("a late note\n")
    entry = review.accept(store, Settings(review=True), paths)
    assert entry["decision"] == "accepted"
    assert "second fact" in (paths.memories / "MEMORY.md").read_text()
    assert "second fact" in paths.readpath_block.read_text()  # re-rendered at once
    assert review.pending(paths) is None
    changes = [f"{c.status} {c.path}" for c in baseline(paths).diff().changes]
    assert changes == [f"A {AD_HOC_NOTES}/2027-01-15T09-00-00-late.md"]
    job = present(store.phase2.phase2_job())
    assert job["cooldown_until"] > clock.now_ms() and store.outputs.consumed_count() == 2
    assert review.history(store)[0]["decision"] == "accepted"
    with pytest.raises(ReviewError):
        review.accept(store, Settings(review=True), paths)


async def test_first_consolidation_staged_leaves_no_memory_live(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    assert not (paths.memories / "MEMORY.md").exists()
    assert block(paths) == ""
    review.accept(store, Settings(), paths)
    assert "first fact" in block(paths)
    assert baseline(paths).diff().empty


async def test_rejected_consolidation_is_dropped_with_its_reason(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    assert await run_pass(store, host, paths, clock) == "succeeded"
    head = baseline(paths).head_files()
    host.consolidate = consolidator("an invented fact")
    host.add_session("ses_2", title="two", updated=clock.now_ms() - HOUR, turns=[("user", "hmm")])
    clock.advance(7 * HOUR)
    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    entry = review.reject(store, paths, "  it made\nthat up  ")
    assert entry["reason"] == "it made that up"
    assert review.pending(paths) is None
    assert "first fact" in (paths.memories / "MEMORY.md").read_text()
    assert baseline(paths).head_files() == head  # the baseline did not move
    job = present(store.phase2.phase2_job())
    assert job["status"] == "done" and job["cooldown_until"] > clock.now_ms()
    assert review.history(store)[0]["reason"] == "it made that up"
    with pytest.raises(ReviewError):
        review.reject(store, paths, None)


async def test_reset_discards_a_staged_review(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    from memoryd.write.reset import reset_memory

    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    reset_memory(store, paths)
    assert review.pending(paths) is None


async def test_cli_review_show_accept_reject(
    store: Store,
    host: FakeOpencode,
    paths: Paths,
    clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["review"]) == 0
    assert "nothing is waiting for review" in capsys.readouterr().out
    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    assert main(["status"]) == 0
    assert "a consolidation staged at 2027-01-15T08:00:00Z waits" in capsys.readouterr().out
    assert main(["review"]) == 0
    out = capsys.readouterr().out
    assert "+++ b/MEMORY.md" in out and "+- first fact" in out and "--accept" in out
    assert main(["review", "--reject", "not now"]) == 0
    assert review.pending(paths) is None
    assert main(["status", "--json"]) == 0
    assert '"pending": false' in capsys.readouterr().out
    assert main(["review", "--accept"]) == 1
    assert "no consolidation is waiting" in capsys.readouterr().err


def _stage_by_hand(store: Store, paths: Paths, fact: str) -> Baseline:
    """Live "old" memory as the baseline, then ``fact`` staged as a validated run would."""
    mem = paths.memories
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "MEMORY.md").write_text("# Memory\n- old\n")
    (mem / "memory_summary.md").write_text("v1\n- old\n")
    bl = baseline(paths)
    bl.reset()
    claim = store.phase2.claim_phase2(worker_id="w", ignore_cooldown=True)
    assert claim.token
    (mem / "MEMORY.md").write_text(f"# Memory\n- {fact}\n")
    (mem / "memory_summary.md").write_text(f"v1\n- {fact}\n")
    review.stage(
        paths,
        bl,
        review.Staged(staged_at=1, consumed=[], watermark=0, claimed_input=claim.watermark),
    )
    store.phase2.release_phase2(claim.token, "waiting: staged for review")
    return bl


@pytest.mark.parametrize("second", ["accept", "reject"])
def test_a_second_decision_on_the_same_stage_changes_nothing(
    store: Store, paths: Paths, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    _stage_by_hand(store, paths, "new fact")
    stale = review.pending(paths)  # the web page read it...
    review.accept(store, Settings(), paths)  # ...and the CLI decided first
    live = {p.name: p.read_text() for p in paths.memories.glob("*.md")}
    assert "new fact" in live["MEMORY.md"]
    job = dict(present(store.phase2.phase2_job()))
    real, calls = review.pending, []

    def racing_pending(p: Paths) -> review.Staged | None:
        calls.append(p)
        return stale if len(calls) == 1 else real(p)

    monkeypatch.setattr(review, "pending", racing_pending)
    with pytest.raises(ReviewError, match="already accepted or rejected"):
        if second == "accept":
            review.accept(store, Settings(), paths)
        else:
            review.reject(store, paths, "too late")
    assert {p.name: p.read_text() for p in paths.memories.glob("*.md")} == live
    after = present(store.phase2.phase2_job())
    assert (after["status"], after["cooldown_until"], after["ownership_token"]) == (
        job["status"],
        job["cooldown_until"],
        None,
    )
    assert [e["decision"] for e in review.history(store)] == ["accepted"]


@pytest.mark.parametrize("decide", ["accept", "reject"])
def test_a_forget_after_staging_is_not_held_back_by_the_cooldown(
    store: Store, paths: Paths, decide: str
) -> None:
    _stage_by_hand(store, paths, "new fact")
    store.phase2.enqueue_phase2(urgent=True)  # what memory_forget does while the stage waits
    if decide == "accept":
        review.accept(store, Settings(), paths)
    else:
        review.reject(store, paths, None)
    job = present(store.phase2.phase2_job())
    assert (job["cooldown_until"] or 0) <= store.clock.now_ms()
    assert store.phase2.claim_phase2(worker_id="daemon").status == "claimed"


def test_without_a_forget_a_decision_still_starts_the_cooldown(store: Store, paths: Paths) -> None:
    _stage_by_hand(store, paths, "new fact")
    store.phase2.enqueue_phase2(urgent=False)
    review.accept(store, Settings(), paths)
    assert present(store.phase2.phase2_job())["cooldown_until"] > store.clock.now_ms()
    assert store.phase2.claim_phase2(worker_id="daemon").status == "skipped_cooldown"


async def test_forgetting_a_session_the_stage_used_discards_the_stage(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    from memoryd.tools.notes import memory_forget

    assert await run_pass(store, host, paths, clock) == "succeeded"
    host.consolidate = consolidator("secret plan from ses_2")
    host.add_session("ses_2", title="two", updated=clock.now_ms() - HOUR, turns=[("user", "x")])
    clock.advance(7 * HOUR)
    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    assert "ses_2" in {sid for sid, _ in present(review.pending(paths)).consumed}
    memory_forget(store, paths.memories, session_id="ses_2")
    with pytest.raises(ReviewError, match="forgotten"):
        review.accept(store, Settings(review=True), paths)
    assert review.pending(paths) is None
    assert "secret plan" not in (paths.memories / "MEMORY.md").read_text()
    assert "secret plan" not in block(paths)
    entry = review.history(store)[0]
    assert entry["decision"] == "discarded" and "ses_2" in entry["reason"]
    assert present(store.phase2.phase2_job())["ownership_token"] is None  # the claim was given back
    # phase 2 may run again at once; without ses_2 nothing differs from the live memory
    assert await run_pass(store, host, paths, clock, review=True) == "no_changes"
    assert review.pending(paths) is None
    assert "first fact" in (paths.memories / "MEMORY.md").read_text()


async def test_phase2_drops_a_stage_whose_session_was_forgotten(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    from memoryd.tools.notes import memory_forget

    host.add_session("ses_2", title="two", updated=clock.now_ms() - HOUR, turns=[("user", "x")])
    assert await run_pass(store, host, paths, clock, review=True) == "staged"
    memory_forget(store, paths.memories, session_id="ses_2")
    settings = Settings(min_rollout_idle_hours=0, review=True)
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    p2 = Phase2(
        store=store, client=client, settings=settings, paths=paths, clock=clock, worker_id="t"
    )
    assert (await p2.run()).status == "staged"  # no force: the forget lifted the cooldown
    assert {sid for sid, _ in present(review.pending(paths)).consumed} == {"ses_1"}
    assert review.history(store)[0]["decision"] == "discarded"


async def test_a_failed_accept_leaves_the_live_memory_and_the_stage(
    store: Store,
    host: FakeOpencode,
    paths: Paths,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await run_pass(store, host, paths, clock) == "succeeded"
    host.consolidate = consolidator("second fact")
    host.add_session("ses_2", title="two", updated=clock.now_ms() - HOUR, turns=[("user", "x")])
    clock.advance(7 * HOUR)
    assert await run_pass(store, host, paths, clock, review=True) == "staged"

    def broken(self: Baseline) -> None:
        raise BaselineError("disk full")

    with monkeypatch.context() as patch:  # (undo() would drop the test's MEMORYD_HOME too)
        patch.setattr(Baseline, "reset", broken)
        with pytest.raises(BaselineError):
            review.accept(store, Settings(review=True), paths)
        assert "first fact" in (paths.memories / "MEMORY.md").read_text()
        assert "first fact" in block(paths)
        assert review.pending(paths) is not None
        assert present(store.phase2.phase2_job())["status"] == "pending"
    review.accept(store, Settings(review=True), paths)
    assert "second fact" in block(paths)
