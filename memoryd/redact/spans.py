"""The regex plumbing the position rules share: a value pattern, group replacement, segments.

Transcript text is often a JSON string (tool input and output as opencode stores them), so a
newline may be the two characters ``\\n`` and a quote may be ``\\"``: every pattern here treats
those as line ends and quotes too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memoryd.redact.tokens import REDACTED

# A quoted literal (at any JSON escaping depth) or a bare word, as one group ``s`` (Python's re
# has no branch reset, so the quote is an optional group and a conditional picks the body).
VAL = (
    r"(?:(?P<q>\\*[\"'`]))?"
    r"(?P<s>(?(q)(?:(?!(?P=q))[^\n\\])*?|[^\s\"'`;|&<>()\\,]+))(?(q)(?P=q))"
)
# A quoted literal only.
QUOTED = r"(?P<q>\\*[\"'`])(?P<s>(?:(?!(?P=q))[^\n\\])*?)(?P=q)"
SEGMENT_END_RE = re.compile(r"[\n;|]|&&|\\n")
LINE_END_RE = re.compile(r"\n|\\n")

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
    """Where the shell command around ``i`` starts (after ``; | && newline``)."""
    lo = max(0, i - reach)
    start = lo
    for m in SEGMENT_END_RE.finditer(text, lo, i):
        start = m.end()
    return start


def segment_end(text: str, i: int) -> int:
    stop = SEGMENT_END_RE.search(text, i)
    return stop.start() if stop is not None else len(text)


def line_start(text: str, i: int, reach: int = 400) -> int:
    lo = max(0, i - reach)
    start = lo
    for m in LINE_END_RE.finditer(text, lo, i):
        start = m.end()
    return start
