"""``memoryd install opencode|claude-code|codex`` / ``memoryd uninstall …``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from memoryd import tokenizer
from memoryd.errors import TokenizerError
from memoryd.exitcodes import EXIT_OK, EXIT_USAGE
from memoryd.host.client_config import CLIENTS, snippet
from memoryd.host.client_install import ClientInstaller
from memoryd.host.install import Installer
from memoryd.store.home import App

HOSTS = ["opencode", *CLIENTS]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, help_text in (
        ("install", "connect a client to memoryd: opencode, claude-code or codex (idempotent)"),
        ("uninstall", "take out exactly what `memoryd install` wrote"),
    ):
        p = sub.add_parser(name, help=help_text)
        if name == "install":
            p.add_argument(
                "--print",
                dest="print_host",
                nargs="?",
                const=True,
                choices=HOSTS,
                help="only print the configuration for that host (or the named one), change nothing",
            )
            p.add_argument("host", nargs="?", choices=HOSTS)
            p.add_argument(
                "--codex-bin",
                help="the codex binary asked to trust memoryd's hook (default: codex on PATH)",
            )
        else:
            p.add_argument("host", choices=HOSTS)
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
        host = args.host if args.print_host is True else args.print_host
        if host is None:
            print("memoryd install --print: name a host", file=sys.stderr)
            return EXIT_USAGE
        print(snippet(host))
        return EXIT_OK
    if args.host is None:
        print(
            "memoryd install: name a host (opencode, claude-code or codex)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not args.dry_run:
        # the first pass then reads the tokenizer's decoded table; a pass copes without it
        with contextlib.suppress(TokenizerError):
            tokenizer.prepare()
    if args.host in CLIENTS:
        client = ClientInstaller(app.paths, args.host, codex_bin=args.codex_bin)
        for cstep in client.install(dry_run=args.dry_run):
            print(("would " if args.dry_run else "") + cstep.describe())
        return EXIT_OK
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
    if args.host in CLIENTS:
        client = ClientInstaller(app.paths, args.host)
        for cstep in client.uninstall(force=args.force, dry_run=args.dry_run):
            print(("would " if args.dry_run else "") + cstep.describe())
        return EXIT_OK
    installer = Installer(app.paths, args.config_dir)
    for step in installer.uninstall(force=args.force, dry_run=args.dry_run):
        print(("would " if args.dry_run else "") + step.describe())
    return EXIT_OK
