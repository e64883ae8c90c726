"""The line diff behind the workspace diff: the block-by-block path must give a correct patch.

Every patch here is applied back to the old text by a small applier, so a wrong hunk (a line
dropped, duplicated or shifted, a bad header count, a misplaced "No newline" marker) fails.
"""

from __future__ import annotations

import random
import re

import pytest

import memoryd.folder.linediff as ld
from memoryd.folder.linediff import (
    _blocks,
    _hunk_text,
    _Lines,
    _lines,
    _stretch_lines,
    _sync,
    _sync_opcodes,
    file_patch,
)
from memoryd.tuning import DIFF_CONTEXT_LINES

HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n")
NO_EOL = "\\ No newline at end of file\n"


def text_lines(text: str) -> list[str]:
    """Split on "\\n" only, as git (and the diff) does."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def apply(hunks: str, old: str) -> str:
    """``old`` with the unified-diff ``hunks`` applied; asserts every context and removed line.

    Also that each hunk carries exactly ``DIFF_CONTEXT_LINES`` of context (fewer only at an end
    of the file) and that hunks closer than twice that were merged, as ``git diff`` does.
    """
    src = text_lines(old)
    lines = text_lines(hunks)
    out: list[str] = []
    pos = k = 0
    last_change_end = None
    while k < len(lines):
        m = HEADER.fullmatch(lines[k])
        assert m, f"not a hunk header: {lines[k]!r}"
        a_len = int(m[2]) if m[2] is not None else 1
        b_len = int(m[4]) if m[4] is not None else 1
        start = int(m[1]) - 1 if a_len else int(m[1])
        assert start >= pos, "hunks overlap or go backwards"
        out += src[pos:start]
        pos, used_a, used_b = start, 0, 0
        tags = ""
        k += 1
        while k < len(lines) and not lines[k].startswith("@@"):
            tag, body = lines[k][0], lines[k][1:]
            tags += tag
            if k + 1 < len(lines) and lines[k + 1] == NO_EOL:
                body = body[:-1]
                k += 1
            assert tag in " -+", f"bad line {lines[k]!r}"
            if tag != "+":
                assert src[pos] == body, f"line {pos + 1}: {src[pos]!r} != {body!r}"
                pos += 1
                used_a += 1
            if tag != "-":
                out.append(body)
                used_b += 1
            k += 1
        assert (used_a, used_b) == (a_len, b_len), "hunk header counts are wrong"
        lead, trail = len(tags) - len(tags.lstrip(" ")), len(tags) - len(tags.rstrip(" "))
        assert lead < len(tags), "a hunk without a change"
        assert lead == DIFF_CONTEXT_LINES or start == 0, "leading context"
        assert trail == DIFF_CONTEXT_LINES or pos == len(src), "trailing context"
        if last_change_end is not None:
            assert start + lead - last_change_end > 2 * DIFF_CONTEXT_LINES, "hunks not merged"
        last_change_end = pos - trail
    return "".join(out + src[pos:])


def check(old: bytes, new: bytes) -> str:
    hunks = _hunk_text(old, new)

    def decode(data: bytes) -> str:
        return data.decode("utf-8", errors="replace")

    assert apply(hunks, decode(old)) == decode(new)
    return hunks


def changed(hunks: str) -> int:
    return sum(1 for line in text_lines(hunks) if line[:1] in "+-")


# -- blocks and lines ---------------------------------------------------------------------------

EDGES = [
    b"",
    b"\n",
    b"\n\n",
    b"\n\n\n",
    b"a",
    b"a\n",
    b"a\n\n",
    b"a\n\nb",
    b"a\n\nb\n",
    b"a\n\n\n\nb\n\n",
    b"\n\na\n\n",
    b"x\r\n\r\ny\r\n",
]


@pytest.mark.parametrize("data", EDGES)
def test_lines_over_blocks_are_the_lines_of_the_file(data: bytes) -> None:
    view = _Lines(_blocks(data))
    whole = _lines(data)
    assert len(view) == len(whole)
    for i in range(len(whole) + 1):
        for j in range(i, len(whole) + 1):
            assert view[i:j] == whole[i:j]


def test_lines_over_blocks_on_random_files() -> None:
    rng = random.Random(7)
    for _ in range(300):
        data = b"".join(rng.choice([b"\n", b"a\n", b"bc", b"\r\n", b"\xff"]) for _ in range(60))
        view, whole = _Lines(_blocks(data)), _lines(data)
        assert len(view) == len(whole)
        i = rng.randrange(len(whole) + 1)
        j = rng.randrange(i, len(whole) + 1)
        assert view[i:j] == whole[i:j]


def test_stretch_lines_from_either_end() -> None:
    rng = random.Random(11)
    for _ in range(300):
        lines = [b"x" * rng.choice([0, 3, 5000]) + b"\n" for _ in range(rng.randrange(2, 40))]
        data = b"".join(lines)
        if rng.random() < 0.3:
            data = data[:-1]  # no final newline
        whole = _lines(data)
        lo = rng.randrange(len(whole))
        hi = rng.randrange(lo + 1, len(whole) + 1)
        start = sum(map(len, whole[:lo]))
        stop = start + sum(map(len, whole[lo:hi]))
        x = rng.randrange(hi - lo)
        y = rng.randrange(x, hi - lo + 1)
        got = _stretch_lines(data, start, stop, hi - lo, x, y)
        assert got == whole[lo:hi][x:y]


# -- arbitrary edits ----------------------------------------------------------------------------


def _random_line(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.3:  # repeated template lines, blank lines and CRLF
        return rng.choice([b"- item\n", b"outcome: partial\n", b"\n", b"\n", b"x\r\n", b"\r\n"])
    if r < 0.35:
        return b"caf\xe9 \xff\xc3\n"  # not UTF-8
    return b"line %d\n" % rng.randrange(40 if rng.random() < 0.3 else 10**6)


def _random_file(rng: random.Random, n: int) -> list[bytes]:
    return [_random_line(rng) for _ in range(n)]


def _edit(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    lines = list(lines)
    if rng.random() < 0.05:
        return _random_file(rng, rng.randrange(60))  # whole-file replacement
    for _ in range(rng.randrange(1, 8)):
        at = rng.randrange(len(lines) + 1)
        op = rng.choice(["insert", "delete", "replace", "move", "head", "tail"])
        if op == "insert":
            lines[at:at] = _random_file(rng, rng.randrange(1, 6))
        elif op == "delete":
            del lines[at : at + rng.randrange(1, 6)]
        elif op == "replace":
            lines[at : at + rng.randrange(1, 4)] = _random_file(rng, rng.randrange(1, 4))
        elif op == "move" and lines:
            src = rng.randrange(len(lines))
            chunk = lines[src : src + 5]
            del lines[src : src + 5]
            at = rng.randrange(len(lines) + 1)
            lines[at:at] = chunk
        elif op == "head":
            lines[: rng.randrange(3)] = _random_file(rng, rng.randrange(3))
        elif op == "tail":
            lines[len(lines) - rng.randrange(3) :] = _random_file(rng, rng.randrange(3))
    return lines


def _join(rng: random.Random, lines: list[bytes]) -> bytes:
    data = b"".join(lines)
    return data.rstrip(b"\n") if rng.random() < 0.3 else data  # often no final newline


@pytest.mark.slow  # 3,000 random edits
@pytest.mark.parametrize("window", [1, 64, 8192])
def test_random_edits_give_patches_that_apply_exactly(
    window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small windows make every difference resync several times inside one file
    monkeypatch.setattr(ld, "DIFF_SYNC_WINDOW_BYTES", window)
    rng = random.Random(20261201 + window)
    for _ in range(1000):
        old = _join(rng, _random_file(rng, rng.randrange(200)))
        new = _join(rng, _edit(rng, _lines(old)))
        hunks = check(old, new)
        assert (hunks == "") == (old == new)


def test_sync_pieces_cover_both_files_and_equal_pieces_are_equal() -> None:
    rng = random.Random(5)
    for _ in range(300):
        old = _join(rng, _random_file(rng, rng.randrange(200)))
        new = _join(rng, _edit(rng, _lines(old)))
        i = j = 0
        for same, i1, i2, j1, j2 in _sync(old, new):
            assert (i1, j1) == (i, j) and i1 <= i2 and j1 <= j2
            assert i1 == 0 or old[i1 - 1 : i1] == b"\n"  # every cut at a line start
            assert j1 == 0 or new[j1 - 1 : j1] == b"\n"
            if same:
                assert old[i1:i2] == new[j1:j2]
            i, j = i2, j2
        assert (i, j) == (len(old), len(new))


def test_sync_opcodes_cover_every_line_and_read_them_back() -> None:
    rng = random.Random(6)
    for _ in range(300):
        old = _join(rng, _random_file(rng, rng.randrange(200)))
        new = _join(rng, _edit(rng, _lines(old)))
        ops, a, b = _sync_opcodes(old, new)
        want_a, want_b = _lines(old), _lines(new)
        assert (len(a), len(b)) == (len(want_a), len(want_b))
        assert a[0 : len(a)] == want_a and b[0 : len(b)] == want_b
        i = j = 0
        for tag, i1, i2, j1, j2 in ops:
            assert (i1, j1) == (i, j)
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]
            i, j = i2, j2
        assert (i, j) == (len(want_a), len(want_b))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b"", b"a\n\nb\n"),
        (b"a\n\nb\n", b""),
        (b"a\n\nb", b"a\n\nc"),  # the tail block, without a final newline on either side
        (b"a\n\nb", b"a\n\nb\n"),
        (b"a\n\nb\n", b"a\n\nb"),
        (b"a\n\nb\n\n", b"a\n\nb"),
        (b"a\n\nb", b"b\n\na"),
        (b"x\r\n\r\ny\r\n", b"x\r\n\r\nz\r\n"),  # CRLF: no "\n\n" cut, one block
        (b"p\n\n" * 50 + b"q\n", b"q\n" + b"p\n\n" * 50),
    ],
)
def test_edge_edits_apply_exactly(old: bytes, new: bytes) -> None:
    check(old, new)


def test_missing_final_newline_is_marked_on_the_last_block() -> None:
    assert _hunk_text(b"a\n\nb", b"a\n\nc") == (f"@@ -1,3 +1,3 @@\n a\n \n-b\n{NO_EOL}+c\n{NO_EOL}")


def test_different_invalid_bytes_are_a_change() -> None:
    # Both decode to U+FFFD; comparing decoded text once hid this edit.
    patch = file_patch("latin.md", 0o100644, b"caf\xe9\n", 0o100644, b"caf\xe8\n")
    assert patch.endswith("@@ -1 +1 @@\n-caf\ufffd\n+caf\ufffd\n")


# -- session-structured files (raw_memories.md) -------------------------------------------------

TEMPLATE = [b"outcome: partial\n", b"- item\n", b"references:\n", b"knowledge:\n", b"---\n"]


def _session(rng: random.Random, n: int) -> list[bytes]:
    lines = [
        b"## Session `ses_%06d`\n" % n,
        b"\n",
        b"updated_at: %d\n" % rng.randrange(10**6),
        b"\n",
    ]
    for _ in range(rng.randrange(3, 15)):
        fact = b"- fact %d\n" % rng.randrange(10**9)
        lines.append(rng.choice(TEMPLATE) if rng.random() < 0.4 else fact)
        if rng.random() < 0.1:
            lines.append(b"\n")
    return [*lines, b"\n"]


def _render(sessions: dict[int, list[bytes]]) -> bytes:
    return b"".join(b"".join(sessions[k]) for k in sorted(sessions))


def _session_edits(rng: random.Random, ops: str) -> tuple[bytes, bytes]:
    old = {i: _session(rng, i) for i in rng.sample(range(10**5), rng.randrange(1, 60))}
    new = {k: list(v) for k, v in old.items()}
    for _ in range(rng.randrange(1, 6)):
        op, key = rng.choice(ops), rng.choice(sorted(new))
        at = rng.randrange(4, len(new[key]))
        if op == "r" and new[key][at] != b"\n":  # a line rewritten in place
            new[key][at] = b"- changed %d\n" % rng.randrange(10**9)
        elif op == "i":  # a new fact from a re-extraction
            new[key].insert(at, b"- Correction: %d\n" % rng.randrange(10**9))
        elif op == "d" and len(new) > 1:  # a session no longer selected
            del new[key]
        elif op == "a":
            fresh = rng.randrange(10**5)
            new.setdefault(fresh, _session(rng, fresh))
    return _render(old), _render(new)


def test_session_edits_show_no_more_lines_than_the_whole_file_diff() -> None:
    rng = random.Random(4096)
    for _ in range(300):
        old, new = _session_edits(rng, "rida")
        assert changed(check(old, new)) <= changed(_hunk_text(old, new, by_blocks=False))


def test_inserted_facts_diff_exactly_as_the_whole_file_diff() -> None:
    # phase 2's usual change (the bench's re-extraction): lines added inside a session entry
    rng = random.Random(41)
    for _ in range(200):
        old, new = _session_edits(rng, "i")
        assert check(old, new) == _hunk_text(old, new, by_blocks=False)


def test_unchanged_blocks_are_not_split_into_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    sessions = {i: _session(rng, i) for i in range(4096)}
    old = _render(sessions)
    sessions[2000].insert(5, b"- Correction: a new fact\n")
    new = _render(sessions)
    split: list[int] = []
    real = ld._lines

    def spy(data: bytes) -> list[bytes]:
        split.append(len(data))
        return real(data)

    monkeypatch.setattr(ld, "_lines", spy)
    hunks = _hunk_text(old, new)
    assert "+- Correction: a new fact\n" in hunks and changed(hunks) == 1
    assert sum(split) < len(old) // 100  # a few blocks around the edit, not the whole file
