"""memory_read / memory_list and the path guard under them: traversal, links, hidden entries, caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.folder import guard
from memoryd.folder.layout import DIFF_FILE
from memoryd.tools import InvalidArgument, NotFound, Refused, memory_list, memory_read
from memoryd.tuning import READ_MAX_BYTES


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "memories"
    (r / "skills" / "deploy").mkdir(parents=True)
    (r / "MEMORY.md").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (r / "skills" / "deploy" / "SKILL.md").write_text("# Deploy\nrun make deploy\n")
    (r / ".git").mkdir()
    (r / ".git" / "config").write_text("secret-ish\n")
    (r / ".hidden.md").write_text("hidden\n")
    (r / DIFF_FILE).write_text("diff\n")
    return r


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    p = tmp_path / "outside.txt"
    p.write_text("TOP SECRET OUTSIDE\n")
    return p


# -- traversal and path shapes ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["../x", "a/../../x", "skills/../../outside.txt", "..", "skills/.."]
)
def test_dotdot_is_rejected(root: Path, bad: str) -> None:
    with pytest.raises(InvalidArgument, match=r"'\.\.'"):
        memory_read(root, bad)
    with pytest.raises(InvalidArgument):
        memory_list(root, bad)


@pytest.mark.parametrize("bad", ["/etc/passwd", "/", "\\\\server\\share", "C:\\Windows"])
def test_absolute_paths_are_rejected(root: Path, bad: str) -> None:
    with pytest.raises(InvalidArgument, match="absolute"):
        memory_read(root, bad)


def test_colon_names_are_not_mistaken_for_drives(root: Path) -> None:
    (root / "a:b.md").write_text("colon\n")
    assert memory_read(root, "a:b.md").content == "colon\n"


def test_nul_in_path_is_rejected(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        memory_read(root, "MEMORY.md\x00x")


@pytest.mark.parametrize(
    "hidden", [".git/config", ".git", ".hidden.md", "skills/.x", DIFF_FILE, "./.git"]
)
def test_hidden_paths_are_not_found(root: Path, hidden: str) -> None:
    with pytest.raises(NotFound):
        memory_read(root, hidden)


def test_diff_file_is_hidden_only_at_the_root(root: Path) -> None:
    (root / "skills" / DIFF_FILE).write_text("a skill that happens to share the name\n")
    assert "share the name" in memory_read(root, f"skills/{DIFF_FILE}").content


def test_dot_and_empty_components_are_ignored(root: Path) -> None:
    assert memory_read(root, "./skills//deploy/SKILL.md").content.startswith("# Deploy")


def test_missing_file_is_not_found(root: Path) -> None:
    with pytest.raises(NotFound):
        memory_read(root, "nope.md")
    with pytest.raises(NotFound):
        memory_read(root, "MEMORY.md/child")  # a file used as a folder


# -- links ------------------------------------------------------------------------------------


def test_symlinked_file_is_refused(root: Path, outside: Path) -> None:
    os.symlink(outside, root / "link.md")
    with pytest.raises(Refused, match="symlink"):
        memory_read(root, "link.md")


def test_symlinked_directory_is_refused(root: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "x.md").write_text("outside dir\n")
    os.symlink(target, root / "skills" / "linked")
    with pytest.raises(Refused, match="symlink"):
        memory_read(root, "skills/linked/x.md")
    with pytest.raises(Refused, match="symlink"):
        memory_list(root, "skills/linked")


def test_symlinked_root_is_refused(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    os.symlink(root, alias)
    with pytest.raises(Refused, match="memory folder"):
        memory_read(alias, "MEMORY.md")
    with pytest.raises(Refused):
        memory_list(alias)


def test_file_swapped_for_a_link_after_validation_is_refused(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = guard._lstat_at

    def lstat_then_swap(dir_fd: int, name: str) -> os.stat_result:
        st = real(dir_fd, name)
        if name == "MEMORY.md":
            os.unlink(root / "MEMORY.md")
            os.symlink(outside, root / "MEMORY.md")
        return st

    monkeypatch.setattr(guard, "_lstat_at", lstat_then_swap)
    with pytest.raises(Refused):
        memory_read(root, "MEMORY.md")


def test_directory_swapped_for_a_link_after_validation_is_refused(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evil = tmp_path / "evil"
    (evil / "deploy").mkdir(parents=True)
    (evil / "deploy" / "SKILL.md").write_text("TOP SECRET OUTSIDE\n")
    real = guard._lstat_at

    def lstat_then_swap(dir_fd: int, name: str) -> os.stat_result:
        st = real(dir_fd, name)
        if name == "skills":
            os.rename(root / "skills", tmp_path / "moved")
            os.symlink(evil, root / "skills")
        return st

    monkeypatch.setattr(guard, "_lstat_at", lstat_then_swap)
    with pytest.raises(Refused):
        memory_read(root, "skills/deploy/SKILL.md")


def test_file_replaced_by_another_file_after_validation_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = guard._lstat_at

    def lstat_then_replace(dir_fd: int, name: str) -> os.stat_result:
        st = real(dir_fd, name)
        if name == "MEMORY.md":
            (root / "other").write_text("different inode\n")
            os.replace(root / "other", root / "MEMORY.md")
        return st

    monkeypatch.setattr(guard, "_lstat_at", lstat_then_replace)
    with pytest.raises(Refused, match="changed"):
        memory_read(root, "MEMORY.md")


def test_fifo_is_refused_without_blocking(root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(Refused):
        memory_read(root, "pipe")


# -- memory_read ------------------------------------------------------------------------------


def test_read_whole_file(root: Path) -> None:
    r = memory_read(root, "MEMORY.md")
    assert r.content.startswith("line 1\n") and r.total_lines == 10 and r.next_line_offset is None
    assert r.to_text() == r.content  # no header when starting at line 1 and complete


def test_read_window_reports_start_and_next_offset(root: Path) -> None:
    r = memory_read(root, "MEMORY.md", line_offset=4, max_lines=3)
    assert r.content == "line 4\nline 5\nline 6\n"
    assert (r.start_line, r.end_line, r.next_line_offset) == (4, 6, 7)
    text = r.to_text()
    assert "starting at line 4 of 10" in text and "line_offset=7" in text


def test_read_to_the_end_has_no_paging_hint(root: Path) -> None:
    r = memory_read(root, "MEMORY.md", line_offset=9)
    assert r.content == "line 9\nline 10\n" and r.next_line_offset is None


def test_read_offset_past_eof_is_an_error(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="past the end"):
        memory_read(root, "MEMORY.md", line_offset=11)


def test_read_empty_file(root: Path) -> None:
    (root / "empty.md").write_text("")
    r = memory_read(root, "empty.md")
    assert r.content == "" and r.total_lines == 0
    with pytest.raises(InvalidArgument):
        memory_read(root, "empty.md", line_offset=2)


@pytest.mark.parametrize(("offset", "lines"), [(0, None), (-1, None), (1, 0), (True, None)])
def test_read_bad_window_arguments(root: Path, offset: object, lines: object) -> None:
    with pytest.raises(InvalidArgument):
        memory_read(root, "MEMORY.md", line_offset=offset, max_lines=lines)  # type: ignore[arg-type]


def test_read_caps_output_and_pages_by_line(root: Path) -> None:
    line = "é" * 999 + "\n"  # 1999 bytes per line, 2-byte characters
    (root / "big.md").write_text(line * 400)
    first = memory_read(root, "big.md")
    assert first.capped and len(first.content.encode()) <= READ_MAX_BYTES
    assert first.content.endswith("\n") and first.next_line_offset == first.end_line + 1
    assert "capped at 256 KiB" in first.to_text()
    seen = first.end_line
    page = first
    while page.next_line_offset is not None:
        page = memory_read(root, "big.md", line_offset=page.next_line_offset)
        seen = page.end_line
    assert seen == 400


def test_read_cuts_a_single_huge_line_on_a_character_boundary(root: Path) -> None:
    (root / "huge.md").write_text("€" * 100_000 + "\nnext line\n")  # 300 kB of 3-byte characters
    r = memory_read(root, "huge.md")
    assert r.line_cut and r.next_line_offset == 2
    assert len(r.content.encode()) <= READ_MAX_BYTES and set(r.content) == {"€"}
    assert memory_read(root, "huge.md", line_offset=2).content == "next line\n"


def test_read_invalid_utf8_is_replaced_not_fatal(root: Path) -> None:
    (root / "bad.md").write_bytes(b"ok \xff\xfe bytes\n")
    assert "\ufffd" in memory_read(root, "bad.md").content


def test_read_counts_only_newlines_as_line_breaks(root: Path) -> None:
    (root / "ff.md").write_text("a\x0cb\u2028c\nsecond\n")
    assert memory_read(root, "ff.md", line_offset=2).content == "second\n"


def test_read_directory_lists_and_points_to_memory_list(root: Path) -> None:
    r = memory_read(root, "skills")
    assert r.kind == "dir"
    assert "use memory_list" in r.to_text() and "d skills/deploy/" in r.to_text()


# -- memory_list ------------------------------------------------------------------------------


def test_list_root_sorted_marks_kinds_and_hides(root: Path, outside: Path) -> None:
    os.symlink(outside, root / "zlink.md")
    os.mkfifo(root / "pipe")
    r = memory_list(root)
    assert [(e.path, e.kind) for e in r.entries] == [("MEMORY.md", "f"), ("skills", "d")]
    assert r.to_text() == "f MEMORY.md\nd skills/"


def test_list_subfolder_gives_paths_from_the_root(root: Path) -> None:
    assert [e.path for e in memory_list(root, "skills/deploy").entries] == [
        "skills/deploy/SKILL.md"
    ]


def test_list_a_file_is_an_error(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="memory_read"):
        memory_list(root, "MEMORY.md")


def test_list_missing_folder_is_not_found_but_missing_root_is_empty(
    root: Path, tmp_path: Path
) -> None:
    with pytest.raises(NotFound):
        memory_list(root, "nope")
    assert memory_list(tmp_path / "never-created").entries == []
    with pytest.raises(NotFound):
        memory_read(tmp_path / "never-created", "MEMORY.md")


def test_list_truncation_reports_the_count(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(30):
        (many / f"{i:03}.md").write_text("x")
    r = memory_list(root, "many", max_results=10)
    assert len(r.entries) == 10 and r.truncated == 20 and r.total == 30
    assert r.entries[0].path == "many/000.md"
    assert "20 more entries" in r.to_text()


@pytest.mark.parametrize("n", [0, 2001, -5])
def test_list_max_results_range(root: Path, n: int) -> None:
    with pytest.raises(InvalidArgument):
        memory_list(root, max_results=n)


def test_results_serialise(root: Path) -> None:
    d = memory_read(root, "MEMORY.md", max_lines=1).to_dict()
    assert d["next_line_offset"] == 2 and d["kind"] == "file"
    assert memory_list(root).to_dict()["entries"][0] == {
        "path": "MEMORY.md",
        "kind": "f",
        "size": 71,
    }
