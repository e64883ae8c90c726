"""Review mode: a validated consolidation waits for a person before it goes live.

With ``review = true`` phase 2 stops one step short of the end. Instead of resetting the baseline
it hands the validated folder to :func:`stage`, which

1. copies every tracked file of the folder (the consolidator's output *and* the inputs it saw)
   into ``<data>/review/staged/tree`` — outside the memory folder, so neither the read path nor a
   later consolidator can see or touch it;
2. puts the live agent-owned files (``MEMORY.md``, the summary, ``skills/``) back as the baseline
   has them, so the block keeps injecting what was live before.

While something is staged, phase 2 does not run (:func:`pending`), so the staged diff stays the
one a person is looking at. :func:`accept` writes the staged agent files into the folder and makes
the staged tree the new baseline (so inputs that arrived after staging still show up as changes
next time); :func:`reject` drops it, records why, and starts the usual cooldown so the same diff is
not re-consolidated on the next pass. Without review mode none of this runs.
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
from typing import TYPE_CHECKING, Any

from memoryd.errors import BaselineError, PathError, ReviewError
from memoryd.extensions.codex import export_codex
from memoryd.extensions.shared import RESOURCES
from memoryd.folder import rollback
from memoryd.folder.audit import is_agent_owned
from memoryd.folder.baseline_proc import open_baseline
from memoryd.folder.layout import AD_HOC_NOTES, EXTENSIONS_DIR, is_tracked
from memoryd.fsutil import atomic_write, read_json_object, read_regular
from memoryd.paths import Paths
from memoryd.read.block import sync_block
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.keys import REVIEW_HISTORY
from memoryd.tuning import REVIEW_HISTORY_MAX, REVIEW_REASON_MAX_CHARS

if TYPE_CHECKING:
    from memoryd.folder.baseline_proc import BaselineLike

log = logging.getLogger(__name__)

STAGED = "staged"
META = "meta.json"
TREE = "tree"
WORKER = "memoryd-review"
SYNC_RESOURCES = f"{EXTENSIONS_DIR}/sync/{RESOURCES}"


@dataclass(frozen=True)
class Staged:
    """What a staged consolidation needs to finish the phase-2 job when it is accepted."""

    staged_at: int
    consumed: list[tuple[str, int]]
    watermark: int
    claimed_input: int | None
    changes: list[str] = field(default_factory=list)


def _staged_dir(paths: Paths) -> Path:
    return paths.review_dir / STAGED


def pending(paths: Paths) -> Staged | None:
    """The staged consolidation, or ``None``; a half-written or damaged stage counts as none."""
    meta = _staged_dir(paths) / META
    try:
        data = read_json_object(meta, ReviewError)
    except (ReviewError, PathError):
        return None
    if not data or not (_staged_dir(paths) / TREE).is_dir():
        return None
    try:
        return Staged(
            staged_at=int(data["staged_at"]),
            consumed=[(str(s), int(w)) for s, w in data["consumed"]],
            watermark=int(data["watermark"]),
            claimed_input=None if data["claimed_input"] is None else int(data["claimed_input"]),
            changes=[str(c) for c in data.get("changes", [])],
        )
    except (KeyError, TypeError, ValueError):
        return None


def _tracked_files(root: Path) -> dict[str, bytes]:
    """Every tracked regular file under ``root`` (links are never followed nor copied)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        dirnames[:] = sorted(
            d
            for d in dirnames
            if is_tracked(f"{rel_dir}/{d}" if rel_dir else d)
            and not os.path.islink(os.path.join(dirpath, d))
        )
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not is_tracked(rel):
                continue
            data = read_regular(Path(dirpath) / name)
            if data is not None:
                out[rel] = data
    return out


def _agent_files(files: dict[str, bytes]) -> dict[str, bytes]:
    return {p: d for p, d in files.items() if is_agent_owned(p)}


def _write_tree(target: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _put_agent_files(root: Path, wanted: dict[str, bytes]) -> None:
    """Make the folder's agent-owned files exactly ``wanted`` (atomic writes, extras removed)."""
    current = _agent_files(_tracked_files(root))
    for rel in sorted(set(current) - set(wanted)):
        (root / rel).unlink(missing_ok=True)
    for rel, data in wanted.items():
        if current.get(rel) != data:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data)


def _live_baseline_files(baseline: BaselineLike) -> dict[str, bytes]:
    try:
        return baseline.head_files()
    except BaselineError:
        return {}  # no baseline commit yet: nothing was live


def stage(paths: Paths, baseline: BaselineLike, staged: Staged) -> None:
    """Move a validated consolidation out of the folder into the review area (file work only)."""
    files = _tracked_files(paths.memories)
    area = paths.review_dir
    paths.ensure_dir(area)
    tmp = Path(tempfile.mkdtemp(prefix=".staged-", dir=area))
    try:
        _write_tree(tmp / TREE, files)
        atomic_write(tmp / META, json.dumps(asdict(staged), sort_keys=True))
        discard(paths)
        os.rename(tmp, _staged_dir(paths))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _put_agent_files(paths.memories, _agent_files(_live_baseline_files(baseline)))
    log.info("consolidation staged for review (%d change(s))", len(staged.changes))


def discard(paths: Paths) -> bool:
    target = _staged_dir(paths)
    if not os.path.lexists(target):
        return False
    if target.is_symlink() or not stat.S_ISDIR(os.lstat(target).st_mode):
        target.unlink()
    else:
        shutil.rmtree(target)
    return True


def staged_agent_files(paths: Paths) -> dict[str, bytes]:
    return _agent_files(_tracked_files(_staged_dir(paths) / TREE))


def live_agent_files(paths: Paths) -> dict[str, bytes]:
    if not paths.memories.is_dir() or paths.memories.is_symlink():
        return {}
    return _agent_files(_tracked_files(paths.memories))


def diff_text(paths: Paths) -> str:
    """Unified diff of the live memory (``a/``) against the staged one (``b/``)."""
    live, new = live_agent_files(paths), staged_agent_files(paths)
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


def _record(store: Store, entry: dict[str, Any]) -> None:
    raw = store.ledger.get_state(REVIEW_HISTORY)
    history = raw if isinstance(raw, list) else []
    store.ledger.put_state(REVIEW_HISTORY, [entry, *history][:REVIEW_HISTORY_MAX])


def history(store: Store) -> list[dict[str, Any]]:
    raw = store.ledger.get_state(REVIEW_HISTORY)
    return [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []


def _claim(store: Store, paths: Paths, staged: Staged) -> str:
    """Take the phase-2 lease, then make sure ``staged`` is still the one waiting.

    Another accept or reject (the CLI and the web page race) may have decided it between our
    read and the claim; acting on it then would lay an empty tree over the live memory.
    """
    before = store.phase2.phase2_job()
    claim = store.phase2.claim_phase2(worker_id=WORKER, ignore_cooldown=True)
    if not claim.claimed or claim.token is None:
        raise ReviewError(f"the consolidation job is busy ({claim.status}); try again shortly")
    now = pending(paths)
    if now is None or now.staged_at != staged.staged_at or not (_staged_dir(paths) / TREE).is_dir():
        # Put the job back as it was: this claim did nothing.
        store.phase2.release_phase2(
            claim.token,
            before["last_error"] if before is not None else None,
            status=before["status"] if before is not None else "pending",
        )
        raise ReviewError("that consolidation was already accepted or rejected")
    return claim.token


def forgotten_in_stage(store: Store, paths: Paths, staged: Staged) -> list[str]:
    """Sessions (and ad hoc notes) the staged memory used that were forgotten since it was staged.

    A forgotten session's text may sit in the staged ``MEMORY.md``; accepting it would bring
    back what the user asked to forget, so such a stage is dropped instead.
    """
    from memoryd.sync.branch import SESSIONS, session_key  # dulwich only when it is needed

    dead = set(store.tombstones.tombstones())
    gone = sorted({sid for sid, _ in staged.consumed} & dead)
    tree = _staged_dir(paths) / TREE
    # Other machines' sessions the consolidator saw as inputs (file names are session keys).
    keys = {session_key(sid): sid for sid in dead}
    resources = tree / SYNC_RESOURCES
    if resources.is_dir() and not resources.is_symlink():
        found = [
            *resources.glob(f"*/{SESSIONS}/*.md"),
            *resources.glob(f"*/projects/*/{SESSIONS}/*.md"),
        ]
        for md in found:
            sid = keys.get(md.name.removesuffix(".md"))
            if sid is not None and sid not in gone:
                gone.append(sid)
    # Ad hoc notes deleted from the live folder since staging (memory_forget(note=...)).
    notes = tree / AD_HOC_NOTES
    if notes.is_dir() and not notes.is_symlink():
        live = paths.memories / AD_HOC_NOTES
        for note in sorted(notes.iterdir()):
            if note.is_file() and not (live / note.name).is_file():
                gone.append(f"{AD_HOC_NOTES}/{note.name}")
    return gone


def drop_if_forgotten(store: Store, paths: Paths) -> bool:
    """Discard the staged consolidation when something it used has been forgotten since.

    Recorded in the review history with the reason; phase 2 then runs again without it (the
    forget's urgent enqueue lifted the cooldown).
    """
    staged = pending(paths)
    if staged is None:
        return False
    gone = forgotten_in_stage(store, paths, staged)
    if not gone:
        return False
    discard(paths)
    shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
    _record(
        store,
        {
            "decision": "discarded",
            "at": store.clock.now_ms(),
            "staged_at": staged.staged_at,
            "reason": f"it used memory forgotten since: {shown}"[:REVIEW_REASON_MAX_CHARS],
        },
    )
    log.warning("staged consolidation discarded: it used forgotten memory (%s)", shown)
    return True


def accept(store: Store, settings: Settings, paths: Paths) -> dict[str, Any]:
    """Make the staged memory live and the baseline; re-render the block at once."""
    staged = pending(paths)
    if staged is None:
        raise ReviewError("no consolidation is waiting for review")
    token = _claim(store, paths, staged)
    if drop_if_forgotten(store, paths):
        store.phase2.release_phase2(token, "waiting: a staged consolidation used forgotten memory")
        raise ReviewError(
            "the staged consolidation used memory that has since been forgotten; it was "
            "discarded and the next consolidation runs without it"
        )
    try:
        _put_agent_files(paths.memories, staged_agent_files(paths))
        open_baseline(paths.baseline_git, _staged_dir(paths) / TREE).reset()
        rollback.record(paths, source="an accepted review")  # what turns see from now on
    except BaseException as exc:
        rollback.restore(paths, store.clock)  # the folder goes back to what turns still see
        store.phase2.release_phase2(token, f"waiting: review accept failed: {exc}")
        raise
    if not store.phase2.mark_phase2_succeeded(
        token,
        staged.consumed,
        consolidated=True,
        watermark=staged.watermark,
        claimed_input=staged.claimed_input,
    ):
        raise ReviewError("lost the consolidation job while accepting; try again")
    discard(paths)
    entry = {"decision": "accepted", "at": store.clock.now_ms(), "staged_at": staged.staged_at}
    _record(store, entry)
    try:
        sync_block(paths, settings)
    except PathError as exc:
        log.warning("could not re-render the memory block after accepting: %s", exc)
    export_codex(settings, paths.memories)
    return entry


def reject(store: Store, paths: Paths, reason: str | None) -> dict[str, Any]:
    """Drop the staged memory and say why; the live memory and the baseline stay as they are.

    The job finishes as if the run had consolidated (its model cost was spent), so the cooldown
    applies and the same diff is tried again only after it, together with whatever arrived since
    (unless something was forgotten meanwhile: that lifts the cooldown, see ``mark_phase2_succeeded``).
    """
    staged = pending(paths)
    if staged is None:
        raise ReviewError("no consolidation is waiting for review")
    why = " ".join((reason or "").split())[:REVIEW_REASON_MAX_CHARS] or None
    token = _claim(store, paths, staged)
    keep = [
        (o.session_id, o.source_updated_at)
        for o in store.outputs.newest_first()
        if o.selected_for_phase2
    ]
    if not store.phase2.mark_phase2_succeeded(
        token, keep, consolidated=True, watermark=0, claimed_input=staged.claimed_input
    ):
        raise ReviewError("lost the consolidation job while rejecting; try again")
    discard(paths)
    entry = {
        "decision": "rejected",
        "at": store.clock.now_ms(),
        "staged_at": staged.staged_at,
        "reason": why,
    }
    _record(store, entry)
    return entry
