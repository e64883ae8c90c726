"""All link-refusing file I/O: atomic writes, and reads that never follow a link or block.

Every file memoryd writes (memory files, agent definitions, the rendered read-path block) goes
through :func:`atomic_write`: a temp file created exclusively in the same folder, flushed, then
renamed over the target. A reader sees the old bytes or the new bytes, never half of either, and
a symlink planted at the target is replaced, not written through.

Every file memoryd reads from a folder someone else can write (the memory folder, an imported
agent's memory, its own state files) goes through :func:`read_regular`: opened with
``O_NOFOLLOW | O_NONBLOCK``, so a planted link is refused and a FIFO cannot hang the daemon, and
checked on the descriptor it reads (no check-then-open race) to be a regular file with one link
(:func:`plain_file`): a hard link is another file's bytes under a memory name, so reading it would
adopt or serve a file from anywhere on the disk. A ``limit`` is checked on the same descriptor
before anything is read (:class:`FileTooLarge`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from memoryd.errors import FileTooLarge, NotRegularFile, PathError

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_LINK_ERRNOS = (errno.ELOOP, errno.EMLINK)


def plain_file(st: os.stat_result) -> bool:
    """A regular file that is its only name: what memoryd reads from a folder others can write."""
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes | str, *, mode: int = 0o644) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    parent = path.parent
    if parent.is_symlink():
        raise PathError(parent, "is a symlink; refusing to write through it")
    if path.is_dir() and not path.is_symlink():
        raise PathError(path, "is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise PathError(parent, f"cannot write here ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise PathError(path, f"write failed ({exc.strerror or exc})") from exc


def create_once(path: Path, data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` with ``data`` unless it exists; returns whether this call created it.

    The bytes are written and synced under a temp name, then hard-linked to ``path``, which fails
    if anything is there: readers never see a partial file, and of two racing creators exactly
    one wins (the other reads the winner's file). The temp name goes at once; a reader that came
    in between sees two links and should look again.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise PathError(path.parent, f"cannot write here ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    except OSError as exc:
        raise PathError(path, f"cannot create ({exc.strerror or exc})") from exc
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def read_regular_with_mode(
    path: Path | str, *, limit: int | None = None, skip_irregular: bool = False
) -> tuple[bytes, int] | None:
    """Bytes and permission bits of a regular file; ``None`` when it (or a parent) is absent.

    Raises :class:`NotRegularFile` for a symlink, FIFO, socket, device, folder or hard-linked file
    (or returns ``None`` for them with ``skip_irregular``), :class:`FileTooLarge` for a file over
    ``limit`` bytes (before reading it), and :class:`PathError` for one that cannot be read.
    """
    try:
        return _read_regular(path, limit)
    except NotRegularFile:
        if skip_irregular:
            return None
        raise


def _read_regular(path: Path | str, limit: int | None) -> tuple[bytes, int] | None:
    try:
        fd = os.open(path, _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS:
            raise NotRegularFile(path, "is a symlink") from exc
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a folder opened for reading
            raise NotRegularFile(path, "is not a regular file") from exc
        raise PathError(path, f"cannot read ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, "is not a regular file")
        if not plain_file(st):
            raise NotRegularFile(path, f"is hard-linked ({st.st_nlink} names for one file)")
        if limit is not None and st.st_size > limit:
            raise FileTooLarge(path, st.st_size, limit)
        try:
            data = fh.read() if limit is None else fh.read(limit + 1)
        except OSError as exc:
            raise PathError(path, f"cannot read ({exc.strerror or exc})") from exc
    if limit is not None and len(data) > limit:
        raise FileTooLarge(path, len(data), limit)  # it grew while being read
    return data, stat.S_IMODE(st.st_mode)


def read_regular(path: Path | str, *, limit: int | None = None) -> bytes | None:
    """Bytes of a regular file, ``None`` if absent; see :func:`read_regular_with_mode`."""
    got = read_regular_with_mode(path, limit=limit)
    return None if got is None else got[0]


def lstat_or_none(path: Path | str) -> os.stat_result | None:
    """``os.lstat`` (links are never followed), ``None`` when the path or a parent is absent."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def real_dir(path: Path | str) -> bool:
    """True for an existing directory that is not a symlink."""
    st = lstat_or_none(path)
    return st is not None and stat.S_ISDIR(st.st_mode)


def read_json_object(path: Path, error: type[Exception]) -> dict[str, Any]:
    """A small JSON state file memoryd owns (e.g. the install manifest); ``{}`` when absent.

    Anything unreadable raises ``error`` with a message that says how to recover, rather than
    being silently replaced: these files record what memoryd may later remove.
    """
    import json

    raw = read_regular(path)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise error(f"{path}: not valid JSON ({exc}); fix or remove it") from exc
    if not isinstance(data, dict):
        raise error(f"{path}: unexpected content; fix or remove it")
    return data


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (state files such as the server record name their owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it just is not ours
    return True


def read_json_quiet(path: Path | str) -> Any:
    """A small JSON file memoryd wrote for itself (a stamp, a signature): its value, or ``None``
    when it is absent, a link, unreadable or not JSON, so the caller recomputes instead."""
    import json

    try:
        data = read_regular(path)
    except PathError:
        return None
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def remove_empty_parents(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and its parents while they are empty, up to (not including) ``stop``."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
