"""The Claude Code runner's side of the boundary: the flags it passes, the result it reads, and a
child that hangs or dies. The executable here is a small script standing in for ``claude`` (the
real binary is driven in ``tests/e2e/test_runner_claude_e2e.py``)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import anyio
import pytest

from memoryd.errors import HostNotStarted, HostTimeout, ModelCallError, is_host_fault
from memoryd.runner.base import AgentRun
from memoryd.runner.claude_cli import (
    RUNNER_MARKER,
    ClaudeCodeRunner,
    base_args,
    check_result,
    files_server_args,
    model_arg,
    usage_of,
)
from memoryd.store.ledger import CallUsage

pytestmark = pytest.mark.anyio


def test_every_call_switches_the_clients_own_world_off() -> None:
    args = base_args("system text", max_turns=3)
    pairs = {flag: args[i + 1] for i, flag in enumerate(args[:-1]) if flag.startswith("--")}
    assert args[0] == "-p"
    assert pairs["--tools"] == ""  # no built-in tool at all
    assert pairs["--setting-sources"] == ""  # no settings, hooks or CLAUDE.md
    assert pairs["--permission-mode"] == "dontAsk"
    assert pairs["--output-format"] == "json"
    assert pairs["--system-prompt"] == "system text"
    assert pairs["--name"] == RUNNER_MARKER
    assert "--no-session-persistence" in args and "--strict-mcp-config" in args


def test_the_consolidator_is_granted_exactly_memoryds_file_tools(tmp_path: Path) -> None:
    args = files_server_args(tmp_path)
    config = json.loads(args[args.index("--mcp-config") + 1])
    (server,) = config["mcpServers"].values()
    assert server["command"] == sys.executable
    assert server["args"] == ["-m", "memoryd", "runner-files", str(tmp_path)]
    granted = args[args.index("--allowedTools") + 1].split(",")
    assert granted == [
        f"mcp__memoryd-folder__{t}" for t in ("read", "list", "write", "edit", "delete")
    ]


def test_model_names_drop_memoryds_provider_prefix() -> None:
    assert model_arg(None) == []
    assert model_arg("anthropic/claude-sonnet-4-5") == ["--model", "claude-sonnet-4-5"]


def test_usage_is_the_clients_report_or_labelled_an_estimate() -> None:
    reported = {
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_input_tokens": 7,
            "cache_creation_input_tokens": 5,
        },
        "total_cost_usd": 0.25,
    }
    assert usage_of(reported, "x" * 400) == (CallUsage(120, 30, 0, 7, 5, 0.25), False)
    usage, estimated = usage_of({"result": "y" * 40}, "x" * 400)
    assert estimated and usage == CallUsage(100, 10)


def test_a_rate_limited_result_is_a_model_error_that_trips_the_circuit() -> None:
    with pytest.raises(ModelCallError) as caught:
        check_result(
            {
                "is_error": True,
                "subtype": "error_during_execution",
                "api_error_status": 429,
                "errors": ["rate_limit_error: slow down"],
            }
        )
    assert caught.value.is_rate_limit and not is_host_fault(caught.value)
    check_result({"is_error": False, "result": "fine"})  # no error, nothing raised


def _fake_claude(tmp: Path, body: str) -> str:
    """An executable standing in for ``claude``: a Python script with ``body`` as its main."""
    exe = tmp / "claude"
    exe.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


async def test_a_structured_answer_comes_back_with_its_usage(tmp_path: Path) -> None:
    exe = _fake_claude(
        tmp_path,
        "prompt = sys.stdin.read()\n"
        "args = sys.argv[1:]\n"
        "schema = json.loads(args[args.index('--json-schema') + 1])\n"
        "print(json.dumps({'type': 'result', 'is_error': False, 'result': '',"
        " 'structured_output': {'got': len(prompt), 'keys': sorted(schema)},"
        " 'usage': {'input_tokens': 9, 'output_tokens': 2}, 'total_cost_usd': 0.5,"
        " 'modelUsage': {'claude-x': {}}, 'cwd': os.getcwd()}))",
    )
    runner = ClaudeCodeRunner(exe, workdir=tmp_path / "wd", memories=tmp_path / "mem")
    big = "t" * 300_000  # more than one argument may carry: it goes in on stdin
    answer = await runner.answer(
        key="k", system="s", text=big, schema={"type": "object"}, model=None, timeout=30
    )
    assert answer.structured == {"got": 300_000, "keys": ["type"]}
    assert answer.usage == CallUsage(9, 2, 0, 0, 0, 0.5) and not answer.estimated
    assert answer.model == "anthropic/claude-x"
    assert (tmp_path / "wd").is_dir()  # runs in memoryd's own empty folder


@pytest.mark.slow  # starts real processes and waits on them
async def test_a_hung_client_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    exe = _fake_claude(
        tmp_path,
        "import subprocess\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)",
    )
    runner = ClaudeCodeRunner(exe, workdir=tmp_path / "wd", memories=tmp_path / "mem")
    runs: list[AgentRun] = []
    with pytest.raises(HostTimeout):
        await runner.consolidate(text="go", model=None, timeout=2.0, record=runs.append)
    assert [r.outcome for r in runs] == ["aborted"]  # recorded even though it never answered
    child = int(pidfile.read_text())
    for _ in range(200):  # the kill is SIGKILL to the group: gone within moments, but not at once
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        await anyio.sleep(0.05)
    else:
        pytest.fail("the client's own child outlived the timeout")


async def test_a_client_that_dies_is_a_host_fault_not_the_jobs(tmp_path: Path) -> None:
    exe = _fake_claude(tmp_path, "sys.stderr.write('not signed in\\n'); sys.exit(1)")
    runner = ClaudeCodeRunner(exe, workdir=tmp_path / "wd", memories=tmp_path / "mem")
    with pytest.raises(HostNotStarted) as caught:
        await runner.answer(key="k", system="s", text="t", schema={}, model=None, timeout=30)
    assert "not signed in" in str(caught.value) and is_host_fault(caught.value)
    missing = ClaudeCodeRunner(str(tmp_path / "nope"), workdir=tmp_path, memories=tmp_path)
    with pytest.raises(HostNotStarted):
        await missing.answer(key="k", system="s", text="t", schema={}, model=None, timeout=30)


async def test_a_failed_consolidation_is_recorded_with_what_it_spent(tmp_path: Path) -> None:
    exe = _fake_claude(
        tmp_path,
        "sys.stdin.read()\n"
        "print(json.dumps({'type': 'result', 'is_error': True, 'subtype': 'error_max_turns',"
        " 'errors': ['Reached maximum number of turns'],"
        " 'usage': {'input_tokens': 50, 'output_tokens': 5}}))",
    )
    runner = ClaudeCodeRunner(exe, workdir=tmp_path / "wd", memories=tmp_path / "mem")
    runs: list[AgentRun] = []
    with pytest.raises(ModelCallError, match="maximum number of turns"):
        await runner.consolidate(text="go", model=None, timeout=30, record=runs.append)
    assert runs == [AgentRun(CallUsage(50, 5), None, "error", False)]
