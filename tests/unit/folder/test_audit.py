"""Bounded, link-proof memory files: a file over its kind's cap, or one hard-linked to
a file elsewhere, is never adopted, validated, rendered, tokenized, read or searched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd import tokenizer as tokens
from memoryd.clock import ManualClock
from memoryd.errors import FileTooLarge, NotRegularFile, Refused
from memoryd.folder import rollback
from memoryd.folder.audit import memory_file_cap, read_memory_file
from memoryd.folder.validated import ValidatedMemory
from memoryd.folder.workspace import Workspace
from memoryd.fsutil import read_regular
from memoryd.paths import Paths
from memoryd.read import block as readpath
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.tools import SearchIndex, memory_list, memory_read, memory_search
from memoryd.tools.hits import SearchQuery
from memoryd.tuning import MEMORY_MAX_BYTES, SKILL_MAX_BYTES, SUMMARY_MAX_BYTES
from memoryd.write.phase2 import redact_agent_files

BIG = 50 * 1024 * 1024  # a 50 MB summary; sparse, so it costs no disk


def _valid_folder(root: Path) -> None:
    (root / "skills").mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text("# Handbook\n- uses pnpm\n")
    (root / "memory_summary.md").write_text("v1\n- uses pnpm\n")


def _sparse(path: Path, size: int, head: bytes = b"v1\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)


@pytest.fixture
def recorded(paths: Paths) -> tuple[Paths, Store, ManualClock]:
    """A folder whose hand-made state was validated and rendered once."""
    paths.ensure_dir(paths.data_dir)
    clock = ManualClock()
    store = Store(paths.db, clock=clock)
    _valid_folder(paths.memories)
    _, change = rollback.look(paths, store, clock)  # a hand edit, no host session involved
    assert change is not None and rollback.adopt(paths, clock, change)
    readpath.sync_block(paths, Settings())
    return paths, store, clock


@pytest.fixture
def no_big_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything hands the tokenizer more than a summary's cap."""
    real = tokens.count

    def count(text: str) -> int:
        assert len(text) <= SUMMARY_MAX_BYTES * 2, "an oversized file reached the tokenizer"
        return real(text)

    monkeypatch.setattr(tokens, "count", count)


# --- the caps ----------------------------------------------------------------------------------


def test_each_agent_owned_kind_has_its_cap() -> None:
    assert memory_file_cap("memory_summary.md") == SUMMARY_MAX_BYTES
    assert memory_file_cap("projects/app-0a1b2c3d/memory_summary.md") == SUMMARY_MAX_BYTES
    assert memory_file_cap("MEMORY.md") == MEMORY_MAX_BYTES
    assert memory_file_cap("projects/app-0a1b2c3d/MEMORY.md") == MEMORY_MAX_BYTES
    assert memory_file_cap("skills/run-tests/SKILL.md") == SKILL_MAX_BYTES
    assert memory_file_cap("skills/x/memory_summary.md") == SKILL_MAX_BYTES
    for other in ("raw_memories.md", "rollout_summaries/a.md", "extensions/ad_hoc/notes/n.md"):
        assert memory_file_cap(other) is None  # memoryd renders these, bounded where they come from
    assert SUMMARY_MAX_BYTES < SKILL_MAX_BYTES < MEMORY_MAX_BYTES


@pytest.mark.parametrize(
    "rel",
    ["memory_summary.md", "MEMORY.md", "skills/big/SKILL.md"],
)
def test_validation_refuses_an_oversized_file_naming_it_its_size_and_cap(
    tmp_path: Path, rel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "memories"
    _valid_folder(root)
    _sparse(root / rel, BIG)
    monkeypatch.setattr("memoryd.folder.audit.read_regular", _refuse_whole_reads, raising=True)
    problems = Workspace(root, clock=ManualClock()).validate()
    cap = memory_file_cap(rel)
    assert problems == [f"{rel} is {BIG} bytes, over its cap of {cap} bytes"]


def _refuse_whole_reads(path: object, *, limit: int | None = None) -> bytes | None:
    assert limit is not None, f"{path} read without a cap"
    return read_regular(path, limit=limit)  # type: ignore[arg-type]


def test_validation_refuses_an_oversized_project_layer(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    _valid_folder(root)
    project = root / "projects" / "app-0a1b2c3d"
    project.mkdir(parents=True)
    (project / "project.md").write_text("# app\n")
    _sparse(project / "memory_summary.md", SUMMARY_MAX_BYTES + 1)
    problems = Workspace(root, clock=ManualClock()).validate()
    assert problems == [
        f"projects/app-0a1b2c3d/memory_summary.md is {SUMMARY_MAX_BYTES + 1} bytes, "
        f"over its cap of {SUMMARY_MAX_BYTES} bytes"
    ]


def test_a_50_mb_hand_edit_is_never_adopted_nor_tokenized(
    recorded: tuple[Paths, Store, ManualClock], no_big_tokenizing: None
) -> None:
    paths, store, clock = recorded
    block = paths.readpath_block.read_bytes()
    validated = ValidatedMemory(paths).files()
    _sparse(paths.memories / "memory_summary.md", BIG)
    _, change = rollback.look(paths, store, clock)
    assert change is None or not rollback.adopt(paths, clock, change)  # not valid as it stands
    readpath.sync_block(paths, Settings())
    assert ValidatedMemory(paths).files() == validated
    assert paths.readpath_block.read_bytes() == block


def test_an_oversized_validated_summary_gives_no_summary(
    paths: Paths, no_big_tokenizing: None
) -> None:
    """Whoever put it in the validated copy, the block never reads it whole."""
    paths.memories.mkdir(parents=True)
    _sparse(paths.validated_memory / "memory_summary.md", BIG)
    assert readpath.render_block(paths) is None
    assert ValidatedMemory(paths).summary() is None


def test_the_consolidator_scrub_never_reads_an_oversized_file(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    _valid_folder(root)
    _sparse(root / "MEMORY.md", MEMORY_MAX_BYTES + 1, b"token sk-ant-api03-" + b"a" * 90 + b"\n")
    assert redact_agent_files(root) == []  # skipped: validation refuses the run instead


def test_read_memory_file_checks_the_cap_before_reading(tmp_path: Path) -> None:
    _sparse(tmp_path / "memory_summary.md", SUMMARY_MAX_BYTES + 1)
    with pytest.raises(FileTooLarge) as info:
        read_memory_file(tmp_path, "memory_summary.md")
    assert (info.value.size, info.value.cap) == (SUMMARY_MAX_BYTES + 1, SUMMARY_MAX_BYTES)
    assert "memory_summary.md" in str(info.value) and str(SUMMARY_MAX_BYTES) in str(info.value)


def test_tools_refuse_or_skip_oversized_memory_files(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "memories"
    _valid_folder(root)
    (root / "MEMORY.md").write_text("pangolin\n" + "x" * MEMORY_MAX_BYTES)
    with pytest.raises(FileTooLarge) as info:
        memory_read(root, "MEMORY.md")
    assert isinstance(info.value, Refused)  # a tool error the edges turn into a message
    assert f"over its cap of {MEMORY_MAX_BYTES} bytes" in str(info.value)
    assert "MEMORY.md" not in [e.path for e in memory_list(root).entries]
    assert memory_search(root, SearchQuery(["pangolin"])).matches == []
    index = SearchIndex(tmp_path / "search.db", root, store)
    try:
        assert (
            memory_search(root, SearchQuery(["pangolin"], ranked=True), index=index).matches == []
        )
    finally:
        index.close()


# --- hard links ---------------------------------------------------------------------------------


def test_reads_refuse_a_hard_linked_file(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not memory\n")
    os.link(outside, tmp_path / "MEMORY.md")
    with pytest.raises(NotRegularFile, match="hard-linked"):
        read_regular(tmp_path / "MEMORY.md")


def test_a_hard_linked_memory_file_is_never_adopted(
    recorded: tuple[Paths, Store, ManualClock], tmp_path: Path
) -> None:
    paths, store, clock = recorded
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# Handbook\nOUTSIDE-THE-FOLDER\n")
    (paths.memories / "MEMORY.md").unlink()
    os.link(outside, paths.memories / "MEMORY.md")
    problems = Workspace(paths.memories, clock=clock).validate()
    assert problems == ["MEMORY.md is hard-linked (2 names for one file)"]
    _, change = rollback.look(paths, store, clock)
    assert change is None or not rollback.adopt(paths, clock, change)
    assert b"OUTSIDE" not in (ValidatedMemory(paths).files() or {}).get("MEMORY.md", b"")


def test_a_hard_linked_file_in_the_validated_copy_is_skipped(paths: Paths, tmp_path: Path) -> None:
    paths.memories.mkdir(parents=True)
    ValidatedMemory(paths).record({"MEMORY.md": b"# fine\n"}, source="test")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("v1\nOUTSIDE\n")
    os.link(outside, paths.validated_memory / "memory_summary.md")
    assert readpath.render_block(paths) is None
    assert ValidatedMemory(paths).files() == {"MEMORY.md": b"# fine\n"}


def test_tools_never_serve_a_hard_linked_file(tmp_path: Path, store: Store) -> None:
    root = tmp_path / "memories"
    _valid_folder(root)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("pangolin outside the folder\n")
    os.link(outside, root / "skills" / "linked.md")
    (root / "MEMORY.md").unlink()
    os.link(outside, root / "MEMORY.md")
    for rel in ("MEMORY.md", "skills/linked.md"):
        with pytest.raises(Refused, match="hard-linked"):
            memory_read(root, rel)
    assert "MEMORY.md" not in [e.path for e in memory_list(root).entries]
    assert memory_list(root, "skills").entries == []
    assert memory_search(root, SearchQuery(["pangolin"])).matches == []
    index = SearchIndex(tmp_path / "search.db", root, store)
    try:
        assert (
            memory_search(root, SearchQuery(["pangolin"], ranked=True), index=index).matches == []
        )
    finally:
        index.close()
