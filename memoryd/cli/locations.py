"""``memoryd path NAME``: where things live."""

from __future__ import annotations

import argparse

from memoryd.exitcodes import EXIT_OK
from memoryd.store.home import App

NAMES = ("config", "db", "memories", "logs")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "path", help="print where memoryd keeps its config, database, memories or logs"
    )
    p.add_argument("name", choices=NAMES)
    p.set_defaults(handler=cmd_path)


def cmd_path(app: App, args: argparse.Namespace) -> int:
    print(app.paths.named()[args.name])
    return EXIT_OK
