"""``memoryd tool NAME ARGS_JSON``: one memory-tool call, as the opencode shim makes it.

The shim runs this once per call and gives the model whatever it prints. Exit 0 with the
answer on stdout; on a refused or malformed call, exit 1 with the reason on stderr (the shim
reports it to the model as a failed tool call).
"""

from __future__ import annotations

import argparse

from memoryd.store.home import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tool", help="answer one memory-tool call from the opencode shim")
    p.add_argument("name", help="memory_search, memory_read or memory_note")
    p.add_argument("arguments", nargs="?", default="{}", help="the call's arguments as JSON")
    p.add_argument("--session", dest="session_id", help="the calling session (for notes)")
    p.add_argument(
        "--project",
        metavar="KEY",
        help="the calling instance's project: calls see it and the global layer, nothing else",
    )
    p.add_argument(
        "--server", metavar="URL", help="the calling instance's opencode (to read the session)"
    )
    p.set_defaults(handler=cmd_tool)


def cmd_tool(app: App, args: argparse.Namespace) -> int:
    from memoryd.tools import shim as host

    print(
        host.call(
            app.paths,
            app.clock,
            args.name,
            host.parse_args(args.arguments),
            args.session_id,
            project=args.project,
            server=args.server,
        )
    )
    return 0
