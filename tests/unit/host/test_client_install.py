"""``memoryd install claude-code|codex``: merged into the user's config, undone exactly."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from memoryd.errors import InstallError
from memoryd.host.client_config import READ_TOOLS, codex_block, snippet
from memoryd.host.client_install import ClientInstaller
from memoryd.host.codex_trust import pick
from memoryd.paths import Paths


@pytest.fixture
def env(tmp_path: Path, memoryd_home: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CODEX_HOME": str(tmp_path / "codex"),
        "MEMORYD_HOME": str(memoryd_home),
        "PATH": "",  # no codex binary to ask for the hook's trust
    }


USER_SETTINGS = {
    "model": "opus",
    "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "my-hook"}]}]},
    "permissions": {"allow": ["Bash(ls:*)", "mcp__memoryd__memory_read"]},
}


def test_claude_entries_are_merged_and_put_back_byte_for_byte(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(USER_SETTINGS).encode()  # compact: not how memoryd writes JSON
    settings.write_bytes(original)
    inst = ClientInstaller(paths, "claude-code", env)
    assert [s.action for s in inst.install(prime=False)] == ["write", "write"]
    data = json.loads(settings.read_text())
    assert data["model"] == "opus"
    assert data["hooks"]["SessionStart"][0]["hooks"][0]["command"] == "my-hook"
    ours = data["hooks"]["SessionStart"][1]["hooks"][0]["command"]
    assert ours.endswith("-m memoryd hook claude-code") and "MEMORYD_HOME=" in ours
    assert data["permissions"]["allow"][:2] == ["Bash(ls:*)", "mcp__memoryd__memory_read"]
    assert set(data["permissions"]["allow"]) == {"Bash(ls:*)"} | {
        f"mcp__memoryd__{t}" for t in READ_TOOLS
    }
    assert "mcp__memoryd__memory_add_note" not in data["permissions"]["allow"]
    server = json.loads((tmp_path / "claude" / ".claude.json").read_text())["mcpServers"]["memoryd"]
    assert server["args"] == ["-m", "memoryd", "mcp"] and server["env"]["MEMORYD_HOME"]
    assert [s.action for s in ClientInstaller(paths, "claude-code", env).install(prime=False)] == [
        "unchanged",
        "unchanged",
    ]
    steps = ClientInstaller(paths, "claude-code", env).uninstall()
    assert sorted(s.action for s in steps) == ["delete", "restore"]
    assert settings.read_bytes() == original
    assert not (tmp_path / "claude" / ".claude.json").exists()
    assert ClientInstaller(paths, "claude-code", env).record() == {}


def test_a_file_the_client_rewrote_loses_only_memoryds_entries(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    state = tmp_path / "claude" / ".claude.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"numStartups": 1, "mcpServers": {"other": {"command": "x"}}}))
    ClientInstaller(paths, "claude-code", env).install(prime=False)
    data = json.loads(state.read_text())
    data["numStartups"] = 2  # Claude Code rewrites this file itself
    state.write_text(json.dumps(data))
    ClientInstaller(paths, "claude-code", env).uninstall()
    assert json.loads(state.read_text()) == {
        "numStartups": 2,
        "mcpServers": {"other": {"command": "x"}},
    }


def test_a_changed_server_entry_is_kept_unless_forced(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    ClientInstaller(paths, "claude-code", env).install(prime=False)
    state = tmp_path / "claude" / ".claude.json"
    data = json.loads(state.read_text())
    data["mcpServers"]["memoryd"]["args"].append("--mine")
    state.write_text(json.dumps(data))
    steps = {s.path.name: s.action for s in ClientInstaller(paths, "claude-code", env).uninstall()}
    assert steps[".claude.json"] == "keep-modified"
    assert "memoryd" in json.loads(state.read_text())["mcpServers"]
    ClientInstaller(paths, "claude-code", env).uninstall(force=True)
    assert not state.exists()


def test_json_that_is_not_plain_is_never_rewritten(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{ // my comment\n "model": "opus" }')
    with pytest.raises(InstallError, match="not plain JSON"):
        ClientInstaller(paths, "claude-code", env).install(prime=False)
    assert settings.read_text() == '{ // my comment\n "model": "opus" }'


USER_TOML = 'model = "o3"\n[tui]\ntheme = "dark"'  # no final newline


def test_codex_block_is_appended_and_taken_out_exactly(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(USER_TOML)
    steps = ClientInstaller(paths, "codex", env).install(prime=False)
    assert [s.action for s in steps] == ["write", "note"]  # no codex to trust the hook
    data = tomllib.loads(config.read_text())
    assert data["tui"] == {"theme": "dark"} and data["model"] == "o3"
    server = data["mcp_servers"]["memoryd"]
    assert server["required"] is True and server["default_tools_approval_mode"] == "prompt"
    assert {t: v["approval_mode"] for t, v in server["tools"].items()} == dict.fromkeys(
        READ_TOOLS, "approve"
    )
    hook = data["hooks"]["SessionStart"][0]["hooks"][0]
    assert hook["command"].endswith("-m memoryd hook codex")
    assert [s.action for s in ClientInstaller(paths, "codex", env).install(prime=False)] == [
        "unchanged"
    ]
    # the user edits their own part afterwards: that edit survives the uninstall
    config.write_text(config.read_text().replace('theme = "dark"', 'theme = "light"'))
    assert [s.action for s in ClientInstaller(paths, "codex", env).uninstall()] == [
        "remove-entries"
    ]
    assert config.read_text() == USER_TOML.replace("dark", "light")


def test_codex_fresh_home_is_created_and_removed(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    ClientInstaller(paths, "codex", env).install(prime=False)
    config = tmp_path / "codex" / "config.toml"
    assert config.read_text() == codex_block(environ=env)
    ClientInstaller(paths, "codex", env).uninstall()
    assert not config.exists()
    assert not (tmp_path / "codex" / "memories").exists()


def test_codex_config_that_would_break_is_refused(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "codex" / "config.toml"
    config.parent.mkdir()
    text = '[hooks]\nSessionStart = [{ hooks = [{ type = "command", command = "x" }] }]\n'
    config.write_text(text)
    with pytest.raises(InstallError, match="would break it"):
        ClientInstaller(paths, "codex", env).install(prime=False)
    assert config.read_text() == text
    assert ClientInstaller(paths, "codex", env).record() == {}


def test_a_hand_changed_codex_block_is_kept_unless_forced(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    ClientInstaller(paths, "codex", env).install(prime=False)
    config = tmp_path / "codex" / "config.toml"
    config.write_text("x = 1\n\n" + config.read_text().replace("timeout = 10", "timeout = 30"))
    assert [s.action for s in ClientInstaller(paths, "codex", env).uninstall()] == ["keep-modified"]
    with pytest.raises(InstallError, match="changed by hand"):
        ClientInstaller(paths, "codex", env).install(prime=False)
    ClientInstaller(paths, "codex", env).uninstall(force=True)
    assert config.read_text() == "x = 1\n"


def test_the_trust_entry_is_the_one_codex_lists_for_our_command() -> None:
    listed = {
        "data": [
            {
                "hooks": [
                    {"command": "other", "source": "user", "key": "k0", "currentHash": "h0"},
                    {"command": "ours", "source": "project", "key": "k1", "currentHash": "h1"},
                    {"command": "ours", "source": "user", "key": "k2", "currentHash": "h2"},
                ]
            }
        ]
    }
    assert pick(listed, "ours") == ("k2", "h2")
    assert pick({"data": []}, "ours") is None
    block = codex_block(trust=("/c/config.toml:session_start:0:0", "sha256:ab"))
    assert tomllib.loads(block)["hooks"]["state"] == {
        "/c/config.toml:session_start:0:0": {"trusted_hash": "sha256:ab"}
    }


def test_print_shows_what_each_client_needs(env: dict[str, str]) -> None:
    claude = snippet("claude-code", environ=env)
    assert "--allowedTools mcp__memoryd__memory_read" in claude and '"permissions"' in claude
    assert '"SessionStart"' in claude and "claude mcp add --scope user memoryd" in claude
    codex = snippet("codex", environ=env)
    assert "required = true" in codex and 'approval_mode = "approve"' in codex
    assert "[[hooks.SessionStart]]" in codex


FAKE_CODEX = '''#!{python}
"""A stand-in for `codex app-server`: lists the SessionStart hooks of $CODEX_HOME/config.toml."""
import hashlib, json, os, sys, tomllib
path = os.path.join(os.environ["CODEX_HOME"], "config.toml")
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        print(json.dumps({{"id": msg["id"], "result": {{}}}}), flush=True)
    elif msg.get("method") == "hooks/list":
        with open(path, "rb") as f:
            groups = tomllib.load(f).get("hooks", {{}}).get("SessionStart", [])
        hooks = [
            {{"key": f"{{path}}:session_start:{{g}}:{{h}}", "command": hook["command"],
              "source": "user", "currentHash": "sha256:" + hashlib.sha256(
                  hook["command"].encode()).hexdigest()}}
            for g, group in enumerate(groups) for h, hook in enumerate(group["hooks"])
        ]
        print(json.dumps({{"id": msg["id"], "result": {{"data": [{{"hooks": hooks}}]}}}}), flush=True)
'''


def test_the_hook_is_trusted_as_codex_lists_it_and_followed_when_it_moves(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    import sys

    fake = tmp_path / "codex-bin"
    fake.write_text(FAKE_CODEX.format(python=sys.executable))
    fake.chmod(0o755)
    inst = ClientInstaller(paths, "codex", env, codex_bin=str(fake))
    assert [s.action for s in inst.install(prime=False)] == ["write"]
    config = tmp_path / "codex" / "config.toml"
    state = tomllib.loads(config.read_text())["hooks"]["state"]
    assert list(state) == [f"{config}:session_start:0:0"]
    # the user puts a hook group of their own before memoryd's: its key moves to index 1
    text = config.read_text()
    config.write_text(
        '[[hooks.SessionStart]]\n[[hooks.SessionStart.hooks]]\ntype = "command"\n'
        'command = "mine"\n\n' + text
    )
    assert [
        s.action
        for s in ClientInstaller(paths, "codex", env, codex_bin=str(fake)).install(prime=False)
    ]
    state = tomllib.loads(config.read_text())["hooks"]["state"]
    assert list(state) == [f"{config}:session_start:1:0"]
    # the block itself unchanged, only the trust entry stale: re-running refreshes it alone
    config.write_text(config.read_text().replace(":session_start:1:0", ":session_start:0:0"))
    inst = ClientInstaller(paths, "codex", env, codex_bin=str(fake))
    files = inst.record()
    rec = next(iter(files.values()))
    rec["trust"][0] = rec["trust"][0].replace(":1:0", ":0:0")
    rec["appended"] = rec["appended"].replace(":session_start:1:0", ":session_start:0:0")
    inst._save(files)
    steps = inst.install(prime=False)
    assert [(s.action, s.detail) for s in steps] == [("write", "the hook's trust entry")]
    state = tomllib.loads(config.read_text())["hooks"]["state"]
    assert list(state) == [f"{config}:session_start:1:0"]
    ClientInstaller(paths, "codex", env).uninstall()
    assert config.read_text().startswith("[[hooks.SessionStart]]\n[[hooks.SessionStart.hooks]]")
    assert "memoryd" not in config.read_text()


def test_a_reinstall_over_user_changes_never_undoes_them(
    paths: Paths, env: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "claude" / "settings.json"
    ClientInstaller(paths, "claude-code", env).install(prime=False)  # creates settings.json
    data = json.loads(settings.read_text())
    data["model"] = "sonnet"  # the user's own setting, added after memoryd's install
    data["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] = 11  # and memoryd's hook changed
    settings.write_text(json.dumps(data))
    ClientInstaller(paths, "claude-code", env).install(
        prime=False
    )  # adds memoryd's hook as it writes it
    ClientInstaller(paths, "claude-code", env).uninstall()
    left = json.loads(settings.read_text())
    assert left["model"] == "sonnet"  # not the file as memoryd first created it (absent)
    groups = left["hooks"]["SessionStart"]  # the changed group is the user's now: kept
    assert [g["hooks"][0]["timeout"] for g in groups] == [11]
    assert "permissions" not in left


def test_the_install_keeps_the_tool_list_for_the_early_answer(
    paths: Paths, env: dict[str, str], memoryd_home: Path
) -> None:
    import os

    from memoryd.mcp_handshake import cached_tools, tools_cache_key

    env = {**env, "PATH": os.environ.get("PATH", "")}
    assert cached_tools(paths, tools_cache_key()) is None
    ClientInstaller(paths, "claude-code", env).install()
    tools = cached_tools(paths, tools_cache_key())
    assert tools is not None
    assert sorted(t["name"] for t in tools["tools"]) == sorted(
        ["memory_read", "memory_list", "memory_search", "memory_add_note", "memory_inspect"]
    )
