"""What the consolidation agent may change in the memory folder, and the audit of what it did.

Only the agent-owned paths (:data:`AGENT_OWNED`) may change while the agent runs: every other
tracked entry is snapshotted before and put back afterwards, so the user's notes and the rendered
inputs survive whatever the agent did. Validation then decides whether its own files are good
enough for phase 2 to count the run as done. Split out of :mod:`memoryd.folder.workspace`, which
delegates to these functions; they work on any :class:`~memoryd.folder.root.MemoryFolder`.

Validation judges every agent-owned file by its ``lstat`` first (:func:`owned_file_problem`: a
regular file with one link, within its kind's cap, :func:`memory_file_cap`), so a planted 50 MB
summary or a hard link to a file elsewhere costs one ``lstat`` and never becomes memory. Whoever
reads an agent-owned file whole afterwards (the validated copy, the block, the scrub) goes
through :func:`read_memory_file`, which checks the same on the descriptor it reads.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.errors import FileTooLarge, NotRegularFile, PathError
from memoryd.folder.layout import (
    MEMORY_FILE,
    SKILLS_DIR,
    SUMMARY_FILE,
    SUMMARY_HEADINGS,
    SUMMARY_VERSION,
    is_tracked,
    path_parts,
)
from memoryd.folder.root import MemoryFolder
from memoryd.fsutil import lstat_or_none, read_regular, read_regular_with_mode
from memoryd.scopes import PROJECTS_DIR, is_scope_key
from memoryd.tuning import (
    MEMORY_MAX_BYTES,
    SKILL_MAX_BYTES,
    SUMMARY_MAX_BYTES,
    SUMMARY_VALID_MAX_BYTES,
)

__all__ = [
    "AGENT_OWNED",
    "FileState",
    "Snapshot",
    "holds_agent_owned",
    "is_agent_owned",
    "memory_file_cap",
    "owned_file_problem",
    "read_memory_file",
    "restore_protected",
    "with_user_writes",
    "snapshot_protected",
    "validate_root_files",
    "version_problems",
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


_OWNED_TOPS = frozenset({MEMORY_FILE, SUMMARY_FILE, SKILLS_DIR, PROJECTS_DIR})


def memory_file_cap(relpath: str) -> int | None:
    """The size cap of an agent-owned file (see ``tuning.py`` for why each); ``None`` for others.

    Called for every file a memory tool walks, so anything outside the agent's top-level names is
    answered by one set lookup.
    """
    parts = path_parts(relpath)
    if not parts or parts[0] not in _OWNED_TOPS or not is_agent_owned(relpath):
        return None
    if parts[0] == SKILLS_DIR:
        return SKILL_MAX_BYTES
    return SUMMARY_MAX_BYTES if parts[-1] == SUMMARY_FILE else MEMORY_MAX_BYTES


def owned_file_problem(relpath: str, st: os.stat_result | None) -> str | None:
    """Why the agent-owned entry ``relpath`` (its ``lstat``) cannot be memory; ``None`` when it can
    or is absent. Nothing is read: a file is judged by its type, link count and size."""
    if st is None:
        return None
    problem: PathError | None = None
    cap = memory_file_cap(relpath)
    if not stat.S_ISREG(st.st_mode):
        problem = NotRegularFile(relpath, "is not a regular file")
    elif st.st_nlink != 1:
        problem = NotRegularFile(relpath, f"is hard-linked ({st.st_nlink} names for one file)")
    elif cap is not None and st.st_size > cap:
        problem = FileTooLarge(relpath, st.st_size, cap)
    return None if problem is None else f"{problem.path} {problem.problem}"


def read_memory_file(root: Path, relpath: str) -> bytes | None:
    """Bytes of ``root/relpath`` (a memory folder or the validated copy), ``None`` when absent.

    Raises :class:`NotRegularFile` for a link or special file and :class:`FileTooLarge` over the
    file's cap, both before anything is read.
    """
    return read_regular(root / relpath, limit=memory_file_cap(relpath))


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


def snapshot_protected(folder: MemoryFolder) -> Snapshot:
    """Content and mode of every tracked file the agent must not change."""
    files: dict[str, FileState] = {}
    dirs: set[str] = set()
    others: set[str] = set()
    if not folder.check_root():
        return Snapshot()
    for relpath, st in folder.walk():
        if not _protected(relpath) or stat.S_ISLNK(st.st_mode):
            continue
        if stat.S_ISDIR(st.st_mode):
            dirs.add(relpath)
            continue
        got = (
            read_regular_with_mode(folder.root / relpath, skip_irregular=True)
            if stat.S_ISREG(st.st_mode)
            else None
        )
        if got is None:
            others.add(relpath)
        else:
            files[relpath] = FileState(data=got[0], mode=got[1])
    return Snapshot(files=files, dirs=frozenset(dirs), others=frozenset(others))


def with_user_writes(
    folder: MemoryFolder, snap: Snapshot, writes: dict[str, bytes | None]
) -> Snapshot:
    """The snapshot as the user changed it while the agent ran (notes memoryd wrote for them):
    a note added is expected as written, a note deleted is not brought back."""
    files = dict(snap.files)
    dirs = set(snap.dirs)
    for relpath, data in writes.items():
        if data is None:
            files.pop(relpath, None)
            continue
        try:
            got = read_regular_with_mode(folder.root / relpath, skip_irregular=True)
        except PathError:
            got = None
        files[relpath] = FileState(data, got[1] if got is not None and got[0] == data else 0o644)
        parts = relpath.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return Snapshot(files=files, dirs=frozenset(dirs), others=snap.others)


def restore_protected(folder: MemoryFolder, snap: Snapshot) -> list[str]:
    """Undo the agent's changes outside :data:`AGENT_OWNED`; returns every relpath touched.

    Symlinks go first, then protected entries the agent created, then modified or deleted
    files (and folders) come back with their old bytes and mode. User notes survive this way
    whatever the agent did.
    """
    touched: set[str] = set(folder.remove_symlinks())
    folder.make_root()
    known = set(snap.files) | snap.others
    created_dirs: list[str] = []
    for relpath, st in list(folder.walk()):
        if not _protected(relpath):
            continue
        if stat.S_ISDIR(st.st_mode):
            if relpath not in snap.dirs:
                created_dirs.append(relpath)
        elif relpath not in known:
            os.unlink(folder.root / relpath)
            touched.add(relpath)
    for relpath in sorted(created_dirs, reverse=True):  # children before parents
        if relpath in snap.files:
            shutil.rmtree(folder.root / relpath)  # a folder squatting on a protected file
            touched.add(relpath)
            continue
        try:
            os.rmdir(folder.root / relpath)
            touched.add(relpath)
        except OSError:
            pass  # still holds untracked (dot) entries; git ignores empty-of-tracked folders
    for relpath in sorted(snap.dirs):  # parents sort before their children
        if lstat_or_none(folder.root / relpath) is None:
            folder.ensure_dir(relpath)
            touched.add(relpath)
    for relpath, state in sorted(snap.files.items()):
        try:
            current = read_regular_with_mode(
                folder.path(relpath, make_parents=True), skip_irregular=True
            )
        except PathError:
            current = None  # e.g. made unreadable: rewrite it
        if current == (state.data, state.mode):
            continue
        folder.write_file(relpath, state.data, mode=state.mode)
        touched.add(relpath)
    result = sorted(touched)
    for relpath in result:
        log.warning(
            "memory folder: undid the consolidation agent's change to protected %s", relpath
        )
    return result


def validate_root_files(folder: MemoryFolder) -> list[str]:
    """Problems with the agent's root artifacts (the global layer), ``[]`` when there are none.

    Symlinks anywhere are removed *and* reported: their presence alone makes a run invalid. The
    project layers are checked by :meth:`~memoryd.folder.projects.ProjectFolders.validate`;
    :meth:`memoryd.folder.workspace.Workspace.validate` runs both.
    """
    problems: list[str] = []
    if not folder.check_root():
        return [f"memory folder {folder.root} does not exist"]
    links = folder.remove_symlinks()
    if links:
        problems.append(f"symlinks are not allowed (removed: {', '.join(links)})")
    for name in (MEMORY_FILE, SUMMARY_FILE):
        st = lstat_or_none(folder.root / name)
        problem = f"{name} is missing" if st is None else owned_file_problem(name, st)
        if problem:
            problems.append(problem)
        elif name == SUMMARY_FILE:
            problems += version_problems(folder.root, name) or summary_shape_problems(
                folder.root, name
            )
    st = lstat_or_none(folder.root / SKILLS_DIR)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        problems.append(f"{SKILLS_DIR}/ is not a directory")
    elif st is not None:
        for relpath, found in folder.walk(SKILLS_DIR):
            problem = None if stat.S_ISDIR(found.st_mode) else owned_file_problem(relpath, found)
            if problem:
                problems.append(problem)
    return problems


def version_problems(root: Path, relpath: str) -> list[str]:
    """A summary that passed :func:`owned_file_problem` must start with the ``v1`` line."""
    try:
        data = read_memory_file(root, relpath)
    except PathError as exc:  # changed since its lstat
        return [str(exc)]
    if data is not None and data.split(b"\n", 1)[0].removesuffix(b"\r") != SUMMARY_VERSION:
        return [f"the first line of {relpath} must be exactly {SUMMARY_VERSION.decode()!r}"]
    return []


def _heading(line: str) -> str | None:
    """The known summary heading ``line`` names, in any case and in Codex's wording too."""
    name = " ".join(line.removeprefix("## ").replace("’", "'").lower().split())
    name = name.replace("what's", "what is").removeprefix("user ")
    for heading in SUMMARY_HEADINGS:
        if name == heading.removeprefix("## ").lower().removeprefix("user "):
            return heading
    return None


def summary_shape_problems(root: Path, relpath: str) -> list[str]:
    """The global summary's size (under ``SUMMARY_VALID_MAX_BYTES``) and its ``##`` sections.

    Its second-level headings, when it has any, must be the known ones (``SUMMARY_HEADINGS``; case
    and Codex's names for them, "What's in Memory", "User preferences", do not matter), each once
    and in order: an agent that invents sections or shuffles them has not followed the
    format the read path and the next consolidation rely on.
    """
    try:
        data = read_memory_file(root, relpath)
    except PathError as exc:
        return [str(exc)]
    if data is None:
        return []
    if len(data) >= SUMMARY_VALID_MAX_BYTES:
        return [f"{relpath} is {len(data)} bytes; it must stay under {SUMMARY_VALID_MAX_BYTES}"]
    found = [
        line.rstrip()
        for line in data.decode("utf-8", "replace").splitlines()
        if line.startswith("## ")
    ]
    unknown = [h for h in found if _heading(h) is None]
    if unknown:
        return [f"{relpath} has a section memoryd does not know: {unknown[0]!r}"]
    known = [_heading(h) for h in found]
    if known != sorted(set(known), key=SUMMARY_HEADINGS.index):
        return [
            f"{relpath} must have its sections once each, in order: {', '.join(SUMMARY_HEADINGS)}"
        ]
    return []
