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

Markers are never matched again, so ``redact(redact(x)) == redact(x)``. Every scan is linear in the
input; rules whose hint substrings are absent from the text are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from memoryd.redact import commands, context, tokens
from memoryd.redact.assign import KEYWORD_RE, scan_assignments
from memoryd.redact.tokens import REDACTED, Rule
from memoryd.redact.values import MIN_SECRET_LEN

__all__ = ["MIN_SECRET_LEN", "REDACTED", "contains_secret", "find_secrets", "redact"]

_KEEP_PREFIX = rf"\g<1>{REDACTED}"

# Header schemes that carry a credential inline; they run first so a Bearer token that also has a
# provider shape is redacted once, under the header's name.
_HEADER_RULES = (
    Rule(
        "bearer",
        partial(
            re.compile(
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
            re.compile(
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


# Plain tuples and a for/else: these loops run for every transcript part, mostly on short texts,
# where their own overhead is a good part of the cost. Provider tokens are all runs of at least 16
# token characters, so a text without such a run skips those ~85 rules after one search.
_Step = tuple[str, tuple[str, ...], Callable[[str], tuple[str, int]], str]
_HEAD: tuple[_Step, ...] = tuple(
    (r.needle, r.hints, r.apply, r.name) for r in (*_HEADER_RULES, *tokens.LEADING_RULES)
)
_TOKENS: tuple[_Step, ...] = tuple((r.needle, r.hints, r.apply, r.name) for r in tokens.TOKEN_RULES)
_TAIL: tuple[_Step, ...] = tuple(
    (r.needle, r.hints, r.apply, r.name) for r in (*tokens.TRAILING_RULES, *commands.RULES)
)
_CONTEXT: tuple[_Step, ...] = tuple((r.needle, r.hints, r.apply, r.name) for r in context.RULES)
_TOKEN_RUN_RE = re.compile(r"[A-Za-z0-9_\-.+/=~:]{16}")


def _run(steps: tuple[_Step, ...], text: str, folded: str, families: dict[str, None]) -> str:
    for needle, hints, apply, name in steps:
        if needle:
            if needle not in text:
                continue
        elif hints:
            for hint in hints:
                if hint in folded:
                    break
            else:
                continue
        text, count = apply(text)
        if count:
            families[name] = None
    return text


def _redact(text: str) -> tuple[str, list[str]]:
    families: dict[str, None] = {}
    folded = text.lower()
    text = _run(_HEAD, text, folded, families)
    if _TOKEN_RUN_RE.search(text) is not None:
        text = _run(_TOKENS, text, folded, families)
    text = _run(_TAIL, text, folded, families)
    if KEYWORD_RE.search(text):
        text, changed = scan_assignments(text)
        if changed:
            families["secret-assignment"] = None
    text = _run(_CONTEXT, text, folded, families)
    return text, list(families)


def redact(text: str) -> str:
    """Return ``text`` with every secret we recognise replaced by a marker."""
    return _redact(text)[0]


def find_secrets(text: str) -> list[str]:
    """Names of the rule families that would redact something in ``text``, in rule order; ``[]`` if clean."""
    return _redact(text)[1]


def contains_secret(text: str) -> bool:
    return bool(_redact(text)[1])
