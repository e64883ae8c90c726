"""Helper agents live in memoryd's own folders, never in the user's opencode config."""

from __future__ import annotations

import json

import pytest

from memoryd.errors import InstallError
from memoryd.host.agents import (
    CONSOLIDATE_AGENT,
    EXTRACT_AGENT,
    agent_homes,
    parse_front_matter,
    remove_agent_configs,
    write_agent_config,
)
from memoryd.paths import Paths


def test_front_matter_subset() -> None:
    meta, body = parse_front_matter(
        "---\n# a comment\ndescription: Some helper: it helps\nhidden: true\ntemperature: 0\n"
        'permission:\n  "*": deny\n  edit:\n    "*": deny\n    "MEMORY.md": allow\n'
        "  read: allow\n---\nThe prompt.\n\nSecond paragraph.\n"
    )
    assert meta == {
        "description": "Some helper: it helps",
        "hidden": True,
        "temperature": 0,
        "permission": {"*": "deny", "edit": {"*": "deny", "MEMORY.md": "allow"}, "read": "allow"},
    }
    assert body == "The prompt.\n\nSecond paragraph.\n"
    with pytest.raises(InstallError):
        parse_front_matter("no front matter")


def test_configs_are_written_where_only_memoryd_sessions_load_them(paths: Paths) -> None:
    homes = agent_homes(paths)
    assert homes[EXTRACT_AGENT].session_dir == paths.helper_dir
    # the consolidator's definition sits above the memory folder, out of the agent's reach
    cons = homes[CONSOLIDATE_AGENT]
    assert cons.session_dir == paths.memories and cons.config_file.parent == paths.memories.parent
    assert write_agent_config(paths, EXTRACT_AGENT) is True
    assert write_agent_config(paths, CONSOLIDATE_AGENT) is True
    extract = json.loads(homes[EXTRACT_AGENT].config_file.read_text())["agent"]
    assert list(extract) == [EXTRACT_AGENT]
    assert extract[EXTRACT_AGENT]["permission"] == {"*": "deny", "StructuredOutput": "allow"}
    assert extract[EXTRACT_AGENT]["prompt"].startswith("You are memoryd's memory-extraction")
    consolidate = json.loads(cons.config_file.read_text())["agent"][CONSOLIDATE_AGENT]
    # alone it may do nothing: each run's session rules open the memory folder's own files
    perm = consolidate["permission"]
    assert perm["*"] == "deny" and "bash" not in perm
    assert all(perm[t]["*"] == "deny" and len(perm[t]) == 2 for t in ("read", "edit", "glob"))
    assert all(p.startswith("/") for t in ("read", "edit") for p in perm[t] if p != "*")
    assert not (paths.memories / "opencode.json").exists()


def test_unchanged_config_is_not_rewritten_and_a_changed_one_is(paths: Paths) -> None:
    write_agent_config(paths, EXTRACT_AGENT)
    file = agent_homes(paths)[EXTRACT_AGENT].config_file
    ino = file.stat().st_ino
    assert write_agent_config(paths, EXTRACT_AGENT) is False
    assert file.stat().st_ino == ino
    file.write_text("{}")
    assert write_agent_config(paths, EXTRACT_AGENT) is True
    assert EXTRACT_AGENT in json.loads(file.read_text())["agent"]


def test_remove_takes_only_what_memoryd_wrote(paths: Paths) -> None:
    write_agent_config(paths, EXTRACT_AGENT)
    write_agent_config(paths, CONSOLIDATE_AGENT)
    cons = agent_homes(paths)[CONSOLIDATE_AGENT].config_file
    cons.write_text('{"agent": {}}')  # no longer ours
    assert remove_agent_configs(paths) == [agent_homes(paths)[EXTRACT_AGENT].config_file]
    assert cons.exists()
