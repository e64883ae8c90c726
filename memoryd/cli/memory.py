"""Commands that act on the memory itself: ``reset``."""

from __future__ import annotations

import argparse

from memoryd.app import App
from memoryd.control import reset_memory


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reset", help="forget everything memoryd extracted and consolidated")
    p.add_argument("--yes", action="store_true", help="confirm; without it nothing is deleted")
    p.set_defaults(handler=cmd_reset)


def cmd_reset(app: App, args: argparse.Namespace) -> int:
    if not args.yes:
        print("memoryd reset deletes every extracted memory, MEMORY.md, the summary, skills and notes.")
        print("Run `memoryd reset --yes` to do it.")
        return 1
    reset_memory(app.store, app.paths)
    print(f"memory wiped ({app.paths.memories}); consolidation paused for 6 h so it is not rebuilt at once")
    return 0
