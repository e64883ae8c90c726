"""The last validated memory: a copy of the agent-owned files, kept outside the memory folder.

The consolidation agent edits ``MEMORY.md``, ``memory_summary.md``, ``skills/`` (and project
summary layers) in place, and a run can fail, be aborted or be killed half way. Every turn of
the user's agent must still see memory that passed validation, so the read path never renders
from the live folder: it renders from this copy, which changes only when a run validated or
when a hand edit made outside any run validates. A failed or interrupted run is rolled back
from it (:mod:`memoryd.folder.rollback`).

The copy mirrors the folder's layout (``<state>/validated/memory_summary.md`` …). Each file is
replaced atomically and stale ones are removed afterwards, so the summary is never missing while
the copy moves; a crash in between leaves a mix of two validated states, never an unvalidated one.
This module only reads and writes the copy; it is shared by the read and the write side.

The copy is read like the folder (:func:`memoryd.folder.audit.read_memory_file`): a file in it
that is hard-linked, not regular or over its kind's cap is skipped, whoever put it there.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

from memoryd.errors import PathError
from memoryd.folder.audit import read_memory_file
from memoryd.folder.layout import SUMMARY_FILE
from memoryd.fsutil import atomic_write, remove_empty_parents
from memoryd.paths import Paths

log = logging.getLogger(__name__)

# Present once a validated state was recorded (even an empty one): tells "nothing validated yet"
# apart from "validated, and there is no memory".
RECORD_FILE = ".recorded.json"


class ValidatedMemory:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.root = paths.validated_memory

    @property
    def summary_path(self) -> Path:
        return self.root / SUMMARY_FILE

    def recorded(self) -> bool:
        return os.path.lexists(self.root / RECORD_FILE)

    def summary(self) -> bytes | None:
        """Bytes of the validated ``memory_summary.md``; ``None`` when there is none."""
        try:
            return read_memory_file(self.root, SUMMARY_FILE)
        except PathError as exc:
            log.warning("validated memory: %s", exc)
            return None

    def files(self) -> dict[str, bytes] | None:
        """relpath → bytes of every validated file; ``None`` when nothing was ever recorded."""
        if not self.recorded():
            return None
        out: dict[str, bytes] = {}
        for rel in self._walk():
            try:
                data = read_memory_file(self.root, rel)
            except PathError as exc:
                log.warning("validated memory: skipping %s", exc)
                continue
            if data is not None:
                out[rel] = data
        return out

    def _walk(self) -> list[str]:
        found: list[str] = []
        stack = [(self.root, "")]
        while stack:
            folder, rel = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except FileNotFoundError:
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append((Path(entry.path), f"{rel}{entry.name}/"))
                elif stat.S_ISREG(st.st_mode):
                    found.append(f"{rel}{entry.name}")
        return sorted(found)

    def record(self, files: dict[str, bytes], *, source: str) -> bool:
        """Make ``files`` the validated state; returns whether anything changed."""
        self.paths.ensure_dir(self.root)
        current = self.files() or {}
        changed = False
        for rel, data in sorted(files.items()):
            if current.get(rel) != data:
                target = self.root / rel
                self.paths.ensure_dir(target.parent)
                atomic_write(target, data)
                changed = True
        for rel in sorted(set(current) - set(files)):
            (self.root / rel).unlink(missing_ok=True)
            remove_empty_parents((self.root / rel).parent, self.root)
            changed = True
        if changed or not self.recorded():
            atomic_write(self.root / RECORD_FILE, json.dumps({"source": source}) + "\n")
            log.info("validated memory updated from %s (%d file(s))", source, len(files))
        return changed
