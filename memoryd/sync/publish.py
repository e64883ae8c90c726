"""What this machine publishes, and the secret scan that stands between it and the remote.

Published: every current stage-1 output phase 2 could use, as soon as it is extracted (memory
modes, tombstones and the retention window applied at publish time, exactly as the consolidation
selection applies them), the ad-hoc notes, and the tombstones of
sessions forgotten here. Outputs are stored redacted already; the scan below runs anyway on every
file a push would add or change, because a note can be dropped into the folder by hand and a
detector can improve between extraction and publication. (Files the remote already holds passed
it when they were pushed, which keeps a no-change sync of 1,000 outputs from rescanning them.) One flagged file stops the whole push: publishing the rest
would make a partial memory look complete.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import PathError
from memoryd.extensions.shared import read_source
from memoryd.folder.layout import AD_HOC_NOTES
from memoryd.redact import find_secrets
from memoryd.store import Store
from memoryd.store.keys import SYNC_MACHINE
from memoryd.store.outputs import Output
from memoryd.sync.branch import (
    MACHINE_FILE,
    MAX_NOTE_BYTES,
    NOTE_NAME_RE,
    NOTES,
    TOMBSTONES,
    PublishedSession,
    machine_bytes,
    new_machine_id,
    session_path,
    tombstones_bytes,
)
from memoryd.sync.checkouts import folder_name, origin_url
from memoryd.tuning import SYNC_MAX_SESSIONS_PER_MACHINE

log = logging.getLogger(__name__)


def machine_id(store: Store) -> str:
    """This machine's stable id, created on first use and kept in memoryd's state."""
    saved = store.ledger.get_state(SYNC_MACHINE)
    if isinstance(saved, dict) and isinstance(saved.get("id"), str):
        return str(saved["id"])
    mid = new_machine_id()
    store.ledger.put_state(SYNC_MACHINE, {"id": mid, "name": socket.gethostname()})
    return mid


def machine_name(store: Store) -> str:
    saved = store.ledger.get_state(SYNC_MACHINE)
    if isinstance(saved, dict) and isinstance(saved.get("name"), str):
        return str(saved["name"])
    return socket.gethostname()


@dataclass(frozen=True)
class Publication:
    """This machine's folder: relpath (under ``machines/<id>/``) -> bytes."""

    machine_id: str
    files: dict[str, bytes]
    sessions: int
    notes: int
    tombstones: int

    def scan(self, only: set[str] | None = None) -> list[tuple[str, list[str]]]:
        """Every file (of ``only``, when given) the secret detector flags: (relpath, rule families)."""
        flagged = []
        for rel, data in sorted(self.files.items()):
            if only is not None and rel not in only:
                continue
            kinds = find_secrets(data.decode("utf-8", errors="replace"))
            if kinds:
                flagged.append((rel, kinds))
        return flagged


def _session(out: Output, repos: dict[str, str | None]) -> PublishedSession:
    root = out.scope_root
    if root is not None and root not in repos:
        repos[root] = origin_url(root)
    return PublishedSession(
        session_id=out.session_id,
        updated_at=out.source_updated_at,
        raw_memory=out.raw_memory,
        rollout_summary=out.rollout_summary,
        cwd=out.cwd,
        title=out.title,
        slug=out.rollout_slug,
        repo=repos.get(root) if root is not None else None,
        project=folder_name(root),
    )


def _notes(memory_root: Path) -> dict[str, bytes]:
    folder = memory_root.joinpath(*AD_HOC_NOTES.split("/"))
    if folder.is_symlink() or not folder.is_dir():
        return {}
    notes: dict[str, bytes] = {}
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it)
    for name in names:
        if not NOTE_NAME_RE.fullmatch(name):
            if not name.startswith("."):
                log.info("sync: not publishing note %r (unusual file name)", name)
            continue
        try:
            data = read_source(folder / name, limit=MAX_NOTE_BYTES)
        except PathError as exc:
            log.warning("sync: not publishing note %s: %s", name, exc)
            continue
        if data is not None:
            notes[name] = data
    return notes


def build_publication(store: Store, memory_root: Path, max_unused_days: int) -> Publication:
    """This machine's folder as it should be on the remote now (DB reads: call on the store's thread)."""
    mid = machine_id(store)
    files: dict[str, bytes] = {MACHINE_FILE: machine_bytes(mid, machine_name(store))}
    outputs = [
        Output.from_row(r)
        for r in store.tombstones.published_outputs(max_unused_days, SYNC_MAX_SESSIONS_PER_MACHINE)
    ]
    repos: dict[str, str | None] = {}  # checkout root -> identity, read once per publication
    for out in outputs:
        files[session_path(out.session_id)] = _session(out, repos).to_bytes()
    notes = _notes(memory_root)
    for name, data in notes.items():
        files[f"{NOTES}/{name}"] = data
    tombstones = store.tombstones.tombstones()
    if tombstones:
        files[TOMBSTONES] = tombstones_bytes(tombstones)
    return Publication(mid, files, len(outputs), len(notes), len(tombstones))
