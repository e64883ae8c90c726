"""The Claude Code auto-memory import: ``CLAUDE_CONFIG_DIR`` and repositories worked on from a subfolder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.clock import ManualClock
from memoryd.extensions.claude_code import (
    EXTENSION,
    NO_CWD,
    SCOPE_FILE,
    claude_home_dir,
    claude_key,
    sync_claude_import,
)
from memoryd.settings import Settings
from tests.conftest import T0
from tests.unit.extension_helpers import settings_with, write


def session(project: Path, cwd: Path) -> None:
    record = {"type": "user", "cwd": str(cwd), "message": {"role": "user", "content": "hi"}}
    write(project / "0b6e2c1a-session.jsonl", json.dumps(record) + "\n")


def test_the_home_follows_claude_config_dir(tmp_path: Path) -> None:
    env = {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    assert claude_home_dir(Settings(), env) == tmp_path / "cc"
    assert claude_home_dir(Settings(), {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": " "}) == Path(
        "/home/u/.claude"
    )
    configured = settings_with(claude_home=str(tmp_path / "mine"))
    assert claude_home_dir(configured, env) == tmp_path / "mine"


def test_the_import_reads_the_home_claude_config_dir_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "cc"
    repo = tmp_path / "repo"
    repo.mkdir()
    project = home / "projects" / claude_key(str(repo))
    write(project / "memory" / "MEMORY.md", "- builds with make ship\n")
    session(project, repo)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    root = tmp_path / "memories"
    root.mkdir()
    result = sync_claude_import(settings_with(claude_import=True), root, ManualClock(T0))
    assert result.imported == [claude_key(str(repo))]


def test_memory_of_a_repository_worked_on_from_a_subfolder_is_imported_with_the_root(
    tmp_path: Path,
) -> None:
    home = tmp_path / "claude"
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "app").mkdir()
    root_key = claude_key(str(repo))
    write(home / "projects" / root_key / "memory" / "MEMORY.md", "- deploy with make ship\n")
    session(home / "projects" / claude_key(str(repo / "app")), repo / "app")
    memories = tmp_path / "memories"
    memories.mkdir()
    settings = settings_with(claude_import=True, claude_home=str(home))
    result = sync_claude_import(settings, memories, ManualClock(T0))
    assert result.imported == [root_key] and root_key not in result.skipped
    copy = memories / "extensions" / EXTENSION / "resources" / root_key
    assert json.loads((copy / SCOPE_FILE).read_text()) == {"cwd": str(repo)}
    assert "make ship" in (copy / "MEMORY.md").read_text()


def test_a_subfolder_of_another_repository_does_not_lend_its_root(tmp_path: Path) -> None:
    home = tmp_path / "claude"
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "repo-tools" / ".git").mkdir(parents=True)  # its key also starts with repo's
    write(home / "projects" / claude_key(str(repo)) / "memory" / "MEMORY.md", "- x\n")
    session(home / "projects" / claude_key(str(tmp_path / "repo-tools")), tmp_path / "repo-tools")
    memories = tmp_path / "memories"
    memories.mkdir()
    settings = settings_with(claude_import=True, claude_home=str(home))
    result = sync_claude_import(settings, memories, ManualClock(T0))
    assert result.skipped == {claude_key(str(repo)): NO_CWD}
