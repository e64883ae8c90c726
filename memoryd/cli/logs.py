"""``memoryd logs [-f] [-n N]``: the daemon's log file."""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque

from memoryd.exitcodes import EXIT_ERROR, EXIT_OK
from memoryd.store.home import App

LOG_NAME = "memoryd.log"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("logs", help="show the daemon's log (follow with -f)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument(
        "-n", "--lines", type=int, default=50, help="how many lines to show first (default 50)"
    )
    p.set_defaults(handler=cmd_logs)


def cmd_logs(app: App, args: argparse.Namespace) -> int:
    path = app.paths.logs / LOG_NAME
    if not path.exists() and not args.follow:
        print(f"no log yet at {path} (the daemon writes it: `memoryd run`)", file=sys.stderr)
        return EXIT_ERROR
    pos = 0
    if path.exists():
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            for line in deque(fh, maxlen=max(args.lines, 0)):
                sys.stdout.write(line)
            pos = fh.tell()
    sys.stdout.flush()
    while args.follow:
        time.sleep(0.5)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            continue
        if size < pos:  # rotated
            pos = 0
        if size > pos:
            with path.open("r", encoding="utf-8", errors="replace") as fh:
                fh.seek(pos)
                sys.stdout.write(fh.read())
                pos = fh.tell()
            sys.stdout.flush()
    return EXIT_OK
