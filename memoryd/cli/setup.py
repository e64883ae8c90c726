"""``memoryd install opencode`` / ``memoryd uninstall opencode``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memoryd.exitcodes import EXIT_OK, EXIT_USAGE
from memoryd.host.install import Installer
from memoryd.host.mcp_config import snippet
from memoryd.store.home import App


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text in (
        ("install", "write memoryd's agents into opencode's config (idempotent)"),
        ("uninstall", "remove exactly what `memoryd install` wrote"),
    ):
        p = sub.add_parser(name, help=help_text)
        if name == "install":
            p.add_argument(
                "--print",
                dest="print_host",
                choices=["opencode", "claude-code", "codex"],
                help="only print the MCP configuration for that host, change nothing",
            )
            p.add_argument("host", nargs="?", choices=["opencode"])
        else:
            p.add_argument("host", choices=["opencode"])
        p.add_argument(
            "--config-dir",
            type=Path,
            help="opencode config folder (default: $XDG_CONFIG_HOME/opencode)",
        )
        p.add_argument("--force", action="store_true", help="also replace/remove files you changed")
        p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        p.set_defaults(handler=cmd_install if name == "install" else cmd_uninstall)


def cmd_install(app: App, args: argparse.Namespace) -> int:
    if args.print_host:
        print(snippet(args.print_host))
        return EXIT_OK
    if args.host is None:
        print(
            "memoryd install: name a host (opencode) or use --print claude-code|codex",
            file=sys.stderr,
        )
        return EXIT_USAGE
    installer = Installer(app.paths, args.config_dir)
    steps = installer.install(force=args.force, dry_run=args.dry_run)
    prefix = "would " if args.dry_run else ""
    for step in steps:
        print(prefix + step.describe())
    if not args.dry_run and any(s.action in ("create", "update", "replace") for s in steps):
        print(
            "restart opencode (or let memoryd start its own server) so it loads the memoryd plugin"
        )
    return EXIT_OK


def cmd_uninstall(app: App, args: argparse.Namespace) -> int:
    installer = Installer(app.paths, args.config_dir)
    for step in installer.uninstall(force=args.force, dry_run=args.dry_run):
        print(("would " if args.dry_run else "") + step.describe())
    return EXIT_OK
