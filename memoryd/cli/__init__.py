"""``memoryd`` command line. Each command group lives in its own module and registers itself.

Exit codes: 0 success; 1 a memoryd error (one line on stderr); 2 bad usage or bad config;
3 the host is unreachable or refused our credentials.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from memoryd import __version__
from memoryd.cli import locations as paths_cmd
from memoryd.cli import logs as logs_cmd
from memoryd.cli import mcp as mcp_cmd
from memoryd.cli import memory as memory_cmd
from memoryd.cli import remote as sync_cmd
from memoryd.cli import run as run_cmd
from memoryd.cli import service as service_cmd
from memoryd.cli import setup as setup_cmd
from memoryd.cli import status as status_cmd
from memoryd.cli import tool as tool_cmd
from memoryd.cli import ui as ui_cmd
from memoryd.cli.logs import LOG_NAME
from memoryd.errors import (
    ConfigError,
    HostError,
    MemorydError,
    StartupFailure,
    is_host_fault,
)
from memoryd.exitcodes import (
    EXIT_ERROR,
    EXIT_HOST,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STARTUP_FAILURE,
    EXIT_USAGE,
)
from memoryd.runtime.logconfig import configure
from memoryd.store.home import App

GROUPS = (
    run_cmd,
    status_cmd,
    sync_cmd,
    memory_cmd,
    setup_cmd,
    service_cmd,
    logs_cmd,
    mcp_cmd,
    tool_cmd,
    paths_cmd,
    ui_cmd,
)


# commands whose process goes on serving after its first answer (besides the daemon, `run`)
LASTING_COMMANDS = ("mcp", "ui")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memoryd",
        description="Cross-session memory for coding agents: extracts what sessions taught, "
        "consolidates it, and hands it back to the next session.",
    )
    parser.add_argument("--version", action="version", version=f"memoryd {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    daemon = args.command == "run" and not getattr(args, "once", False)
    app = App(lasting=daemon or args.command in LASTING_COMMANDS)
    configure(args.verbose, log_file=app.paths.logs / LOG_NAME if daemon else None, daemon=daemon)
    handler: Callable[[App, argparse.Namespace], int] = args.handler
    try:
        return handler(app, args)
    except StartupFailure as exc:
        print(f"memoryd: startup failed: {exc}", file=sys.stderr)
        return EXIT_STARTUP_FAILURE
    except ConfigError as exc:
        print(f"memoryd: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HostError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_HOST if is_host_fault(exc) else EXIT_ERROR
    except MemorydError as exc:
        print(f"memoryd: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:  # a disk that refuses writes: say so, no traceback
        print(f"memoryd: file system error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `memoryd status --json | head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown quiet
        return EXIT_OK
    except KeyboardInterrupt:
        print("memoryd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        app.close()
