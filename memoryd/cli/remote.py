"""``memoryd sync``: one pull and push with the ``sync_remote``, now, whatever the backoff says."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING

from memoryd.errors import ConfigError
from memoryd.store.home import App

if TYPE_CHECKING:
    from memoryd.sync.engine import SyncOutcome


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sync", help="pull other machines' memory and push this one's (sync_remote)")
    p.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")
    p.add_argument(
        "--init",
        action="store_true",
        help="first create a bare repository at sync_remote (a path only)",
    )
    p.set_defaults(handler=cmd_sync)


def line(o: SyncOutcome) -> str:
    others = f"{o.machines} other machine{'s' if o.machines != 1 else ''}"
    text = {
        "pushed": f"pushed ({o.detail}); {others}",
        "up_to_date": f"nothing to push; {others}",
        "blocked": o.detail,
        "failed": f"failed: {o.detail} (local memory is unaffected; the daemon retries)",
    }.get(o.status, o.detail or o.status)
    if o.honoured:
        text += f"; forgot {len(o.honoured)} session(s) another machine forgot"
    if o.inputs_changed:
        text += "; other machines' memory changed (the next consolidation folds it in)"
    return "sync: " + text


def cmd_sync(app: App, args: argparse.Namespace) -> int:
    if not app.settings.sync_remote:
        raise ConfigError("sync_remote is not set (config file or MEMORYD_SYNC_REMOTE)")
    from memoryd.sync.engine import run_sync  # dulwich loads for this command only
    from memoryd.sync.git import init_remote

    if args.init and init_remote(app.settings.sync_remote):
        print(f"sync: created a bare repository at {app.settings.sync_remote}")
    outcome = asyncio.run(run_sync(app.store, app.settings, app.paths, app.clock))
    if args.as_json:
        print(
            json.dumps(
                {
                    "status": outcome.status,
                    "detail": outcome.detail,
                    "machines": outcome.machines,
                    "honoured": outcome.honoured,
                    "inputs_changed": outcome.inputs_changed,
                    "races": outcome.races,
                    "pending": outcome.pending,
                },
                indent=2,
                sort_keys=True,
            )
        )
    else:
        print(line(outcome))
    return 0 if outcome.ok else 1
