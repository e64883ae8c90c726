"""Start and stop a private ``opencode serve``.

memoryd needs an opencode HTTP server to read sessions and run its helper agents. When the user
has not configured one, it starts its own, bound to 127.0.0.1 with a random password, and owns
that process completely: it lives in its own process group so that stopping it also stops every
tool subprocess it spawned, and it is never left running after memoryd exits.

Facts this relies on (opencode 1.18.33, observed):

* A connection made before the server prints ``opencode server listening on http://H:P`` is
  accepted but never answered, so readiness is that stdout line, never a connect probe.
* ``--port 0`` prefers 4096 before falling back to a random port; we pick a free ephemeral port
  ourselves so a private server never squats the port a user's own server expects. A port that
  was taken in the meantime makes opencode exit with ``ServeError``; we then retry on another.
* ``OPENCODE_SERVER_PASSWORD`` / ``OPENCODE_SERVER_USERNAME`` turn on basic auth for every route.
* Two servers initialising the same fresh data dir at once can fail with "database is locked".
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from memoryd.errors import HostNotStarted, PortTaken
from memoryd.host.live import DEFAULT_USERNAME
from memoryd.owner import Owner, current_owner, note_server, owner_gone, process_start
from memoryd.tuning import ORPHAN_SERVER_DEATH_WAIT_S

log = logging.getLogger(__name__)

LISTENING_RE = re.compile(r"opencode server listening on (?P<url>https?://\S+)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PORT_ATTEMPTS = 3
_TAIL_LINES = 40

# The lock file opencode's embedded npm treats as "already installed" (see seed_config_dir).
SEED_LOCKFILE = {
    "lockfileVersion": 3,
    "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}},
}


# A server memoryd starts runs only memoryd's helper sessions: it must not replace the user's
# opencode binary (autoupdate) or download language servers while it works, and needs no web UI.
# Set only where the user's environment does not already say otherwise.
PRIVATE_SERVER_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
}


@dataclass
class ServerHandle:
    """How to reach a server we started."""

    url: str
    username: str
    password: str
    pid: int
    process: subprocess.Popen[bytes]


def find_opencode(bin_name: str) -> str:
    """Resolve the opencode executable (a name on PATH or a path) to an absolute path."""
    if os.sep in bin_name or (os.altsep and os.altsep in bin_name):
        path = Path(bin_name).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.absolute())
        raise HostNotStarted(
            str(path), "the file does not exist or is not executable; check [host] opencode_bin"
        )
    found = shutil.which(bin_name)
    if not found:
        raise HostNotStarted(
            bin_name,
            "not found on PATH; install opencode or set [host] opencode_bin to its full path",
        )
    return str(Path(found).absolute())


def seed_config_dir(config_dir: Path) -> None:
    """Make opencode skip its npm install of ``@opencode-ai/plugin`` in ``config_dir``.

    On the first bootstrap opencode installs that package into every config dir it loads and,
    when plugins are configured, blocks on it (~7 s online, ~70 s when the registry is
    unreachable). An empty ``node_modules/`` plus a lock file naming the package makes it skip the
    install. Safe only while our plugin does not import the package at run time. Anything that
    already exists is left alone.
    """
    config_dir.mkdir(parents=True, exist_ok=True)
    lock = config_dir / "package-lock.json"
    modules = config_dir / "node_modules"
    if not lock.exists() and not modules.exists():
        lock.write_text(json.dumps(SEED_LOCKFILE) + "\n", encoding="utf-8")
    modules.mkdir(exist_ok=True)


def free_port(host: str = "127.0.0.1") -> int:
    """An ephemeral port that was free a moment ago (callers retry if it is taken by then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _Output:
    """Drains the server's stdout and stderr for its whole life, so the pipes never fill.

    Keeps the last lines for error messages, copies everything to an optional log file, and
    signals when the "listening" line appears on stdout.
    """

    def __init__(self, proc: subprocess.Popen[bytes], log_file: Path | None) -> None:
        self.listening = threading.Event()
        self.url: str | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self._sink: IO[str] | None = None
        if log_file is not None:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            # Owner-only: opencode's INFO logs name sessions, titles and directories.
            fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._sink = os.fdopen(fd, "a", encoding="utf-8", errors="replace")
        self._threads = [
            threading.Thread(
                target=self._pump,
                args=(stream, name),
                name=f"opencode-{proc.pid}-{name}",
                daemon=True,
            )
            for stream, name in ((proc.stdout, "out"), (proc.stderr, "err"))
        ]
        for t in self._threads:
            t.start()

    def _pump(self, stream: IO[bytes] | None, name: str) -> None:
        if stream is None:
            return
        try:
            for raw in iter(stream.readline, b""):
                line = _ANSI_RE.sub("", raw.decode("utf-8", errors="replace")).rstrip("\n")
                with self._lock:
                    self._tail.append(line)
                    if self._sink is not None:
                        self._sink.write(f"[{name}] {line}\n")
                        self._sink.flush()
                if name == "out" and not self.listening.is_set():
                    m = LISTENING_RE.search(line)
                    if m:
                        self.url = m.group("url").rstrip("/")
                        self.listening.set()
        except (OSError, ValueError):
            pass  # the pipe was closed under us while stopping
        finally:
            stream.close()

    def tail(self, n: int = 15) -> str:
        with self._lock:
            lines = [ln for ln in self._tail if ln.strip()]
        return "\n".join(lines[-n:])

    def close(self, timeout: float = 2.0) -> None:
        for t in self._threads:
            t.join(timeout)
        with self._lock:
            if self._sink is not None:
                self._sink.close()
                self._sink = None


class PrivateServer:
    """One ``opencode serve`` child with basic auth on a random local port.

    Use as a (sync or async) context manager, or call :meth:`start` and :meth:`stop` yourself;
    :meth:`stop` is idempotent and also runs at interpreter exit as a safety net. A stopped
    instance stays stopped (a later :meth:`start` fails): make a new one to start again.
    """

    def __init__(
        self,
        opencode_bin: str,
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        log_file: Path | None = None,
        port: int | None = None,
        username: str = DEFAULT_USERNAME,
        password: str | None = None,
        print_logs: bool = True,
        log_level: str = "WARN",
        record_dir: Path | None = None,
    ) -> None:
        self.opencode_bin = opencode_bin
        self.cwd = Path(cwd)
        self.env = env
        self.startup_timeout = startup_timeout
        self.log_file = log_file
        self.port = port
        self.username = username
        self.password = password
        self.print_logs = print_logs
        self.log_level = log_level
        self.record_dir = record_dir
        self._record: Path | None = None
        self.handle: ServerHandle | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: _Output | None = None
        # stop() may run while start() is still waiting in another thread (a pass that overlaps
        # its local work with the boot, then fails): the lock makes spawn-or-abort atomic.
        self._lock = threading.Lock()
        self._aborted = threading.Event()
        self.spawned = threading.Event()  # set once the process exists (or start has failed)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> ServerHandle:
        """Spawn the server and wait for its "listening" line; raise HostNotStarted otherwise."""
        if self.handle is not None:
            return self.handle
        try:
            return self._start()
        finally:
            self.spawned.set()

    def _start(self) -> ServerHandle:
        binary = find_opencode(self.opencode_bin)
        password = self.password or secrets.token_urlsafe(32)
        attempts = 1 if self.port is not None else _PORT_ATTEMPTS
        last_error: HostNotStarted | None = None
        for attempt in range(attempts):
            port = self.port if self.port is not None else free_port()
            try:
                return self._spawn(binary, port, password)
            except PortTaken as exc:
                last_error = exc.error
                log.info(
                    "opencode could not bind port %d (attempt %d), retrying", port, attempt + 1
                )
        assert last_error is not None
        raise last_error

    def _spawn(self, binary: str, port: int, password: str) -> ServerHandle:
        env = dict(os.environ if self.env is None else self.env)
        for key, value in PRIVATE_SERVER_ENV.items():
            env.setdefault(key, value)
        env["OPENCODE_SERVER_PASSWORD"] = password
        env["OPENCODE_SERVER_USERNAME"] = self.username
        cmd = [*_GATE, binary, "serve", "--hostname", "127.0.0.1", "--port", str(port)]
        if self.print_logs:
            cmd += ["--print-logs", "--log-level", self.log_level]
        where = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        with self._lock:
            if self._aborted.is_set():
                raise HostNotStarted(binary, "stopped before it was started")
            try:
                proc = subprocess.Popen(
                    cmd,
                    cwd=self.cwd,
                    env=env,
                    stdin=subprocess.PIPE,  # the gate: opencode runs only once it is recorded
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # own process group: stop() reaches tool subprocesses
                )
            except OSError as exc:
                raise HostNotStarted(binary, str(exc.strerror or exc)) from exc
            self._proc = proc
            self._record = _record_server(self.record_dir, proc.pid)
            note_server(proc.pid)  # our claims and helpers outlive us until this server is gone
            _open_gate(proc)
            self._output = output = _Output(proc, self.log_file)
            atexit.register(self.stop)
        self.spawned.set()
        log.debug("started opencode serve pid=%d on port %d", proc.pid, port)
        try:
            deadline = started + self.startup_timeout
            while not output.listening.wait(0.05):
                if self._aborted.is_set():
                    raise HostNotStarted(binary, "stopped before it was listening", where)
                if _has_exited(proc):
                    self.stop()  # reaps it and closes the pipes, so the tail is complete
                    tail = output.tail()
                    err = HostNotStarted(
                        binary,
                        f"`opencode serve` exited with code {proc.returncode} "
                        f"before listening; last output:\n{tail}",
                        where,
                    )
                    if "ServeError" in tail or "EADDRINUSE" in tail:
                        raise PortTaken(err)
                    raise err
                if time.monotonic() >= deadline:
                    raise HostNotStarted(
                        binary,
                        f"`opencode serve` did not report listening within "
                        f"{self.startup_timeout:g} s; last output:\n{output.tail()}",
                        where,
                    )
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        url = output.url or where
        log.info(
            "opencode serve pid=%d listening on %s after %.2f s",
            proc.pid,
            url,
            self.startup_seconds,
        )
        self.handle = ServerHandle(
            url=url, username=self.username, password=password, pid=proc.pid, process=proc
        )
        return self.handle

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, wait, then SIGKILL whatever is left. Idempotent.

        Safe to call while :meth:`start` waits in another thread: that start then fails.
        """
        with self._lock:
            self._aborted.set()
            proc, self._proc, self.handle = self._proc, None, None
        atexit.unregister(self.stop)
        if proc is None:
            return
        pgid = proc.pid  # start_new_session made the child its group leader
        # opencode runs each bash-tool command in a new session (setsid), outside our group, and
        # does not kill it on SIGTERM; remember the tree now, before it is reparented to init.
        tree = _descendants(proc.pid) if proc.returncode is None else []
        try:
            if proc.returncode is None:
                _signal_group(pgid, signal.SIGTERM)
                _signal_tree(tree, signal.SIGTERM)
                if not _wait_unreaped(proc, timeout):
                    log.warning(
                        "opencode serve pid=%d ignored SIGTERM for %g s; killing", proc.pid, timeout
                    )
        finally:
            # The leader is a zombie (not yet reaped) here, so its pid cannot have been recycled:
            # the SIGKILL reaches only our group, including tool subprocesses that outlived it.
            if proc.returncode is None:
                _signal_group(pgid, signal.SIGKILL)
            _signal_tree(tree, signal.SIGKILL)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                log.error("opencode serve pid=%d did not die after SIGKILL", proc.pid)
            if self._output is not None:
                self._output.close()
                self._output = None
            if self._record is not None:
                self._record.unlink(missing_ok=True)
                self._record = None
            note_server(None)
            log.debug("stopped opencode serve pid=%d (exit %s)", proc.pid, proc.returncode)

    @property
    def running(self) -> bool:
        return self._proc is not None and not _has_exited(self._proc)

    def output_tail(self, n: int = 15) -> str:
        """The last lines the server printed (for error messages)."""
        return self._output.tail(n) if self._output is not None else ""

    def __enter__(self) -> ServerHandle:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ServerHandle:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


# Issue 29: a memoryd SIGKILLed between spawning opencode and recording it left a server that
# nobody knew to stop. The child is a shell that becomes opencode (same pid, same start time)
# only after reading a line on stdin, which memoryd writes once the record exists; a memoryd
# killed before that closes the pipe by dying, and the shell exits without starting opencode.
_GATE = ("/bin/sh", "-c", 'read -r go && exec "$0" "$@" </dev/null')


def _open_gate(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    except OSError:
        pass  # the shell is gone already: the wait for "listening" reports its exit


def _record_server(record_dir: Path | None, pid: int) -> Path | None:
    """Note the server we just started and who started it (a SIGKILLed memoryd cannot stop it)."""
    if record_dir is None:
        return None
    owner = replace(current_owner(), server=None)
    data = {"pid": pid, "start": process_start(pid), "owner": owner.encode()}
    path = record_dir / f"{pid}.json"
    try:
        record_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("could not record private opencode server pid=%d: %s", pid, exc)
        return None
    return path


def reap_orphaned_servers(record_dir: Path) -> int:
    """Kill ``opencode serve`` processes started by a memoryd that is provably gone.

    Only a process that is still the one recorded (same pid and start time) is signalled, so a
    recycled pid is never hit. Returns how many were killed.
    """
    killed = 0
    try:
        records = sorted(record_dir.glob("*.json"))
    except OSError:
        return 0
    for path in records:
        try:
            data = json.loads(path.read_text())
            pid, start = int(data["pid"]), str(data["start"])
            owner = Owner.decode(data["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if owner is not None:  # the memoryd alone: this very server is what keeps its records
            owner = replace(owner, server=None)
        if not owner_gone(owner):
            continue  # a live memoryd's server
        if start and process_start(pid) == start:
            tree = _descendants(pid)
            _signal_group(pid, signal.SIGKILL)  # the server leads its own group
            _signal_tree(tree, signal.SIGKILL)
            _wait_dead(pid, ORPHAN_SERVER_DEATH_WAIT_S)  # until then it still holds its claims
            killed += 1
            log.info("stopped opencode serve pid=%d left by a memoryd that was killed", pid)
        path.unlink(missing_ok=True)
    return killed


def _wait_dead(pid: int, timeout: float) -> None:
    """Wait until ``pid`` has stopped running (gone, or a zombie nobody reaped yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                raw = fh.read().decode("ascii", errors="replace")
        except OSError:
            return
        if raw[raw.rindex(")") + 2 :].startswith("Z"):
            return
        time.sleep(0.01)


def _has_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether our child has exited, without reaping it where the OS allows.

    Not reaping keeps the pid (and so the process group id) reserved until :meth:`stop` has
    signalled the group, so a recycled pid can never receive our SIGKILL.
    """
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True  # already reaped


def _wait_unreaped(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for our child to exit, without reaping it."""
    deadline = time.monotonic() + timeout
    while not _has_exited(proc):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass(frozen=True)
class _Proc:
    pid: int
    pgid: int
    start: int  # /proc start time, to tell a live process from a recycled pid


def _stat(pid: int) -> _Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", errors="replace")
    except OSError:
        return None
    # Fields after the parenthesised command name: state ppid pgrp session ... starttime (22nd).
    rest = raw[raw.rindex(")") + 2 :].split()
    return _Proc(pid=pid, pgid=int(rest[2]), start=int(rest[19]))


def _descendants(root: int) -> list[_Proc]:
    """Every live descendant of ``root`` (Linux ``/proc``; empty elsewhere). Best effort."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read().decode("ascii", errors="replace")
            ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out: list[_Proc] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        info = _stat(pid)
        if info is not None:
            out.append(info)
            todo += children.get(pid, [])
    return out


def _signal_tree(tree: list[_Proc], sig: signal.Signals) -> None:
    """Signal the remembered descendants that are still the same processes (and their groups)."""
    for proc in tree:
        now = _stat(proc.pid)
        if now is None or now.start != proc.start:
            continue  # gone, or the pid now belongs to someone else
        if proc.pgid == proc.pid:
            _signal_group(proc.pid, sig)  # a tool's own group: reaches its background jobs too
        else:
            try:
                os.kill(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
