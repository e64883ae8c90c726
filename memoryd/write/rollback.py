"""Keep the memory folder at a validated state around consolidation runs.

* :func:`agent_files` reads what the consolidation agent owns (``MEMORY.md``, the summaries,
  ``skills/``) from the live folder.
* :func:`restore` rolls those files back to the last validated copy (:mod:`memoryd.validated`),
  or, when none was ever recorded, to the git baseline: after a failed or aborted run, and after
  a run that was killed (a marker file outlives the process, :func:`mark_running`).
* :func:`settle` is the cheap periodic step outside runs: finish the rollback of a killed run,
  or adopt a hand edit of the folder into the validated copy once it validates, so a user's own
  correction reaches the next turn without waiting for a consolidation.

The folder's stat signature (what makes the no-change check a few ``lstat`` calls) is memoryd's
state, kept at :attr:`~memoryd.paths.Paths.folder_signature`. Earlier versions kept it inside
the validated copy, from where a rollback copied it into the folder as a foreign entry;
:func:`migrate` removes both leftovers without a sweep ever reporting them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import time
from pathlib import Path

from memoryd.clock import Clock
from memoryd.errors import BaselineError, PathError
from memoryd.fsutil import atomic_write, read_json_quiet, read_regular
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.validated import ValidatedMemory
from memoryd.workspace import LAYOUT_DIRS, Workspace, holds_agent_owned, is_agent_owned, is_tracked
from memoryd.write.baseline_proc import BaselineLike, open_baseline

log = logging.getLogger(__name__)

SIGNATURE_FILE = "folder.sig.json"  # the old name, inside the validated copy (see migrate)
RACY_WINDOW_NS = 2_000_000_000
CONSOLIDATE_HELPER = "consolidate"  # the kind phase 2 records its helper session under


def workspace(paths: Paths, clock: Clock) -> Workspace:
    return Workspace(paths.memories, clock=clock)


def baseline(paths: Paths) -> BaselineLike:
    return open_baseline(paths.baseline_git, paths.memories)


def _owned_entries(root: Path) -> list[tuple[str, os.stat_result]]:
    """Regular agent-owned files under ``root`` (links and dot entries are never memory)."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [(root, "")]
    while stack:
        folder, rel = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            relpath = f"{rel}{entry.name}"
            if not is_tracked(relpath):
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if holds_agent_owned(relpath):
                    stack.append((Path(entry.path), relpath + "/"))
            elif stat.S_ISREG(st.st_mode) and is_agent_owned(relpath):
                found.append((relpath, st))
    return sorted(found, key=lambda item: item[0])


def agent_files(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for relpath, _st in _owned_entries(root):
        try:
            data = read_regular(root / relpath)
        except PathError:
            continue
        if data is not None:
            out[relpath] = data
    return out


def _signature(root: Path) -> list[list[object]]:
    return [
        [rel, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode] for rel, st in _owned_entries(root)
    ]


def migrate(paths: Paths) -> None:
    """Remove the signature earlier versions left in the validated copy and, through a rollback,
    in the folder (only a file or link of that name at the root; anything else is the sweep's)."""
    for old in (paths.validated_memory / SIGNATURE_FILE, paths.memories / SIGNATURE_FILE):
        try:
            st = os.lstat(old)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                os.unlink(old)
                log.info("removed %s (the folder signature now lives in %s)", old, paths.state_dir)


def validated_files(paths: Paths) -> dict[str, bytes]:
    """The rollback target: the validated copy, else the baseline's agent-owned files.

    Only agent-owned paths: nothing else in the copy may ever be written into the folder.
    """
    migrate(paths)
    files = ValidatedMemory(paths).files()
    if files is not None:
        return {rel: data for rel, data in files.items() if is_agent_owned(rel)}
    try:
        head = baseline(paths).head_files()
    except BaselineError as exc:
        log.warning("no validated memory and no readable baseline (%s); rolling back to none", exc)
        return {}
    return {rel: data for rel, data in head.items() if is_agent_owned(rel)}


def restore(paths: Paths, clock: Clock) -> list[str]:
    """Put the agent-owned files back to the last validated state; returns what changed."""
    ws = workspace(paths, clock)
    target = validated_files(paths)
    current = agent_files(paths.memories)
    changed: list[str] = []
    for rel in sorted(set(current) - set(target)):
        ws.remove_file(rel)
        _prune_empty_parents(paths.memories, rel)
        changed.append(rel)
    for rel, data in sorted(target.items()):
        if current.get(rel) != data:
            ws.write_file(rel, data)
            changed.append(rel)
    if changed:
        log.warning(
            "memory folder rolled back to the last validated state: %s", ", ".join(changed[:20])
        )
    return sorted(changed)


def _prune_empty_parents(root: Path, rel: str) -> None:
    """Drop folders a rolled-back file leaves empty (``skills/<name>/``), never the layout's own."""
    parts = rel.split("/")[:-1]
    while parts and "/".join(parts) not in LAYOUT_DIRS:
        try:
            (root / "/".join(parts)).rmdir()
        except OSError:
            return
        parts.pop()


def record(paths: Paths, *, source: str) -> bool:
    """Make the folder's agent-owned files the validated state (after a validated run)."""
    files = agent_files(paths.memories)
    changed = ValidatedMemory(paths).record(files, source=source)
    _save_signature(paths)
    return changed


def _save_signature(paths: Paths) -> None:
    sig = _signature(paths.memories)
    newest = max((int(s[2]) for s in sig), default=0)  # type: ignore[call-overload]
    target = paths.folder_signature
    if time.time_ns() - newest < RACY_WINDOW_NS:
        target.unlink(missing_ok=True)  # too fresh to trust: look again next time
        return
    paths.ensure_dir(target.parent)
    atomic_write(target, json.dumps(sig).encode("utf-8"))


def mark_running(paths: Paths) -> None:
    paths.ensure_dir(paths.phase2_running.parent)
    atomic_write(paths.phase2_running, json.dumps({"pid": os.getpid()}).encode("utf-8"))


def clear_running(paths: Paths) -> None:
    paths.phase2_running.unlink(missing_ok=True)


def interrupted(paths: Paths) -> bool:
    return os.path.lexists(paths.phase2_running)


def lease_live(store: Store, clock: Clock) -> bool:
    job = store.phase2_job()
    return (
        job is not None
        and job["status"] == "running"
        and (job["lease_until"] or 0) > clock.now_ms()
    )


def settle(paths: Paths, store: Store, clock: Clock) -> str | None:
    """Outside any run: finish a killed run's rollback, or adopt a validated hand edit.

    Returns what it did (``"rolled back"``, ``"adopted"``) or ``None``.
    """
    if lease_live(store, clock):
        return None  # a consolidation owns the folder right now
    migrate(paths)
    ws = workspace(paths, clock)
    if not ws.root.is_dir():
        return None
    # A killed memoryd's consolidator may still be running in a user's opencode until its helper
    # session is deleted; whatever it writes meanwhile is rolled back, never adopted.
    agent_alive = store.orphaned_helpers_of_kind(CONSOLIDATE_HELPER) > 0
    if interrupted(paths):
        restore(paths, clock)
        if not agent_alive:
            clear_running(paths)
        _save_signature(paths)
        return "rolled back"
    if agent_alive:
        return None
    saved = _read_signature(paths)
    if saved is not None and saved == _signature(paths.memories):
        return None
    if ws.validate():
        _save_signature(paths)
        return None  # not valid as it stands: turns keep the validated copy
    if record(paths, source="the memory folder (hand edit)"):
        return "adopted"
    return None


def _read_signature(paths: Paths) -> list[list[object]] | None:
    loaded = read_json_quiet(paths.folder_signature)
    return loaded if isinstance(loaded, list) else None
