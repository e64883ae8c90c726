"""Unified-diff text for the workspace diff: git-compatible hunks, anchored on unique lines.

Plain :mod:`difflib` is quadratic on files full of repeated lines (a 4,096-session
``raw_memories.md`` of template lines took 42 s); anchoring on lines that occur once on both
sides (session headers) and running difflib only in the gaps keeps it well under a second.
Two cheaper layers sit in front of that line diff. ``_sync`` compares the two files as memory
and keeps identical stretches out of it altogether (their lines are only counted); each
difference gets a window of blocks (runs of lines cut at blank lines), diffed block by block,
and only changed blocks are split into lines. At 4,096 sessions with 1 % re-extracted this took
the 7 MB file from ~0.3 s to ~15 ms.
Split from :mod:`memoryd.folder.baseline` so the snapshot logic and the text logic read apart.
"""

from __future__ import annotations

import bisect
import difflib
import operator
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from typing import Literal

from memoryd.tuning import (
    DIFF_CAP_BYTES,
    DIFF_CONTEXT_LINES,
    DIFF_JOIN_BLOCKS,
    DIFF_SYNC_WINDOW_BYTES,
)

FS_ENCODING = sys.getfilesystemencoding()
# git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary.
BINARY_SNIFF = 8000

Status = Literal["A", "M", "D"]


@dataclass(frozen=True)
class Change:
    status: Status
    path: str  # posix path relative to the worktree


@dataclass
class WorkspaceDiff:
    changes: list[Change] = field(default_factory=list)
    patch: str = ""

    @property
    def empty(self) -> bool:
        return not self.changes

    def render(self, cap_bytes: int = DIFF_CAP_BYTES) -> str:
        """The markdown file the consolidation agent reads before anything else."""
        out = [
            "# Memory workspace diff",
            "",
            (
                "memoryd generated this file from the memory folder's changes since the last "
                "successful consolidation; read it first, and do not edit it."
            ),
            "",
            "## Status",
            "",
        ]
        if self.changes:
            out.extend(f"- {c.status} {display_path(c.path)}" for c in self.changes)
        else:
            out.append("- none")
        body, truncated = cap_utf8(self.patch, cap_bytes)
        if body and not body.endswith("\n"):
            body += "\n"
        # A context line such as " ```" would close a plain ``` fence early; outrun any run.
        longest = max((len(m) for m in re.findall(r"`{3,}", body)), default=0)
        fence = "`" * max(3, longest + 1)
        out += ["", "## Diff", "", f"{fence}diff", body + fence]
        if truncated:
            out.append(f"[diff truncated at {cap_bytes} bytes]")
        return "\n".join(out) + "\n"


def display_path(path: str) -> str:
    """A path as text, even if the filesystem name is not valid UTF-8."""
    return fsencode(path).decode("utf-8", errors="replace")


def fsencode(name: str) -> bytes:
    return name.encode(FS_ENCODING, "surrogateescape")


def _is_binary(data: bytes | None) -> bool:
    return data is not None and b"\0" in data[:BINARY_SNIFF]


def _lines(data: bytes) -> list[bytes]:
    """Split on "\\n" only (as git does), keeping line ends; a last line may lack one.

    Lines stay bytes: they compare as git compares them (two different invalid sequences are
    not "equal" just because both decode to U+FFFD), and only the lines a hunk shows are decoded.
    """
    lines = data.split(b"\n")
    last = lines.pop()
    lines = [x + b"\n" for x in lines]
    if last:
        lines.append(last)
    return lines


def _blocks(data: bytes) -> list[bytes]:
    """The file cut after every blank line: runs of whole lines, as ``_Lines`` reads them.

    A blank line is a content-defined cut: an edit moves only the cuts next to it, so the blocks
    of two versions line up and unchanged stretches compare as a few large bytes objects. Each
    block is kept without the "\\n\\n" that closes it (no copy of the file); the last piece,
    which has none, is kept as "\\n\\n" + piece, which no other block can equal since none
    contains "\\n\\n".
    """
    blocks = data.split(b"\n\n")
    tail = blocks.pop()
    if tail:
        blocks.append(b"\n\n" + tail)
    return blocks


class _Lines:
    """Line numbers over ``_blocks``; splits (and caches) only the blocks asked for."""

    def __init__(self, blocks: list[bytes]) -> None:
        self.blocks = blocks
        # A block's lines: its own "\\n"s plus the two cut off it. The tail has no cut, its
        # marker's two "\\n"s are not lines, and its last line may lack a "\\n".
        counted = accumulate(map(bytes.count, blocks, repeat(b"\n")), initial=0)
        starts: list[int] = list(map(operator.add, counted, range(0, 2 * len(blocks) + 1, 2)))
        self.tail = bool(blocks) and blocks[-1].startswith(b"\n\n")
        if self.tail:
            starts[-1] -= 4 if blocks[-1].endswith(b"\n") else 3  # a last line without "\\n"
        self.starts = starts
        self._split: dict[int, list[bytes]] = {}

    def __len__(self) -> int:
        return self.starts[-1]

    def _block_lines(self, k: int) -> list[bytes]:
        lines = self._split.get(k)
        if lines is None:
            block = self.blocks[k]
            last = self.tail and k == len(self.blocks) - 1
            lines = self._split[k] = _lines(block[2:] if last else block + b"\n\n")
        return lines

    def __getitem__(self, span: slice) -> list[bytes]:
        i, j = span.start, span.stop
        if i >= j:
            return []
        k = bisect.bisect_right(self.starts, i) - 1
        out: list[bytes] = []
        while self.starts[k] < j:
            base = self.starts[k]
            out += self._block_lines(k)[max(i - base, 0) : j - base]
            k += 1
        return out


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _emit(out: list[str], prefix: str, line: bytes) -> None:
    out.append(prefix + line.decode("utf-8", errors="replace"))
    if not line.endswith(b"\n"):
        out.append("\n\\ No newline at end of file\n")


Opcode = tuple[str, int, int, int, int]


def _unique_anchors(a: list[bytes], b: list[bytes], a0: int, b0: int) -> list[tuple[int, int]]:
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
    js = [j for _, j in pairs]
    if js == sorted(js):  # nothing moved (the usual case): the whole list is the chain
        return [(i + a0, j + b0) for i, j in pairs]
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


class _Ops(list[Opcode]):
    """Opcodes that merge adjacent equal runs and drop empty ones as they are added."""

    def add(self, tag: str, i1: int, i2: int, j1: int, j2: int) -> None:
        if i1 == i2 and j1 == j2:
            return
        if self and self[-1][0] == tag == "equal":
            self[-1] = ("equal", self[-1][1], i2, self[-1][3], j2)
        else:
            self.append((tag, i1, i2, j1, j2))


def _opcodes(a: list[bytes], b: list[bytes]) -> _Ops:
    """The anchored diff of two sequences (lines, or blocks of lines)."""
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi_a, hi_b = len(a), len(b)
    while hi_a > lo and hi_b > lo and a[hi_a - 1] == b[hi_b - 1]:
        hi_a -= 1
        hi_b -= 1
    ops = _Ops()
    add = ops.add
    i = j = lo
    run_i = run_j = 0  # where the equal run that ends at (i, j) starts: the common prefix first
    for ai, bj in [*_unique_anchors(a[lo:hi_a], b[lo:hi_b], lo, lo), (hi_a, hi_b)]:
        # the gap before this anchor: most are empty or equal, then one-sided, the rest difflib's
        if ai - i != bj - j or (ai != i and a[i:ai] != b[j:bj]):
            add("equal", run_i, i, run_j, j)
            if i == ai or j == bj:
                add("insert" if i == ai else "delete", i, ai, j, bj)
            else:
                for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                    None, a[i:ai], b[j:bj]
                ).get_opcodes():
                    add(tag, i + i1, i + i2, j + j1, j + j2)
            run_i, run_j = ai, bj
        i, j = ai + 1, bj + 1  # past the anchor, which extends the run
    add("equal", run_i, len(a), run_j, len(b))  # the last run ends with the common suffix
    return ops


def _block_opcodes(a: _Lines, b: _Lines) -> _Ops:
    """Line opcodes found block by block: only blocks that differ get a line diff.

    A 150,000-line ``raw_memories.md`` is ~18,000 blocks, nearly all unchanged; diffing those
    first leaves line work only where the content changed. A file without blank lines is one
    block, which is the plain line diff of the whole file. Changes with at most
    ``DIFF_JOIN_BLOCKS`` equal blocks between them are line-diffed as one region: with repeated
    blocks the block diff may pair the wrong copies, which the line diff of the region undoes.
    """
    ops = _Ops()
    pending: list[int] | None = None  # [k1, k2, m1, m2] of the region not yet line-diffed
    block_ops = _opcodes(a.blocks, b.blocks)
    for n, (tag, k1, k2, m1, m2) in enumerate(block_ops):
        inner = 0 < n < len(block_ops) - 1
        if tag == "equal" and not (inner and k2 - k1 <= DIFF_JOIN_BLOCKS):
            if pending is not None:
                _region(ops, a, b, *pending)
                pending = None
            ops.add("equal", a.starts[k1], a.starts[k2], b.starts[m1], b.starts[m2])
        elif pending is None:
            pending = [k1, k2, m1, m2]
        else:
            pending[1], pending[3] = k2, m2
    if pending is not None:
        _region(ops, a, b, *pending)
    return ops


def _region(ops: _Ops, a: _Lines, b: _Lines, k1: int, k2: int, m1: int, m2: int) -> None:
    i1, i2, j1, j2 = a.starts[k1], a.starts[k2], b.starts[m1], b.starts[m2]
    if i1 == i2 or j1 == j2:
        ops.add("insert" if i1 == i2 else "delete", i1, i2, j1, j2)
        return
    for t, x1, x2, y1, y2 in _opcodes(a[i1:i2], b[j1:j2]):
        ops.add(t, i1 + x1, i1 + x2, j1 + y1, j1 + y2)


class _Grouper(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """difflib's hunk grouping over opcodes found elsewhere."""

    def __init__(self, ops: list[Opcode]) -> None:
        # no super().__init__(): it would index every line of b for matching we never use
        self._ops = ops

    def get_opcodes(self) -> list[Opcode]:  # type: ignore[override]
        return list(self._ops)


def _hunks(ops: list[Opcode], a: _Lines | _Stretches, b: _Lines | _Stretches) -> Iterator[str]:
    for group in _Grouper(ops).get_grouped_opcodes(DIFF_CONTEXT_LINES):
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
    out.append(_hunk_text(old or b"", new or b""))
    return "".join(out)


def _hunk_text(old: bytes, new: bytes, *, by_blocks: bool = True) -> str:
    """The hunks from ``old`` to ``new``; ``by_blocks=False`` is the plain whole-file line diff."""
    if not by_blocks:
        whole_a, whole_b = _Lines(_one_block(old)), _Lines(_one_block(new))
        return "".join(_hunks(_block_opcodes(whole_a, whole_b), whole_a, whole_b))
    return "".join(_hunks(*_sync_opcodes(old, new)))


def _sync_opcodes(old: bytes, new: bytes) -> tuple[_Ops, _Stretches, _Stretches]:
    """Line opcodes for the pieces ``_sync`` finds, with line access to both files."""
    a, b = _Stretches(old), _Stretches(new)
    ops = _Ops()
    for same, i1, i2, j1, j2 in _sync(old, new):
        la, lb = len(a), len(b)
        if same:  # the same bytes on both sides: their lines are only counted
            n = old.count(b"\n", i1, i2) + (i2 == len(old) > i1 and old[-1:] != b"\n")
            a.add_equal(i1, i2, n)
            b.add_equal(j1, j2, n)
            ops.add("equal", la, la + n, lb, lb + n)
            continue
        wa, wb = _Lines(_blocks(old[i1:i2])), _Lines(_blocks(new[j1:j2]))
        for tag, x1, x2, y1, y2 in _block_opcodes(wa, wb):
            ops.add(tag, la + x1, la + x2, lb + y1, lb + y2)
        a.add_window(wa)
        b.add_window(wb)
    return ops, a, b


# -- skipping what did not change ---------------------------------------------------------------


def _sync(a: bytes, b: bytes) -> Iterator[tuple[bool, int, int, int, int]]:
    """Cut two files into stretches of identical bytes and the windows between them.

    Identical stretches are found by comparing memory (``startswith`` on a view: no copy, no
    line objects); each difference is widened to a window of blocks that is diffed until both
    sides line up again on more than ``DIFF_JOIN_BLOCKS`` equal blocks. Every cut is at a line
    start, so each piece can be diffed (or counted) on its own.
    """
    vb = memoryview(b)
    i = j = 0
    while i < len(a) or j < len(b):
        n = _common_run(a, i, vb, j)
        if i + n == len(a) and j + n == len(b):
            yield True, i, i + n, j, j + n
            return
        # back to the last cut inside the identical run: a block start, else a line start
        k = a.rfind(b"\n\n", i, i + n)
        cut = k + 2 if k >= 0 else max(i, a.rfind(b"\n", i, i + n) + 1)
        if cut > i:
            yield True, i, cut, j, j + cut - i
            i, j = cut, j + cut - i
        i2, j2 = _resync(a, i, b, j)
        yield False, i, i2, j, j2
        i, j = i2, j2


def _common_run(a: bytes, i: int, vb: memoryview, j: int) -> int:
    """How many bytes ``a[i:]`` and ``b[j:]`` share, found by galloping then halving memcmp."""
    limit = min(len(a) - i, len(vb) - j)
    done, step = 0, 4096
    while done < limit:
        size = min(step, limit - done)
        if a.startswith(vb[j + done : j + done + size], i + done):
            done += size
            step *= 2
            continue
        while size > 1:  # the first difference is in [done, done + size)
            half = size // 2
            if a.startswith(vb[j + done : j + done + half], i + done):
                done, size = done + half, size - half
            else:
                size = half
        return done
    return done


def _resync(a: bytes, i: int, b: bytes, j: int) -> tuple[int, int]:
    """Where ``a`` and ``b`` line up again after a difference at ``a[i]``/``b[j]`` (block starts)."""
    size = DIFF_SYNC_WINDOW_BYTES
    while True:
        ea, eb = _cut_after(a, i + size), _cut_after(b, j + size)
        wa, wb = _blocks(a[i:ea]), _blocks(b[j:eb])
        for tag, k1, k2, m1, _ in _opcodes(wa, wb):
            if tag == "equal" and k2 - k1 > DIFF_JOIN_BLOCKS and (k1 or m1):
                return i + _offset(wa, k1), j + _offset(wb, m1)
        if ea == len(a) and eb == len(b):
            return ea, eb
        size *= 8


def _cut_after(data: bytes, pos: int) -> int:
    """The first block end at or after ``pos`` (the end of the file if none)."""
    k = data.find(b"\n\n", pos) if pos < len(data) else -1
    return len(data) if k < 0 else k + 2


def _offset(blocks: list[bytes], k: int) -> int:
    """Byte offset of block ``k`` (no tail before it: each block before had its "\\n\\n" cut off)."""
    return sum(map(len, blocks[:k])) + 2 * k


class _Stretches:
    """Line access over a file cut by ``_sync``: identical stretches read in place, windows split."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]  # first line of each piece, then the line count
        self.pieces: list[tuple[int, int] | _Lines] = []

    def __len__(self) -> int:
        return self.starts[-1]

    def add_equal(self, lo: int, hi: int, lines: int) -> None:
        self.pieces.append((lo, hi))
        self.starts.append(self.starts[-1] + lines)

    def add_window(self, lines: _Lines) -> None:
        self.pieces.append(lines)
        self.starts.append(self.starts[-1] + len(lines))

    def __getitem__(self, span: slice) -> list[bytes]:
        i, j = span.start, span.stop
        out: list[bytes] = []
        k = bisect.bisect_right(self.starts, i) - 1
        while i < j and k < len(self.pieces) and self.starts[k] < j:
            base, end = self.starts[k], self.starts[k + 1]
            x, y = max(i, base) - base, min(j, end) - base
            piece = self.pieces[k]
            if isinstance(piece, _Lines):
                out += piece[x:y]
            else:
                out += _stretch_lines(self.data, *piece, end - base, x, y)
            k += 1
        return out


def _stretch_lines(data: bytes, lo: int, hi: int, n: int, x: int, y: int) -> list[bytes]:
    """Lines ``x:y`` of the ``n``-line stretch ``data[lo:hi]``, split from its nearer end.

    Hunks only ask for context lines next to a change, so a few KB are split, not the stretch.
    """
    size = 4096
    while True:
        if x <= n - y:  # near the start: the first y lines must be complete
            end = min(hi, lo + size)
            chunk = data[lo:end]
            if end == hi or chunk.count(b"\n") >= y:
                return _lines(chunk)[x:y]
        else:  # near the end: its first line may be cut, the last n - x must be whole
            start = max(lo, hi - size)
            lines = _lines(data[start:hi])
            if start == lo:
                return lines[x:y]
            if len(lines) - 1 >= n - x:
                return lines[len(lines) - (n - x) : len(lines) - (n - y)]
        size *= 8


def _one_block(data: bytes) -> list[bytes]:
    return [b"\n\n" + data] if data else []  # the tail's form: the whole file is one block


def cap_utf8(text: str, cap_bytes: int) -> tuple[str, bool]:
    """``text`` cut to at most ``cap_bytes`` UTF-8 bytes at a character boundary."""
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= cap_bytes:
        return text, False
    return raw[: max(cap_bytes, 0)].decode("utf-8", errors="ignore"), True
