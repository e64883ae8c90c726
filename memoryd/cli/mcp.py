"""``memoryd mcp``: serve the memory tools over MCP on stdio (hosts start it themselves)."""

from __future__ import annotations

import argparse

from memoryd.exitcodes import EXIT_OK
from memoryd.store.home import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mcp", help="serve the memory tools over MCP (stdio)")
    p.set_defaults(handler=cmd_mcp)


def cmd_mcp(app: App, args: argparse.Namespace) -> int:
    from memoryd.cli.mcp_server import serve  # the SDK is only imported when serving

    serve(app)
    return EXIT_OK
