"""The e2e harness itself, proven against the real ``opencode serve`` and the mock model."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.errors import HostUnreachable
from memoryd.host.server import PrivateServer, find_opencode, seed_config_dir
from tests.e2e.mockllm import Error, MockLLM, Text, ToolCall, tools_offered
from tests.e2e.sandbox import OpencodeSandbox

EXTRACT_AGENT = """\
---
description: Test extraction helper (structured output only)
mode: subagent
hidden: true
temperature: 0
permission:
  "*": deny
  StructuredOutput: allow
---
You turn one transcript into memory notes and answer only through the structured-output tool.
"""

EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "raw_memory": {"type": "string"},
        "rollout_summary": {"type": "string"},
        "rollout_slug": {"type": ["string", "null"]},
    },
    "required": ["raw_memory", "rollout_summary", "rollout_slug"],
    "additionalProperties": False,
}


def texts(reply: dict[str, Any]) -> list[str]:
    return [p["text"] for p in reply["parts"] if p["type"] == "text"]


def _gone(pid: int, wait: float = 3.0) -> bool:
    """Whether ``pid`` is dead (a zombie awaiting its reaper counts as dead)."""
    deadline = time.monotonic() + wait
    while True:
        if not os.path.isdir("/proc/self"):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


# -- (a) plain multi-turn conversation ------------------------------------------------------------


def test_multi_turn_plain_text(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    d = sandbox.driver
    session = d.create_session("plain chat")
    turns = ["Hello, who are you?", "What is the capital of France?", "Thanks, that is all."]
    for turn in turns:
        reply = d.say(session["id"], turn)
        assert reply["info"]["finish"] == "stop"
        assert reply["info"].get("error") is None
        assert texts(reply) == [f"ok: {turn}"]

    reqs = mock_llm.requests
    assert len(reqs) == len(turns)  # titled session: no title-generation call
    assert all(r.session_id == session["id"] for r in reqs)
    assert all(
        r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True}
        for r in reqs
    )
    assert reqs[0].model == "mock-model"
    # Each request replays the whole conversation so far.
    assert [m["role"] for m in reqs[-1].messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert all(t in reqs[-1].text for t in turns)

    msgs = d.messages(session["id"])
    assert [m["info"]["role"] for m in msgs] == ["user", "assistant"] * len(turns)
    # The usage the mock reported is what opencode recorded.
    assert msgs[-1]["info"]["tokens"]["output"] > 0

    listed = {s["id"]: s for s in d.list_all_sessions()}
    assert listed[session["id"]]["title"] == "plain chat"
    assert d.delete_session(session["id"]) is True
    assert session["id"] not in {s["id"] for s in d.list_all_sessions()}


# -- (b) a tool round trip ------------------------------------------------------------------------


def test_tool_call_round_trip(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    d = sandbox.driver
    session = d.create_session("tool use")
    reply = d.say(
        session["id"], 'Note my colour. [[tool:write path=notes/colour.md content="teal\\n"]]'
    )

    assert (sandbox.project_dir / "notes" / "colour.md").read_text() == "teal\n"
    assert texts(reply) == ["done: tool result received (Wrote file successfully.)"]

    first, second = mock_llm.requests
    assert "write" in first.tools and "bash" in first.tools
    assert second.messages[-1]["role"] == "tool"
    assert second.messages[-1]["content"] == "Wrote file successfully."

    msgs = d.messages(session["id"])
    assert [m["info"]["role"] for m in msgs] == ["user", "assistant", "assistant"]
    assert [m["info"]["finish"] for m in msgs[1:]] == ["tool-calls", "stop"]
    (tool,) = [p for p in msgs[1]["parts"] if p["type"] == "tool"]
    assert tool["tool"] == "write"
    assert tool["state"]["status"] == "completed"
    assert tool["state"]["input"] == {"filePath": "notes/colour.md", "content": "teal\n"}


def test_scripted_responder_and_parallel_calls(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    """A custom responder can issue several tool calls in one step."""
    (sandbox.project_dir / "a.txt").write_text("alpha\n")
    (sandbox.project_dir / "b.txt").write_text("beta\n")

    def respond(req: dict[str, Any]) -> Any:
        if req["messages"][-1]["role"] == "tool":
            return Text("read both", reasoning="both files were read")
        return [
            ToolCall("read", {"filePath": str(sandbox.project_dir / n)}) for n in ("a.txt", "b.txt")
        ]

    mock_llm.set_responder(respond)
    session = sandbox.driver.create_session("parallel")
    reply = sandbox.driver.say(session["id"], "read a and b")
    assert texts(reply) == ["read both"]
    tool_msgs = [m for m in mock_llm.requests[-1].messages if m["role"] == "tool"]
    assert len(tool_msgs) == 2
    assert "alpha" in tool_msgs[0]["content"] and "beta" in tool_msgs[1]["content"]


# -- (c) a deny-by-default agent with structured output ---------------------------------------------


def test_structured_output_agent(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    sandbox.write_agent("memoryd-extract", EXTRACT_AGENT)
    sandbox.restart()  # config is read once per instance
    helper_dir = sandbox.root / "helper"
    helper_dir.mkdir(exist_ok=True)
    d = sandbox.driver
    agents = {a["name"]: a for a in d.agents(helper_dir)}
    assert agents["memoryd-extract"]["mode"] == "subagent"
    assert agents["memoryd-extract"]["hidden"] is True

    expected = {
        "raw_memory": "- build with `make ci`",
        "rollout_summary": "CI setup",
        "rollout_slug": "ci-setup",
    }
    mock_llm.set_extraction_reply(lambda req: expected)
    session = d.create_session(
        "memoryd extraction", directory=helper_dir, metadata={"memoryd": "extract"}
    )
    reply = d.say(
        session["id"],
        "===== BEGIN SESSION TRANSCRIPT s1 =====\n[user] run make ci\n===== END SESSION TRANSCRIPT s1 =====",
        agent="memoryd-extract",
        directory=helper_dir,
        format={"type": "json_schema", "schema": EXTRACTION_SCHEMA},
    )
    assert reply["info"].get("error") is None
    assert reply["info"]["structured"] == expected
    assert reply["info"]["finish"] == "tool-calls"

    (req,) = mock_llm.requests
    assert req.tools == ["StructuredOutput"]
    assert req.is_extraction
    assert req.body["tool_choice"] == "required"
    assert req.body["temperature"] == 0
    assert req.session_id == session["id"]


def test_default_extraction_reply(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    """The default mock derives memory from the transcript, and nothing from small talk."""
    helper_dir = sandbox.root / "helper"
    helper_dir.mkdir(exist_ok=True)
    if "memoryd-extract" not in {a["name"] for a in sandbox.driver.agents(helper_dir)}:
        sandbox.write_agent("memoryd-extract", EXTRACT_AGENT)
        sandbox.restart()
    d = sandbox.driver

    def extract(transcript: str) -> dict[str, Any]:
        session = d.create_session("memoryd extraction", directory=helper_dir)
        text = f"===== BEGIN SESSION TRANSCRIPT x =====\n{transcript}\n===== END SESSION TRANSCRIPT x ====="
        reply = d.say(
            session["id"],
            text,
            agent="memoryd-extract",
            directory=helper_dir,
            format={"type": "json_schema", "schema": EXTRACTION_SCHEMA},
        )
        structured: dict[str, Any] = reply["info"]["structured"]
        return structured

    useful = extract(
        "[user] The deploy script lives in ops/deploy.sh and needs Python 3.12\n[assistant] ok"
    )
    assert "ops/deploy.sh" in useful["raw_memory"]
    assert useful["rollout_summary"] and useful["rollout_slug"]
    assert extract("[user] hi, how are you?\n[assistant] fine, thanks!") == {
        "raw_memory": "",
        "rollout_summary": "",
        "rollout_slug": "",
    }


# -- model errors -----------------------------------------------------------------------------------


def test_model_errors_surface_as_info_error(sandbox: OpencodeSandbox, mock_llm: MockLLM) -> None:
    d = sandbox.driver
    session = d.create_session("errors")
    mock_llm.set_responder(lambda req: Error(400))
    reply = d.say(session["id"], "hi")
    assert reply["info"]["error"]["name"] == "APIError"
    assert reply["info"]["error"]["data"]["statusCode"] == 400
    assert len(mock_llm.requests) == 1  # 400 is not retried

    # A 429 is retried 5 times; retry-after-ms keeps that fast.
    mock_llm.clear()
    mock_llm.set_responder(lambda req: Error(429, headers={"retry-after-ms": "10"}))
    started = time.monotonic()
    reply = d.say(session["id"], "hi again")
    assert time.monotonic() - started < 15
    assert reply["info"]["error"]["data"]["statusCode"] == 429
    assert len(mock_llm.requests) == 6


# -- (d) process lifecycle --------------------------------------------------------------------------


def test_private_server_stop_leaves_no_process(
    make_sandbox: Callable[..., OpencodeSandbox], mock_llm: MockLLM
) -> None:
    box = make_sandbox()
    assert box.server is not None
    pid = box.pid
    assert os.getpgid(pid) == pid  # its own process group

    # A foreground bash-tool command runs in a new session (outside our group); stop() must
    # still take it down. prompt_async returns at once; the command writes its pid, then sleeps.
    session = box.driver.create_session("long tool")
    box.driver.request(
        "POST",
        f"/session/{session['id']}/prompt_async",
        json_body={
            "agent": "build",
            "parts": [
                {"type": "text", "text": '[[tool:bash cmd="echo $$ > tool.pid; exec sleep 317"]]'}
            ],
        },
    )
    pid_file = box.project_dir / "tool.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, box.server_log()
        time.sleep(0.05)
    tool_pid = int(pid_file.read_text())
    time.sleep(0.2)  # let the shell exec into sleep
    assert not _gone(tool_pid, wait=0)
    assert os.getsid(tool_pid) != os.getsid(pid)

    started = time.monotonic()
    box.stop()
    stop_seconds = time.monotonic() - started
    assert _gone(pid) and _group_gone(pid)
    assert _gone(tool_pid), "the tool subprocess outlived the server"
    box.stop()  # idempotent
    print(f"\nstop with a running tool: {stop_seconds:.2f} s")


def test_startup_failure_raises_host_unreachable(opencode_bin: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = PrivateServer(
            str(opencode_bin),
            cwd=tmp_path,
            port=port,
            startup_timeout=30,
            env={
                **os.environ,
                "XDG_DATA_HOME": str(tmp_path / "data"),
                "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "HOME": str(tmp_path),
            },
        )
        with pytest.raises(HostUnreachable, match="exited with code 1 before listening") as err:
            server.start()
    assert "ServeError" in str(err.value)
    # names the executable and the address it tried
    assert str(opencode_bin) in str(err.value) and f"http://127.0.0.1:{port}" in str(err.value)
    assert not server.running
    server.stop()


def test_find_opencode_and_seed(opencode_bin: Path, tmp_path: Path) -> None:
    assert find_opencode(str(opencode_bin)) == str(opencode_bin)
    with pytest.raises(
        HostUnreachable,
        match=r"^could not start opencode \(no-such-opencode-binary\): not found on PATH",
    ):
        find_opencode("no-such-opencode-binary")
    missing = tmp_path / "missing" / "opencode"
    with pytest.raises(HostUnreachable, match="does not exist") as err:
        find_opencode(str(missing))
    assert str(missing) in str(err.value) and "opencode at opencode" not in str(err.value)

    seed_config_dir(tmp_path / "cfg")
    assert (tmp_path / "cfg" / "node_modules").is_dir()
    lock = (tmp_path / "cfg" / "package-lock.json").read_text()
    (tmp_path / "cfg" / "package-lock.json").write_text("{}")
    seed_config_dir(tmp_path / "cfg")  # never overwrites
    assert (tmp_path / "cfg" / "package-lock.json").read_text() == "{}"
    assert "@opencode-ai/plugin" in lock


# -- timing ---------------------------------------------------------------------------------------


def test_startup_timing(
    make_sandbox: Callable[..., OpencodeSandbox],
    mock_llm: MockLLM,
    record_property: Callable[[str, object], None],
) -> None:
    started = time.monotonic()
    box = make_sandbox()
    listening = box.startup_seconds
    assert listening is not None
    session = box.driver.create_session("timing")
    reply = box.driver.say(session["id"], "first question")
    first_answer = time.monotonic() - started
    assert texts(reply) == ["ok: first question"]
    record_property("spawn_to_listening_s", round(listening, 2))
    record_property("spawn_to_first_answer_s", round(first_answer, 2))
    print(
        f"\nspawn -> listening {listening:.2f} s; spawn -> first answered prompt {first_answer:.2f} s"
    )
    assert listening < 30 and first_answer < 60
    assert tools_offered(mock_llm.requests[0].body)  # the build agent offers its tools
