"""Operations that change what memoryd remembers as a whole (reset), shared by the CLI and MCP."""

from __future__ import annotations

import shutil
from pathlib import Path

from memoryd.errors import PathError
from memoryd.folder.validated import ValidatedMemory
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.write import review


def _clear_folder(root: Path) -> None:
    """Delete everything inside ``root`` without following links; keep ``root`` itself."""
    if root.is_symlink():
        raise PathError(root, "is a symlink; refusing to clear it")
    if not root.exists():
        return
    for entry in root.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            entry.unlink()
        else:
            shutil.rmtree(entry)


def reset_memory(store: Store, paths: Paths) -> None:
    """Forget everything: stage-1 outputs, jobs, the memory folder, its baseline, the notes
    waiting for review and the validated copy the block is rendered from.

    Refused (:class:`LeaseHeld`) while a consolidation holds the lease: its agent is writing the
    folder. A cooldown marker is left so the next pass does not rebuild the folder from nothing.
    The validated copy is recorded empty, so the next turn sees no memory rather than the old
    summary, and a later rollback restores to nothing instead of to what was forgotten.
    """
    store.phase2.reset_memory_data()
    _clear_folder(paths.memories)
    _clear_folder(paths.proposed_notes)
    validated = ValidatedMemory(paths)
    validated.record({}, source="memoryd reset")
    paths.folder_signature.unlink(missing_ok=True)
    review.discard(paths)
    if paths.baseline_git.is_symlink():
        paths.baseline_git.unlink()
    elif paths.baseline_git.exists():
        shutil.rmtree(paths.baseline_git)
