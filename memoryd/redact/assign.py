"""The assignment scanner: a key naming a secret, an operator, and the value to replace.

``KEY=value`` with no spaces is shell syntax: the value stops at whitespace or a metacharacter.
``key: value`` and ``key = value`` run to the end of the line, to ``,}]`` in a flow collection, or
to a `` #`` comment; ``--password value`` is a command-line flag. A small scanner finds where the
value ends so redacted JSON and YAML still parse: quoted strings at any escaping depth (JSON inside
a JSON string), bracketed collections, YAML block scalars. A plain replacement is quoted
(``"[REDACTED]"``) where YAML or JSON needs it. ``Authorization`` keeps its scheme word
(``Digest [REDACTED]``) and ``Cookie`` keeps its cookie names.

Every scan is linear: runs are anchored at their start, and the scanner remembers where values and
collections end.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from memoryd.redact.lazy import lazy
from memoryd.redact.tokens import REDACTED, looks_random
from memoryd.redact.values import (
    STRONG_KINDS,
    keep,
    looks_like_type,
    secret_key_kind,
)

_MAX_KEY_LEN = 128
_MAX_STRUCT_LEN = 1 << 16
_MAX_PLAIN_LEN = 4096

# A keyword that ends a word: ``DB_PASSWORD``, ``apiKey``, ``--token``; not ``tokens`` or ``keyboard``.
# The first letter in either case, the rest in any (``redact.prefilter`` finds the words first).
KEYWORD_RE = lazy(
    r"(?:[Pp](?i:ass(?:word|wd|phrase)?|wd|w|sk|at)|[Ss](?i:ecret|ig(?:nature)?)|[Tt](?i:oken)"
    r"|[Kk](?i:ey)|[Aa](?i:uth(?:ori[sz]ation)?)|[Cc](?i:redentials?|reds|ookie))"
    r"(?![a-z0-9])"
)
MARKER_RE = lazy(r"\[REDACTED(?::[a-z0-9-]+)?\]")
_MARKER_MAX = 64  # the longest marker: "[REDACTED:" and a rule's name
_AFTER_KEYWORD_RE = lazy(
    r"(?P<rest>[A-Za-z0-9_.\-]{0,128})(?P<close>\\*[\"'`])?(?P<ws>[ \t]*)"
    r"(?P<op>:=|=>|=(?![=~])|:(?!:))?(?P<ws2>[ \t]*)"
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_QUOTE_OPEN_RE = lazy(r"(\\*)([\"'`])")
_STRUCT_CHAR_RE = lazy(r"[\[\]{}\"'\\]")
_ESCAPE_PAIR_RE = lazy(r"\\.", re.DOTALL)
_JSON_PRIMITIVE_RE = lazy(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])|(?:true|false|null)\b")
_BLOCK_SCALAR_RE = lazy(r"[|>][+-]?[1-9]?[+-]?(?:[ \t]+#.*)?")
_FORMAT_FIELD_RE = lazy(r"\{[A-Za-z_][\w.]*(?:\[[^\]{}]*\])?(?:![rsa])?(?::[^{}\n]*)?\}")
_TYPE_EXPR = r"[A-Za-z_][\w.]*(?:\[[^\]\n]*\]|<[^>\n]*>)?"
_TYPE_ANNOTATION_RE = lazy(
    rf"(?P<type>{_TYPE_EXPR}(?:[ \t]*\|[ \t]*{_TYPE_EXPR})*\??)(?P<eq>[ \t]+=(?![=>])[ \t]*)?"
)
_AUTH_SCHEME_RE = lazy(r"[A-Za-z][\w.\-]{1,30}[ \t]+(?=[^\s=])")
_COOKIE_PAIR_RE = lazy(r"(?:(?<=^)|(?<=[;,\s]))([!#$%&'*+.^`|~\w\-]+)=([^;,\s\"'\\]*)")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "version", "comment"}
)
_STRING_PREFIX_RE = lazy(r"[rRbBuUfF]{1,2}(?=[\"'])")
_REGEX_HINT_RE = lazy(r"\\|\[|\(\?|\|")
_TUPLE_TARGET_RE = lazy(
    r"(?:^|[\n(\[]|\\n)[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*,[ \t]*\Z"
)
_CIPHERTEXT_RE = lazy(
    r"(?i)[\"']?(?:encrypted\w*|ciphertext|iv|nonce|auth_tag|kms\w*)[\"']?[ \t]*:"
)
_QUALIFIED_BEFORE_RE = lazy(
    r"(?i)(?:public|pub|cache|cached|idempotency|request|host|subject|authority|foreign|primary"
    r"|sort|partition|routing|lookup|object|restored|saved)[ \t]+\Z"
)
_SHELL_ENDS = r"[\s;&|<>()`\"']"
_QUERY_ENDS = r"[\s&#\"'<>)\]\\]"


def _inside_default(text: str, i: int) -> bool:
    """Whether ``i`` sits in the message of a shell ``${VAR:?message}`` (or ``:+``) expansion.

    Spring's ``${mail.password:default}`` is not one: its default is a literal."""
    opened = text.rfind("${", max(0, i - 200), i)
    if opened < 0 or "}" in text[opened:i] or "\n" in text[opened:i]:
        return False
    return re.search(r":?[?+]", text[opened:i]) is not None


def _backslashes_before(text: str, i: int, floor: int = 0) -> int:
    count = 0
    while i - 1 - count >= floor and text[i - 1 - count] == "\\":
        count += 1
    return count


def _key_start(text: str, i: int) -> int:
    lo = max(0, i - _MAX_KEY_LEN)
    j = i
    while j > lo and text[j - 1] in _KEY_CHARS:
        j -= 1
    if j == lo and j > 0 and text[j - 1] in _KEY_CHARS:
        return -1
    if j < i and j > 0 and text[j - 1] == "\\" and _backslashes_before(text, j) % 2 == 1:
        j += 1  # the letter of an escape such as \n belongs to the enclosing string
    return j


def _find_close(
    text: str, start: int, quote: str, level: int, *, escapes: bool = True, doubling: bool = True
) -> int | None:
    """Where the closing quote token of a string opened just before ``start`` begins, or None.

    ``level`` is how many backslashes the opening quote carried: 0 for plain JSON, 1 for JSON sitting
    inside another JSON string, and so on. A quote closes the string when the backslashes before it
    reduce to exactly ``level`` once escaped backslashes are paired off. Strings never cross a line.
    """
    limit = min(len(text), start + _MAX_STRUCT_LEN)
    stop = text.find("\n", start, limit)
    stop = limit if stop < 0 else stop
    period = 2 * (level + 1)
    i = start
    while (j := text.find(quote, i, stop)) >= 0:
        if (
            doubling
            and quote == "'"
            and text.startswith("'", j + 1)
            and (not escapes or level == 0)
        ):
            i = j + 2
            continue
        if not escapes:
            return j
        run = _backslashes_before(text, j, start)
        if run % period == level:
            return j - level
        if run < level:
            return None
        i = j + 1
    return None


def _match_bracket(text: str, start: int, level: int) -> int | None:
    """End (exclusive) of the JSON / YAML-flow / Python collection opening at ``start``, or None."""
    depth = 0
    limit = min(len(text), start + _MAX_STRUCT_LEN)
    period = 2 * (level + 1)
    i = start
    while (m := _STRUCT_CHAR_RE.search(text, i, limit)) is not None:
        i, ch = m.start(), m.group()
        if ch in "{[]}":
            depth += 1 if ch in "{[" else -1
            if depth == 0:
                return i + 1
            i += 1
            continue
        quote = _QUOTE_OPEN_RE.match(text, i)
        if quote is None:
            i += 2
            continue
        run = len(quote.group(1))
        if run < level:
            return None
        if run % period != level:
            i = quote.end()
            continue
        end = _find_close(text, quote.end(), quote.group(2), level, doubling=False)
        if end is None:
            return None
        i = end + level + 1
    return None


class _QuoteParity:
    """Whether a position sits inside a double-quoted string on its line (a forward-moving cursor)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.inside = False

    def at(self, i: int) -> bool:
        if i < self.pos:
            self.pos = self.text.rfind("\n", 0, i) + 1
            self.inside = False
        segment = self.text[self.pos : i]
        newline = segment.rfind("\n")
        if newline >= 0:
            self.inside = False
            segment = segment[newline + 1 :]
        if "\\" in segment:
            segment = _ESCAPE_PAIR_RE.sub("", segment)
        self.inside ^= segment.count('"') % 2 == 1
        self.pos = i
        return self.inside


@lru_cache(maxsize=64)
def _plain_end_re(style: str, flow: bool, inside: bool, enclosing: str) -> re.Pattern[str]:
    ends = [r"\r", r"\n", r"\\[nr]"]
    if style != "header":
        ends.append({"shell": _SHELL_ENDS, "query": _QUERY_ENDS}.get(style, r"[ \t]#"))
    if flow:
        ends.append(r"[,}\])]")
    if inside:
        ends.append(r"(?<!\\)\"" if style == "header" else r"\\[nrt\"']|\"")
    if enclosing:
        ends.append(re.escape(enclosing))
    return re.compile("|".join(ends))  # built when asked for: nothing to defer


_LABEL_WORDS = ("my", "your", "the", "some", "test", "fake", "dummy", "example", "sample", "mock")


def _names_the_key(value: str, key: str) -> bool:
    """``client_secret="my-client-secret"``, ``X.AUTH = AUTH;``: a label that repeats the key."""
    v = value.strip().strip("\"';,").lower()
    if not re.fullmatch(r"[a-z][a-z0-9_\-. ]*", v):
        return False
    squash = re.sub(r"[_\-. ]", "", v)
    name = re.sub(r"[_\-.]", "", key.lower())
    if squash.endswith(name):
        label = squash[: -len(name)]
        return label == "" or (len(label) <= 12 and label.startswith(_LABEL_WORDS))
    return name.endswith(squash) and len(squash) >= 8


def _cookie_edit(value: str, start: int, end: int) -> tuple[int, int, str] | None:
    """``Cookie: a=b; sid=...``: every cookie value long enough to be a session goes, names stay."""

    def repl(m: re.Match[str]) -> str:
        name, val = m.group(1), m.group(2)
        if name.lower() in _COOKIE_ATTRIBUTES or len(val) < 8 or MARKER_RE.fullmatch(val):
            return m.group()
        if not looks_random(val) and not re.search(r"(?i)sess|sid|auth|token|remember|csrf", name):
            return m.group()  # _ga=GA1.1.40…, cookie_consent=accepted: not a credential
        return f"{name}={REDACTED}"

    new = _COOKIE_PAIR_RE.sub(repl, value)
    return None if new == value else (start, end, new)


class _Assignment(NamedTuple):
    kind: str
    key_start: int
    quote_token: str  # the key's opening quote with its backslashes, "" for a bare key
    op: str  # ":", "=", ":=", "=>", or " " for a command-line flag such as --password x
    op_spaced: bool
    value_start: int
    key: str


class _AssignmentScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.parity = _QuoteParity(text)
        self.unclosed_until = -1  # a collection that starts before here never closed
        self.plain_ends: dict[re.Pattern[str], tuple[int, int]] = {}

    def run(self) -> tuple[str, bool]:
        text = self.text
        out: list[str] = []
        copied = resume = 0
        for hit in KEYWORD_RE.finditer(text):
            if hit.start() < resume or (found := self._assignment_at(hit)) is None:
                continue
            assignment, resume = found
            edit = self._value_edit(assignment)
            if edit is None:
                continue
            start, end, replacement = edit
            out += [text[copied:start], replacement]
            copied = resume = end
        if not out:
            return text, False
        return "".join(out) + text[copied:], True

    def _assignment_at(self, hit: re.Match[str]) -> tuple[_Assignment, int] | None:
        text = self.text
        m = _AFTER_KEYWORD_RE.match(text, hit.end())
        assert m is not None
        op, rest = m.group("op"), m.group("rest")
        if op is None and (
            not m.group("ws") or hit.start() == 0 or text[hit.start() - 1] not in _KEY_CHARS
        ):
            return None
        if rest and (rest[0].islower() or rest[0].isdigit()):
            return None  # the keyword sits inside a longer word: tokens, keyboard, secretary
        key_start, key_end = _key_start(text, hit.start()), m.end("rest")
        if key_start < 0 or (key_end < len(text) and text[key_end] in _KEY_CHARS):
            return None
        if key_start > 0 and text[key_start - 1] in "$*@":
            return None  # a variable, pointer or glob: $PWD:/app, *v1.Secret
        if text[max(0, key_start - 200) : key_start].rfind("arn:") > max(
            text.rfind(" ", 0, key_start),
            text.rfind("\n", 0, key_start),
            text.rfind('"', 0, key_start),
        ):
            return None  # arn:aws:secretsmanager:…:secret:name, a resource name
        if _inside_default(text, key_start) or (
            text.startswith("${", key_start - 2)
            and re.match(r":?[?+]", text[key_end : key_end + 2])
        ):
            return None  # ${POSTGRES_PASSWORD:?…}: a shell default or message, not a value
        if op == "=" and _TUPLE_TARGET_RE.search(text, max(0, key_start - 64), key_start):
            return None  # url, username, password = target
        key = text[key_start:key_end]
        kind = secret_key_kind(key)
        if kind is None:
            return None
        if kind in ("weak", "key") and _QUALIFIED_BEFORE_RE.search(
            text, max(0, key_start - 24), key_start
        ):
            return None  # "public key: …", "cache key: …": the word before says what kind of key
        token = ""
        if key_start > 0 and text[key_start - 1] in "\"'`":
            level = _backslashes_before(text, key_start - 1)
            token = text[key_start - 1 - level : key_start]
        close = m.group("close")
        if close is not None and close != token:
            return None
        if close is None:
            token = ""
        if op is None:
            if token or not key.startswith("-") or text.startswith("-", m.end()):
                return None
            op = " "
        spaced = bool(m.group("ws") or m.group("ws2"))
        return _Assignment(kind, key_start, token, op, spaced, m.end(), key), key_end

    def _value_edit(self, a: _Assignment) -> tuple[int, int, str] | None:
        """The span of the value to replace and its replacement, or None to keep it."""
        text = self.text
        vs = a.value_start
        if (
            vs >= len(text)
            or text[vs] in "\r\n"
            or MARKER_RE.match(text, vs)
            or _FORMAT_FIELD_RE.match(text, vs)
        ):
            return None
        token_start = a.key_start - len(a.quote_token)
        inside = self.parity.at(token_start)

        prefix = _STRING_PREFIX_RE.match(text, vs)
        quote = _QUOTE_OPEN_RE.match(text, prefix.end() if prefix else vs)
        if quote is not None:
            if inside and quote.group() == '"':
                return None  # this quote closes the string the assignment sits in
            level, q = len(quote.group(1)), quote.group(2)
            end = _find_close(text, quote.end(), q, level)
            if end is None and q == "'" and level == 0:
                end = _find_close(text, quote.end(), q, level, escapes=False)
            if end is not None:
                inner = text[quote.end() : end]
                if text[end + level + 1 : end + level + 2] in (".", "["):
                    return None  # an expression on a literal: ":".join(...), "%s"[0]
                kinds = prefix.group().lower() if prefix else ""
                if ("f" in kinds and "{" in inner) or (
                    "r" in kinds and _REGEX_HINT_RE.search(inner)
                ):
                    return None  # an f-string template or a regular expression
                return self._finish(a, quote.end(), end, REDACTED, plain=False)

        query = a.op == "=" and text[a.key_start - 1 : a.key_start] in ("?", "&")
        shell = a.op == " " or (a.op == "=" and not a.op_spaced)
        if a.quote_token:
            wrap = a.quote_token
        else:
            wrap = "" if query or shell or inside else '"'
        replacement = f"{wrap}{REDACTED}{wrap}"

        if text[vs] in "{[" and (a.kind not in STRONG_KINDS or (a.op == "=" and a.op_spaced)):
            return None  # ``auth: {...}``, ``const token = {...}``: the keys inside decide
        if text[vs] in "{[" and not text.startswith("{{", vs) and vs >= self.unclosed_until:
            end = _match_bracket(text, vs, max(len(a.quote_token) - 1, 0))
            if end is not None:
                if end - vs <= 2 or not any(q in text[vs:end] for q in "\"'"):
                    return None  # empty, or a schema such as { type: String, required: true }
                if _CIPHERTEXT_RE.search(text, vs, end):
                    return (
                        None  # {"encrypted_data": …, "iv": …}: encrypted at rest, the keys decide
                    )
                return vs, end, replacement
            self.unclosed_until = min(len(text), vs + _MAX_STRUCT_LEN)

        if (
            a.quote_token
            and a.op == ":"
            and (prim := _JSON_PRIMITIVE_RE.match(text, vs)) is not None
        ):
            return None if keep(prim.group(), a.kind) else (vs, prim.end(), replacement)

        if a.op == ":" and not a.quote_token:
            if (block := self._block_scalar(a, vs)) is not None:
                return block
            ann = _TYPE_ANNOTATION_RE.match(text, vs)
            if ann is not None and ann.group("eq") and looks_like_type(ann.group("type")):
                return self._value_edit(a._replace(op="=", op_spaced=True, value_start=ann.end()))

        flow = self._previous_significant(token_start, multiline=bool(a.quote_token)) in (
            "{",
            "[",
            ",",
            "(",
        )
        enclosing = (
            text[a.key_start - 1]
            if not a.quote_token and text[a.key_start - 1 : a.key_start] in ("'", "`")
            else ""
        )
        style = "query" if query else "shell" if shell else "line"
        if a.kind == "authorization" and not query:
            style, flow = "header", False  # Digest and AWS4 parameters hold commas and spaces
        end = self._plain_end(_plain_end_re(style, flow, inside, enclosing), vs)
        after = text[end : end + 1]
        value = text[vs:end].rstrip()
        end = vs + len(value)
        if len(value) > _MAX_PLAIN_LEN:
            return vs, end, replacement
        bare_names = style != "shell" or flow or value.endswith(",")
        if style == "shell" and not flow and not value.endswith(","):
            literal_words = "shell"
        elif a.op == ":" and not a.quote_token and not flow and not value.endswith(","):
            literal_words = "yaml"
        else:
            literal_words = ""
        if self._is_type_annotation(a, value, after):
            return None
        if after in ("(", "[") and re.fullmatch(r"[\w$.]+", value):
            return None  # a call or an index cut short by a shell terminator
        if a.op == " " and value.isalpha() and value.islower():
            return None  # "the --token flag"
        return self._finish(
            a,
            vs,
            end,
            replacement,
            plain=True,
            bare_names=bare_names,
            literal_words=literal_words,
        )

    def _finish(
        self,
        a: _Assignment,
        start: int,
        end: int,
        replacement: str,
        *,
        plain: bool,
        bare_names: bool = False,
        literal_words: str = "",
    ) -> tuple[int, int, str] | None:
        """The edit for a value spanning ``start:end``, or None when :func:`keep` keeps it."""
        kind = a.kind
        value = self.text[start:end]
        if value.replace("-", "_").lower() == a.key.lstrip("-").replace("-", "_").lower():
            return None  # LAST_PASS = "last_pass": a name, not a secret
        if a.key.lower().lstrip("-") == "pass" and (
            any(c.isspace() for c in value.strip())
            or re.search(r"[ \t]:[ \t]*\Z", self.text[a.key_start : a.value_start])
        ):
            return None  # "coalescing pass: adjacent intervals merge": the word, not a password
        if kind == "cookie":
            return _cookie_edit(value, start, end)
        if kind == "authorization" and (scheme := _AUTH_SCHEME_RE.match(value)) is not None:
            creds = value[scheme.end() :].rstrip()
            if any(c.isspace() for c in creds) and "=" not in creds:
                return None  # prose: "authorization: required for write endpoints"
            if MARKER_RE.match(creds) or keep(
                creds, "password", plain=plain, bare_names=bare_names, literal_words=literal_words
            ):
                return None
            return start + scheme.end(), end, REDACTED
        if keep(value, kind, plain=plain, bare_names=bare_names, literal_words=literal_words):
            return None
        if _names_the_key(value, a.key):
            return None
        return start, end, replacement

    def _plain_end(self, pattern: re.Pattern[str], start: int) -> int:
        """Where a plain value starting at ``start`` ends; remembered so kept values stay linear."""
        known = self.plain_ends.get(pattern)
        if known is not None and known[0] <= start < known[1]:
            return known[1]
        text = self.text
        stop = pattern.search(text, start)
        # a marker's own "]" ends no value (in a list or a call, "]" would): a value read up to
        # it left the marker cut and whatever followed it in the value unread
        while stop is not None and text.startswith("]", stop.start()):
            k = text.rfind("[REDACTED", max(start, stop.start() - _MARKER_MAX), stop.start())
            marker = MARKER_RE.match(text, k) if k >= 0 else None
            if marker is None or marker.end() != stop.end():
                break
            stop = pattern.search(text, stop.end())
        end = stop.start() if stop is not None else len(text)
        self.plain_ends[pattern] = (start, end)
        return end

    def _is_type_annotation(self, a: _Assignment, value: str, after: str) -> bool:
        """``password: str`` or ``token: AccessToken)``. A capitalised name counts only when ``,`` ``;``
        or ``)`` follows, so ``password: Summer`` is still redacted."""
        if a.op != ":" or a.quote_token:
            return False
        ann = _TYPE_ANNOTATION_RE.match(value)
        if ann is None or ann.group("eq"):
            return False
        rest = value[ann.end() :].lstrip()
        if rest and rest[0] not in ";,)":
            return False
        return looks_like_type(
            ann.group("type"), capitalized=bool(rest) or (after != "" and after in ";,)")
        )

    def _previous_significant(self, i: int, *, multiline: bool) -> str:
        lo = max(0, i - 256)
        blanks = " \t\r\n" if multiline else " \t"
        while i > lo and self.text[i - 1] in blanks:
            i -= 1
        return self.text[i - 1] if i > 0 else ""

    def _block_scalar(self, a: _Assignment, vs: int) -> tuple[int, int, str] | None:
        """A YAML ``key: |`` block: the indicator and every more-indented line after it."""
        text = self.text
        line_end = text.find("\n", vs)
        if line_end < 0 or not _BLOCK_SCALAR_RE.fullmatch(
            text, vs, line_end - (text[line_end - 1] == "\r")
        ):
            return None
        line_start = text.rfind("\n", 0, a.key_start) + 1
        indent = a.key_start - line_start - len(text[line_start : a.key_start].lstrip(" "))
        block_end = line_end
        pos = line_end + 1
        while pos < len(text):
            nxt = text.find("\n", pos)
            nxt = len(text) if nxt < 0 else nxt
            line = text[pos:nxt]
            if line.strip():
                if len(line) - len(line.lstrip(" ")) <= indent:
                    break
                block_end = nxt - (text[nxt - 1] == "\r")
            pos = nxt + 1
        return None if block_end == line_end else (vs, block_end, f'"{REDACTED}"')


def scan_assignments(text: str) -> tuple[str, bool]:
    """Redact the value of every secret-named key in ``text``; True when anything changed."""
    return _AssignmentScanner(text).run()
