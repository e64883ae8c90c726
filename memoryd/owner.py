"""Who holds a claim, and whether that process is provably gone.

A lease alone makes a crashed ``run --once`` block its sessions for an hour. Every claim and
helper session therefore records its owner: host name, the pid space it ran in (the machine id
and the pid namespace), boot id, pid and the process start time. Inside the same pid space that
is enough to prove death: another boot, no such pid, or a pid reused by a process that started
at another time. Anything short of proof counts as alive and the lease stays the fallback: another
host sharing the home, a container with the host's name but its own pid namespace (it cannot see
our pids), a clone with the same host name, an unreadable start time.

A memoryd that started its own ``opencode serve`` is not gone while that server runs: the server
goes on driving the helper prompts it was given after memoryd is SIGKILLed (a fresh server's
first model call can come seconds later). Such an owner names its server (``server``, pid and
start time), and its claims and helpers are released only once both are gone; the next memoryd
stops a dead owner's server before it releases anything (:func:`memoryd.host.server.reap_orphaned_servers`).
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, replace

from memoryd.fsutil import pid_alive


@dataclass(frozen=True)
class Owner:
    host: str
    boot: str
    pid: int
    start: str
    space: str | None = None  # machine id + pid namespace; None for records that lack it
    server: str | None = None  # "pid:start" of the opencode serve this process started

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @classmethod
    def decode(cls, raw: str | None) -> Owner | None:
        if not raw:
            return None
        try:
            d = json.loads(raw)
            space, server = d.get("space"), d.get("server")
            return cls(
                str(d["host"]),
                str(d["boot"]),
                int(d["pid"]),
                str(d["start"]),
                space if isinstance(space, str) else None,
                server if isinstance(server, str) else None,
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


_servers: dict[int, str] = {}  # our pid -> "pid:start" of the opencode serve we run now


def current_owner() -> Owner:
    me = _me(os.getpid())  # keyed by pid: a forked child is another owner
    server = _servers.get(me.pid)
    return me if server is None else replace(me, server=server)


def note_server(pid: int | None) -> None:
    """Name (or with ``None`` forget) the ``opencode serve`` this process started: records made
    while it runs say the owner is not gone until that server is gone too."""
    if pid is None:
        _servers.pop(os.getpid(), None)
    else:
        _servers[os.getpid()] = f"{pid}:{process_start(pid)}"


def _server_running(server: str) -> bool:
    """Whether the named server process still runs (a zombie or a recycled pid does not)."""
    pid_s, _, start = server.partition(":")
    try:
        with open(f"/proc/{int(pid_s)}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except (OSError, ValueError):
        if sys.platform.startswith("linux") or not pid_s.isdigit():
            return False
        return pid_alive(int(pid_s))  # no /proc: the pid alone
    rest = stat[stat.rindex(")") + 2 :].split()
    return rest[0] != "Z" and (not start or rest[19] == start)


def owner_gone(owner: Owner | None) -> bool:
    """True only when the owner is provably dead (same machine), and so is the opencode serve it
    started; unknown owners count as alive."""
    if owner is None or owner.host != socket.gethostname() or owner.space != pid_space():
        return False
    if owner.server is not None and _server_running(owner.server):
        return False
    return _process_gone(owner)


def _process_gone(owner: Owner) -> bool:
    if not pid_alive(owner.pid):
        return True
    here = boot_id()
    if owner.boot and here and owner.boot != here:
        return True  # the machine rebooted since: that pid is somebody else
    if owner.boot != here:
        return False  # cannot tell which boot its start time belongs to
    start = process_start(owner.pid)
    return bool(owner.start and start and owner.start != start)
