"""The three tools the opencode shim offers, and `memoryd tool`, the process answering each call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.clock import ManualClock
from memoryd.errors import InvalidArgument, Refused
from memoryd.paths import Paths
from memoryd.tools.shim import SPECS, call
from tests.narrow import present

PROBE = """
import runpy, sys
sys.argv = ["memoryd", "tool", *sys.argv[1:]]
try:
    runpy.run_module("memoryd", run_name="__main__")
except SystemExit as exc:
    heavy = sorted(m for m in ("memoryd.cli", "memoryd.settings", "pydantic", "httpx") if m in sys.modules)
    print("EXIT", exc.code, heavy, file=sys.stderr)
"""


def test_definitions_are_lean() -> None:
    assert set(SPECS) == {"memory_search", "memory_read", "memory_note"}
    wire = [{"type": "function", "function": {"name": n, **s}} for n, s in SPECS.items()]
    assert len(json.dumps(wire)) < 800  # every user request carries these bytes


def test_call_reads_searches_and_notes(paths: Paths) -> None:
    paths.memories.mkdir(parents=True)
    (paths.memories / "MEMORY.md").write_text("# Tooling\n\nuse pnpm, never npm\n")
    clock = ManualClock(1_800_000_000_000)
    assert "pnpm" in call(paths, clock, "memory_search", {"query": "pnpm"})
    assert "never npm" in call(paths, clock, "memory_read", {"path": "MEMORY.md", "line": "2"})
    # no opencode to show that the user asked: held for review, not in memory
    saved = call(paths, clock, "memory_note", {"note": "prefer bun"}, "ses_abcdef123")
    assert "held for the user's review" in saved
    assert "prefer bun" not in "".join(p.read_text() for p in paths.memories.rglob("*.md"))
    assert "prefer bun" in "".join(p.read_text() for p in paths.proposed_notes.iterdir())
    with pytest.raises(InvalidArgument):
        call(paths, clock, "memory_read", {"path": "MEMORY.md", "line": "x"})
    with pytest.raises(InvalidArgument):
        call(paths, clock, "memory_reset", {})
    with pytest.raises(Refused):
        call(paths, clock, "memory_note", {"note": "key AKIAQX7Z3M5N2P8R4T6V"})


def test_memoryd_tool_runs_without_loading_the_cli(paths: Paths, tmp_path: Path) -> None:
    paths.memories.mkdir(parents=True)
    (paths.memories / "MEMORY.md").write_text("teal is the colour\n")
    env = {"MEMORYD_HOME": str(tmp_path / "memoryd-home"), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        [sys.executable, "-c", PROBE, "memory_read", '{"path": "MEMORY.md", "line": 1}'],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "teal is the colour" in ok.stdout
    assert "EXIT 0 []" in ok.stderr, ok.stderr
    bad = subprocess.run(
        [sys.executable, "-c", PROBE, "memory_read", '{"path": "../memory.db", "line": 1}'],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "memoryd: " in bad.stderr and "EXIT 1" in bad.stderr and not bad.stdout


def test_the_fast_path_takes_every_option_the_shim_passes(paths: Paths, tmp_path: Path) -> None:
    """The shim calls ``memoryd tool NAME ARGS --session ID --project KEY --server URL``; the fast path in
    ``memoryd/__main__.py`` parses that itself, so it must accept what the CLI parser accepts."""
    import argparse

    from memoryd.cli import tool as tool_cli

    cli = argparse.ArgumentParser()
    tool_cli.register(cli.add_subparsers())
    options = {
        opt
        for action in present(cli._subparsers._group_actions[0].choices)["tool"]._actions  # type: ignore[union-attr]
        for opt in action.option_strings
        if opt not in ("-h", "--help")
    }
    assert options == {"--session", "--project", "--server"}
    paths.memories.mkdir(parents=True)
    (paths.memories / "MEMORY.md").write_text("teal is the colour\n")
    env = {"MEMORYD_HOME": str(tmp_path / "memoryd-home"), "PATH": "/usr/bin:/bin"}
    argv = ["memory_search", '{"query": "teal"}', "--session", "ses_x", "--project", "p-12345678",
            "--server", "http://127.0.0.1:9"]  # fmt: skip
    ok = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, timeout=60
    )
    assert "teal is the colour" in ok.stdout, ok.stderr
    assert "EXIT 0 []" in ok.stderr, ok.stderr
