"""Usage feedback: citations in replies become ``usage_count`` / ``last_use`` on stage-1 outputs.

The opencode shim appends one JSON line per reply that cited memory to a spool file. The daemon
claims the spool by renaming it (writers open the path afresh for every append, so new lines go
to a new file), counts each citing reply part once (``citation_seen`` in the DB, so a replay after
a crash is harmless), and deletes the claimed file only after the transaction committed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from memoryd.fsutil import pid_alive
from memoryd.hosts import SESSION_ID_PREFIXES
from memoryd.store import Store
from memoryd.tuning import SPOOL_SETTLE_S

log = logging.getLogger(__name__)
CLAIM_SUFFIX = ".claimed"


@dataclass
class IngestResult:
    lines: int = 0
    new_parts: int = 0
    outputs_updated: int = 0
    bad_lines: int = 0


def _owner_alive(path: Path) -> bool:
    """Claimed files are named ``<spool>.<pid>.<ns>.claimed``; a live other owner is still reading."""
    parts = path.name.split(".")
    try:
        pid = int(parts[-3])
    except (IndexError, ValueError):
        return False
    return pid != os.getpid() and pid_alive(pid)


def _claim(spool: Path) -> list[Path]:
    # leftovers of a crashed ingester first; those of a live one (daemon beside `run --once`) are its own
    claimed = [
        p
        for p in sorted(spool.parent.glob(spool.name + ".*" + CLAIM_SUFFIX))
        if not _owner_alive(p)
    ]
    if spool.exists():
        target = spool.with_name(f"{spool.name}.{os.getpid()}.{time.time_ns()}{CLAIM_SUFFIX}")
        try:
            os.rename(spool, target)
            claimed.append(target)
        except FileNotFoundError:
            pass  # another ingester won the race
    return claimed


def _read_from(path: Path, offset: int) -> tuple[list[str], int, bool]:
    """Complete lines from ``offset``; returns (lines, new offset, whether a partial line remains)."""
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode("utf-8", errors="replace").split("\n")[:-1] if end else []
    return lines, offset + end, end < len(data)


def parse_record(line: str) -> tuple[str, list[str]] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    sid, part = rec.get("session_id"), rec.get("part_id") or rec.get("message_id")
    cited = rec.get("cited")
    if not isinstance(sid, str) or not isinstance(part, str) or not isinstance(cited, list):
        return None
    return f"{sid}:{part}", [
        c for c in cited if isinstance(c, str) and c.startswith(SESSION_ID_PREFIXES)
    ]


def ingest_spool(store: Store, spool: Path) -> IngestResult:
    result = IngestResult()
    if not spool.parent.is_dir():
        return result
    for path in _claim(spool):
        try:
            _ingest_file(store, path, result)
        except FileNotFoundError:
            log.info("%s was taken by another ingester", path.name)
    return result


def _ingest_file(store: Store, path: Path, result: IngestResult) -> None:
    offset, quiet_checks = 0, 0
    while quiet_checks < 2:
        # A writer that opened the spool just before the rename may still append to the
        # claimed file; keep reading until it has been quiet twice in a row.
        lines, offset, partial = _read_from(path, offset)
        if lines:
            quiet_checks = 0
            _count(store, path, lines, result)
        else:
            quiet_checks += 1
        time.sleep(SPOOL_SETTLE_S)
    if partial:
        result.bad_lines += 1
        log.warning("%s: partial last line ignored", path.name)
    path.unlink()


def _count(store: Store, path: Path, lines: list[str], result: IngestResult) -> None:
    records = []
    for line in lines:
        if not line.strip():
            continue
        result.lines += 1
        rec = parse_record(line)
        if rec is None:
            result.bad_lines += 1
            log.warning("%s: malformed line ignored", path.name)
            continue
        records.append(rec)
    new, updated = store.record_citations(records)
    result.new_parts += new
    result.outputs_updated += updated
