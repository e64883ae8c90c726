"""Run a pattern only where it can match: at its literal starts, in text holding what it needs.

Python's ``re`` skips ahead fast only for a pattern that starts with a case-sensitive literal or
character set. Most redaction patterns start with a look-behind or ``\\b`` and a case-insensitive
list of key words (``(?i)\\b(?:password|secret|token…)``), so the engine tried them at every
position of every text, and most of the extraction's CPU went there. Two facts read from a
pattern's own parse tree let a scan skip that work and find exactly the same matches:

* **starts**: every match begins with one of a few literal strings (``pass``, ``secret``...).
  Those are found with ``str.find`` in a lower-cased copy and the pattern is matched only there,
  in order, a match hiding the candidates it covers, as the engine's own scan would.
* **needs**: every match holds a character of a small set (the ``=`` or ``:`` of an assignment,
  a quote). A text without one cannot match, and is not scanned at all.

The lower-cased copy keeps every position (``İ``, the one character whose lower case is longer,
is folded to ``i`` first) and folds together the characters that ``re`` equates beyond
``str.lower`` (``ſ`` and ``s``, ``ı`` and ``i``, the Cyrillic round ``ᲂ`` and ``о``...), from
``re``'s own table; ``tests/unit/redact/test_prefilter.py`` checks it against ``re`` for every
character a start holds.
"""

from __future__ import annotations

import re
import sys
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from re import _casefix as sre_casefix  # type: ignore[attr-defined]
from re import _compiler as sre_compiler  # type: ignore[attr-defined]
from re import _constants as sre_c  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from memoryd.redact import hintwords

# İ lower-cases to two characters: folded to the letter re equates it with, first
_PRE_FOLD = str.maketrans({"\u0130": "i"})
# the characters re's IGNORECASE equates beyond str.lower (ſ and s, ı and i, ς and σ, the
# Cyrillic round letters...): each group folded to one of them
_CLASS_FOLD = str.maketrans(
    {
        chr(code): chr(min(code, *others))
        for code, others in sre_casefix._EXTRA_CASES.items()
        if min(code, *others) != code
    }
)
_MAX_START = 8  # literal characters kept per start: enough to make a start rare
_MAX_STARTS = 64  # a pattern with more alternative starts (each one a find) is left to the engine
_MAX_WALK = 1024  # starts collected before the redundant ones are dropped
_MIN_START = 2  # a one-character start (a quote, a bracket) is as common as the engine's own work
# characters too common for a missing one to rule anything out
_COMMON = frozenset(" \t\n.,-_/")
_MAX_NEEDS = 2  # character sets checked before a scan
_FIRST_CHUNK, _CHUNK = 256, 4096  # characters folded and searched for starts at a time
_WHOLE_CHUNK = 65_536  # the same for every match of a long text (a hostile one: bounded memory)
_SHORT = 64  # a shorter text goes straight to the engine: filtering would cost more than a scan
_INDEXED = 65_536  # a text up to this long is scanned through its index (see TextIndex)
_MAX_KEPT_HITS = 4_096  # a literal found more often than this is looked for again when asked

_ZERO_WIDTH = (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT)
_REPEATS = (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT)

Repl = str | Callable[[re.Match[str]], str]


def fold(text: str) -> str:
    """``text`` lower-cased for finding literal starts, position for position."""
    if text.isascii():
        return text.lower()
    return text.translate(_PRE_FOLD).lower().translate(_CLASS_FOLD)


class TextIndex:
    """A text's fold and where each literal stands in it, kept while scans go through that text.

    A redaction runs ~40 prefiltered patterns, ~10 windowed rules and ~190 hint words over each
    text, nearly always the same text (few hold a secret); each of them folded it again and
    looked for its own literals, many of them the same words. Here the fold is made once, the
    known words are looked for together, and each literal is looked for once (or not at all,
    when it holds a known word the text lacks); every pattern, window and hint reads the same
    answer."""

    __slots__ = ("_hits", "_places", "_present", "folded", "text")

    def __init__(self, text: str, folded: str) -> None:
        self.text = text
        self.folded = folded
        self._hits: dict[str, list[int]] = {}
        self._places: dict[tuple[str, ...], list[int]] = {}
        self._present: frozenset[str] | None = None

    def present(self) -> frozenset[str]:
        """Which of the known words (:func:`~memoryd.redact.hintwords.know`) the fold holds."""
        got = self._present
        if got is None:
            got = self._present = hintwords.KNOWN.present(self.folded)
        return got

    def places(self, literals: tuple[str, ...]) -> list[int]:
        """Where any of ``literals`` starts, in order, each place once (not to be changed)."""
        at = self._places.get(literals)
        if at is None:
            present = self.present()
            found, scan = self._hits.get, self._scan
            runs = []
            for lit, guard in hintwords.KNOWN.guards(literals):
                if guard and guard not in present:
                    continue
                hits = found(lit)
                if hits is None:
                    hits = scan(lit)
                if hits:
                    runs.append(hits)
            if not runs:
                at = _NOWHERE
            elif len(runs) == 1:
                at = runs[0]
            else:
                at = sorted(set(chain.from_iterable(runs)))
            if len(at) <= _MAX_KEPT_HITS:
                self._places[literals] = at
        return at

    def _scan(self, literal: str) -> list[int]:
        at: list[int] = []
        find = self.folded.find
        i = find(literal)
        while i >= 0:
            at.append(i)
            i = find(literal, i + 1)
        if len(at) <= _MAX_KEPT_HITS:  # a hostile text's thousands of hits are not kept
            self._hits[literal] = at
        return at


_NOWHERE: list[int] = []  # shared: callers never change what they are given


class _Recent(threading.local):
    """The indexes of the last few texts scanned, most recent first, per thread (a redaction runs
    in one thread; the daemon, its worker thread and a web request may each run one at once).
    A redaction's rules also scan parts of its text (a segment, a value, a decoded JSON string)
    between their scans of the whole, which stays indexed."""

    def __init__(self) -> None:
        self.indexes: list[TextIndex] = []


_recent = _Recent()
_RECENT = 4


def _kept(text: str) -> TextIndex | None:
    recent = _recent.indexes
    for n, index in enumerate(recent):
        if index.text is text or (len(index.text) == len(text) and index.text == text):
            if n:  # the most recently used first
                recent.insert(0, recent.pop(n))
            return index
    return None


def _keep(index: TextIndex) -> TextIndex:
    recent = _recent.indexes
    recent.insert(0, index)
    del recent[_RECENT:]
    return index


def text_index(text: str) -> TextIndex:
    """The index of ``text``: a kept one if it is of this text (or an equal one), else a new
    one, which is kept in the place of the least recently used."""
    recent = _recent.indexes
    if recent and recent[0].text is text:  # nearly always: the text the last scan read
        return recent[0]
    return _kept(text) or _keep(TextIndex(text, fold(text)))


def _kept_fold(text: str) -> str | None:
    index = _kept(text)
    return index.folded if index is not None else None


def forget_fold() -> None:
    """Drop this thread's kept indexes (and their texts): called when a redaction is done."""
    _recent.indexes.clear()


# --- what a pattern's matches start with ------------------------------------------------------------


def _starts(items: list[Any], acc: str, out: set[str]) -> bool:
    """Add to ``out`` the literal strings a match of ``items`` (after ``acc``) starts with.

    Returns False when some match may start with something other than a literal (a class, a
    wildcard, nothing at all): then the pattern cannot be anchored."""
    for i, (op, av) in enumerate(items):
        if len(acc) >= _MAX_START:
            break
        if op is sre_c.LITERAL:
            acc += chr(av)
            continue
        if op in _ZERO_WIDTH:
            if acc:
                break  # what follows a zero-width check is still constrained by acc alone
            continue  # before any character: it narrows where a match starts, never widens
        rest = items[i + 1 :]
        if op is sre_c.SUBPATTERN:
            return _starts([*av[-1], *rest], acc, out)
        if op is sre_c.BRANCH:
            return all(_starts([*alt, *rest], acc, out) for alt in av[1])
        if op is sre_c.IN and av and all(o is sre_c.LITERAL for o, _ in av):
            return all(_starts([(sre_c.LITERAL, c), *rest], acc, out) for _, c in av)
        if op in _REPEATS:
            low, high, sub = av
            if high == 1:  # an optional part: present, then the rest; or absent
                return _starts([*sub, *rest], acc, out) and (low > 0 or _starts(rest, acc, out))
            if acc:
                break
            # one or more times: a match starts as one instance does (what follows an instance
            # may be another one, so the walk stops at its end); none: as the rest does
            if not _starts(list(sub), acc, out):
                return False
            return low > 0 or _starts(rest, acc, out)
        break  # anything else: the literal run ends here
    if not acc:
        return False
    out.add(fold(acc))
    return len(out) <= _MAX_WALK  # past that, a pattern is left to the engine


def _parse(pattern: str | Any, flags: int) -> Any:
    return sre_parse.parse(pattern, flags) if isinstance(pattern, str) else pattern


def literal_starts(pattern: str | Any, flags: int = 0) -> tuple[str, ...] | None:
    """The folded literal strings every match of ``pattern`` (a string or its parse) starts
    with, shortest first; None if some match could start otherwise (or the list would be long
    or hold a one-character start)."""
    out: set[str] = set()
    if not _starts(list(_parse(pattern, flags)), "", out):
        return None
    # a start that another one begins with is redundant: wherever the longer one stands, so does
    # it; too many starts are cut shorter, until they are few enough
    for length in (_MAX_START, 6, 4, 3):
        cut = {s[:length] for s in out}
        kept = [s for s in cut if not any(o != s and s.startswith(o) for o in cut)]
        if len(kept) <= _MAX_STARTS:
            break
    else:
        return None
    if min(map(len, kept)) < _MIN_START:
        return None
    return tuple(sorted(kept, key=lambda s: (len(s), s)))


def _scans_everywhere(pattern: str | Any, flags: int) -> bool:
    """Whether the engine tries ``pattern`` at every position: it finds a literal first only for a
    case-sensitive pattern that starts with a character (or a set of them)."""
    parsed = _parse(pattern, flags)
    if parsed.state.flags & re.IGNORECASE:
        return True
    first = list(parsed)[:1]
    while first and first[0][0] is sre_c.SUBPATTERN:
        first = list(first[0][1][-1])[:1]
    return not first or first[0][0] not in (sre_c.LITERAL, sre_c.IN)


# --- what a pattern's matches hold -------------------------------------------------------------------


def _char_set(op: Any, av: Any) -> frozenset[str] | None:
    if op is sre_c.LITERAL:
        return frozenset(chr(av))
    if op is sre_c.IN and av and all(o is sre_c.LITERAL for o, _ in av):
        return frozenset(chr(c) for _, c in av)
    return None


def _required(items: list[Any]) -> list[frozenset[str]]:
    """Character sets each match of ``items`` holds one character of (what it must consume or
    see ahead, outside any alternative, optional part or look-behind)."""
    out: list[frozenset[str]] = []
    for op, av in items:
        chars = _char_set(op, av)
        if chars is not None:
            out.append(chars)
        elif op is sre_c.SUBPATTERN:
            out += _required(list(av[-1]))
        elif op in _REPEATS and av[0] >= 1:
            out += _required(list(av[2]))
        elif op is sre_c.ASSERT and av[0] == 1:
            out += _required(list(av[1]))  # a look-ahead sees no further than the scan's end
    return out


def required_chars(pattern: str | Any, flags: int = 0) -> tuple[str, ...]:
    """Up to two sets of characters (each as a string) such that every match of ``pattern``
    holds, or sees ahead of it, a character of each; only sets of uncased, uncommon characters, where a text that has
    none of them is common and case folding plays no part."""
    sets = {
        s
        for s in _required(list(_parse(pattern, flags)))
        if not s & _COMMON and all(c.lower() == c.upper() for c in s)
    }
    return tuple("".join(sorted(s)) for s in sorted(sets, key=lambda s: (len(s), sorted(s))))[
        :_MAX_NEEDS
    ]


# --- the prefiltered pattern ---------------------------------------------------------------------------


class Prefiltered:
    """A compiled pattern whose ``finditer``, ``search``, ``findall``, ``sub`` and ``subn`` skip
    texts without the characters it needs and, where it has literal starts, try it only there.
    ``match``, ``fullmatch`` and ``split`` are the compiled pattern's own.

    The matches are ``re``'s own but for two attributes no rule reads: a match found at a start
    has that start as its ``pos``, and ``match.re.pattern`` is None (compiled from the parse)."""

    def __init__(
        self,
        compiled: re.Pattern[str],
        pattern: str,
        starts: tuple[str, ...] | None,
        needs: tuple[str, ...],
    ) -> None:
        self._re = compiled
        self.starts = starts
        self.needs = needs
        # one character: str.find; several: one class search that stops at the first of them
        # (a find per character scanned the whole text for each one it lacks)
        self._needs = [n if len(n) == 1 else re.compile(f"[{re.escape(n)}]") for n in needs]
        self.pattern = pattern
        self.flags = compiled.flags
        self.groups = compiled.groups
        self.groupindex = compiled.groupindex
        self.match = compiled.match
        self.fullmatch = compiled.fullmatch
        self.split = compiled.split
        if starts is None and not needs:  # nothing to filter: the engine's own, unwrapped
            self.finditer = compiled.finditer  # type: ignore[method-assign]
            self.search = compiled.search  # type: ignore[method-assign]
            self.findall = compiled.findall  # type: ignore[method-assign]
            self.sub = compiled.sub  # type: ignore[method-assign]
            self.subn = compiled.subn  # type: ignore[method-assign]

    def _possible(self, text: str, pos: int, endpos: int) -> bool:
        for need in self._needs:
            if isinstance(need, str):
                if text.find(need, pos, endpos) < 0:
                    return False
            elif need.search(text, pos, endpos) is None:
                return False
        return True

    def _anchored(
        self, text: str, pos: int, endpos: int, starts: tuple[str, ...], first: bool = False
    ) -> Iterator[re.Match[str]]:
        """The matches in ``text[pos:endpos]``. For the ``first`` one alone (``search``), chunk
        by chunk, small then doubling: a search that meets a match early stops early, as the
        engine's own scan would (folding all the rest of a long text for every call made a
        rule's walk through it with successive searches quadratic)."""
        if len(text) <= _INDEXED:
            yield from self._indexed(text, pos, endpos, starts, first)
            return
        match = self._re.match
        overhang = max(map(len, starts)) - 1  # a start that begins in a chunk may end past it
        spans = [(start, len(start)) for start in starts]
        end = chunk = pos
        size = _FIRST_CHUNK if first else _WHOLE_CHUNK  # the positions of a chunk are held at once
        # An ASCII text folds with one ``lower``, chunk by chunk, kept nowhere. Any other takes
        # two ``translate`` calls, dearer than all the scans, so its whole fold is kept for the
        # patterns after: a whole scan makes it; a first-match search uses it when it is there
        # or the text is short, else folds chunk by chunk (a rule that edits a long text between
        # searches refolds no more) and keeps what it folded if it went through the whole text.
        whole: str | None = None
        parts: list[str] | None = None
        if not text.isascii():
            whole = _kept_fold(text)
            if whole is None and (not first or len(text) <= _CHUNK):
                whole = text_index(text).folded  # kept for the patterns after
            if whole is None and endpos - pos == len(text):
                parts = []
        while chunk < endpos:
            limit = min(endpos, chunk + size)
            size = max(size, min(2 * size, _CHUNK))
            if whole is not None:
                window, base = whole, 0
            else:  # position for position
                window, base = fold(text[chunk : min(endpos, limit + overhang)]), chunk
                if parts is not None:
                    parts.append(window[: limit - chunk])
            found: set[int] = set()
            lo, cap, last = chunk - base, endpos - base, limit - 1 - base
            for start, extra in spans:
                # occurrences that begin before ``limit`` and end by ``endpos``
                stop = last + extra
                if stop > cap:
                    stop = cap
                i = window.find(start, lo, stop)
                while i >= 0:
                    found.add(base + i)
                    i = window.find(start, i + 1, stop)
            for m in _matches_at(match, text, sorted(found), end, endpos):
                end = m.end()
                yield m
            chunk = limit
        if parts is not None:
            _keep(TextIndex(text, "".join(parts)))

    def _placed(self, text: str, pos: int, endpos: int) -> bool:
        """Whether a start stands in ``text[pos:endpos]`` (by its index): most scans end here."""
        at = text_index(text).places(self.starts)  # type: ignore[arg-type]
        return bool(at) and bisect_left(at, pos) < bisect_left(at, endpos)

    def _indexed(
        self, text: str, pos: int, endpos: int, starts: tuple[str, ...], first: bool
    ) -> Iterator[re.Match[str]]:
        """:meth:`_anchored` for a text of at most :data:`_INDEXED` characters: the starts'
        places come from the text's index, found once for every pattern that scans the text."""
        # A place whose start would run past ``endpos`` is tried too: no match can begin
        # there but with a start that ends by ``endpos``, which stands at that place as well.
        at = text_index(text).places(starts)
        lo = bisect_left(at, pos)
        hi = bisect_left(at, endpos)
        if lo >= hi:
            return
        places: Iterable[int] = islice(at, lo, hi) if first else at[lo:hi]
        yield from _matches_at(self._re.match, text, places, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        pos, endpos = _bounds(string, pos, endpos)
        if endpos - pos < _SHORT:
            return self._re.finditer(string, pos, endpos)
        if self._needs and not self._possible(string, pos, endpos):
            return iter(())
        if self.starts is None:
            return self._re.finditer(string, pos, endpos)
        if len(string) <= _INDEXED and not self._placed(string, pos, endpos):
            return iter(())
        return self._anchored(string, pos, endpos, self.starts)

    def finditer_in(self, text: str, windows: Iterable[tuple[int, int]]) -> Iterator[re.Match[str]]:
        """``finditer(text, a, b)`` for each of ``windows`` in turn (a rule's lines of one text),
        each through the text's index, a short window too: :meth:`finditer` leaves one under
        :data:`_SHORT` characters to the engine, since for one short text the index would cost
        more than the scan, but here the index is made already."""
        starts = self.starts if len(text) <= _INDEXED else None
        for a, b in windows:
            if starts is not None:
                yield from self._indexed(text, a, b, starts, False)
            else:
                yield from self.finditer(text, a, b)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        pos, endpos = _bounds(string, pos, endpos)
        if endpos - pos < _SHORT:
            return self._re.search(string, pos, endpos)
        if self._needs and not self._possible(string, pos, endpos):
            return None
        if self.starts is None:
            return self._re.search(string, pos, endpos)
        if len(string) <= _INDEXED and not self._placed(string, pos, endpos):
            return None
        return next(self._anchored(string, pos, endpos, self.starts, first=True), None)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        pos, endpos = _bounds(string, pos, endpos)
        if endpos - pos >= _SHORT and not self._possible(string, pos, endpos):
            return []
        return self._re.findall(string, pos, endpos)

    def subn(self, repl: Repl, string: str, count: int = 0) -> tuple[str, int]:
        if len(string) < _SHORT or count:
            return self._re.subn(repl, string, count)
        if (self._needs and not self._possible(string, 0, len(string))) or (
            self.starts is not None
            and len(string) <= _INDEXED
            and not self._placed(string, 0, len(string))
        ):
            self._re.subn(repl, "")  # a bad template fails as re's own sub would, match or not
            return string, 0
        if self.starts is None:
            return self._re.subn(repl, string)
        if callable(repl):
            fill = repl
        elif "\\" in repl:
            self._re.subn(repl, "")  # a bad template fails as re's own sub would, match or not
            fill = lambda m: m.expand(repl)  # noqa: E731 - re.sub's own template rules
        else:
            fill = lambda m: repl  # noqa: E731
        out: list[str] = []
        copied = n = 0
        for m in self._anchored(string, 0, len(string), self.starts):
            out += [string[copied : m.start()], fill(m) or ""]  # None is "", as in re
            copied = m.end()
            n += 1
        if not n:
            return string, 0
        out.append(string[copied:])
        return "".join(out), n

    def sub(self, repl: Repl, string: str, count: int = 0) -> str:
        return self.subn(repl, string, count)[0]


def _matches_at(
    match: Callable[[str, int, int], re.Match[str] | None],
    text: str,
    places: Iterable[int],
    end: int,
    endpos: int,
) -> Iterator[re.Match[str]]:
    """The matches at ``places`` (in order), as the engine's scan finds them: a place inside the
    last match is passed over, and the scan resumes after it."""
    for i in places:
        if i < end:
            continue
        m = match(text, i, endpos)
        if m is not None:
            end = m.end()
            yield m


def finditer_in(
    regex: re.Pattern[str], text: str, windows: Iterable[tuple[int, int]]
) -> Iterator[re.Match[str]]:
    """``regex.finditer(text, a, b)`` for each of ``windows``, through
    :meth:`Prefiltered.finditer_in` where ``regex`` is one."""
    scan = getattr(regex, "finditer_in", None)
    if scan is not None:
        return scan(text, windows)  # type: ignore[no-any-return]
    return (m for a, b in windows for m in regex.finditer(text, a, b))


def _bounds(text: str, pos: int, endpos: int) -> tuple[int, int]:
    """``pos`` and ``endpos`` as ``re`` reads them: clamped into the text (a negative one is 0).
    Comparisons, not ``min``/``max``: this runs for every scan of every rule."""
    size = len(text)
    if pos < 0:
        pos = 0
    elif pos > size:
        pos = size
    if endpos > size:
        endpos = size
    elif endpos < 0:
        endpos = 0
    return pos, endpos


def compile_prefiltered(pattern: str, flags: int = 0) -> Prefiltered:
    """``re.compile(pattern, flags)``, behind the prefilters it has (see the module's notes)."""
    parsed = sre_parse.parse(pattern, flags)
    compiled = sre_compiler.compile(parsed, flags)  # from the one parse (``pattern`` is kept here)
    starts = literal_starts(parsed) if _scans_everywhere(parsed, flags) else None
    needs = required_chars(parsed)
    return Prefiltered(compiled, pattern, starts, needs)
