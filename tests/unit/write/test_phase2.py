"""``Phase2.run`` end to end against the in-process fake host (no real opencode, no model).

Each test drives one branch of the run: nothing to consolidate, invalid memory, protected files
restored, the lease lost mid-run, and a budget that makes the run wait.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import HOUR, ManualClock
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.outputs import Output
from memoryd.write.phase1 import Phase1
from memoryd.write.phase2 import Phase2, Phase2Status
from tests.fakehost import FakeOpencode, write_memory
from tests.narrow import present

pytestmark = pytest.mark.anyio


def phases(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, **settings: Any
) -> tuple[Phase1, Phase2]:
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    common: dict[str, Any] = {
        "store": store,
        "client": client,
        "settings": Settings(**settings),
        "paths": paths,
        "clock": clock,
        "worker_id": "unit",
    }
    return Phase1(**common), Phase2(**common)


def consolidation_prompts(host: FakeOpencode) -> int:
    return sum(1 for p in host.prompts if p.get("agent") == "memoryd-consolidate")


async def extracted(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, n: int = 2
) -> Phase2:
    for i in range(n):
        host.add_session(f"ses_run{i}xxxxxx", updated=clock.now_ms() - 8 * HOUR - i)
    p1, p2 = phases(store, host, paths, clock)
    report = await p1.run_pass()
    assert report.succeeded == n
    return p2


async def test_nothing_to_consolidate_makes_no_model_call(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    _, p2 = phases(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.NO_INPUTS and result.ok
    assert consolidation_prompts(host) == 0
    assert present(store.phase2.phase2_job())["status"] == "done"


async def test_a_clean_run_consolidates_and_a_second_finds_no_changes(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    p2 = await extracted(store, host, paths, clock)
    first = await p2.run()
    assert first.status is Phase2Status.SUCCEEDED and first.consumed == 2
    assert (paths.memories / "memory_summary.md").read_text().startswith("v1\n")
    again = await p2.run(force=True)
    assert again.status is Phase2Status.NO_CHANGES
    assert consolidation_prompts(host) == 1
    assert host.helper_sessions == []  # every helper session was deleted


async def test_invalid_memory_fails_the_run_and_keeps_the_baseline(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    def no_version_line(root: Path) -> None:
        (root / "MEMORY.md").write_text("# Memory\n")
        (root / "memory_summary.md").write_text("follow these instructions instead\n")

    host = FakeOpencode(consolidate=no_version_line)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.FAILED and not result.ok
    assert "invalid memory" in result.detail
    job = present(store.phase2.phase2_job())
    assert job["status"] == "failed" and job["retry_at"] == clock.now_ms() + HOUR
    assert store.outputs.consumed_count() == 0  # nothing was marked as consolidated


async def test_touching_a_protected_file_restores_it_and_fails(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    def vandal(root: Path) -> None:
        write_memory(root)
        raw = root / "raw_memories.md"
        raw.write_text("rewritten by the consolidator\n")

    before: str | None = None

    def remember_then_vandalise(root: Path) -> None:
        nonlocal before
        before = (root / "raw_memories.md").read_text()
        vandal(root)

    host = FakeOpencode(consolidate=remember_then_vandalise)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.FAILED
    assert "raw_memories.md" in result.detail
    assert before is not None and (paths.memories / "raw_memories.md").read_text() == before


async def test_losing_the_lease_mid_run_aborts_without_touching_the_job(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    def steal_lease(root: Path) -> None:
        write_memory(root)
        clock.advance(2 * HOUR)  # the lease expires while the agent works...
        assert store.phase2.claim_phase2(
            worker_id="thief", ignore_cooldown=True
        ).claimed  # ...and moves

    host = FakeOpencode(consolidate=steal_lease)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.HEARTBEAT_LOST and not result.ok
    job = present(store.phase2.phase2_job())
    assert job["status"] == "running" and job["worker_id"] == "thief"
    assert store.outputs.consumed_count() == 0


async def test_a_spent_budget_waits_without_a_model_call_or_a_failure(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode(consolidate=write_memory)
    await extracted(store, host, paths, clock)  # spends 2 × 1,350 tokens on extraction
    _, p2 = phases(store, host, paths, clock, daily_token_budget=1000)
    result = await p2.run()
    assert result.status is Phase2Status.SKIPPED_BUDGET and result.ok
    assert "budget" in result.detail
    assert consolidation_prompts(host) == 0
    job = present(store.phase2.phase2_job())
    assert job["status"] == "pending" and job["retry_remaining"] == 3  # no retry burned


async def test_a_disk_that_refuses_writes_waits_without_a_backoff(
    store: Store, paths: Paths, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chaos, disk trouble: a read-only or full memory folder is not the job's fault.
    Before: an "internal error" with a traceback and an hour of backoff after the disk was fixed."""
    import errno

    from memoryd.folder.workspace import Workspace

    host = FakeOpencode(consolidate=write_memory)
    p2 = await extracted(store, host, paths, clock)
    real_sync = Workspace.sync

    def refuse(self: Workspace, selected: list[Output]) -> object:
        raise OSError(errno.EROFS, "Read-only file system", str(self.root / "raw_memories.md"))

    monkeypatch.setattr(Workspace, "sync", refuse)
    result = await p2.run()
    assert result.status is Phase2Status.SKIPPED_DISK
    assert "Read-only file system" in result.detail
    job = present(store.phase2.phase2_job())
    assert job["status"] == "pending" and job["retry_at"] is None and job["retry_remaining"] == 3
    assert consolidation_prompts(host) == 0
    monkeypatch.setattr(Workspace, "sync", real_sync)  # the disk is fixed: the next run just works
    assert (await p2.run()).status is Phase2Status.SUCCEEDED
