"""Who holds a claim, and whether that process is provably gone.

A lease alone makes a crashed ``run --once`` block its sessions for an hour. Every claim and
helper session therefore records its owner: host name, boot id, pid and the process start time.
On the same machine that is enough to prove death: another boot, no such pid, or a pid reused by
a process that started at another time. Anything short of proof (another host sharing the home,
an unreadable start time) counts as alive, and the lease stays the fallback.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass

from memoryd.fsutil import pid_alive


@dataclass(frozen=True)
class Owner:
    host: str
    boot: str
    pid: int
    start: str

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str | None) -> Owner | None:
        if not raw:
            return None
        try:
            d = json.loads(raw)
            return cls(str(d["host"]), str(d["boot"]), int(d["pid"]), str(d["start"]))
        except (ValueError, KeyError, TypeError):
            return None


@functools.cache
def boot_id() -> str:
    """Changes at every boot; empty when the platform does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        return _run(["sysctl", "-n", "kern.boottime"])
    return ""


def process_start(pid: int) -> str:
    """A token that differs between two processes that had the same pid; empty if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        # the command name (field 2) may contain spaces and parentheses: split after the last ')'
        fields = stat[stat.rindex(")") + 2 :].split()
        return fields[19]  # field 22, starttime in clock ticks since boot
    except (OSError, ValueError, IndexError):
        pass
    if sys.platform == "darwin":
        return _run(["ps", "-o", "lstart=", "-p", str(pid)])
    return ""


def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.cache
def _me(pid: int) -> Owner:
    return Owner(socket.gethostname(), boot_id(), pid, process_start(pid))


def current_owner() -> Owner:
    return _me(os.getpid())  # keyed by pid: a forked child is another owner


def owner_gone(owner: Owner | None) -> bool:
    """True only when the owner is provably dead (same machine); unknown owners count as alive."""
    if owner is None or owner.host != socket.gethostname():
        return False
    if not pid_alive(owner.pid):
        return True
    here = boot_id()
    if owner.boot and here and owner.boot != here:
        return True  # the machine rebooted since: that pid is somebody else
    if owner.boot != here:
        return False  # cannot tell which boot its start time belongs to
    start = process_start(owner.pid)
    return bool(owner.start and start and owner.start != start)
