"""Cutting Markdown into the chunks the ranked index stores and returns.

Pure text in, chunks out: kept apart from the index so its rules (where a chunk starts, how big
it may grow) can be read and tested without SQLite, and so the refresh code that feeds the index
and any future caller share one definition of a chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SOFT_CHUNK_CHARS = 600
HARD_CHUNK_CHARS = 1500
_HEADING_RE = re.compile(r" {0,3}#{1,6}[ \t]+\S")
_FENCE_RE = re.compile(r" {0,3}(```|~~~)")


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    heading: str
    body: str


def chunk_text(text: str) -> list[Chunk]:
    """Split Markdown into sections, and long sections into runs of paragraphs.

    A heading (outside a code fence) always starts a chunk. Paragraphs join the current chunk
    until it reaches ~600 characters, and no chunk grows past ~1,500 unless a single line is that
    long. Line numbers are 1-based and inclusive; trailing blank lines are not part of a chunk.
    """
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    chunks: list[Chunk] = []
    cur: list[tuple[int, str]] = []
    size = 0
    heading = cur_heading = ""
    fenced = False

    def flush() -> None:
        nonlocal cur, size
        while cur and not cur[-1][1].strip():
            cur.pop()
        if cur:
            chunks.append(Chunk(cur[0][0], cur[-1][0], cur_heading, "\n".join(t for _, t in cur)))
        cur, size = [], 0

    for n, line in enumerate(lines, 1):
        if _FENCE_RE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING_RE.match(line):
            flush()
            heading = cur_heading = line.strip().lstrip("#").strip()
            cur, size = [(n, line)], len(line) + 1
            continue
        if not line.strip():
            if cur and size >= SOFT_CHUNK_CHARS and not fenced:
                flush()
            elif cur:
                cur.append((n, line))
            continue
        if cur and size + len(line) > HARD_CHUNK_CHARS:
            flush()
        if not cur:
            cur_heading = heading
        cur.append((n, line))
        size += len(line) + 1
    flush()
    return chunks
