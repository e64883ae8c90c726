"""Issue 11: the seeded slice of ``bench/chaos.py`` that runs in CI, against the real opencode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import OpencodeSandbox
from tests.e2e.test_daemon_e2e import job, output_ids, processes_under, wait_for
from tests.e2e.test_phase1_e2e import memoryd, run_env


def say_sessions(box: OpencodeSandbox, n: int, tag: str) -> list[str]:
    d = box.driver
    ids = []
    for i in range(n):
        sid = d.create_session(f"{tag} {i}", directory=box.project_dir)["id"]
        d.say(
            sid,
            f"For {tag} {i} we decided to keep release notes in docs/releases-{i}.md.",
            directory=box.project_dir,
        )
        ids.append(sid)
    return ids


def alive(pid: int) -> bool:
    """A process that runs (a zombie waiting for a reaper that is not ours does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def helper_titles(box: OpencodeSandbox) -> list[str]:
    sessions = box.driver.list_all_sessions(roots=False, archived=True)
    return [s["title"] for s in sessions if s["title"].startswith("memoryd-")]


def test_nothing_waits_after_a_crash(make_sandbox, mock_llm: MockLLM) -> None:
    """SIGKILL one ``run --once`` mid-extraction; the next run takes every claim over at once
    (no retry burned), deletes the helper sessions the dead one left, and stops its opencode."""
    box: OpencodeSandbox = make_sandbox()
    ids = say_sessions(box, 3, "crash")
    env = run_env(box)
    assert memoryd(env, "install", "opencode").returncode == 0
    env.pop("MEMORYD_HOST_URL")  # memoryd starts its own opencode, as a new user's would
    home = box.memoryd_home
    mock_llm.clear()
    mock_llm.delay_s = 60.0  # the model hangs: the kill lands mid-extraction
    victim = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "run", "--once"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(mock_llm.extraction_requests) >= 3, 60, "three extractions in flight")
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    records = list((home / "state" / "private-servers").glob("*.json"))
    assert len(records) == 1
    orphan_pid = json.loads(records[0].read_text())["pid"]
    assert alive(orphan_pid)  # the killed run's opencode is still there
    assert all(job(home, sid)["status"] == "running" for sid in ids)
    assert len(helper_titles(box)) == 3

    mock_llm.delay_s = 0.0
    t0 = time.monotonic()
    second = memoryd(env, "run", "--once", timeout=120)
    elapsed = time.monotonic() - t0
    assert second.returncode == 0, second.stderr
    assert output_ids(home) == set(ids), second.stderr
    assert elapsed < 60
    for sid in ids:
        j = job(home, sid)
        assert j["status"] == "done" and j["retry_remaining"] == 3, j
    assert helper_titles(box) == []
    wait_for(
        lambda: not alive(orphan_pid), 10, "the orphaned opencode to go", lambda: second.stderr
    )
    assert list((home / "state" / "private-servers").glob("*.json")) == []
    assert [p for p in processes_under(box.root) if p != box.pid] == []


def test_seeded_chaos_slice(tmp_path: Path) -> None:
    """A few seeded kills across the pipeline, a crash takeover and three host faults drawn by
    the seed (``CHAOS_SEED`` replays another schedule), each followed by the full invariant check."""
    import random

    from bench.chaos import host_faults, storm
    from bench.chaos_world import World

    seed = int(os.environ.get("CHAOS_SEED", "11"))
    rng = random.Random(seed)
    w = World(tmp_path, rng)
    try:
        w.add_sessions(3, "slice")
        figs = [storm(w, rng, kills=6), host_faults(w, rng, hang_s=4.0, passes=1, kinds=3)]
    finally:
        w.close()
    for fig in figs:
        assert (fig.lost, fig.duplicated, fig.corrupt) == (0, 0, 0), (fig.name, fig.failures)
        assert fig.failures == [], (fig.name, fig.notes, fig.failures)
        assert fig.injected >= 3, (fig.name, fig.notes)
