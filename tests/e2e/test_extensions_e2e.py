"""Issue 7 acceptance: imported Claude Code memory appears in the diff the consolidator is given."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env


def fake_claude_home(root: Path, workdir: Path) -> Path:
    home = root / "claude"
    project = home / "projects" / "-work-shop"
    (project / "memory").mkdir(parents=True)
    (project / "memory" / "MEMORY.md").write_text(
        "# Shop project\n- Payments go through the Stripe sandbox in CI.\n"
    )
    (project / "session-1.jsonl").write_text(
        json.dumps(
            {
                "type": "user",
                "cwd": str(workdir),
                "timestamp": "2026-11-01T10:00:00Z",
                "message": {"role": "user", "content": "hi"},
            }
        )
        + "\n"
    )
    return home


def test_claude_memory_reaches_the_consolidator_diff(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    claude = fake_claude_home(box.root, box.project_dir)
    env = run_env(
        box, MEMORYD_EXTENSIONS_CLAUDE_IMPORT="true", MEMORYD_EXTENSIONS_CLAUDE_HOME=str(claude)
    )
    cons = ScriptedConsolidator()
    install(mock_llm, cons)
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "run", "--once")
    assert out.returncode == 0, out.stderr
    assert "phase 2: consolidated" in out.stdout, out.stdout
    diff = cons.diffs[0]
    assert "A extensions/external_agent_import/resources/-work-shop/MEMORY.md" in diff
    assert "Stripe sandbox" in diff
    resources = (
        box.memoryd_home
        / "memories"
        / "extensions"
        / "external_agent_import"
        / "resources"
        / "-work-shop"
    )
    assert json.loads((resources / "scope.json").read_text())["cwd"] == str(box.project_dir)
    # the consolidation prompt told the agent to read the importer's instructions
    prompt = [r for r in mock_llm.requests if r.tools and "write" in r.tools][0].text
    assert "extensions/external_agent_import/instructions.md" in prompt
