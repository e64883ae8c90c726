"""Logging in one place: stderr always (journald and launchd pick it up), plus a size-rotated file
in the state folder for the daemon, so `memoryd logs` works wherever memoryd runs."""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from memoryd.tuning import LOG_BACKUPS, LOG_MAX_BYTES

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(verbosity: int = 0, *, log_file: Path | None = None, daemon: bool = False) -> None:
    """-v → INFO, -vv → DEBUG; the daemon logs INFO by default."""
    level = (
        logging.DEBUG
        if verbosity >= 2
        else logging.INFO
        if verbosity == 1 or daemon
        else logging.WARNING
    )
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(stderr)
    root.setLevel(level)
    if log_file is not None:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            fh = logging.handlers.RotatingFileHandler(
                log_file, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
            )
        except (
            OSError
        ) as exc:  # an unwritable state folder must not stop the daemon; stderr still works
            logging.getLogger(__name__).warning("not writing a log file at %s: %s", log_file, exc)
        else:
            fh.setFormatter(logging.Formatter(FORMAT))
            root.addHandler(fh)
    for noisy in ("httpx", "httpcore", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
