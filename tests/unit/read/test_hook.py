"""``memoryd hook``: the shim's block for the checkout holding ``cwd``, never a failed turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memoryd.paths import Paths
from memoryd.read.hook import run
from memoryd.scopes import scope_key


def payload(cwd: Path) -> bytes:
    return json.dumps({"cwd": str(cwd), "hook_event_name": "SessionStart"}).encode()


def context(out: str | None) -> str:
    assert out is not None
    data = json.loads(out)["hookSpecificOutput"]
    assert data["hookEventName"] == "SessionStart"
    text: str = data["additionalContext"]
    return text


def test_the_project_block_for_a_subfolder_of_its_checkout(
    paths: Paths, tmp_path: Path, memoryd_home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    key = scope_key(str(repo))
    paths.ensure_dir(paths.readpath_projects)
    (paths.readpath_projects / f"{key}.md").write_bytes(b"BLOCK for repo\n\xe2\x80\x94 end\n")
    (paths.readpath_block).write_text("global only\n")
    env = {"MEMORYD_HOME": str(memoryd_home)}
    got = context(run("claude-code", payload(repo / "src" / "deep"), env))
    assert got == "BLOCK for repo\n\u2014 end\n"  # the file's bytes, as the shim reads them


def test_an_unseen_project_gets_the_global_block_and_is_announced(
    paths: Paths, tmp_path: Path, memoryd_home: Path
) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    paths.ensure_dir(paths.readpath_block.parent)
    paths.readpath_block.write_text("global only\n")
    env = {"MEMORYD_HOME": str(memoryd_home)}
    assert context(run("codex", payload(loose), env)) == "global only\n"
    seen = paths.readpath_seen / scope_key(str(loose))
    assert seen.read_text() == f"{loose}\n"  # the daemon renders this project's block next


def test_no_block_no_output(paths: Paths, tmp_path: Path, memoryd_home: Path) -> None:
    env = {"MEMORYD_HOME": str(memoryd_home)}
    assert run("codex", payload(tmp_path), env) is None
    key = scope_key(str(tmp_path))
    paths.ensure_dir(paths.readpath_projects)
    (paths.readpath_projects / f"{key}.md").write_text("  \n")  # memoryd off: emptied
    assert run("codex", payload(tmp_path), env) is None


def test_the_command_never_fails_the_turn(paths: Paths, tmp_path: Path, memoryd_home: Path) -> None:
    paths.ensure_dir(paths.readpath_block.parent)
    paths.readpath_block.symlink_to(tmp_path / "elsewhere")  # refused: a link
    env = {**os.environ, "MEMORYD_HOME": str(memoryd_home)}
    for stdin in (b"garbage", payload(tmp_path / "nowhere")):
        out = subprocess.run(
            [sys.executable, "-m", "memoryd", "hook", "claude-code"],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
        )
        assert out.returncode == 0 and out.stdout == b""
        assert b"memoryd hook: no memory block" in out.stderr
