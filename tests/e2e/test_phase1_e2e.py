"""Issue 2 acceptance: memoryd against the real ``opencode serve`` and a scripted model."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.consolidator import is_consolidation
from tests.e2e.mockllm import MockLLM, all_request_text, tools_offered, transcript_of
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox

SECRET = "sk-proj-Zq8XwV3mT1uP6yR4nL0kJ7hG2fD5sA9cB1"
AWS_KEY = "AKIAQX7Z3M5N2P8R4T6V"


def memoryd(
    env: dict[str, str], *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_env(box: OpencodeSandbox, **extra: str) -> dict[str, str]:
    env = box.env
    env.update(MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0", MEMORYD_MAX_ROLLOUTS_PER_STARTUP="16", **extra)
    return env


def status(env: dict[str, str]) -> dict[str, Any]:
    out = memoryd(env, "status", "--json")
    assert out.returncode == 0, out.stderr
    snapshot: dict[str, Any] = json.loads(out.stdout)
    return snapshot


def db_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.glob("memory.db*"))


def outputs(home: Path) -> dict[str, sqlite3.Row]:
    conn = sqlite3.connect(home / "memory.db")
    conn.row_factory = sqlite3.Row
    try:
        return {r["session_id"]: r for r in conn.execute("SELECT * FROM stage1_outputs")}
    finally:
        conn.close()


def make_sessions(box: OpencodeSandbox) -> dict[str, str]:
    d = box.driver
    ids: dict[str, str] = {}

    def session(key: str, title: str, *turns: str) -> None:
        sid = d.create_session(title, directory=box.project_dir)["id"]
        for turn in turns:
            d.say(sid, turn, directory=box.project_dir)
        ids[key] = sid

    session(
        "tool",
        "write the colour note",
        "Please record my favourite colour in a note file for the design system.",
        "[[tool:write path=notes/colour.md content=teal]]",
        "Thanks, keep using notes/ for design decisions from now on.",
    )
    session(
        "secret",
        "configure deploy credentials",
        f"The deploy script needs OPENAI_API_KEY={SECRET} and the AWS key id {AWS_KEY}.",
        "Store them in the environment, never commit them to the repository.",
    )
    session("smalltalk", "hello", "hi!", "thanks, bye")
    session(
        "prefs",
        "tooling preferences",
        "For this repository we decided to use pnpm instead of npm for installing packages.",
        "Also run ruff format before every commit; the CI rejects unformatted code.",
    )
    session(
        "build",
        "fix the failing build",
        "The build fails with ModuleNotFoundError: No module named 'memoryd' when running pytest.",
        "Installing in editable mode with pip install -e . fixed the import error.",
    )
    return ids


def test_phase1_against_real_opencode(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    ids = make_sessions(sandbox)
    home = sandbox.memoryd_home
    env = run_env(sandbox)

    inst = memoryd(env, "install", "opencode", "--config-dir", str(sandbox.config_dir))
    assert inst.returncode == 0, inst.stderr
    assert (sandbox.config_dir / "plugin" / "memoryd.js").is_file()
    assert not (sandbox.config_dir / "agent" / "memoryd-extract.md").exists()

    mock_llm.clear()
    first = memoryd(env, "run", "--once")
    assert first.returncode == 0, first.stderr + first.stdout
    assert "5 extracted" not in first.stdout  # small talk yields nothing to keep

    # one extraction request per session, each offered exactly the StructuredOutput tool
    extraction = mock_llm.extraction_requests
    assert len(extraction) == 5
    assert all(tools_offered(r) == ["StructuredOutput"] for r in extraction)
    # no title calls and no other model traffic besides the one consolidation that follows
    assert len([r for r in mock_llm.requests if not is_consolidation(r.body)]) == 5

    # an output for every session with something durable, none for small talk or helpers
    rows = outputs(home)
    assert set(rows) == {ids["tool"], ids["secret"], ids["prefs"], ids["build"]}
    assert "pnpm" in rows[ids["prefs"]]["raw_memory"]
    assert rows[ids["tool"]]["cwd"] == str(sandbox.project_dir)
    assert "write" in transcript_of(next(r for r in extraction if "colour" in transcript_of(r)))

    # no helper sessions left behind, and none became a candidate
    titles = [s["title"] for s in sandbox.driver.list_all_sessions(roots=False, archived=True)]
    assert not [t for t in titles if t.startswith("memoryd-")]

    # the secret never reached the model and never landed in the DB
    for req in mock_llm.requests:
        text = all_request_text(req)
        assert SECRET not in text and AWS_KEY not in text
    assert SECRET.encode() not in db_bytes(home) and AWS_KEY.encode() not in db_bytes(home)

    snap = status(env)
    assert snap["stage1"]["outputs"] == 4
    assert snap["stage1"]["jobs"]["done"] == 5
    assert snap["host"]["url"] == sandbox.url and snap["host"]["version"] == "1.18.33"
    assert snap["tokens"]["per_phase"]["phase1"]["calls"] == 5
    assert snap["tokens"]["spent"]["input"] > 0

    # nothing new -> zero model calls
    mock_llm.clear()
    second = memoryd(env, "run", "--once")
    assert second.returncode == 0, second.stderr
    assert mock_llm.requests == []

    # one new turn in one session -> exactly one re-extraction
    sandbox.driver.say(
        ids["prefs"], "Correction: use bun, not pnpm, from now on.", directory=sandbox.project_dir
    )
    mock_llm.clear()
    third = memoryd(env, "run", "--once")
    assert third.returncode == 0, third.stderr
    assert len(mock_llm.extraction_requests) == 1
    assert "use bun" in transcript_of(mock_llm.extraction_requests[0])
    assert "bun" in outputs(home)[ids["prefs"]]["raw_memory"]

    # a schema-breaking answer -> the job fails and waits for a retry; the pass does not crash
    sandbox.driver.say(
        ids["build"], "It broke again after the rebase.", directory=sandbox.project_dir
    )
    mock_llm.set_extraction_reply(
        lambda req: {"raw_memory": 42, "rollout_summary": ["not", "text"]}
    )
    mock_llm.clear()
    fourth = memoryd(env, "run", "--once")
    assert fourth.returncode == 0, fourth.stderr
    assert "1 failed" in fourth.stdout
    snap = status(env)
    err = snap["stage1"]["last_errors"][0]
    assert err["session_id"] == ids["build"] and "schema" in err["error"] and err["retry_at"]
    assert snap["stage1"]["jobs"]["pending"] == 1
    assert "pnpm" not in json.dumps(snap)  # status shows no memory content
    assert outputs(home)[ids["build"]]["raw_memory"]  # the previous memory is kept

    mock_llm.set_extraction_reply(None)
    mock_llm.clear()
    fifth = memoryd(env, "run", "--once")
    assert fifth.returncode == 0 and mock_llm.requests == []  # backing off: no retry yet
    titles = [s["title"] for s in sandbox.driver.list_all_sessions(roots=False, archived=True)]
    assert not [t for t in titles if t.startswith("memoryd-")]


def _processes_under(root: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(root)):
            found.append(int(pid))
    return found


def test_private_server_is_started_and_stopped(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box = make_sandbox()
    sid = box.driver.create_session("private server path", directory=box.project_dir)["id"]
    box.driver.say(
        sid,
        "We settled on PostgreSQL 16 for the analytics service database.",
        directory=box.project_dir,
    )
    box.stop()  # memoryd must now start (and stop) its own opencode on the same data
    env = box.base_env
    env.update(MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0")
    assert memoryd(env, "install", "opencode").returncode == 0
    mock_llm.clear()
    out = memoryd(env, "run", "--once")
    assert out.returncode == 0, out.stderr + out.stdout
    assert "1 extracted" in out.stdout
    assert sid in outputs(box.memoryd_home)
    assert _processes_under(box.root) == []
    snap = status(env)
    assert snap["host"]["private"] is True and snap["host"]["version"] == "1.18.33"


def test_unreachable_host_and_bad_password(sandbox: OpencodeSandbox) -> None:
    env = run_env(sandbox, MEMORYD_HOST_URL="http://127.0.0.1:9")
    out = memoryd(env, "run", "--once", timeout=60)
    assert out.returncode == 3
    assert out.stderr.strip().count("\n") == 0 and "unreachable" in out.stderr
    env = run_env(sandbox, MEMORYD_HOST_PASSWORD="wrong")
    out = memoryd(env, "run", "--once", timeout=60)
    assert out.returncode == 3 and "refused our credentials" in out.stderr
