"""Strip secrets from text before a model reads it or it lands on disk.

Coding transcripts are full of credentials: ``.env`` files the agent printed, ``curl`` lines with
``Authorization`` headers, JSON config dumped by a tool, ``.netrc`` and kubeconfig files. Every
transcript entry and every stored field goes through :func:`redact`; :func:`find_secrets` lets a
caller refuse text instead (notes), and the consolidator's output is scrubbed with the same rules.

Three layers, applied in this order:

1. :mod:`~memoryd.redact.tokens`: secrets recognisable by shape (provider tokens such as
   ``ghp_``/``glpat-``/``xoxb-``/``sk-ant-``, JWTs, private-key blocks, URL userinfo). They become a
   labelled marker such as ``[REDACTED:github-token]``; URL passwords become ``[REDACTED]``.
2. :mod:`~memoryd.redact.commands`: values that only their command or file reveals
   (``curl -u``, ``mysql -p``, ``.netrc``, ``.pgpass``...).
3. :mod:`~memoryd.redact.assign`: a key naming a secret (``DB_PASSWORD``, ``"client_secret"``,
   ``x-api-key``, ``Authorization``, ``--token``) followed by ``:``, ``=`` or a space; the value
   becomes ``[REDACTED]`` and JSON/YAML stay parseable. :mod:`~memoryd.redact.values` decides
   which keys count and which values are plainly not secrets.

Markers are never matched again, and a redaction repeats its passes until the text stops
changing (a hidden value can uncover the next secret), so ``redact(redact(x)) == redact(x)``.
Every scan is linear in the input; rules whose hint substrings are absent from the text are
skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import partial
from typing import NamedTuple

from memoryd.redact import (
    code,
    commands,
    hintwords,
    prefilter,
    printed,
    shapes,
    shell,
    spans,
    tokens,
)
from memoryd.redact.assign import KEYWORD_RE, scan_assignments
from memoryd.redact.lazy import lazy
from memoryd.redact.tokens import REDACTED, Rule

__all__ = [
    "RULE_FAMILIES",
    "contains_secret",
    "find_secrets",
    "redact",
    "redactor",
]

_KEEP_PREFIX = rf"\g<1>{REDACTED}"

# Header schemes that carry a credential inline; they run first so a Bearer token that also has a
# provider shape is redacted once, under the header's name.
_HEADER_RULES = (
    Rule(
        "bearer",
        partial(
            lazy(
                r"(earer(?<=[Bb]earer)(?<![A-Za-z0-9_].earer)[ \t]+)(?!\[REDACTED)[A-Za-z0-9._~+/\-]{16,}=*",
                re.ASCII,
            ).subn,
            _KEEP_PREFIX,
        ),
        ("bearer",),
    ),
    Rule(
        "basic-auth",
        partial(
            lazy(
                r"(uthorization(?<=[Aa]uthorization)(?<![A-Za-z0-9_].uthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
                r"(?i:basic)[ \t]+)"
                r"[A-Za-z0-9+/]{8,}={0,2}",
                re.ASCII,
            ).subn,
            _KEEP_PREFIX,
        ),
        ("authorization",),
    ),
)


# Which family of secrets each rule was written for (the corpora's families): bench/redact.py
# switches one family's rules off to see how much of that family the rest still catches.
RULE_FAMILIES: dict[str, str] = {
    **{r.name: "provider_tokens" for r in tokens.TOKEN_RULES},
    "token": "provider_tokens",
    "private-key": "private_keys",
    "url-credentials": "url_credentials",
    "bearer": "headers",
    "basic-auth": "headers",
    "header-secret": "headers",
    "cli-password": "cli",
    "cli-secret": "cli",
    "netrc": "config_files",
    "pgpass": "config_files",
    "config-password": "config_files",
    "xml-secret": "config_files",
    "secret-assignment": "config_files",
    "code-credentials": "code",
    "wifi-password": "config_files",
    "code-secret": "code",
    "sql-password": "sql",
    "printed-secret": "printed",
    "prose-secret": "prose",
}

# Plain tuples and an index by hint word: these loops run for every transcript part, mostly on
# short texts, where their own overhead is a good part of the cost. Provider tokens are all runs of
# at least 16 token characters, so a text without such a run skips those ~85 rules after one search.
# Secrets found by where they stand (code and SQL, command lines, what tools print), after the
# shapes and the assignments, so that a value those already took is not matched again.
POSITION_RULES: tuple[Rule, ...] = tuple(
    Rule(name, apply, hints) for name, hints, apply in (*code.EDITS, *shell.EDITS, *printed.EDITS)
)
_Step = tuple[str, tuple[str, ...], Callable[[str], tuple[str, int]], str]
_TOKEN_RUN_RE = lazy(rf"{tokens.TOKEN_CHARS}{{16}}")
_TOKEN_RUNS_RE = lazy(rf"{tokens.TOKEN_CHARS}{{16,}}")  # each whole run (a scan takes it whole)


class _Steps(NamedTuple):
    """Rules in their order, indexed by hint word: a text holding two of the 186 hint words (a
    short text's usual share) takes its few steps from the index instead of testing the hints of
    each of ~170 rules in turn (on the benches' short texts, a fifth of their cost)."""

    steps: tuple[_Step, ...]
    fixed: frozenset[int]  # steps tried on every text: no hints, or a needle checked when they run
    by_hint: dict[str, tuple[int, ...]]
    needles: tuple[str, ...]  # each step's needle ("" for none: every text holds it)
    fixed_order: tuple[int, ...]  # the fixed steps, in order
    chosen: dict[frozenset[str], tuple[int, ...]]  # which steps a set of hint words picks
    in_run: tuple[bool, ...] | None  # whose needle stands in a token run (None: no step's does)


def _steps(rules: tuple[Rule, ...], without: frozenset[str]) -> _Steps:
    kept = [r for r in rules if RULE_FAMILIES.get(r.name) not in without]
    steps = tuple((r.needle, r.hints, r.apply, r.name) for r in kept)
    in_run = tuple(r.in_run for r in kept)
    by_hint: dict[str, list[int]] = {}
    for i, (needle, hints, _, _) in enumerate(steps):
        for hint in () if needle else hints:
            by_hint.setdefault(prefilter.fold(hint), []).append(i)  # looked up in a folded text
    fixed = frozenset(i for i, (needle, hints, _, _) in enumerate(steps) if needle or not hints)
    needles = tuple(needle for needle, _, _, _ in steps)
    index = {h: tuple(ix) for h, ix in by_hint.items()}
    runs = in_run if any(in_run) else None
    return _Steps(steps, fixed, index, needles, tuple(sorted(fixed)), {}, runs)


class _Pipeline(NamedTuple):
    head: _Steps
    tokens: _Steps
    tail: _Steps
    assignments: bool
    context: _Steps
    hints: tuple[str, ...]  # every hint word of the steps above, once


def _pipeline(without: frozenset[str] = frozenset()) -> _Pipeline:
    head = _steps((*_HEADER_RULES, *tokens.LEADING_RULES), without)
    tail = _steps((*shapes.RULES, *tokens.TRAILING_RULES, *commands.RULES), without)
    context = _steps(POSITION_RULES, without)
    token_steps = _steps(tokens.TOKEN_RULES, without)
    hints = tuple(sorted({h for g in (head, token_steps, tail, context) for h in g.by_hint}))
    return _Pipeline(
        head,
        token_steps,
        tail,
        RULE_FAMILIES["secret-assignment"] not in without,
        context,
        hints,
    )


_DEFAULT = _pipeline()
hintwords.know(_DEFAULT.hints)  # every text's index learns them at once (rules' subsets too)


def _run(group: _Steps, text: str, present: frozenset[str], families: dict[str, None]) -> str:
    """The steps of ``group`` that ``text`` can need, in their order: those with a hint word the
    text held before any step ran (a marker adds none), and those whose needle it holds now."""
    steps = group.steps
    chosen = _chosen(group, present)
    live = _live(group, chosen, text)
    k = 0
    while k < len(live):
        i = live[k]
        k += 1
        _, _, apply, name = steps[i]
        out, count = apply(text)
        if count:
            families[name] = None
        if out != text:  # a needle may stand in the new text: the steps after are checked again
            text = out
            live = live[:k] + [j for j in _live(group, chosen, text) if j > i]
    return text


def _live(group: _Steps, chosen: tuple[int, ...], text: str) -> list[int]:
    """The steps of ``chosen`` whose needle ``text`` holds, all at once (the provider tokens' ~90
    needles are looked for in the text's token runs, where every one of their matches stands)."""
    needles, in_run = group.needles, group.in_run
    if in_run is None:
        return [i for i in chosen if needles[i] in text]
    runs = "\n".join(_TOKEN_RUNS_RE.findall(text))
    return [i for i in chosen if needles[i] in (runs if in_run[i] else text)]


def _chosen(group: _Steps, present: frozenset[str]) -> tuple[int, ...]:
    """Which steps to try, in order: each step with a needle or without hints, and each step
    with a hint in ``present`` (remembered per set of words: texts share a few dozen sets)."""
    if not group.by_hint:  # the provider tokens: every step has a needle instead
        return group.fixed_order
    got = group.chosen.get(present)
    if got is not None:
        return got
    chosen = set(group.fixed)
    by_hint = group.by_hint
    for hint in present:
        chosen.update(by_hint.get(hint, ()))
    if len(group.chosen) >= _CHOSEN_KEPT:
        group.chosen.clear()
    got = group.chosen[present] = tuple(sorted(chosen))
    return got


_CHOSEN_KEPT = 256  # sets of hint words remembered per group (a hostile mix: not for ever)


# A JSON string literal that holds escapes: tool input as opencode stores it (a bash command, a
# file an agent wrote) is JSON, and a rule written for the plain text would see \" and \n there.
# A literal is a quote, at least eight characters or escapes, and the closing quote.
_JSON_BODY_RE = lazy(r'(?:[^"\\\n]++|\\.)*+')  # a literal's body, from after its opening quote
_JSON_EIGHT_RE = lazy(r'"(?:[^"\\\n]|\\.){8}')
_MAX_JSON_DEPTH = 3


def _json_literals(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of each JSON string literal, left to right, as a regex scan would find
    them, in linear time: a quote whose body ends without a closing quote (a newline, the end)
    is not tried again at the escaped quotes inside that body, which all end there too (a scan
    from each of them made a text of ``\\"`` pairs quadratic)."""
    i = 0
    while (q := text.find('"', i)) >= 0:
        body = _JSON_BODY_RE.match(text, q + 1)  # always matches, maybe nothing
        end = body.end() if body is not None else q + 1
        if end < len(text) and text[end] == '"' and _JSON_EIGHT_RE.match(text, q):
            yield q, end + 1
            i = end + 1
        else:
            i = max(end, q + 1)  # the next candidate: the quote that ended this body, or later


def _json_strings(text: str, p: _Pipeline, depth: int, families: dict[str, None]) -> str:
    """Each escaped JSON string in ``text`` decoded, redacted as plain text, and encoded again."""
    out: list[str] = []
    copied = 0
    for start, end in _json_literals(text):
        literal = text[start:end]
        body = literal[1:-1]
        if re.fullmatch(r"[\w.\-/]*", body):
            continue  # a word, a name, a path: nothing a rule could see
        try:
            decoded = json.loads(literal)
        except ValueError:
            continue
        if not isinstance(decoded, str):
            continue
        clean, found = _redact(decoded, p, depth + 1)
        if clean == decoded:
            continue
        families.update(dict.fromkeys(found))
        out += [text[copied:start], json.dumps(clean, ensure_ascii="\\u" in body)]
        copied = end
    if not out:
        return text
    return "".join(out) + text[copied:]


def _redact(text: str, p: _Pipeline = _DEFAULT, depth: int = 0) -> tuple[str, list[str]]:
    families: dict[str, None] = {}
    if depth < _MAX_JSON_DEPTH and ('\\"' in text or '": "' in text or '":"' in text):
        text = _json_strings(text, p, depth, families)
    present = prefilter.text_index(text).present()
    text = _run(p.head, text, present, families)
    if _TOKEN_RUN_RE.search(text) is not None:
        text = _run(p.tokens, text, present, families)
    text = _run(p.tail, text, present, families)
    if p.assignments and KEYWORD_RE.search(text):
        text, changed = scan_assignments(text)
        if changed:
            families["secret-assignment"] = None
    text = _run(p.context, text, present, families)
    return text, list(families)


def redactor(without: frozenset[str]) -> Callable[[str], str]:
    """:func:`redact` without the rules written for the families in ``without`` (see
    :data:`RULE_FAMILIES`): how much of a family the other, more general rules still catch."""
    p = _pipeline(without)
    return lambda text: _redact_fully(text, p)[0]


# A value one rule hides can be what kept another rule from seeing the next secret (a cookie
# pair ahead of an ``Authorization: ApiKey`` header): passes repeat until the text stops
# changing. A text with nothing to hide (most of them) takes one pass; the cap only bounds it.
_MAX_PASSES = 4


def _redact_fully(text: str, p: _Pipeline = _DEFAULT) -> tuple[str, list[str]]:
    """Redaction to a fixed point: what it returns, a further pass leaves as it is (within
    :data:`_MAX_PASSES`; no join of the corpora's samples has needed more than three)."""
    found: list[str] = []
    try:
        for _ in range(_MAX_PASSES):
            with spans.one_call():
                out, more = _redact(text, p)
            found += [f for f in more if f not in found]
            if out == text:
                break
            text = out
    finally:
        prefilter.forget_fold()  # the last text's fold is no use to the next call
    return text, found


def redact(text: str) -> str:
    """Return ``text`` with every secret we recognise replaced by a marker."""
    return _redact_fully(text)[0]


def find_secrets(text: str) -> list[str]:
    """Names of the rule families that would redact something in ``text``, in rule order; ``[]`` if clean."""
    return _redact_fully(text)[1]


def contains_secret(text: str) -> bool:
    return bool(_redact_fully(text)[1])
