from __future__ import annotations

import pytest

from memoryd.read.citations import parse_citations, strip_citations

BLOCK = """<memory-citation>
<citation_entries>
MEMORY.md:10-12|note=[build command]
rollout_summaries/2026-01-01T00-00-00-ab12-x.md:3-3|note=[a note | with pipe]
</citation_entries>
<session_ids>
ses_aaa111bbb
ses_ccc222ddd
ses_aaa111bbb
</session_ids>
</memory-citation>"""


def test_well_formed() -> None:
    c = parse_citations("Answer.\n\n" + BLOCK)
    assert c.session_ids == ["ses_aaa111bbb", "ses_ccc222ddd"]
    assert [(e.path, e.line_start, e.line_end) for e in c.entries] == [
        ("MEMORY.md", 10, 12),
        ("rollout_summaries/2026-01-01T00-00-00-ab12-x.md", 3, 3),
    ]
    assert c.entries[1].note == "a note | with pipe"


def test_several_blocks_dedupe_across() -> None:
    two = BLOCK + "\nmore\n" + BLOCK.replace("ses_ccc222ddd", "ses_eee333fff")
    assert parse_citations(two).session_ids == ["ses_aaa111bbb", "ses_ccc222ddd", "ses_eee333fff"]


def test_unclosed_not_parsed_but_stripped() -> None:
    text = "Answer.\n<memory-citation>\n<session_ids>\nses_aaa111bbb\n"
    assert parse_citations(text).session_ids == []
    assert strip_citations(text) == "Answer."


def test_legacy_comma_form() -> None:
    c = parse_citations(
        "<memory-citation><citation_entries>ses_aaa111bbb, ses_ccc222ddd</citation_entries></memory-citation>"
    )
    assert c.session_ids == ["ses_aaa111bbb", "ses_ccc222ddd"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer.\n\n" + BLOCK, "Answer."),
        ("A\n" + BLOCK + "\n\n\n\nB", "A\n\nB"),
        ("no citation here", "no citation here"),
        ("x <MEMORY-CITATION>y</MEMORY-CITATION>", "x"),
    ],
)
def test_strip(text: str, expected: str) -> None:
    assert strip_citations(text) == expected


def test_malformed_entries_skipped() -> None:
    c = parse_citations(
        "<memory-citation><citation_entries>\nnot an entry\nMEMORY.md:x-y|note=[bad]\n"
        "MEMORY.md:1-2|note=[ok]\n</citation_entries></memory-citation>"
    )
    assert [e.note for e in c.entries] == ["ok"]
