"""The regex plumbing the position rules share: a value pattern, group replacement, segments.

Transcript text is often a JSON string (tool input and output as opencode stores them), so a
newline may be the two characters ``\\n`` and a quote may be ``\\"``: every pattern here treats
those as line ends and quotes too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

from memoryd.redact.lazy import lazy
from memoryd.redact.prefilter import finditer_in, fold, text_index
from memoryd.redact.tokens import REDACTED

# A quoted literal (at any JSON escaping depth) or a bare word, as one group ``s`` (Python's re
# has no branch reset, so the quote is an optional group and a conditional picks the body).
VAL = (
    r"(?:(?P<q>\\*[\"'`]))?"
    r"(?P<s>(?(q)(?:(?!(?P=q))[^\n\\])*?|[^\s\"'`;|&<>()\\,]+))(?(q)(?P=q))"
)
# A quoted literal only.
QUOTED = r"(?P<q>\\*[\"'`])(?P<s>(?:(?!(?P=q))[^\n\\])*?)(?P=q)"
SEGMENT_END_RE = lazy(r"[\n;|]|&&|\\n")

Edit = Callable[[str], tuple[str, int]]


def lead(word: str) -> str:
    """``word`` as the start of a command or name: the literal first (the regex engine jumps to
    it), then the check that it starts a word or follows a JSON-escaped newline."""
    lit = re.escape(word)
    return rf"{lit}(?:(?<![\w\-./]{lit})|(?<=\\[nt]{lit}))"


def replace_group(m: re.Match[str], group: str = "s") -> str:
    whole = m.group()
    a, b = m.start(group) - m.start(), m.end(group) - m.start()
    return f"{whole[:a]}{REDACTED}{whole[b:]}"


def sub_where(regex: re.Pattern[str], judge: Callable[[re.Match[str], str], bool]) -> Edit:
    """Replace group ``s`` of every match that ``judge(match, text)`` accepts."""

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            if not judge(m, text):
                return m.group()
            count += 1
            return replace_group(m)

        return regex.sub(repl, text), count

    return apply


def apply_spans(text: str, spans: list[tuple[int, int]]) -> tuple[str, int]:
    """``text`` with each (start, end) span replaced by the marker; overlapping spans once."""
    if not spans:
        return text, 0
    out: list[str] = []
    copied = 0
    for start, end in sorted(set(spans)):
        if start < copied or start == end:
            continue
        out += [text[copied:start], REDACTED]
        copied = end
    return "".join(out) + text[copied:], len(out) // 2


def segment_start(text: str, i: int, reach: int = 2000) -> int:
    """Where the shell command around ``i`` starts (after ``; | && newline``), at most ``reach``
    back: the end of the last match a scan of :data:`SEGMENT_END_RE` over that stretch finds,
    looked for from the right (each ender is one ``rfind``; scanning the stretch from its start
    was most of the cost of the rules that ask)."""
    lo = max(0, i - reach)
    start = max(
        lo,
        text.rfind("\n", lo, i) + 1,
        text.rfind(";", lo, i) + 1,
        text.rfind("|", lo, i) + 1,
    )
    escaped = text.rfind("\\n", lo, i)
    if escaped >= 0:
        start = max(start, escaped + 2)
    amp = text.rfind("&&", lo, i)
    if amp >= 0 and amp + 2 > start:  # a scan pairs a run of "&" from where the run starts
        before = text[lo:amp]
        first = amp - (len(before) - len(before.rstrip("&")))
        start = max(start, first + (amp + 2 - first) // 2 * 2)
    return start


def segment_end(text: str, i: int) -> int:
    stop = SEGMENT_END_RE.search(text, i)
    return stop.start() if stop is not None else len(text)


def line_start(text: str, i: int, reach: int = 400) -> int:
    """Where the line around ``i`` starts (after a newline or an escaped ``\\n``), at most
    ``reach`` back. Two ``rfind`` calls: this runs for every hint word of every text."""
    lo = max(0, i - reach)
    nl = text.rfind("\n", lo, i)
    esc = text.rfind("\\n", lo, i)
    return max(lo, nl + 1 if nl >= 0 else lo, esc + 2 if esc >= 0 else lo)


def line_end(text: str, i: int, reach: int = 400) -> int:
    hi = min(len(text), i + reach)
    nl = text.find("\n", i, hi)
    esc = text.find("\\n", i, hi)
    if nl < 0:
        return esc if esc >= 0 else hi
    return nl if esc < 0 else min(nl, esc)


_CALL = threading.local()


@contextmanager
def one_call() -> Iterator[None]:
    """Within one redaction, rules that share hint words share their windows; nothing outlives the
    call (a cache across calls would keep every text it saw alive in the daemon)."""
    if getattr(_CALL, "windows", None) is not None:
        yield  # a nested call (a JSON string inside the text): the outer call owns the cache
        return
    _CALL.windows = {}
    try:
        yield
    finally:
        _CALL.windows = None


def windows(text: str, words: tuple[str, ...], lines: int = 0) -> list[tuple[int, int]]:
    """The lines (and ``lines`` more after each) holding one of ``words`` (lower-case), merged.

    A rule whose regex would try every identifier of a long text runs only there: the cost of a
    rule then follows the number of places it could apply, not the size of the text."""
    cache: dict[tuple[int, tuple[str, ...], int], tuple[str, list[tuple[int, int]]]] | None = (
        getattr(_CALL, "windows", None)
    )
    key = (id(text), words, lines)
    if cache is not None and (hit := cache.get(key)) is not None and hit[0] is text:
        return hit[1]
    found = _windows(text, words, lines)
    if cache is not None:
        cache[key] = (text, found)
    return found


@lru_cache(maxsize=256)
def _folded(words: tuple[str, ...]) -> tuple[str, ...]:
    """The rule's words as the index folds text (``ſ`` is ``s`` there, as in ``re``)."""
    return tuple(fold(w) for w in words)


_RUN_ON_RE = re.compile(r"(?:[^\s\\]|\\(?!n))*")  # up to a space or an escaped newline


def _uncut(text: str, b: int) -> int:
    """A window that stops inside a run of non-space characters (its line went on past the
    reach) ends where the run does: a value cut there was redacted only up to the cut, and a long
    secret after ``pin:`` kept its tail."""
    cut = 0 < b < len(text) and not text[b - 1].isspace() and not text[b].isspace()
    if cut and not text.startswith("\\n", b):
        return _RUN_ON_RE.match(text, b).end()  # type: ignore[union-attr]  # matches always
    return b


def _windows(text: str, words: tuple[str, ...], lines: int) -> list[tuple[int, int]]:
    hits = text_index(text).places(_folded(words))  # found once for every rule and pattern
    if not hits:
        return []
    out: list[tuple[int, int]] = []
    for i in hits:
        if out and i < out[-1][1]:
            continue
        a, b = line_start(text, i), line_end(text, i)
        for _ in range(lines):
            b = line_end(text, min(len(text), b + 1))
        b = _uncut(text, b)
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(b, out[-1][1]))
        else:
            out.append((a, b))
    return out  # callers must not change it: rules that share the words share it


def lines_with(text: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """The whole lines (between real newlines, however long) holding one of ``words``
    (lower-case), in order: a pattern whose every match stays within one line and holds one of
    the words finds there all it finds in the whole text, and the same."""
    out: list[tuple[int, int]] = []
    for i in text_index(text).places(_folded(words)):
        if out and i < out[-1][1]:
            continue
        end = text.find("\n", i)
        out.append((text.rfind("\n", 0, i) + 1, len(text) if end < 0 else end))
    return out


def near(
    words: tuple[str, ...],
    regex: re.Pattern[str],
    judge: Callable[[re.Match[str], str], bool],
    *,
    lines: int = 0,
    held: re.Pattern[str] | None = None,
) -> Edit:
    """:func:`sub_where`, run only on the lines where one of ``words`` occurs (see :func:`windows`),
    and only in a text where ``held`` (a piece every match holds, which a scan finds fast) is."""

    def apply(text: str) -> tuple[str, int]:
        if held is not None and held.search(text) is None:
            return text, 0
        spans = [
            (m.start("s"), m.end("s"))
            for m in finditer_in(regex, text, windows(text, words, lines))
            if judge(m, text)
        ]
        return apply_spans(text, spans)

    return apply
