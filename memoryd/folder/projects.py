"""The ``projects/<key>/`` folders of the memory folder: which exist, when one goes, what is valid.

A project folder exists while its project has selected outputs or the user's notes; the
consolidator may write only its ``memory_summary.md`` and ``MEMORY.md`` (see
:data:`memoryd.folder.workspace.AGENT_OWNED`), and those must belong to a folder memoryd made.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat

from memoryd.folder.audit import owned_file_problem, version_problems
from memoryd.folder.layout import (
    MEMORY_FILE,
    PROJECT_FILE,
    PROJECT_NOTES,
    RAW_MEMORIES_FILE,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    is_tracked,
)
from memoryd.folder.root import MemoryFolder
from memoryd.fsutil import lstat_or_none
from memoryd.scopes import PROJECTS_DIR, is_scope_key

log = logging.getLogger(__name__)


class ProjectFolders:
    """The project folders of one memory folder; :class:`memoryd.folder.workspace.Workspace` holds one."""

    def __init__(self, folder: MemoryFolder) -> None:
        self.folder = folder
        self.root = folder.root

    def drop(self, keep: set[str]) -> list[str]:
        """Remove the folders of projects with nothing selected and no notes; returns file relpaths."""
        removed: list[str] = []
        for name in self.keys():
            if name in keep:
                continue
            base = f"{PROJECTS_DIR}/{name}"
            if self.has_files(f"{base}/{PROJECT_NOTES}"):
                # The user's notes keep the project (and its layer) alive; its session inputs go.
                stale = [f"{base}/{RAW_MEMORIES_FILE}"] + [
                    rel
                    for rel, st in self.folder.walk(f"{base}/{SUMMARIES_DIR}")
                    if stat.S_ISREG(st.st_mode)
                ]
                for rel in stale:
                    if lstat_or_none(self.root / rel) is not None:
                        os.unlink(self.root / rel)
                        removed.append(rel)
                continue
            removed += [
                rel
                for rel, st in self.folder.walk(base)
                if stat.S_ISREG(st.st_mode) and is_tracked(rel)
            ]
            shutil.rmtree(self.root / base)
            log.info("memory folder: project %s has no memories left; removed its folder", name)
        return removed

    def has_files(self, rel: str) -> bool:
        return any(stat.S_ISREG(st.st_mode) and is_tracked(r) for r, st in self.folder.walk(rel))

    def keys(self) -> list[str]:
        """Keys of the project folders present (real directories with a key-shaped name)."""
        base = self.root / PROJECTS_DIR
        st = lstat_or_none(base)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return []
        with os.scandir(base) as it:
            return sorted(
                e.name for e in it if e.is_dir(follow_symlinks=False) and is_scope_key(e.name)
            )

    def validate(self) -> list[str]:
        """Each project layer must belong to a project memoryd rendered and carry the ``v1`` line."""
        problems: list[str] = []
        base = self.root / PROJECTS_DIR
        st = lstat_or_none(base)
        if st is None:
            return problems
        if not stat.S_ISDIR(st.st_mode):
            return [f"{PROJECTS_DIR}/ is not a directory"]
        with os.scandir(base) as it:
            names = sorted(e.name for e in it if not e.name.startswith("."))
        for name in names:
            rel = f"{PROJECTS_DIR}/{name}"
            st = lstat_or_none(self.root / rel)
            if not is_scope_key(name) or st is None or not stat.S_ISDIR(st.st_mode):
                problems.append(f"{rel} is not a project folder memoryd made")
                continue
            if lstat_or_none(self.root / rel / PROJECT_FILE) is None and not self.has_files(
                f"{rel}/{PROJECT_NOTES}"
            ):
                problems.append(f"{rel}/ is not a known project (no {PROJECT_FILE}, no notes)")
            for fname in (SUMMARY_FILE, MEMORY_FILE):
                fst = lstat_or_none(self.root / rel / fname)
                problem = owned_file_problem(f"{rel}/{fname}", fst)
                if problem:
                    problems.append(problem)
                elif fst is not None and fname == SUMMARY_FILE:
                    problems += version_problems(self.root, f"{rel}/{fname}")
        return problems
