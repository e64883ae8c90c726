"""The opencode shim (templates/opencode/memoryd.js) inside the real ``opencode serve``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from memoryd.host.install import SHIM, planned_files
from memoryd.paths import Paths
from tests.e2e.mockllm import MockLLM, RecordedRequest, Text, last_user_text, make_default_responder
from tests.e2e.sandbox import REPO_ROOT, OpencodeSandbox

BLOCK = "## Memory from earlier sessions\nMARKER-shim-7f3a\n" + "- a remembered fact\n" * 40
CITED = (
    "Here is the answer.\n\n<memory-citation>\n<citation_entries>\nMEMORY.md:1-3|note=[build]\n"
    "</citation_entries>\n<session_ids>\nses_probe000001\n</session_ids>\n</memory-citation>"
)
HELPER_AGENT = (
    "---\ndescription: probe helper\nmode: primary\nhidden: true\n---\nYou are a memoryd helper.\n"
)


def install_shim(box: OpencodeSandbox) -> Paths:
    paths = Paths.from_env({"MEMORYD_HOME": str(box.memoryd_home)})
    (shim,) = [f for f in planned_files(paths) if f.relpath == SHIM]  # what install writes
    (box.config_dir / "plugin").mkdir(exist_ok=True)
    (box.config_dir / "plugin" / "memoryd.js").write_bytes(shim.content)
    paths.readpath_block.parent.mkdir(parents=True, exist_ok=True)
    paths.readpath_block.write_text(BLOCK, encoding="utf-8")
    return paths


def systems(req: RecordedRequest) -> list[str]:
    return [m["content"] for m in req.messages if m["role"] == "system"]


def test_shim_in_opencode(make_sandbox: Callable[..., OpencodeSandbox], mock_llm: MockLLM) -> None:
    box = make_sandbox(start=False)
    paths = install_shim(box)
    box.write_agent("memoryd-probe", HELPER_AGENT)
    box.start()
    d = box.driver

    # Loaded at instance boot (first request for the project dir): the server file appears.
    d.request("GET", "/session")
    info = json.loads(paths.server_state.read_text(encoding="utf-8"))
    assert info["url"].rstrip("/") == box.url and info["pid"] == box.pid
    assert (info["username"], info["password"]) == (box.username, box.password)
    assert paths.server_state.stat().st_mode & 0o777 == 0o600

    # An untitled session: opencode adds a hidden title call (small model, same session id).
    base = make_default_responder()
    mock_llm.set_responder(
        lambda req: Text(CITED) if "cite please" in last_user_text(req) else base(req)
    )
    sid = d.request("POST", "/session", json_body={}).json()["id"]
    d.say(sid, "hello, what is the build command?")
    d.say(sid, "write it down [[tool:write path=x.md content=y]]")
    title = mock_llm.wait_for(lambda r: r.model == "mock-small", timeout=20)
    turns = [r for r in mock_llm.requests if r.model == "mock-model"]
    assert len(turns) == 3 and turns[-1].messages[-1]["role"] == "tool"  # incl. the follow-up
    for req in turns:
        assert len(systems(req)) == 2 and systems(req)[1] == BLOCK  # byte-identical, 2nd of 2
    assert len(systems(title)) == 1 and "MARKER-shim" not in title.text  # defect 5 avoided

    # memoryd's own helper agents get nothing.
    mock_llm.clear()
    helper = d.create_session("helper")["id"]
    d.say(helper, "extract", agent="memoryd-probe")
    (req,) = mock_llm.requests
    assert "MARKER-shim" not in req.text and len(systems(req)) == 1

    # A reply ending in a citation is stored without it; one spool line records it.
    reply = d.say(sid, "cite please")
    stored = [p["text"] for m in d.messages(sid) for p in m["parts"] if p["type"] == "text"]
    assert [p["text"] for p in reply["parts"] if p["type"] == "text"] == ["Here is the answer."]
    assert stored[-1] == "Here is the answer." and not any("memory-citation" in t for t in stored)
    (line,) = paths.citation_spool.read_text(encoding="utf-8").splitlines()
    rec = json.loads(line)
    assert rec["session_id"] == sid and rec["message_id"] == reply["info"]["id"]
    assert rec["cited"] == ["ses_probe000001"]
    assert rec["entries"] == [
        {"path": "MEMORY.md", "line_start": 1, "line_end": 3, "note": "build"}
    ]


def test_shim_suite_under_opencodes_bun(opencode_bin: Path) -> None:
    """The node test suite again, under the Bun runtime embedded in opencode (BUN_BE_BUN=1)."""
    env = {**os.environ, "BUN_BE_BUN": "1"}
    proc = subprocess.run(
        [str(opencode_bin), "test", "./tests/shim/shim.test.mjs"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and " 0 fail" in out and "bun test" in out, out[-4000:]
