"""Issue 11: the seeded slice of ``bench/chaos.py`` that runs in CI, against the real opencode."""

from __future__ import annotations

import datetime
import os
import random
import subprocess
from pathlib import Path

from bench.chaos import after_crash, host_faults, storm
from bench.chaos_world import World


def slice_seed() -> tuple[int, str]:
    """``CHAOS_SEED`` when set; else drawn from the commit under test (each commit explores a
    new schedule), or from the date outside a git checkout; and where it came from."""
    if os.environ.get("CHAOS_SEED"):
        return int(os.environ["CHAOS_SEED"]), "CHAOS_SEED"
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    if len(head) >= 8:
        return int(head[:8], 16) % 1_000_000, f"commit {head[:12]}"
    today = datetime.datetime.now(datetime.UTC).date()
    return today.toordinal() % 1_000_000, f"date {today}"


def test_seeded_chaos_slice(tmp_path: Path) -> None:
    """Seeded kills across the pipeline, a crash taken over at once, two host faults drawn by the
    seed and opencode restarted mid-pass; each ends with a clean pass and the full invariant check
    (integrity, one current output per session, a valid folder that matches its baseline, no
    helper session or memoryd-started opencode left). The seed comes from the commit
    (``slice_seed``), so CI explores a new schedule with each commit; a failure names the seed
    and ``CHAOS_SEED`` replays it."""

    seed, source = slice_seed()
    replay = f"seed {seed} (from {source}); replay: CHAOS_SEED={seed}"
    print(replay)  # pytest shows it with the output of a failed test
    rng = random.Random(seed)
    w = World(tmp_path, rng)
    try:
        w.add_sessions(3, "slice")
        figs = [
            storm(w, rng, kills=4, span_s=6.0),
            after_crash(w, rng, runs=1),
            host_faults(w, rng, hang_s=4.0, passes=1, kinds=2),
        ]
    finally:
        w.close()
    for fig in figs:
        assert (fig.lost, fig.duplicated, fig.corrupt) == (0, 0, 0), (
            replay,
            fig.name,
            fig.failures,
        )
        assert fig.failures == [], (replay, fig.name, fig.notes, fig.failures)
        assert fig.injected >= 1, (replay, fig.name, fig.notes)
