"""Issue 25, inbound: a fact said in a real Claude Code session and one said in a real Codex
session each become memory of their project and reach the next opencode turn there, nowhere else.

Everything is real but the models: ``claude`` and ``codex`` (pinned binaries) against the scripted
client model server, memoryd's phase 1 reading their files, the real ``opencode serve`` running
the extraction (scripted opencode model) and the consolidation (the scripted consolidator), and
the shim putting the block into an opencode turn.
"""

from __future__ import annotations

import json

import pytest

from memoryd.scopes import scope_key
from tests.e2e.client_models import ClientModels
from tests.e2e.clients import ClientSandbox
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM, transcript_of
from tests.e2e.sandbox import OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, outputs, run_env, status
from tests.e2e.test_readpath_e2e import systems
from tests.e2e.test_scopes_e2e import git_repo

pytestmark = pytest.mark.e2e

CLAUDE_FACT = "CLAUDEFACT: the alpha service deploys with make alpha-ship on Fridays"
CODEX_FACT = "CODEXFACT: the beta service stages on host blue-7 before every release"


def test_client_sessions_reach_the_next_opencode_turn_of_their_project_only(
    make_sandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    alpha = git_repo(box.root / "src" / "alpha")
    beta = git_repo(box.root / "src" / "beta")
    (alpha / "app").mkdir()
    with ClientModels() as models:
        clients = ClientSandbox(box.root / "clients", models)
        said = clients.claude(CLAUDE_FACT, cwd=alpha / "app")  # started in a subfolder
        assert said.returncode == 0, said.stderr[-2000:]
        said = clients.codex(CODEX_FACT, cwd=beta)
        assert said.returncode == 0, said.stderr[-2000:]
    assert len(clients.claude_transcripts()) == 1 and len(clients.codex_rollouts()) == 1

    env = run_env(
        box,
        CLAUDE_CONFIG_DIR=str(clients.claude_config_dir),
        CODEX_HOME=str(clients.codex_home),
    )
    install(mock_llm, ScriptedConsolidator(scoped=True))
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in out.stdout, out.stdout + out.stderr
    assert "sessions seen + 1 claude-code + 1 codex" in out.stdout, out.stdout

    # each session extracted once, under its host's id, scoped to its repository's root
    rows = outputs(box.memoryd_home)
    by_host = {sid.split(":", 1)[0]: row for sid, row in rows.items()}
    assert set(by_host) == {"claude-code", "codex"}
    assert by_host["claude-code"]["worktree"] == str(alpha)
    assert by_host["claude-code"]["cwd"] == str(alpha / "app")
    assert by_host["codex"]["worktree"] == str(beta)
    assert "make alpha-ship" in by_host["claude-code"]["raw_memory"]
    assert "blue-7" in by_host["codex"]["raw_memory"]
    extraction = [r for r in mock_llm.requests if "BEGIN SESSION TRANSCRIPT" in json.dumps(r.body)]
    sent = "\n".join(transcript_of(r) for r in extraction)
    assert len(extraction) == 2 and CLAUDE_FACT in sent and CODEX_FACT in sent
    # what the clients inject themselves never reached the extractor as the user's words
    for harness in ("environment_context", "system-reminder", "gitStatus", "skills_instructions"):
        assert harness not in sent

    hosts = status(env)["hosts"]
    assert (hosts["claude-code"]["seen"], hosts["claude-code"]["extracted"]) == (1, 1)
    assert (hosts["codex"]["seen"], hosts["codex"]["extracted"]) == (1, 1)
    assert hosts["claude-code"]["last_error"] is None and hosts["codex"]["last_error"] is None

    # a second pass with nothing new: no model call at all
    mock_llm.clear()
    again = memoryd(env, "run", "--once")
    assert again.returncode == 0, again.stderr
    assert mock_llm.requests == []

    memories = box.memoryd_home / "memories"
    alpha_layer = (memories / "projects" / scope_key(str(alpha)) / "memory_summary.md").read_text()
    beta_layer = (memories / "projects" / scope_key(str(beta)) / "memory_summary.md").read_text()
    assert "CLAUDEFACT" in alpha_layer and "CODEXFACT" not in alpha_layer
    assert "CODEXFACT" in beta_layer and "CLAUDEFACT" not in beta_layer

    box.restart()  # load the shim
    d = box.driver
    mock_llm.clear()
    blocks = {}
    for name, folder in (("alpha", alpha), ("beta", beta)):
        sid = d.create_session(f"{name} follow-up", directory=folder)["id"]
        d.say(sid, f"what do we know about {name}?", directory=folder)
        turn = next(r for r in mock_llm.requests if r.session_id == sid)
        blocks[name] = systems(turn)[1]
    assert "CLAUDEFACT" in blocks["alpha"] and "CODEXFACT" not in blocks["alpha"]
    assert "CODEXFACT" in blocks["beta"] and "CLAUDEFACT" not in blocks["beta"]
