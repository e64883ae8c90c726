"""Ranked search: BM25 order, recency ties, relaxation, incremental refresh, outputs, safety."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd.tools.index_refresh as refresh_mod
from memoryd.clock import DAY, ManualClock
from memoryd.folder.guard import WalkEntry, walk_files
from memoryd.folder.layout import RAW_MEMORIES_FILE
from memoryd.paths import bump_change_mark, change_mark_file
from memoryd.store import Store
from memoryd.tools import InvalidArgument, NotFound, SearchIndex, memory_search
from memoryd.tools.chunks import chunk_text
from memoryd.tools.hits import SearchQuery
from memoryd.tools.index import SCHEMA_VERSION, build_match
from memoryd.tools.scope import ALL
from tests.conftest import T0
from tests.narrow import present


def add_output(
    store: Store, sid: str, *, raw: str, summary: str = "", updated: int = T0, title: str = "t"
) -> None:
    claim = store.stage1.claim_stage1(sid, updated, max_running=100, worker_id="test")
    assert claim.claimed
    assert store.stage1.mark_stage1_succeeded(
        sid,
        present(claim.token),
        raw_memory=raw,
        rollout_summary=summary,
        rollout_slug=None,
        cwd="/repo",
        title=title,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "memories"
    (r / "skills").mkdir(parents=True)
    (r / "notes").mkdir()
    return r


@pytest.fixture
def index(tmp_path: Path, root: Path, store: Store) -> Iterator[SearchIndex]:
    idx = SearchIndex(tmp_path / "search.db", root, store)
    yield idx
    idx.close()


def ranked(root: Path, index: SearchIndex, *queries: str, **kw: object):  # type: ignore[no-untyped-def]
    scope = kw.pop("scope", ALL)
    query = SearchQuery(list(queries), ranked=True, **kw)  # type: ignore[arg-type]
    return memory_search(root, query, index=index, scope=scope)  # type: ignore[arg-type]


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# -- ranking ----------------------------------------------------------------------------------


def test_bm25_best_match_first(root: Path, index: SearchIndex) -> None:
    for i in range(8):
        write(root, f"filler{i}.md", f"unrelated note number {i}\n")
    write(
        root,
        "a.md",
        "# Misc\n\n" + "Lots of words about many unrelated things. " * 20 + "kubernetes once.\n",
    )
    write(root, "b.md", "# Cluster\n\nkubernetes kubernetes upgrade of the kubernetes cluster\n")
    r = ranked(root, index, "kubernetes")
    assert [m.path for m in r.matches] == ["b.md", "a.md"]
    assert r.matches[0].score > r.matches[1].score and r.strategy == "strict"
    assert (
        r.mode == "ranked"
        and r.matches[0].line == 1
        and r.matches[0].matched_queries == ["kubernetes"]
    )


def test_bm25_still_orders_when_a_term_is_everywhere(root: Path, index: SearchIndex) -> None:
    # FTS5 clamps a non-positive idf to 1e-6; term frequency and length must still decide.
    write(root, "a.md", "Lots of words about many unrelated things and yaks. " * 10 + "\n")
    write(root, "b.md", "yaks yaks yaks\n")
    assert [m.path for m in ranked(root, index, "yaks").matches] == ["b.md", "a.md"]


def test_heading_and_path_weigh_more(root: Path, index: SearchIndex) -> None:
    write(root, "skills/deploy/SKILL.md", "How we ship the service to production safely.\n")
    write(
        root, "other.md", "Once we talked about deploy in passing, among many other words here.\n"
    )
    assert ranked(root, index, "deploy").matches[0].path == "skills/deploy/SKILL.md"


def test_ties_newest_first(root: Path, index: SearchIndex) -> None:
    for stamp in ("2027-01-10T08-00-00", "2027-01-12T08-00-00", "2027-01-11T08-00-00"):
        write(root, f"notes/{stamp}-n.md", "identical text about flamingos\n")
    r = ranked(root, index, "flamingos")
    assert [m.path[6:16] for m in r.matches] == ["2027-01-12", "2027-01-11", "2027-01-10"]


def test_ties_among_outputs_newest_first(root: Path, index: SearchIndex, store: Store) -> None:
    add_output(store, "ses_old", raw="the gizmo needs calibration", updated=T0 - 2 * DAY)
    add_output(store, "ses_new", raw="the gizmo needs calibration", updated=T0 - DAY)
    r = ranked(root, index, "gizmo")
    assert [m.session_id for m in r.matches] == ["ses_new", "ses_old"]


def test_prefix_retry_when_strict_finds_nothing(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "we deployed yesterday\n")
    r = ranked(root, index, "deploy")
    assert r.strategy == "prefix" and r.total == 1
    assert "relaxed to prefix" in r.to_text()


def test_any_term_fallback_only_for_any_mode(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "staging runs on db-1\n")
    r = ranked(root, index, "where does staging live unicorn")
    assert r.strategy == "any_term" and r.total == 1
    assert ranked(root, index, "staging unicorn", match_mode="all_on_same_line").total == 0


def test_all_modes_require_every_query(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "alpha only\n")
    write(root, "b.md", "alpha and beta\n")
    r = ranked(root, index, "alpha", "beta", match_mode="all_within_lines", line_count=5)
    assert [m.path for m in r.matches] == ["b.md"]
    assert {m.path for m in ranked(root, index, "alpha", "beta").matches} == {"a.md", "b.md"}


@pytest.mark.parametrize(
    "query",
    [
        '"',
        'say "hi',
        "-x",
        "a - b",
        "AND",
        "OR NOT",
        "NEAR(a b)",
        "col:x",
        "*",
        "(",
        "x)",
        "^start",
        "a+b",
    ],
)
def test_user_text_never_breaks_fts_syntax(root: Path, index: SearchIndex, query: str) -> None:
    write(root, "a.md", "and or not near col start x a b hi say\n")
    try:
        r = ranked(root, index, query)
    except (
        InvalidArgument
    ) as exc:  # nothing searchable in it: a clear error, never an FTS5 syntax error
        assert "word" in str(exc)
    else:
        assert r.total >= 1


def test_query_without_words_is_rejected(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "x\n")
    with pytest.raises(InvalidArgument, match="word"):
        ranked(root, index, "--- ???")


def test_build_match_quotes_everything() -> None:
    assert (
        build_match(['say "hi" AND'], match_mode="any", stage="strict")
        == '("say" AND "hi" AND "AND")'
    )
    assert (
        build_match(["a b", "c"], match_mode="all_on_same_line", stage="prefix")
        == '("a"* AND "b"*) AND ("c"*)'
    )
    assert build_match(["a b", "b"], match_mode="any", stage="any_term") == '"a"* OR "b"*'


def test_paging_and_path_scope(root: Path, index: SearchIndex) -> None:
    for i in range(5):
        write(root, f"skills/s{i}.md", f"widget {i}\n")
    write(root, "top.md", "widget top\n")
    first = ranked(root, index, "widget", max_results=4)
    second = ranked(root, index, "widget", max_results=4, cursor=first.next_cursor)
    assert first.total == 6 and first.truncated and second.next_cursor is None
    assert len({(m.path, m.line) for m in first.matches + second.matches}) == 6
    scoped = ranked(root, index, "widget", path="skills")
    assert scoped.total == 5 and all(m.path.startswith("skills/") for m in scoped.matches)
    with pytest.raises(NotFound):
        ranked(root, index, "widget", path="missing")


def test_time_window_covers_named_files_and_outputs(
    root: Path, index: SearchIndex, store: Store
) -> None:
    write(root, "notes/2027-01-10T08-00-00-a.md", "otter facts\n")
    write(root, "plain.md", "otter facts\n")
    add_output(store, "ses_1", raw="otter facts", updated=T0)  # 2027-01-15T08:00:00Z
    assert ranked(root, index, "otter").total == 3
    r = ranked(root, index, "otter", until="2027-01-10")
    assert [m.path for m in r.matches] == ["notes/2027-01-10T08-00-00-a.md"]
    r = ranked(root, index, "otter", since="2027-01-15")
    assert [m.session_id for m in r.matches] == ["ses_1"]


# -- incremental refresh ----------------------------------------------------------------------


def test_incremental_refresh_reindexes_only_the_touched_file(
    root: Path, index: SearchIndex
) -> None:
    for i in range(10):
        write(root, f"f{i}.md", f"# File {i}\n\ncontent {i}\n")
    first = index.refresh()
    assert (first.files_indexed, first.files_unchanged) == (10, 0)
    again = index.refresh()
    assert (again.files_indexed, again.files_unchanged, again.changed) == (0, 10, False)
    st = os.stat(root / "f3.md")
    os.utime(root / "f3.md", ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000))
    bump_change_mark(root)  # an in-place edit is announced by its writer
    third = index.refresh()
    assert (third.files_indexed, third.files_unchanged, third.files_removed) == (1, 9, 0)


def age(root: Path, seconds: float = 5.0) -> None:
    """Move every folder's (and the mark's) times into the past: no longer racily recent."""
    then = time.time_ns() - int(seconds * 1e9)
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(d, ns=(then, then))
    mark = change_mark_file(root)
    if mark.exists():
        os.utime(mark, ns=(then, then))


def test_unchanged_watermark_answers_without_walking(
    root: Path, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        write(root, f"sub/f{i}.md", f"otter {i}\n")
    age(root)
    assert index.refresh().files_indexed == 5
    walked: list[int] = []

    def walk(root: Path, relpath: str | None = None) -> Iterator[WalkEntry]:
        walked.append(1)
        return walk_files(root, relpath)

    monkeypatch.setattr(refresh_mod, "walk_files", walk)
    hit = index.refresh()
    assert hit.watermark_hit and walked == []
    # an atomic replace (rename) changes its folder's mtime: noticed without any mark
    tmp = root / "sub" / ".f1.tmp"
    tmp.write_text("beaver\n")
    os.replace(tmp, root / "sub" / "f1.md")
    st = index.refresh()
    assert not st.watermark_hit and st.files_indexed == 1 and walked
    assert ranked(root, index, "beaver").total == 1
    # an unannounced in-place edit waits for the periodic full check
    age(root)
    index.refresh()
    (root / "sub" / "f2.md").write_text("walrus\n")  # in place: no folder time changes
    assert ranked(root, index, "walrus").total == 0
    monkeypatch.setattr(refresh_mod, "INDEX_FULL_CHECK_S", 0)
    assert ranked(root, index, "walrus").total == 1


def _count_signature_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item for every read of the outputs' signatures from now on."""
    read: list[int] = []
    real = store.outputs.enabled_signatures

    def counting() -> list[tuple[str, int, int, str | None, str | None]]:
        read.append(1)
        return real()

    monkeypatch.setattr(store.outputs, "enabled_signatures", counting)
    return read


def test_a_file_change_does_not_compare_every_output(
    root: Path, index: SearchIndex, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the outputs' aggregate stands, a changed file re-indexes that file alone: the
    outputs' signatures (one row per session, ~50 ms at 10,000) are not read. A changed output
    and the periodic full check still compare them all."""
    for i in range(3):
        add_output(store, f"ses_{i}", raw=f"lemur {i}")
    write(root, "a.md", "lemur notes\n")
    age(root)
    assert ranked(root, index, "lemur").total == 4
    read = _count_signature_reads(store, monkeypatch)
    write(root, "a.md", "lemur and gecko notes\n")
    age(root)
    r = ranked(root, index, "gecko")
    assert r.total == 1 and r.refresh["files_indexed"] == 1 and read == []
    add_output(store, "ses_9", raw="gecko too")
    r = ranked(root, index, "gecko")
    assert r.total == 2 and r.refresh["outputs_indexed"] == 1 and len(read) == 1
    write(root, "a.md", "lemur, gecko and ibis notes\n")
    age(root)
    monkeypatch.setattr(refresh_mod, "INDEX_FULL_CHECK_S", 0)  # the full check is due
    r = ranked(root, index, "ibis")
    assert r.total == 1 and len(read) == 2


def test_outputs_are_compared_on_their_own_period_however_often_files_change(
    root: Path, index: SearchIndex, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a blind review: a folder that changes more often than the full-check period
    kept refreshing ``checked_at``, so the outputs were never compared again. They have their
    own time: once it is past, the next refresh compares them whatever else changed."""
    add_output(store, "ses_1", raw="lemur")
    write(root, "a.md", "one\n")
    age(root)
    index.refresh()
    read = _count_signature_reads(store, monkeypatch)
    for i in range(3):  # files change often, each refresh is recent
        write(root, "a.md", f"change {i}\n")
        age(root)
        index.refresh()
    assert read == []
    index._conn.execute(  # the outputs' last comparison is older than the period
        "UPDATE meta SET value = ? WHERE key = 'outputs_checked_at'", (repr(time.time() - 10**6),)
    )
    write(root, "a.md", "change again\n")
    age(root)
    index.refresh()
    assert read == [1]


def test_an_aggregate_read_while_memory_db_moved_is_not_trusted(
    root: Path, index: SearchIndex, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The aggregate is read before the outputs: if memory.db changes in between, the index may
    hold a state the stored aggregate does not describe (a mode flipped and flipped back). Such
    an aggregate is not kept, so the next refresh compares every output."""
    add_output(store, "ses_1", raw="lemur")
    write(root, "a.md", "one\n")
    age(root)
    index.refresh()
    real = store.outputs.enabled_signatures

    def racing() -> list[tuple[str, int, int, str | None, str | None]]:
        rows = real()
        store.outputs.set_mode("ses_1", "polluted")  # lands while the refresh reads
        return rows

    monkeypatch.setattr(store.outputs, "enabled_signatures", racing)
    add_output(store, "ses_2", raw="gecko")
    index.refresh()
    assert index._meta("outputs_mark") == ""
    monkeypatch.setattr(store.outputs, "enabled_signatures", real)
    write(root, "a.md", "two\n")
    age(root)
    assert ranked(root, index, "lemur").total == 0  # compared again: the polluted one is gone


def test_a_racily_recent_change_is_never_trusted(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "heron\n")
    index.refresh()
    assert not index.refresh().watermark_hit  # the folder changed within the last second


def test_query_reports_its_refresh(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "zebra\n")
    assert ranked(root, index, "zebra").refresh["files_indexed"] == 1
    assert ranked(root, index, "zebra").refresh["files_indexed"] == 0


def test_edited_file_drops_old_words(root: Path, index: SearchIndex) -> None:
    p = write(root, "a.md", "the old password rotation rule\n")
    assert ranked(root, index, "rotation").total == 1
    p.write_text("a completely new text about llamas, longer than before\n")
    bump_change_mark(root)
    assert ranked(root, index, "rotation").total == 0
    assert ranked(root, index, "llamas").total == 1


def test_deleted_file_leaves_no_stale_hits(root: Path, index: SearchIndex, tmp_path: Path) -> None:
    write(root, "gone.md", "ephemeral-marker-xyzzy\n")
    write(root, "stays.md", "something else\n")
    assert ranked(root, index, "xyzzy").total == 1
    (root / "gone.md").unlink()
    r = ranked(root, index, "xyzzy")
    assert r.total == 0 and r.refresh["files_removed"] == 1
    conn = sqlite3.connect(tmp_path / "search.db")
    assert (
        conn.execute("SELECT count(*) FROM fts").fetchone()[0]
        == conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    )
    assert conn.execute("SELECT count(*) FROM docs WHERE key = 'gone.md'").fetchone()[0] == 0
    conn.close()


def test_forgotten_text_does_not_linger_in_the_index_file(
    root: Path, store: Store, tmp_path: Path
) -> None:
    idx = SearchIndex(tmp_path / "s.db", root, store)
    write(root, "a.md", "uniquemarkerqwertyuiop lives here\n")
    idx.refresh()
    (root / "a.md").unlink()
    idx.refresh()
    idx.close()
    data = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert b"uniquemarkerqwertyuiop" not in data


def test_hidden_symlinked_binary_and_diff_files_are_not_indexed(
    root: Path, index: SearchIndex, tmp_path: Path
) -> None:
    (tmp_path / "out.md").write_text("sekrit outside\n")
    os.symlink(tmp_path / "out.md", root / "link.md")
    write(root, ".hidden.md", "sekrit hidden\n")
    write(root, "phase2_workspace_diff.md", "sekrit diff\n")
    (root / "bin.dat").write_bytes(b"sekrit\x00binary")
    assert ranked(root, index, "sekrit").total == 0


def test_two_indexes_on_one_file_share_the_work(root: Path, store: Store, tmp_path: Path) -> None:
    write(root, "a.md", "shared pelican\n")
    one = SearchIndex(tmp_path / "shared.db", root, store)
    two = SearchIndex(tmp_path / "shared.db", root, store)
    try:
        assert one.refresh().files_indexed == 1
        assert two.refresh().files_indexed == 0
        assert ranked(root, two, "pelican").total == 1
    finally:
        one.close()
        two.close()


def test_rebuilds_for_another_root_or_schema(root: Path, store: Store, tmp_path: Path) -> None:
    write(root, "a.md", "heron\n")
    db = tmp_path / "x.db"
    with SearchIndex(db, root, store) as idx:
        idx.refresh()
    other = tmp_path / "other"
    other.mkdir()
    with SearchIndex(db, other, store) as idx:
        assert ranked(other, idx, "heron").total == 0
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 7}")
    conn.close()
    with SearchIndex(db, root, store) as idx:
        assert idx.refresh().files_indexed == 1


def test_corrupt_index_file_is_rebuilt(root: Path, store: Store, tmp_path: Path) -> None:
    write(root, "a.md", "egret\n")
    db = tmp_path / "bad.db"
    db.write_bytes(b"this is not sqlite at all" * 100)
    with SearchIndex(db, root, store) as idx:
        assert ranked(root, idx, "egret").total == 1


def test_missing_root_is_empty(tmp_path: Path, store: Store) -> None:
    with SearchIndex(tmp_path / "e.db", tmp_path / "nothing", store) as idx:
        assert idx.refresh().files_seen == 0


def test_clear(root: Path, index: SearchIndex) -> None:
    write(root, "a.md", "ibis\n")
    index.refresh()
    index.clear()
    assert index.refresh().files_indexed == 1


# -- stage-1 outputs --------------------------------------------------------------------------


def test_outputs_are_indexed_with_session_ids(root: Path, index: SearchIndex, store: Store) -> None:
    add_output(
        store,
        "ses_a",
        raw="- prefers tabs in Makefiles",
        summary="## Work\nFixed the Makefile tabs issue",
    )
    r = ranked(root, index, "tabs")
    assert {(m.session_id, m.kind, m.path) for m in r.matches} == {
        ("ses_a", "raw_memory", ""),
        ("ses_a", "rollout_summary", ""),
    }
    assert "session ses_a" in r.to_text()
    assert r.refresh["outputs_indexed"] == 1


def test_output_renders_are_not_indexed_twice(root: Path, index: SearchIndex, store: Store) -> None:
    add_output(store, "ses_a", raw="capybara memory")
    write(root, RAW_MEMORIES_FILE, "## Session ses_a\ncapybara memory\n")
    write(
        root,
        "rollout_summaries/2027-01-15T08-00-00-ab12.md",
        "session_id: ses_a\n\ncapybara memory\n",
    )
    r = ranked(root, index, "capybara")
    assert [m.session_id for m in r.matches] == ["ses_a"]
    scoped = ranked(root, index, "capybara", path="rollout_summaries/2027-01-15T08-00-00-ab12.md")
    assert [m.session_id for m in scoped.matches] == ["ses_a"]


def test_without_a_store_renders_are_plain_files(root: Path, tmp_path: Path) -> None:
    write(root, RAW_MEMORIES_FILE, "capybara memory\n")
    with SearchIndex(tmp_path / "n.db", root) as idx:
        assert [m.path for m in ranked(root, idx, "capybara").matches] == [RAW_MEMORIES_FILE]


def test_disabled_and_forgotten_sessions_leave_the_index(
    root: Path, index: SearchIndex, store: Store
) -> None:
    add_output(store, "ses_a", raw="quokka one")
    add_output(store, "ses_b", raw="quokka two")
    assert ranked(root, index, "quokka").total == 2
    store.outputs.set_mode("ses_a", "polluted")
    r = ranked(root, index, "quokka")
    assert [m.session_id for m in r.matches] == ["ses_b"] and r.refresh["outputs_removed"] == 1
    store.outputs.delete_session_memory("ses_b")
    assert ranked(root, index, "quokka").total == 0


def test_reextracted_output_is_reindexed(
    root: Path, index: SearchIndex, store: Store, clock: ManualClock
) -> None:
    add_output(store, "ses_a", raw="first version mentions walrus", updated=T0 - DAY)
    assert ranked(root, index, "walrus").total == 1
    clock.advance(1000)
    add_output(store, "ses_a", raw="second version mentions narwhal", updated=T0)
    assert ranked(root, index, "walrus").total == 0
    assert (
        ranked(root, index, "narwhal").refresh["outputs_indexed"] == 0
    )  # already picked up by the previous query


# -- chunking ---------------------------------------------------------------------------------


def test_chunks_follow_headings_and_skip_fenced_hashes() -> None:
    text = "intro line\n\n# One\nbody one\n\n```\n# not a heading\n```\n## Two\nbody two\n\n\n"
    chunks = chunk_text(text)
    assert [(c.start_line, c.end_line, c.heading) for c in chunks] == [
        (1, 1, ""),
        (3, 8, "One"),
        (9, 10, "Two"),
    ]
    assert chunks[1].body.endswith("```")


def test_long_sections_split_on_paragraphs_then_lines() -> None:
    para = ("word " * 30).strip()  # 149 chars
    text = "# H\n" + "\n\n".join([para] * 12) + "\n"
    chunks = chunk_text(text)
    assert len(chunks) > 1 and all(len(c.body) <= 1500 for c in chunks)
    assert all(c.heading == "H" for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == text.count("\n")
    lines = chunk_text("x" * 1000 + "\n" + "y" * 1000 + "\n")
    assert [(c.start_line, c.end_line) for c in lines] == [(1, 1), (2, 2)]


def test_concurrent_queries_from_threads(root: Path, index: SearchIndex) -> None:
    from concurrent.futures import ThreadPoolExecutor

    for i in range(20):
        write(root, f"t{i}.md", f"marmot number {i}\n")

    def query() -> None:
        for _ in range(10):
            assert ranked(root, index, "marmot").total >= 20

    def edit() -> None:
        for i in range(10):
            write(root, f"new{i}.md", f"marmot extra {i}\n")

    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = [pool.submit(query) for _ in range(4)] + [pool.submit(edit)]
        for f in futures:
            f.result()  # re-raises anything a thread hit
    assert ranked(root, index, "marmot").total == 30


def test_ranked_results_are_json_serialisable(root: Path, index: SearchIndex, store: Store) -> None:
    import json

    write(root, "a.md", "stoat\n")
    add_output(store, "ses_s", raw="stoat memory")
    d = json.loads(json.dumps(ranked(root, index, "stoat").to_dict()))
    assert {m["session_id"] for m in d["matches"]} == {None, "ses_s"} and d["refresh"][
        "outputs_indexed"
    ] == 1


def test_a_new_output_walks_the_folder_once(
    root: Path, index: SearchIndex, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a review: when the outputs' aggregate moved the refresh surely writes, yet it
    walked the folder once to probe and once more to sync (after every extracted session)."""
    write(root, "a.md", "lemur notes\n")
    add_output(store, "ses_1", raw="lemur")
    age(root)
    index.refresh()
    walked: list[int] = []

    def walk(root: Path, relpath: str | None = None) -> Iterator[WalkEntry]:
        walked.append(1)
        return walk_files(root, relpath)

    monkeypatch.setattr(refresh_mod, "walk_files", walk)
    add_output(store, "ses_2", raw="gecko")
    r = ranked(root, index, "gecko")
    assert r.total == 1 and r.refresh["outputs_indexed"] == 1
    assert len(walked) == 1


def test_a_check_time_from_the_future_does_not_put_off_the_full_check(
    root: Path, index: SearchIndex
) -> None:
    """A clock set back makes the stored check times lie in the future; they must not count as
    recent, or an unannounced edit would wait until the clock caught up."""
    write(root, "a.md", "otter\n")
    age(root)
    index.refresh()
    with index._write() as c:
        c.execute(
            "UPDATE meta SET value = ? WHERE key IN ('checked_at', 'outputs_checked_at')",
            (repr(time.time() + 86_400),),
        )
    (root / "a.md").write_text("walrus\n")  # in place: no folder time changes
    assert ranked(root, index, "walrus").total == 1
