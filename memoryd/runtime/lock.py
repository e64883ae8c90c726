"""One daemon per home: an advisory lock on ``<state>/daemon.lock`` that names its holder.

``flock`` is released by the kernel when the process dies, however it dies, so a killed daemon
never leaves a stale lock behind; the pid written into the file is only for the message the
second daemon prints.
"""

from __future__ import annotations

import fcntl
import os

from memoryd.errors import AlreadyRunning
from memoryd.paths import Paths


class HomeLock:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`AlreadyRunning` naming the holder's pid."""
        self.paths.ensure_dir(self.paths.state_dir)
        fd = os.open(self.paths.state_dir / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise AlreadyRunning(pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
