"""The memory folder's root and the link-refusing primitives every change inside it goes through.

Split out of :mod:`memoryd.folder.workspace` so the sync side there and the audit side
(:mod:`memoryd.folder.audit`) share one set of path checks instead of each trusting the tree.

Symlinks are never tolerated under the root (:meth:`MemoryFolder.remove_symlinks` deletes them).
Every write goes through :func:`memoryd.fsutil.atomic_write` after each existing parent component
has been lstat'ed; a symlinked or non-directory parent raises :class:`PathError` instead of being
replaced, because the callers clear links first and one showing up mid-run means something is
racing us. Reads use ``O_NOFOLLOW`` and check the opened file is regular.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from memoryd.errors import PathError
from memoryd.fsutil import atomic_write, lstat_or_none, read_regular_with_mode

log = logging.getLogger(__name__)


def _mkdir(path: Path, *, parents: bool = False) -> None:
    try:
        path.mkdir(parents=parents, exist_ok=parents)
    except OSError as exc:
        raise PathError(path, f"cannot create directory ({exc.strerror or exc})") from exc


class MemoryFolder:
    """The folder at ``root``, reached only through checked paths (see the module docstring).

    The primitives the other memory-folder modules build on (:mod:`memoryd.folder.workspace`,
    :mod:`memoryd.folder.audit`, :mod:`memoryd.folder.projects`), which each hold one of these
    rather than inherit from it; code outside the package goes through
    :class:`memoryd.folder.workspace.Workspace`.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def check_root(self) -> bool:
        """True when the root exists; raises if it is a symlink or not a directory."""
        st = lstat_or_none(self.root)
        if st is None:
            return False
        if stat.S_ISLNK(st.st_mode):
            raise PathError(self.root, "is a symlink; memoryd refuses to work through links")
        if not stat.S_ISDIR(st.st_mode):
            raise PathError(self.root, "exists and is not a directory")
        return True

    def make_root(self) -> None:
        if not self.check_root():
            _mkdir(self.root, parents=True)
            self.check_root()

    def path(self, relpath: str, *, make_parents: bool = False) -> Path:
        """Absolute path for ``relpath`` after checking every existing parent is a real directory.

        Missing parents are created (``make_parents``) with ``mkdir``, which never follows a link.
        """
        pure = PurePosixPath(relpath)
        if not pure.parts or pure.is_absolute() or any(p in (".", "..") for p in pure.parts):
            raise PathError(relpath, "is not a plain path inside the memory folder")
        target = self.root.joinpath(*pure.parts)
        if make_parents:
            self.make_root()
        elif not self.check_root():
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

    def write_file(self, relpath: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write one file atomically, never through a link."""
        atomic_write(self.path(relpath, make_parents=True), data, mode=mode)

    def remove_file(self, relpath: str) -> None:
        path = self.path(relpath)
        st = lstat_or_none(path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(path)

    def write_if_changed(self, relpath: str, text: str) -> bool:
        data = text.encode("utf-8")
        current = read_regular_with_mode(self.path(relpath), skip_irregular=True)
        if current is not None and current[0] == data:
            return False
        self.write_file(relpath, data)
        return True

    def ensure_dir(self, relpath: str) -> bool:
        """Create ``relpath`` as a real directory; False if something else is in the way."""
        path = self.path(relpath, make_parents=True)
        st = lstat_or_none(path)
        if st is None:
            _mkdir(path)
            return True
        return stat.S_ISDIR(st.st_mode)

    def walk(self, rel: str = "") -> Iterator[tuple[str, os.stat_result]]:
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
                yield from self.walk(relpath)

    def remove_symlinks(self) -> list[str]:
        """Delete every symlink under the root (the links, never their targets); returns their relpaths."""
        if not self.check_root():
            return []
        removed = []
        for relpath, st in list(self.walk()):
            if stat.S_ISLNK(st.st_mode):
                try:
                    os.unlink(self.root / relpath)
                except FileNotFoundError:
                    continue
                log.warning("memory folder: removed symlink %s", relpath)
                removed.append(relpath)
        return removed
