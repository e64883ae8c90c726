"""The consolidator's file tools when memoryd owns them: read, list, write, edit, delete.

A client CLI's own file tools confine by its permission rules, which memoryd neither wrote nor
can audit. These are memoryd's code end to end, so the confinement is too. Every path comes from
a model that read other sessions' text and is hostile until proven otherwise:

* reads and listings go through :mod:`memoryd.folder.guard` (relative paths only, no ``..``, no
  dot entries, nothing followed through a link, hard-linked and oversized files refused, every
  component opened relative to its parent's descriptor); the one extra file they may open is the
  run's diff, which the memory tools hide;
* writes, edits and deletes are allowed only where the consolidator may write
  (:func:`writable`: the agent-owned Markdown files, never a dot entry or an instruction file),
  within that file's size cap, and land by an atomic rename inside a directory opened the same
  link-refusing way, so a symlink planted at the target is replaced, never written through.

What the tools leave is still audited afterwards by phase 2 (sweep, restore, validation, scrub).
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

from memoryd.errors import FileTooLarge, InvalidArgument, NotFound, Refused
from memoryd.folder.audit import is_agent_owned, memory_file_cap
from memoryd.folder.confine import INSTRUCTION_NAMES
from memoryd.folder.guard import ensure_dirs, open_path, open_root, split_path
from memoryd.folder.layout import DIFF_FILE, SKILLS_DIR
from memoryd.fsutil import plain_file
from memoryd.tools.files import memory_list, memory_read
from memoryd.tuning import READ_MAX_BYTES, TOOL_FILE_MAX_BYTES

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
# Names a coding agent loads as instructions from a folder it works in: never written, anywhere.


def writable(relpath: str) -> tuple[str, ...]:
    """The components of a path the consolidator may write, or :class:`Refused` saying why."""
    parts = split_path(relpath)  # absolute, "..", NUL: InvalidArgument; dot entries: NotFound
    rel = "/".join(parts)
    if not parts:
        raise InvalidArgument("a file path is required")
    if parts[-1].lower() in INSTRUCTION_NAMES:
        raise Refused(f"{rel}: instruction files are never written in the memory folder")
    if not rel.endswith(".md"):
        raise Refused(f"{rel}: only Markdown files (.md) may be written")
    if not is_agent_owned(rel):
        raise Refused(
            f"{rel}: not one of the consolidator's files (MEMORY.md, memory_summary.md, "
            "skills/**/*.md, projects/<key>/memory_summary.md, projects/<key>/MEMORY.md); "
            "everything else in the folder is input"
        )
    return parts


def read(
    root: Path, path: str, line_offset: int | None = None, max_lines: int | None = None
) -> str:
    """A window of a file (or a directory's listing), as the memory tools serve it."""
    if isinstance(path, str) and path.strip() in (DIFF_FILE, "./" + DIFF_FILE):
        return _read_diff(root, line_offset, max_lines)
    return memory_read(root, path, line_offset, max_lines).to_text()


def _diff_bytes(root: Path) -> bytes:
    """The run's diff file, opened without following a link (the memory tools hide it)."""
    fd_root = open_root(root)
    if fd_root is None:
        raise NotFound(f"{DIFF_FILE}: not found")
    try:
        try:
            fd = os.open(DIFF_FILE, _READ_FLAGS, dir_fd=fd_root)
        except FileNotFoundError as exc:
            raise NotFound(f"{DIFF_FILE}: not found") from exc
        except OSError as exc:
            raise Refused(f"{DIFF_FILE}: cannot open ({exc.strerror or exc})") from exc
        try:
            st = os.fstat(fd)
            if not plain_file(st):
                raise Refused(f"{DIFF_FILE}: is not a plain file")
            if st.st_size > TOOL_FILE_MAX_BYTES:
                raise FileTooLarge(DIFF_FILE, st.st_size, TOOL_FILE_MAX_BYTES)
            return os.read(fd, TOOL_FILE_MAX_BYTES + 1)
        finally:
            os.close(fd)
    finally:
        os.close(fd_root)


def _read_diff(root: Path, line_offset: int | None, max_lines: int | None) -> str:
    """The diff paged like any read (it can be large): whole lines within the read cap."""
    lines = _diff_bytes(root).decode("utf-8", errors="replace").splitlines(keepends=True)
    start = max(1, line_offset or 1)
    if start > max(len(lines), 1):
        raise InvalidArgument(f"line_offset {start} is past the end of {DIFF_FILE}")
    stop = len(lines) if max_lines is None else min(len(lines), start - 1 + max(1, max_lines))
    out: list[str] = []
    used = 0
    for i in range(start - 1, stop):
        used += len(lines[i].encode("utf-8"))
        if out and used > READ_MAX_BYTES:
            stop = i
            break
        out.append(lines[i])
    text = "".join(out)
    if stop < len(lines):
        text += f"\n[{len(lines) - stop} more lines; continue with line_offset={stop + 1}]"
    return text


def listing(root: Path, path: str | None = None) -> str:
    return memory_list(root, path).to_text()


def _parent_fd(root: Path, parts: tuple[str, ...]) -> int:
    """An open descriptor on the target's folder. Folders are made only under ``skills/``: a
    project's folder is memoryd's to make (one with no inputs is not a project)."""
    if parts[0] == SKILLS_DIR and len(parts) > 2:
        ensure_dirs(root, parts[:-1])
    with open_path(root, "/".join(parts[:-1]) or None) as node:
        if node.kind != "dir":
            raise Refused(f"{node.rel}: is not a directory")
        return os.dup(node.fd)


def _exists(dir_fd: int, name: str, rel: str) -> bool:
    """Whether the target exists; a link or special file there is refused, never replaced."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{rel}: exists and is not a regular file (a link or special file)")
    return True


def _current(dir_fd: int, name: str, rel: str) -> bytes | None:
    """The target's bytes (``None`` when absent); a link, special or hard-linked file is refused."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{rel}: exists and is not a regular file (a link or special file)")
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{rel}: turned into a link while being opened") from exc
        raise Refused(f"{rel}: cannot open ({exc.strerror or exc})") from exc
    try:
        got = os.fstat(fd)
        if (got.st_dev, got.st_ino) != (st.st_dev, st.st_ino) or not plain_file(got):
            raise Refused(f"{rel}: is hard-linked or changed while being opened")
        cap = memory_file_cap(rel) or 0
        if got.st_size > cap:
            raise FileTooLarge(rel, got.st_size, cap)
        return os.read(fd, cap + 1)
    finally:
        os.close(fd)


def _put(dir_fd: int, name: str, rel: str, data: bytes) -> None:
    cap = memory_file_cap(rel) or 0
    if len(data) > cap:
        raise FileTooLarge(rel, len(data), cap)
    tmp = f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o644, dir_fd=dir_fd
    )
    try:
        with os.fdopen(fd, "wb", closefd=True) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise


def write(root: Path, path: str, content: str) -> str:
    """Create or replace one of the consolidator's files with ``content``."""
    if not isinstance(content, str):
        raise InvalidArgument("content must be a string")
    parts = writable(path)
    rel = "/".join(parts)
    data = content.encode("utf-8")
    cap = memory_file_cap(rel) or 0
    if len(data) > cap:
        raise FileTooLarge(rel, len(data), cap)
    dir_fd = _parent_fd(root, parts)
    try:
        existed = _exists(dir_fd, parts[-1], rel)
        _put(dir_fd, parts[-1], rel, data)
    finally:
        os.close(dir_fd)
    return f"{'replaced' if existed else 'created'} {rel} ({len(data)} bytes)"


def edit(root: Path, path: str, old: str, new: str, replace_all: bool = False) -> str:
    """Replace ``old`` with ``new`` in one of the consolidator's files (exactly once by default)."""
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        raise InvalidArgument("old and new must be strings, and old must not be empty")
    parts = writable(path)
    rel = "/".join(parts)
    dir_fd = _parent_fd(root, parts)
    try:
        raw = _current(dir_fd, parts[-1], rel)
        if raw is None:
            raise NotFound(f"{rel}: not found (use the write tool to create it)")
        text = raw.decode("utf-8", errors="replace")
        count = text.count(old)
        if count == 0:
            raise InvalidArgument(f"{rel}: the text to replace was not found")
        if count > 1 and not replace_all:
            raise InvalidArgument(
                f"{rel}: the text to replace occurs {count} times; give more context or replace_all"
            )
        _put(dir_fd, parts[-1], rel, text.replace(old, new).encode("utf-8"))
    finally:
        os.close(dir_fd)
    return f"edited {rel} ({count if replace_all else 1} replacement(s))"


def delete(root: Path, path: str) -> str:
    """Remove one of the consolidator's files (an outdated skill, a stale project layer)."""
    parts = writable(path)
    rel = "/".join(parts)
    with open_path(root, "/".join(parts[:-1]) or None) as node:
        if node.kind != "dir":
            raise NotFound(f"{rel}: not found")
        if _current(node.fd, parts[-1], rel) is None:
            raise NotFound(f"{rel}: not found")
        os.unlink(parts[-1], dir_fd=node.fd)
    return f"deleted {rel}"
