"""``memoryd tool NAME ARGS_JSON``: one memory-tool call, as the opencode shim makes it.

The shim runs this once per call and gives the model whatever it prints. Exit 0 with the
answer on stdout; on a refused or malformed call, exit 1 with the reason on stderr (the shim
reports it to the model as a failed tool call).
"""

from __future__ import annotations

import argparse

from memoryd.store.home import App
from memoryd.toolcall import add_arguments


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tool", help="answer one memory-tool call from the opencode shim")
    add_arguments(p)
    p.set_defaults(handler=cmd_tool)


def cmd_tool(app: App, args: argparse.Namespace) -> int:
    from memoryd.tools import shim  # the memory tools load only for this command

    print(
        shim.call(
            app.paths,
            app.clock,
            args.name,
            shim.parse_args(args.arguments),
            args.session_id,
            project=args.project,
            server=args.server,
        )
    )
    return 0
