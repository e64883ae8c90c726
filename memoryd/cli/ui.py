"""``memoryd ui [--port N] [--no-open]`` and ``memoryd review``: a staged consolidation
(``--accept``, ``--reject [REASON]``), an agent edit (``--accept-edit``, ``--reject-edit
[REASON]``) and the notes a model proposed (``--accept-note ID``, ``--drop-note ID``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
from typing import TYPE_CHECKING

from memoryd.clock import iso_ms
from memoryd.store.home import App
from memoryd.write import edit_review, review

if TYPE_CHECKING:
    from memoryd.tools.proposed import Proposal

# A held note is a model's text: shown with its control characters escaped, so it cannot drive
# the terminal (colours, cursor moves, a forged prompt).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ui", help="serve the web UI on 127.0.0.1 (prints its URL with a token)")
    p.add_argument("--port", type=int, default=None, help="port (default: the ui_port setting)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.set_defaults(handler=cmd_ui)

    p = sub.add_parser(
        "review",
        help="show and decide what waits for you: a consolidation, an agent edit, proposed notes",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument("--accept", action="store_true", help="make the staged memory live")
    what.add_argument(
        "--reject", nargs="?", const="", metavar="REASON", help="discard it (and say why)"
    )
    what.add_argument("--accept-note", metavar="ID", help="keep a note a model proposed")
    what.add_argument("--drop-note", metavar="ID", help="throw a proposed note away")
    p.add_argument("--json", action="store_true", dest="as_json", help="list as JSON")
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
    from memoryd.web.listen import run_ui  # the web stack loads only for this command

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
    from memoryd.tools import proposed  # the memory tools load only for this command

    if args.accept_note is not None:
        note = proposed.accept(app.paths, app.store, args.accept_note, app.clock)
        print(f"accepted: {note.path}; the next consolidation folds it into memory")
        return 0
    if args.drop_note is not None:
        proposed.drop(app.paths, args.drop_note)
        print(f"dropped proposed note {args.drop_note}")
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
    notes = proposed.waiting(app.paths)
    edit = edit_review.pending(app.paths)
    if args.as_json:
        listed = [proposed.describe(n) for n in notes]
        print(
            json.dumps(
                {
                    "staged": staged is not None,
                    "agent_edit": edit is not None,
                    "proposed_notes": listed,
                },
                indent=2,
            )
        )
        return 0
    if staged is None and edit is None:
        mode = "on" if app.settings.review else "off (set review = true to stage consolidations)"
        what = "no consolidation is" if notes else "nothing is"
        print(f"{what} waiting for review; review mode is {mode}")
    if staged is not None:
        diff = review.diff_text(app.paths)
        print(diff if diff else "(the staged memory equals the live one)", end="" if diff else "\n")
        print("accept with `memoryd review --accept`, or `memoryd review --reject [REASON]`")
    if edit is not None:
        print_edit(app, edit)
    if notes:
        print(f"\n{len(notes)} note(s) a model proposed; none is memory until you accept it:")
        for n in notes:
            print(_proposal(n))
        print("keep one with `memoryd review --accept-note ID`, or `memoryd review --drop-note ID`")
    return 0


def _shown(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def _proposal(n: Proposal) -> str:
    from memoryd.tools import proposed

    d = proposed.describe(n)
    where = f"project {n.project}" if n.project else "every project"
    who = f"{n.host} session {n.session_id}" if n.session_id else n.host
    lines = [f"\n[{n.id}] {d['created']}, by a model in {who}, for {where}"]
    lines.append(f"  held because {_shown(n.reason)}")
    if n.title:
        lines.append(f"  title: {_shown(n.title)}")
    lines += [f"  | {_shown(line)}" for line in n.note.split("\n")]
    return "\n".join(lines)


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
