"""Ranked vs plain search on a generated ~5 MB memory folder (opt-in: ``MEMORYD_BENCH=1``).

Run with ``MEMORYD_BENCH=1 .venv/bin/python -m pytest -s tests/unit/test_tools_bench.py``; the
timings are printed. The assertions are loose sanity bounds, not performance targets.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path

import pytest

from memoryd.tools import SearchIndex, memory_search

BENCH = os.environ.get("MEMORYD_BENCH") == "1"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not BENCH, reason="set MEMORYD_BENCH=1 to run the benchmark")]

TARGET_BYTES = 5 * 1024 * 1024


def _vocabulary(rng: random.Random, n: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(n)]


def _paragraph(rng: random.Random, vocab: list[str], weights: list[float]) -> str:
    words = rng.choices(vocab, weights=weights, k=rng.randint(20, 80))
    return " ".join(words) + "."


def generate(root: Path, seed: int = 7) -> tuple[int, list[str]]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng)
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf-like
    total = 0
    i = 0
    while total < TARGET_BYTES:
        if i % 10 == 0:
            rel = f"skills/skill-{i}/SKILL.md"
        else:
            day, hour = 1 + (i // 24) % 28, i % 24
            rel = f"rollout_summaries/2027-01-{day:02}T{hour:02}-00-00-{i:04}.md"
        sections = []
        for s in range(rng.randint(3, 8)):
            paras = "\n\n".join(_paragraph(rng, vocab, weights) for _ in range(rng.randint(1, 4)))
            sections.append(f"## Section {s} {rng.choice(vocab)}\n\n{paras}\n")
        text = f"session_id: ses_{i}\n\n" + "\n".join(sections)
        if i == 123:
            text += "\nThe flux capacitor calibration lives in the garage.\n"
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        total += len(text.encode())
        i += 1
    memory = "# MEMORY\n\n" + "\n\n".join(_paragraph(rng, vocab, weights) for _ in range(800)) + "\n"
    (root / "MEMORY.md").write_text(memory)
    return total + len(memory.encode()), vocab


def timed(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs)


def test_ranked_vs_plain(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    size, vocab = generate(root)
    files = sum(1 for _ in root.rglob("*.md"))
    idx = SearchIndex(tmp_path / "search.db", root)
    t = time.perf_counter()
    first = idx.refresh()
    build_ms = (time.perf_counter() - t) * 1000
    noop_ms = timed(idx.refresh)
    rows = []
    for label, qs in [
        ("rare phrase", ["flux capacitor"]),
        ("frequent word", [vocab[0]]),
        ("mid-rank word", [vocab[300]]),
        ("two words", [vocab[300], vocab[40]]),
        ("prefix fallback", ["capacit"]),
    ]:
        plain = timed(lambda qs=qs: memory_search(root, qs, case_sensitive=False, max_results=20), repeat=3)
        ranked = timed(lambda qs=qs: memory_search(root, qs, ranked=True, index=idx, max_results=20))
        rows.append((label, plain, ranked))
    st = os.stat(root / "MEMORY.md")
    os.utime(root / "MEMORY.md", ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))
    t = time.perf_counter()
    touched = idx.refresh()
    touch_ms = (time.perf_counter() - t) * 1000
    victim = next((root / "rollout_summaries").iterdir())
    victim.unlink()
    t = time.perf_counter()
    removed = idx.refresh()
    remove_ms = (time.perf_counter() - t) * 1000
    idx.close()
    db_bytes = sum(p.stat().st_size for p in tmp_path.glob("search.db*"))
    print(f"\ncorpus: {size / 1e6:.2f} MB in {files} files; {first.chunks_added} chunks; index {db_bytes / 1e6:.1f} MB")
    print(f"initial index build: {build_ms:.0f} ms; no-op refresh: {noop_ms:.1f} ms")
    print(f"touch MEMORY.md -> refresh {touch_ms:.0f} ms (files_indexed={touched.files_indexed})")
    print(f"delete one file -> refresh incl. optimize {remove_ms:.0f} ms (files_removed={removed.files_removed})")
    print(f"{'query':<16} {'plain ms':>9} {'ranked ms':>10}")
    for label, plain, ranked in rows:
        print(f"{label:<16} {plain:>9.1f} {ranked:>10.1f}")
    assert touched.files_indexed == 1 and removed.files_removed == 1
    assert all(r < p for _, p, r in rows)
