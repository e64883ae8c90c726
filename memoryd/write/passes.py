"""One pass of the pipeline and the light periodic tick, shared by ``run --once`` and the daemon."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

from memoryd import tokenizer as tokens
from memoryd.errors import HostError, MemorydError, RunnerMissing
from memoryd.folder import baseline_proc, rollback
from memoryd.host.client_sources import client_sources
from memoryd.host.connect import open_host
from memoryd.host.ids import OPENCODE
from memoryd.host.opencode import OpencodeClient
from memoryd.read.block import sync_block
from memoryd.read.usage import IngestResult, ingest_spool
from memoryd.runner.choose import Choice, choose, client_runner, opencode_there
from memoryd.store.home import App
from memoryd.store.keys import HOST_SEEN, LAST_PASS, LAST_PASS_ERROR, RUNNER_SEEN
from memoryd.write import agent_edits
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
    tokens.release(trim=app.lasting)  # the daemon idles between passes: no tokenizer table held
    return result, settled


async def check_edits(app: App, client: OpencodeClient | None = None) -> str | None:
    """Judge a change of the agent-owned files (staged, adopted or held; see agent_edits).

    Without ``client`` the host is opened only when a change is waiting: the no-change path is
    a few ``lstat`` calls and never reaches opencode.
    """
    paths, store, clock = app.paths, app.store, app.clock
    try:
        files = client_sources(app.settings)  # Claude Code's and Codex's sessions are read too
        if client is not None or not _uses_opencode(app):
            # without opencode no opencode session can have made the change
            done = await agent_edits.reconcile(paths, store, clock, client, files)
        else:
            _outcome, change = rollback.look(paths, store, clock)
            if change is None:
                return None
            try:
                async with open_host(app.settings, paths) as opening:
                    host = await opening.ready()
                    done = await agent_edits.reconcile(paths, store, clock, host.client, files)
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
            app.store.ledger.put_state(
                LAST_PASS_ERROR, {"at": app.clock.now_ms(), "error": str(exc)}
            )
        raise
    finally:
        # The daemon's baseline child ends with the pass, not with a tick: ticks run on the loop
        # while phase 2's file work is in a thread, and must never wait for it.
        baseline_proc.release(wait=False)
    problem = result.phase2.detail if result.phase2.status == Phase2Status.SKIPPED_DISK else None
    app.store.ledger.put_state(
        LAST_PASS_ERROR, {"at": app.clock.now_ms(), "error": problem} if problem else None
    )
    return result


def _uses_opencode(app: App) -> bool:
    """Whether this home's passes talk to opencode (as a runner, or as a source). With no runner
    at all it counts as opencode's: a change then waits for opencode, as before runners."""
    if opencode_there(app.settings, app.paths) is not None:
        return True
    try:
        return choose(app.settings, app.paths).name == OPENCODE
    except RunnerMissing:
        return True


async def _run_pass(app: App, *, force_consolidation: bool = False) -> PassResult:
    paths, settings, store = app.paths, app.settings, app.store
    paths.ensure_dir(paths.state_dir)
    choice = choose(settings, paths)
    store.ledger.put_state(RUNNER_SEEN, {**choice.as_dict(), "at": app.clock.now_ms()})
    if choice.name != OPENCODE and opencode_there(settings, paths) is None:
        return await _run_pass_without_host(app, choice, force_consolidation)
    # opencode is a source whoever runs the model: another runner only takes over the prompts
    runner = None if choice.name == OPENCODE else client_runner(choice, paths)
    worker = default_worker_id()
    async with open_host(settings, paths) as opening:
        # A private opencode boots in the background meanwhile: the local work costs no wall time.
        usage = tick(app)  # usage first: it decides what phase 2 selects
        log.debug("pass: waiting for opencode")
        host = await opening.ready()
        store.ledger.put_state(
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
            runner=runner,
        )
        report = await Phase1(**common, file_sources=client_sources(settings)).run_pass()
        p2 = await Phase2(**common).run(force=force_consolidation)
    return _finish_pass(app, report, p2, usage)


async def _run_pass_without_host(app: App, choice: Choice, force_consolidation: bool) -> PassResult:
    """A pass whose model calls run in a client CLI: no opencode is opened or started."""
    usage = tick(app)
    await check_edits(app)
    common: dict[str, Any] = dict(
        store=app.store,
        client=None,
        settings=app.settings,
        paths=app.paths,
        clock=app.clock,
        worker_id=default_worker_id(),
        runner=client_runner(choice, app.paths),
    )
    report = await Phase1(**common, file_sources=client_sources(app.settings)).run_pass()
    p2 = await Phase2(**common).run(force=force_consolidation)
    return _finish_pass(app, report, p2, usage)


def _finish_pass(
    app: App, report: Phase1Report, p2: Phase2Result, usage: IngestResult
) -> PassResult:
    store = app.store
    tick(app)
    log.debug("pass: recording the result")
    store.shrink()
    if app.lasting:  # a pass leaves transcripts and answers behind: give the pages back
        tokens.trim_heap()
    store.ledger.put_state(
        LAST_PASS,
        {
            "at": app.clock.now_ms(),
            "phase1": report.as_dict(),
            "phase2": {"status": p2.status, "detail": p2.detail, "changes": len(p2.changes)},
            "usage": {"citing_replies": usage.new_parts},
        },
    )
    return PassResult(report, p2, usage)
