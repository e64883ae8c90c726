r"""cl100k counted in the calling process from a small copy of the table, so a pass seldom needs
the tokenizer helper.

A helper start costs ~150 ms of CPU (an interpreter, tiktoken, the table built in Rust) and a
pass counts a few kilobytes with it. Counting itself is two small steps: one regular expression
cuts the text into pieces, and a piece that is not itself a token has its bytes merged pair by
pair, lowest rank first. Both run here from a ~2 MB file the helper writes
(:func:`memoryd.tokenizer.keep_local_copy`): every token's bytes in rank order, and a hash table
from a token's CRC-32 to its rank, mapped in place, so a lookup is a slot or two and one
comparison of bytes; no 100k-entry dictionary is built in this heap.

The pattern is tiktoken's, rewritten for Python's own ``re`` (:func:`translate`): its Unicode
classes (``\p{L}``, ``\p{N}``, ``\s``) become explicit character sets written out from this
Python's ``unicodedata``, so no other regex engine is loaded into the daemon (the ``regex``
module alone would stay ~1.4 MB in it for good).

Counts must be tiktoken's, so a text is counted here only when the answer cannot differ:
- every character was assigned by Unicode 3.2. Python's tables and tiktoken's Rust engine each
  carry their own Unicode version, and a character one knows and the other does not is a letter
  to one and punctuation to the other. Every character of Unicode 3.2 is classed alike (a test
  checks them all); text with an emoji or a newer script goes to the helper;
- no piece needing merges is longer than :data:`MAX_MERGED_PIECE` bytes, nor do its merges add
  up past :data:`MAX_MERGE_WORK` (merging is quadratic in a piece, cheap in Rust, not in
  Python), and the text is at most :data:`MAX_LOCAL_CHARS`;
- the helper writes the file only after both counted a probe of every character class alike
  (:func:`probe_text`), and the file names the Python and the table it came from, so an
  upgrade of either makes it stale until the helper writes it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import mmap
import os
import re
import struct
import sys
import unicodedata
import zlib
from array import array
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

from memoryd.errors import PathError
from memoryd.fsutil import atomic_write, plain_file

MAX_LOCAL_CHARS = 200_000  # past this the helper's Rust is cheaper than Python, start included
MAX_MERGED_PIECE = 256  # bytes of one piece merged here; longer pieces go to the helper
# merging in one text, as the sum of each merged piece's bytes squared: ~50 ms at most here (text
# made of pieces that are no token, 200,000 characters of them, took 1.2 s before this cap)
MAX_MERGE_WORK = 4_000_000
_MAGIC = b"memoryd-bpe-1\n"
_HEAD = len(_MAGIC) + 32
_U32 = struct.Struct("<I")
_NO_PAIR = 1 << 62  # the rank of a pair that is no token: higher than any real rank
_CACHE_MAX = 8_000  # pieces remembered between calls (words repeat; ~1 MB at most)
_OLD = unicodedata.ucd_3_2_0
# what Rust's regex (and the Unicode standard) calls White_Space: Python's own \s also takes
# U+001C..U+001F, which tiktoken's pattern does not
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


class Table:
    """Every token's bytes in rank order, an open-addressed index from a token's CRC-32 to its
    rank, and the splitting pattern: what counting and cutting need, as tiktoken does them."""

    def __init__(self, pattern: str, blob: bytes | memoryview, offsets: array[int] | memoryview,
                 slots: array[int] | memoryview) -> None:  # fmt: skip
        self._pattern = pattern  # already for ``re``: see translate()
        self._split = re.compile(pattern).findall
        self._blob, self._offsets = blob, offsets  # token r is blob[offsets[r]:offsets[r + 1]]
        self._slots = slots  # rank + 1 at the CRC-32's slot or the next free one; 0: empty
        self._mask = len(slots) - 1
        self._pieces: dict[str, tuple[int, ...]] = {}
        self._bytes = [self._rank(bytes((b,))) or 0 for b in range(256)]  # each byte is a token

    @classmethod
    def build(cls, ranks: dict[bytes, int], pattern: str) -> Table:
        by_rank: list[bytes] = [b""] * len(ranks)
        for token, rank in ranks.items():
            by_rank[rank] = token  # an IndexError for a table whose ranks are not 0..n-1
        if not all(by_rank):
            raise ValueError("the ranks are not 0..n-1")
        offsets = array("I", [0])
        offsets.extend(accumulate(map(len, by_rank)))
        size = 1 << (len(by_rank) * 5 // 2).bit_length()  # at most 40% full: short probe runs
        mask = size - 1
        slots = array("I", (0,)) * size
        for rank, token in enumerate(by_rank):
            at = zlib.crc32(token) & mask
            while slots[at]:
                at = (at + 1) & mask
            slots[at] = rank + 1
        blob = bytearray(offsets[-1])
        for token, start in zip(by_rank, offsets, strict=False):  # (b"".join: ~8 MB at peak)
            blob[start : start + len(token)] = token
        return cls(pattern, bytes(blob), offsets, slots)

    # --- counting ------------------------------------------------------------------------------

    def count(self, text: str) -> int | None:
        """Tokens in ``text``, or None when the helper must count it (see the module's rules)."""
        tokens = self._pieces_of(text)
        return None if tokens is None else sum(map(len, tokens))

    def encode(self, text: str) -> list[int] | None:
        tokens = self._pieces_of(text)
        return None if tokens is None else [t for piece in tokens for t in piece]

    def decode(self, tokens: list[int]) -> str:
        """The text of ``tokens`` as :meth:`encode` gives them (ordinary tokens only: no special
        token is ever produced here)."""
        off = self._offsets
        return b"".join(self._blob[off[t] : off[t + 1]] for t in tokens).decode("utf-8", "replace")

    def _pieces_of(self, text: str) -> list[tuple[int, ...]] | None:
        if len(text) > MAX_LOCAL_CHARS:
            return None
        text = _without_surrogates(text)
        if not settled(text):
            return None
        cache = self._pieces
        room = _CACHE_MAX - len(cache)  # the first pieces met stay: the common words come early
        work = 0  # bytes squared merged so far: merging is quadratic in a piece
        out = []
        for piece in self._split(text):
            tokens = cache.get(piece)
            if tokens is None:
                raw = piece.encode("utf-8")
                try:
                    whole = self._rank(raw)
                    if whole is not None:
                        tokens = (whole,)
                    else:
                        work += len(raw) ** 2
                        if len(raw) > MAX_MERGED_PIECE or work > MAX_MERGE_WORK:
                            return None
                        tokens = self._merge(raw)
                except IndexError:  # a rank past the table: not a file the helper wrote
                    return None
                if room > 0:
                    cache[piece] = tokens
                    room -= 1
            out.append(tokens)
        return out

    def _merge(self, piece: bytes) -> tuple[int, ...]:
        """Merge adjacent parts, the pair of lowest rank first and the leftmost of equal ones,
        until no pair is a token: tiktoken's order, so the same tokens."""
        cuts = list(range(len(piece) + 1))  # part i is piece[cuts[i]:cuts[i + 1]]
        parts = list(map(self._bytes.__getitem__, piece))
        pairs = [self._pair(piece, cuts, i) for i in range(len(piece) - 1)]
        while pairs:
            best = min(pairs)
            if best == _NO_PAIR:
                break
            i = pairs.index(best)
            del cuts[i + 1], pairs[i], parts[i + 1]
            parts[i] = best
            if i > 0:
                pairs[i - 1] = self._pair(piece, cuts, i - 1)
            if i < len(pairs):
                pairs[i] = self._pair(piece, cuts, i)
        return tuple(parts)

    def _pair(self, piece: bytes, cuts: list[int], i: int) -> int:
        rank = self._rank(piece[cuts[i] : cuts[i + 2]])
        return _NO_PAIR if rank is None else rank

    def _rank(self, token: bytes) -> int | None:
        slots, off, mask = self._slots, self._offsets, self._mask
        at = zlib.crc32(token) & mask
        while rank := slots[at]:
            if self._blob[off[rank - 1] : off[rank]] == token:
                return rank - 1
            at = (at + 1) & mask
        return None

    # --- the file --------------------------------------------------------------------------------

    def parts(self, meta: dict[str, Any]) -> list[bytes | memoryview]:
        """The file's body, in parts (no copy of the arrays): the head's length, the head (what
        it was written for, the pattern, the arrays' lengths), then the arrays and the token
        bytes, each 4-byte aligned so a reader maps them in place. :func:`save` frames it."""
        offsets, slots = memoryview(self._offsets).cast("B"), memoryview(self._slots).cast("B")
        head = marshal.dumps((meta, self._pattern, len(offsets) // 4, len(slots) // 4))
        head += bytes(-len(head) % 4)
        return [_U32.pack(len(head)), head, offsets, slots, self._blob]


def load(path: Path) -> Table | None:
    """The table in ``path`` when it is whole and still fits what is installed (:func:`meta_for`
    its table file); None otherwise: the helper counts then, and writes the file anew.

    The file is mapped, not read: its arrays are used where they lie (no copy in this heap,
    which a daemon would keep)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # missing, unreadable, or a link: never followed
        return None
    try:
        if not plain_file(os.fstat(fd)):
            return None
        mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # empty: nothing to map
        return None
    finally:
        os.close(fd)
    data = memoryview(mapped)
    if len(data) < _HEAD + 4 or data[: len(_MAGIC)] != _MAGIC:
        return None
    if hashlib.sha256(data[_HEAD:]).digest() != data[len(_MAGIC) : _HEAD]:
        return None
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        # the digest read every page in; a pass looks up a few thousand tokens, so let the
        # pages come back one by one from the page cache as they are used (RSS: ~1 MB, not 2)
        mapped.madvise(mmap.MADV_DONTNEED)
    try:
        (size,) = _U32.unpack(data[_HEAD : _HEAD + 4])
        at = _HEAD + 4 + size
        meta, pattern, n_offsets, n_slots = marshal.loads(data[_HEAD + 4 : at])
        if not isinstance(meta, dict) or meta != meta_for(
            str(meta.get("table")), meta.get("source")
        ):
            return None
        offsets = data[at : at + 4 * n_offsets].cast("I")
        slots = data[at + 4 * n_offsets : at + 4 * (n_offsets + n_slots)].cast("I")
        blob = data[at + 4 * (n_offsets + n_slots) :]
        if len(offsets) != n_offsets or len(slots) != n_slots or n_slots & (n_slots - 1):
            return None
        if n_slots < 2 * n_offsets or offsets[-1] != len(blob):
            return None  # too full for a probe run to end at an empty slot, or cut short
        if not _has_empty_slot(mapped, at + 4 * n_offsets, at + 4 * (n_offsets + n_slots)):
            return None  # a lookup of a missing token would probe for ever
        return Table(pattern, blob, offsets, slots)
    except (ValueError, TypeError, EOFError, IndexError):  # a digest over something else
        return None


def _has_empty_slot(mapped: mmap.mmap, start: int, end: int) -> bool:
    """Whether a 4-byte-aligned zero word lies in ``mapped[start:end]`` (a file the helper wrote
    has ~60% of its slots empty: the first is found at once)."""
    at = mapped.find(bytes(4), start, end)
    while at != -1 and (at - start) % 4:
        at = mapped.find(bytes(4), at + 1, end)
    return at != -1


def save(path: Path, parts: list[bytes | memoryview]) -> None:
    """Write the magic, the digest of ``parts``, then ``parts`` (:func:`memoryd.fsutil.atomic_write`:
    synced, never through a link); a file damaged later fails its digest and is written again."""
    body = b"".join(parts)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _MAGIC + hashlib.sha256(body).digest() + body)
    except (OSError, PathError):  # a read-only state folder: the helper goes on counting
        pass


def meta_for(table: str, source: str | None = None) -> dict[str, Any]:
    """What the file must have been written for: this Python (its ``re`` and its Unicode
    tables wrote the pattern), and the table file and the module that gave the pattern
    (``source``), both unchanged."""
    meta: dict[str, Any] = {
        "python": sys.version.split()[0],
        "unicode": unicodedata.unidata_version,
        "table": table,
        "source": source,
    }
    for key, name in (("stat", table), ("source_stat", source)):
        with contextlib.suppress(OSError, TypeError):
            st = os.stat(name)  # type: ignore[arg-type]  # None: TypeError, no stat
            meta[key] = [st.st_size, st.st_mtime_ns]
    return meta


def translate(pattern: str) -> str:
    """tiktoken's split pattern for Python's ``re``: ``\\p{L}``, ``\\p{N}`` and ``\\s`` written out
    as the characters they stand for (``\\S`` as their complement); any other Unicode class is
    refused (ValueError), so an unforeseen pattern is left to the helper."""
    sets = _classes()
    out: list[str] = []
    inside = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt == "p" and pattern[i + 2 : i + 3] == "{":
                end = pattern.index("}", i)
                name, i = pattern[i + 3 : end], end + 1
                if name not in ("L", "N"):
                    raise ValueError(f"the class \\p{{{name}}} has no translation")
                out.append(sets[name] if inside else f"[{sets[name]}]")
                continue
            if nxt in ("s", "S"):
                if nxt == "S" and inside:
                    raise ValueError("\\S inside a set has no translation")
                out.append(_SPACE if inside else f"[{'^' if nxt == 'S' else ''}{_SPACE}]")
                i += 2
                continue
            if nxt in ("P", "d", "D", "w", "W", "b", "B"):  # Unicode-dependent: not ours to guess
                raise ValueError(f"\\{nxt} has no translation")
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not inside:
            inside = True
        elif ch == "]" and inside:
            inside = False
        out.append(ch)
        i += 1
    return "".join(out)


def _classes() -> dict[str, str]:
    """Letters (``L``) and numbers (``N``) by general category, as set ranges.

    Only characters Unicode 3.2 assigned ever reach :class:`Table`, so only theirs must be
    right: a range runs on over any other character, and the sets stay a few hundred ranges
    (a smaller, faster compiled pattern)."""
    cats, old = unicodedata.category, _OLD.category
    runs: dict[str, list[tuple[int, int]]] = {"L": [], "N": []}
    start: dict[str, int | None] = {"L": None, "N": None}
    last = {"L": 0, "N": 0}
    for c in (*range(0xD800), *range(0xE000, 0x30000), *range(0xE0000, 0xE1000)):
        ch = chr(c)
        if old(ch) == "Cn":
            continue  # never counted here: either side of a range may take it
        major = cats(ch)[0]
        for cls in ("L", "N"):
            first = start[cls]
            if major == cls:
                if first is None:
                    start[cls] = c
                last[cls] = c
            elif first is not None:
                runs[cls].append((first, last[cls]))
                start[cls] = None
    for cls, first in start.items():
        if first is not None:
            runs[cls].append((first, last[cls]))
    return {
        major: "".join(_lit(a) if a == b else f"{_lit(a)}-{_lit(b)}" for a, b in ranges)
        for major, ranges in runs.items()
    }


def _lit(code: int) -> str:
    return "\\" + chr(code) if chr(code) in "\\]-^[" else chr(code)


def settled(text: str) -> bool:
    """Whether every character of ``text`` is one both engines classify alike (assigned by
    Unicode 3.2: older than any table either carries)."""
    if text.isascii():
        return True
    category = _OLD.category
    return all(category(ch) != "Cn" for ch in set(text))


def _without_surrogates(text: str) -> str:
    """tiktoken's own repair of a lone surrogate (which UTF-8 cannot carry): U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def agrees(table: Table, encode: Callable[[str], list[int]], stride: int = 29) -> bool:
    """Whether ``table`` counts the probe text as ``encode`` (tiktoken's) does, chunk by chunk."""
    probe = probe_text(stride)
    step = 16_000  # small chunks: the helper's peak RSS stays where the table put it
    for at in range(0, len(probe), step):
        chunk = probe[at : at + step]
        if table.count(chunk) != len(encode(chunk)):
            return False
    return True


def probe_text(stride: int) -> str:
    """Text on which a misread character class changes the count: every character before U+0800
    and one in ``stride`` of the rest that Unicode 3.2 assigned, each beside a letter, a digit, a
    space, an apostrophe and a line end, then the pattern's own cases (contractions, digit runs,
    spaces before a line end and at the very end). The helper checks a table against tiktoken
    with one in 29 (~0.4 s, once per install); the tests check every one."""
    chars = [
        chr(c)
        for c in (*range(0x800), *range(0x800, 0x110000, stride))
        if not 0xD800 <= c < 0xE000 and _OLD.category(chr(c)) != "Cn"
    ]
    probes = [f"x{c}'e\n1{c} {c}{c}\t" for c in chars]
    fixed = (
        "It's we'll they've you're I'D WE'LL THEY'VE 'S 's 'sx\n12345678901 3.14159 1,000,000\n"
        "a  b   c\t\td \r\n\r\n  \n   x   \n\n\n    def f(x):\n        return x  \n"
        "naïve café — “quotes” … → ß Σίσυφος Привет 日本語 한국어 עברית العربية हिन्दी\n"
        "<|endoftext|> ~~~ !!! ??? ... --- === ``` $$$ 0x1f 1e-9 a_b-c.d/e\\f \u00a0\u2003x   "
    )
    return "".join(probes) + fixed
