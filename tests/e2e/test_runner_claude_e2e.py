"""Issue 27 acceptance: memoryd with no opencode on PATH, its model calls run by the real ``claude``.

A Claude Code session (the real binary, the scripted model) is read as a phase-1 source, extracted
through ``claude -p`` with structured output, and consolidated by ``claude -p`` driving memoryd's
own file tools over MCP; ``status`` names the runner and what it spent. The runner's own calls
leave no transcript, so they never become sessions memoryd would read back.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd.scopes import scope_key
from tests.e2e.client_consolidator import (
    ClientConsolidator,
    fact_extraction,
    is_consolidation,
    is_extraction,
    responder,
)
from tests.e2e.client_models import ClientModels
from tests.e2e.clients import ClientSandbox, client_binary

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FACT = "FACT-27: the release branch is cut on Thursdays"


def memoryd(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def without_opencode(box: ClientSandbox, tmp: Path) -> dict[str, str]:
    """The sandbox's environment with a PATH holding ``claude`` and no ``opencode``."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    link = bindir / "claude"
    if not link.exists():
        link.symlink_to(client_binary("claude"))
    path = os.pathsep.join([str(bindir), str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    assert shutil.which("opencode", path=path) is None, "the test PATH must not hold opencode"
    env = box.env
    env.update(
        PATH=path,
        MEMORYD_HOME=str(tmp / "memoryd"),
        MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0",
        MEMORYD_HOST_START_SERVER="true",
    )
    return env


def status(env: dict[str, str]) -> dict[str, Any]:
    out = memoryd(env, "status", "--json")
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def ledger(home: Path) -> list[sqlite3.Row]:
    conn = sqlite3.connect(home / "memory.db")
    conn.row_factory = sqlite3.Row
    try:
        return list(conn.execute("SELECT * FROM model_calls ORDER BY id"))
    finally:
        conn.close()


def test_a_claude_code_session_becomes_memory_with_no_opencode(tmp_path: Path) -> None:
    consolidator = ClientConsolidator()
    with ClientModels(responder(consolidator, fact_extraction("FACT-27"))) as models:
        box = ClientSandbox(tmp_path / "world", models)
        user = box.claude(f"Note for later. {FACT}. Say ok.")
        assert user.returncode == 0, user.stderr[-2000:]
        assert len(box.claude_transcripts()) == 1
        env = without_opencode(box, tmp_path)
        home = Path(env["MEMORYD_HOME"])

        run = memoryd(env, "run", "--once")
        assert run.returncode == 0, run.stdout + run.stderr
        assert "1 extracted" in run.stdout, run.stdout
        assert "phase 2: consolidated" in run.stdout, run.stdout

        # both phases went through claude -p against the scripted model
        extractions = [r for r in models.requests if is_extraction(r)]
        consolidations = [r for r in models.requests if is_consolidation(r)]
        assert extractions and FACT in extractions[0].text()
        assert consolidator.runs == 1 and consolidations
        # the consolidator got memoryd's file tools and nothing of Claude Code's own
        offered = set(consolidations[0].tools) - {"DeferredToolPlaceholder"}
        assert offered == {
            f"mcp__memoryd-folder__{t}" for t in ("read", "list", "write", "edit", "delete")
        }
        assert set(extractions[0].tools) - {"DeferredToolPlaceholder"} == {"StructuredOutput"}

        key = scope_key(str(box.project))
        layer = (home / "memories" / "projects" / key / "memory_summary.md").read_text()
        assert FACT in layer
        assert FACT in (home / "memories" / "MEMORY.md").read_text()
        block = home / "state" / "readpath" / "projects" / f"{key}.md"
        assert FACT in block.read_text()
        found = memoryd(env, "search", "Thursdays", "--all")
        assert found.returncode == 0 and "FACT-27" in found.stdout, found.stdout + found.stderr

        # memoryd's own runs wrote no transcript: still only the user's session
        assert len(box.claude_transcripts()) == 1

        s = status(env)
        assert s["runner"]["name"] == "claude-code"
        assert "no opencode" in s["runner"]["why"]
        spent = s["tokens"]["per_runner"]["claude-code"]
        assert spent["calls"] == 2 and spent["tokens"] > 0 and spent["estimated_tokens"] == 0
        rows = ledger(home)
        assert [(r["phase"], r["runner"], r["outcome"]) for r in rows] == [
            ("phase1", "claude-code", "ok"),
            ("phase2", "claude-code", "ok"),
        ]
        # the tokens are the client's own report (the scripted server's usage), not a guess
        assert rows[0]["input_tokens"] > len(FACT) // 4
        text = memoryd(env, "status")
        assert "runner" in text.stdout and "claude-code" in text.stdout
        inspect = memoryd(env, "inspect")
        assert "runner: claude-code (setting auto; auto: no opencode" in inspect.stdout

        # nothing new: the next pass makes no model call at all
        before = len(models.requests)
        again = memoryd(env, "run", "--once")
        assert again.returncode == 0, again.stderr
        assert len(models.requests) == before

        # the way back (`memoryd install claude-code`, no opencode either): the fact is in the
        # next Claude Code session's request
        wired = memoryd(env, "install", "claude-code")
        assert wired.returncode == 0, wired.stdout + wired.stderr
        models.clear()
        nxt = box.claude("What do we know about releases? Say ok.")
        assert nxt.returncode == 0, nxt.stderr[-2000:]
        assert any(FACT in r.text() for r in models.requests), "the block did not reach Claude"
        # ... while memoryd's own runs load neither that hook nor memoryd's MCP server
        models.clear()
        third = memoryd(env, "run", "--once")
        assert "1 claimed" in third.stdout, third.stdout + third.stderr
        runs = [r for r in models.requests if is_extraction(r)]
        assert runs and all(FACT not in json.dumps(r.body.get("system")) for r in runs)
        assert all(not any(t.startswith("mcp__memoryd__") for t in r.tools) for r in runs)
        assert len(box.claude_transcripts()) == 2  # the user's two sessions, none of memoryd's


def test_no_runner_at_all_names_what_to_install(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "MEMORYD_HOME": str(tmp_path / "memoryd"),
    }
    assert shutil.which("claude", path=env["PATH"]) is None
    out = memoryd(env, "run", "--once")
    assert out.returncode == 3
    assert "opencode" in out.stderr and "Claude Code" in out.stderr and "install" in out.stderr
