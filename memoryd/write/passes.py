"""One pass of the pipeline and the light periodic tick, shared by ``run --once`` and the daemon."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

from memoryd import tokens
from memoryd.app import App
from memoryd.errors import HostError, MemorydError
from memoryd.host.client_sources import client_sources
from memoryd.host.connect import open_host
from memoryd.host.opencode import OpencodeClient
from memoryd.read.block import sync_block
from memoryd.read.usage import IngestResult, ingest_spool
from memoryd.status import HOST_SEEN, LAST_PASS, LAST_PASS_ERROR
from memoryd.write import agent_edits, baseline_proc, rollback
from memoryd.write.phase1 import Phase1, Phase1Report, default_worker_id
from memoryd.write.phase2 import Phase2, Phase2Result, Phase2Status

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    phase1: Phase1Report
    phase2: Phase2Result
    usage: IngestResult


def tick(app: App) -> IngestResult:
    """Cheap, local, no host: count citations from the spool, re-render the read-path block."""
    return _tick(app)[0]


def _tick(app: App) -> tuple[IngestResult, str | None]:
    """:func:`tick`, and what the memory folder's local check found (``"changed"``: judge it)."""
    log.debug("tick: counting citations from the spool")
    result = ingest_spool(app.store, app.paths.citation_spool)
    if result.new_parts:
        log.info(
            "counted %d citing replies (%d memories used)", result.new_parts, result.outputs_updated
        )
    # Outside runs: finish a killed run's rollback, or notice a change of the agent-owned files
    # (judged by check_edits, with the host). The block renders from the validated copy only, so
    # neither a run in progress nor an unjudged change ever reaches a turn.
    try:
        settled = rollback.settle(app.paths, app.store, app.clock)
    except (MemorydError, OSError) as exc:
        log.warning("could not check the memory folder against its validated copy: %s", exc)
        settled = None
    if settled == rollback.ROLLED_BACK:
        log.info("memory folder: %s", settled)
    log.debug("tick: rendering the read-path block")
    if sync_block(app.paths, app.settings):
        log.info("read-path block updated")
    tokens.release()  # the daemon idles between passes: do not hold the tokenizer table
    return result, settled


async def check_edits(app: App, client: OpencodeClient | None = None) -> str | None:
    """Judge a change of the agent-owned files (staged, adopted or held; see agent_edits).

    Without ``client`` the host is opened only when a change is waiting: the no-change path is
    a few ``lstat`` calls and never reaches opencode.
    """
    paths, store, clock = app.paths, app.store, app.clock
    try:
        if client is not None:
            done = await agent_edits.reconcile(paths, store, clock, client)
        else:
            _outcome, change = rollback.look(paths, store, clock)
            if change is None:
                return None
            try:
                async with open_host(app.settings, paths) as opening:
                    host = await opening.ready()
                    done = await agent_edits.reconcile(paths, store, clock, host.client)
            except HostError as exc:
                agent_edits.hold(store, clock, sorted(change.changed), exc)
                done = agent_edits.HELD
    except (MemorydError, OSError) as exc:
        log.warning("could not judge a change of the memory folder: %s", exc)
        return None
    if done and done != agent_edits.HELD:
        log.info("memory folder: %s", done)
    return done


async def daemon_tick(app: App, *, judge_edits: bool) -> None:
    """The daemon's tick: :func:`tick`, then a change of the agent-owned files judged with the
    host (not while a pass runs: it judges changes itself, before its phase 2)."""
    _usage, settled = _tick(app)
    if judge_edits and settled == rollback.CHANGED:
        await check_edits(app)


async def run_pass(app: App, *, force_consolidation: bool = False) -> PassResult:
    """One pass; what stopped it (opencode gone, a disk that refuses writes) is kept for ``status``."""
    try:
        result = await _run_pass(app, force_consolidation=force_consolidation)
    except (MemorydError, OSError) as exc:
        with contextlib.suppress(MemorydError, OSError, sqlite3.Error):
            app.store.put_state(LAST_PASS_ERROR, {"at": app.clock.now_ms(), "error": str(exc)})
        raise
    finally:
        # The daemon's baseline child ends with the pass, not with a tick: ticks run on the loop
        # while phase 2's file work is in a thread, and must never wait for it.
        baseline_proc.release(wait=False)
    problem = result.phase2.detail if result.phase2.status == Phase2Status.SKIPPED_DISK else None
    app.store.put_state(
        LAST_PASS_ERROR, {"at": app.clock.now_ms(), "error": problem} if problem else None
    )
    return result


async def _run_pass(app: App, *, force_consolidation: bool = False) -> PassResult:
    paths, settings, store = app.paths, app.settings, app.store
    paths.ensure_dir(paths.state_dir)
    worker = default_worker_id()
    async with open_host(settings, paths) as opening:
        # A private opencode boots in the background meanwhile: the local work costs no wall time.
        usage = tick(app)  # usage first: it decides what phase 2 selects
        log.debug("pass: waiting for opencode")
        host = await opening.ready()
        store.put_state(
            HOST_SEEN,
            {
                "url": host.url,
                "version": host.version,
                "private": host.private,
                "at": app.clock.now_ms(),
            },
        )
        await check_edits(app, host.client)  # before anything reads the folder
        common: dict[str, Any] = dict(
            store=store,
            client=host.client,
            settings=settings,
            paths=paths,
            clock=app.clock,
            worker_id=worker,
        )
        report = await Phase1(**common, file_sources=client_sources(settings)).run_pass()
        p2 = await Phase2(**common).run(force=force_consolidation)
    tick(app)
    log.debug("pass: recording the result")
    store.shrink()
    tokens.trim_heap()  # a pass leaves transcripts and answers behind: give the pages back
    store.put_state(
        LAST_PASS,
        {
            "at": app.clock.now_ms(),
            "phase1": report.as_dict(),
            "phase2": {"status": p2.status, "detail": p2.detail, "changes": len(p2.changes)},
            "usage": {"citing_replies": usage.new_parts},
        },
    )
    return PassResult(report, p2, usage)
