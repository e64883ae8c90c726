"""bench/quality.py end to end against the real opencode with the scripted model (mechanics only).

The scripted model answers every extraction with the ideal memory for that session and
consolidates literally, so every memory-scope rubric item must pass (each check reads the right
session's stored output), and exactly the folder items a literal consolidator cannot meet must
fail (no per-project headings, a superseded version copied as is).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.quality_cases import SCENARIOS

REPO = Path(__file__).resolve().parents[2]
LITERAL_CONSOLIDATOR_MISSES = {
    ("infra_profile", "the folder has a heading for infra"),
    ("terraform_new", "1.5.7 appears only as the replaced version"),
}


def test_quality_bench_runs_end_to_end(opencode_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "quality.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "quality.py"), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    print(proc.stdout)  # the rubric table, visible with -s
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    result = json.loads(out.read_text())

    assert result["sessions"] == len(SCENARIOS) >= 12
    assert result["extraction_requests"] == len(SCENARIOS)  # each session extracted once
    assert "phase 2: consolidated" in proc.stdout
    items = result["items"]
    expected = [(sc.name, c.label) for sc in SCENARIOS for c in sc.checks]
    assert [(i["scenario"], i["label"]) for i in items] == expected
    assert all(i["ok"] for i in items if i["scope"] == "memory"), [
        i for i in items if i["scope"] == "memory" and not i["ok"]
    ]
    failed = {(i["scenario"], i["label"]) for i in items if not i["ok"]}
    assert failed == LITERAL_CONSOLIDATOR_MISSES
    total = len(expected)
    assert f"score: {total - 2}/{total} " in proc.stdout
    for name, label in expected:
        assert label in proc.stdout and name in proc.stdout
