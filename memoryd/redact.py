"""Strip secrets from text before a model reads it or it lands on disk.

Coding transcripts are full of credentials: ``.env`` files the agent cat'ed, ``curl`` lines with
``Authorization`` headers, JSON config dumped by a tool. Every transcript entry and every stored
field goes through :func:`redact`; :func:`find_secrets` lets callers refuse text instead.

Two layers do the work. Provider-shaped tokens (OpenAI, GitHub, AWS, JWT, PEM blocks, ...) are
recognisable on their own and are replaced by a labelled marker such as ``[REDACTED:openai-key]``.
Everything else is caught as an *assignment*: a key that names a secret (``DB_PASSWORD``,
``"client_secret"``, ``x-api-key``) followed by ``:`` or ``=``. There a small scanner finds where the
value ends, so redacted JSON and YAML still parse, and values that are clearly not secrets
(references such as ``${TOKEN}``, booleans, short values, type annotations) are left alone so
memories keep their meaning.

Decisions worth knowing:

* A key matches on its last segment (split on ``_ - .`` and camelCase): ``GITHUB_TOKEN``,
  ``accessToken`` and ``PGPASSWORD`` match, ``max_tokens``, ``token_count`` and ``secrets`` do not.
  ``key`` alone never matches; ``api_key``, ``private_key``, ``secret_key`` and friends do.
* Values shorter than :data:`MIN_SECRET_LEN` characters are kept; so are numbers under a
  ``token`` key (usage counters) and paths under ``pwd``/``*_key`` keys (``PWD=/home/x``).
* ``KEY=value`` with no spaces is shell syntax: the value stops at whitespace or a shell
  metacharacter. ``key: value`` and ``key = value`` run to the end of the line (or ``,}]`` in a flow
  collection, or a `` #`` comment).
* Markers are never re-matched, so ``redact(redact(x)) == redact(x)``.
* Every pattern is linear: no nested quantifiers, and runs are anchored at their start.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

__all__ = ["MIN_SECRET_LEN", "REDACTED", "contains_secret", "find_secrets", "redact"]

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 4
ASSIGNMENT = "secret-assignment"

_MAX_KEY_LEN = 128
_MAX_STRUCT_LEN = 1 << 18


class _Rule(NamedTuple):
    name: str
    pattern: re.Pattern[str]
    replacement: str


def _marker(name: str) -> str:
    return f"[REDACTED:{name}]"


_RULES: tuple[_Rule, ...] = (
    _Rule("bearer", re.compile(r"(?i)\b(bearer[ \t]+)[A-Za-z0-9._~+/\-]{16,}=*"), rf"\g<1>{REDACTED}"),
    _Rule(
        "basic-auth",
        re.compile(r"(?i)(\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+)[A-Za-z0-9+/]{8,}={0,2}"),
        rf"\g<1>{REDACTED}",
    ),
    _Rule("anthropic-key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{20,}"), _marker("anthropic-key")),
    _Rule(
        "openai-key",
        re.compile(
            r"(?<![A-Za-z0-9])sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_\-]{20,}|[A-Za-z0-9]{20,}[A-Za-z0-9_\-]*)"
        ),
        _marker("openai-key"),
    ),
    _Rule(
        "aws-key",
        re.compile(r"AKIA[A-Z0-9]{16}|(?<![A-Za-z0-9])ASIA[A-Z0-9]{16}(?![A-Za-z0-9])"),
        _marker("aws-key"),
    ),
    _Rule(
        "github-token",
        re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
        _marker("github-token"),
    ),
    _Rule("slack-token", re.compile(r"(?<![A-Za-z0-9])xox[baprs]-[A-Za-z0-9\-]{10,}"), _marker("slack-token")),
    _Rule(
        "private-key",
        re.compile(
            r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s\\:,\-]*)",
            re.S,
        ),
        _marker("private-key"),
    ),
    _Rule(
        "jwt",
        re.compile(r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]{8,}){0,2}"),
        _marker("jwt"),
    ),
    _Rule(
        "url-credentials",
        re.compile(
            r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@?#\"'`<>\\\[\]{}]+:)"
            r"(?!\[REDACTED|(?:\$\{[^}\s@]*\}|\$[A-Za-z_]\w*)@)[^\s/@?#\"'`<>\\]+@"
        ),
        rf"\g<1>{REDACTED}@",
    ),
    _Rule("google-api-key", re.compile(r"AIza[0-9A-Za-z_\-]{35}"), _marker("google-api-key")),
    _Rule(
        "stripe-key",
        re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
        _marker("stripe-key"),
    ),
    _Rule("npm-token", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36,}"), _marker("npm-token")),
)

_MARKER_RE = re.compile(r"\[REDACTED(?::[a-z0-9-]+)?\]")

# --- secret assignments -------------------------------------------------------------------------

_KEYWORD_RE = re.compile(r"pass(?:word|wd|phrase)|pwd|secret|token|key", re.I)
_AFTER_KEYWORD_RE = re.compile(
    r"(?P<rest>[A-Za-z0-9_.\-]*)(?P<close>\\*[\"'`])?(?P<ws>[ \t]*)"
    r"(?P<op>:=|=>|=(?![=~])|:(?!:))?(?P<ws2>[ \t]*)"
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_SEGMENT_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_KEY_QUALIFIERS = frozenset({"api", "private", "secret", "access", "auth", "encryption", "signing", "master"})
_SUFFIX_KINDS = (
    ("password", "password"),
    ("passwd", "password"),
    ("passphrase", "password"),
    ("secret", "password"),
    ("token", "token"),
    ("apikey", "key"),
    ("privatekey", "key"),
    ("secretkey", "key"),
    ("accesskey", "key"),
    ("pwd", "pwd"),
)

_QUOTE_OPEN_RE = re.compile(r"(\\*)([\"'`])")
_QUOTE_SCAN_RE = re.compile(r'\\.|["\n]', re.S)
_JSON_PRIMITIVE_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])|(?:true|false|null)\b")
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BLOCK_SCALAR_RE = re.compile(r"[|>][+-]?[1-9]?[+-]?(?:[ \t]+#.*)?")
_TYPE_EXPR = r"[A-Za-z_][\w.]*(?:\[[^\]\n]*\]|<[^>\n]*>)?"
_TYPE_ANNOTATION_RE = re.compile(
    rf"(?P<type>{_TYPE_EXPR}(?:[ \t]*\|[ \t]*{_TYPE_EXPR})*\??)(?P<eq>[ \t]+=(?![=>])[ \t]*)?"
)
_TYPE_WORDS = frozenset(
    "str string bytes int integer number bool boolean any object optional option secretstr secretstring"
    " union list dict none null undefined unknown char".split()
)
_REFERENCE_RE = re.compile(
    r"\$\{\{.*?\}\}|\$\{[^}\n]*\}|\$\([^)\n]*\)|(?<!\S)\$[A-Za-z_]\w*|%[A-Za-z_]\w*%|\{\{.*?\}\}"
)
_CODE_LOOKUP_RE = re.compile(
    r"(?:process\.env|import\.meta\.env|Deno\.env|os\.environ)\b|(?:os\.|System\.)?getenv\(|ENV\[|env\("
)
_CODE_EXPR_RE = re.compile(r"(?:await\s+|new\s+)?(?P<name>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?P<call>\(.*\))?")
_CODE_OBJECTS = frozenset(
    "self this cls process os config settings conf cfg args opts options env ctx context req request params props".split()
)
_PATH_RE = re.compile(r"(?:~|\.{1,2})?/[\w.\-/~]*|[A-Za-z]:\\.*")
_SCHEME_WORD_RE = re.compile(r"(?i)^(?:bearer|basic|token)\b\s*")
_NOT_SECRET_LITERALS = frozenset(
    "true false null none nil undefined yes no on off ~ changeme placeholder redacted".split()
)

_SHELL_ENDS = r"\s;&|<>()`\"'"
_QUERY_ENDS = r"\s&#\"'<>)\]\\"


def _segments(key: str) -> list[str]:
    return [s.lower() for s in _SEGMENT_RE.findall(key)]


def _secret_key_kind(key: str) -> str | None:
    """Which kind of secret a key names, or None. Only the last segment decides."""
    segs = _segments(key)
    if not segs:
        return None
    last = segs[-1]
    if last == "id":
        return "key" if segs[-3:-1] == ["access", "key"] else None
    if last == "key":
        return "key" if len(segs) >= 2 and segs[-2] in _KEY_QUALIFIERS else None
    for suffix, kind in _SUFFIX_KINDS:
        if last.endswith(suffix):
            return kind
    return None


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
    if j > 0 and text[j - 1] == "\\" and _backslashes_before(text, j) % 2 == 1 and j < i:
        j += 1  # the letter of an escape such as \n belongs to the enclosing string
    return j


def _find_close(text: str, start: int, quote: str, level: int, *, escapes: bool = True) -> int | None:
    """Index of the closing quote token of a string opened at ``start``, or None.

    ``level`` is how many backslashes the opening quote carried: 0 for plain JSON, 1 for JSON that
    sits inside another JSON string, and so on. A quote closes the string when the backslashes
    before it reduce to exactly ``level`` once every escaped backslash is paired off.
    """
    period = 2 * (level + 1)
    i = start
    while True:
        j = text.find(quote, i)
        if j < 0 or "\n" in text[i:j]:
            return None
        run = _backslashes_before(text, j, start)
        if not escapes:
            if quote == "'" and text.startswith("'", j + 1):
                i = j + 2
                continue
            return j
        if run % period == level:
            if quote == "'" and level == 0 and text.startswith("'", j + 1):
                i = j + 2
                continue
            return j - level
        elif run < level:
            return None
        i = j + 1


def _match_bracket(text: str, start: int, level: int) -> int | None:
    """End (exclusive) of the JSON/YAML-flow collection opening at ``start``, or None."""
    depth = 0
    i = start
    limit = min(len(text), start + _MAX_STRUCT_LEN)
    period = 2 * (level + 1)
    while i < limit:
        ch = text[i]
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch == "\\":
            m = _QUOTE_OPEN_RE.match(text, i)
            if m is None:
                i += 2
                continue
            run = len(m.group(1))
            if run % period == level:
                end = _find_close(text, m.end(), m.group(2), level)
                if end is None:
                    return None
                i = end + level + 1
                continue
            if run < level:
                return None
            i = m.end()
            continue
        elif ch in "\"'":
            if level > 0 and ch == '"':
                return None
            end = _find_close(text, i + 1, ch, 0)
            if end is None:
                return None
            i = end + 1
            continue
        i += 1
    return None


class _QuoteParity:
    """Whether a position sits inside a double-quoted string on its line (monotonic cursor)."""

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
        start = self.pos
        if newline >= 0:
            self.inside = False
            start = self.pos + newline + 1
            segment = segment[newline + 1 :]
        if "\\" not in segment:
            self.inside ^= segment.count('"') % 2 == 1
        else:
            for m in _QUOTE_SCAN_RE.finditer(self.text, start, i):
                if m.group() == '"':
                    self.inside = not self.inside
        self.pos = i
        return self.inside


@lru_cache(maxsize=32)
def _plain_end_re(style: str, flow: bool, inside: bool) -> re.Pattern[str]:
    ends = [r"\r", r"\n", r"\\[nr]"]
    if style == "shell":
        ends.append(f"[{_SHELL_ENDS}]")
    elif style == "query":
        ends.append(f"[{_QUERY_ENDS}]")
    else:
        ends.append(r"[ \t]#")
    if flow:
        ends.append(r"[,}\])]")
    if inside:
        ends.append(r"\\[nrt\"']|\"")
    return re.compile("|".join(ends))


def _is_reference(value: str) -> bool:
    if _CODE_LOOKUP_RE.match(value):
        return True
    if value.startswith("<") and value.endswith(">") and "<" not in value[1:-1]:
        return True
    if re.fullmatch(r"\*[\w-]+", value):
        return True
    rest = _REFERENCE_RE.sub("", value).strip()
    if rest != value.strip():
        rest = _SCHEME_WORD_RE.sub("", rest).strip()
        return len(rest) < MIN_SECRET_LEN
    return False


def _looks_like_type(expr: str, *, capitalized: bool = True) -> bool:
    if any(c in expr for c in "[|<"):
        return True
    first = expr.split(".")[0].rstrip("?")
    return first.lower() in _TYPE_WORDS or (capitalized and first[:1].isupper())


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _is_code_reference(value: str, key: str) -> bool:
    """``token=token``, ``password=self.password``, ``api_key=load_key()``: code, not a literal."""
    m = _CODE_EXPR_RE.fullmatch(value.rstrip(";,"))
    if m is None:
        return False
    if m.group("call"):
        return True
    parts = m.group("name").split(".")
    if len(parts) == 1:
        return _normal(parts[0]) == _normal(key.rsplit(".", 1)[-1])
    return parts[0] in _CODE_OBJECTS or _secret_key_kind(parts[-1]) is not None


def _keep(value: str, key: str, kind: str) -> bool:
    """True when a value is clearly not a secret and should stay readable."""
    v = value.strip()
    if len(v) < MIN_SECRET_LEN or _MARKER_RE.search(v):
        return True
    if v.lower() in _NOT_SECRET_LITERALS or not v.strip("*•.x"):
        return True
    if kind == "token" and _NUMBER_RE.fullmatch(v):
        return True
    if kind in ("pwd", "key") and _PATH_RE.fullmatch(v):
        return True
    return _is_reference(v) or _is_code_reference(v, key)


class _Assignment(NamedTuple):
    key: str
    kind: str
    key_start: int
    quote_token: str
    op: str
    op_spaced: bool
    value_start: int


class _AssignmentScanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.parity = _QuoteParity(text)

    def run(self) -> tuple[str, bool]:
        text = self.text
        out: list[str] = []
        copied = 0
        resume = 0
        for hit in _KEYWORD_RE.finditer(text):
            if hit.start() < resume:
                continue
            found = self._assignment_at(hit)
            if found is None:
                continue
            assignment, key_end = found
            resume = key_end
            edit = self._value_edit(assignment)
            if edit is None:
                continue
            start, end, replacement = edit
            out.append(text[copied:start])
            out.append(replacement)
            copied = resume = end
        if not out:
            return text, False
        out.append(text[copied:])
        return "".join(out), True

    def _assignment_at(self, hit: re.Match[str]) -> tuple[_Assignment, int] | None:
        text = self.text
        m = _AFTER_KEYWORD_RE.match(text, hit.end())
        assert m is not None
        op = m.group("op")
        if op is None and not m.group("ws"):
            return None
        key_start = _key_start(text, hit.start())
        if key_start < 0:
            return None
        key_end = m.end("rest")
        key = text[key_start:key_end]
        kind = _secret_key_kind(key)
        if kind is None:
            return None
        token = ""
        if key_start > 0 and text[key_start - 1] in "\"'`":
            level = _backslashes_before(text, key_start - 1)
            token = text[key_start - 1 - level : key_start]
        close = m.group("close")
        if close is not None and close != token:
            return None
        quoted = close is not None
        if not quoted:
            token = ""
        if op is None:
            if quoted or not key.startswith("-") or text.startswith("-", m.end()):
                return None
            op = " "
        spaced = bool(m.group("ws") or m.group("ws2"))
        return _Assignment(key, kind, key_start, token, op, spaced, m.end()), key_end

    def _value_edit(self, a: _Assignment) -> tuple[int, int, str] | None:
        text = self.text
        vs = a.value_start
        if vs >= len(text) or text[vs] in "\r\n" or _MARKER_RE.match(text, vs):
            return None
        token_start = a.key_start - len(a.quote_token)
        inside = self.parity.at(token_start)

        quote = _QUOTE_OPEN_RE.match(text, vs)
        if quote is not None:
            level, q = len(quote.group(1)), quote.group(2)
            content_start = quote.end()
            end = _find_close(text, content_start, q, level)
            if end is None and q == "'" and level == 0:
                end = _find_close(text, content_start, q, level, escapes=False)
            if end is not None:
                if _keep(text[content_start:end], a.key, a.kind):
                    return None
                return content_start, end, REDACTED

        prev = self._previous_significant(token_start)
        flow = prev in ("{", "[", ",", "(")
        if a.quote_token:
            wrap = a.quote_token
        elif a.op == " " or (a.op == "=" and not a.op_spaced) or inside:
            wrap = ""
        elif a.key_start > 0 and text[a.key_start - 1] in "?&" and a.op == "=":
            wrap = ""
        else:
            wrap = '"'
        level = len(a.quote_token) - 1 if a.quote_token else 0

        if text[vs] in "{[" and not text.startswith("{{", vs):
            end = _match_bracket(text, vs, max(level, 0))
            if end is not None:
                if end - vs <= 2:
                    return None
                return vs, end, f"{wrap}{REDACTED}{wrap}"

        if a.quote_token and a.op == ":":
            prim = _JSON_PRIMITIVE_RE.match(text, vs)
            if prim is not None:
                if _keep(prim.group(), a.key, a.kind):
                    return None
                return vs, prim.end(), f"{wrap}{REDACTED}{wrap}"

        if a.op == ":" and not a.quote_token:
            block = self._block_scalar(a, vs)
            if block is not None:
                return block
            ann = _TYPE_ANNOTATION_RE.match(text, vs)
            if ann is not None and ann.group("eq") and _looks_like_type(ann.group("type")):
                retyped = a._replace(op="=", op_spaced=True, value_start=ann.end())
                return self._value_edit(retyped)

        if a.key_start > 0 and text[a.key_start - 1] in "?&" and a.op == "=":
            style = "query"
        elif a.op == " " or (a.op == "=" and not a.op_spaced):
            style = "shell"
        else:
            style = "line"
        stop = _plain_end_re(style, flow, inside).search(text, vs)
        end = stop.start() if stop is not None else len(text)
        value = text[vs:end].rstrip()
        end = vs + len(value)
        if _keep(value, a.key, a.kind) or self._is_type_annotation(a, value):
            return None
        if a.op == " " and value.isalpha() and value.islower():
            return None
        return vs, end, f"{wrap}{REDACTED}{wrap}"

    def _is_type_annotation(self, a: _Assignment, value: str) -> bool:
        if a.op != ":" or a.quote_token:
            return False
        v = value.rstrip(";,")
        return _TYPE_ANNOTATION_RE.fullmatch(v) is not None and _looks_like_type(v, capitalized=False)

    def _previous_significant(self, i: int) -> str:
        lo = max(0, i - 256)
        j = i
        while j > lo and self.text[j - 1] in " \t\r\n":
            j -= 1
        return self.text[j - 1] if j > 0 else ""

    def _block_scalar(self, a: _Assignment, vs: int) -> tuple[int, int, str] | None:
        text = self.text
        line_end = text.find("\n", vs)
        if line_end < 0 or not _BLOCK_SCALAR_RE.fullmatch(text, vs, line_end):
            return None
        line_start = text.rfind("\n", 0, a.key_start) + 1
        indent = len(text[line_start : a.key_start]) - len(text[line_start : a.key_start].lstrip(" "))
        block_end = line_end
        pos = line_end + 1
        while pos < len(text):
            nxt = text.find("\n", pos)
            nxt = len(text) if nxt < 0 else nxt
            line = text[pos:nxt]
            if line.strip():
                if len(line) - len(line.lstrip(" ")) <= indent:
                    break
                block_end = nxt
            pos = nxt + 1
        if block_end == line_end:
            return None
        return vs, block_end, f'"{REDACTED}"'


# --- public API ---------------------------------------------------------------------------------


def _redact(text: str) -> tuple[str, list[str]]:
    families: list[str] = []
    for rule in _RULES:
        text, count = rule.pattern.subn(rule.replacement, text)
        if count:
            families.append(rule.name)
    if _KEYWORD_RE.search(text):
        text, changed = _AssignmentScanner(text).run()
        if changed:
            families.append(ASSIGNMENT)
    return text, families


def redact(text: str) -> str:
    """Return ``text`` with every secret we recognise replaced by a marker."""
    return _redact(text)[0]


def find_secrets(text: str) -> list[str]:
    """Names of the rule families that would redact something in ``text``; ``[]`` when clean."""
    return _redact(text)[1]


def contains_secret(text: str) -> bool:
    return bool(_redact(text)[1])

