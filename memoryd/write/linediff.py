"""Unified-diff text for the workspace diff: git-compatible hunks, anchored on unique lines.

Plain :mod:`difflib` is quadratic on files full of repeated lines (a 4,096-session
``raw_memories.md`` of template lines took 42 s); anchoring on lines that occur once on both
sides (session headers) and running difflib only in the gaps keeps it well under a second.
Split from :mod:`memoryd.write.baseline` so the snapshot logic and the text logic read apart.
"""

from __future__ import annotations

import bisect
import difflib
import sys
from collections import Counter
from collections.abc import Iterator

from memoryd.tuning import DIFF_CONTEXT_LINES

FS_ENCODING = sys.getfilesystemencoding()
# git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary.
BINARY_SNIFF = 8000


def display_path(path: str) -> str:
    """A path as text, even if the filesystem name is not valid UTF-8."""
    return fsencode(path).decode("utf-8", errors="replace")


def fsencode(name: str) -> bytes:
    return name.encode(FS_ENCODING, "surrogateescape")


def _is_binary(data: bytes | None) -> bool:
    return data is not None and b"\0" in data[:BINARY_SNIFF]


def _lines(data: bytes) -> list[str]:
    """Split on "\\n" only (as git does), keeping line ends; a last line may lack one."""
    text = data.decode("utf-8", errors="replace")
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _emit(out: list[str], prefix: str, line: str) -> None:
    out.append(prefix + line)
    if not line.endswith("\n"):
        out.append("\n\\ No newline at end of file\n")


Opcode = tuple[str, int, int, int, int]


def _unique_anchors(a: list[str], b: list[str], a0: int, b0: int) -> list[tuple[int, int]]:
    """Lines that occur exactly once on each side, kept in an order both sides agree on.

    This is the patience-diff idea: unique lines (session headers in ``raw_memories.md``) are
    safe anchors, and the longest increasing run of their positions splits a large file into
    small gaps that difflib handles quickly. Without it, difflib rescans every often-repeated
    template line for each change: 42 s for a 150,000-line file with 1 % changed.
    """
    count_a = Counter(a)  # counted in C
    count_b = Counter(b)
    common = {x for x, n in count_a.items() if n == 1} & {x for x, n in count_b.items() if n == 1}
    where_b = {line: j for j, line in enumerate(b) if line in common}
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if line in common]
    # longest increasing subsequence of the b positions (pairs are already sorted by a position)
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_idx.append(k)
        else:
            tails[pos] = j
            tail_idx[pos] = k
        prev[k] = tail_idx[pos - 1] if pos else -1
    chain: list[tuple[int, int]] = []
    k = tail_idx[-1] if tail_idx else -1
    while k >= 0:
        chain.append((pairs[k][0] + a0, pairs[k][1] + b0))
        k = prev[k]
    return chain[::-1]


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi_a, hi_b = len(a), len(b)
    while hi_a > lo and hi_b > lo and a[hi_a - 1] == b[hi_b - 1]:
        hi_a -= 1
        hi_b -= 1
    ops: list[Opcode] = []

    def add(tag: str, i1: int, i2: int, j1: int, j2: int) -> None:
        if i1 == i2 and j1 == j2:
            return
        if ops and ops[-1][0] == tag == "equal":
            ops[-1] = ("equal", ops[-1][1], i2, ops[-1][3], j2)
        else:
            ops.append((tag, i1, i2, j1, j2))

    add("equal", 0, lo, 0, lo)
    i, j = lo, lo
    for ai, bj in [*_unique_anchors(a[lo:hi_a], b[lo:hi_b], lo, lo), (hi_a, hi_b)]:
        # the gap before this anchor: most are equal or one-sided, the rest small enough for difflib
        if ai - i == bj - j and a[i:ai] == b[j:bj]:
            add("equal", i, ai, j, bj)
        elif i == ai or j == bj:
            add("insert" if i == ai else "delete", i, ai, j, bj)
        else:
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                None, a[i:ai], b[j:bj]
            ).get_opcodes():
                add(tag, i + i1, i + i2, j + j1, j + j2)
        if ai < hi_a:
            add("equal", ai, ai + 1, bj, bj + 1)
        i, j = ai + 1, bj + 1
    add("equal", hi_a, len(a), hi_b, len(b))
    return ops


class _AnchoredMatcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """difflib's hunk grouping over our anchored opcodes."""

    def __init__(self, a: list[str], b: list[str]) -> None:
        # no super().__init__(): it would index every line of b for matching we never use
        self.a, self.b = a, b
        self._ops = _opcodes(a, b)

    def get_opcodes(self) -> list[Opcode]:  # type: ignore[override]
        return list(self._ops)


def _hunks(a: list[str], b: list[str]) -> Iterator[str]:
    for group in _AnchoredMatcher(a, b).get_grouped_opcodes(DIFF_CONTEXT_LINES):
        first, last = group[0], group[-1]
        out = [f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    _emit(out, " ", line)
                continue
            for line in a[i1:i2]:
                _emit(out, "-", line)
            for line in b[j1:j2]:
                _emit(out, "+", line)
        yield "".join(out)


def file_patch(
    path: str, old_mode: int | None, old: bytes | None, new_mode: int | None, new: bytes | None
) -> str:
    """One file's section of a git-style unified diff."""
    shown = display_path(path)
    a_name = f"a/{shown}" if old_mode is not None else "/dev/null"
    b_name = f"b/{shown}" if new_mode is not None else "/dev/null"
    out = [f"diff --git a/{shown} b/{shown}\n"]
    if old_mode is None:
        out.append(f"new file mode {new_mode:06o}\n")
    elif new_mode is None:
        out.append(f"deleted file mode {old_mode:06o}\n")
    elif old_mode != new_mode:
        out.append(f"old mode {old_mode:06o}\nnew mode {new_mode:06o}\n")
    if (old or b"") == (new or b""):
        return "".join(out)  # mode-only change, or an empty file added or deleted
    if _is_binary(old) or _is_binary(new):
        out.append(f"Binary files {a_name} and {b_name} differ\n")
        return "".join(out)
    out.append(f"--- {a_name}\n+++ {b_name}\n")
    out.extend(_hunks(_lines(old or b""), _lines(new or b"")))
    return "".join(out)


def cap_utf8(text: str, cap_bytes: int) -> tuple[str, bool]:
    """``text`` cut to at most ``cap_bytes`` UTF-8 bytes at a character boundary."""
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= cap_bytes:
        return text, False
    return raw[: max(cap_bytes, 0)].decode("utf-8", errors="ignore"), True
