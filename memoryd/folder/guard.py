"""Path safety for every tool that touches the memory folder.

The tools take paths from a model, so a path is hostile until proven otherwise:

* It must be relative; ``..`` is rejected outright (not normalised away), ``.`` and empty
  components are ignored, so ``./MEMORY.md`` and ``skills//x.md`` still work.
* A dot-prefixed component reports *not found*: ``.git``, editor swap files and our own temp
  files stay invisible. So does the transient ``phase2_workspace_diff.md`` at the root.
* Nothing is ever followed through a symlink. Rather than lstat a path and then open it (which a
  swap between the two calls defeats), the walk opens each directory *relative to the previous
  directory's file descriptor* with ``O_NOFOLLOW``, and compares the opened descriptor's
  ``fstat`` with the ``lstat`` taken just before (same device, inode and type). A link swapped in
  after validation fails the open (``ELOOP``) or the comparison, and the tool refuses.
* A file is served only while it is its only name (:func:`memoryd.fsutil.plain_file`, checked
  on the opened descriptor): a hard link in the folder is another file's bytes, wherever that
  file lives. Walks and listings skip such files, and files over their kind's cap
  (:func:`memoryd.folder.audit.memory_file_cap`), as they skip special files.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memoryd.errors import FileTooLarge, InvalidArgument, NotFound, Refused
from memoryd.folder.audit import memory_file_cap
from memoryd.folder.layout import DIFF_FILE
from memoryd.fsutil import plain_file
from memoryd.tuning import TOOL_FILE_MAX_BYTES, TOOL_MAX_DEPTH

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC

Kind = Literal["dir", "file"]
_DRIVE_RE = re.compile(r"[A-Za-z]:[\\/]")


def split_path(relpath: str | None) -> tuple[str, ...]:
    """The components of a tool path, checked lexically (see the module docstring)."""
    if relpath is None:
        return ()
    if not isinstance(relpath, str):
        raise InvalidArgument(f"path must be a string, got {relpath!r}")
    if "\x00" in relpath:
        raise InvalidArgument("path must not contain NUL characters")
    if relpath.startswith(("/", "\\")) or _DRIVE_RE.match(relpath):
        raise InvalidArgument(
            f"{relpath}: paths are relative to the memory folder; absolute paths are not allowed"
        )
    parts: list[str] = []
    for part in relpath.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise InvalidArgument(
                f"{relpath}: '..' is not allowed; paths must stay inside the memory folder"
            )
        parts.append(part)
    if any(p.startswith(".") for p in parts) or tuple(parts) == (DIFF_FILE,):
        raise NotFound(f"{relpath}: not found")
    return tuple(parts)


def visible(name: str, *, at_root: bool) -> bool:
    """Whether a directory entry is shown to tools (hidden names and the diff file are not)."""
    return not name.startswith(".") and not (at_root and name == DIFF_FILE)


# -- low-level, replaceable in tests to simulate races ----------------------------------------


def _lstat_at(dir_fd: int, name: str) -> os.stat_result:
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


def _open_at(dir_fd: int, name: str, flags: int) -> int:
    return os.open(name, flags, dir_fd=dir_fd)


def _same(fd: int, expected: os.stat_result, shown: str) -> os.stat_result:
    got = os.fstat(fd)
    if (got.st_dev, got.st_ino) != (expected.st_dev, expected.st_ino) or stat.S_IFMT(
        got.st_mode
    ) != stat.S_IFMT(expected.st_mode):
        raise Refused(
            f"{shown}: changed while being opened (replaced or swapped for a link); try again"
        )
    return got


def _open_checked(
    dir_fd: int, name: str, st: os.stat_result, shown: str
) -> tuple[int, os.stat_result]:
    """Open an entry already lstat'ed as a directory or regular file, then prove it is the same one."""
    flags = _DIR_FLAGS if stat.S_ISDIR(st.st_mode) else _FILE_FLAGS
    try:
        fd = _open_at(dir_fd, name, flags)
    except FileNotFoundError as exc:
        raise NotFound(f"{shown}: not found") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR, errno.ENXIO):
            raise Refused(
                f"{shown}: changed into a link or special file while being opened; refusing"
            ) from exc
        raise Refused(f"{shown}: cannot open ({exc.strerror or exc})") from exc
    try:
        got = _same(fd, st, shown)
        if not stat.S_ISDIR(got.st_mode) and not plain_file(got):
            raise Refused(f"{shown}: is hard-linked; memory tools never read a file with two names")
        return fd, got
    except BaseException:
        os.close(fd)
        raise


def open_root(root: Path) -> int | None:
    """A descriptor on the memory folder; ``None`` when it does not exist yet. Never a link."""
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise Refused(
            f"the memory folder {root} is a symlink; memory tools refuse to work through links"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"the memory folder {root} is not a directory")
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Refused(f"the memory folder {root} cannot be opened ({exc.strerror or exc})") from exc
    try:
        _same(fd, st, str(root))
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class Opened:
    """A path resolved under the root: its display form, kind, an open descriptor and its fstat."""

    rel: str
    kind: Kind
    fd: int
    st: os.stat_result
    parent_fd: int
    name: str

    def read(self) -> bytes:
        if self.kind != "file":
            raise InvalidArgument(f"{self.rel or '.'}: is a directory")
        return read_fd(self.fd, self.st, self.rel)


@contextmanager
def open_path(root: Path, relpath: str | None) -> Iterator[Opened]:
    """Resolve ``relpath`` under ``root`` component by component; descriptors close on exit.

    Raises :class:`NotFound` for anything missing or hidden, :class:`Refused` for links, special
    files and races, :class:`InvalidArgument` for paths that try to leave the folder.
    """
    parts = split_path(relpath)
    shown = "/".join(parts)
    fds: list[int] = []
    try:
        root_fd = open_root(root)
        if root_fd is None:
            raise NotFound(f"{shown or '.'}: not found (the memory folder does not exist yet)")
        fds.append(root_fd)
        cur, st = root_fd, os.fstat(root_fd)
        parent, name = root_fd, ""
        for i, part in enumerate(parts):
            here = "/".join(parts[: i + 1])
            try:
                entry = _lstat_at(cur, part)
            except (FileNotFoundError, NotADirectoryError) as exc:
                raise NotFound(f"{shown}: not found") from exc
            if stat.S_ISLNK(entry.st_mode):
                raise Refused(f"{here}: is a symlink; memory tools never follow links")
            last = i == len(parts) - 1
            if not stat.S_ISDIR(entry.st_mode):
                if not last:
                    raise NotFound(f"{shown}: not found ({here} is not a directory)")
                if not stat.S_ISREG(entry.st_mode):
                    raise Refused(f"{here}: is not a regular file or directory")
            fd, st = _open_checked(cur, part, entry, here)
            fds.append(fd)
            parent, name, cur = cur, part, fd
        kind: Kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
        yield Opened(rel=shown, kind=kind, fd=cur, st=st, parent_fd=parent, name=name)
    finally:
        for fd in reversed(fds):
            os.close(fd)


def file_cap(rel: str) -> int:
    """The most a tool reads of ``rel``: an agent-owned file's cap, else the tools' own."""
    return memory_file_cap(rel) or TOOL_FILE_MAX_BYTES


def servable(rel: str, st: os.stat_result) -> bool:
    """Whether a walk offers this entry as a file: one name, within its cap (judged by lstat)."""
    return plain_file(st) and st.st_size <= file_cap(rel)


def read_fd(fd: int, st: os.stat_result, shown: str) -> bytes:
    cap = file_cap(shown)
    if st.st_size > cap:
        raise FileTooLarge(shown, st.st_size, cap)
    chunks: list[bytes] = []
    total = 0
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            break
        total += len(block)
        if total > cap:
            raise FileTooLarge(shown, total, cap)  # it grew while being read
        chunks.append(block)
    return b"".join(chunks)


def read_file(root: Path, relpath: str) -> tuple[bytes, os.stat_result]:
    """Bytes and fstat of a regular file under ``root`` (directories are an error)."""
    with open_path(root, relpath) as node:
        if node.kind != "file":
            raise InvalidArgument(f"{node.rel or '.'}: is a directory")
        return node.read(), node.st


def entries(dir_fd: int, *, at_root: bool) -> list[tuple[str, os.stat_result]]:
    """Visible entries of an open directory, sorted by name, lstat'ed (links included, not followed)."""
    out = []
    for name in sorted(os.listdir(dir_fd)):
        if not visible(name, at_root=at_root):
            continue
        try:
            out.append((name, _lstat_at(dir_fd, name)))
        except FileNotFoundError:
            continue
    return out


@dataclass(frozen=True)
class WalkEntry:
    """A regular file met by :func:`walk_files`; :meth:`read` is valid only during the iteration."""

    rel: str
    st: os.stat_result
    dir_fd: int
    name: str

    def read(self) -> tuple[bytes, os.stat_result] | None:
        """Bytes and fstat, or ``None`` if the file vanished or was swapped since it was listed."""
        try:
            fd, st = _open_checked(self.dir_fd, self.name, self.st, self.rel)
        except (NotFound, Refused):
            return None
        try:
            return read_fd(fd, st, self.rel), st
        except Refused:
            return None
        finally:
            os.close(fd)


def _walk(dir_fd: int, prefix: str, depth: int, *, files_only: bool) -> Iterator[WalkEntry]:
    for name, st in entries(dir_fd, at_root=not prefix):
        rel = f"{prefix}/{name}" if prefix else name
        if servable(rel, st):
            yield WalkEntry(rel, st, dir_fd, name)
        elif stat.S_ISDIR(st.st_mode):
            if not files_only:
                yield WalkEntry(rel, st, dir_fd, name)
            if depth >= TOOL_MAX_DEPTH:
                continue
            try:
                sub, _ = _open_checked(dir_fd, name, st, rel)
            except (NotFound, Refused):
                continue
            try:
                yield from _walk(sub, rel, depth + 1, files_only=files_only)
            finally:
                os.close(sub)
        elif not files_only:
            yield WalkEntry(
                rel, st, dir_fd, name
            )  # links and special files: listed, never followed


def walk_files(root: Path, relpath: str | None = None) -> Iterator[WalkEntry]:
    """Every visible regular file under ``relpath`` (a file yields itself), depth first in name order."""
    with open_path(root, relpath) as node:
        if node.kind == "file":
            yield WalkEntry(node.rel, node.st, node.parent_fd, node.name)
            return
        yield from _walk(node.fd, node.rel, 0, files_only=True)


def walk_all(root: Path) -> Iterator[WalkEntry]:
    """Every visible entry under the root, links and special files included (for inspection)."""
    fd = open_root(root)
    if fd is None:
        return
    try:
        yield from _walk(fd, "", 0, files_only=False)
    finally:
        os.close(fd)


def ensure_dirs(root: Path, parts: tuple[str, ...]) -> None:
    """Create ``root/parts...`` as real directories, refusing any link met on the way."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Refused(f"cannot create the memory folder {root} ({exc.strerror or exc})") from exc
    fd = open_root(root)
    if fd is None:
        raise NotFound(f"the memory folder {root} vanished")
    fds = [fd]
    try:
        for i, part in enumerate(parts):
            here = "/".join(parts[: i + 1])
            try:
                os.mkdir(part, 0o755, dir_fd=fds[-1])
            except FileExistsError:
                pass
            st = _lstat_at(fds[-1], part)
            if not stat.S_ISDIR(st.st_mode):
                raise Refused(f"{here}: exists and is not a directory (or is a link)")
            sub, _ = _open_checked(fds[-1], part, st, here)
            fds.append(sub)
    finally:
        for f in reversed(fds):
            os.close(f)


def remove_file(node: Opened) -> None:
    """Unlink an opened regular file once its name is proven to still be that same file."""
    try:
        st = _lstat_at(node.parent_fd, node.name)
    except FileNotFoundError as exc:
        raise NotFound(f"{node.rel}: not found") from exc
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (node.st.st_dev, node.st.st_ino):
        raise Refused(f"{node.rel}: changed while being deleted; nothing was removed")
    os.unlink(node.name, dir_fd=node.parent_fd)
