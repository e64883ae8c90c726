"""Issue 11: the seeded slice of ``bench/chaos.py`` that runs in CI, against the real opencode."""

from __future__ import annotations

import os
import random
from pathlib import Path

from bench.chaos import after_crash, host_faults, storm
from bench.chaos_world import World


def test_seeded_chaos_slice(tmp_path: Path) -> None:
    """Seeded kills across the pipeline, a crash taken over at once, two host faults drawn by the
    seed and opencode restarted mid-pass (``CHAOS_SEED`` replays another schedule); each ends with
    a clean pass and the full invariant check (integrity, one current output per session, a valid
    folder that matches its baseline, no helper session or memoryd-started opencode left)."""

    seed = int(os.environ.get("CHAOS_SEED", "11"))
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
        assert (fig.lost, fig.duplicated, fig.corrupt) == (0, 0, 0), (fig.name, fig.failures)
        assert fig.failures == [], (fig.name, fig.notes, fig.failures)
        assert fig.injected >= 1, (fig.name, fig.notes)
