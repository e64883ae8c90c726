"""The world ``bench/chaos.py`` breaks: a real opencode, a scripted slow model, memoryd processes,
a fault-injecting HTTP proxy, and the invariant checks run after every storm.

Everything is seeded by the caller's ``random.Random``; nothing here decides when to break what.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memoryd.clock import SystemClock
from memoryd.folder.baseline import Baseline
from memoryd.folder.layout import RAW_MEMORIES_FILE, SUMMARIES_DIR, is_tracked
from memoryd.folder.workspace import Workspace
from memoryd.paths import Paths
from tests.e2e.consolidator import ScriptedConsolidator, is_consolidation
from tests.e2e.mockllm import MockLLM, is_extraction, last_user_text, transcript_of
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode

PY = sys.executable


@dataclass
class Figures:
    """One scenario's row in the table."""

    name: str
    runs: int = 0
    injected: int = 0
    lost: int = 0
    duplicated: int = 0
    corrupt: int = 0
    left: int = 0  # memoryd helper sessions and opencode servers still there after the drain
    recovery_s: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    calls: list[Extraction] = field(default_factory=list)  # the storm's extraction calls

    def pct(self, q: float) -> str:
        if not self.recovery_s:
            return "-"
        xs = sorted(self.recovery_s)
        if len(xs) == 1:
            return f"{xs[0]:.2f} s"
        return f"{statistics.quantiles(xs, n=100, method='inclusive')[int(q) - 1]:.2f} s"

    def fail(self, what: str) -> None:
        self.failures.append(what)


@dataclass(frozen=True, eq=False)
class Extraction:
    """One extraction call the model saw: the session, a digest of the transcript it was sent,
    the claim (watermark and token) that sent it, and whether it repeats work: that version was
    already stored, or another claim of it was being answered at the same moment."""

    session: str
    digest: str
    watermark: int | None
    token: str | None
    done_before: bool
    alongside: bool
    caller: int | None = None  # pid of the memoryd that recorded the calling helper session
    caller_alive: bool = True  # False: a killed run's helper, still driven by opencode
    claim_pid: int | None = None  # pid of the memoryd holding the job's claim at that moment
    via: str = "record"  # how ``caller`` was found: its helper's record, or the calling server


class World:
    """One sandboxed opencode + mock model + memoryd home, shared by the scenarios of a run."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        # Hundreds of memoryd processes start here. An installed memoryd has its bytecode
        # (pip compiles it); a checkout under PYTHONDONTWRITEBYTECODE recompiled every module in
        # every process (~0.16 s of CPU each). Write it once, as an install would.
        compileall.compile_dir(str(REPO / "memoryd"), quiet=1)
        self.mock = MockLLM().start()
        self.mock._httpd.handle_error = lambda *a: None  # type: ignore[method-assign]  # peers hang up
        self.consolidator = ScriptedConsolidator()
        self.slow: tuple[float, float] = (0.0, 0.0)  # model delay range for memoryd's helpers
        default = self.mock.default_responder

        def respond(req: dict[str, Any]) -> Any:
            kind = (
                "consolidate" if is_consolidation(req) else "extract" if is_extraction(req) else ""
            )
            if not kind:
                return default(req)
            helper = getattr(self.mock.local, "headers", {}).get("x-session-id")
            owner = self._helper_owner(helper)
            via = "record"
            if owner is None:  # no record (yet, or any more): ask which server made the call
                owner, via = self._owner_by_peer(getattr(self.mock.local, "peer", None))
            with self._lock:
                self.inflight[kind] += 1
                self.inflight_by[kind, owner] += 1
                self.started[kind] += 1
                self.calls.append((kind, owner))
            seen = self._note_extraction(req, owner, via) if kind == "extract" else None
            try:
                if self.slow[1] > 0:
                    time.sleep(random.uniform(*self.slow))
                return self.consolidator(req) if kind == "consolidate" else default(req)
            finally:
                with self._lock:
                    self.inflight[kind] -= 1
                    self.inflight_by[kind, owner] -= 1
                    if seen is not None:
                        self._live.remove(seen)

        self.mock.set_responder(respond)
        self.box = OpencodeSandbox(root / "opencode", ensure_opencode(), self.mock.base_url)
        self.home = self.box.memoryd_home
        self.paths = Paths.from_env({"MEMORYD_HOME": str(self.home)})
        self.inflight = {"extract": 0, "consolidate": 0}  # model calls being answered now
        # the same, per (kind, pid of the memoryd that recorded the helper)
        self.inflight_by: Counter[tuple[str, int | None]] = Counter()
        self.started = {"extract": 0, "consolidate": 0}  # model calls ever received
        # every call of memoryd's helpers: (kind, pid of the memoryd that recorded the helper);
        # a killed memoryd's helper can go on calling the model until the next one deletes it
        self.calls: list[tuple[str, int | None]] = []
        self.extractions: list[Extraction] = []  # every extraction call the model saw
        self._live: list[Extraction] = []  # those being answered now
        self._lock = threading.Lock()
        # CHAOS_PROC (in each warm memoryd's environment, so in its servers' too) -> that run
        self.launched: dict[str, tuple[tuple[str, ...], Run]] = {}
        self._server_owners: dict[int, int] = {}  # private opencode pid -> the memoryd's pid
        # helper session id -> the memoryd that recorded it, as first seen: the record is deleted
        # when the helper is (a reaped helper of a killed run), its calls may still arrive
        self._helper_owners: dict[str, int] = {}
        self._watching = threading.Event()
        threading.Thread(target=self._watch_helpers, daemon=True).start()
        self.sessions: list[str] = []
        out = self.cli("install", "opencode")
        if out.returncode != 0:
            raise RuntimeError(f"memoryd install failed: {out.stderr}")

    def close(self) -> None:
        self._watching.set()
        self.box.stop()
        self.mock.stop()

    def _remember_helpers(self, rows: list[sqlite3.Row]) -> None:
        for session_id, owner in rows:
            if session_id in self._helper_owners:
                continue
            with contextlib.suppress(ValueError, KeyError, TypeError):
                self._helper_owners[session_id] = int(json.loads(owner)["pid"])

    def _watch_helpers(self) -> None:
        """Every helper record, seen while it exists (a few hundred ms apart): a call that
        arrives after its helper was reaped is still tied to the memoryd that made it."""
        while not self._watching.wait(0.1):
            with contextlib.suppress(sqlite3.Error, OSError):
                if self._migrated():
                    with contextlib.closing(self.db()) as conn:
                        rows = conn.execute(
                            "SELECT session_id, owner FROM helper_sessions"
                        ).fetchall()
                    with self._lock:
                        self._remember_helpers(rows)

    def _helper_owner(self, helper: str | None) -> int | None:
        if helper is None:
            return None
        with self._lock:
            if helper in self._helper_owners:
                return self._helper_owners[helper]
        if not self._migrated():
            return None
        with contextlib.closing(self.db()) as conn:
            rows = conn.execute(
                "SELECT session_id, owner FROM helper_sessions WHERE session_id = ?", (helper,)
            ).fetchall()
        with self._lock:
            self._remember_helpers(rows)
            return self._helper_owners.get(helper)

    def _owner_by_peer(self, peer: tuple[str, int] | None) -> tuple[int | None, str]:
        """The memoryd behind a model call whose helper has no record: the opencode process
        holding the calling socket, and for a server memoryd started, the memoryd its record
        names (kept from the first sight: a reaped server's record is gone)."""
        if peer is None:
            return None, "no peer"
        server = _socket_owner(peer[1], [self.box.pid, *memoryd_servers(self.home)])
        if server is None:
            return None, f"unknown process on port {peer[1]}"
        if server == self.box.pid:
            return None, "the shared opencode, helper unrecorded"
        if server not in self._server_owners:
            try:
                rec = json.loads((self.paths.private_servers / f"{server}.json").read_text())
                self._server_owners[server] = int(json.loads(rec["owner"])["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                return None, f"private opencode pid {server}, record gone"
        return self._server_owners[server], f"private opencode pid {server}"

    def _note_extraction(self, req: dict[str, Any], caller: int | None, via: str) -> Extraction:
        """Which claim sent this extraction call, and whether it repeats work already done."""
        text = last_user_text(req)
        sid = next((s for s in self.sessions if s in text), "?")
        row = self.jobs().get(sid)
        wm = row["input_watermark"] if row is not None else None
        token = row["ownership_token"] if row is not None else None
        try:
            claim_pid = int(json.loads(row["owner"])["pid"]) if row is not None else None
        except (ValueError, KeyError, TypeError):
            claim_pid = None
        stored = None
        if self._migrated():
            with contextlib.closing(self.db()) as conn:
                got = conn.execute(
                    "SELECT source_updated_at FROM stage1_outputs WHERE session_id = ?", (sid,)
                ).fetchone()
            stored = got[0] if got is not None else None
        with self._lock:
            x = Extraction(
                sid,
                hashlib.sha1(transcript_of(req).encode()).hexdigest(),
                wm,
                token,
                done_before=wm is not None and stored is not None and stored >= wm,
                alongside=any(
                    o.session == sid and o.watermark == wm and o.token != token for o in self._live
                ),
                caller=caller,
                caller_alive=caller is None or alive(caller),
                via=via,
                claim_pid=claim_pid,
            )
            self.extractions.append(x)
            self._live.append(x)
        return x

    # -- environment -------------------------------------------------------------------------

    def env(self, *, private: bool = False, url: str | None = None, **extra: str) -> dict[str, str]:
        env = self.box.env
        env.update(
            MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0",
            MEMORYD_MAX_ROLLOUTS_PER_STARTUP="4",
            # The scripted model is free. With the default cap (120 helper prompts an hour) the
            # storm spent it within minutes and phase 1 then waited: every later turn stayed
            # unextracted (the 8 "lost" sessions of the first full run) and no kill could land
            # in an extraction any more.
            MEMORYD_MAX_MODEL_CALLS_PER_HOUR="0",
            MEMORYD_DAILY_TOKEN_BUDGET="0",
        )
        if private:
            env.pop("MEMORYD_HOST_URL", None)
            # the shim inside the sandbox's opencode records that server; forget it, so memoryd
            # starts (and must clean up after) its own
            self.paths.server_state.unlink(missing_ok=True)
        elif url:
            env["MEMORYD_HOST_URL"] = url
        env.update(extra)
        return env

    def cli(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PY, "-m", "memoryd", *args],
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [PY, "-m", "memoryd", *args],
            env=env or self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # -- user activity -----------------------------------------------------------------------

    def add_sessions(self, n: int, tag: str) -> list[str]:
        d = self.box.driver
        made = []
        for _ in range(n):
            i = len(self.sessions)
            sid = d.create_session(f"{tag} {i}", directory=self.box.project_dir)["id"]
            d.say(sid, decision(i, 0), directory=self.box.project_dir)
            self.sessions.append(sid)
            made.append(sid)
        return made

    def touch(self, sid: str, rng: random.Random | None = None) -> None:
        """A new user turn: the session moves forward and must be extracted again."""
        i = (rng or self.rng).randrange(10_000)
        self.box.driver.say(sid, decision(i, 1), directory=self.box.project_dir)

    # -- state -------------------------------------------------------------------------------

    def db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.home / "memory.db", timeout=30)
        conn.row_factory = sqlite3.Row
        return conn

    def integrity(self) -> str:
        if not (self.home / "memory.db").exists():
            return "ok"
        with contextlib.closing(self.db()) as conn:
            return str(conn.execute("PRAGMA integrity_check").fetchone()[0])

    def _migrated(self) -> bool:
        """memory.db exists with its tables: a kill before the first migration leaves neither."""
        if not (self.home / "memory.db").exists():
            return False
        with contextlib.closing(self.db()) as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
                ).fetchone()
                is not None
            )

    def jobs(self) -> dict[str, sqlite3.Row]:
        if not self._migrated():
            return {}
        with contextlib.closing(self.db()) as conn:
            rows = conn.execute("SELECT * FROM jobs WHERE kind = 'memory_stage1'").fetchall()
        return {r["job_key"]: r for r in rows}

    def pending_work(self) -> tuple[bool, bool]:
        """(a session awaits extraction, phase 2 has unconsumed input)."""
        if not self._migrated():
            return bool(self.sessions), False
        jobs = self.jobs()
        stage1 = len(jobs) < len(self.sessions) or any(j["status"] != "done" for j in jobs.values())
        with contextlib.closing(self.db()) as conn:
            row = conn.execute(
                "SELECT input_watermark, last_success_watermark, status FROM jobs "
                "WHERE kind = 'memory_consolidate_global'"
            ).fetchone()
        phase2 = row is not None and (
            row["status"] != "done"
            or (row["input_watermark"] or 0) > (row["last_success_watermark"] or 0)
        )
        return stage1, phase2

    def stale_sessions(self) -> list[str]:
        """Sessions whose output is missing or not their current version (``time.updated``)."""
        live = {
            s["id"]: s["time"]["updated"] for s in self.box.driver.list_all_sessions(roots=True)
        }
        if not self._migrated():
            return list(self.sessions)
        with contextlib.closing(self.db()) as conn:
            outs = dict(conn.execute("SELECT session_id, source_updated_at FROM stage1_outputs"))
        return [sid for sid in self.sessions if outs.get(sid) != live.get(sid)]

    def helper_sessions(self) -> list[str]:
        sessions = self.box.driver.list_all_sessions(roots=False, archived=True)
        return [s["id"] for s in sessions if str(s.get("title", "")).startswith("memoryd-")]

    def check(self, fig: Figures, *, expect: list[str] | None = None) -> None:
        """The invariants after a storm and one clean pass; every breach is counted and named."""
        expect = self.sessions if expect is None else expect
        integrity = self.integrity()
        if integrity != "ok":
            fig.corrupt += 1
            fig.fail(f"integrity_check: {integrity}")
        live = {
            s["id"]: s
            for s in self.box.driver.list_all_sessions(roots=True)
            if not str(s.get("title", "")).startswith("memoryd-")
        }
        with contextlib.closing(self.db()) as conn:
            outs = {
                r["session_id"]: r["source_updated_at"]
                for r in conn.execute("SELECT session_id, source_updated_at FROM stage1_outputs")
            }
            unselected = conn.execute(
                "SELECT COUNT(*) FROM stage1_outputs WHERE selected_for_phase2 = 0"
            ).fetchone()[0]
        jobs = self.jobs()
        for sid in expect:
            want = live[sid]["time"]["updated"]
            if outs.get(sid) != want:
                fig.lost += 1
                j = jobs.get(sid)
                job = (
                    {
                        k: j[k]
                        for k in ("status", "input_watermark", "retry_remaining", "last_error")
                    }
                    if j is not None
                    else None
                )
                fig.fail(f"{sid}: output {outs.get(sid)} != session {want} (job {job})")
        if unselected:
            fig.lost += unselected
            fig.fail(f"{unselected} outputs not consumed by the clean consolidation")
        mem = self.home / "memories"
        # the global layer and every project layer (projects/<key>/) hold rendered inputs
        projects = mem / "projects"
        layers = [
            mem,
            *(sorted(p for p in projects.iterdir() if p.is_dir()) if projects.is_dir() else []),
        ]
        raw = "".join(
            (layer / RAW_MEMORIES_FILE).read_text()
            for layer in layers
            if (layer / RAW_MEMORIES_FILE).exists()
        )
        for sid in expect:
            n = raw.count(f"## Session `{sid}`")
            if n > 1:
                fig.duplicated += 1
                fig.fail(f"{sid} appears {n} times in raw_memories.md")
        summaries = [
            s
            for layer in layers
            if (layer / SUMMARIES_DIR).is_dir()
            for s in (layer / SUMMARIES_DIR).glob("*.md")
        ]
        if len(summaries) != len(outs):
            fig.duplicated += max(0, len(summaries) - len(outs))
            fig.fail(f"{len(summaries)} rollout summaries for {len(outs)} outputs")
        problems = Workspace(mem, clock=SystemClock()).validate()
        for f in mem.rglob("*"):
            if f.is_file():
                try:
                    f.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    problems.append(f"{f.name} is not UTF-8")
        if problems:
            fig.corrupt += 1
            fig.fail(f"memory folder: {problems}")
        diff = Baseline(self.paths.baseline_git, mem, exclude=lambda p: not is_tracked(p)).diff()
        if not diff.empty:
            fig.corrupt += 1
            fig.fail(f"baseline and folder disagree: {[c.path for c in diff.changes][:5]}")
        helpers = self.helper_sessions()
        fig.left += len(helpers)
        if helpers:
            with contextlib.closing(self.db()) as conn:
                known = {r[0] for r in conn.execute("SELECT session_id FROM helper_sessions")}
            fig.fail(
                f"{len(helpers)} helper sessions left in opencode "
                f"({len(known & set(helpers))} of them recorded)"
            )
        left = memoryd_servers(self.home)
        fig.left += len(left)
        if left:
            fig.fail(f"opencode serve started by memoryd still running: {left}")
            for pid in left:
                fig.fail(f"  left: {self.describe_server(pid)}")

    def describe_server(self, pid: int) -> str:
        """Who started a leftover ``opencode serve`` and what it had done (a failure's notes):
        the memoryd named by ``CHAOS_PROC`` in its environment, that run's last lines, and the
        server records memoryd keeps."""
        tag, ppid = "", "?"
        with contextlib.suppress(OSError):
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            tag = next(
                (e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"CHAOS_PROC=")), ""
            )
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = stat[stat.rindex(")") + 2 :].split()[1]
        records = sorted(p.name for p in self.paths.private_servers.glob("*"))
        launched = self.launched.get(tag)
        if launched is None:
            return f"pid {pid} (ppid {ppid}, CHAOS_PROC {tag!r}: no memoryd of ours); records {records}"
        args, run = launched
        lines = [ln.rstrip() for ln in run.lines if "DEBUG" in ln or "INFO" in ln][-8:]
        return (
            f"pid {pid} (ppid {ppid}) started by memoryd pid {run.pid} {list(args)} "
            f"exit {run.proc.returncode}; records {records}; its last lines: {lines}"
        )


_LAUNCH = (
    "import json, sys\n"
    "from memoryd.cli import main\n"
    "args = json.loads(sys.stdin.readline())\n"
    "raise SystemExit(main(args))\n"
)


class Run:
    """A started memoryd whose stderr is read as it comes: the harness can wait for a step
    line, and the pipe never fills and blocks the process."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.lines: list[str] = []
        self.fired = threading.Event()  # the armed kill was sent
        self._armed: tuple[tuple[str, ...], float] | None = None
        self._tail = threading.Thread(target=self._read, daemon=True)
        self._tail.start()

    def arm(self, markers: tuple[str, ...], delay_s: float) -> None:
        """SIGKILL ``delay_s`` after the first line holding one of ``markers``, from the reading
        thread itself: the tightest aim an outside process has at a step of a few ms."""
        self._armed = (markers, delay_s)
        if any(m in line for line in list(self.lines) for m in markers):
            self._fire(delay_s)

    def _fire(self, delay_s: float) -> None:
        if not self.fired.is_set():
            time.sleep(delay_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.fired.set()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            armed = self._armed
            if armed is not None and any(m in line for m in armed[0]):
                self._fire(armed[1])

    def logged(self, marker: str) -> bool:
        return any(marker in line for line in list(self.lines))

    def finish(self, timeout: float = 300) -> str:
        """Wait for the process to end; everything it wrote to stderr."""
        self.proc.wait(timeout=timeout)
        self._tail.join(timeout=30)
        for pipe in (self.proc.stdin, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return "".join(self.lines)


class WarmStart:
    """``python -m memoryd`` processes with the CLI already imported, each waiting on stdin for
    its arguments. The storm restarts memoryd hundreds of times; the interpreter's imports were
    a third of each restart, and a kill among them tests nothing memoryd does. The moment is
    drawn from the start of ``main``; the next process imports while this one runs."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.ready: dict[bool, subprocess.Popen[str]] = {}
        self.n = 0
        self.tags: dict[int, str] = {}  # spare's pid -> its CHAOS_PROC

    def _spawn(self, private: bool) -> subprocess.Popen[str]:
        self.n += 1
        tag = f"{id(self)}-{self.n}"
        proc = subprocess.Popen(
            [PY, "-c", _LAUNCH],
            env=self.w.env(private=private, CHAOS_PROC=tag),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.tags[proc.pid] = tag
        return proc

    def start(self, args: tuple[str, ...], *, private: bool) -> Run:
        proc = self.ready.pop(private, None)
        if proc is not None and proc.poll() is not None:  # the spare died: reap it, start another
            proc.communicate()
            proc = None
        if proc is None:
            proc = self._spawn(private)
        if private:  # as World.env does: forget the shared server, memoryd starts its own
            self.w.paths.server_state.unlink(missing_ok=True)
        assert proc.stdin is not None
        # -vv: the step lines at DEBUG tell where a kill landed (``last_step``)
        proc.stdin.write(json.dumps(["-vv", *args]) + "\n")
        proc.stdin.flush()
        self.ready[private] = self._spawn(private)
        run = Run(proc)
        self.w.launched[self.tags.pop(proc.pid, "")] = (args, run)
        return run

    def close(self) -> None:
        for proc in self.ready.values():
            proc.kill()
            proc.communicate(timeout=30)
        self.ready.clear()


def decision(i: int, turn: int) -> str:
    tools = ("pnpm", "ruff", "pytest", "uv", "nix", "make", "podman", "just")
    return (
        f"Decision {i}.{turn}: for this service we use {tools[i % len(tools)]} and keep the "
        f"runbook in docs/runbook-{i}.md; the staging port is {5000 + i}."
    )


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def memoryd_servers(home: Path) -> list[int]:
    """``opencode serve`` processes memoryd started (cwd in its helper folder; not MCP children)."""
    helper = str(home / "state" / "helper")
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if (
                    any(b"opencode" in c for c in cmd[:1])
                    and b"serve" in cmd
                    and os.readlink(f"/proc/{pid}/cwd").startswith(helper)
                    and alive(int(pid))
                ):
                    found.append(int(pid))
            except OSError:
                pass
    return found


def _socket_owner(port: int, candidates: list[int]) -> int | None:
    """Which of ``candidates`` holds the local TCP socket on ``port`` (from /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{f[9]}]")
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return pid
    return None


def kill9(proc: subprocess.Popen[str] | Run) -> str:
    """SIGKILL, reap, and return what the process had written to stderr."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    if isinstance(proc, Run):
        return proc.finish(timeout=30)
    return proc.communicate(timeout=30)[1] or ""


# memoryd's debug lines at each step of a pass (memoryd/write/passes.py, phase1.py, phase2.py),
# in the order of a pass; the last one a killed process wrote says where the kill landed
STEP_LINES = (
    ("tick: counting citations", "spool ingest"),
    ("tick: rendering the read-path block", "block render"),
    ("pass: waiting for opencode", "connect"),
    ("phase 1: listing sessions", "discovery"),
    ("phase 1: claiming", "claim"),
    ("phase 1: reading", "extraction (transcript read)"),
    ("phase 1: extracting", "extraction (model call)"),
    ("phase 1: storing", "finalize"),
    ("phase 2: claiming", "phase 2 claim"),
    ("phase 2: syncing", "workspace sync"),
    ("phase 2: diffing", "diff"),
    ("phase 2: consolidating", "consolidation"),
    ("phase 2: auditing", "audit"),
    ("phase 2: resetting the baseline", "baseline reset"),
    ("phase 2: recording the validated memory", "phase 2 finalize"),
    ("pass: recording the result", "pass end"),
)


def last_step(stderr: str) -> str:
    """The step a killed memoryd was in: the last step line it logged (``start`` if none)."""
    for line in reversed(stderr.splitlines()):
        for marker, step in STEP_LINES:
            if marker in line:
                return step
    return "start (settings, store, lock)"


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# -- the fault-injecting proxy ------------------------------------------------------------------

FAULTS = ("refused", "reset", "http500", "http429", "hang", "drip", "badjson", "sse_cut")


class FaultProxy:
    """An HTTP/1.0 proxy in front of opencode that breaks a seeded share of requests.

    ``mode`` picks the fault, ``rate`` the share of requests it hits (``refused`` closes the
    listening socket instead). Every injected fault is counted in ``injected``.
    """

    def __init__(self, target: str, rng: random.Random, *, hang_s: float = 60.0) -> None:
        self.target = urlsplit(target)
        self.host = self.target.hostname or "127.0.0.1"  # urlsplit leaves it None for a bare path
        self.rng = rng
        self.hang_s = hang_s
        self.mode = "pass"
        self.rate = 0.0
        self.injected = 0
        self._lock = threading.Lock()
        self.port = _free_port()
        self._httpd: ThreadingHTTPServer | None = None
        self.listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def listen(self) -> None:
        if self._httpd is None:
            ThreadingHTTPServer.allow_reuse_address = True
            self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _proxy_handler(self))
            self._httpd.daemon_threads = True
            self._httpd.handle_error = lambda *a: None  # type: ignore[method-assign]  # peers hang up
            threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def refuse(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def set(self, mode: str, rate: float) -> None:
        self.mode, self.rate = mode, rate
        if mode == "refused":
            self.refuse()
        else:
            self.listen()

    def close(self) -> None:
        self.refuse()

    def pick(self, path: str) -> str:
        with self._lock:
            mode = self.mode
            if mode == "pass" or (mode == "sse_cut") != path.startswith("/global/event"):
                return "pass"
            if self.rng.random() >= self.rate:
                return "pass"
            self.injected += 1
            return mode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proxy_handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    hop = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            fault = proxy.pick(self.path)
            if fault == "http500":
                return self._reply(500, b'{"name":"UnknownError","data":{"message":"injected"}}')
            if fault == "http429":
                return self._reply(
                    429, b'{"name":"TooManyRequests","data":{"message":"slow down"}}'
                )
            if fault == "hang":
                time.sleep(proxy.hang_s)
            conn = http.client.HTTPConnection(
                proxy.host, proxy.target.port, timeout=proxy.hang_s + 600
            )
            with contextlib.closing(conn):  # every path, the event stream and errors included
                return self._forward(conn, fault, body)

        def _forward(
            self, conn: http.client.HTTPConnection, fault: str, body: bytes | None
        ) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in hop}
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except OSError:
                return self._reply(502, b'{"name":"ProxyError","data":{"message":"upstream"}}')
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in hop:
                    self.send_header(k, v)
            self.send_header("Connection", "close")
            stream = resp.getheader("content-type", "").startswith("text/event-stream")
            if stream:
                self.end_headers()
                sent = 0
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += 1
                    if fault == "sse_cut" and sent >= 2:
                        return self._rst()
                return None
            data = resp.read()
            if fault == "badjson":
                data = data[: max(1, len(data) // 2)]
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if fault == "reset":
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                return self._rst()
            if fault == "drip":
                step = max(1, len(data) // 20)
                for i in range(0, len(data), step):
                    self.wfile.write(data[i : i + step])
                    self.wfile.flush()
                    time.sleep(0.1)
                return None
            self.wfile.write(data)
            return None

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _rst(self) -> None:
            with contextlib.suppress(OSError):
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()

        do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _any

    return Handler


@contextlib.contextmanager
def cpu_hog(n: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` processes spinning on a core each, for the load scenario."""
    procs = [subprocess.Popen([PY, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
