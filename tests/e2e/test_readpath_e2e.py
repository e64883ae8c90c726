"""Issue 4 acceptance: the block in every turn, helpers without it, hand edits, citations → usage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from memoryd.scopes import scope_key
from tests.e2e.consolidator import ScriptedConsolidator, install, is_consolidation
from tests.e2e.mockllm import MockLLM, RecordedRequest, Text, is_extraction, last_user_text
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env


def systems(req: RecordedRequest) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else str(m["content"])
        for m in req.messages
        if m["role"] == "system"
    ]


def usage(home: Path, sid: str) -> int:
    conn = sqlite3.connect(home / "memory.db")
    try:
        count: int = conn.execute(
            "SELECT usage_count FROM stage1_outputs WHERE session_id = ?", (sid,)
        ).fetchone()[0]
        return count
    finally:
        conn.close()


def test_block_in_every_turn_and_citations_feed_usage(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    env = run_env(box)
    home = box.memoryd_home
    d = box.driver
    cons = ScriptedConsolidator()
    install(mock_llm, cons)
    src = d.create_session("lint setup", directory=box.project_dir)["id"]
    d.say(
        src,
        "Our lint rule: run ruff check --fix before committing; CI blocks on lint errors.",
        directory=box.project_dir,
    )
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in out.stdout, out.stdout + out.stderr
    # the session's folder is its project: its block is global + that project's layer
    key = scope_key(str(box.project_dir))
    block_file = home / "state" / "readpath" / "projects" / f"{key}.md"
    block = block_file.read_text()  # rendered for every project with a layer
    box.restart()  # load the shim
    d = box.driver
    assert "ruff" in block  # the summary made it into the block

    # 20 turns in a user session, one with a tool call: the block is the 2nd system message, byte-identical
    default = mock_llm.default_responder
    cite = (
        "Use ruff.\n\n<memory-citation>\n<citation_entries>\nMEMORY.md:1-3|note=[lint rule]\n"
        f"</citation_entries>\n<session_ids>\n{src}\n</session_ids>\n</memory-citation>"
    )

    def responder(req: dict[str, Any]) -> Any:
        if is_consolidation(req):
            return cons(req)
        if "please cite" in last_user_text(req) and not is_extraction(req):
            return Text(cite)
        return default(req)

    mock_llm.set_responder(responder)
    mock_llm.clear()
    user = d.create_session("daily work", directory=box.project_dir)["id"]
    for i in range(19):
        d.say(user, f"question {i} about the build", directory=box.project_dir)
    d.say(user, "note it [[tool:write path=notes/todo.md content=lint]]", directory=box.project_dir)
    turns = [r for r in mock_llm.requests if r.session_id == user]
    assert len(turns) == 21  # 20 turns + the follow-up step after the tool call
    assert turns[-1].messages[-1]["role"] == "tool"
    for r in turns:
        sys_msgs = systems(r)
        assert len(sys_msgs) == 2 and sys_msgs[1] == block

    # memoryd's helper sessions get no block
    mock_llm.clear()
    assert memoryd(env, "run", "--once").returncode == 0
    extraction = mock_llm.extraction_requests
    assert extraction, "the user session should have been extracted"
    assert all(block not in "\n".join(systems(r)) for r in mock_llm.requests)

    # a hand edit of the summary shows in the next turn once the daemon re-renders
    summary = home / "memories" / "memory_summary.md"
    summary.write_text(summary.read_text() + "- HAND-EDITED: prefer pnpm workspaces\n")
    assert memoryd(env, "run", "--once").returncode == 0
    new_block = block_file.read_text()
    assert "HAND-EDITED" in new_block and new_block != block
    mock_llm.clear()
    d.say(user, "one more question", directory=box.project_dir)
    assert systems(mock_llm.requests[-1])[1] == new_block

    # a reply ending in a citation block is stored without it, and usage rises by exactly one
    before = usage(home, src)
    reply = d.say(user, "please cite what you used", directory=box.project_dir)
    stored = d.messages(user, directory=box.project_dir)
    texts = [p.get("text", "") for m in stored for p in m["parts"] if p.get("type") == "text"]
    assert any(t.startswith("Use ruff.") for t in texts)
    assert not any("memory-citation" in t for t in texts)
    assert "memory-citation" not in str(reply)
    assert memoryd(env, "run", "--once").returncode == 0
    assert usage(home, src) == before + 1
    assert memoryd(env, "run", "--once").returncode == 0
    assert usage(home, src) == before + 1  # counted once, not again on the next pass
