"""The memory folder that phase 2 renders inputs into and the consolidation agent edits.

Layout under the memory root::

    MEMORY.md                       agent-owned; absent until the first consolidation
    memory_summary.md               agent-owned; first line must be exactly "v1"
    skills/                         agent-owned
    raw_memories.md                 rendered here from the selected stage-1 outputs
    rollout_summaries/<stem>.md     rendered here, one per selected output
    extensions/<name>/instructions.md, extensions/<name>/resources/*.md
    extensions/ad_hoc/instructions.md (seeded), extensions/ad_hoc/notes/*.md (the user's)
    projects/<key>/project.md       rendered: which checkout the project is (see memoryd.scopes)
    projects/<key>/raw_memories.md  rendered, like the root one, from that project's outputs
    projects/<key>/rollout_summaries/<stem>.md
    projects/<key>/notes/*.md       the user's notes about that project only
    projects/<key>/memory_summary.md  agent-owned; the project's layer of the block (first line v1)
    projects/<key>/MEMORY.md        agent-owned, optional; the project's detailed memory
    phase2_workspace_diff.md        transient, never tracked by the baseline

The root files are the global layer: what holds in every project. Outputs whose project is not
known yet are rendered at the root; every other output goes to its project's folder, which exists
exactly while the project has selected outputs or notes.

Rendering is deterministic and files are rewritten only when their bytes change, so the
baseline diff moves only on real change. Usage counters are deliberately not rendered: a
citation alone must not make the workspace dirty and pay for a consolidation.

Pieces split out for size, which :class:`Workspace` holds (composed, not inherited): the path-safety primitives
(symlinks never tolerated, no write through a link) in :mod:`memoryd.folder.root`; what the
agent may change, the snapshot/restore of everything else and validation of its files in
:mod:`memoryd.folder.audit`; the ``projects/<key>/`` folders in :mod:`memoryd.folder.projects`;
file names and rendering in :mod:`memoryd.folder.layout`. Callers import each name from the
module that defines it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memoryd.clock import DAY, Clock
from memoryd.errors import FileTooLarge, NotRegularFile, PathError
from memoryd.folder import audit
from memoryd.folder.audit import (
    Snapshot,
    is_agent_owned,
)
from memoryd.folder.layout import (
    AD_HOC_INSTRUCTIONS,
    AD_HOC_NOTES,
    DIFF_FILE,
    EXTENSIONS_DIR,
    PROJECT_FILE,
    PROJECT_NOTES,
    RAW_MEMORIES_FILE,
    SKILLS_DIR,
    STAMP_FORMAT,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    assign_stems,
    is_tracked,
    path_parts,
    render_project_file,
    render_raw_memories,
    render_rollout_summary,
)
from memoryd.folder.projects import ProjectFolders
from memoryd.folder.root import MemoryFolder
from memoryd.fsutil import lstat_or_none, read_regular_with_mode
from memoryd.paths import templates_dir
from memoryd.scopes import PROJECTS_DIR
from memoryd.store.outputs import Output
from memoryd.tuning import RESOURCE_RETENTION_DAYS

# sha256 of instructions memoryd seeded before: a copy still equal to one was never edited, so
# the current template replaces it (the notes' authors, issue 22).
_SUPERSEDED_AD_HOC = frozenset({"92786b1425bee10e6354861a36a4a8682e1455b169c282d97640ffd6ba251e8b"})


log = logging.getLogger(__name__)


LAYOUT_DIRS: tuple[str, ...] = (
    SUMMARIES_DIR,
    SKILLS_DIR,
    EXTENSIONS_DIR,
    "extensions/ad_hoc",
    AD_HOC_NOTES,
    PROJECTS_DIR,
)


_STAMP_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}")


@dataclass(frozen=True)
class SyncResult:
    written: list[str]
    removed: list[str]
    stems: dict[str, str]

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


class Workspace:
    """The memory folder at ``root``; see the module docstring for layout and safety rules.

    Composed of its checked file primitives (``folder``) and its project folders (``projects``).
    """

    def __init__(self, root: Path, *, clock: Clock) -> None:
        self.folder = MemoryFolder(root)
        self.projects = ProjectFolders(self.folder)
        self.root = self.folder.root
        self._clock = clock

    def write_file(self, relpath: str, data: bytes) -> None:
        self.folder.write_file(relpath, data)

    def remove_file(self, relpath: str) -> None:
        self.folder.remove_file(relpath)

    def remove_symlinks(self) -> list[str]:
        return self.folder.remove_symlinks()

    def project_keys(self) -> list[str]:
        return self.projects.keys()

    # -- layout -------------------------------------------------------------------------------

    def ensure_layout(self) -> list[str]:
        """Create the folders, clear symlinks, seed the ad-hoc instructions; returns removed links.

        ``MEMORY.md`` and ``memory_summary.md`` are not seeded: their absence fails validation,
        which is what forces the first consolidation to run.
        """
        self.folder.make_root()
        removed = self.remove_symlinks()
        for rel in LAYOUT_DIRS:
            if not self.folder.ensure_dir(rel):
                if is_agent_owned(rel):
                    # The agent's own mess: validation reports it and the next run must fix it.
                    log.warning(
                        "memory folder: %s is not a directory; leaving it for validation", rel
                    )
                else:
                    raise PathError(self.root / rel, "exists and is not a directory")
        self._seed_ad_hoc()
        return removed

    def _seed_ad_hoc(self) -> None:
        target = self.folder.path(AD_HOC_INSTRUCTIONS, make_parents=True)
        if lstat_or_none(target) is not None:
            got = read_regular_with_mode(target, limit=1 << 20, skip_irregular=True)
            if got is None or hashlib.sha256(got[0]).hexdigest() not in _SUPERSEDED_AD_HOC:
                return  # kept as is, user edits included
        source = templates_dir() / "extensions" / "ad_hoc" / "instructions.md"
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise PathError(
                source, f"cannot read the ad-hoc instructions template ({exc.strerror or exc})"
            ) from exc
        self.folder.write_file(AD_HOC_INSTRUCTIONS, data)
        log.info("memory folder: seeded %s", AD_HOC_INSTRUCTIONS)

    # -- inputs -------------------------------------------------------------------------------

    def sync(self, selected: list[Output]) -> SyncResult:
        """Render the selection: the root inputs for unscoped outputs, one folder per project.

        Files are written only when their bytes differ. Deleting unselected summaries (and the
        folders of projects left without selected outputs or notes) is the only deletion here; it
        is what lets forgotten sessions show up as removals in the diff.
        """
        stems = assign_stems(selected)
        written: list[str] = []
        removed: list[str] = []
        by_scope: dict[str | None, list[Output]] = {}
        for out in selected:
            by_scope.setdefault(out.scope, []).append(out)
        self._sync_inputs("", by_scope.pop(None, []), stems, written, removed)
        if not self.folder.ensure_dir(PROJECTS_DIR):
            raise PathError(self.root / PROJECTS_DIR, "exists and is not a directory")
        for key, outs in sorted(by_scope.items(), key=lambda kv: str(kv[0])):
            assert key is not None
            base = f"{PROJECTS_DIR}/{key}"
            root = outs[0].scope_root or ""
            if self.folder.write_if_changed(
                f"{base}/{PROJECT_FILE}", render_project_file(key, root, outs)
            ):
                written.append(f"{base}/{PROJECT_FILE}")
            self._sync_inputs(base, outs, stems, written, removed)
        removed += self.projects.drop(keep={k for k in by_scope if k is not None})
        if written or removed:
            log.info(
                "memory folder: wrote %d file(s), removed %d file(s)", len(written), len(removed)
            )
        return SyncResult(written=sorted(written), removed=sorted(removed), stems=stems)

    def _sync_inputs(
        self,
        base: str,
        outs: list[Output],
        stems: dict[str, str],
        written: list[str],
        removed: list[str],
    ) -> None:
        prefix = f"{base}/" if base else ""
        summaries = prefix + SUMMARIES_DIR
        if not self.folder.ensure_dir(summaries):
            raise PathError(self.root / summaries, "exists and is not a directory")
        keep = {f"{stems[o.session_id]}.md" for o in outs}
        with os.scandir(self.root / summaries) as it:
            stale = sorted(
                e.name for e in it if e.name.endswith(".md") and not e.is_dir(follow_symlinks=False)
            )
        for name in stale:
            if name in keep or name.startswith("."):
                continue  # dot files are untracked; leave them be
            os.unlink(self.root / summaries / name)
            removed.append(f"{summaries}/{name}")
        for out in outs:
            relpath = f"{summaries}/{stems[out.session_id]}.md"
            if self.folder.write_if_changed(relpath, render_rollout_summary(out)):
                written.append(relpath)
        if self.folder.write_if_changed(
            prefix + RAW_MEMORIES_FILE, render_raw_memories(outs, stems)
        ):
            written.append(prefix + RAW_MEMORIES_FILE)

    def prune_extension_resources(self, retention_days: int = RESOURCE_RETENTION_DAYS) -> list[str]:
        """Delete timestamped extension resources at or past the retention cutoff; returns relpaths.

        Only ``extensions/<name>/resources/*.md`` directly, only for extensions that have an
        ``instructions.md``, and only names starting with a UTC ``%Y-%m-%dT%H-%M-%S`` stamp. Notes
        and untimestamped files are kept forever.
        """
        if retention_days < 0:
            raise ValueError("retention_days must not be negative")
        cutoff = self._clock.now_ms() - retention_days * DAY
        if not self.folder.check_root():
            return []
        ext_root = self.root / EXTENSIONS_DIR
        st = lstat_or_none(ext_root)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return []
        removed = []
        for ext in sorted(os.scandir(ext_root), key=lambda e: e.name):
            if not ext.is_dir(follow_symlinks=False):
                continue
            instr = lstat_or_none(Path(ext.path) / "instructions.md")
            res_dir = Path(ext.path) / "resources"
            res = lstat_or_none(res_dir)
            if (
                instr is None
                or not stat.S_ISREG(instr.st_mode)
                or res is None
                or not stat.S_ISDIR(res.st_mode)
            ):
                continue
            for entry in sorted(os.scandir(res_dir), key=lambda e: e.name):
                if not entry.name.endswith(".md") or not entry.is_file(follow_symlinks=False):
                    continue
                stamp = _resource_stamp(entry.name)
                if stamp is None or stamp > cutoff:
                    continue
                os.unlink(entry.path)
                relpath = f"{EXTENSIONS_DIR}/{ext.name}/resources/{entry.name}"
                log.info("memory folder: pruned extension resource %s", relpath)
                removed.append(relpath)
        return sorted(removed)

    def has_user_content(self) -> bool:
        """Whether a consolidation has anything to act on besides the inputs rendered by :meth:`sync`.

        True for notes or other extension files (to consolidate) and for earlier memory -
        ``MEMORY.md``, ``memory_summary.md``, ``skills/`` - that may now have to be forgotten.
        The seeded ad-hoc instructions alone do not count.
        """
        if not self.folder.check_root():
            return False
        for relpath, st in self.folder.walk():
            if (
                not is_tracked(relpath)
                or not stat.S_ISREG(st.st_mode)
                or relpath == AD_HOC_INSTRUCTIONS
            ):
                continue
            if is_agent_owned(relpath) or relpath.startswith(EXTENSIONS_DIR + "/"):
                return True
            parts = path_parts(relpath)
            if len(parts) > 3 and parts[0] == PROJECTS_DIR and parts[2] == PROJECT_NOTES:
                return True
        return False

    # -- guarding the agent's run (see memoryd.folder.audit) -----------------------------

    def snapshot_protected(self) -> Snapshot:
        """Content and mode of every tracked file the agent must not change."""
        return audit.snapshot_protected(self.folder)

    def restore_protected(self, snap: Snapshot) -> list[str]:
        """Undo the agent's changes outside :data:`AGENT_OWNED`; returns every relpath touched."""
        return audit.restore_protected(self.folder, snap)

    # -- validation and transient files -------------------------------------------------------

    def validate(self) -> list[str]:
        """Problems with the agent's artifacts, ``[]`` when phase 2 may count the run as done.

        Symlinks anywhere are removed *and* reported: their presence alone makes a run invalid.
        """
        return audit.validate_root_files(self.folder) + self.projects.validate()

    def write_diff_file(self, text: str) -> Path:
        """Write ``phase2_workspace_diff.md`` atomically (never through a link)."""
        self.folder.write_file(DIFF_FILE, text.encode("utf-8"))
        return self.root / DIFF_FILE

    def remove_diff_file(self) -> None:
        path = self.folder.path(DIFF_FILE)
        st = lstat_or_none(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        elif st is not None:
            os.unlink(path)

    def summary_text(self) -> str | None:
        """Text of ``memory_summary.md``; ``None`` when absent, not plain, over its cap, or blank.

        The text is returned even without the ``v1`` line; :meth:`validate` is the gate for that.
        """
        self.folder.path(SUMMARY_FILE)  # a symlinked root raises here, as everywhere in the folder
        try:
            data = audit.read_memory_file(self.root, SUMMARY_FILE)
        except (NotRegularFile, FileTooLarge):
            return None
        if data is None:
            return None
        text = data.decode("utf-8", errors="replace")
        return text if text.strip() else None


def _resource_stamp(name: str) -> int | None:
    """Epoch ms of a resource name's leading UTC ``%Y-%m-%dT%H-%M-%S`` stamp, ``None`` without one."""
    head = name[:19]
    if not _STAMP_PREFIX.fullmatch(head):
        return None
    try:
        when = datetime.strptime(head, STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(when.timestamp()) * 1000
