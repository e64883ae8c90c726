"""memory_inspect, memory_mode and memory_reset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.clock import HOUR, ManualClock
from memoryd.folder.layout import SUMMARY_FILE
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.tools import (
    InvalidArgument,
    Refused,
    SearchIndex,
    memory_add_note,
    memory_inspect,
    memory_mode,
    memory_reset,
    memory_search,
)
from memoryd.tools.hits import SearchQuery
from tests.conftest import T0
from tests.narrow import present


def add_output(store: Store, sid: str, raw: str = "raw") -> None:
    claim = store.stage1.claim_stage1(sid, T0, max_running=100, worker_id="test")
    assert store.stage1.mark_stage1_succeeded(
        sid,
        present(claim.token),
        raw_memory=raw,
        rollout_summary="sum",
        rollout_slug=None,
        cwd=None,
        title=None,
    )


@pytest.fixture
def folder(paths: Paths) -> Path:
    root = paths.memories
    (root / "skills").mkdir(parents=True)
    (root / SUMMARY_FILE).write_text("v1\nThe user prefers uv. Deploys go through make.\n")
    (root / "MEMORY.md").write_text("# Memory\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    return root


# -- inspect ----------------------------------------------------------------------------------


def test_inspect_reports_pipeline_folder_and_summary(
    store: Store, paths: Paths, folder: Path, tmp_path: Path
) -> None:
    add_output(store, "ses_a")
    store.outputs.set_mode("ses_b", "disabled")
    (tmp_path / "target.md").write_text("x")
    os.symlink(tmp_path / "target.md", folder / "skills" / "link.md")
    r = memory_inspect(store, Settings(), paths)
    assert r.status["stage1"]["outputs"] == 1
    assert [(e.path, e.kind) for e in r.files] == [
        ("MEMORY.md", "f"),
        ("memory_summary.md", "f"),
        ("skills", "d"),
        ("skills/link.md", "l"),
    ]
    summary = (folder / SUMMARY_FILE).read_text()
    assert r.summary_chars == len(summary) and 0 < present(r.summary_tokens) < len(summary)
    assert r.modes == {"disabled": 1}
    text = r.to_text()
    assert "stage 1: 1 outputs" in text and "l skills/link.md (symlink, not followed)" in text
    assert ".git" not in text
    assert r.to_dict()["files"][0] == {"path": "MEMORY.md", "kind": "f", "size": 9}


def test_inspect_without_a_folder(store: Store, paths: Paths) -> None:
    r = memory_inspect(store, Settings(), paths)
    assert not r.folder_exists and r.files == [] and r.summary_chars is None
    assert "does not exist yet" in r.to_text()


def test_inspect_refuses_a_symlinked_root(store: Store, paths: Paths, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    os.symlink(real, paths.memories)
    with pytest.raises(Refused, match="symlink"):
        memory_inspect(store, Settings(), paths)


# -- mode -------------------------------------------------------------------------------------


def test_mode_sets_and_reports_previous(store: Store) -> None:
    r = memory_mode(store, "disabled", "ses_a")
    assert (r.mode, r.previous) == ("disabled", None)
    r = memory_mode(store, "polluted", "ses_a")
    assert r.previous == "disabled" and store.outputs.memory_mode("ses_a") == "polluted"
    assert "was disabled" in r.to_text()


@pytest.mark.parametrize(("mode", "sid"), [("off", "s"), ("enabled", None), ("enabled", "  ")])
def test_mode_validation(store: Store, mode: str, sid: str | None) -> None:
    with pytest.raises(InvalidArgument):
        memory_mode(store, mode, sid)


def test_disabling_a_consumed_session_enqueues_phase2(store: Store) -> None:
    add_output(store, "ses_a")
    claim = store.phase2.claim_phase2(worker_id="t", ignore_cooldown=True)
    store.phase2.mark_phase2_succeeded(
        present(claim.token), [("ses_a", T0)], consolidated=False, watermark=claim.watermark or 0
    )
    memory_mode(store, "disabled", "ses_a")
    assert present(store.phase2.phase2_job())["status"] == "pending"


# -- reset ------------------------------------------------------------------------------------


@pytest.mark.parametrize("confirm", [False, None, "true", 1, "yes"])
def test_reset_needs_confirm_true(
    store: Store, paths: Paths, folder: Path, confirm: object
) -> None:
    add_output(store, "ses_a")
    with pytest.raises(Refused, match="confirm"):
        memory_reset(store, paths, confirm)
    assert (folder / "MEMORY.md").exists() and store.outputs.output("ses_a") is not None


def test_reset_refused_while_the_lease_is_held(
    store: Store, paths: Paths, folder: Path, clock: ManualClock
) -> None:
    add_output(store, "ses_a")
    assert store.phase2.claim_phase2(worker_id="other", ignore_cooldown=True).claimed
    with pytest.raises(Refused, match="consolidation is running"):
        memory_reset(store, paths, True)
    assert (folder / "MEMORY.md").exists() and store.outputs.output("ses_a") is not None
    clock.advance(2 * HOUR)  # the lease ran out: a dead consolidator no longer blocks a reset
    memory_reset(store, paths, True)
    assert store.outputs.output("ses_a") is None


def test_reset_clears_folder_outputs_and_index(
    store: Store, paths: Paths, folder: Path, clock: ManualClock
) -> None:
    add_output(store, "ses_a", raw="pangolin facts")
    memory_add_note(folder, "pangolin note", clock=clock)
    store.outputs.set_mode("ses_keep", "disabled")
    index = SearchIndex(paths.data_dir / "search.db", folder, store)
    try:
        assert memory_search(folder, SearchQuery(["pangolin"], ranked=True), index=index).total == 2
        r = memory_reset(store, paths, True, index=index)
        assert r.index_cleared and "memory reset" in r.to_text()
        assert folder.exists() and os.listdir(folder) == []
        assert (
            store.outputs.output("ses_a") is None
            and store.outputs.memory_mode("ses_keep") == "disabled"
        )
        assert memory_search(folder, SearchQuery(["pangolin"], ranked=True), index=index).total == 0
    finally:
        index.close()


def test_reset_takes_the_old_summary_out_of_every_turn(
    store: Store, paths: Paths, folder: Path
) -> None:
    from memoryd.folder import rollback
    from memoryd.read.block import render_block, sync_block

    settings = Settings()
    rollback.record(paths, source="a validated run")  # the block renders from this copy
    assert sync_block(paths, settings)
    assert "prefers uv" in paths.readpath_block.read_text()
    memory_reset(store, paths, True)
    assert render_block(paths) is None
    sync_block(paths, settings)
    assert not paths.readpath_block.exists()
    # a rollback after the reset (e.g. a failed first run) restores to nothing, not to the past
    (folder / SUMMARY_FILE).write_text("v1\nhalf-written by a failed run\n")
    rollback.restore(paths, ManualClock(T0))
    assert not (folder / SUMMARY_FILE).exists()


def test_admin_results_are_json_serialisable(store: Store, paths: Paths, folder: Path) -> None:
    import json

    assert json.dumps(memory_inspect(store, Settings(), paths).to_dict())
    assert json.dumps(memory_mode(store, "enabled", "ses_x").to_dict())


def test_inspect_reports_what_a_pasted_codex_table_left_without_effect(
    store: Store, paths: Paths, tmp_path: Path
) -> None:
    import json

    from memoryd.settings import load_settings

    cfg = tmp_path / "config.toml"
    cfg.write_text('[memories]\nversion = "v2"\ndedicated_tools = true\nsomething_new = 3\n')
    r = memory_inspect(store, load_settings(cfg, environ={}), paths)
    assert set(r.codex_only) == {"dedicated_tools", "something_new"}
    text = r.to_text()
    assert "dedicated_tools = True" in text
    assert "something_new = 3  (not a memoryd option)" in text
    assert "extensions.codex_version = 'v2'  (file)" in text
    assert json.dumps(r.to_dict())
