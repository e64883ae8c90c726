"""``memoryd run``: one pass (``--once``) or the long-running daemon."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from memoryd.app import App
from memoryd.cli.exitcodes import EXIT_ERROR, EXIT_OK
from memoryd.write.passes import run_pass
from memoryd.write.phase1 import Phase1Report
from memoryd.write.phase2 import Phase2Result, Phase2Status

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="extract memories from finished sessions (one pass with --once)")
    p.add_argument("--once", action="store_true", help="run one pass and exit")
    p.add_argument(
        "--force-consolidation",
        action="store_true",
        help="ignore the phase-2 cooldown (never the lease)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=300.0,
        help="seconds between passes when looping (default 300)",
    )
    p.set_defaults(handler=cmd_run)


def phase2_line(result: Phase2Result) -> str:
    text = {
        Phase2Status.SUCCEEDED: f"consolidated {len(result.changes)} changed files into MEMORY.md and memory_summary.md",
        Phase2Status.STAGED: f"consolidated {len(result.changes)} changed files; staged for review (`memoryd review`)",
        Phase2Status.SKIPPED_REVIEW: "a consolidation is waiting for review (`memoryd review`)",
        Phase2Status.NO_CHANGES: "memory folder unchanged since the last consolidation (no model call)",
        Phase2Status.NO_INPUTS: "nothing to consolidate yet (no model call)",
        Phase2Status.SKIPPED_COOLDOWN: "waiting for the cooldown after the last consolidation",
        Phase2Status.SKIPPED_RUNNING: "another consolidation holds the lease",
        Phase2Status.SKIPPED_BACKOFF: "backing off after a failed consolidation",
        Phase2Status.SKIPPED_DISABLED: "generate_memories is off",
        Phase2Status.SKIPPED_BUDGET: f"waiting: {result.detail}",
        Phase2Status.SKIPPED_HOST: f"opencode went away; will retry: {result.detail}",
        Phase2Status.SKIPPED_DISK: f"cannot write; will retry once it is fixed: {result.detail}",
        Phase2Status.FAILED: f"failed: {result.detail}",
        Phase2Status.HEARTBEAT_LOST: f"aborted: {result.detail}",
    }[result.status]
    return "phase 2: " + text


def summary(report: Phase1Report) -> str:
    clients = "".join(
        f" + {h.get('seen', 0)} {name}" for name, h in report.hosts.items() if name != "opencode"
    )
    parts = [
        f"{report.discovered} sessions seen{clients}",
        f"{report.eligible} eligible",
        f"{report.claimed} claimed",
        f"{report.succeeded} extracted",
    ]
    if report.no_output:
        parts.append(f"{report.no_output} with nothing to keep")
    if report.polluted:
        parts.append(f"{report.polluted} skipped as polluted")
    if report.forgotten:
        parts.append(f"{report.forgotten} forgotten (deleted in their host)")
    parts.append(f"{report.failed} failed")
    line = "phase 1: " + ", ".join(parts)
    if report.waiting:
        line += f"\n  waiting: {report.waiting}"
    return line


def cmd_run(app: App, args: argparse.Namespace) -> int:
    if args.once:
        result = asyncio.run(run_pass(app, force_consolidation=args.force_consolidation))
        print(summary(result.phase1))
        for err in result.phase1.errors:
            print(f"  failed: {err}")
        print(phase2_line(result.phase2))
        if result.phase2.status == Phase2Status.SKIPPED_DISK:
            print(f"memoryd: {result.phase2.detail}", file=sys.stderr)
            return EXIT_ERROR
        return EXIT_OK
    # Only the daemon needs the scheduler: `run --once` (and every other command) skips ~0.1 s
    # of imports before it can start a private opencode.
    from memoryd.runtime.daemon import Daemon

    asyncio.run(Daemon(app, interval_s=args.interval).serve())
    return EXIT_OK
