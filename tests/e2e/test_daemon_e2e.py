"""Issue 5 acceptance: the daemon against the real ``opencode serve``: events, restarts, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env, status


class Daemon(subprocess.Popen):  # type: ignore[type-arg]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def start_daemon(env: dict[str, str], *extra: str) -> Daemon:
    log = Path(env["MEMORYD_HOME"]) / f"daemon-{time.monotonic_ns()}.out"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        proc = Daemon(
            [sys.executable, "-m", "memoryd", "run", "--interval", "3600", *extra],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log = log
    return proc


def wait_for(
    pred: Callable[[], Any], timeout: float, what: str, log: Callable[[], str] = lambda: ""
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{log()[-3000:]}")


def output_ids(home: Path) -> set[str]:
    db = home / "memory.db"
    if not db.exists():
        return set()
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT session_id FROM stage1_outputs")}
    except sqlite3.OperationalError:
        return set()
    finally:
        conn.close()


def job(home: Path, sid: str) -> dict[str, Any] | None:
    conn = sqlite3.connect(home / "memory.db")
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute(
            "SELECT * FROM jobs WHERE kind = 'memory_stage1' AND job_key = ?", (sid,)
        ).fetchone()
        return dict(row) if row else None
    finally:
        conn.close()


def stop(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def processes_under(root: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(str(root)):
                    found.append(int(pid))
            except OSError:
                pass
    return found


def test_event_stream_extracts_within_seconds_and_survives_restart(
    sandbox: OpencodeSandbox, mock_llm: MockLLM
) -> None:
    env = run_env(sandbox)
    assert memoryd(env, "install", "opencode").returncode == 0
    daemon = start_daemon(env)
    try:
        wait_for(
            lambda: (status(env).get("daemon") or {}).get("events", {}).get("state") == "connected",
            30,
            "the event stream to connect",
        )
        d = sandbox.driver
        sid = d.create_session("event driven", directory=sandbox.project_dir)["id"]
        t0 = time.monotonic()
        d.say(
            sid,
            "We agreed to pin Node 20 LTS in .nvmrc for every service.",
            directory=sandbox.project_dir,
        )
        wait_for(
            lambda: sid in output_ids(sandbox.memoryd_home),
            20,
            "extraction through the event stream",
            daemon.output,
        )
        assert time.monotonic() - t0 < 20

        sandbox.restart()  # kill and restart opencode: the daemon must reconnect and carry on
        wait_for(
            lambda: (
                status(env)["daemon"]["events"]["reconnects"] >= 1
                and status(env)["daemon"]["events"]["state"] == "connected"
            ),
            45,
            "the event stream to reconnect",
            daemon.output,
        )
        d = sandbox.driver  # the old driver's connection died with the old server
        sid2 = d.create_session("after restart", directory=sandbox.project_dir)["id"]
        d.say(
            sid2,
            "The staging database moved to port 5433 after the migration.",
            directory=sandbox.project_dir,
        )
        wait_for(
            lambda: sid2 in output_ids(sandbox.memoryd_home),
            30,
            "extraction after the restart",
            daemon.output,
        )
        assert daemon.poll() is None
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(15)
        finally:
            stop(daemon)
    assert daemon.returncode == 0, daemon.output()


def test_sigterm_during_extraction_releases_and_cleans_up(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    started, release = threading.Event(), threading.Event()
    default = mock_llm.default_responder

    def slow(req: dict[str, Any]) -> Any:
        if any(
            t.get("function", {}).get("name") == "StructuredOutput" for t in req.get("tools") or []
        ):
            started.set()
            release.wait(60)
        return default(req)

    mock_llm.set_responder(slow)
    sid = box.driver.create_session("slow one", directory=box.project_dir)["id"]
    box.driver.say(
        sid,
        "Remember that the release branch is cut every Thursday at noon.",
        directory=box.project_dir,
    )
    env = run_env(box)
    assert memoryd(env, "install", "opencode").returncode == 0
    env.pop("MEMORYD_HOST_URL")  # the daemon starts (and must stop) its own opencode too
    box.stop()
    daemon = start_daemon(env)
    try:
        assert started.wait(60), "the extraction never reached the model"
        t0 = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
        elapsed = time.monotonic() - t0
    finally:
        release.set()
        stop(daemon)
    assert daemon.returncode == 0, daemon.output()
    assert elapsed < 10
    said = daemon.output()
    # a clean stop reads as one (issue 29): no scheduler error with a CancelledError traceback
    assert "raised an exception" not in said and "Traceback" not in said, said
    assert said.count("memoryd daemon stopped") == 1, said
    j = job(box.memoryd_home, sid)
    assert j is not None and j["status"] == "pending" and j["retry_remaining"] == 3, j
    assert processes_under(box.root) == []
    try:
        os.killpg(daemon.pid, 0)
        raise AssertionError("the daemon's process group still has members")
    except ProcessLookupError:
        pass
    # the helper session is gone from opencode
    box.start()
    titles = [s["title"] for s in box.driver.list_all_sessions(roots=False, archived=True)]
    assert not [t for t in titles if t.startswith("memoryd-")], titles
    snap = json.loads(memoryd(run_env(box), "status", "--json").stdout)
    assert snap["daemon"]["running"] is False


def test_second_daemon_on_the_same_home_refuses(
    sandbox: OpencodeSandbox, mock_llm: MockLLM
) -> None:
    env = run_env(sandbox)
    first = start_daemon(env)
    try:
        wait_for(lambda: (status(env).get("daemon") or {}).get("running"), 30, "the first daemon")
        second = start_daemon(env)
        second.wait(30)
        text = second.output()
        assert second.returncode == 4 and "already runs on this home" in text
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(15)
        stop(first)
