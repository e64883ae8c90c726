"""One sync (fetch, publish, push) and the state ``memoryd status`` reports about it.

Database work (what to publish, honouring tombstones, recording state) stays on the caller's
thread, next to the store; the git and network work runs in a worker thread, so the daemon's
loop keeps answering signals while a slow remote times out.

A remote that is offline or refuses never blocks local memory: the pipeline does not wait for
sync, the failure is recorded, and the daemon retries with an exponential backoff (30 s doubling
to an hour). Until a push lands, ``status`` lists what is waiting. A push that loses a race is
retried at once on top of the new head; that always converges because nobody else writes this
machine's folder.

A push that removes anything from this machine's folder (a forget, a disabled session, retention)
is a new root commit instead of a child: the branch's history then holds only the current trees,
so no reachable commit keeps the removed text. After a successful round the other machines'
memory is rendered into ``extensions/sync/`` at once, so search finds it before a consolidation.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dulwich.objects import ObjectID

from memoryd.clock import Clock
from memoryd.errors import MemorydError, PushRaceLost, SyncBlocked, SyncError
from memoryd.folder.layout import EXTENSIONS_DIR
from memoryd.paths import Paths
from memoryd.redact import redact
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.keys import SYNC_STATE
from memoryd.sync.branch import MACHINES, TOMBSTONES
from memoryd.sync.git import Flat, SyncRepo, blob_id, display_remote
from memoryd.sync.inputs import import_sync, remote_tombstones
from memoryd.sync.publish import Publication, build_publication, machine_id
from memoryd.tuning import (
    SYNC_BACKOFF_MAX_MS,
    SYNC_BACKOFF_MIN_MS,
    SYNC_MAX_PUSH_RACES,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

PENDING_LISTED = 20  # changed paths status lists (the counts are always complete)


@dataclass
class Exchange:
    """What the worker thread did: the head it ended on and whether it pushed."""

    head: ObjectID | None
    pushed: bool = False
    rerooted: bool = False  # the push replaced the branch's history with one root commit
    races: int = 0
    others_before: dict[str, ObjectID] = field(default_factory=dict)
    others_after: dict[str, ObjectID] = field(default_factory=dict)
    remote_tombstones: set[str] = field(default_factory=set)
    lost: bool = False  # a file or machine vanished from another machine's folder, or it forgot
    skipped: dict[str, str] = field(default_factory=dict)  # machines not read, and why


def _lost(repo: SyncRepo, before: dict[str, ObjectID], after: dict[str, ObjectID]) -> bool:
    for mid, tree in before.items():
        if after.get(mid) == tree:
            continue
        if mid not in after:
            return True
        try:
            old, new = repo.flat(tree), repo.flat(after[mid])
        except Exception:  # an unreadable folder: treat as changed, phase 2 skips it
            return True
        if any(p not in new.entries for p in old.entries):
            return True
        if old.entries.get(TOMBSTONES) != new.entries.get(TOMBSTONES):
            return True
    return False


@dataclass
class SyncOutcome:
    status: str  # pushed | up_to_date | blocked | failed | not_configured
    detail: str = ""
    machines: int = 0
    honoured: list[str] = field(default_factory=list)
    inputs_changed: bool = False
    races: int = 0
    pending: dict[str, Any] = field(default_factory=dict)
    rerooted: bool = False
    received: dict[str, int] | None = None  # other machines' memory rendered after the pull

    @property
    def ok(self) -> bool:
        return self.status in ("pushed", "up_to_date", "not_configured")


def _flat_of(files: dict[str, bytes]) -> Flat:
    return Flat({rel: blob_id(data) for rel, data in files.items()})


def _others(repo: SyncRepo, head: ObjectID | None, own: str) -> dict[str, ObjectID]:
    return {m: t for m, t in repo.machines(head).items() if m != own}


def pending_changes(repo_dir: Path, pub: Publication) -> tuple[dict[str, Any], set[str]]:
    """What a push would change in this machine's folder, against the last fetched head.

    Returns the summary ``status`` shows and the paths that would be added or changed.
    """
    repo = SyncRepo(repo_dir)
    try:
        head = repo.tracking_head() if repo_dir.is_dir() else None
        remote = repo.flat(repo.subtree(repo.root_tree(head), MACHINES, pub.machine_id))
    finally:
        repo.close()
    added, changed, removed = _flat_of(pub.files).changes(remote)
    paths = [f"A {p}" for p in added] + [f"M {p}" for p in changed] + [f"D {p}" for p in removed]
    summary = {
        "added": len(added),
        "changed": len(changed),
        "removed": len(removed),
        "paths": paths[:PENDING_LISTED],
    }
    return summary, {*added, *changed}


def exchange(repo_dir: Path, remote: str, pub: Publication | None) -> Exchange:
    """Fetch, then (unless ``pub`` is None) lay this machine's folder onto the head and push.

    Worker-thread safe: touches only ``repo_dir`` and the network, never the database.
    """
    repo = SyncRepo(repo_dir)
    try:
        own = pub.machine_id if pub else ""
        before = _others(repo, repo.tracking_head(), own)
        races = 0
        while True:
            head = repo.fetch(remote)
            result = Exchange(head, races=races, others_before=before)
            result.others_after = _others(repo, head, own)
            result.lost = _lost(repo, before, result.others_after)
            result.remote_tombstones, result.skipped = remote_tombstones(repo, head, own)
            if pub is None:
                return result
            base_root = repo.root_tree(head)
            remote_own = repo.subtree(base_root, MACHINES, pub.machine_id)
            remote_flat = repo.flat(remote_own)
            own_tree, own_flat = repo.add_folder(pub.files, remote_flat)
            if remote_own == own_tree:
                return result
            # Text leaving this machine's folder (a forget, a disabled session, retention) must
            # leave the branch's history too: the new commit is then a root holding only the
            # current tree of every machine, swapped in by the same compare-and-swap push.
            reroot = head is not None and any(
                p not in own_flat.entries for p in remote_flat.entries
            )
            message = (
                f"memoryd {pub.machine_id}: {pub.sessions} sessions, {pub.notes} notes, "
                f"{pub.tombstones} forgotten" + (" (history re-rooted)" if reroot else "")
            )
            tree = repo.compose(base_root, pub.machine_id, own_tree)
            commit = repo.commit(tree, None if reroot else head, message)
            try:
                repo.push(remote, head, commit, unrelated=reroot)
            except PushRaceLost:
                races += 1
                if races >= SYNC_MAX_PUSH_RACES:
                    raise SyncError(
                        display_remote(remote), f"lost {races} push races in a row; will retry"
                    ) from None
                time.sleep(random.uniform(0.02, 0.1) * races)
                continue
            repo.set_tracking(commit)
            result.head, result.pushed, result.rerooted = commit, True, reroot
            return result
    finally:
        repo.close()


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn`` in a daemon thread: a remote that hangs (dulwich's git:// client has no
    timeout) must not keep the process from exiting, as the default executor would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, False, exc)
        else:
            loop.call_soon_threadsafe(settle, True, result)

    threading.Thread(target=work, name="memoryd-sync", daemon=True).start()
    return await future


# -- recorded state -----------------------------------------------------------------------------


def sync_state(store: Store) -> dict[str, Any]:
    saved = store.ledger.get_state(SYNC_STATE)
    return dict(saved) if isinstance(saved, dict) else {}


def _save(store: Store, **changes: Any) -> dict[str, Any]:
    state = {**sync_state(store), **changes}
    store.ledger.put_state(SYNC_STATE, state)
    return state


def backoff_ms(failures: int) -> int:
    return int(min(SYNC_BACKOFF_MAX_MS, SYNC_BACKOFF_MIN_MS * 2 ** max(failures - 1, 0)))


def sync_due(store: Store, settings: Settings, clock: Clock) -> bool:
    if not settings.sync_remote:
        return False
    return clock.now_ms() >= int(sync_state(store).get("next_due") or 0)


def request_sync(store: Store, clock: Clock) -> None:
    """Ask for a sync as soon as the backoff allows (after a validated consolidation)."""
    state = sync_state(store)
    now = clock.now_ms()
    retry_at = int(state.get("retry_at") or 0)
    _save(store, next_due=max(now, retry_at))


# -- one sync -----------------------------------------------------------------------------------


async def run_sync(store: Store, settings: Settings, paths: Paths, clock: Clock) -> SyncOutcome:
    """Pull and push once; records the outcome for ``status`` and schedules the next attempt."""
    remote = settings.sync_remote
    if not remote:
        return SyncOutcome("not_configured", "sync_remote is not set")
    paths.ensure_dir(paths.data_dir)
    outcome = await _one_round(store, settings, paths, clock, remote)
    if outcome.honoured and outcome.ok:
        # Publish at once what honouring the tombstones just removed from this machine's folder.
        again = await _one_round(store, settings, paths, clock, remote)
        again.honoured = outcome.honoured + again.honoured
        again.inputs_changed = again.inputs_changed or outcome.inputs_changed
        outcome = again
    if outcome.ok and outcome.status != "not_configured":
        outcome.received = await _render_inputs(store, settings, paths)
        if outcome.received is not None:
            _save(store, received=outcome.received)
    return outcome


async def _render_inputs(store: Store, settings: Settings, paths: Paths) -> dict[str, int] | None:
    """Render other machines' memory into ``extensions/sync/`` now, so search finds it at once.

    Phase 2 renders the same files again (same layout, no change) before its diff; while a
    consolidation holds its lease the folder is left alone and the next sync or pass renders it.
    """
    if store.tombstones.phase2_running():
        return None
    paths.ensure_dir(paths.memories)
    forgotten = set(store.tombstones.tombstones())
    forgotten |= {sid for sid, mode in store.outputs.memory_modes().items() if mode != "enabled"}
    roots = store.tombstones.output_roots()
    state = sync_state(store)
    # Same head, same local checkouts and forgets as the last render: nothing to redo (rendering
    # redacts every session again, seconds at hundreds of sessions).
    key = hashlib.sha256(
        json.dumps(
            [
                state.get("head"),
                sorted(forgotten),
                roots,
                settings.max_raw_memories_for_consolidation,
            ]
        ).encode()
    ).hexdigest()
    rendered = paths.memories / EXTENSIONS_DIR / "sync"
    if state.get("rendered_key") == key and (rendered.is_dir() or not state.get("machines")):
        return None
    job = functools.partial(
        import_sync,
        paths.memories,
        paths.sync_git,
        enabled=True,
        own_id=machine_id(store),
        forgotten=forgotten,
        limit=settings.max_raw_memories_for_consolidation,
        local_roots=roots,
    )
    try:
        report = await _off_loop(job)
    except (MemorydError, OSError) as exc:  # the memory folder, not the remote
        log.warning("sync: could not render other machines' memory: %s", exc)
        return None
    _save(store, rendered_key=key)
    return {
        "machines": report.machines,
        "sessions": report.sessions,
        "notes": report.notes,
        "written": report.written,
        "removed": report.removed,
    }


async def _one_round(
    store: Store, settings: Settings, paths: Paths, clock: Clock, remote: str
) -> SyncOutcome:
    now = clock.now_ms()
    mid = machine_id(store)
    pub = build_publication(store, paths.memories, settings.max_unused_days)
    pending, outgoing = await _off_loop(pending_changes, paths.sync_git, pub)
    # Files already on the remote passed this scan when they were pushed; scan what would change.
    flagged = pub.scan(outgoing)
    state = sync_state(store)
    base = {
        "remote": display_remote(remote),
        "machine": mid,
        "last_attempt": now,
        "pending": pending,
        "blocked": [{"path": p, "kinds": k} for p, k in flagged],
    }
    try:
        ex = await _off_loop(exchange, paths.sync_git, remote, None if flagged else pub)
    except (MemorydError, OSError) as exc:
        failures = int(state.get("failures") or 0) + 1
        retry_at = now + backoff_ms(failures)
        detail = redact(str(exc))
        _save(
            store,
            **base,
            last_error=detail,
            last_error_at=now,
            failures=failures,
            retry_at=retry_at,
            next_due=retry_at,
        )
        log.warning(
            "sync failed (attempt %d, retry in %d s): %s",
            failures,
            (retry_at - now) // 1000,
            detail,
        )
        return SyncOutcome("failed", detail, pending=pending)
    honoured = store.tombstones.honour_tombstones(ex.remote_tombstones)
    if honoured:
        log.info("sync: forgot %d session(s) another machine forgot", len(honoured))
    changed = ex.others_before != ex.others_after
    if changed or honoured:
        # Forgetting (a removal, a tombstone) lifts the cooldown, as a local forget does.
        store.phase2.enqueue_phase2(urgent=ex.lost or bool(honoured))
    status = "pushed" if ex.pushed else "up_to_date"
    common = {
        **base,
        "head": ex.head.decode() if ex.head else None,
        "machines": sorted(ex.others_after),
        "skipped_machines": ex.skipped,
        "failures": 0,
        "retry_at": None,
        "next_due": now + settings.sync_interval_s * 1000,
    }
    if flagged:
        blocked = SyncBlocked(display_remote(remote), flagged)
        _save(store, **common, last_fetch=now, last_error=str(blocked), last_error_at=now)
        log.warning("%s", blocked)
        return SyncOutcome(
            "blocked", str(blocked), len(ex.others_after), honoured, changed, pending=pending
        )
    cleared: dict[str, Any] = {"added": 0, "changed": 0, "removed": 0, "paths": []}
    common["pending"] = cleared
    sent = pending if ex.pushed else cleared
    _save(
        store,
        **common,
        last_fetch=now,
        last_success=now,
        last_error=None,
        sent={k: sent.get(k, 0) for k in ("added", "changed", "removed")},
        rerooted_at=now if ex.rerooted else state.get("rerooted_at"),
    )
    if ex.pushed:
        log.info(
            "sync: pushed %s (%d race(s))%s",
            _describe(pending),
            ex.races,
            "; history re-rooted" if ex.rerooted else "",
        )
    return SyncOutcome(
        status,
        _describe(pending) if ex.pushed else "",
        len(ex.others_after),
        honoured,
        changed,
        ex.races,
        cleared,
        ex.rerooted,
    )


def _describe(pending: dict[str, Any]) -> str:
    return (
        f"{pending.get('added', 0)} added, {pending.get('changed', 0)} changed, "
        f"{pending.get('removed', 0)} removed"
    )
