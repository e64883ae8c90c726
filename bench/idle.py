"""Idle benchmark: what ``memoryd run`` costs while there is nothing to do.

A real ``opencode serve`` sandbox (``tests.e2e.sandbox``, scripted ``MockLLM`` model) holds a few
sessions; ``memoryd install opencode`` and one ``memoryd run --once`` extract and consolidate
them, so everything is up to date. Then ``python -m memoryd run`` (the daemon, default 300 s pass
interval) starts as a subprocess with the sandbox's environment, its opencode traffic going through
a small counting proxy in this process. Once its start-up pass has finished and the event stream
is connected, and after a 5 s warm-up, every process is sampled once a second for N seconds from
``/proc`` (nothing is injected into it):

* RSS: ``VmRSS`` of ``/proc/<pid>/status``;
* wake-ups: voluntary + involuntary context switches of every thread
  (``/proc/<pid>/task/*/status``), delta / seconds; the main thread's alone (``/proc/<pid>/status``)
  too;
* CPU: utime + stime of ``/proc/<pid>/stat``; writes: ``/proc/<pid>/io``.

Baselines in the same run and the same window: an idle ``python -c "import time; time.sleep(N)"``
and an idle asyncio loop waiting on an ``Event``, same interpreter. The opencode server is sampled
too, for context. During the window the model requests (must be 0) and HTTP requests to opencode
are counted. At the end every process gets SIGTERM; the daemon's exit time and code are reported.

Run from the repo root::

    .venv/bin/python bench/idle.py [--seconds N] [--warmup S] [--sessions N]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import fmt_s, machine, table
from memoryd.store.keys import DAEMON, LAST_PASS

CLK_TCK = os.sysconf("SC_CLK_TCK")
SLEEP_SRC = "import time; time.sleep({seconds})"
ASYNCIO_SRC = (
    "import asyncio\nasync def main():\n    await asyncio.Event().wait()\nasyncio.run(main())\n"
)
# Context, not a baseline: the modules `memoryd run` imports before its first pass, then idle.
IMPORTS_SRC = "import memoryd.cli, memoryd.runtime.daemon, memoryd.write.passes, time\ntime.sleep({seconds})\n"

SESSIONS = [
    ("package manager for billing-api", [
        "In billing-api we use pnpm instead of npm; npm install breaks the workspace links.",
        "Also pin Node 20 in .nvmrc, CI runs 20.11.",
    ]),
    ("database choice for search-svc", [
        "We settled on PostgreSQL 16 for search-svc; SQLite was too slow for concurrent writers.",
        "Migrations live in db/migrations and run with alembic upgrade head before the app starts.",
    ]),
    ("failing tests in web-console", [
        "The tests of web-console fail with ModuleNotFoundError: No module named 'app' when I run pytest.",
        "Installing in editable mode with pip install -e . fixed the import error.",
    ]),
    ("release schedule for infra", [
        "Remember that the release branch of infra is cut every Thursday at noon.",
        "Deploys go out on Tuesdays only, after the staging smoke test passes.",
    ]),
    ("formatting rules for cli-tools", [
        "Run ruff format before every commit in cli-tools; the CI rejects unformatted code.",
        "Line length is 120 and we keep double quotes.",
    ]),
]  # fmt: skip


# =============================================================================================
# Small helpers


def fmt_mb(kb: float) -> str:
    return f"{kb / 1024:.1f} MB"


def ratio(a: float, b: float) -> str:
    if b > 0:
        return f"{a / b:.2f}x"
    return "n/a (0)" if a > 0 else "="


# =============================================================================================
# A counting HTTP/1.1 proxy between the daemon and opencode


class CountingProxy:
    """Forwards TCP to ``upstream`` and records each HTTP request line the client sends.

    Requests are framed by ``Content-Length`` (what httpx sends); a chunked request body makes the
    rest of that connection a plain pipe (counted in ``unparsed``). Bytes coming back are counted.
    """

    def __init__(self, upstream_url: str) -> None:
        m = re.match(r"https?://([^:/]+):(\d+)", upstream_url)
        if not m:
            raise ValueError(f"cannot proxy {upstream_url}")
        self.upstream = (m.group(1), int(m.group(2)))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.requests: list[tuple[float, str, str]] = []  # (monotonic time, method, path)
        self.bytes_back: list[tuple[float, int]] = []
        self.connections = 0
        self.unparsed = 0
        self._socks: list[socket.socket] = []
        self._stopped = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def requests_between(self, t0: float, t1: float) -> list[tuple[float, str, str]]:
        with self.lock:
            return [r for r in self.requests if t0 <= r[0] < t1]

    def bytes_between(self, t0: float, t1: float) -> int:
        with self.lock:
            return sum(n for t, n in self.bytes_back if t0 <= t < t1)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections += 1
                self._socks += [client, upstream]
            threading.Thread(
                target=self._client_to_upstream, args=(client, upstream), daemon=True
            ).start()
            threading.Thread(
                target=self._upstream_to_client, args=(upstream, client), daemon=True
            ).start()

    def _upstream_to_client(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while chunk := upstream.recv(65536):
                with self.lock:
                    self.bytes_back.append((time.monotonic(), len(chunk)))
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            _shut(client)

    def _client_to_upstream(self, client: socket.socket, upstream: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = client.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                method, target = (lines[0].split(b" ") + [b"", b""])[:2]
                headers = {}
                for line in lines[1:]:
                    k, sep, v = line.partition(b":")
                    if sep:
                        headers[k.strip().lower()] = v.strip()
                with self.lock:
                    self.requests.append((time.monotonic(), method.decode(errors="replace"),
                                          target.decode(errors="replace").split("?", 1)[0]))  # fmt: skip
                upstream.sendall(head + b"\r\n\r\n")
                if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                    with self.lock:
                        self.unparsed += 1
                    upstream.sendall(rest)
                    while chunk := client.recv(65536):
                        upstream.sendall(chunk)
                    return
                length = int(headers.get(b"content-length", b"0") or 0)
                body, buf = rest[:length], rest[length:]
                upstream.sendall(body)
                left = length - len(body)
                while left > 0:
                    chunk = client.recv(min(65536, left))
                    if not chunk:
                        return
                    upstream.sendall(chunk)
                    left -= len(chunk)
        except OSError:
            pass
        finally:
            _shut(upstream)


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


# =============================================================================================
# /proc sampling


@dataclass
class Sample:
    t: float
    rss_kb: int
    hwm_kb: int  # VmHWM: the peak since the process started
    threads: int
    cpu_s: float
    main_ctx: int  # voluntary + involuntary switches of the main thread (/proc/<pid>/status)
    per_thread: dict[int, tuple[str, int]]  # tid -> (comm, voluntary + involuntary switches)
    io: dict[str, int]
    sched_ns: dict[int, int]  # tid -> nanoseconds on a CPU (/proc/<pid>/task/<tid>/schedstat)


def _status_fields(path: str) -> dict[str, str]:
    out = {}
    with open(path) as fh:
        for line in fh:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def sample(pid: int) -> Sample | None:
    try:
        st = _status_fields(f"/proc/{pid}/status")
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        per_thread: dict[int, tuple[str, int]] = {}
        sched_ns: dict[int, int] = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                ts = _status_fields(f"/proc/{pid}/task/{tid}/status")
                with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                    sched_ns[int(tid)] = int(fh.read().split()[0])
            except FileNotFoundError:
                continue  # the thread ended between listdir and open
            per_thread[int(tid)] = (
                ts["Name"],
                int(ts["voluntary_ctxt_switches"]) + int(ts["nonvoluntary_ctxt_switches"]),
            )
        io: dict[str, int] = {}
        try:
            with open(f"/proc/{pid}/io") as fh:
                for line in fh:
                    k, _, v = line.partition(":")
                    io[k] = int(v)
        except OSError:
            pass
    except (FileNotFoundError, ProcessLookupError):
        return None
    return Sample(
        t=time.monotonic(),
        rss_kb=int(st["VmRSS"].split()[0]),
        hwm_kb=int(st["VmHWM"].split()[0]),
        threads=int(st["Threads"]),
        cpu_s=(int(fields[11]) + int(fields[12])) / CLK_TCK,  # utime, stime (fields 14, 15 of stat)
        main_ctx=int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"]),
        per_thread=per_thread,
        io=io,
        sched_ns=sched_ns,
    )


@dataclass
class Figures:
    name: str
    seconds: float
    rss_kb: list[int]
    hwm_kb: int
    threads: list[int]
    cpu_s: float  # utime + stime, in clock ticks
    sched_s: float  # the same from schedstat, nanosecond resolution
    wakeups: int  # all threads
    main_wakeups: int
    per_thread: list[tuple[int, str, int]]  # (tid, comm, switches in the window)
    io: dict[str, int]
    exit_s: float | None = None
    exit_code: int | None = None

    @property
    def wakeups_per_s(self) -> float:
        return self.wakeups / self.seconds

    @property
    def main_per_s(self) -> float:
        return self.main_wakeups / self.seconds

    @property
    def cpu_pct(self) -> float:
        return 100 * self.sched_s / self.seconds

    def per_min(self, key: str) -> float:
        return self.io.get(key, 0) * 60 / self.seconds


def figures(name: str, samples: list[Sample]) -> Figures:
    first, last = samples[0], samples[-1]
    seconds = last.t - first.t
    # Per thread: count from its first sighting (0 if it appeared during the window) to its last.
    seen_first: dict[int, int] = {}
    seen_last: dict[int, tuple[str, int]] = {}
    ns_first: dict[int, int] = {}
    ns_last: dict[int, int] = {}
    for i, s in enumerate(samples):
        for tid, (comm, n) in s.per_thread.items():
            if tid not in seen_first:
                seen_first[tid] = n if i == 0 else 0
                ns_first[tid] = s.sched_ns.get(tid, 0) if i == 0 else 0
            seen_last[tid] = (comm, n)
            ns_last[tid] = s.sched_ns.get(tid, ns_last.get(tid, 0))
    per_thread = sorted(((tid, comm, n - seen_first[tid]) for tid, (comm, n) in seen_last.items()),
                        key=lambda x: -x[2])  # fmt: skip
    io = {k: last.io.get(k, 0) - first.io.get(k, 0) for k in last.io}
    return Figures(
        name=name, seconds=seconds, rss_kb=[s.rss_kb for s in samples], hwm_kb=last.hwm_kb, threads=[s.threads for s in samples],
        cpu_s=last.cpu_s - first.cpu_s, sched_s=sum(ns_last[t] - ns_first[t] for t in ns_last) / 1e9,
        wakeups=sum(n for _, _, n in per_thread),
        main_wakeups=last.main_ctx - first.main_ctx, per_thread=per_thread, io=io,
    )  # fmt: skip


# =============================================================================================
# Setup


def memoryd(
    env: dict[str, str], *args: str, timeout: float = 300, code: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """``python -m memoryd`` run from ``code`` (a checkout: another version's memoryd)."""
    return subprocess.run([sys.executable, "-m", "memoryd", *args], env=env, cwd=code, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


@dataclass
class Peak:
    """Peak RSS of a ``memoryd`` run, its own and its tokenizer helpers' apart (KB)."""

    own_kb: int = 0  # VmHWM of the memoryd process, polled
    helper_kb: int = 0  # the largest VmHWM of a child it started (the tokenizer helper), polled
    helpers: int = 0  # how many children it started
    tree_kb: int = 0  # the kernel's figure at exit (wait4): the largest of it and its children
    cpu_s: float = 0.0  # user + system CPU of the run and its reaped children (wait4)


def _hwm_kb(pid: int) -> int:
    try:
        return int(_status_fields(f"/proc/{pid}/status")["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError, IndexError):
        return 0


def _children(pid: int) -> set[int]:
    kids: set[int] = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids.update(int(k) for k in fh.read().split())
    except OSError:
        pass
    return kids


def memoryd_peak(
    env: dict[str, str], *args: str, code: Path = REPO
) -> tuple[subprocess.CompletedProcess[str], Peak]:
    """Run memoryd (from the checkout ``code``), polling the VmHWM of it and of each child every
    20 ms until it exits.

    VmHWM only grows, so the last reading before exit is the peak but for the last few ms; the
    kernel's own figure at exit (``wait4``'s ``ru_maxrss``) covers the whole tree as a check.
    """
    peak = Peak()
    seen: dict[int, int] = {}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "memoryd", *args], env=env, cwd=code, stdout=out,
                                stderr=err)  # fmt: skip
        deadline = time.monotonic() + 600
        while True:
            peak.own_kb = max(peak.own_kb, _hwm_kb(proc.pid))
            for kid in _children(proc.pid):
                seen[kid] = max(seen.get(kid, 0), _hwm_kb(kid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                peak.tree_kb = usage.ru_maxrss
                peak.cpu_s = usage.ru_utime + usage.ru_stime
                break
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"memoryd {' '.join(args)} did not finish in 600 s")
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))  # fmt: skip
    peak.helpers = len(seen)
    peak.helper_kb = max(seen.values(), default=0)
    return done, peak


def kv(db: Path, key: str) -> Any:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def wait_for(
    pred: Any, timeout: float, what: str, proc: subprocess.Popen[bytes] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the daemon exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> tuple[float, int | None]:
    """SIGTERM, then wait; returns (seconds to exit, exit code). SIGKILLs the group after ``timeout``."""
    t0 = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        return time.monotonic() - t0, None
    return time.monotonic() - t0, code


@dataclass
class Run:
    setup: dict[str, Any] = field(default_factory=dict)
    figs: list[Figures] = field(default_factory=list)
    startup_requests: list[str] = field(default_factory=list)
    startup_model: int = 0
    window_requests: list[str] = field(default_factory=list)
    window_model: int = 0
    window_bytes_back: int = 0
    proxy_connections: int = 0
    daemon_log_tail: str = ""
    opencode_pid: int = 0


def run(
    seconds: float, warmup: float, n_sessions: int, keep: bool, daemon_pass: bool = False
) -> Run:
    from tests.e2e.consolidator import ScriptedConsolidator, install
    from tests.e2e.mockllm import MockLLM
    from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode

    out = Run()
    # An installed memoryd has its bytecode (pip compiles it); a checkout under
    # PYTHONDONTWRITEBYTECODE would charge every run the compiling of each edited module.
    compileall.compile_dir(str(REPO / "memoryd"), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-idle-"))
    mock = box = proxy = None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        t = time.monotonic()
        binary = ensure_opencode()
        mock = MockLLM().start()
        install(mock, ScriptedConsolidator())
        box = OpencodeSandbox(root / "sandbox", binary, mock.base_url)
        out.opencode_pid = box.pid
        for i in range(n_sessions):  # the 5 scripted sessions, repeated with a numbered title
            title, turns = SESSIONS[i % len(SESSIONS)]
            sid = box.driver.create_session(f"{title} ({i + 1})", directory=box.project_dir)["id"]
            for text in turns:
                box.driver.say(sid, text, directory=box.project_dir)
        env = box.env
        env.update(MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0", MEMORYD_MAX_ROLLOUTS_PER_STARTUP="32")
        inst = memoryd(env, "install", "opencode", "--config-dir", str(box.config_dir))
        if inst.returncode != 0:
            raise RuntimeError(f"memoryd install opencode failed: {inst.stderr}")
        before = len(mock.requests)
        once, once_peak = (
            memoryd_peak(env, "run", "--once")
            if not daemon_pass
            else (subprocess.CompletedProcess([], 0, "", ""), None)
        )
        if once.returncode != 0:
            raise RuntimeError(
                f"memoryd run --once failed ({once.returncode}): {once.stderr}{once.stdout}"
            )
        out.setup = {
            "seconds": time.monotonic() - t, "sessions": n_sessions, "once": once.stdout.strip(),
            "once_model": len(mock.requests) - before, "server_start": box.startup_seconds,
            "once_peak": once_peak, "daemon_helpers": {},
        }  # fmt: skip

        # The daemon talks to opencode through the counting proxy; everything else is the sandbox's env.
        proxy = CountingProxy(box.url)
        denv = dict(env, MEMORYD_HOST_URL=proxy.url)
        db = box.memoryd_home / "memory.db"
        log = root / "daemon.log"
        mock_at_launch = len(mock.requests)
        launch_ms = time.time_ns() // 1_000_000
        t_launch = time.monotonic()
        total = (
            warmup + seconds + 120
        )  # the baselines outlive the window; they are stopped by SIGTERM
        with log.open("wb") as fh:
            daemon = subprocess.Popen([sys.executable, "-m", "memoryd", "run"], env=denv, cwd=REPO, stdout=fh,
                                      stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        procs.append(daemon)
        sleeper = subprocess.Popen(
            [sys.executable, "-c", SLEEP_SRC.format(seconds=total)], start_new_session=True
        )
        procs.append(sleeper)
        looper = subprocess.Popen([sys.executable, "-c", ASYNCIO_SRC], start_new_session=True)
        procs.append(looper)
        importer = subprocess.Popen([sys.executable, "-c", IMPORTS_SRC.format(seconds=total)], cwd=REPO,
                                    start_new_session=True)  # fmt: skip
        procs.append(importer)

        def ready() -> bool:
            # The start-up pass has recorded its result and the event stream has been opened.
            helpers = out.setup["daemon_helpers"]
            for kid in _children(daemon.pid):  # the tokenizer helper, while the pass holds it
                helpers[kid] = max(helpers.get(kid, 0), _hwm_kb(kid))
            last = kv(db, LAST_PASS)
            streaming = any(
                p == "/global/event"
                for _, _, p in proxy.requests_between(t_launch, time.monotonic())
            )
            return bool(last and last.get("at", 0) >= launch_ms and streaming)

        wait_for(ready, 120, "the start-up pass and the event stream", daemon)
        out.setup["ready_s"] = time.monotonic() - t_launch
        out.setup["last_pass"] = kv(db, LAST_PASS)
        time.sleep(warmup)

        pids = {"memoryd daemon": daemon.pid, "python time.sleep": sleeper.pid, "python asyncio Event": looper.pid,
                "python importing memoryd (context)": importer.pid, "opencode serve (context)": box.pid}  # fmt: skip
        series: dict[str, list[Sample]] = {k: [] for k in pids}
        t0 = time.monotonic()
        mock_at_window = len(mock.requests)
        out.startup_requests = [f"{m} {p}" for _, m, p in proxy.requests_between(t_launch, t0)]
        out.startup_model = mock_at_window - mock_at_launch
        for i in range(int(seconds) + 1):
            while time.monotonic() < t0 + i:
                time.sleep(max(0.0, min(0.05, t0 + i - time.monotonic())))
            for name, pid in pids.items():
                s = sample(pid)
                if s is None:
                    raise RuntimeError(f"{name} (pid {pid}) went away during the idle window")
                series[name].append(s)
        t1 = time.monotonic()
        out.window_model = len(mock.requests) - mock_at_window
        out.window_requests = [f"{m} {p}" for _, m, p in proxy.requests_between(t0, t1)]
        out.window_bytes_back = proxy.bytes_between(t0, t1)
        out.proxy_connections = proxy.connections
        out.figs = [figures(name, s) for name, s in series.items()]
        out.setup["daemon_state"] = kv(db, DAEMON)

        stoppable = {"memoryd daemon": daemon, "python time.sleep": sleeper, "python asyncio Event": looper,
                     "python importing memoryd (context)": importer}  # fmt: skip
        for fig in out.figs:
            if fig.name in stoppable:
                fig.exit_s, fig.exit_code = stop_process(stoppable[fig.name])
        out.daemon_log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
        return out
    finally:
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
        if proxy is not None:
            proxy.stop()
        if box is not None:
            box.stop()
        if mock is not None:
            mock.stop()
        if keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


# =============================================================================================
# Report


def report(r: Run) -> None:
    s = r.setup
    print(f"\nsetup: opencode up in {fmt_s(s['server_start'] or 0)}; {s['sessions']} sessions, install and "
          f"`memoryd run --once` ({s['once_model']} model requests) in {fmt_s(s['seconds'])} total")  # fmt: skip
    for line in s["once"].splitlines():
        print(f"  run --once: {line}")
    pk: Peak | None = s["once_peak"]
    if pk is not None:
        print(f"  run --once peak RSS (the whole pass: {s['sessions']} extractions + consolidation): memoryd "
              f"{fmt_mb(pk.own_kb)} (VmHWM, goal <= 70 MB); tokenizer helper {fmt_mb(pk.helper_kb)} "
              f"({pk.helpers} started, each ends with its pass); largest of the tree (wait4) {fmt_mb(pk.tree_kb)}")  # fmt: skip
        print(f"  run --once CPU (user + system, children included, wait4): {fmt_s(pk.cpu_s)}")
    else:
        helpers = s["daemon_helpers"]
        d = next(f for f in r.figs if f.name == "memoryd daemon")
        print(f"  no run --once: the daemon's start-up pass extracts and consolidates the {s['sessions']} sessions; "
              f"its peak RSS (VmHWM) {fmt_mb(d.hwm_kb)} (goal <= 70 MB); tokenizer helper "
              f"{fmt_mb(max(helpers.values(), default=0))} ({len(helpers)} seen, polled every 0.1 s)")  # fmt: skip
    last = s.get("last_pass") or {}
    p1 = last.get("phase1") or {}
    print(f"daemon start-up: ready (start-up pass done, event stream connected) {fmt_s(s['ready_s'])} after "
          f"launch; start-up pass: {p1.get('discovered', '?')} sessions seen, {p1.get('claimed', '?')} claimed, "
          f"phase 2 {((last.get('phase2') or {}).get('status'))}; {r.startup_model} model requests, "
          f"{len(r.startup_requests)} HTTP requests to opencode: {dict(Counter(r.startup_requests))}")  # fmt: skip
    ds = s.get("daemon_state") or {}
    ev = ds.get("events") or {}
    print(f"daemon's own record after the window: event stream {ev.get('state')}, {ev.get('events_seen')} events "
          f"seen, {ev.get('reconnects')} reconnects, next pass {ds.get('next_pass')}")  # fmt: skip
    d = next(f for f in r.figs if f.name == "memoryd daemon")
    print(f"\n== idle window: {d.seconds:.0f} s, sampled every second ==")
    for f in r.figs:
        exit_txt = ""
        if f.exit_s is not None:
            exit_txt = f"; SIGTERM -> exit in {fmt_s(f.exit_s)}, code {f.exit_code}"
        print(f"{f.name} ({f.threads[-1]} threads{exit_txt})")
        print(f"  RSS {fmt_mb(statistics.median(f.rss_kb))} median (min {fmt_mb(min(f.rss_kb))}, "
              f"max {fmt_mb(max(f.rss_kb))}, end - start {f.rss_kb[-1] - f.rss_kb[0]:+d} KB); peak since "
              f"launch (VmHWM) {fmt_mb(f.hwm_kb)}")  # fmt: skip
        print(f"  wake-ups {f.wakeups_per_s:.2f}/s over all threads ({f.wakeups} context switches; "
              f"main thread {f.main_per_s:.2f}/s); CPU {fmt_s(f.sched_s)} (schedstat) = {f.cpu_pct:.3f} % of one "
              f"core; /proc/<pid>/stat utime+stime {fmt_s(f.cpu_s)} ({fmt_s(1 / CLK_TCK)} ticks)")  # fmt: skip
        if f.io:
            print(f"  I/O per minute: {f.per_min('syscw'):.0f} write calls, {f.per_min('wchar') / 1024:.1f} KB written "
                  f"({f.per_min('write_bytes') / 1024:.1f} KB to disk), {f.per_min('syscr'):.0f} read calls")  # fmt: skip
        if f.name == "memoryd daemon":
            busy = ", ".join(f"{tid} {comm} {n}" for tid, comm, n in f.per_thread)
            print(f"  context switches per thread (tid, name, count): {busy}")
    print(f"model requests during the window: {r.window_model} (must be 0); HTTP requests to opencode during the "
          f"window: {len(r.window_requests)} {dict(Counter(r.window_requests)) or ''}; bytes from opencode: "
          f"{r.window_bytes_back} (event-stream heartbeats); proxy connections opened in total: {r.proxy_connections}")  # fmt: skip
    print("daemon log (last lines):\n  " + "\n  ".join(r.daemon_log_tail.splitlines()))


def summary_table(r: Run) -> None:
    by = {f.name: f for f in r.figs}
    d, sl, aio = by["memoryd daemon"], by["python time.sleep"], by["python asyncio Event"]
    imp = by["python importing memoryd (context)"]
    rows: list[tuple[str, ...]] = []

    def row(label: str, fn: Any, fmt: Any, *, ratios: bool = True) -> None:
        a, b, c = fn(d), fn(sl), fn(aio)
        rows.append((label, fmt(a), fmt(b), fmt(c), ratio(a, b) if ratios else "", ratio(a, c) if ratios else "",
                     fmt(fn(imp))))  # fmt: skip

    row("RSS (median)", lambda f: statistics.median(f.rss_kb), fmt_mb)
    row(
        "RSS growth over the window",
        lambda f: f.rss_kb[-1] - f.rss_kb[0],
        lambda v: f"{v:+d} KB",
        ratios=False,
    )
    row("threads", lambda f: f.threads[-1], str)
    row("wake-ups/s (all threads)", lambda f: f.wakeups_per_s, lambda v: f"{v:.2f}")
    row("wake-ups/s (main thread)", lambda f: f.main_per_s, lambda v: f"{v:.2f}")
    row("CPU time in the window (schedstat)", lambda f: f.sched_s, fmt_s)
    row("CPU time (stat utime+stime)", lambda f: f.cpu_s, fmt_s)
    row("CPU % of one core", lambda f: f.cpu_pct, lambda v: f"{v:.3f} %")
    row("write syscalls/min", lambda f: f.per_min("syscw"), lambda v: f"{v:.0f}")
    row("KB written to disk/min", lambda f: f.per_min("write_bytes") / 1024, lambda v: f"{v:.1f}")
    row("SIGTERM -> exit", lambda f: f.exit_s or 0.0, fmt_s)
    rows.append(
        (
            "exit code",
            str(d.exit_code),
            str(sl.exit_code),
            str(aio.exit_code),
            "",
            "",
            str(imp.exit_code),
        )
    )
    rows.append(("model requests in the window", str(r.window_model), "", "", "", "", ""))
    rows.append(
        ("HTTP requests to opencode in the window", str(len(r.window_requests)), "", "", "", "", "")
    )
    header = (
        "measure",
        "memoryd daemon",
        "time.sleep",
        "asyncio Event",
        "vs sleep",
        "vs asyncio",
        "imports only (context)",
    )
    print(f"\n== Summary ({d.seconds:.0f} s idle) ==")
    table(rows, header)
    print("baselines: the same interpreter idling in time.sleep / an asyncio loop awaiting an Event, same window; "
          "their exit code -15 = killed by SIGTERM (no handler); imports only = the modules `memoryd run` "
          "imports, then time.sleep")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--seconds", type=float, default=60.0, help="length of the idle window (default 60)"
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=5.0,
        help="seconds after the start-up pass before sampling (5)",
    )
    ap.add_argument(
        "--sessions",
        type=int,
        default=4,
        help="sessions in the sandbox (1–40, default 4; the scripted 5 repeat)",
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the temp tree (sandbox, memoryd home, daemon log)"
    )
    ap.add_argument(
        "--pass-in-daemon",
        action="store_true",
        help="no `run --once`: the daemon's start-up pass does the extraction (its VmHWM is the pass peak)",
    )
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on kill, too
    print(f"memoryd idle bench, {time.strftime('%Y-%m-%d %H:%M')}, {machine()}")
    r = run(
        max(2.0, args.seconds),
        max(0.0, args.warmup),
        max(1, min(40, args.sessions)),
        args.keep,
        args.pass_in_daemon,
    )
    report(r)
    summary_table(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
