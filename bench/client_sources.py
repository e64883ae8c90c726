"""Listing Claude Code and Codex session files: a cold read, a warm (unchanged) pass, and old files.

.venv/bin/python bench/client_sources.py [--files N] [--turns N]

Builds N Claude Code transcripts and N Codex rollouts from the real fixtures (each repeated to
``--turns`` turns) under a temp home, then times ``FileSource.list_sessions``: cold (every file
read and parsed), warm (nothing changed: only ``stat``s, the summaries come from the cache) and
old (every file past the age window: listed from ``stat`` alone). Prints seconds and ratios.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryd.host import claude_transcript, codex_rollout
from memoryd.host import client_sources as cs

FIXTURES = ROOT / "tests" / "unit" / "host" / "client_fixtures"


def build(home: Path, kind: str, files: int, turns: int) -> int:
    source = (FIXTURES / f"{kind}_subfolder.jsonl").read_text().splitlines()
    head, body = source[:1], source[1:]
    text = "\n".join(head + body * turns) + "\n"
    total = 0
    for i in range(files):
        sid = str(uuid.UUID(int=i + 1))
        if kind == "claude":
            path = home / "projects" / f"-home-user-p{i % 20}" / f"{sid}.jsonl"
        else:
            path = (
                home / "sessions" / "2026" / "12" / f"{i % 28 + 1:02d}" / f"rollout-x-{sid}.jsonl"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        total += len(text)
    return total


def timed(src: cs.FileSource, since: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    listing = src.list_sessions(read_since_ms=since)
    return time.perf_counter() - t0, len(listing.sessions)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--turns", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind, mod, files in (
            ("claude", claude_transcript, cs.claude_files),
            ("codex", codex_rollout, cs.codex_files),
        ):
            home = Path(tmp) / kind
            size = build(home, kind, args.files, args.turns)
            src = cs.FileSource(kind, home, files, mod.parse, mod.session_id_of)
            cs._SUMMARIES.clear()
            cold, n = timed(src, 0)
            warm, _ = timed(src, 0)
            old, _ = timed(src, int(time.time() * 1000) + 1)
            print(
                json.dumps(
                    {
                        "client": kind,
                        "files": n,
                        "mb": round(size / 1e6, 1),
                        "cold_s": round(cold, 3),
                        "warm_s": round(warm, 4),
                        "old_s": round(old, 4),
                        "cold/warm": round(cold / warm, 1) if warm else None,
                        "cold/old": round(cold / old, 1) if old else None,
                    }
                )
            )


if __name__ == "__main__":
    main()
