"""Issue 16 acceptance: what memoryd adds to the user's opencode, per request and per instance."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM, RecordedRequest, ToolCall, last_user_text, tools_offered
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_phase1_e2e import _processes_under, memoryd, run_env

MEMORY_TOOLS = {"memory_search", "memory_read", "memory_note"}


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process below ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        out.append((p, cmd))
        todo += children.get(p, [])
    return out


def tool_defs(req: RecordedRequest) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in req.body.get("tools") or []}


def test_user_sees_three_lean_tools_and_no_helpers(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    env = run_env(box)
    d = box.driver
    cons = ScriptedConsolidator()
    install(mock_llm, cons)
    src = d.create_session("lint setup", directory=box.project_dir)["id"]
    d.say(src, "Our lint rule: run ruff check --fix before committing.", directory=box.project_dir)

    inst = memoryd(env, "install", "opencode")
    assert inst.returncode == 0, inst.stderr
    # only the shim goes into the user's config: no agents, no MCP server
    assert sorted(p.name for p in (box.config_dir / "plugin").iterdir()) == ["memoryd.js"]
    assert not (box.config_dir / "agent").exists()
    cfg = json.loads((box.config_dir / "opencode.json").read_text())
    assert "memoryd" not in (cfg.get("mcp") or {})
    box.restart()  # load the shim
    d = box.driver

    out = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in out.stdout, out.stdout + out.stderr
    assert "ruff" in (box.memoryd_home / "memories" / "MEMORY.md").read_text()

    # after the pass: nothing of memoryd's runs under opencode (no MCP server per helper instance)
    assert not [c for _, c in descendants(box.pid) if "memoryd" in c]

    # the helper agents exist only in memoryd's folders
    user_agents = {a["name"] for a in d.agents(box.project_dir)}
    assert not {n for n in user_agents if n.startswith("memoryd-")}
    assert "memoryd-extract" in {a["name"] for a in d.agents(box.memoryd_home / "state" / "helper")}
    assert "memoryd-consolidate" in {a["name"] for a in d.agents(box.memoryd_home / "memories")}

    # the user's request: three memory tools, no MCP tools, no helper agent in the task tool
    mock_llm.clear()
    user = d.create_session("daily work", directory=box.project_dir)["id"]
    d.say(user, "how do we lint?", directory=box.project_dir)
    req = [r for r in mock_llm.requests if r.session_id == user][-1]
    defs = tool_defs(req)
    assert set(defs) >= MEMORY_TOOLS
    assert not [n for n in defs if n.startswith("memoryd_") or "mcp" in n]
    assert "memoryd-" not in json.dumps(defs.get("task", {}))
    added = sum(len(json.dumps({"type": "function", "function": defs[n]})) for n in MEMORY_TOOLS)
    assert added <= 1000, added

    # a tool call is answered by a short-lived memoryd process, which is gone afterwards
    mock_llm.clear()
    d.say(user, "[[tool:memory_search query=ruff]]", directory=box.project_dir)
    results = [
        m["content"]
        for r in mock_llm.requests
        if r.session_id == user
        for m in r.messages
        if m["role"] == "tool"
    ]
    assert results and "ruff" in str(results[-1]), results
    default = mock_llm.default_responder

    def reader(req: dict[str, Any]) -> Any:  # the mock renames a `path=` argument; call exactly
        wanted = last_user_text(req).removeprefix("read ")
        if req["messages"][-1]["role"] == "user" and wanted != last_user_text(req):
            return ToolCall("memory_read", {"path": wanted, "line": 1})
        return default(req)

    mock_llm.set_responder(reader)
    d.say(user, "read MEMORY.md", directory=box.project_dir)
    last = [r for r in mock_llm.requests if r.session_id == user][-1]
    assert "ruff" in str(last.messages[-1]["content"])
    d.say(user, "read ../memory.db", directory=box.project_dir)
    last = [r for r in mock_llm.requests if r.session_id == user][-1]
    assert "must stay inside the memory folder" in str(last.messages[-1]["content"])
    assert not [c for _, c in descendants(box.pid) if "memoryd" in c]
    assert tools_offered(req)  # (the request list above was the user's, not a helper's)


def test_empty_home_pass_makes_no_model_call_and_starts_opencode_once(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    """Issue 16: a pass on a truly empty home (no sessions, no notes) with memoryd's own server
    makes no model call, starts and stops opencode once, and leaves nothing running."""
    box: OpencodeSandbox = make_sandbox(start=False)
    env = box.base_env  # no server configured: memoryd starts (and stops) its own
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "-vv", "run", "--once")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "0 sessions seen" in out.stdout and "nothing to consolidate yet" in out.stdout
    assert mock_llm.requests == []
    assert out.stderr.count("started opencode serve") == 1
    assert out.stderr.count("stopped opencode serve") == 1
    assert _processes_under(box.root) == []
