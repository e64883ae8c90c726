"""The rollback's folder signature lives in memoryd's state, never in the memory folder."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.clock import ManualClock
from memoryd.folder import rollback
from memoryd.folder.confine import sweep
from memoryd.folder.validated import ValidatedMemory
from memoryd.paths import Paths
from tests.conftest import T0

OLD = 1_700_000_000  # seconds: far from "now", so the signature is never racy


def _validated_folder(paths: Paths) -> None:
    root = paths.memories
    root.mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text("# Memory\n- validated fact\n")
    (root / "memory_summary.md").write_text("v1\n- validated summary\n")
    for name in ("MEMORY.md", "memory_summary.md"):
        os.utime(root / name, (OLD, OLD))
    rollback.record(paths, source="a validated run")


def test_a_rollback_writes_nothing_foreign_into_the_folder(paths: Paths) -> None:
    _validated_folder(paths)
    (paths.memories / "memory_summary.md").write_text("v1\n- half-written run\n")
    changed = rollback.restore(paths, ManualClock(T0))
    assert changed == ["memory_summary.md"]
    assert not os.path.lexists(paths.memories / rollback.SIGNATURE_FILE)
    assert sweep(paths.memories) == []
    # the signature is state, kept where paths.py says, and not part of the validated copy
    assert paths.folder_signature.is_file()
    assert not paths.folder_signature.is_relative_to(paths.memories)
    files = ValidatedMemory(paths).files() or {}
    assert set(files) == {"MEMORY.md", "memory_summary.md"}


def test_an_old_signature_is_migrated_silently(paths: Paths) -> None:
    """What earlier versions left: the signature inside the validated copy, and a copy of it that
    a rollback wrote into the folder. Both go without a sweep ever reporting them."""
    _validated_folder(paths)
    old_state = paths.validated_memory / rollback.SIGNATURE_FILE
    old_state.write_text("[]")
    in_folder = paths.memories / rollback.SIGNATURE_FILE
    in_folder.write_text("[]")
    clock = ManualClock(T0)
    rollback.restore(paths, clock)
    assert not os.path.lexists(in_folder)
    assert not os.path.lexists(old_state)
    assert sweep(paths.memories) == []
    assert (paths.memories / "memory_summary.md").read_text() == "v1\n- validated summary\n"


def test_the_migration_leaves_a_planted_folder_of_that_name_to_the_sweep(paths: Paths) -> None:
    _validated_folder(paths)
    planted = paths.memories / rollback.SIGNATURE_FILE
    planted.mkdir()
    (planted / "x").write_text("y")
    rollback.restore(paths, ManualClock(T0))
    assert sweep(paths.memories) == [f"{rollback.SIGNATURE_FILE}/"]


def test_reset_drops_the_signature(paths: Paths, tmp_path: Path) -> None:
    from memoryd.store import Store
    from memoryd.write.reset import reset_memory

    _validated_folder(paths)
    assert paths.folder_signature.is_file()
    store = Store(paths.db, clock=ManualClock(T0))
    try:
        reset_memory(store, paths)
    finally:
        store.close()
    assert not paths.folder_signature.exists()
