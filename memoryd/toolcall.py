"""``memoryd tool NAME ARGS_JSON [--session ID]``: the command line of one shim tool call.

Its one parser (:func:`add_arguments`, also registered by ``memoryd/cli/tool.py``) and the
:func:`main` that ``python -m memoryd tool`` runs without loading the CLI package: the shim
starts one process per model tool call, so its start-up time is the call's latency. The call
itself is :func:`memoryd.tools.shim.call`, imported only when a call runs.
"""

from __future__ import annotations

import argparse
import sys

from memoryd.clock import SystemClock
from memoryd.errors import MemorydError
from memoryd.paths import Paths


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The one definition of ``memoryd tool``'s arguments: :func:`main` and the CLI both use it."""
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


def main(argv: list[str]) -> int:
    """``memoryd tool NAME ARGS [--session ID]`` without loading the CLI package (settings, host
    client, daemon): the shim starts one per model tool call, so start-up time is its latency.
    Same contract as the CLI: the answer on stdout, or ``memoryd: <reason>`` on stderr and 1."""
    from memoryd.tools.shim import call, parse_args

    parser = argparse.ArgumentParser(prog="memoryd tool")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        text = call(
            Paths.from_env(),
            SystemClock(),
            args.name,
            parse_args(args.arguments),
            args.session_id,
            project=args.project,
            server=args.server,
        )
    except MemorydError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return 1
    print(text)
    return 0
