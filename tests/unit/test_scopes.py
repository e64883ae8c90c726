"""Project scopes on the write side (keys, backfill, the workspace layout, validation)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from memoryd.clock import HOUR, ManualClock
from memoryd.folder.audit import is_agent_owned
from memoryd.folder.linediff import Change, WorkspaceDiff
from memoryd.folder.workspace import Workspace
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.scopes import checkout_root, find_worktree, is_scope_key, scope_key, scope_root
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.migrations import migrate
from memoryd.store.outputs import Output
from memoryd.write.phase1 import Phase1
from memoryd.write.phase2 import projects_block
from tests.fakehost import FakeOpencode
from tests.narrow import present

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "scope_keys.json"


def out(sid: str, *, worktree: str | None, cwd: str = "/srv/a/sub", updated: int = 1_000) -> Output:
    return Output(
        session_id=sid,
        source_updated_at=updated,
        raw_memory=f"- fact of {sid}",
        rollout_summary=f"summary of {sid}",
        rollout_slug=None,
        cwd=cwd,
        title="t",
        generated_at=updated,
        usage_count=0,
        last_usage=None,
        selected_for_phase2=False,
        project_id="p" if worktree else None,
        worktree=worktree,
    )


# -- keys -------------------------------------------------------------------------------------


def test_keys_are_readable_stable_and_safe() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    for root, key in golden.items():
        assert scope_key(root) == key  # the shim's port is pinned to the same file
        assert is_scope_key(key) and "/" not in key and len(key) <= 41
    assert scope_key("/home/dev/src/memoryd").startswith("memoryd-")
    # two checkouts of one repository are two scopes
    assert scope_key("/home/dev/src/memoryd") != scope_key("/home/dev/wt/memoryd")
    assert not is_scope_key("../etc") and not is_scope_key("memoryd")


def test_scope_root_uses_the_worktree_and_the_folder_for_loose_sessions() -> None:
    assert scope_root("/repo", "/repo/sub") == "/repo"
    assert scope_root("/", "/tmp/loose") == "/tmp/loose"  # opencode's "global" project
    assert scope_root(None, "/repo/sub") is None  # not known yet: the global layer until backfill


def test_find_worktree_walks_up_to_the_git_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a" / "b").mkdir(parents=True)
    assert find_worktree(repo / "a" / "b") == str(repo)
    linked = tmp_path / "linked"
    (linked / "x").mkdir(parents=True)
    (linked / ".git").write_text("gitdir: /elsewhere\n")  # a linked worktree: its own scope
    assert find_worktree(linked / "x") == str(linked)


def test_a_second_checkout_of_one_repository_is_its_own_scope(tmp_path: Path) -> None:
    main, other = tmp_path / "main", tmp_path / "other"
    for folder in (main, other):
        (folder / ".git").mkdir(parents=True)
        (folder / "pkg").mkdir()
    # opencode lists both under the project's first worktree; each session keeps its own checkout
    assert checkout_root(str(main), str(main / "pkg")) == str(main)
    assert checkout_root(str(main), str(other / "pkg")) == str(other)
    assert checkout_root("/", "/tmp/loose") == "/"
    assert scope_key(checkout_root(str(main), str(other)) or "") != scope_key(str(main))


# -- migration and backfill ---------------------------------------------------------------------


def test_outputs_from_before_scopes_are_backfilled_once_at_discovery(
    paths: Paths, clock: ManualClock
) -> None:
    paths.ensure_dir(paths.data_dir)
    conn = sqlite3.connect(paths.db, isolation_level=None)
    migrate(conn, now_ms=1, stop_before="m006_project_scopes")
    conn.execute(
        "INSERT INTO stage1_outputs (session_id, source_updated_at, raw_memory, rollout_summary,"
        " cwd, generated_at) VALUES ('ses_oldoutput1', ?, '- raw', 'sum', '/srv/a/sub', 1)",
        (clock.now_ms() - 8 * HOUR,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, job_key, status, retry_remaining, last_success_watermark) "
        "VALUES ('memory_stage1', 'ses_oldoutput1', 'done', 3, ?)",
        (clock.now_ms() - 8 * HOUR,),
    )
    conn.close()
    store = Store(paths.db, clock=clock)  # applies m006
    assert present(store.outputs.output("ses_oldoutput1")).scope is None
    host = FakeOpencode()
    host.add_session(
        "ses_oldoutput1",
        updated=clock.now_ms() - 8 * HOUR,
        directory="/srv/a/sub",
        worktree="/srv/a",
    )
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    phase1 = Phase1(store=store, client=client, settings=Settings(), paths=paths, clock=clock)
    report = asyncio.run(phase1.run_pass())
    assert report.backfilled == 1 and report.succeeded == 0  # no re-extraction
    assert host.prompts == []
    got = present(store.outputs.output("ses_oldoutput1"))
    assert got.worktree == "/srv/a" and got.scope == scope_key("/srv/a")
    assert asyncio.run(phase1.run_pass()).backfilled == 0  # done once
    store.close()


# -- the workspace layout --------------------------------------------------------------------


def test_sync_gives_each_project_its_folder_and_keeps_root_for_unscoped(
    tmp_path: Path, clock: ManualClock
) -> None:
    ws = Workspace(tmp_path / "mem", clock=clock)
    ws.ensure_layout()
    a, b = scope_key("/srv/a"), scope_key("/srv/b")
    selected = [
        out("ses_aaaaaaa1", worktree="/srv/a"),
        out("ses_bbbbbbb1", worktree="/srv/b", cwd="/srv/b"),
        out("ses_ccccccc1", worktree=None),
    ]
    ws.sync(selected)
    root = ws.root
    assert ws.project_keys() == sorted([a, b])
    assert "ses_aaaaaaa1" in (root / "projects" / a / "raw_memories.md").read_text()
    assert "ses_bbbbbbb1" not in (root / "projects" / a / "raw_memories.md").read_text()
    assert "worktree: /srv/a" in (root / "projects" / a / "project.md").read_text()
    assert len(list((root / "projects" / a / "rollout_summaries").iterdir())) == 1
    top = (root / "raw_memories.md").read_text()
    assert "ses_ccccccc1" in top and "ses_aaaaaaa1" not in top
    # b forgotten: its folder goes (agent-owned layer included); a note keeps a project alive
    (root / "projects" / b / "memory_summary.md").write_text("v1\nB facts\n")
    notes = root / "projects" / a / "notes"
    notes.mkdir()
    (notes / "n.md").write_text("keep\n")
    result = ws.sync([selected[2]])
    assert not (root / "projects" / b).exists()
    assert f"projects/{b}/memory_summary.md" in result.removed
    assert (notes / "n.md").exists() and not (root / "projects" / a / "raw_memories.md").exists()


def test_project_layers_are_agent_owned_and_validated(tmp_path: Path, clock: ManualClock) -> None:
    a = scope_key("/srv/a")
    assert is_agent_owned(f"projects/{a}/memory_summary.md")
    assert is_agent_owned(f"projects/{a}/MEMORY.md")
    assert not is_agent_owned(f"projects/{a}/raw_memories.md")
    assert not is_agent_owned(f"projects/{a}/notes/x.md")
    assert not is_agent_owned("projects/not a key/memory_summary.md")
    ws = Workspace(tmp_path / "mem", clock=clock)
    ws.ensure_layout()
    ws.sync([out("ses_aaaaaaa1", worktree="/srv/a")])
    (ws.root / "MEMORY.md").write_text("# m\n")
    (ws.root / "memory_summary.md").write_text("v1\n")
    assert ws.validate() == []
    (ws.root / "projects" / a / "memory_summary.md").write_text("no version line\n")
    assert any("first line" in p and a in p for p in ws.validate())
    (ws.root / "projects" / a / "memory_summary.md").write_text("v1\nok\n")
    invented = ws.root / "projects" / scope_key("/srv/zzz")
    invented.mkdir()
    (invented / "memory_summary.md").write_text("v1\n")
    assert any("not a known project" in p for p in ws.validate())
    # the guard undoes the agent's changes to a project's inputs, not to its layer
    snap = ws.snapshot_protected()
    (ws.root / "projects" / a / "raw_memories.md").write_text("tampered\n")
    (ws.root / "projects" / a / "memory_summary.md").write_text("v1\nedited\n")
    restored = ws.restore_protected(snap)
    assert restored == [f"projects/{a}/raw_memories.md"]
    assert (ws.root / "projects" / a / "memory_summary.md").read_text() == "v1\nedited\n"


def test_prompt_names_only_the_projects_whose_inputs_changed() -> None:
    a, b, gone = scope_key("/srv/a"), scope_key("/srv/b"), scope_key("/srv/old")
    diff = WorkspaceDiff(
        [
            Change("A", f"projects/{a}/raw_memories.md"),
            Change("A", f"projects/{a}/project.md"),
            Change("D", f"projects/{gone}/raw_memories.md"),
        ]
    )
    text = projects_block([a, b], diff, 1800)
    assert f"`projects/{a}/` (new" in text
    assert f"projects/{b}/" not in text  # unchanged: no attention needed
    assert f"- `projects/{gone}/`" in text and "1800 tokens" in text
    assert projects_block([], WorkspaceDiff([]), 1800) == ""
