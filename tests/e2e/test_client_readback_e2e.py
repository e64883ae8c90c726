"""Issue 25, the way back: an opencode fact reaches the real Claude Code and Codex.

A fact said in a real opencode session is extracted and consolidated by memoryd (scripted models,
scoped consolidator: the fact lands in that project's layer only). ``memoryd install claude-code``
and ``memoryd install codex`` then wire both real CLIs to memoryd, and the scripted client model
server records what each sends: the memory block, byte for byte the one opencode got for the same
project, and not for another project; memoryd's read tools called over MCP with no approval and
answered in plain text; the note tool still refused by Codex.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memoryd.host.mcp_config import KEY
from tests.e2e.client_models import ClientModels, ClientRequest
from tests.e2e.clients import ClientSandbox, client_binary
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM, Text, ToolCall
from tests.e2e.sandbox import OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env
from tests.e2e.test_readpath_e2e import systems

pytestmark = pytest.mark.e2e

FACT = "Deploys in this repo go out with make ship-heron from the release branch."
MARK = "ship-heron"
NOTE = "Remember: the heron pipeline needs two approvals."
CODEX_NS = f"mcp__{KEY}"


def strings(value: Any) -> list[str]:
    """Every string inside a request body (a block must sit whole inside one of them)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def codex_tools(req: ClientRequest) -> list[str]:
    """Codex offers each MCP server as one namespace tool; ``ns/name`` for the tools inside."""
    out = []
    for tool in req.body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            out += [f"{tool['name']}/{t.get('name')}" for t in tool.get("tools") or []]
    return out


def scripted(tool: str, args: dict[str, Any]) -> Any:
    """A model that calls memoryd's ``tool`` once (through Claude Code's ToolSearch when the
    tool is not offered yet), then answers with the text of the result."""

    def respond(req: ClientRequest) -> Any:
        results = req.tool_results()
        if req.api == "messages":
            name = f"mcp__{KEY}__{tool}"
            if any(not r.lstrip().startswith('{"type": "tool_reference"') for r in results):
                return Text("done")
            if name in req.tools:
                return ToolCall(name, args)
            if "ToolSearch" in req.tools and not results:
                return ToolCall("ToolSearch", {"query": f"select:{name}", "max_results": 5})
            return Text("no memory tool offered")
        if results:
            return Text("done")
        name = f"{CODEX_NS}/{tool}"
        if name in codex_tools(req):
            return ToolCall(name, args)
        return Text("no memory tool offered")

    return respond


def memory_result(req: ClientRequest) -> str:
    """The tool result memoryd's call produced (not Claude Code's ToolSearch reference)."""
    results = [r for r in req.tool_results() if '"tool_reference"' not in r]
    assert results, req.body
    return results[-1]


def assert_plain(result: str) -> None:
    assert MARK in result
    assert '{"result"' not in result and '"result":' not in result
    body = result.split("\n", 1)[1] if result.startswith("Wall time") else result
    with pytest.raises(ValueError):
        json.loads(body)  # text, not a JSON wrapper around text


@pytest.fixture
def opencode_block(make_sandbox: Any, mock_llm: MockLLM) -> tuple[OpencodeSandbox, str]:
    """The block opencode's next turn carries after the fact was extracted and consolidated."""
    box: OpencodeSandbox = make_sandbox()
    env = run_env(box)
    install(mock_llm, ScriptedConsolidator(scoped=True))
    d = box.driver
    sid = d.create_session("deploys", directory=box.project_dir)["id"]
    d.say(sid, FACT, directory=box.project_dir)
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in out.stdout, out.stdout + out.stderr
    box.restart()  # load the shim
    mock_llm.clear()
    user = box.driver.create_session("work", directory=box.project_dir)["id"]
    box.driver.say(user, "what is new?", directory=box.project_dir)
    block = systems([r for r in mock_llm.requests if r.session_id == user][-1])[1]
    assert MARK in block
    return box, block


def test_opencode_memory_reaches_claude_code_and_codex(
    opencode_block: tuple[OpencodeSandbox, str], tmp_path: Path
) -> None:
    box, block = opencode_block
    other = tmp_path / "other-project"
    other.mkdir()
    with ClientModels() as models:
        clients = ClientSandbox(
            tmp_path / "clients", models, extra_env={"MEMORYD_HOME": str(box.memoryd_home)}
        )
        env = clients.env
        original = (clients.codex_home / "config.toml").read_bytes()
        for client in ("claude-code", "codex"):
            out = memoryd(env, "install", client, "--codex-bin", str(client_binary("codex")))
            assert out.returncode == 0, out.stdout + out.stderr
            assert "/hooks" not in out.stdout  # the Codex hook was trusted, not left to the user

        # the block, as opencode had it, in the first request of each client
        models.set_responder(scripted("memory_search", {"queries": [MARK]}))
        claude = clients.claude("how do we deploy?", cwd=box.project_dir)
        assert claude.returncode == 0, claude.stderr[-2000:]
        claude_reqs = list(models.requests)
        assert any(block in s for s in strings(claude_reqs[0].body))
        models.clear()
        codex = clients.codex("how do we deploy?", cwd=box.project_dir)
        assert codex.returncode == 0, codex.stderr[-2000:]
        codex_reqs = list(models.requests)
        developer = [
            c["text"]
            for item in codex_reqs[0].body["input"]
            if item.get("role") == "developer"
            for c in item.get("content") or []
            if isinstance(c, dict) and isinstance(c.get("text"), str)
        ]
        assert block in developer  # one developer message, exactly the block

        # each read tool call ran without a prompt and came back as plain text
        assert "done" in claude.stdout, claude.stdout
        assert_plain(memory_result(claude_reqs[-1]))
        assert_plain(memory_result(codex_reqs[-1]))

        # another project: no block with the fact, in either client
        models.clear()
        models.set_responder(None)
        assert clients.claude("hello", cwd=other).returncode == 0
        assert clients.codex("hello", cwd=other).returncode == 0
        assert len({r.api for r in models.requests}) == 2
        assert all(MARK not in r.text() for r in models.requests)

        # the note tool stays gated in Codex: refused, nothing reaches memoryd
        models.clear()
        models.set_responder(scripted("memory_add_note", {"note": NOTE}))
        codex = clients.codex("remember the approvals rule", cwd=box.project_dir)
        assert codex.returncode == 0, codex.stderr[-2000:]
        refusal = models.requests[-1].tool_results()[-1]
        assert re.search(r"approv", refusal, re.I), refusal
        held = [
            p
            for p in box.memoryd_home.rglob("*")
            if p.is_file() and "heron pipeline" in p.read_text(errors="replace")
        ]
        assert held == []

        # uninstall gives both clients their config back as it was
        for client in ("claude-code", "codex"):
            assert memoryd(env, "uninstall", client).returncode == 0
        assert (clients.codex_home / "config.toml").read_bytes() == original
        settings = clients.claude_config_dir / "settings.json"
        assert not settings.exists()
