"""Agent edits waiting for the user: a host session's change to memory never goes live by itself.

When :mod:`memoryd.write.agent_edits` finds that a change of the agent-owned files came from a
host session's tool call, :func:`stage` keeps the changed files and what memoryd saw (the
session, its title, the tool, its input, the times compared) in ``<data>/review/agent-edit/``,
outside the memory folder, the way review mode stages a consolidation; the caller then rolls the
folder back to the validated copy, so no turn sees the edit. :func:`accept` makes the edit the
validated copy and the baseline's version of those files, as an accepted consolidation does;
:func:`reject` drops it. Both decisions join the review history.

A second change while one waits joins it (files merged, the newer bytes win, every writer kept),
so the user decides once. What is applied on accept is the staged files over the validated copy
*as it is then*: a consolidation that ran meanwhile keeps every file the edit did not touch.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import shutil
import stat
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memoryd.errors import BaselineError, PathError, ReviewError
from memoryd.extensions.codex import export_codex
from memoryd.folder import rollback
from memoryd.folder.audit import is_agent_owned
from memoryd.folder.baseline_proc import open_baseline
from memoryd.folder.validated import ValidatedMemory
from memoryd.fsutil import atomic_write, read_json_object, read_regular
from memoryd.paths import Paths
from memoryd.read.block import sync_block
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.keys import REVIEW_HISTORY
from memoryd.tuning import REVIEW_HISTORY_MAX, REVIEW_REASON_MAX_CHARS
from memoryd.write import review

log = logging.getLogger(__name__)

META = "meta.json"
FILES = "files"
WORKER = "memoryd-review-edit"
ADDED, MODIFIED, REMOVED = "added", "modified", "removed"
KIND = "agent_edit"  # review-history entries about agent edits


def call_key(writer: dict[str, Any]) -> str:
    """One tool call, across stagings and decisions: evidence counts once."""
    which = writer.get("call_id") or writer.get("part_id") or writer.get("at")
    return f"{writer.get('session_id')}:{which}"


@dataclass(frozen=True)
class StagedEdit:
    """A change of the agent-owned files that a host session's tool call made, held back."""

    staged_at: int
    files: dict[str, str]  # relpath -> added | modified | removed (against the validated copy)
    writers: list[dict[str, Any]]  # the tool calls that named the folder (see agent_edits.Writer)
    seen: list[dict[str, Any]] = field(default_factory=list)  # per staging: times, files, mtimes

    @property
    def sessions(self) -> list[str]:
        return list(dict.fromkeys(str(w.get("session_id")) for w in self.writers))


def _area(paths: Paths) -> Path:
    return paths.staged_edit


def pending(paths: Paths) -> StagedEdit | None:
    """The staged agent edit, or ``None``; a half-written or damaged one counts as none."""
    try:
        data = read_json_object(_area(paths) / META, ReviewError)
    except (ReviewError, PathError):
        return None
    try:
        files = {str(k): str(v) for k, v in data["files"].items()}
        writers = [dict(w) for w in data["writers"] if isinstance(w, dict)]
        seen = [dict(s) for s in data.get("seen", []) if isinstance(s, dict)]
        return StagedEdit(int(data["staged_at"]), files, writers, seen)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def staged_changes(paths: Paths, edit: StagedEdit) -> dict[str, bytes | None]:
    """relpath -> the bytes the edit wrote (``None``: it removed the file)."""
    out: dict[str, bytes | None] = {}
    for rel, kind in edit.files.items():
        if kind == REMOVED:
            out[rel] = None
            continue
        data = read_regular(_area(paths) / FILES / rel)
        if data is not None:
            out[rel] = data
    return out


def stage(
    paths: Paths,
    staged_at: int,
    changed: dict[str, bytes | None],
    base: dict[str, bytes],
    writers: list[dict[str, Any]],
    seen: dict[str, Any],
) -> StagedEdit:
    """Keep ``changed`` (relpath -> bytes, ``None`` = removed) for the user; merges with a waiting one."""
    old = pending(paths)
    merged: dict[str, bytes | None] = staged_changes(paths, old) if old else {}
    merged.update({rel: data for rel, data in changed.items() if is_agent_owned(rel)})
    kinds = {
        rel: REMOVED if data is None else MODIFIED if rel in base else ADDED
        for rel, data in sorted(merged.items())
    }
    keys = {
        (w.get("session_id"), w.get("call_id"), w.get("tool")) for w in (old.writers if old else [])
    }
    fresh = [
        w for w in writers if (w.get("session_id"), w.get("call_id"), w.get("tool")) not in keys
    ]
    edit = StagedEdit(
        staged_at=old.staged_at if old else staged_at,
        files=kinds,
        writers=[*(old.writers if old else []), *fresh],
        seen=[*(old.seen if old else []), seen],
    )
    paths.ensure_dir(paths.review_dir)
    tmp = Path(tempfile.mkdtemp(prefix=".agent-edit-", dir=paths.review_dir))
    try:
        for rel, data in merged.items():
            if data is not None:
                target = tmp / FILES / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(target, data)
        atomic_write(tmp / META, json.dumps(asdict(edit), sort_keys=True, indent=1))
        discard(paths)
        os.rename(tmp, _area(paths))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return edit


def discard(paths: Paths) -> bool:
    target = _area(paths)
    if not os.path.lexists(target):
        return False
    if target.is_symlink() or not stat.S_ISDIR(os.lstat(target).st_mode):
        target.unlink()
    else:
        shutil.rmtree(target)
    return True


def after_accept(paths: Paths, edit: StagedEdit) -> dict[str, bytes]:
    """The validated copy as accepting ``edit`` would leave it."""
    new = dict(rollback.validated_files(paths))
    for rel, data in staged_changes(paths, edit).items():
        if data is None:
            new.pop(rel, None)
        else:
            new[rel] = data
    return new


def diff_text(paths: Paths, edit: StagedEdit) -> str:
    """Unified diff of what turns see now (``a/``) against what they would see after accepting."""
    live, new = rollback.validated_files(paths), after_accept(paths, edit)
    out: list[str] = []
    for rel in sorted(set(live) | set(new)):
        a = live.get(rel, b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        b = new.get(rel, b"").decode("utf-8", errors="replace").splitlines(keepends=True)
        if a == b:
            continue
        lines = difflib.unified_diff(
            a,
            b,
            fromfile=f"a/{rel}" if rel in live else "/dev/null",
            tofile=f"b/{rel}" if rel in new else "/dev/null",
        )
        out.extend(line if line.endswith("\n") else line + "\n" for line in lines)
    return "".join(out)


def _lease(store: Store) -> tuple[str | None, Any]:
    """Hold the consolidation lease while the folder and the baseline change (as review does).

    A failure backoff refuses the claim, but then nobody else can claim it either: go ahead.
    """
    before = store.phase2.phase2_job()
    claim = store.phase2.claim_phase2(worker_id=WORKER, ignore_cooldown=True)
    if claim.claimed and claim.token is not None:
        return claim.token, before
    if claim.status == "skipped_backoff":
        return None, before
    raise ReviewError(f"the consolidation job is busy ({claim.status}); try again shortly")


def _release(store: Store, token: str | None, before: Any) -> None:
    """Give the lease back exactly as it was: accepting an edit is not a consolidation."""
    if token is None:
        return
    store.phase2.release_phase2(
        token,
        before["last_error"] if before is not None else None,
        status=before["status"] if before is not None else "pending",
    )


def _reset_baseline(paths: Paths, new: dict[str, bytes]) -> None:
    """The baseline takes the accepted agent files; every input stays as it was in it, so what
    arrived since the last consolidation is still a change next time."""
    baseline = open_baseline(paths.baseline_git, paths.memories)
    try:
        old = baseline.head_files()
    except BaselineError:
        return  # no baseline yet: the first consolidation makes one from the folder
    live = review._tracked_files(paths.memories)
    hold: dict[str, tuple[bool, bytes] | None] = {}
    for rel in set(old) | set(live) | set(new):
        want = new.get(rel) if is_agent_owned(rel) else old.get(rel)
        if live.get(rel) != want:  # files equal to the worktree are read from it (modes kept)
            hold[rel] = None if want is None else (False, want)
    baseline.reset(hold)


def accept(store: Store, settings: Settings, paths: Paths) -> dict[str, Any]:
    """Make the staged agent edit the validated copy and the baseline; re-render the block."""
    edit = pending(paths)
    if edit is None:
        raise ReviewError("no agent edit is waiting for review")
    token, before = _lease(store)
    try:
        new = after_accept(paths, edit)
        _put_validated(paths, store, edit, new)
        _reset_baseline(paths, new)  # before the record: a failure leaves the edit staged
        ValidatedMemory(paths).record(new, source="an accepted agent edit")
        if rollback.agent_files(paths.memories) == new:
            rollback.judged(paths)  # otherwise another change waits in the folder: judged later
    finally:
        _release(store, token, before)
    discard(paths)
    entry = _entry(edit, "accepted", store.clock.now_ms())
    _record(store, entry)
    try:
        sync_block(paths, settings)
    except PathError as exc:
        log.warning("could not re-render the memory block after accepting: %s", exc)
    export_codex(settings, paths.memories)
    return entry


def _put_validated(paths: Paths, store: Store, edit: StagedEdit, new: dict[str, bytes]) -> None:
    """Write the edit's files into the folder; put them back and refuse when it does not validate."""
    clock = store.clock
    before = rollback.agent_files(paths.memories)
    touched = {rel: new.get(rel) for rel in edit.files}
    rollback.put_files(paths, clock, touched)
    problems = rollback.workspace(paths, clock).validate()
    if problems:
        rollback.put_files(paths, clock, {rel: before.get(rel) for rel in touched})
        raise ReviewError(
            "the staged agent edit does not validate ("
            + "; ".join(problems)
            + "); it stays staged until you reject it"
        )


def reject(store: Store, paths: Paths, reason: str | None) -> dict[str, Any]:
    """Drop the staged agent edit; the folder already holds the validated copy."""
    edit = pending(paths)
    if edit is None:
        raise ReviewError("no agent edit is waiting for review")
    discard(paths)
    entry = _entry(edit, "rejected", store.clock.now_ms())
    entry["reason"] = " ".join((reason or "").split())[:REVIEW_REASON_MAX_CHARS] or None
    _record(store, entry)
    return entry


def _entry(edit: StagedEdit, decision: str, at: int) -> dict[str, Any]:
    return {
        "decision": decision,
        "kind": KIND,
        "at": at,
        "staged_at": edit.staged_at,
        "sessions": edit.sessions,
        "files": sorted(edit.files),
        "calls": sorted({call_key(w) for w in edit.writers}),
    }


def used_calls(store: Store, waiting: StagedEdit | None) -> set[str]:
    """Tool calls already shown to the user (waiting, accepted or rejected)."""
    used = {call_key(w) for w in (waiting.writers if waiting else [])}
    for e in review.history(store):
        if e.get("kind") == KIND and isinstance(e.get("calls"), list):
            used.update(str(c) for c in e["calls"])
    return used


def _record(store: Store, entry: dict[str, Any]) -> None:
    """The review history both kinds of staged item share (the Review page lists it)."""
    raw = store.ledger.get_state(REVIEW_HISTORY)
    history = raw if isinstance(raw, list) else []
    store.ledger.put_state(REVIEW_HISTORY, [entry, *history][:REVIEW_HISTORY_MAX])
