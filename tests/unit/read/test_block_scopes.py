"""The scoped block, scoped tools, and compaction as a save point."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memoryd import redact as redaction
from memoryd import tokenizer as tokens
from memoryd.clock import HOUR, MINUTE, ManualClock
from memoryd.errors import NotFound, Refused
from memoryd.folder.validated import ValidatedMemory
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.read import block as readpath
from memoryd.scopes import scope_key
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.tools import memory_add_note, memory_forget, memory_list, memory_read, memory_search
from memoryd.tools.admin import memory_reset
from memoryd.tools.hits import SearchQuery
from memoryd.tools.scope import ALL, Scope
from memoryd.tuning import BLOCK_TOKEN_BUDGET
from memoryd.write.phase1 import Phase1
from tests.fakehost import FakeOpencode
from tests.narrow import present

A, B, C = scope_key("/srv/a"), scope_key("/srv/b"), scope_key("/srv/c")


def _layers(paths: Paths, global_text: str, **projects: str) -> None:
    """Write the layers into the folder and record them as validated (what the read path shows)."""
    root = paths.memories
    root.mkdir(parents=True, exist_ok=True)
    files = {"memory_summary.md": f"v1\n{global_text}\n".encode()}
    for key, text in projects.items():
        folder = root / "projects" / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "project.md").write_text(f"# Project {key}\n")
        files[f"projects/{key}/memory_summary.md"] = f"v1\n{text}\n".encode()
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    ValidatedMemory(paths).record(files, source="test")


# -- the block ---------------------------------------------------------------------------------


def test_a_project_block_holds_global_and_its_own_layer_only(paths: Paths) -> None:
    _layers(
        paths,
        "- GLOBAL: prefers short answers",
        **{A: "- A-FACT: uses pnpm", B: "- B-FACT: uses poetry"},
    )
    block_a = readpath.render_block(paths, A)
    assert block_a is not None
    assert "GLOBAL" in block_a and "A-FACT" in block_a and "B-FACT" not in block_a
    assert f"projects/{A}/" in block_a
    assert readpath.render_block(paths, A) == block_a  # deterministic
    # a project without a layer gets exactly the global-only block
    assert readpath.render_block(paths, C) == readpath.render_block(paths)
    assert "A-FACT" not in (readpath.render_block(paths) or "")


def test_layers_that_fit_are_never_sent_to_be_truncated(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every block of a 50-project home asked the tokenizer helper to "truncate" both
    # layers to exactly their own size; a layer within its share is shown as it is.
    _layers(paths, "- GLOBAL: prefers short answers", **{A: "- A-FACT: uses pnpm"})
    asked: list[int] = []
    real = tokens.truncate_middle

    def spy(text: str, max_tokens: int) -> str:
        asked.append(max_tokens)
        return real(text, max_tokens)

    monkeypatch.setattr(tokens, "truncate_middle", spy)
    block = readpath.render_block(paths, A)
    assert block is not None and "GLOBAL: prefers short answers" in block
    assert "A-FACT: uses pnpm" in block and "omitted from the middle" not in block
    assert asked == []
    long_a = "\n".join(f"- project fact {i} about the build" for i in range(600))
    _layers(paths, "- GLOBAL: prefers short answers", **{A: long_a})
    block = readpath.render_block(paths, A)
    assert block is not None and asked  # a layer over its share is still cut
    assert tokens.count(block) <= BLOCK_TOKEN_BUDGET


def test_both_layers_share_the_one_budget(paths: Paths) -> None:
    long_global = "\n".join(f"- global fact {i} about editors and shells" for i in range(600))
    long_a = "\n".join(f"- project fact {i} about the build" for i in range(600))
    _layers(paths, long_global, **{A: long_a})
    block = readpath.render_block(paths, A)
    assert block is not None and tokens.count(block) <= BLOCK_TOKEN_BUDGET
    assert "global fact 0 " in block and "project fact 0 " in block  # both heads kept
    assert "global fact 599" in block and "project fact 599" in block  # and both tails


def test_sync_renders_a_block_for_every_known_project_and_stays_quiet(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readpath, "RACY_WINDOW_NS", 0)
    settings = Settings()
    _layers(paths, "- GLOBAL", **{A: "- A-FACT"})
    paths.ensure_dir(paths.readpath_seen)
    (paths.readpath_seen / C).write_text("/srv/c\n")  # announced by a shim in a new folder
    assert readpath.sync_block(paths, settings) is True
    pa = readpath.project_block_path(paths, A)
    pc = readpath.project_block_path(paths, C)
    assert "A-FACT" in pa.read_text()
    assert pc.read_bytes() == paths.readpath_block.read_bytes()  # global only, byte for byte
    before = pa.stat().st_mtime_ns
    assert readpath.sync_block(paths, settings) is False  # nothing moved: nothing written
    assert pa.stat().st_mtime_ns == before
    _layers(paths, "- GLOBAL", **{A: "- A-FACT 2"})  # a validated run changed A's layer
    assert readpath.sync_block(paths, settings) is True
    assert "A-FACT 2" in pa.read_text() and pc.read_bytes() == paths.readpath_block.read_bytes()


def test_one_sync_reads_redacts_and_counts_the_global_summary_once(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every project's block shows the global summary: one sync prepares it once, not once per
    project (each was a redaction and a round trip to the tokenizer helper). The blocks are the
    ones each render gives alone."""
    monkeypatch.setattr(readpath, "RACY_WINDOW_NS", 0)
    _layers(paths, "- GLOBAL FACT", **{A: "- A-FACT", B: "- B-FACT", C: "- C-FACT"})
    alone = {key: readpath.render_block(paths, key) for key in (A, B, C)}
    redacted: list[str] = []
    counted: list[str] = []
    real_redact, real_count = redaction.redact, tokens.count

    def redact(text: str) -> str:
        redacted.append(text)
        return real_redact(text)

    def count(text: str) -> int:
        counted.append(text)
        return real_count(text)

    monkeypatch.setattr(readpath, "redact", redact)
    monkeypatch.setattr(tokens, "count", count)
    assert readpath.sync_block(paths, Settings()) is True
    assert sum("GLOBAL FACT" in t for t in redacted) == 1
    assert len(redacted) == 4  # the global layer and three projects' layers
    assert len(counted) == len(set(counted))
    for key, block in alone.items():
        assert readpath.project_block_path(paths, key).read_text() == block
    assert readpath._SYNC.memo is None  # nothing held past the sync


def test_a_project_file_is_emptied_never_removed(paths: Paths) -> None:
    # A shim that finds its file missing falls back to the global block it read at load; turning
    # memories off (or forgetting everything) must silence it, so the file stays, empty.
    _layers(paths, "- GLOBAL", **{A: "- A-FACT"})
    readpath.sync_block(paths, Settings())
    pa = readpath.project_block_path(paths, A)
    assert "A-FACT" in pa.read_text()
    assert readpath.sync_block(paths, Settings(use_memories=False)) is True
    assert pa.exists() and pa.read_bytes() == b"" and not paths.readpath_block.exists()
    readpath.sync_block(paths, Settings())
    ValidatedMemory(paths).record({}, source="test: everything forgotten")
    readpath.sync_block(paths, Settings())
    assert pa.exists() and pa.read_bytes() == b""


def test_scoped_block_costs_no_more_than_the_global_only_block_for_the_same_memory(
    tmp_path: Path,
) -> None:
    facts = {
        k: "\n".join(f"- {k} fact {i}: detail about its build" for i in range(40))
        for k in (A, B, C)
    }
    common = "- prefers short answers\n- uses vim"
    scoped = Paths(
        config_file=tmp_path / "s.toml", data_dir=tmp_path / "s", state_dir=tmp_path / "ss"
    )
    flat = Paths(
        config_file=tmp_path / "f.toml", data_dir=tmp_path / "f", state_dir=tmp_path / "fs"
    )
    _layers(scoped, common, **facts)
    _layers(flat, common + "\n" + "\n".join(facts.values()))
    for key in (A, B, C):
        assert len(readpath.render_block(scoped, key) or "") <= len(
            readpath.render_block(flat) or ""
        )


# -- tools -------------------------------------------------------------------------------------


@pytest.fixture
def scoped_store(store: Store) -> Store:
    for sid, wt in (("ses_aaaaaaa1", "/srv/a"), ("ses_bbbbbbb1", "/srv/b")):
        store._conn.execute(
            "INSERT INTO stage1_outputs (session_id, source_updated_at, raw_memory, rollout_summary,"
            " cwd, generated_at, project_id, worktree, selected_for_phase2)"
            " VALUES (?, 1, '- raw', 'sum', ?, 1, 'p', ?, 1)",
            (sid, wt, wt),
        )
    return store


def test_reads_default_to_the_project_and_global(paths: Paths, scoped_store: Store) -> None:
    _layers(paths, "- shared word GLOBAL", **{A: "- shared word A", B: "- shared word B"})
    root = paths.memories
    me = Scope("project", A)
    found = {m.path for m in memory_search(root, SearchQuery("shared word"), scope=me).matches}
    assert found == {"memory_summary.md", f"projects/{A}/memory_summary.md"}
    found_all = {m.path for m in memory_search(root, SearchQuery("shared word"), scope=ALL).matches}
    assert f"projects/{B}/memory_summary.md" in found_all
    assert {
        m.path
        for m in memory_search(
            root, SearchQuery("shared word"), scope=me.with_mode("global")
        ).matches
    } == {"memory_summary.md"}
    with pytest.raises(NotFound):
        memory_read(root, f"projects/{B}/memory_summary.md", scope=me)
    with pytest.raises(NotFound):
        memory_search(root, SearchQuery("word", path=f"projects/{B}"), scope=me)
    assert [e.path for e in memory_list(root, "projects", scope=me).entries] == [f"projects/{A}"]
    assert "shared word A" in memory_read(root, f"projects/{A}/memory_summary.md", scope=me).content


def test_a_tool_call_never_changes_another_projects_memory(
    paths: Paths, scoped_store: Store
) -> None:
    root = paths.memories
    me = Scope("project", A)
    with pytest.raises(Refused):
        memory_forget(scoped_store, root, session_id="ses_bbbbbbb1", scope=me)
    assert scoped_store.outputs.output("ses_bbbbbbb1") is not None
    note_b = memory_add_note(root, "B uses poetry", project=B)
    with pytest.raises(Refused):
        memory_forget(scoped_store, root, note=note_b.path, scope=me)
    with pytest.raises(Refused):
        memory_forget(scoped_store, root, project=B, scope=me)
    with pytest.raises(Refused):
        memory_reset(scoped_store, paths, True, scope=me)
    assert (root / note_b.path).exists()
    mine = memory_add_note(root, "A uses pnpm", project=A)
    assert mine.path.startswith(f"projects/{A}/notes/")
    memory_forget(scoped_store, root, note=mine.path, scope=me)
    assert not (root / mine.path).exists()
    assert memory_forget(scoped_store, root, session_id="ses_aaaaaaa1", scope=me).removed_output
    # the shell may forget a whole project
    result = memory_forget(scoped_store, root, project=B)
    assert result.sessions == 1 and result.notes == 1
    assert scoped_store.outputs.output("ses_bbbbbbb1") is None and not (root / note_b.path).exists()


# -- compaction as a save point ------------------------------------------------------------------


def _compacted_session(host: FakeOpencode, sid: str, now: int) -> None:
    host.add_session(
        sid, updated=now - MINUTE, turns=[("user", "BEFORE-ONE alpha"), ("assistant", "ok")]
    )
    host.messages[sid].append(
        host.message(sid, "user", [{"type": "compaction", "auto": True}], created=now)
    )
    summary = host.message(sid, "assistant", [{"type": "text", "text": "SUMMARY-ONE"}], created=now)
    summary["info"].update(summary=True, mode="compaction", agent="compaction")
    host.messages[sid].append(summary)


def test_a_compacted_session_is_extracted_at_once_exactly_once_and_later_from_there(
    paths: Paths, clock: ManualClock, store: Store
) -> None:
    host = FakeOpencode()
    sid = "ses_compacted1"
    now = clock.now_ms()
    _compacted_session(host, sid, now)
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    phase1 = Phase1(store=store, client=client, settings=Settings(), paths=paths, clock=clock)

    assert asyncio.run(phase1.run_pass()).succeeded == 0  # not idle, no compaction seen: waits
    store.stage1.record_compaction(sid)
    report = asyncio.run(phase1.run_pass())
    assert report.save_points == 1 and report.succeeded == 1
    first = host.prompts[-1]["parts"][0]["text"]
    assert "BEFORE-ONE" in first and "SUMMARY-ONE" not in first  # what the compaction summarised
    assert asyncio.run(phase1.run_pass()).succeeded == 0 and len(host.prompts) == 1  # once
    one = present(store.outputs.output(sid))

    # the session goes on and is compacted again: only what came after the first save point
    clock.advance(MINUTE)
    host.touch(sid, clock.now_ms(), ("user", "AFTER-ONE beta"))
    host.messages[sid].append(
        host.message(sid, "user", [{"type": "compaction"}], created=clock.now_ms())
    )
    store.stage1.record_compaction(sid)
    assert asyncio.run(phase1.run_pass()).succeeded == 1
    second = host.prompts[-1]["parts"][0]["text"]
    assert "AFTER-ONE" in second and "BEFORE-ONE" not in second
    assert "SUMMARY-ONE" not in second  # opencode's restatement of what was already saved
    two = present(store.outputs.output(sid))
    assert two.raw_memory.startswith(one.raw_memory) and len(two.raw_memory) > len(one.raw_memory)
    assert present(store.stage1.save_point(sid)).compactions == 2

    # idle at last: everything after the last save point, once, appended to what was saved
    clock.advance(7 * HOUR)
    host.touch(sid, clock.now_ms() - 6 * HOUR - MINUTE, ("user", "TAIL gamma"))
    assert asyncio.run(phase1.run_pass()).succeeded == 1
    tail = host.prompts[-1]["parts"][0]["text"]
    assert "TAIL" in tail and "AFTER-ONE" not in tail and "BEFORE-ONE" not in tail
    assert present(store.outputs.output(sid)).raw_memory.startswith(two.raw_memory)


def test_shim_tool_calls_see_their_project_and_global_only(
    paths: Paths, clock: ManualClock
) -> None:
    from memoryd.tools import shim as host

    _layers(paths, "- shared word GLOBAL", **{A: "- shared word A", B: "- shared word B"})
    paths.ensure_dir(paths.data_dir)
    found = host.call(paths, clock, "memory_search", {"query": "shared word"}, project=A)
    assert f"projects/{A}/" in found and f"projects/{B}/" not in found
    with pytest.raises(NotFound):
        host.call(
            paths, clock, "memory_read", {"path": f"projects/{B}/memory_summary.md"}, project=A
        )
    from memoryd.store import Store
    from memoryd.tools import proposed

    held = host.call(
        paths, clock, "memory_note", {"note": "A ships on Fridays"}, "ses_x1", project=A
    )
    assert "held" in held  # no opencode to show the user asked; once accepted it lands in A
    [note] = proposed.waiting(paths)
    store = Store(paths.db, clock=clock)
    try:
        saved = proposed.accept(paths, store, note.id, clock)
    finally:
        store.close()
    assert saved.path.startswith(f"projects/{A}/notes/")


def test_one_sync_cuts_a_long_global_summary_once(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a review: a global summary over the budget was cut again for every project's
    block (two tokenizer round trips each), though every block shows the same cut."""
    monkeypatch.setattr(readpath, "RACY_WINDOW_NS", 0)
    _layers(paths, "\n".join(f"- global fact {i} " + "word " * 12 for i in range(600)))
    paths.ensure_dir(paths.readpath_seen)
    for key in (A, B, C):
        (paths.readpath_seen / key).write_text(f"/srv/{key}\n")  # announced, no layer of theirs
    cuts: list[tuple[str, int]] = []
    real_cut = tokens.truncate_middle

    def truncate_middle(text: str, max_tokens: int) -> str:
        cuts.append((text, max_tokens))
        return real_cut(text, max_tokens)

    monkeypatch.setattr(tokens, "truncate_middle", truncate_middle)
    assert readpath.sync_block(paths, Settings()) is True
    assert cuts and len(cuts) == len(set(cuts))
    for key in (A, B, C):
        block = readpath.project_block_path(paths, key).read_bytes()
        assert block == paths.readpath_block.read_bytes()
