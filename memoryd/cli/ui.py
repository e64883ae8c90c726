"""``memoryd ui [--port N] [--no-open]`` and ``memoryd review [--accept | --reject [REASON] |
--accept-edit | --reject-edit [REASON]]``."""

from __future__ import annotations

import argparse
import asyncio
import signal

from memoryd.app import App
from memoryd.clock import iso_ms
from memoryd.write import edit_review, review


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ui", help="serve the web UI on 127.0.0.1 (prints its URL with a token)")
    p.add_argument("--port", type=int, default=None, help="port (default: the ui_port setting)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(handler=cmd_ui)

    p = sub.add_parser(
        "review",
        help="show, accept or reject what waits for review (a consolidation, an agent edit)",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--accept", action="store_true", help="make the staged memory live")
    what.add_argument(
        "--reject", nargs="?", const="", metavar="REASON", help="discard it (and say why)"
    )
    what.add_argument(
        "--accept-edit", action="store_true", help="make the agent edit waiting for review live"
    )
    what.add_argument(
        "--reject-edit",
        nargs="?",
        const=None,
        default=False,
        metavar="REASON",
        help="discard the agent edit waiting for review (and say why)",
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
    if args.accept_edit:
        edit_review.accept(app.store, app.settings, app.paths)
        print("accepted: the agent edit is live memory and the new baseline")
        return 0
    if args.reject_edit is not False:
        edit_review.reject(app.store, app.paths, args.reject_edit)
        print("rejected: the agent edit was discarded; the live memory stays")
        return 0
    if args.accept:
        review.accept(app.store, app.settings, app.paths)
        print("accepted: the staged memory is live and is the new baseline")
        return 0
    if args.reject is not None:
        review.reject(app.store, app.paths, args.reject)
        print("rejected: the staged memory was discarded; the live memory stays")
        return 0
    staged = review.pending(app.paths)
    edit = edit_review.pending(app.paths)
    if staged is None and edit is None:
        mode = "on" if app.settings.review else "off (set review = true to stage consolidations)"
        print(f"nothing is waiting for review; review mode is {mode}")
        return 0
    if staged is not None:
        diff = review.diff_text(app.paths)
        print(diff if diff else "(the staged memory equals the live one)", end="" if diff else "\n")
        print("accept with `memoryd review --accept`, or `memoryd review --reject [REASON]`")
    if edit is not None:
        print_edit(app, edit)
    return 0


def print_edit(app: App, edit: edit_review.StagedEdit) -> None:
    """What memoryd saw, then the diff: the user decides on the session as much as on the text."""
    files = ", ".join(f"{rel} ({kind})" for rel, kind in sorted(edit.files.items()))
    print(f"an agent edit staged at {iso_ms(edit.staged_at)} waits: {files}")
    print("made by a host session's tool call (not live: turns keep the validated memory):")
    for w in edit.writers:
        print(
            f"  session {w.get('session_id')} {w.get('title')!r} in {w.get('directory')}: "
            f"{w.get('tool')} at {iso_ms(w.get('at')) or '?'} ({w.get('why')})"
        )
        print("    input: " + " ".join(str(w.get("input", "")).split())[:300])
    if any(s.get("joined_waiting_edit") for s in edit.seen):
        print("  later changes of the same files joined it (a process it started may still write)")
    diff = edit_review.diff_text(app.paths, edit)
    print(diff if diff else "(the edit equals the live memory)", end="" if diff else "\n")
    print("accept with `memoryd review --accept-edit`, or `memoryd review --reject-edit [REASON]`")
