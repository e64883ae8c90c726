"""Who holds a claim, and whether that process is provably gone.

A lease alone makes a crashed ``run --once`` block its sessions for an hour. Every claim and
helper session therefore records its owner: host name, the pid space it ran in (the machine id
and the pid namespace), boot id, pid and the process start time. Inside the same pid space that
is enough to prove death: another boot, no such pid, or a pid reused by a process that started
at another time. Anything short of proof counts as alive and the lease stays the fallback: another
host sharing the home, a container with the host's name but its own pid namespace (it cannot see
our pids), a clone with the same host name, an unreadable start time.
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
    space: str | None = None  # machine id + pid namespace; None for records that lack it

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str | None) -> Owner | None:
        if not raw:
            return None
        try:
            d = json.loads(raw)
            space = d.get("space")
            return cls(
                str(d["host"]),
                str(d["boot"]),
                int(d["pid"]),
                str(d["start"]),
                space if isinstance(space, str) else None,
            )
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


@functools.cache
def pid_space() -> str:
    """Which pids we can see: the machine id and our pid namespace (empty parts when unknown).

    Two processes with equal host names can still live in different pid spaces (a container
    sharing the host's network, a cloned machine on a shared home); their pids say nothing
    about each other.
    """
    machine = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                machine = f.read().strip()
            break
        except OSError:
            continue
    if not machine and sys.platform == "darwin":
        machine = _run(["sysctl", "-n", "kern.uuid"])
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = ""
    return f"{machine}:{namespace}"


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
    return Owner(socket.gethostname(), boot_id(), pid, process_start(pid), pid_space())


def current_owner() -> Owner:
    return _me(os.getpid())  # keyed by pid: a forked child is another owner


def owner_gone(owner: Owner | None) -> bool:
    """True only when the owner is provably dead (same machine); unknown owners count as alive."""
    if owner is None or owner.host != socket.gethostname() or owner.space != pid_space():
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
