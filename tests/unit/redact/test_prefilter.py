"""The prefilters in front of redaction's patterns find exactly what the patterns find alone.

``redact.prefilter`` reads from each pattern where its matches can start and what they must hold,
and scans only there. Wrong by one character, it would let a secret through, so these tests
compare it with ``re`` itself: on the corpora, on texts built to sit at the edges (keywords in
odd cases and in the characters ``re`` folds to ASCII letters, windows that cut a keyword), and
character by character for the case folding it relies on.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import memoryd.redact  # noqa: F401 - loads every rule module, so every lazy pattern exists
from memoryd.redact.prefilter import (
    Prefiltered,
    compile_prefiltered,
    fold,
    literal_starts,
    required_chars,
)
from tests.unit.redact_corpora import corpora

_lazy_module = sys.modules["memoryd.redact.lazy"]


def _patterns() -> list[tuple[str, int]]:
    """Every pattern the redaction rules hold (the lazy ones, as the rules built them)."""
    import gc

    found = {(o.pattern, o.flags) for o in gc.get_objects() if isinstance(o, _lazy_module._Lazy)}
    return sorted(found)


PATTERNS = _patterns()
FILTERED = [(p, f, c) for p, f in PATTERNS if (c := compile_prefiltered(p, f)).starts or c.needs]

_EXOTIC = {"s": "\u017f", "k": "\u212a", "i": "\u0131"}


def _texts() -> list[str]:
    rng = random.Random(20261206)
    texts: list[str] = []
    for secrets, ham in corpora().values():
        texts += [s.text for s in secrets] + [h.text for h in ham]
    texts = rng.sample(texts, 1000)
    words = sorted({s for _p, _f, c in FILTERED for s in (c.starts or ())})
    for _ in range(400):  # keywords in every case and in the letters re folds to ASCII ones
        parts = []
        for _ in range(rng.randint(1, 6)):
            w = rng.choice(words)
            w = "".join(
                _EXOTIC.get(ch, ch)
                if rng.random() < 0.15
                else ch.upper()
                if rng.random() < 0.3
                else ch
                for ch in w
            )
            parts.append(
                w + rng.choice(["=", ": ", " ", "='x9Kq2mVb7Rt'", ' "v4lu3-s3cr3t"', "\n"])
            )
        texts.append(rng.choice(["", "İ", "x ", "$ ", "\\n"]) + "".join(parts))
    return texts


TEXTS = _texts()


def _spans(matches: Iterator[re.Match[str]]) -> list[tuple[int, int, tuple[str | None, ...]]]:
    return [(m.start(), m.end(), m.groups()) for m in matches]


def test_many_patterns_have_a_prefilter() -> None:
    assert len(PATTERNS) > 250
    assert len(FILTERED) > 80
    assert len([c for _p, _f, c in FILTERED if c.starts]) > 40


@pytest.mark.slow  # ~20 s of CPU over all patterns: CI runs it, the fast loop does not
@pytest.mark.parametrize(
    ("pattern", "flags", "fast"), FILTERED, ids=[p[:60] for p, _f, _c in FILTERED]
)
def test_a_prefiltered_pattern_finds_what_re_finds(
    pattern: str, flags: int, fast: Prefiltered
) -> None:
    plain = re.compile(pattern, flags)
    rng = random.Random(pattern)
    for text in TEXTS:
        assert _spans(fast.finditer(text)) == _spans(plain.finditer(text)), text
        a, b = sorted(rng.randint(0, len(text)) for _ in range(2))  # a window that cuts anywhere
        assert _spans(fast.finditer(text, a, b)) == _spans(plain.finditer(text, a, b)), (text, a, b)
        found, expected = fast.search(text, a), plain.search(text, a)
        assert (found and found.span()) == (expected and expected.span())
        assert fast.findall(text) == plain.findall(text)
        assert fast.subn("<\\g<0>>", text) == plain.subn("<\\g<0>>", text)
        assert fast.sub(lambda m: "[X]", text) == plain.sub(lambda m: "[X]", text)


def test_fold_keeps_every_position() -> None:
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    assert len(fold(every)) == len(every)
    assert fold("PaſSWORD İd \u212aey ıd парᲂль") == "password id key id пароль"


def _cased() -> list[str]:
    """The characters that have another case (only those can match a letter but another one)."""
    out = []
    for c in range(0x110000):
        ch = chr(c)
        if ch.lower() != ch or ch.upper() != ch or ch.casefold() != ch:
            out.append(ch)
    return out


@pytest.mark.slow  # every code point, against re
def test_fold_agrees_with_re_on_every_letter_a_start_holds() -> None:
    """A start is found in fold(text) exactly where re's IGNORECASE would match its letters."""
    letters = {ch for _p, _f, c in FILTERED for s in (c.starts or ()) for ch in s}
    cased = _cased()
    for letter in sorted(letters):
        by_re = {x for x in cased if re.fullmatch(re.escape(letter), x, re.IGNORECASE)} | {letter}
        by_fold = {x for x in cased if fold(x) == letter} | {letter}
        assert by_re <= by_fold, (letter, sorted(by_re - by_fold))


@pytest.mark.parametrize(
    ("pattern", "starts"),
    [
        (r"(?i)\b(?:password|token|api[ \t]key)s?", ("api key", "api\tkey", "token", "password")),
        (
            r"(?i)(?<![\w\-])[\"']?(?:name|key)=",
            ('"key=', "'key=", "key=", '"name=', "'name=", "name="),
        ),
        (r"(?:ab){2}c", ("ab",)),  # a repeat: its first instance, not what follows it
        (r"x?yz", ("xyz", "yz")),
        (r"[A-Za-z]+=", None),  # a class: any letter may start it
        (r"(?i)(?:a|token)", None),  # a one-letter start
        (r"\w*secret", None),
    ],
)
def test_literal_starts(pattern: str, starts: tuple[str, ...] | None) -> None:
    got = literal_starts(pattern)
    assert (got and sorted(got)) == (starts and sorted(starts))


@pytest.mark.parametrize(
    ("pattern", "needs"),
    [
        (r"(?P<k>\w+)[ \t]*=[ \t]*(?P<v>\S+)", ("=",)),
        (r"\w+(?:==|:)\S+", ()),  # alternatives: neither is needed alone
        (r"\w+[:=]\S+", (":=",)),
        (r"\((?=[^)]{0,20}[\"'])", ("(", "\"'")),  # what a look-ahead must see counts
        (r"(?<=@)\w+", ()),  # a look-behind may look before the scan's start
        (r"key \w+", ()),  # letters and blanks rule nothing out
    ],
)
def test_required_chars(pattern: str, needs: tuple[str, ...]) -> None:
    assert required_chars(pattern) == needs


def test_line_bounds_match_the_newline_pattern_they_replace() -> None:
    """``spans.line_start``/``line_end`` find a newline or an escaped ``\\n`` with ``str.find``."""
    from memoryd.redact import spans

    newline = re.compile(r"\n|\\n")
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(
            rng.choice(["a", " ", "\n", "\\", "n", "\\n", "x="]) for _ in range(rng.randint(0, 40))
        )
        i = rng.randint(0, len(text))
        reach = rng.choice([3, 10, 400])
        lo = max(0, i - reach)
        start = lo
        for m in newline.finditer(text, lo, i):
            start = m.end()
        stop = newline.search(text, i, min(len(text), i + reach))
        assert spans.line_start(text, i, reach) == start, (text, i, reach)
        assert spans.line_end(text, i, reach) == (
            stop.start() if stop else min(len(text), i + reach)
        ), (text, i, reach)


def test_the_edges_of_re_api_are_kept() -> None:
    """Found by a blind review: positions out of the text, a replacement that returns None, a bad
    template with nothing to replace, and the keyword names of re's own methods."""
    fast = compile_prefiltered(r"(?i)\bpassword=\w+")
    plain = re.compile(fast.pattern)
    assert isinstance(fast, Prefiltered) and fast.starts
    text = "x password=abc"
    for pos, endpos in ((-1, sys.maxsize), (-5, -1), (3, 2), (99, 200), (0, -3)):
        assert _spans(fast.finditer(text, pos, endpos)) == _spans(plain.finditer(text, pos, endpos))
        assert fast.findall(text, pos, endpos) == plain.findall(text, pos, endpos)
    assert fast.search(string=text) is not None
    assert fast.sub(lambda m: None, text) == plain.sub(lambda m: None, text) == "x "  # type: ignore[arg-type, return-value]
    for bad in ("\\q", "\\3"):
        with pytest.raises(re.error):
            fast.sub(bad, "nothing here")


def _count_folding(monkeypatch: Any) -> list[int]:
    """The length of every text :func:`fold` is given from now on."""
    from memoryd.redact import prefilter

    lengths: list[int] = []
    real = prefilter.fold

    def counting(text: str) -> str:
        lengths.append(len(text))
        return real(text)

    monkeypatch.setattr(prefilter, "fold", counting)
    return lengths


def test_successive_searches_through_a_long_text_fold_it_about_once(monkeypatch: Any) -> None:
    """Rules walk a text with ``search(text, pos)``; folding all the rest of it for each call
    made that quadratic. Each search folds chunk by chunk and stops at its match."""
    folded = _count_folding(monkeypatch)
    fast = compile_prefiltered(r"(?i)\bsecret[ \t]*=[ \t]*\w+")
    assert fast.starts
    text = ("x" * 90 + " secret=abc\n") * 5000  # ~0.5 MB, a match every 102 characters
    pos, hits = 0, 0
    while (m := fast.search(text, pos)) is not None:
        hits, pos = hits + 1, m.end()
    assert hits == 5000
    assert sum(folded) < 3 * len(text), sum(folded)  # a small chunk per search, not all the rest


def test_one_redaction_folds_its_text_about_once(monkeypatch: Any) -> None:
    """Some forty prefiltered rules scan each text; each folded it again for itself, and for a
    text that is not ASCII that fold cost more than all their scans. The fold is kept for the
    next rule, and dropped when the call is done."""
    from memoryd import redact as redaction
    from memoryd.redact import prefilter

    folded = _count_folding(monkeypatch)
    text = (  # ~20 KB, words that wake many rules, nothing to hide
        "Résumé: the café rollout rotated its token and password settings; the secret key "
        "option stays in the vault, naïve retries noted. "
    ) * 160
    assert redaction.redact(text) == text
    assert sum(folded) < 6 * len(text), sum(folded)  # 8.4 times it when each rule folded its own
    assert prefilter._kept(text) is None  # not held past the call


# --- the text index: one fold, each word and literal looked for once -------------------------------


def test_the_index_tells_every_known_word_as_a_scan_of_its_fold_would() -> None:
    """Words are looked for only where the word they hold stands (``password`` where ``pass``
    does): the answer is still exactly the set a scan for each word gives."""
    from memoryd.redact import hintwords, prefilter

    words = hintwords.KNOWN.all
    assert len(words) > 150 and len(hintwords.KNOWN.roots) < len(words)
    # each word alone and in pairs: a word is looked for only where its rarest character
    # stands, and a text of a single word holds few characters
    alone = [*words, *(f"{a} {b}" for a, b in zip(words, reversed(words), strict=True))]
    for text in [*TEXTS, *alone, *(w.upper() for w in alone)]:
        folded = fold(text)
        assert prefilter.TextIndex(text, folded).present() == {w for w in words if w in folded}


def _every_place(folded: str, literal: str) -> list[int]:
    return [m.start() for m in re.finditer(f"(?={re.escape(literal)})", folded)]


def test_places_are_every_place_a_start_stands_overlaps_included() -> None:
    """A literal holding a word the text lacks is not looked for; the places are still every
    place any of the literals stands, as a scan at each position finds them."""
    from memoryd.redact import prefilter

    starts = sorted({c.starts for _p, _f, c in FILTERED if c.starts})
    rng = random.Random(7)
    texts = [*rng.sample(TEXTS, 100), "passpasspass wordpass", "aaaa" * 40]
    for text in texts:
        folded = fold(text)
        index = prefilter.TextIndex(text, folded)
        for literals in [*starts, ("aa",), ("pass", "sspa")]:
            expected = sorted({i for lit in literals for i in _every_place(folded, lit)})
            assert index.places(literals) == expected, (text, literals)


def test_one_redaction_looks_for_each_literal_once(monkeypatch: Any) -> None:
    """Some forty patterns and ten windowed rules scan each text, many of them for the same
    words; each of them looked for its own (a tenth of a redaction). Now each literal is looked
    for at most once per text, and one absent word spares every literal that holds it."""
    from memoryd import redact as redaction
    from memoryd.redact import prefilter

    scans: list[tuple[int, str]] = []
    real = prefilter.TextIndex._scan

    def counting(self: prefilter.TextIndex, literal: str) -> list[int]:
        scans.append((id(self), literal))
        return real(self, literal)

    monkeypatch.setattr(prefilter.TextIndex, "_scan", counting)
    text = (
        "The token store config keeps the path to each variable; api auth hooks run the "
        "password check on login, and the session value is read from the config store.\n"
    ) * 30
    assert redaction.redact(text) == text
    assert scans and len(scans) == len(set(scans))
    assert not any("secret" in lit for _i, lit in scans)  # the text has no "secret": not looked for


def test_the_auth_subcommands_are_what_a_whole_scan_finds() -> None:
    """The auth-subcommand pattern (``gh auth login <token>``) is run only on the lines that
    hold a subcommand and a token after it: it finds there what the whole text gives, long lines,
    escaped newlines and CR LF included."""
    from memoryd.redact import shell

    pattern = shell._AUTH_SUBCOMMAND_RE
    token = "ghx_" + "Q7fk2LmA9pR4sT6vW8yZ" * 3
    extra = [
        f"run: gh auth login {token}\nnext line",
        "x " * 400 + f"vercel   login {token}; echo done " + "y " * 400,
        f'{{"command": "doctl auth init --token \\n heroku token {token}"}}',
        f"first\r\nsnyk auth {token}\r\nlast",
        f"cli token {token}\ncli login '{token}'\n" * 20,
        f"tool auth add {token[:20]} {token}\nAuth token {token}\n",
        f"token {token}" + "\n" + "z" * 70_000 + f" gh auth {token}",
    ]
    for text in [*TEXTS, *extra]:
        whole = [m.span() for m in pattern.finditer(text)]
        assert [m.span() for m in shell._auth_subcommands(text)] == whole, text
    assert sum(any(True for _ in shell._auth_subcommands(t)) for t in extra) >= 5  # not vacuous


def test_segment_start_is_the_end_of_the_last_ender_a_scan_finds() -> None:
    """Found from the right with one ``rfind`` per ender; a run of ``&`` is paired from its start
    as the scan pairs it, and nothing before ``reach`` counts."""
    from memoryd.redact.spans import SEGMENT_END_RE, segment_start

    def scanned(text: str, i: int, reach: int) -> int:
        start = lo = max(0, i - reach)
        for m in SEGMENT_END_RE.finditer(text, lo, i):
            start = m.end()
        return start

    rng = random.Random(11)
    for _ in range(20_000):
        text = "".join(rng.choice("ab &&&;|\\n\n x") for _ in range(rng.randint(0, 40)))
        i, reach = rng.randint(0, len(text)), rng.randint(0, 15)
        assert segment_start(text, i, reach) == scanned(text, i, reach), (text, i, reach)
    for text in TEXTS[:300]:
        for i in (len(text) // 3, len(text)):
            assert segment_start(text, i) == scanned(text, i, 2000)


def test_redactions_in_several_threads_at_once_give_what_one_at_a_time_gives() -> None:
    """The kept indexes are per thread: the daemon, its worker thread and a web request may each
    redact at once, and one's index must never stand for another's text (nor a list shared by
    two be changed under one of them)."""
    import threading

    from memoryd import redact as redaction

    texts = [
        '{"command": "export API_TOKEN='
        + "k9Xq2mVb7Rt" * (i % 5 + 2)
        + '", "description": "set it"}\n'
        + f"password: hunter{i:04d}Zz; curl -H 'Authorization: Bearer {'a1B2' * 6}' x\n"
        * (i % 3 + 1)
        for i in range(60)
    ]
    expected = [redaction.redact(t) for t in texts]
    errors: list[BaseException] = []
    results: dict[int, list[str]] = {}

    def work(n: int) -> None:
        try:
            results[n] = [redaction.redact(t) for t in texts[n % 7 :] + texts[: n % 7]]
        except BaseException as exc:  # reported below
            errors.append(exc)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert not errors, errors
    for n, got in results.items():
        assert got == expected[n % 7 :] + expected[: n % 7]
