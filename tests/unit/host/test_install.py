from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from memoryd.errors import InstallError
from memoryd.fsutil import sha256
from memoryd.host.install import Installer, Step
from memoryd.paths import Paths


def file_actions(steps: Sequence[object]) -> list[str]:
    return [s.action for s in steps if isinstance(s, Step)]


def old_install(paths: Paths, cfg: Path) -> tuple[Path, Path]:
    """What memoryd 0.1 left: two agent files and an MCP entry, each recorded in the manifest."""
    (cfg / "agent").mkdir(parents=True, exist_ok=True)
    files = {}
    for name in ("memoryd-extract", "memoryd-consolidate"):
        text = f"---\nmode: subagent\n---\n{name}\n".encode()
        (cfg / "agent" / f"{name}.md").write_bytes(text)
        files[f"agent/{name}.md"] = sha256(text)
    entry = {"type": "local", "command": ["python", "-m", "memoryd", "mcp"], "enabled": True}
    (cfg / "opencode.json").write_text(
        json.dumps({"model": "x/y", "mcp": {"memoryd": entry, "other": {"type": "local"}}})
    )
    paths.ensure_dir(paths.state_dir)
    paths.install_manifest.write_text(
        json.dumps(
            {
                "opencode": {"config_dir": str(cfg), "files": files, "version": "0.1.0"},
                "opencode-mcp": {
                    "config_dir": str(cfg),
                    "sha": sha256(json.dumps(entry, sort_keys=True).encode()),
                },
            }
        )
    )
    return cfg / "agent" / "memoryd-extract.md", cfg / "opencode.json"


def test_install_is_idempotent_and_uninstall_removes_exactly_it(
    paths: Paths, tmp_path: Path
) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "agent").mkdir(parents=True)
    (cfg / "agent" / "mine.md").write_text("user agent")
    steps = Installer(paths, cfg).install()
    assert file_actions(steps) == ["create"]
    # only the shim: no agent in the user's config, no MCP server registered
    assert sorted(p.name for p in (cfg / "agent").iterdir()) == ["mine.md"]
    assert not (cfg / "opencode.json").exists()
    assert file_actions(Installer(paths, cfg).install()) == ["unchanged"]
    # the installer remembers the config dir it used
    assert file_actions(Installer(paths).uninstall()) == ["remove"]
    assert not (cfg / "plugin").exists()
    assert (cfg / "agent" / "mine.md").read_text() == "user agent"


def test_user_edits_are_kept_unless_forced(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    Installer(paths, cfg).install()
    target = cfg / "plugin" / "memoryd.js"
    target.write_text(target.read_text() + "\n// my extra line\n")
    assert file_actions(Installer(paths, cfg).install()) == ["keep-modified"]
    assert "my extra line" in target.read_text()
    assert file_actions(Installer(paths, cfg).uninstall()) == ["keep-modified"]
    assert target.exists()
    assert file_actions(Installer(paths, cfg).install(force=True)) == ["replace"]
    assert "my extra line" not in target.read_text()


def test_preexisting_foreign_file_is_not_overwritten(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "plugin").mkdir(parents=True)
    (cfg / "plugin" / "memoryd.js").write_text("someone else's")
    assert file_actions(Installer(paths, cfg).install()) == ["keep-modified"]
    assert (cfg / "plugin" / "memoryd.js").read_text() == "someone else's"


def test_dry_run_changes_nothing(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    steps = Installer(paths, cfg).install(dry_run=True)
    assert file_actions(steps) == ["create"]
    assert not cfg.exists() and not paths.install_manifest.exists()


def test_symlinked_target_is_refused(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "plugin").mkdir(parents=True)
    (cfg / "plugin" / "memoryd.js").symlink_to(tmp_path / "elsewhere.js")
    with pytest.raises(InstallError, match="symlink"):
        Installer(paths, cfg).install()


def test_corrupt_manifest_is_reported(paths: Paths, tmp_path: Path) -> None:
    paths.ensure_dir(paths.state_dir)
    paths.install_manifest.write_text("{not json")
    with pytest.raises(InstallError, match="not valid JSON"):
        Installer(paths, tmp_path / "opencode")


def test_shim_points_at_memoryd_state_and_tool_command(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    Installer(paths, cfg).install()
    shim = (cfg / "plugin" / "memoryd.js").read_text()
    assert json.dumps(str(paths.readpath_block)) in shim
    assert (
        json.dumps(str(paths.citation_spool)) in shim
        and json.dumps(str(paths.server_state)) in shim
    )
    assert json.dumps([sys.executable, "-m", "memoryd", "tool"]) in shim
    assert '"memory_search"' in shim and '"memory_reset"' not in shim
    assert "{{" not in shim


def test_install_takes_out_what_an_earlier_version_installed(paths: Paths, tmp_path: Path) -> None:
    agent, config = old_install(paths, tmp_path / "opencode")
    steps = Installer(paths).install()
    assert [s.action for s in steps] == ["create", "remove", "remove", "remove"]
    assert not agent.exists() and not agent.parent.exists()
    data = json.loads(config.read_text())
    assert data == {"model": "x/y", "mcp": {"other": {"type": "local"}}}
    assert Installer(paths).uninstall()[-1].action == "remove"  # only the shim is left to remove
    assert not (tmp_path / "opencode" / "plugin").exists()


def test_uninstall_still_removes_an_old_registration(paths: Paths, tmp_path: Path) -> None:
    agent, config = old_install(paths, tmp_path / "opencode")
    steps = Installer(paths).uninstall()
    assert sorted(s.action for s in steps) == ["remove", "remove", "remove"]
    assert not agent.exists()
    assert "memoryd" not in json.loads(config.read_text())["mcp"]


def test_user_changed_old_mcp_entry_is_kept(paths: Paths, tmp_path: Path) -> None:
    _, config = old_install(paths, tmp_path / "opencode")
    data = json.loads(config.read_text())
    data["mcp"]["memoryd"]["enabled"] = False
    config.write_text(json.dumps(data))
    assert Installer(paths).install()[-1].action == "keep-modified"
    assert Installer(paths).uninstall()[-1].action == "keep-modified"
    assert json.loads(config.read_text())["mcp"]["memoryd"]["enabled"] is False
    assert Installer(paths, config.parent).uninstall(force=True)[-1].action == "remove"


def test_print_snippets() -> None:
    from memoryd.host.client_config import snippet

    assert "claude mcp add" in snippet("claude-code") and '"mcpServers"' in snippet("claude-code")
    assert "[mcp_servers.memoryd]" in snippet(
        "codex"
    ) and 'args = ["-m", "memoryd", "mcp"]' in snippet("codex")


def test_default_config_dir() -> None:
    from memoryd.host.install import default_config_dir

    assert default_config_dir({"OPENCODE_CONFIG_DIR": "/x/oc", "XDG_CONFIG_HOME": "/y"}) == Path(
        "/x/oc"
    )
    assert default_config_dir({"XDG_CONFIG_HOME": "/y"}) == Path("/y/opencode")
    assert default_config_dir({"HOME": "/h"}) == Path("/h/.config/opencode")
