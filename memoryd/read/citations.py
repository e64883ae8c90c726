"""The ``<memory-citation>`` contract: parse cited memory, strip the markup from visible text.

An agent that used memory ends its reply with one block::

    <memory-citation>
    <citation_entries>
    MEMORY.md:12-18|note=[why this entry mattered]
    </citation_entries>
    <session_ids>
    ses_abc123
    </session_ids>
    </memory-citation>

Parsing is lenient (several blocks, any case, duplicates, several comma-separated line ranges
on one entry line, the legacy comma-separated id form inside ``<citation_entries>``); an unclosed block is not parsed, but is still stripped from the end of
the text so markup never leaks into a transcript.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BLOCK = re.compile(r"<memory-citation>(.*?)</memory-citation>", re.S | re.I)
_UNCLOSED = re.compile(r"<memory-citation>(?:(?!</memory-citation>).)*\Z", re.S | re.I)
_SECTION = "<{0}>(.*?)</{0}>"
# opencode's ids, and Claude Code's and Codex's namespaced ones (memoryd.hosts)
_SESSION_ID = re.compile(
    r"\b(?:ses_[A-Za-z0-9]{6,}|(?:claude-code|codex):[0-9A-Fa-f][0-9A-Fa-f-]{6,}[0-9A-Fa-f])\b"
)


@dataclass(frozen=True)
class CitationEntry:
    path: str
    line_start: int | None
    line_end: int | None
    note: str


@dataclass
class Citation:
    entries: list[CitationEntry] = field(default_factory=list)
    session_ids: list[str] = field(default_factory=list)


def _section(body: str, name: str) -> str | None:
    m = re.search(_SECTION.format(name), body, re.S | re.I)
    return m.group(1) if m else None


def _entries(line: str) -> list[CitationEntry] | None:
    """One line, ``path:a-b|note=[...]``; ``path:a-b,c-d`` (several ranges) gives one entry per range.

    The read-path prompt asks for one line per range, but a model that folds two passages of one
    file into one line must not lose the citation. Any malformed range rejects the whole line.
    """
    head, sep, note = line.rpartition("|note=[")
    if not sep or not note.endswith("]"):
        return None
    path, colon, ranges = head.rpartition(":")
    if not colon or not path.strip():
        return None
    out = []
    for rng in ranges.split(","):
        start_s, _, end_s = rng.partition("-")
        try:
            start = int(start_s)
            end = int(end_s) if end_s else start
        except ValueError:
            return None
        out.append(CitationEntry(path.strip(), start, end, note[:-1].strip()))
    return out


def parse_citations(text: str) -> Citation:
    """Every entry and every distinct cited session id, in order of appearance."""
    result = Citation()
    seen: set[str] = set()
    for block in _BLOCK.findall(text):
        entries = _section(block, "citation_entries") or ""
        for raw in entries.splitlines():
            line = raw.strip()
            if not line:
                continue
            entries_here = _entries(line)
            if entries_here is not None:
                result.entries.extend(entries_here)
            elif "|note=" not in line:
                # legacy form: a comma-separated id list inside citation_entries
                for sid in _SESSION_ID.findall(line):
                    if sid not in seen:
                        seen.add(sid)
                        result.session_ids.append(sid)
        ids = _section(block, "session_ids") or ""
        for sid in _SESSION_ID.findall(ids):
            if sid not in seen:
                seen.add(sid)
                result.session_ids.append(sid)
    return result


def strip_citations(text: str) -> str:
    """Remove every citation block (and an unclosed trailing one); tidy the blank lines left behind."""
    if "<memory-citation" not in text.lower():
        return text
    out = _BLOCK.sub("", text)
    out = _UNCLOSED.sub("", out)
    out = re.sub(r"\n{3,}", "\n\n", out)
    return out.rstrip()
