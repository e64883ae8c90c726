"""Plain memory_search: modes, context, case, normalization, paging, time filters, the timeline."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.folder.layout import DIFF_FILE
from memoryd.tools import InvalidArgument, NotFound, Refused, memory_search
from memoryd.tools.common import parse_bound
from memoryd.tools.hits import SearchQuery
from memoryd.tools.search import _windows
from tests.narrow import present


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "memories"
    (r / "rollout_summaries").mkdir(parents=True)
    (r / "extensions" / "ad_hoc" / "notes").mkdir(parents=True)
    (r / "MEMORY.md").write_text(
        "# Deploy\n"
        "Use make deploy for staging.\n"
        "The staging host is db-1.\n"
        "\n"
        "# Style\n"
        "Prefer ruff over flake8.\n"
        "Deploy windows are Tuesdays.\n"
    )
    (r / "skills").mkdir()
    (r / "skills" / "a.md").write_text("deploy\nnothing\nstaging\n")
    (r / "rollout_summaries" / "2027-01-10T09-00-00-ab12-fix.md").write_text(
        "session_id: s1\nupdated_at: x\n\nFixed the flaky deploy test.\nmore\n"
    )
    (r / "rollout_summaries" / "2027-01-12T23-59-30-cd34.md").write_text(
        "session_id: s2\n\nStaging migration notes.\n"
    )
    (r / "extensions" / "ad_hoc" / "notes" / "2027-01-13T00-00-00-late.md").write_text(
        "title: late\ncreated: x\n\nA note about deploy keys.\n"
    )
    (r / "binary.bin").write_bytes(b"deploy\x00\x01")
    (r / ".git").mkdir()
    (r / ".git" / "deploy").write_text("deploy\n")
    (r / DIFF_FILE).write_text("deploy\n")
    return r


def paths_of(result) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return [(m.path, m.line) for m in result.matches]


def test_any_mode_sorted_by_path_then_line_and_skips_hidden_binary_diff(root: Path) -> None:
    r = memory_search(root, SearchQuery(["deploy"]))
    assert paths_of(r) == [  # code-point order: upper case sorts first
        ("MEMORY.md", 2),
        ("extensions/ad_hoc/notes/2027-01-13T00-00-00-late.md", 4),
        ("rollout_summaries/2027-01-10T09-00-00-ab12-fix.md", 4),
        ("skills/a.md", 1),
    ]
    assert r.total == 4 and r.next_cursor is None and not r.truncated


def test_case_sensitive_by_default(root: Path) -> None:
    assert (
        len(memory_search(root, SearchQuery(["Deploy"])).matches) == 2
    )  # heading and "Deploy windows"
    insensitive = memory_search(root, SearchQuery(["Deploy"], case_sensitive=False))
    assert insensitive.total == 6


def test_any_mode_reports_which_queries_matched(root: Path) -> None:
    r = memory_search(root, SearchQuery(["staging", "make"], path="MEMORY.md"))
    assert [(m.line, m.matched_queries) for m in r.matches] == [
        (2, ["staging", "make"]),
        (3, ["staging"]),
    ]


def test_all_on_same_line(root: Path) -> None:
    r = memory_search(root, SearchQuery(["make", "staging"], match_mode="all_on_same_line"))
    assert paths_of(r) == [("MEMORY.md", 2)]


def test_all_within_lines_keeps_minimal_windows(root: Path) -> None:
    r = memory_search(
        root, SearchQuery(["deploy", "staging"], match_mode="all_within_lines", line_count=3)
    )
    got = [(m.path, m.line, m.end_line) for m in r.matches]
    assert ("skills/a.md", 1, 3) in got
    assert ("MEMORY.md", 2, 2) in got  # both on one line: a one-line window, not also 1-2 or 2-3
    assert all(not (p == "MEMORY.md" and s != e) for p, s, e in got)
    narrow = memory_search(
        root, SearchQuery(["deploy", "staging"], match_mode="all_within_lines", line_count=2)
    )
    assert ("skills/a.md", 1, 3) not in [(m.path, m.line, m.end_line) for m in narrow.matches]


def test_windows_are_minimal() -> None:
    a, b = frozenset({0}), frozenset({1})
    hits = [a, frozenset(), b, a, frozenset(), frozenset(), b]
    assert _windows(hits, 2, 10) == [(0, 2), (2, 3), (3, 6)]
    assert _windows(hits, 2, 2) == [(2, 3)]
    assert _windows([a | b], 2, 1) == [(0, 0)]


def test_all_within_lines_needs_line_count(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="line_count"):
        memory_search(root, SearchQuery(["a", "b"], match_mode="all_within_lines"))


def test_context_lines(root: Path) -> None:
    r = memory_search(root, SearchQuery(["db-1"], context_lines=1))
    m = r.matches[0]
    assert (m.line, m.content_start_line) == (3, 2)
    assert m.content == "Use make deploy for staging.\nThe staging host is db-1.\n"
    assert "2: Use make deploy" in r.to_text() and "3: The staging host" in r.to_text()


def test_context_clamped_at_file_start(root: Path) -> None:
    m = memory_search(root, SearchQuery(["# Deploy"], context_lines=5)).matches[0]
    assert m.content_start_line == 1 and m.content.count("\n") == 5


def test_normalized_ignores_punctuation_case_and_accents(root: Path) -> None:
    (root / "n.md").write_text("Café-Bar opens at 9\nother\n")
    assert memory_search(root, SearchQuery(["cafebar"])).total == 0
    r = memory_search(root, SearchQuery(["CAFE BAR"], normalized=True))
    assert paths_of(r) == [("n.md", 1)]
    assert memory_search(root, SearchQuery(["db1"], normalized=True)).total == 1


def test_normalized_query_without_letters_is_rejected(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="normalization"):
        memory_search(root, SearchQuery(["--"], normalized=True))


def test_unicode_casefold(root: Path) -> None:
    (root / "u.md").write_text("STRASSE\n")
    assert memory_search(root, SearchQuery(["straße"], case_sensitive=False)).total == 1


def test_cursor_paging_is_stable_and_complete(root: Path) -> None:
    (root / "many.md").write_text("hit\n" * 25)
    pages, cursor = [], None
    while True:
        r = memory_search(root, SearchQuery(["hit"], path="many.md", max_results=10, cursor=cursor))
        pages.append([m.line for m in r.matches])
        if r.next_cursor is None:
            assert not r.truncated
            break
        assert r.truncated and r.total == 25
        cursor = r.next_cursor
    assert pages == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    assert memory_search(root, SearchQuery(["hit"], path="many.md", cursor=99)).matches == []


@pytest.mark.parametrize("bad", ["-1", "abc", -3, 1.5, True])
def test_bad_cursor(root: Path, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="cursor"):
        memory_search(root, SearchQuery(["x"], cursor=bad))


def test_path_scope_file_and_folder(root: Path) -> None:
    assert {
        m.path for m in memory_search(root, SearchQuery(["deploy"], path="skills")).matches
    } == {"skills/a.md"}
    assert memory_search(root, SearchQuery(["deploy"], path="skills/a.md")).total == 1
    with pytest.raises(NotFound):
        memory_search(root, SearchQuery(["deploy"], path="nope"))
    with pytest.raises(NotFound):
        memory_search(root, SearchQuery(["deploy"], path=".git"))
    with pytest.raises(InvalidArgument):
        memory_search(root, SearchQuery(["deploy"], path="../x"))


def test_symlinks_are_skipped_in_the_walk_and_refused_as_scope(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text("deploy outside\n")
    os.symlink(elsewhere, root / "linkdir")
    os.symlink(elsewhere / "x.md", root / "link.md")
    assert all(
        "outside" not in m.content for m in memory_search(root, SearchQuery(["deploy"])).matches
    )
    with pytest.raises(Refused):
        memory_search(root, SearchQuery(["deploy"], path="linkdir"))


def test_queries_required_without_time_filter(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="queries"):
        memory_search(root, SearchQuery([]))
    with pytest.raises(InvalidArgument):
        memory_search(root, SearchQuery([""]))


@pytest.mark.parametrize(
    "kw", [{"max_results": 0}, {"max_results": 201}, {"context_lines": -1}, {"match_mode": "x"}]
)
def test_argument_ranges(root: Path, kw: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        memory_search(root, SearchQuery(["x"], **kw))  # type: ignore[arg-type]


# -- time filters -----------------------------------------------------------------------------


def test_time_filter_restricts_to_timestamped_names(root: Path) -> None:
    r = memory_search(root, SearchQuery(["deploy"], since="2027-01-01"))
    assert [m.path for m in r.matches] == [
        "extensions/ad_hoc/notes/2027-01-13T00-00-00-late.md",
        "rollout_summaries/2027-01-10T09-00-00-ab12-fix.md",
    ]


def test_date_only_until_covers_the_whole_day(root: Path) -> None:
    r = memory_search(root, SearchQuery(["Staging"], until="2027-01-12"))
    assert [m.path for m in r.matches] == ["rollout_summaries/2027-01-12T23-59-30-cd34.md"]
    assert memory_search(root, SearchQuery(["Staging"], until="2027-01-12T23:59:00")).total == 0
    assert (
        memory_search(root, SearchQuery(["deploy"], since="2027-01-12", until="2027-01-12")).total
        == 0
    )


def test_datetime_bounds_with_zone(root: Path) -> None:
    # 2027-01-13T00:00:00Z is 2027-01-13T01:00:00+01:00
    assert (
        memory_search(root, SearchQuery(["deploy"], since="2027-01-13T01:00:00+01:00")).total == 1
    )
    assert (
        memory_search(root, SearchQuery(["deploy"], since="2027-01-13T01:00:01+01:00")).total == 0
    )


def test_bad_time_bounds(root: Path) -> None:
    with pytest.raises(InvalidArgument):
        memory_search(root, SearchQuery(["x"], since="yesterday"))
    with pytest.raises(InvalidArgument, match="later"):
        memory_search(root, SearchQuery(["x"], since="2027-02-01", until="2027-01-01"))


def test_parse_bound_forms() -> None:
    day = present(parse_bound("u", "2027-01-15", end=False))
    assert parse_bound("u", "2027-01-15", end=True) == day + 86_400_000 - 1
    assert parse_bound("s", "2027-01-15T00-00-00", end=False) == day
    assert parse_bound("s", "2027-01-15T00:00:00Z", end=False) == day
    assert parse_bound("s", None, end=False) is None


def test_timeline_without_queries_is_chronological_with_first_content_line(root: Path) -> None:
    r = memory_search(root, SearchQuery(since="2027-01-01"))
    assert r.mode == "timeline"
    assert [(m.path, m.line, m.content) for m in r.matches] == [
        ("rollout_summaries/2027-01-10T09-00-00-ab12-fix.md", 4, "Fixed the flaky deploy test."),
        ("rollout_summaries/2027-01-12T23-59-30-cd34.md", 3, "Staging migration notes."),
        ("extensions/ad_hoc/notes/2027-01-13T00-00-00-late.md", 4, "A note about deploy keys."),
    ]
    assert r.matches[0].updated == "2027-01-10T09:00:00Z"
    page = memory_search(root, SearchQuery(until="2027-12-31", max_results=2, cursor="2"))
    assert [m.path for m in page.matches] == ["extensions/ad_hoc/notes/2027-01-13T00-00-00-late.md"]


def test_timeline_scoped_by_path(root: Path) -> None:
    r = memory_search(root, SearchQuery(since="2027-01-01", path="extensions"))
    assert [m.path for m in r.matches] == ["extensions/ad_hoc/notes/2027-01-13T00-00-00-late.md"]


def test_text_rendering(root: Path) -> None:
    text = memory_search(root, SearchQuery(["flaky"])).to_text()
    assert text.startswith("matches 1-1 of 1")
    assert "rollout_summaries/2027-01-10T09-00-00-ab12-fix.md:4" in text
    assert memory_search(root, SearchQuery(["zzz-nothing"])).to_text() == "no matches"


def test_long_lines_are_clipped_in_content(root: Path) -> None:
    (root / "long.md").write_text("needle " + "x" * 10_000 + "\n")
    m = memory_search(root, SearchQuery(["needle"])).matches[0]
    assert len(m.content) < 2100 and m.content.endswith("[…]")


def test_missing_root_searches_nothing(tmp_path: Path) -> None:
    assert memory_search(tmp_path / "absent", SearchQuery(["x"])).total == 0
    assert memory_search(tmp_path / "absent", SearchQuery(since="2027-01-01")).total == 0
    with pytest.raises(NotFound):
        memory_search(tmp_path / "absent", SearchQuery(["x"], path="skills"))


def test_ranked_without_an_index_is_an_error(root: Path) -> None:
    with pytest.raises(InvalidArgument, match="index"):
        memory_search(root, SearchQuery(["deploy"], ranked=True))


def test_results_are_json_serialisable(root: Path) -> None:
    import json

    d = json.loads(
        json.dumps(memory_search(root, SearchQuery(["deploy"], context_lines=1)).to_dict())
    )
    assert d["matches"][0]["path"] == "MEMORY.md" and d["mode"] == "plain"
    assert json.dumps(memory_search(root, SearchQuery(since="2027-01-01")).to_dict())
