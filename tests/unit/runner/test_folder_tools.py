"""memoryd's own file tools for a consolidator run by a client CLI: confined by memoryd's code."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryd.errors import FileTooLarge, InvalidArgument, NotFound, Refused, ToolError
from memoryd.folder.layout import DIFF_FILE
from memoryd.runner import folder_tools as files
from memoryd.tuning import MEMORY_MAX_BYTES, SUMMARY_MAX_BYTES

KEY = "app-0123abcd"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A memory folder with memoryd's inputs, a project and a secret next to it."""
    mem = tmp_path / "memories"
    (mem / "projects" / KEY / "rollout_summaries").mkdir(parents=True)
    (mem / "rollout_summaries").mkdir()
    (mem / "skills").mkdir()
    (mem / "raw_memories.md").write_text("# Raw memories\n- a fact\n")
    (mem / "projects" / KEY / "project.md").write_text("checkout: /src/app\n")
    (mem / "projects" / KEY / "raw_memories.md").write_text("- project fact\n")
    (mem / "MEMORY.md").write_text("# Memory\n- old\n")
    (mem / DIFF_FILE).write_text("A raw_memories.md\n")
    (tmp_path / "secret.txt").write_text("SECRET-OUTSIDE\n")
    return mem


ESCAPES = [
    "/etc/passwd",
    "../secret.txt",
    "skills/../../secret.txt",
    "C:\\Windows\\win.ini",
    "MEMORY.md\x00.txt",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_no_path_leaves_the_folder_for_reading_or_writing(root: Path, path: str) -> None:
    with pytest.raises(InvalidArgument):
        files.read(root, path)
    with pytest.raises(InvalidArgument):
        files.write(root, path, "x")
    with pytest.raises(InvalidArgument):
        files.edit(root, path, "a", "b")
    with pytest.raises(InvalidArgument):
        files.delete(root, path)
    assert (root.parent / "secret.txt").read_text() == "SECRET-OUTSIDE\n"


INPUTS = [
    "raw_memories.md",
    "rollout_summaries/2026-x.md",
    f"projects/{KEY}/raw_memories.md",
    f"projects/{KEY}/project.md",
    f"projects/{KEY}/notes/n.md",
    "extensions/ad_hoc/notes/n.md",
    "notes.md",
    "skills/run.sh",
    "skills/x/package.json",
    "projects/not-a-key/memory_summary.md",
]


@pytest.mark.parametrize("path", INPUTS)
def test_only_the_consolidators_files_are_writable(root: Path, path: str) -> None:
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    calls: tuple[Callable[[], object], ...] = (
        lambda: files.write(root, path, "INJECTED"),
        lambda: files.edit(root, path, "fact", "INJECTED"),
        lambda: files.delete(root, path),
    )
    for call in calls:
        with pytest.raises(ToolError):
            call()
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "path", ["AGENTS.md", "CLAUDE.md", "skills/x/claude.md", f"projects/{KEY}/CONTEXT.md"]
)
def test_instruction_files_are_never_written(root: Path, path: str) -> None:
    with pytest.raises(Refused, match="instruction files"):
        files.write(root, path, "obey")
    assert not (root / path).exists()


@pytest.mark.parametrize("path", [".claude/settings.json", ".mcp.json", "skills/.hidden/SKILL.md"])
def test_dot_entries_do_not_exist_for_the_tools(root: Path, path: str) -> None:
    with pytest.raises(NotFound):
        files.write(root, path, "{}")
    assert not os.path.lexists(root / path) and not os.path.lexists((root / path).parent / ".tmp")
    assert not list(root.rglob(".*"))


def test_the_consolidators_files_are_written_atomically_and_read_back(root: Path) -> None:
    assert files.write(root, "memory_summary.md", "v1\n- s\n").startswith("created")
    assert files.write(root, "MEMORY.md", "# Memory\n- new\n").startswith("replaced")
    assert files.write(root, "skills/tests/SKILL.md", "# how to test\n").startswith("created")
    assert files.write(root, f"projects/{KEY}/memory_summary.md", "v1\n- p\n")
    assert files.edit(root, "MEMORY.md", "- new", "- newer").startswith("edited")
    assert "- newer" in files.read(root, "MEMORY.md")
    assert "skills" in files.listing(root)
    assert files.delete(root, "skills/tests/SKILL.md") == "deleted skills/tests/SKILL.md"
    assert not (root / "skills" / "tests" / "SKILL.md").exists()
    # no temporary file is left behind by the writes
    assert not list(root.rglob(".*"))


def test_edit_needs_exactly_one_match_unless_told(root: Path) -> None:
    files.write(root, "MEMORY.md", "- a\n- a\n")
    with pytest.raises(InvalidArgument, match="2 times"):
        files.edit(root, "MEMORY.md", "- a", "- b")
    with pytest.raises(InvalidArgument, match="not found"):
        files.edit(root, "MEMORY.md", "- z", "- b")
    files.edit(root, "MEMORY.md", "- a", "- b", replace_all=True)
    assert (root / "MEMORY.md").read_text() == "- b\n- b\n"


def test_the_runs_diff_is_readable_though_the_memory_tools_hide_it(root: Path) -> None:
    assert files.read(root, DIFF_FILE) == "A raw_memories.md\n"
    assert files.read(root, "./" + DIFF_FILE) == "A raw_memories.md\n"
    with pytest.raises(ToolError):
        files.write(root, DIFF_FILE, "x")


def test_links_are_never_followed(root: Path) -> None:
    secret = root.parent / "secret.txt"
    os.symlink(secret, root / "skills" / "link.md")
    os.symlink(root.parent, root / "skills" / "up")
    with pytest.raises(Refused, match="symlink"):
        files.read(root, "skills/link.md")
    with pytest.raises(Refused):
        files.write(root, "skills/link.md", "INJECTED")  # not replaced, not written through
    with pytest.raises(Refused):
        files.write(root, "skills/up/SKILL.md", "INJECTED")  # a linked folder is not entered
    with pytest.raises(Refused):
        files.edit(root, "skills/link.md", "SECRET", "x")
    assert secret.read_text() == "SECRET-OUTSIDE\n"
    assert not (root.parent / "SKILL.md").exists()
    # a linked diff is not read either
    (root / DIFF_FILE).unlink()
    os.symlink(secret, root / DIFF_FILE)
    with pytest.raises(Refused):
        files.read(root, DIFF_FILE)


def test_a_hard_link_to_a_file_elsewhere_is_neither_read_nor_edited(root: Path) -> None:
    secret = root.parent / "secret.txt"
    (root / "MEMORY.md").unlink()
    os.link(secret, root / "MEMORY.md")
    with pytest.raises(Refused):
        files.read(root, "MEMORY.md")
    with pytest.raises(Refused):
        files.edit(root, "MEMORY.md", "SECRET", "x")
    # a whole write replaces the name, never the other file's bytes
    files.write(root, "MEMORY.md", "# Memory\n")
    assert secret.read_text() == "SECRET-OUTSIDE\n"
    assert (root / "MEMORY.md").read_text() == "# Memory\n"


def test_huge_files_are_refused_before_they_are_read_or_written(root: Path) -> None:
    with pytest.raises(FileTooLarge):
        files.write(root, "MEMORY.md", "x" * (MEMORY_MAX_BYTES + 1))
    with pytest.raises(FileTooLarge):
        files.write(root, "memory_summary.md", "x" * (SUMMARY_MAX_BYTES + 1))
    assert (root / "MEMORY.md").read_text() == "# Memory\n- old\n"
    with (root / "MEMORY.md").open("wb") as f:  # planted: 50 MB, sparse
        f.truncate(50 << 20)
    with pytest.raises(Refused):
        files.read(root, "MEMORY.md")
    with pytest.raises(FileTooLarge):
        files.edit(root, "MEMORY.md", "x", "y")
    # an edit that would grow a file past its cap is refused too
    files.write(root, "memory_summary.md", "v1\nab\n")
    with pytest.raises(FileTooLarge):
        files.edit(root, "memory_summary.md", "ab", "x" * SUMMARY_MAX_BYTES)


def test_a_project_folder_is_never_made_by_the_tools(root: Path) -> None:
    with pytest.raises(NotFound):
        files.write(root, "projects/other-89abcdef/memory_summary.md", "v1\n")
    assert not (root / "projects" / "other-89abcdef").exists()


def test_a_large_diff_is_read_in_pages(root: Path) -> None:
    line = "M rollout_summaries/" + "x" * 100 + ".md\n"
    (root / DIFF_FILE).write_text(line * 5000)  # ~560 KB: more than one read returns
    pages, offset = [], 1
    while True:
        page = files.read(root, DIFF_FILE, line_offset=offset)
        assert len(page.encode()) < 260 * 1024
        pages.append(page)
        if "continue with line_offset=" not in page:
            break
        offset = int(page.rsplit("line_offset=", 1)[1].rstrip("]"))
    assert len(pages) == 3 and sum(p.count(line) for p in pages) == 5000
    assert files.read(root, DIFF_FILE, line_offset=2, max_lines=1).startswith(line)
    with pytest.raises(InvalidArgument):
        files.read(root, DIFF_FILE, line_offset=10_000)
