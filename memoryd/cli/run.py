"""``memoryd run``: one pass (``--once``) or a simple loop of passes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from dataclasses import dataclass
from typing import Any

from memoryd.cli._app import App
from memoryd.errors import HostError
from memoryd.host.connect import open_host
from memoryd.phase1 import Phase1, Phase1Report, default_worker_id
from memoryd.phase2 import Phase2, Phase2Result
from memoryd.status import HOST_SEEN, LAST_PASS

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="extract memories from finished sessions (one pass with --once)")
    p.add_argument("--once", action="store_true", help="run one pass and exit")
    p.add_argument(
        "--force-consolidation", action="store_true", help="ignore the phase-2 cooldown (never the lease)"
    )
    p.add_argument("--interval", type=float, default=300.0, help="seconds between passes when looping (default 300)")
    p.set_defaults(handler=cmd_run)


@dataclass
class PassResult:
    phase1: Phase1Report
    phase2: Phase2Result


async def run_once(app: App, *, force_consolidation: bool = False) -> PassResult:
    paths, settings, store = app.paths, app.settings, app.store
    paths.ensure_dir(paths.state_dir)
    worker = default_worker_id()
    async with open_host(settings, paths) as host:
        store.put_state(
            HOST_SEEN, {"url": host.url, "version": host.version, "private": host.private, "at": app.clock.now_ms()}
        )
        common = dict(store=store, client=host.client, settings=settings, paths=paths, clock=app.clock, worker_id=worker)
        report = await Phase1(**common).run_pass()
        p2 = await Phase2(**common).run(force=force_consolidation)
    record: dict[str, Any] = {
        "at": app.clock.now_ms(),
        "phase1": report.as_dict(),
        "phase2": {"status": p2.status, "detail": p2.detail, "changes": len(p2.changes)},
    }
    store.put_state(LAST_PASS, record)
    return PassResult(report, p2)


def phase2_line(result: Phase2Result) -> str:
    text = {
        "succeeded": f"consolidated {len(result.changes)} changed files into MEMORY.md and memory_summary.md",
        "no_changes": "memory folder unchanged since the last consolidation (no model call)",
        "no_inputs": "nothing to consolidate yet (no model call)",
        "skipped_cooldown": "waiting for the cooldown after the last consolidation",
        "skipped_running": "another consolidation holds the lease",
        "skipped_backoff": "backing off after a failed consolidation",
        "skipped_disabled": "generate_memories is off",
        "failed": f"failed: {result.detail}",
        "heartbeat_lost": f"aborted: {result.detail}",
    }.get(result.status, result.status)
    return "phase 2: " + text


def summary(report: Phase1Report) -> str:
    parts = [
        f"{report.discovered} sessions seen",
        f"{report.eligible} eligible",
        f"{report.claimed} claimed",
        f"{report.succeeded} extracted",
    ]
    if report.no_output:
        parts.append(f"{report.no_output} with nothing to keep")
    if report.polluted:
        parts.append(f"{report.polluted} skipped as polluted")
    if report.forgotten:
        parts.append(f"{report.forgotten} forgotten (deleted in opencode)")
    parts.append(f"{report.failed} failed")
    return "phase 1: " + ", ".join(parts)


def cmd_run(app: App, args: argparse.Namespace) -> int:
    if args.once:
        result = asyncio.run(run_once(app, force_consolidation=args.force_consolidation))
        print(summary(result.phase1))
        for err in result.phase1.errors:
            print(f"  failed: {err}")
        print(phase2_line(result.phase2))
        return 0
    return asyncio.run(_loop(app, args.interval))


async def _loop(app: App, interval: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        task = asyncio.create_task(run_once(app))
        waiter = asyncio.create_task(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
        try:
            result = await task
            log.info(summary(result.phase1))
            log.info(phase2_line(result.phase2))
        except asyncio.CancelledError:
            break
        except HostError as exc:
            log.warning("pass skipped: %s", exc)
        waiter.cancel()
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass
    return 0
