"""Shared golden cases for the citation contract: Python is the reference, the JS shim must agree.

``tests/golden/citations.json`` holds ``{name, text, stripped, session_ids, entries}`` per case.
The expected fields come from :mod:`memoryd.read.citations`; ``tests/shim/shim.test.mjs`` runs the same
cases through the opencode shim's ``experimental.text.complete`` hook. After a deliberate change to
the Python parser, rewrite the expected fields from the texts with::

    python -m tests.unit.read.test_citation_golden --regen
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd.read.citations import parse_citations, strip_citations

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "citations.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text(encoding="utf-8"))

# The situations the shared file must keep covering (the JS side relies on them too).
REQUIRED = {
    "well_formed",
    "several_blocks",
    "unclosed_trailing",
    "legacy_comma_form",
    "duplicate_ids",
    "block_in_middle",
    "uppercase_tags",
    "no_citation",
    "malformed_entries",
    "two_ranges_two_lines",  # the read-path prompt's form for two passages of one file
    "two_ranges_one_line",  # the folded form a model may write instead
    "bad_range_in_list",
}


def expected(text: str) -> dict[str, Any]:
    c = parse_citations(text)
    return {
        "stripped": strip_citations(text),
        "session_ids": c.session_ids,
        "entries": [dataclasses.asdict(e) for e in c.entries],
    }


def test_file_covers_the_required_cases() -> None:
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names)), "case names must be unique"
    assert set(names) >= REQUIRED
    for case in CASES:
        assert set(case) == {"name", "text", "stripped", "session_ids", "entries"}, case["name"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_python_matches_golden(case: dict[str, Any]) -> None:
    got = expected(case["text"])
    assert got == {k: case[k] for k in ("stripped", "session_ids", "entries")}


def test_cases_are_not_vacuous() -> None:
    # Some cases strip, some parse entries, some parse ids, some leave the text alone.
    assert any(c["stripped"] != c["text"] for c in CASES)
    assert any(c["stripped"] == c["text"] for c in CASES)
    assert sum(bool(c["entries"]) for c in CASES) >= 5
    assert sum(bool(c["session_ids"]) for c in CASES) >= 5


def regenerate() -> None:
    cases = [{"name": c["name"], "text": c["text"], **expected(c["text"])} for c in CASES]
    GOLDEN.write_text(json.dumps(cases, indent=2, ensure_ascii=True) + "\n", encoding="utf-8")
    print(f"rewrote {len(cases)} cases in {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit("usage: python -m tests.unit.read.test_citation_golden --regen")
    regenerate()
