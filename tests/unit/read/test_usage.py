"""Spool ingest: claim by rename, count once per citing part, survive partial lines and replays."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from memoryd.read.usage import ingest_spool
from memoryd.store import Store
from tests.narrow import present


def add(store: Store, sid: str) -> None:
    c = store.stage1.claim_stage1(sid, 1, max_running=100, worker_id="w")
    store.stage1.mark_stage1_succeeded(
        sid,
        present(c.token),
        raw_memory="r",
        rollout_summary="s",
        rollout_slug=None,
        cwd=None,
        title=None,
    )


def line(session: str, part: str, cited: list[str]) -> str:
    return (
        json.dumps({"v": 1, "session_id": session, "part_id": part, "cited": cited, "ts": 1}) + "\n"
    )


def spool_at(tmp_path: Path) -> Path:
    p = tmp_path / "spool" / "citations.jsonl"
    p.parent.mkdir()
    return p


def test_counts_each_part_once_and_ignores_unknown(store: Store, tmp_path: Path) -> None:
    add(store, "ses_aaa")
    add(store, "ses_bbb")
    spool = spool_at(tmp_path)
    spool.write_text(
        line("ses_user1", "prt_1", ["ses_aaa", "ses_bbb"])
        + line("ses_user1", "prt_1", ["ses_aaa", "ses_bbb"])  # same part twice (two seams)
        + line("ses_user1", "prt_2", ["ses_aaa", "ses_zzz_unknown"])
    )
    r = ingest_spool(store, spool)
    assert (r.lines, r.new_parts, r.outputs_updated) == (3, 2, 3)
    assert (
        present(store.outputs.output("ses_aaa")).usage_count == 2
        and present(store.outputs.output("ses_bbb")).usage_count == 1
    )
    assert not spool.exists() and list(spool.parent.iterdir()) == []


def test_replay_is_safe(store: Store, tmp_path: Path) -> None:
    add(store, "ses_aaa")
    spool = spool_at(tmp_path)
    spool.write_text(line("s", "p", ["ses_aaa"]))
    ingest_spool(store, spool)
    # a crash after the DB commit but before the unlink leaves a claimed file behind
    dead = subprocess.Popen(["true"])
    dead.wait()
    (spool.parent / f"citations.jsonl.{dead.pid}.2.claimed").write_text(line("s", "p", ["ses_aaa"]))
    r = ingest_spool(store, spool)
    assert r.lines == 1 and r.new_parts == 0
    assert present(store.outputs.output("ses_aaa")).usage_count == 1


def test_partial_and_malformed_lines(store: Store, tmp_path: Path) -> None:
    add(store, "ses_aaa")
    spool = spool_at(tmp_path)
    spool.write_text(
        line("s", "p1", ["ses_aaa"])
        + "not json\n"
        + '{"v":1,"session_id":"s","part_id":"p2","cited":["ses_a'
    )
    r = ingest_spool(store, spool)
    assert r.new_parts == 1 and r.bad_lines == 2
    assert present(store.outputs.output("ses_aaa")).usage_count == 1


def test_missing_spool_is_fine(store: Store, tmp_path: Path) -> None:
    assert ingest_spool(store, tmp_path / "nope" / "citations.jsonl").lines == 0


def test_concurrent_appends_are_never_lost(store: Store, tmp_path: Path) -> None:
    add(store, "ses_aaa")
    spool = spool_at(tmp_path)
    writers, per_writer = 4, 250

    def write(w: int) -> None:
        for i in range(per_writer):
            with open(spool, "a") as fh:  # the shim opens the path afresh for every append
                fh.write(line(f"ses_w{w}", f"prt_{i}", ["ses_aaa"]))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    total = 0
    while any(t.is_alive() for t in threads):
        total += ingest_spool(store, spool).new_parts
    for t in threads:
        t.join()
    total += ingest_spool(store, spool).new_parts
    assert total == writers * per_writer
    assert present(store.outputs.output("ses_aaa")).usage_count == writers * per_writer


def test_a_live_ingesters_claimed_file_is_left_to_it(store: Store, tmp_path: Path) -> None:
    add(store, "ses_aaa")
    spool = spool_at(tmp_path)
    other = subprocess.Popen(["sleep", "30"])
    try:
        mine = spool.parent / f"citations.jsonl.{other.pid}.1.claimed"
        mine.write_text(line("s", "p9", ["ses_aaa"]))
        assert ingest_spool(store, spool).lines == 0
        assert mine.exists()
    finally:
        other.kill()
        other.wait()
    assert ingest_spool(store, spool).new_parts == 1  # once its owner is gone it is recovered
    assert os.listdir(spool.parent) == []
