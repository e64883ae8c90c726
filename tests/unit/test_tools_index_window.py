"""Issue 16: ranked search with bounded work (a scored window, a capped count) and project
filtering that reads no outputs per query."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import memoryd.tools.index as index_mod
import memoryd.tools.index_refresh as refresh_mod
from memoryd.clock import DAY, ManualClock
from memoryd.paths import Paths, bump_change_mark
from memoryd.scopes import scope_key
from memoryd.store import Store
from memoryd.tools import SearchIndex, memory_search
from memoryd.tools.index_refresh import OUTPUT_SIGS_SQL, OUTPUTS_MARK_SQL
from memoryd.tools.scope import ALL, Scope
from tests.conftest import T0

A, B = scope_key("/srv/a"), scope_key("/srv/b")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "memories"
    r.mkdir()
    return r


@pytest.fixture
def index(tmp_path: Path, root: Path, store: Store) -> SearchIndex:
    idx = SearchIndex(tmp_path / "search.db", root, store)
    yield idx
    idx.close()


def ranked(root: Path, index: SearchIndex, *queries: str, **kw: object):  # type: ignore[no-untyped-def]
    return memory_search(root, list(queries), ranked=True, index=index, **kw)  # type: ignore[arg-type]


def note(root: Path, rel: str, text: str, *, age_days: float) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    then = time.time_ns() - int(age_days * DAY * 1_000_000)
    os.utime(p, ns=(then, then))


def add_output(
    store: Store, sid: str, raw: str, *, worktree: str | None, updated: int = T0
) -> None:
    claim = store.claim_stage1(sid, updated, max_running=100, worker_id="test")
    assert claim.claimed
    assert store.mark_stage1_succeeded(
        sid,
        claim.token,
        raw_memory=raw,
        rollout_summary="",
        rollout_slug=None,
        cwd=worktree,
        title="t",
        worktree=worktree,
    )


# -- the scored window ---------------------------------------------------------------------------


def test_a_frequent_word_scores_only_the_newest_window_and_says_so(
    root: Path, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "RANKED_WINDOW", 3)
    # Written in name order a..f, but f is the oldest: the window follows time, not the walk.
    for i, name in enumerate("abcdef"):
        body = "otter " * (6 - i) + "and many more words to pad the line out a little"
        note(root, f"{name}.md", body + "\n", age_days=1 + i)
    r = ranked(root, index, "otter", max_results=2)
    assert r.total == 3 and r.total_capped
    assert [m.path for m in r.matches] == ["a.md", "b.md"]  # most otters first, within the window
    text = r.to_text()
    assert "of 3+" in text and "most recently indexed" in text
    rest = ranked(root, index, "otter", max_results=2, cursor=r.next_cursor)
    assert [m.path for m in rest.matches] == ["c.md"] and rest.next_cursor is None
    # at or under the window nothing is capped: the count is exact and every hit is ranked
    monkeypatch.setattr(index_mod, "RANKED_WINDOW", 6)
    r = ranked(root, index, "otter")
    assert r.total == 6 and not r.total_capped and r.matches[-1].path == "f.md"
    assert "+" not in r.to_text().split("\n", 1)[0]


def test_the_window_holds_what_changed_last(
    root: Path, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_mod, "RANKED_WINDOW", 2)
    for name, days in (("old.md", 9), ("mid.md", 5), ("new.md", 1)):
        note(root, name, "heron sighting\n", age_days=days)
    assert {m.path for m in ranked(root, index, "heron").matches} == {"mid.md", "new.md"}
    note(root, "old.md", "heron sighting again\n", age_days=0.5)  # edited: re-indexed last
    assert {m.path for m in ranked(root, index, "heron").matches} == {"new.md", "old.md"}


def test_the_first_build_indexes_oldest_first(root: Path, index: SearchIndex, store: Store) -> None:
    note(root, "a.md", "x\n", age_days=0)
    at = (T0 - DAY) * 1_000_000
    os.utime(root / "a.md", ns=(at, at))
    note(root, "notes/2020-01-01T00-00-00-n.md", "x\n", age_days=0)  # named: its name is its time
    add_output(store, "ses_mid", "x", worktree=None, updated=T0 - 3 * DAY)
    index.refresh()
    conn = sqlite3.connect(index.db_path)
    keys = [
        r[0]
        for r in conn.execute(
            "SELECT d.key FROM chunks c JOIN docs d ON d.id = c.doc_id ORDER BY c.id"
        )
    ]
    conn.close()
    assert keys == ["notes/2020-01-01T00-00-00-n.md", "ses_mid", "a.md"]


# -- projects ------------------------------------------------------------------------------------


def test_outputs_are_filtered_by_project_without_listing_them(
    root: Path, index: SearchIndex, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_output(store, "ses_a", "pelican in a", worktree="/srv/a")
    add_output(store, "ses_b", "pelican in b", worktree="/srv/b")
    add_output(store, "ses_g", "pelican unplaced", worktree=None)
    note(root, f"projects/{A}/n.md", "pelican note a\n", age_days=1)
    note(root, f"projects/{B}/n.md", "pelican note b\n", age_days=1)
    monkeypatch.setattr(
        Store, "outputs", lambda self: pytest.fail("a ranked query listed every output")
    )

    def seen(scope: Scope) -> set[str]:
        return {m.session_id or m.path for m in ranked(root, index, "pelican", scope=scope).matches}

    assert seen(Scope("project", A)) == {"ses_a", "ses_g", f"projects/{A}/n.md"}
    assert seen(Scope("global", A)) == {"ses_g"}
    assert seen(Scope("project", None)) == {"ses_g"}
    assert seen(ALL) == {"ses_a", "ses_b", "ses_g", f"projects/{A}/n.md", f"projects/{B}/n.md"}


def test_a_backfilled_project_leaves_other_projects_at_the_next_query(
    root: Path, index: SearchIndex, store: Store
) -> None:
    add_output(store, "ses_x", "ibis sighting", worktree=None)
    then = time.time_ns() - 5_000_000_000
    os.utime(root, ns=(then, then))  # an old folder: the watermark, not a walk, answers
    assert {
        m.session_id for m in ranked(root, index, "ibis", scope=Scope("project", A)).matches
    } == {"ses_x"}
    assert index.refresh().watermark_hit
    assert store.backfill_projects({"ses_x": ("prj_b", "/srv/b")}) == 1
    r = ranked(root, index, "ibis", scope=Scope("project", A))
    assert r.total == 0 and not r.refresh["watermark_hit"]
    assert [
        m.session_id for m in ranked(root, index, "ibis", scope=Scope("project", B)).matches
    ] == ["ses_x"]


def test_the_watermark_reads_the_outputs_index_not_their_text(store: Store) -> None:
    for sql in (OUTPUTS_MARK_SQL, OUTPUT_SIGS_SQL):
        plan = " ".join(str(r[3]) for r in store._conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "COVERING INDEX idx_stage1_outputs_version" in plan, plan


def test_a_large_refresh_optimises_the_fts_index_a_small_one_does_not(
    root: Path, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(refresh_mod, "INDEX_OPTIMIZE_ADDED", 3)
    statements: list[str] = []
    index._conn.set_trace_callback(statements.append)
    for i in range(3):
        note(root, f"n{i}.md", f"stork {i}\n", age_days=1)
    assert index.refresh().chunks_added == 3
    assert any("'optimize'" in s for s in statements)
    statements.clear()
    note(root, "n9.md", "stork 9\n", age_days=1)
    assert index.refresh().chunks_added == 1
    assert not any("'optimize'" in s for s in statements)


# -- the tool process ----------------------------------------------------------------------------


def test_a_tool_call_skips_the_integrity_check_the_daemon_runs(
    paths: Paths, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.tools import host

    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args: Any, **kw: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kw)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    paths.ensure_dir(paths.memories)
    (paths.memories / "a.md").write_text("crane spotted\n")
    assert "crane spotted" in host.call(paths, clock, "memory_search", {"query": "crane"})
    assert statements and not any("quick_check" in s for s in statements)
    Store(paths.db, clock=clock).close()  # the daemon's (and the CLI's) open still checks
    assert any("quick_check" in s for s in statements)


def test_the_tool_process_loads_no_redactor() -> None:
    """Its patterns cost ~40 ms to load in a process that only searches or reads (issue 16)."""
    probe = (
        "import sys\n"
        "from memoryd.tools.host import main\n"
        "print(sorted(m for m in sys.modules if m.startswith('memoryd.redact')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_the_outputs_aggregate_is_read_again_only_after_a_commit(
    root: Path, index: SearchIndex, store: Store, paths: Paths, clock: ManualClock
) -> None:
    add_output(store, "ses_1", "egret one", worktree=None)
    then = time.time_ns() - 5_000_000_000
    os.utime(root, ns=(then, then))
    assert ranked(root, index, "egret").total == 1
    reads: list[str] = []
    store._conn.set_trace_callback(lambda s: reads.append(s) if "TOTAL(" in s else None)
    assert index.refresh().watermark_hit and ranked(root, index, "egret").total == 1
    assert reads == []  # nothing committed: the aggregate was not read again
    add_output(store, "ses_2", "egret two", worktree=None)  # this connection commits
    assert ranked(root, index, "egret").total == 2 and len(reads) >= 1
    other = Store(paths.db, clock=clock)  # another connection (another process) commits
    try:
        other.set_mode("ses_1", "disabled")
    finally:
        other.close()
    r = ranked(root, index, "egret")
    assert [m.session_id for m in r.matches] == ["ses_2"]


def test_more_words_score_a_smaller_window(
    root: Path, index: SearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 costs per chunk *and* word: two words get half the window, never under a quarter."""
    monkeypatch.setattr(index_mod, "RANKED_WINDOW", 8)
    for i in range(10):
        note(root, f"n{i}.md", "grebe plover dunlin knot\n", age_days=10 - i)
    assert ranked(root, index, "grebe").total == 8
    two = ranked(root, index, "grebe plover")
    assert two.total == 4 and two.total_capped
    assert {m.path for m in two.matches} == {"n6.md", "n7.md", "n8.md", "n9.md"}  # the newest
    assert ranked(root, index, "grebe plover dunlin knot").total == 2
    assert ranked(root, index, "grebe", "plover", "dunlin", "knot", "a b c d").total == 2


def test_an_edit_that_only_adds_words_re_indexes_without_optimising(
    root: Path, index: SearchIndex
) -> None:
    statements: list[str] = []
    note(root, "MEMORY.md", "- the staging deploy needs a flag\n", age_days=1)
    index.refresh()
    index._conn.set_trace_callback(statements.append)
    note(
        root,
        "MEMORY.md",
        "- the staging deploy needs a flag\n- the canary deploy waits an hour\n",
        age_days=0.5,
    )
    bump_change_mark(root)
    stats = index.refresh()
    assert stats.files_indexed == 1 and stats.chunks_removed >= 1
    assert not stats.words_left
    assert not any("'optimize'" in s for s in statements)
    assert [m.path for m in ranked(root, index, "canary").matches] == ["MEMORY.md"]


def test_an_edit_that_takes_a_word_out_scrubs_it_from_the_file(
    root: Path, store: Store, tmp_path: Path
) -> None:
    idx = SearchIndex(tmp_path / "s.db", root, store)
    note(
        root, "MEMORY.md", "- rotate the zanzibarquux key monthly\n- keep notes short\n", age_days=1
    )
    idx.refresh()
    note(root, "MEMORY.md", "- rotate the key monthly\n- keep notes short\n", age_days=1)
    bump_change_mark(root)
    stats = idx.refresh()
    assert stats.words_left
    idx.close()
    data = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert b"zanzibarquux" not in data
