"""``memoryd ui [--port N] [--no-open]`` and ``memoryd review [--accept | --reject [REASON]]``."""

from __future__ import annotations

import argparse
import asyncio
import signal

from memoryd.app import App
from memoryd.write import review


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ui", help="serve the web UI on 127.0.0.1 (prints its URL with a token)")
    p.add_argument("--port", type=int, default=None, help="port (default: the ui_port setting)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(handler=cmd_ui)

    p = sub.add_parser("review", help="show, accept or reject a consolidation staged for review")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--accept", action="store_true", help="make the staged memory live")
    what.add_argument(
        "--reject", nargs="?", const="", metavar="REASON", help="discard it (and say why)"
    )
    p.set_defaults(handler=cmd_review)


def cmd_ui(app: App, args: argparse.Namespace) -> int:
    from memoryd.web.server import run_ui  # the web stack loads only for this command

    port = app.settings.ui_port if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise SystemExit("memoryd ui: --port must be between 0 and 65535")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await run_ui(app, port, open_browser=not args.no_open)
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    return 0


def cmd_review(app: App, args: argparse.Namespace) -> int:
    if args.accept:
        review.accept(app.store, app.settings, app.paths)
        print("accepted: the staged memory is live and is the new baseline")
        return 0
    if args.reject is not None:
        review.reject(app.store, app.paths, args.reject)
        print("rejected: the staged memory was discarded; the live memory stays")
        return 0
    staged = review.pending(app.paths)
    if staged is None:
        mode = "on" if app.settings.review else "off (set review = true to stage consolidations)"
        print(f"nothing is waiting for review; review mode is {mode}")
        return 0
    diff = review.diff_text(app.paths)
    print(diff if diff else "(the staged memory equals the live one)", end="" if diff else "\n")
    print("accept with `memoryd review --accept`, or `memoryd review --reject [REASON]`")
    return 0
