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

Path safety: symlinks are never tolerated under the root (they are removed where found). Every
write goes through :func:`memoryd.fsutil.atomic_write` after each existing parent component has
been lstat'ed; a symlinked or non-directory parent raises :class:`PathError` instead of being
replaced, because the callers clear links first and one showing up mid-run means something is
racing us. Reads use ``O_NOFOLLOW`` and check the opened file is regular.

Only the agent-owned paths may change while the consolidation agent runs; everything else is
snapshotted before and put back afterwards (:meth:`Workspace.restore_protected`).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from memoryd.clock import DAY, Clock
from memoryd.errors import PathError
from memoryd.fsutil import atomic_write, lstat_or_none, read_regular_with_mode
from memoryd.layout import (
    AD_HOC_INSTRUCTIONS,
    AD_HOC_NOTES,
    DIFF_FILE,
    EXTENSIONS_DIR,
    MEMORY_FILE,
    PROJECT_FILE,
    PROJECT_NOTES,
    RAW_MEMORIES_FILE,
    SKILLS_DIR,
    STAMP_FORMAT,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    SUMMARY_VERSION,
    assign_stems,
    is_tracked,
    path_parts,
    render_project_file,
    render_raw_memories,
    render_rollout_summary,
    rollout_stem,
    sanitize_slug,
)
from memoryd.paths import templates_dir
from memoryd.project_folders import ProjectFolders
from memoryd.scopes import PROJECTS_DIR, is_scope_key
from memoryd.store.outputs import Output
from memoryd.tuning import RESOURCE_RETENTION_DAYS

__all__ = [
    "AGENT_OWNED",
    "LAYOUT_DIRS",
    "AD_HOC_INSTRUCTIONS",
    "AD_HOC_NOTES",
    "DIFF_FILE",
    "EXTENSIONS_DIR",
    "MEMORY_FILE",
    "PROJECT_FILE",
    "PROJECT_NOTES",
    "RAW_MEMORIES_FILE",
    "SKILLS_DIR",
    "SUMMARIES_DIR",
    "SUMMARY_FILE",
    "SUMMARY_VERSION",
    "STAMP_FORMAT",
    "assign_stems",
    "render_project_file",
    "render_raw_memories",
    "render_rollout_summary",
    "rollout_stem",
    "sanitize_slug",
    "FileState",
    "Snapshot",
    "SyncResult",
    "Workspace",
    "is_agent_owned",
    "is_tracked",
]

log = logging.getLogger(__name__)


# The only things the consolidation agent may change; a trailing "/" means the whole subtree and
# "*" one project key.
AGENT_OWNED: tuple[str, ...] = (
    MEMORY_FILE,
    SUMMARY_FILE,
    SKILLS_DIR + "/",
    f"{PROJECTS_DIR}/*/{SUMMARY_FILE}",
    f"{PROJECTS_DIR}/*/{MEMORY_FILE}",
)

LAYOUT_DIRS: tuple[str, ...] = (
    SUMMARIES_DIR,
    SKILLS_DIR,
    EXTENSIONS_DIR,
    "extensions/ad_hoc",
    AD_HOC_NOTES,
    PROJECTS_DIR,
)


_STAMP_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}")


def is_agent_owned(relpath: str) -> bool:
    """Whether the consolidation agent may change this path (see :data:`AGENT_OWNED`)."""
    parts = path_parts(relpath)
    rel = "/".join(parts)
    for owned in AGENT_OWNED:
        if "*" in owned:
            pattern = owned.split("/")
            if len(parts) == len(pattern) and all(
                p == q or (q == "*" and is_scope_key(p))
                for p, q in zip(parts, pattern, strict=True)
            ):
                return True
        elif owned.endswith("/"):
            if rel == owned[:-1] or rel.startswith(owned):
                return True
        elif _segments_match(owned.split("/"), parts):
            return True
    return False


def holds_agent_owned(relpath: str) -> bool:
    """Whether a folder at ``relpath`` is, or may contain, something the agent owns."""
    parts = path_parts(relpath)
    if is_agent_owned(relpath):
        return True
    return any(
        len(parts) < len(owned.rstrip("/").split("/"))
        and _segments_match(owned.rstrip("/").split("/")[: len(parts)], parts)
        for owned in AGENT_OWNED
    )


def _segments_match(pattern: list[str], parts: list[str]) -> bool:
    return len(pattern) == len(parts) and all(
        p in ("*", q) for p, q in zip(pattern, parts, strict=True)
    )


def _protected(relpath: str) -> bool:
    return is_tracked(relpath) and not is_agent_owned(relpath)


def _mkdir(path: Path, *, parents: bool = False) -> None:
    try:
        path.mkdir(parents=parents, exist_ok=parents)
    except OSError as exc:
        raise PathError(path, f"cannot create directory ({exc.strerror or exc})") from exc


@dataclass(frozen=True)
class FileState:
    data: bytes
    mode: int


@dataclass(frozen=True)
class Snapshot:
    """Protected content before the agent ran: files by relpath, real dirs, and other entries left alone."""

    files: dict[str, FileState] = field(default_factory=dict)
    dirs: frozenset[str] = frozenset()
    others: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SyncResult:
    written: list[str]
    removed: list[str]
    stems: dict[str, str]

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)


class Workspace(ProjectFolders):
    """The memory folder at ``root``; see the module docstring for layout and safety rules."""

    def __init__(self, root: Path, *, clock: Clock) -> None:
        self.root = Path(root)
        self._clock = clock

    # -- safety helpers ---------------------------------------------------------------------

    def _check_root(self) -> bool:
        """True when the root exists; raises if it is a symlink or not a directory."""
        st = lstat_or_none(self.root)
        if st is None:
            return False
        if stat.S_ISLNK(st.st_mode):
            raise PathError(self.root, "is a symlink; memoryd refuses to work through links")
        if not stat.S_ISDIR(st.st_mode):
            raise PathError(self.root, "exists and is not a directory")
        return True

    def _make_root(self) -> None:
        if not self._check_root():
            _mkdir(self.root, parents=True)
            self._check_root()

    def _path(self, relpath: str, *, make_parents: bool = False) -> Path:
        """Absolute path for ``relpath`` after checking every existing parent is a real directory.

        Missing parents are created (``make_parents``) with ``mkdir``, which never follows a link.
        """
        pure = PurePosixPath(relpath)
        if not pure.parts or pure.is_absolute() or any(p in (".", "..") for p in pure.parts):
            raise PathError(relpath, "is not a plain path inside the memory folder")
        target = self.root.joinpath(*pure.parts)
        if make_parents:
            self._make_root()
        elif not self._check_root():
            return target
        current = self.root
        for part in pure.parts[:-1]:
            current = current / part
            st = lstat_or_none(current)
            if st is None and not make_parents:
                return target
            if st is None:
                _mkdir(current)
            elif stat.S_ISLNK(st.st_mode):
                raise PathError(current, "is a symlink; refusing to write through it")
            elif not stat.S_ISDIR(st.st_mode):
                raise PathError(current, "is not a directory")
        return target

    def _write(self, relpath: str, data: bytes, *, mode: int = 0o644) -> None:
        atomic_write(self._path(relpath, make_parents=True), data, mode=mode)

    def write_file(self, relpath: str, data: bytes) -> None:
        """Write one file atomically, never through a link (used by the rollback)."""
        self._write(relpath, data)

    def remove_file(self, relpath: str) -> None:
        path = self._path(relpath)
        st = lstat_or_none(path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(path)

    def _write_if_changed(self, relpath: str, text: str) -> bool:
        data = text.encode("utf-8")
        current = read_regular_with_mode(self._path(relpath), skip_irregular=True)
        if current is not None and current[0] == data:
            return False
        self._write(relpath, data)
        return True

    def _ensure_dir(self, relpath: str) -> bool:
        """Create ``relpath`` as a real directory; False if something else is in the way."""
        path = self._path(relpath, make_parents=True)
        st = lstat_or_none(path)
        if st is None:
            _mkdir(path)
            return True
        return stat.S_ISDIR(st.st_mode)

    def _walk(self, rel: str = "") -> Iterator[tuple[str, os.stat_result]]:
        """Every entry under the root (or ``rel``), depth first, lstat'ed; links are never followed."""
        base = self.root / rel if rel else self.root
        try:
            with os.scandir(base) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            relpath = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            yield relpath, st
            if stat.S_ISDIR(st.st_mode):
                yield from self._walk(relpath)

    # -- layout -------------------------------------------------------------------------------

    def ensure_layout(self) -> list[str]:
        """Create the folders, clear symlinks, seed the ad-hoc instructions; returns removed links.

        ``MEMORY.md`` and ``memory_summary.md`` are not seeded: their absence fails validation,
        which is what forces the first consolidation to run.
        """
        self._make_root()
        removed = self.remove_symlinks()
        for rel in LAYOUT_DIRS:
            if not self._ensure_dir(rel):
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
        target = self._path(AD_HOC_INSTRUCTIONS, make_parents=True)
        if lstat_or_none(target) is not None:
            return  # kept as is, user edits included
        source = templates_dir() / "extensions" / "ad_hoc" / "instructions.md"
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise PathError(
                source, f"cannot read the ad-hoc instructions template ({exc.strerror or exc})"
            ) from exc
        self._write(AD_HOC_INSTRUCTIONS, data)
        log.info("memory folder: seeded %s", AD_HOC_INSTRUCTIONS)

    def remove_symlinks(self) -> list[str]:
        """Delete every symlink under the root (the links, never their targets); returns their relpaths."""
        if not self._check_root():
            return []
        removed = []
        for relpath, st in list(self._walk()):
            if stat.S_ISLNK(st.st_mode):
                try:
                    os.unlink(self.root / relpath)
                except FileNotFoundError:
                    continue
                log.warning("memory folder: removed symlink %s", relpath)
                removed.append(relpath)
        return removed

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
        if not self._ensure_dir(PROJECTS_DIR):
            raise PathError(self.root / PROJECTS_DIR, "exists and is not a directory")
        for key, outs in sorted(by_scope.items(), key=lambda kv: str(kv[0])):
            assert key is not None
            base = f"{PROJECTS_DIR}/{key}"
            root = outs[0].scope_root or ""
            if self._write_if_changed(
                f"{base}/{PROJECT_FILE}", render_project_file(key, root, outs)
            ):
                written.append(f"{base}/{PROJECT_FILE}")
            self._sync_inputs(base, outs, stems, written, removed)
        removed += self._drop_projects(keep={k for k in by_scope if k is not None})
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
        if not self._ensure_dir(summaries):
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
            if self._write_if_changed(relpath, render_rollout_summary(out)):
                written.append(relpath)
        if self._write_if_changed(prefix + RAW_MEMORIES_FILE, render_raw_memories(outs, stems)):
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
        if not self._check_root():
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
        if not self._check_root():
            return False
        for relpath, st in self._walk():
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

    # -- guarding the agent's run -------------------------------------------------------------

    def snapshot_protected(self) -> Snapshot:
        """Content and mode of every tracked file the agent must not change."""
        files: dict[str, FileState] = {}
        dirs: set[str] = set()
        others: set[str] = set()
        if not self._check_root():
            return Snapshot()
        for relpath, st in self._walk():
            if not _protected(relpath) or stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_ISDIR(st.st_mode):
                dirs.add(relpath)
                continue
            got = (
                read_regular_with_mode(self.root / relpath, skip_irregular=True)
                if stat.S_ISREG(st.st_mode)
                else None
            )
            if got is None:
                others.add(relpath)
            else:
                files[relpath] = FileState(data=got[0], mode=got[1])
        return Snapshot(files=files, dirs=frozenset(dirs), others=frozenset(others))

    def restore_protected(self, snap: Snapshot) -> list[str]:
        """Undo the agent's changes outside :data:`AGENT_OWNED`; returns every relpath touched.

        Symlinks go first, then protected entries the agent created, then modified or deleted
        files (and folders) come back with their old bytes and mode. User notes survive this way
        whatever the agent did.
        """
        touched: set[str] = set(self.remove_symlinks())
        self._make_root()
        known = set(snap.files) | snap.others
        created_dirs: list[str] = []
        for relpath, st in list(self._walk()):
            if not _protected(relpath):
                continue
            if stat.S_ISDIR(st.st_mode):
                if relpath not in snap.dirs:
                    created_dirs.append(relpath)
            elif relpath not in known:
                os.unlink(self.root / relpath)
                touched.add(relpath)
        for relpath in sorted(created_dirs, reverse=True):  # children before parents
            if relpath in snap.files:
                shutil.rmtree(self.root / relpath)  # a folder squatting on a protected file
                touched.add(relpath)
                continue
            try:
                os.rmdir(self.root / relpath)
                touched.add(relpath)
            except OSError:
                pass  # still holds untracked (dot) entries; git ignores empty-of-tracked folders
        for relpath in sorted(snap.dirs):  # parents sort before their children
            if lstat_or_none(self.root / relpath) is None:
                self._ensure_dir(relpath)
                touched.add(relpath)
        for relpath, state in sorted(snap.files.items()):
            try:
                current = read_regular_with_mode(
                    self._path(relpath, make_parents=True), skip_irregular=True
                )
            except PathError:
                current = None  # e.g. made unreadable: rewrite it
            if current == (state.data, state.mode):
                continue
            self._write(relpath, state.data, mode=state.mode)
            touched.add(relpath)
        result = sorted(touched)
        for relpath in result:
            log.warning(
                "memory folder: undid the consolidation agent's change to protected %s", relpath
            )
        return result

    # -- validation and transient files -------------------------------------------------------

    def validate(self) -> list[str]:
        """Problems with the agent's artifacts, ``[]`` when phase 2 may count the run as done.

        Symlinks anywhere are removed *and* reported: their presence alone makes a run invalid.
        """
        problems: list[str] = []
        if not self._check_root():
            return [f"memory folder {self.root} does not exist"]
        links = self.remove_symlinks()
        if links:
            problems.append(f"symlinks are not allowed (removed: {', '.join(links)})")
        for name in (MEMORY_FILE, SUMMARY_FILE):
            st = lstat_or_none(self.root / name)
            if st is None or not stat.S_ISREG(st.st_mode):
                problems.append(f"{name} is {'missing' if st is None else 'not a regular file'}")
        got = read_regular_with_mode(self.root / SUMMARY_FILE, skip_irregular=True)
        if got is not None and got[0].split(b"\n", 1)[0].removesuffix(b"\r") != SUMMARY_VERSION:
            problems.append(
                f"the first line of {SUMMARY_FILE} must be exactly {SUMMARY_VERSION.decode()!r}"
            )
        st = lstat_or_none(self.root / SKILLS_DIR)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            problems.append(f"{SKILLS_DIR}/ is not a directory")
        problems += self.validate_projects()
        return problems

    def write_diff_file(self, text: str) -> Path:
        """Write ``phase2_workspace_diff.md`` atomically (never through a link)."""
        self._write(DIFF_FILE, text.encode("utf-8"))
        return self.root / DIFF_FILE

    def remove_diff_file(self) -> None:
        path = self._path(DIFF_FILE)
        st = lstat_or_none(path)
        if st is not None and stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        elif st is not None:
            os.unlink(path)

    def summary_text(self) -> str | None:
        """Text of ``memory_summary.md`` for the read path; ``None`` when absent, not regular, or blank.

        The text is returned even without the ``v1`` line; :meth:`validate` is the gate for that.
        """
        got = read_regular_with_mode(self._path(SUMMARY_FILE), skip_irregular=True)
        if got is None:
            return None
        text = got[0].decode("utf-8", errors="replace")
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
