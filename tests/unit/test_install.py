from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.errors import InstallError
from memoryd.host.install import Installer, Step
from memoryd.paths import Paths


def file_actions(steps: list) -> list[str]:
    return [s.action for s in steps if isinstance(s, Step)]


def front_matter(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines[0] == "---"
    return lines[1 : lines.index("---", 1)]


def test_install_is_idempotent_and_uninstall_removes_exactly_it(
    paths: Paths, tmp_path: Path
) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "agent").mkdir(parents=True)
    (cfg / "agent" / "mine.md").write_text("user agent")
    steps = Installer(paths, cfg).install()
    assert file_actions(steps) == ["create", "create", "create"]
    agent = (cfg / "agent" / "memoryd-extract.md").read_text()
    fm = front_matter(agent)
    assert fm[0].startswith("# Installed by memoryd")
    assert "mode: subagent" in fm and '  "*": deny' in fm and "  StructuredOutput: allow" in fm
    consolidate = front_matter((cfg / "agent" / "memoryd-consolidate.md").read_text())
    # alone, the consolidator may do nothing: each run's session rules open the memory folder
    rules = [line.strip() for line in consolidate if line.startswith("  ")]
    assert rules[0] == '"*": deny' and all(
        r.endswith(":") or r == '"*": deny' or r == '"/opened-per-run-by-memoryd": allow'
        for r in rules
    )
    assert file_actions(Installer(paths, cfg).install()) == ["unchanged", "unchanged", "unchanged"]
    # the installer remembers the config dir it used
    assert file_actions(Installer(paths).uninstall()) == ["remove", "remove", "remove"]
    assert not (cfg / "agent" / "memoryd-extract.md").exists() and not (cfg / "plugin").exists()
    assert (cfg / "agent" / "mine.md").read_text() == "user agent"


def test_user_edits_are_kept_unless_forced(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    Installer(paths, cfg).install()
    target = cfg / "agent" / "memoryd-extract.md"
    target.write_text(target.read_text() + "\nmy extra line\n")
    assert file_actions(Installer(paths, cfg).install()) == [
        "keep-modified",
        "unchanged",
        "unchanged",
    ]
    assert "my extra line" in target.read_text()
    assert file_actions(Installer(paths, cfg).uninstall()) == ["keep-modified", "remove", "remove"]
    assert target.exists()
    assert file_actions(Installer(paths, cfg).install(force=True)) == [
        "replace",
        "create",
        "create",
    ]
    assert "my extra line" not in target.read_text()


def test_preexisting_foreign_file_is_not_overwritten(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "agent").mkdir(parents=True)
    (cfg / "agent" / "memoryd-extract.md").write_text("someone else's")
    assert file_actions(Installer(paths, cfg).install()) == ["keep-modified", "create", "create"]
    assert (cfg / "agent" / "memoryd-extract.md").read_text() == "someone else's"


def test_dry_run_changes_nothing(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    steps = Installer(paths, cfg).install(dry_run=True)
    assert file_actions(steps) == ["create", "create", "create"]
    assert steps[-1].action == "create"  # the MCP registration, planned only
    assert not cfg.exists() and not paths.install_manifest.exists()


def test_symlinked_target_is_refused(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    (cfg / "agent").mkdir(parents=True)
    (cfg / "agent" / "memoryd-extract.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(InstallError, match="symlink"):
        Installer(paths, cfg).install()


def test_corrupt_manifest_is_reported(paths: Paths, tmp_path: Path) -> None:
    paths.ensure_dir(paths.state_dir)
    paths.install_manifest.write_text("{not json")
    with pytest.raises(InstallError, match="not valid JSON"):
        Installer(paths, tmp_path / "opencode")


def test_shim_points_at_memoryd_state(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    Installer(paths, cfg).install()
    shim = (cfg / "plugin" / "memoryd.js").read_text()
    assert json.dumps(str(paths.readpath_block)) in shim
    assert (
        json.dumps(str(paths.citation_spool)) in shim
        and json.dumps(str(paths.server_state)) in shim
    )
    assert "{{" not in shim


def test_mcp_server_registered_and_removed(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    cfg.mkdir()
    (cfg / "opencode.json").write_text(
        json.dumps({"model": "x/y", "mcp": {"other": {"type": "local", "command": ["o"]}}})
    )
    steps = Installer(paths, cfg).install()
    assert steps[-1].action == "add"
    data = json.loads((cfg / "opencode.json").read_text())
    assert data["model"] == "x/y" and "other" in data["mcp"]
    assert data["mcp"]["memoryd"]["command"][-2:] == ["memoryd", "mcp"]
    assert Installer(paths, cfg).install()[-1].action == "unchanged"
    Installer(paths, cfg).uninstall()
    data = json.loads((cfg / "opencode.json").read_text())
    assert "memoryd" not in data["mcp"] and "other" in data["mcp"] and data["model"] == "x/y"


def test_mcp_created_config_is_removed_and_jsonc_left_alone(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    assert Installer(paths, cfg).install()[-1].action == "create"
    assert json.loads((cfg / "opencode.json").read_text())["mcp"]["memoryd"]["type"] == "local"
    Installer(paths, cfg).uninstall()
    assert not (cfg / "opencode.json").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "opencode.jsonc").write_text('{ // my comments\n "model": "a/b" }')
    step = Installer(paths, other).install()[-1]
    assert step.action == "manual" and '"memoryd"' in step.describe()
    assert (other / "opencode.jsonc").read_text().startswith("{ // my comments")


def test_user_changed_mcp_entry_is_kept(paths: Paths, tmp_path: Path) -> None:
    cfg = tmp_path / "opencode"
    Installer(paths, cfg).install()
    data = json.loads((cfg / "opencode.json").read_text())
    data["mcp"]["memoryd"]["enabled"] = False
    (cfg / "opencode.json").write_text(json.dumps(data))
    assert Installer(paths, cfg).install()[-1].action == "keep-modified"
    assert Installer(paths, cfg).uninstall()[-1].action == "keep-modified"
    assert json.loads((cfg / "opencode.json").read_text())["mcp"]["memoryd"]["enabled"] is False


def test_print_snippets() -> None:
    from memoryd.host.mcp_config import snippet

    assert "claude mcp add" in snippet("claude-code") and '"mcpServers"' in snippet("claude-code")
    assert "[mcp_servers.memoryd]" in snippet(
        "codex"
    ) and 'args = ["-m", "memoryd", "mcp"]' in snippet("codex")


def test_print_snippets_document_the_erase_gate() -> None:
    import tomllib

    from memoryd.host.mcp_config import snippet
    from memoryd.mcp_server import MODEL_TOOLS

    for host in ("claude-code", "codex"):
        text = snippet(host)
        assert "not MCP tools" in text and "memoryd forget | mode | reset" in text
        assert all(name in text for name in MODEL_TOOLS)
    assert tomllib.loads(snippet("codex"))["mcp_servers"]["memoryd"]["command"]


def test_default_config_dir() -> None:
    from memoryd.host.install import default_config_dir

    assert default_config_dir({"OPENCODE_CONFIG_DIR": "/x/oc", "XDG_CONFIG_HOME": "/y"}) == Path(
        "/x/oc"
    )
    assert default_config_dir({"XDG_CONFIG_HOME": "/y"}) == Path("/y/opencode")
    assert default_config_dir({"HOME": "/h"}) == Path("/h/.config/opencode")
