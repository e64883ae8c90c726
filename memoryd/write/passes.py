"""One pass of the pipeline and the light periodic tick, shared by ``run --once`` and the daemon."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memoryd import tokens
from memoryd.app import App
from memoryd.host.connect import open_host
from memoryd.read.block import sync_block
from memoryd.read.usage import IngestResult, ingest_spool
from memoryd.status import HOST_SEEN, LAST_PASS
from memoryd.write.phase1 import Phase1, Phase1Report, default_worker_id
from memoryd.write.phase2 import Phase2, Phase2Result

log = logging.getLogger(__name__)


@dataclass
class PassResult:
    phase1: Phase1Report
    phase2: Phase2Result
    usage: IngestResult


def tick(app: App) -> IngestResult:
    """Cheap, local, no host: count citations from the spool, re-render the read-path block."""
    result = ingest_spool(app.store, app.paths.citation_spool)
    if result.new_parts:
        log.info(
            "counted %d citing replies (%d memories used)", result.new_parts, result.outputs_updated
        )
    job = app.store.phase2_job()
    if (
        job is not None
        and job["status"] == "running"
        and (job["lease_until"] or 0) > app.clock.now_ms()
    ):
        return result  # the consolidator is editing the summary: inject only what a run validated
    if sync_block(app.paths, app.settings):
        log.info("read-path block updated")
    tokens.release()  # the daemon idles between passes: do not hold the tokenizer table
    return result


async def run_pass(app: App, *, force_consolidation: bool = False) -> PassResult:
    paths, settings, store = app.paths, app.settings, app.store
    paths.ensure_dir(paths.state_dir)
    usage = tick(app)  # usage first: it decides what phase 2 selects
    worker = default_worker_id()
    async with open_host(settings, paths) as host:
        store.put_state(
            HOST_SEEN,
            {
                "url": host.url,
                "version": host.version,
                "private": host.private,
                "at": app.clock.now_ms(),
            },
        )
        common: dict[str, Any] = dict(
            store=store,
            client=host.client,
            settings=settings,
            paths=paths,
            clock=app.clock,
            worker_id=worker,
        )
        report = await Phase1(**common).run_pass()
        p2 = await Phase2(**common).run(force=force_consolidation)
    tick(app)
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
