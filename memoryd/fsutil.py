"""Filesystem writes that are atomic and never follow links.

Every file memoryd writes (memory files, agent definitions, the rendered read-path block) goes
through :func:`atomic_write`: a temp file created exclusively in the same folder, flushed, then
renamed over the target. A reader sees the old bytes or the new bytes, never half of either, and
a symlink planted at the target is replaced, not written through.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from memoryd.errors import PathError


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


def read_regular(path: Path) -> bytes | None:
    """Bytes of a regular file, ``None`` if absent; refuses links and non-files."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():
            raise PathError(path, "is a symlink") from exc
        raise PathError(path, f"cannot read ({exc.strerror or exc})") from exc
    with os.fdopen(fd, "rb") as fh:
        import stat

        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise PathError(path, "is not a regular file")
        return fh.read()


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
