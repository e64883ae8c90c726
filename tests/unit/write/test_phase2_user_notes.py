"""A note the user adds or forgets while a consolidation runs is the user's, not the agent's.

Found by the chaos bench (scenario 4): ``note add`` during a run was deleted by the
post-run restore of protected files (and the run failed, blaming the consolidator), and a note
forgotten during a run came back. Either way the next consolidation must see the change in its
diff, so the baseline may not absorb it either.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd import tools
from memoryd.clock import ManualClock
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.write.phase2 import Phase2Status
from tests.fakehost import FakeOpencode, write_memory
from tests.unit.write.test_phase2 import extracted

pytestmark = pytest.mark.anyio


def diff_of(p2: object) -> list[str]:
    return [f"{c.status} {c.path}" for c in p2.baseline().diff().changes]  # type: ignore[attr-defined]


async def test_a_note_added_during_a_run_stays_and_reaches_the_next_diff(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    added: list[str] = []

    def user_adds_a_note(root: Path) -> None:
        write_memory(root)
        note = tools.memory_add_note(root, "we deploy on Fridays", clock=clock, store=store)
        added.append(note.path)

    host = FakeOpencode(consolidate=user_adds_a_note)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.SUCCEEDED, result.detail
    assert (paths.memories / added[0]).read_text().endswith("we deploy on Fridays\n")
    assert diff_of(p2) == [f"A {added[0]}"]  # the next consolidation is shown the note


async def test_a_note_forgotten_during_a_run_stays_forgotten(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    note = tools.memory_add_note(paths.memories, "we use tabs", clock=clock, store=store)
    clock.advance(1000)
    host = FakeOpencode(consolidate=write_memory)
    p2 = await extracted(store, host, paths, clock)
    assert (await p2.run()).status is Phase2Status.SUCCEEDED  # the note is in the baseline now

    def user_forgets_it(root: Path) -> None:
        write_memory(root)
        (root / "MEMORY.md").write_text("# Memory\n\nrewritten\n")
        tools.memory_forget(store, root, note=note.path)

    host.consolidate = user_forgets_it
    tools.memory_add_note(paths.memories, "we use spaces now", clock=clock, store=store)
    clock.advance(1000)
    result = await p2.run(force=True)  # past the cooldown
    assert result.status is Phase2Status.SUCCEEDED, result.detail
    assert not (paths.memories / note.path).exists()
    assert diff_of(p2) == [f"D {note.path}"]  # the next consolidation forgets it


async def test_the_agent_still_may_not_touch_a_note_added_during_its_run(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    added: list[str] = []

    def user_adds_agent_edits(root: Path) -> None:
        write_memory(root)
        note = tools.memory_add_note(root, "keep this", clock=clock, store=store)
        added.append(note.path)
        (root / note.path).write_text("the agent rewrote the user's note\n")

    host = FakeOpencode(consolidate=user_adds_agent_edits)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.FAILED
    assert (paths.memories / added[0]).read_text().endswith("keep this\n")
