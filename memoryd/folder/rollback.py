"""Keep the memory folder at a validated state around consolidation runs.

* :func:`agent_files` reads what the consolidation agent owns (``MEMORY.md``, the summaries,
  ``skills/``) from the live folder.
* :func:`restore` rolls those files back to the last validated copy (:mod:`memoryd.folder.validated`),
  or, when none was ever recorded, to the git baseline: after a failed or aborted run, and after
  a run that was killed (a marker file outlives the process, :func:`mark_running`).
* :func:`settle` is the cheap periodic step outside runs: finish the rollback of a killed run, or
  notice a change of the agent-owned files (:func:`seen_change`). It adopts nothing: a change is
  judged by :mod:`memoryd.write.agent_edits`, which asks opencode whether a session's tool call
  made it; only a hand edit made outside any session is adopted (:func:`adopt`) once it
  validates, so a user's own correction reaches the next turn without waiting for a
  consolidation.

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
from dataclasses import dataclass
from pathlib import Path

from memoryd.clock import Clock
from memoryd.errors import BaselineError, PathError
from memoryd.folder.audit import holds_agent_owned, is_agent_owned
from memoryd.folder.baseline_proc import BaselineLike, open_baseline
from memoryd.folder.layout import is_tracked
from memoryd.folder.validated import ValidatedMemory
from memoryd.folder.workspace import LAYOUT_DIRS, Workspace
from memoryd.fsutil import atomic_write, read_json_quiet, read_regular
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.tuning import RACY_WINDOW_NS

log = logging.getLogger(__name__)

SIGNATURE_FILE = "folder.sig.json"  # the old name, inside the validated copy (see migrate)
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


def _sig_of(entries: list[tuple[str, os.stat_result]]) -> list[list[object]]:
    return [[rel, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode] for rel, st in entries]


def _signature(root: Path) -> list[list[object]]:
    return _sig_of(_owned_entries(root))


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


def put_files(paths: Paths, clock: Clock, files: dict[str, bytes | None]) -> None:
    """Write (or, for ``None``, remove) agent-owned files in the folder, never through a link."""
    ws = workspace(paths, clock)
    for rel, data in sorted(files.items()):
        if not is_agent_owned(rel):
            continue
        if data is None:
            ws.remove_file(rel)
            _prune_empty_parents(paths.memories, rel)
        else:
            ws.write_file(rel, data)


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
    judged(paths)
    return changed


@dataclass(frozen=True)
class FolderChange:
    """The agent-owned files that differ from the validated copy, as memoryd saw them."""

    live: dict[str, bytes]  # every agent-owned file as it stands
    changed: dict[str, bytes | None]  # relpath -> its new bytes, ``None`` when it was removed
    base: dict[str, bytes]  # the validated copy it differs from
    mtimes_ms: dict[str, int]  # the changed files still present -> their mtime (wall ms)
    judged_at_ms: int | None  # wall ms of the folder's last check, when known


def wall_ms() -> int:
    """File times and opencode's timestamps are wall time, so this is too (not the Clock)."""
    return time.time_ns() // 1_000_000


def judged(paths: Paths) -> None:
    """Remember the folder as it stands as decided: the next look costs a few ``lstat`` calls."""
    sig = _signature(paths.memories)
    newest = max((int(s[2]) for s in sig), default=0)  # type: ignore[call-overload]
    now = time.time_ns()
    # Too fresh to trust (a same-tick write keeps its stat): compare content again next time.
    trusted = now - newest >= RACY_WINDOW_NS
    paths.ensure_dir(paths.folder_signature.parent)
    body = {"at": now // 1_000_000, "sig": sig if trusted else None}
    atomic_write(paths.folder_signature, json.dumps(body).encode("utf-8"))


def _read_signature(paths: Paths) -> tuple[int | None, list[list[object]] | None]:
    """(when the folder was last judged, its signature then); the older bare-list form is stale."""
    loaded = read_json_quiet(paths.folder_signature)
    if not isinstance(loaded, dict):
        return None, None
    at, sig = loaded.get("at"), loaded.get("sig")
    return (at if isinstance(at, int) else None), (sig if isinstance(sig, list) else None)


def is_judged(paths: Paths) -> bool:
    """Whether the agent-owned files are exactly as they were last judged (stat data only)."""
    _at, sig = _read_signature(paths)
    return sig is not None and sig == _signature(paths.memories)


def seen_change(paths: Paths) -> FolderChange | None:
    """What changed in the agent-owned files since they were last judged, or ``None``.

    Unchanged stat data ends it after a few ``lstat`` calls; otherwise the files are compared
    with the validated copy, and a folder equal to it is judged at once (a touch, a rewrite of
    the same bytes, a rollback), so only a real difference is ever handed on.
    """
    at, saved = _read_signature(paths)
    entries = _owned_entries(paths.memories)
    if saved is not None and saved == _sig_of(entries):
        return None
    live = agent_files(paths.memories)
    base = validated_files(paths)
    changed = {
        rel: live.get(rel)
        for rel in sorted(set(live) | set(base))
        if live.get(rel) != base.get(rel)
    }
    if not changed:
        judged(paths)
        return None
    mtimes = {rel: st.st_mtime_ns // 1_000_000 for rel, st in entries if rel in changed}
    return FolderChange(live, changed, base, mtimes, at)


def adopt(paths: Paths, clock: Clock, change: FolderChange) -> bool:
    """A hand edit: it becomes the validated state once it validates; judged either way.

    Only the bytes that were checked are adopted: a folder that moved on meanwhile is left for
    the next look, which judges the newer change afresh.
    """
    if agent_files(paths.memories) != change.live:
        return False
    if workspace(paths, clock).validate():
        judged(paths)  # not valid as it stands: turns keep the validated copy
        return False
    return record(paths, source="the memory folder (hand edit)")


def record_judged(paths: Paths, *, source: str) -> bool:
    """Record the folder only when it holds no change still to be judged (before a run)."""
    if seen_change(paths) is not None:
        log.warning("the memory folder changed since it was checked; not recording it before a run")
        return False
    return record(paths, source=source)


def mark_running(paths: Paths) -> None:
    paths.ensure_dir(paths.phase2_running.parent)
    atomic_write(paths.phase2_running, json.dumps({"pid": os.getpid()}).encode("utf-8"))


def clear_running(paths: Paths) -> None:
    paths.phase2_running.unlink(missing_ok=True)


def interrupted(paths: Paths) -> bool:
    return os.path.lexists(paths.phase2_running)


def lease_live(store: Store, clock: Clock) -> bool:
    job = store.phase2.phase2_job()
    return (
        job is not None
        and job["status"] == "running"
        and (job["lease_until"] or 0) > clock.now_ms()
    )


ROLLED_BACK = "rolled back"
CHANGED = "changed"  # a change waits for memoryd.write.agent_edits to judge it with the host


def look(paths: Paths, store: Store, clock: Clock) -> tuple[str | None, FolderChange | None]:
    """Outside any run: finish a killed run's rollback, or find a change still to be judged."""
    if lease_live(store, clock):
        return None, None  # a consolidation owns the folder right now
    migrate(paths)
    if not paths.memories.is_dir():
        return None, None
    # A killed memoryd's consolidator may still be running in a user's opencode until its helper
    # session is deleted; whatever it writes meanwhile is rolled back, never adopted.
    agent_alive = store.owners.orphaned_helpers_of_kind(CONSOLIDATE_HELPER) > 0
    if interrupted(paths):
        restore(paths, clock)
        if not agent_alive:
            clear_running(paths)
        judged(paths)
        return ROLLED_BACK, None
    if agent_alive:
        return None, None
    change = seen_change(paths)
    return (CHANGED, change) if change is not None else (None, None)


def settle(paths: Paths, store: Store, clock: Clock) -> str | None:
    """The tick's local step: ``"rolled back"``, ``"changed"`` (nothing adopted yet) or ``None``.

    A change is never adopted here: whether a host session's tool call made it is for
    :func:`memoryd.write.agent_edits.reconcile` to find out, with opencode's help.
    """
    return look(paths, store, clock)[0]
