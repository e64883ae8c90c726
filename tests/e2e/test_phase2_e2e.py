"""Issue 3 acceptance: consolidation with the real ``opencode serve`` and a scripted consolidator."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from dulwich.repo import Repo

from memoryd.scopes import scope_key
from tests.e2e.consolidator import (
    CONSOLIDATOR_TOOLS,
    ScriptedConsolidator,
    install,
    is_consolidation,
)
from tests.e2e.mockllm import MockLLM, RecordedRequest, ToolCall
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env, status


def consolidation_requests(mock: MockLLM) -> list[RecordedRequest]:
    return [r for r in mock.requests if is_consolidation(r.body)]


def session(box: OpencodeSandbox, title: str, *turns: str) -> str:
    sid: str = box.driver.create_session(title, directory=box.project_dir)["id"]
    for t in turns:
        box.driver.say(sid, t, directory=box.project_dir)
    return sid


def bump_usage(home: Path, session_id: str) -> None:
    conn = sqlite3.connect(home / "memory.db")
    with conn:
        conn.execute(
            "UPDATE stage1_outputs SET usage_count = usage_count + 5, last_usage = ? WHERE session_id = ?",
            (int(time.time() * 1000), session_id),
        )
    conn.close()


def test_consolidation_no_op_usage_and_forgetting(
    sandbox: OpencodeSandbox, mock_llm: MockLLM
) -> None:
    cons = ScriptedConsolidator()
    install(mock_llm, cons)
    env = run_env(sandbox)
    home = sandbox.memoryd_home
    memories = home / "memories"
    # the sessions run in the sandbox's project folder: their inputs live in its project folder
    proj = memories / "projects" / scope_key(str(sandbox.project_dir))
    rel = f"projects/{proj.name}"
    keep = session(
        sandbox,
        "database choice",
        "We chose PostgreSQL 16 for the billing service; SQLite is too limited.",
    )
    gone = session(
        sandbox,
        "flaky test",
        "The flaky test in test_sync.py was a race; fixed by awaiting the queue drain.",
    )
    assert memoryd(env, "install", "opencode").returncode == 0

    first = memoryd(env, "run", "--once")
    assert first.returncode == 0, first.stderr + first.stdout
    assert "phase 2: consolidated" in first.stdout, first.stdout
    memory = (memories / "MEMORY.md").read_text()
    assert "PostgreSQL 16" in memory and "awaiting the queue drain" in memory
    assert (memories / "memory_summary.md").read_text().splitlines()[0] == "v1"
    assert not (memories / ".git").exists() and (home / "baseline.git").is_dir()
    assert not (memories / "phase2_workspace_diff.md").exists()
    reqs = consolidation_requests(mock_llm)
    assert reqs and all(set(r.tools) == CONSOLIDATOR_TOOLS for r in reqs)
    assert "A raw_memories.md" in cons.diffs[0]
    snap = status(env)
    assert snap["phase2"]["status"] == "done" and snap["phase2"]["consumed_outputs"] == 2
    assert snap["phase2"]["last_success"] and snap["phase2"]["next_eligible"]
    assert snap["tokens"]["per_phase"]["phase2"]["calls"] == 1
    titles = [s["title"] for s in sandbox.driver.list_all_sessions(roots=False, archived=True)]
    assert not [t for t in titles if t.startswith("memoryd-")]

    # nothing new: no model call, even with the cooldown ignored
    mock_llm.clear()
    second = memoryd(env, "run", "--once", "--force-consolidation")
    assert second.returncode == 0 and mock_llm.requests == [], second.stdout
    assert "unchanged" in second.stdout

    # the cooldown holds without --force-consolidation
    third = memoryd(env, "run", "--once")
    assert "cooldown" in third.stdout

    # only usage counts moved: still no model call
    bump_usage(home, keep)
    mock_llm.clear()
    fourth = memoryd(env, "run", "--once", "--force-consolidation")
    assert fourth.returncode == 0 and mock_llm.requests == [], fourth.stdout

    # a session deleted in opencode is forgotten, and the diff says so
    summaries_before = {p.name for p in (proj / "rollout_summaries").iterdir()}
    assert sandbox.driver.delete_session(gone)
    mock_llm.clear()
    fifth = memoryd(env, "run", "--once", "--force-consolidation")
    assert fifth.returncode == 0, fifth.stderr
    assert "1 forgotten" in fifth.stdout and "phase 2: consolidated" in fifth.stdout
    removed = summaries_before - {p.name for p in (proj / "rollout_summaries").iterdir()}
    assert len(removed) == 1
    diff = cons.diffs[-1]
    assert f"D {rel}/rollout_summaries/{removed.pop()}" in diff
    assert f"M {rel}/raw_memories.md" in diff
    assert gone not in (proj / "raw_memories.md").read_text()
    assert "queue drain" not in (proj / "raw_memories.md").read_text()
    assert "queue drain" not in (memories / "MEMORY.md").read_text()
    assert "PostgreSQL 16" in (memories / "MEMORY.md").read_text()


def test_misbehaving_consolidator_changes_nothing_it_may_not(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box = make_sandbox()
    env = run_env(box)
    home = box.memoryd_home
    memories = home / "memories"
    install(mock_llm, ScriptedConsolidator())
    session(
        box, "ci cache", "The CI cache key must include the lockfile hash or builds use stale deps."
    )
    assert memoryd(env, "install", "opencode").returncode == 0
    assert "phase 2: consolidated" in memoryd(env, "run", "--once").stdout

    note = memories / "extensions" / "ad_hoc" / "notes" / "2026-11-29T10-00-00-deploy.md"
    note.write_text("Always deploy on Tuesdays.\n")
    head_before = Repo(str(home / "baseline.git")).head()
    outside_rel = box.root / "outside-relative.md"
    outside_abs = box.root / "outside-absolute.md"
    link = memories / "skills" / "evil-link"

    bad = ScriptedConsolidator(
        extra_steps=[
            ToolCall("write", {"filePath": "../../outside-relative.md", "content": "escaped"}),
            ToolCall("write", {"filePath": str(outside_abs), "content": "escaped"}),
            ToolCall("read", {"filePath": "extensions/ad_hoc/notes/2026-11-29T10-00-00-deploy.md"}),
            ToolCall(
                "write",
                {
                    "filePath": "extensions/ad_hoc/notes/2026-11-29T10-00-00-deploy.md",
                    "content": "Never deploy.\n",
                },
            ),
        ],
        side_effect=lambda: os.symlink(box.root / "opencode-server.log", link),
    )
    install(mock_llm, bad)
    mock_llm.clear()
    out = memoryd(env, "run", "--once", "--force-consolidation")
    assert out.returncode == 0, out.stderr
    assert "phase 2: failed" in out.stdout, out.stdout
    assert bad.runs == 1
    assert not outside_rel.exists() and not outside_abs.exists()
    assert note.read_text() == "Always deploy on Tuesdays.\n"
    assert not link.is_symlink() and not any(p.is_symlink() for p in memories.rglob("*"))
    assert Repo(str(home / "baseline.git")).head() == head_before
    snap = status(env)
    assert snap["phase2"]["status"] == "failed"
    assert snap["phase2"]["last_error"]
    assert json.dumps(snap).count("Tuesdays") == 0
