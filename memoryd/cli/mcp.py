"""``memoryd mcp``: serve the memory tools over MCP on stdio (hosts start it themselves)."""

from __future__ import annotations

import argparse

from memoryd.app import App
from memoryd.cli.exitcodes import EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("mcp", help="serve the memory tools over MCP (stdio)")
    p.set_defaults(handler=cmd_mcp)


def cmd_mcp(app: App, args: argparse.Namespace) -> int:
    from memoryd.mcp_server import serve  # the SDK is only imported when serving

    serve(app)
    return EXIT_OK
