"""Commands on the memory itself: read, list, search, note add, forget, mode, inspect, reset.

Each calls the same function the MCP tool calls (:mod:`memoryd.tools`); ``--json`` prints the
result's data instead of its text.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from memoryd.exitcodes import EXIT_ERROR, EXIT_OK
from memoryd.store.home import App

if TYPE_CHECKING:  # memoryd.tools loads only for these commands, never in the daemon
    from memoryd.tools.scope import Scope


def _out(result: Any, as_json: bool) -> int:
    print(json.dumps(result.to_dict(), indent=2, sort_keys=True) if as_json else result.to_text())
    return EXIT_OK


def _scoped(p: argparse.ArgumentParser) -> None:
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--project",
        metavar="PATH|KEY",
        help="this project's memory and the global layer (default: the project of the current folder)",
    )
    who.add_argument("--all", action="store_true", help="every project's memory")


def _scope(args: argparse.Namespace) -> Scope:
    from memoryd.tools.scope import ALL, Scope, resolve_project

    if args.all:
        return ALL
    if args.project:
        return Scope("project", resolve_project(args.project))
    return Scope.for_folder(os.getcwd())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("read", help="print a file of the memory folder (a window of lines)")
    _scoped(p)
    p.add_argument("path")
    p.add_argument("--line-offset", type=int)
    p.add_argument("--max-lines", type=int)
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_read)

    p = sub.add_parser("list", help="list a folder of the memory")
    _scoped(p)
    p.add_argument("path", nargs="?", default="")
    p.add_argument("--max-results", type=int)
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("search", help="search memory (plain, or --ranked full-text)")
    _scoped(p)
    p.add_argument("queries", nargs="*")
    p.add_argument(
        "--ranked", action="store_true", help="BM25 full-text index over files and session memories"
    )
    p.add_argument(
        "--mode",
        dest="match_mode",
        default="any",
        choices=["any", "all_on_same_line", "all_within_lines"],
    )
    p.add_argument("--line-count", type=int)
    p.add_argument("--path")
    p.add_argument("-C", "--context", dest="context_lines", type=int, default=0)
    p.add_argument("-i", "--ignore-case", action="store_true")
    p.add_argument("--normalized", action="store_true")
    p.add_argument("--since")
    p.add_argument("--until")
    p.add_argument("--cursor")
    p.add_argument("--max-results", type=int)
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("note", help="notes you want remembered")
    notes = p.add_subparsers(dest="note_command", required=True, metavar="ACTION")
    add = notes.add_parser("add", help="save a note (refused if it contains a secret)")
    add.add_argument("text")
    add.add_argument("--title")
    add.add_argument(
        "--project", metavar="PATH|KEY", help="a note about this project only (default: global)"
    )
    add.add_argument("--json", action="store_true", dest="as_json")
    add.set_defaults(handler=cmd_note_add)

    p = sub.add_parser(
        "forget", help="forget one session's memory, delete one note, or forget a project"
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--session", dest="session_id")
    who.add_argument("--note")
    who.add_argument("--project", metavar="KEY", help="every session and note of one project")
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser("mode", help="set whether a session is remembered")
    p.add_argument("mode", choices=["enabled", "disabled", "polluted"])
    p.add_argument("session_id")
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_mode)

    p = sub.add_parser(
        "inspect", help="deep report: errors, selection, memory folder, effective settings"
    )
    p.add_argument("--json", action="store_true", dest="as_json")
    p.set_defaults(handler=cmd_inspect)

    p = sub.add_parser("reset", help="forget everything memoryd extracted and consolidated")
    p.add_argument("--yes", action="store_true", help="confirm; without it nothing is deleted")
    p.set_defaults(handler=cmd_reset)


def cmd_read(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it

    return _out(
        tools.memory_read(
            app.paths.memories, args.path, args.line_offset, args.max_lines, _scope(args)
        ),
        args.as_json,
    )


def cmd_list(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it

    return _out(
        tools.memory_list(app.paths.memories, args.path, args.max_results, _scope(args)),
        args.as_json,
    )


def cmd_search(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it
    from memoryd.tools.hits import SearchQuery

    index = (
        tools.SearchIndex(
            tools.default_index_path(app.paths.data_dir), app.paths.memories, app.store
        )
        if args.ranked
        else None
    )
    try:
        result = tools.memory_search(
            app.paths.memories,
            SearchQuery(
                args.queries or None,
                match_mode=args.match_mode,
                line_count=args.line_count,
                path=args.path,
                context_lines=args.context_lines,
                case_sensitive=not args.ignore_case,
                normalized=args.normalized,
                since=args.since,
                until=args.until,
                cursor=args.cursor,
                max_results=args.max_results,
                ranked=args.ranked,
            ),
            index=index,
            scope=_scope(args),
        )
    finally:
        if index is not None:
            index.close()
    return _out(result, args.as_json)


def cmd_note_add(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it
    from memoryd.tools.scope import resolve_project

    return _out(
        tools.memory_add_note(
            app.paths.memories,
            args.text,
            args.title,
            clock=app.clock,
            store=app.store,
            project=resolve_project(args.project) if args.project else None,
        ),
        args.as_json,
    )


def cmd_forget(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it
    from memoryd.tools.scope import resolve_project

    return _out(
        tools.memory_forget(
            app.store,
            app.paths.memories,
            session_id=args.session_id,
            note=args.note,
            project=resolve_project(args.project) if args.project else None,
        ),
        args.as_json,
    )


def cmd_mode(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it

    return _out(tools.memory_mode(app.store, args.mode, args.session_id), args.as_json)


def cmd_inspect(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it

    return _out(tools.memory_inspect(app.store, app.settings, app.paths), args.as_json)


def cmd_reset(app: App, args: argparse.Namespace) -> int:
    from memoryd import tools  # not loaded by the daemon, which never needs it

    if not args.yes:
        print(
            "memoryd reset deletes every extracted memory, MEMORY.md, the summary, skills and notes."
        )
        print("Run `memoryd reset --yes` to do it.")
        return EXIT_ERROR
    index = tools.SearchIndex(
        tools.default_index_path(app.paths.data_dir), app.paths.memories, app.store
    )
    try:
        print(tools.memory_reset(app.store, app.paths, True, index=index).to_text())
    finally:
        index.close()
    print("consolidation paused for 6 h so the folder is not rebuilt at once")
    return EXIT_OK
