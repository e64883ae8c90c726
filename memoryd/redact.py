"""Strip secrets from text before a model reads it or it lands on disk.

Coding transcripts are full of credentials: ``.env`` files the agent printed, ``curl`` lines with
``Authorization`` headers, JSON config dumped by a tool. Every transcript entry and every stored
field goes through :func:`redact`; :func:`find_secrets` lets a caller refuse text instead.

Two layers do the work. Provider-shaped tokens (OpenAI, GitHub, AWS, JWT, PEM blocks, ...) are
recognisable on their own and become a labelled marker such as ``[REDACTED:openai-key]``. Anything
else is caught as an *assignment*: a key naming a secret (``DB_PASSWORD``, ``"client_secret"``,
``x-api-key``) followed by ``:`` or ``=``. A small scanner finds where the value ends so redacted
JSON and YAML still parse, and leaves values that are plainly not secrets readable, so memories
keep their meaning.

Decisions:

* A key matches on its last segment (split on ``_ - .`` and camelCase): ``GITHUB_TOKEN``,
  ``accessToken`` and ``PGPASSWORD`` match; ``max_tokens``, ``token_count`` and ``secrets`` do not.
  ``key`` alone never matches, ``api_key``, ``private_key``, ``secret_key`` and friends do.
* Kept: values shorter than :data:`MIN_SECRET_LEN`, booleans and null, references (``${TOKEN}``,
  ``$TOKEN``, ``{{ secrets.X }}``, ``process.env.X``, ``os.environ[...]``), numbers under a
  ``token`` key (usage counters), paths under ``pwd``/``*_key`` keys, and unquoted values that read
  as code or as a description (``self.password``, ``auth[1]``, ``str | None``, ``The token to use``).
  Quoted values are literals and always go.
* ``KEY=value`` with no spaces is shell syntax: the value stops at whitespace or a metacharacter.
  ``key: value`` and ``key = value`` run to the end of the line, to ``,}]`` in a flow collection,
  or to a `` #`` comment. A plain replacement is quoted (``"[REDACTED]"``) where YAML or JSON needs it.
* Markers are never matched again, so ``redact(redact(x)) == redact(x)``.
* Every scan is linear: no nested quantifiers, runs are anchored at their start, and the scanner
  remembers where values and collections end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, partial
from typing import NamedTuple

__all__ = ["MIN_SECRET_LEN", "REDACTED", "contains_secret", "find_secrets", "redact"]

REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 4

_MAX_KEY_LEN = 128
_MAX_STRUCT_LEN = 1 << 16
_MAX_PLAIN_LEN = 4096


class _Rule(NamedTuple):
    name: str
    apply: Callable[[str], tuple[str, int]]
    hint: str  # lower-case text that must occur for the rule to apply (skips a slow scan)


def _marker(name: str) -> str:
    return f"[REDACTED:{name}]"


_PEM_BEGIN_RE = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_RE = re.compile(r"[A-Za-z0-9+/=\s\\:,\-]*")


def _redact_pem(text: str) -> tuple[str, int]:
    """Private-key blocks, BEGIN to END; a block cut off before its END loses its whole body."""
    out: list[str] = []
    copied = 0
    end: re.Match[str] | None = None
    exhausted = False
    for begin in _PEM_BEGIN_RE.finditer(text):
        if begin.start() < copied:
            continue
        if not exhausted and (end is None or end.start() < begin.end()):
            end = _PEM_END_RE.search(text, begin.end())
            exhausted = end is None
        if end is not None:
            copied_to = end.end()
        else:
            body = _PEM_BODY_RE.match(text, begin.end())
            copied_to = body.end() if body is not None else begin.end()
        out += [text[copied : begin.start()], _marker("private-key")]
        copied = copied_to
    if not out:
        return text, 0
    return "".join(out) + text[copied:], len(out) // 2


_KEEP_PREFIX = rf"\g<1>{REDACTED}"
_B64URL = r"[A-Za-z0-9_\-]"

# (family, pattern, replacement or "" for the family's marker), applied in this order. Lookbehinds
# sit after the literal prefix so the regex engine can jump straight to candidates.
_PATTERNS: tuple[tuple[str, str, str], ...] = (
    ("bearer", r"(?i)\b(bearer[ \t]+)[A-Za-z0-9._~+/\-]{16,}=*", _KEEP_PREFIX),
    (
        "basic-auth",
        r"(?i)(\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+)[A-Za-z0-9+/]{8,}={0,2}",
        _KEEP_PREFIX,
    ),
    ("anthropic-key", rf"sk-ant-(?<![A-Za-z0-9]sk-ant-){_B64URL}{{20,}}", ""),
    (
        "openai-key",
        rf"sk-(?<![A-Za-z0-9]sk-)(?:(?:proj|svcacct|admin|None)-{_B64URL}{{20,}}|[A-Za-z0-9]{{20,}}{_B64URL}*)",
        "",
    ),
    ("aws-key", r"A(?:KIA[A-Z0-9]{16}|SIA(?<![A-Za-z0-9]ASIA)[A-Z0-9]{16}(?![A-Za-z0-9]))", ""),
    (
        "github-token",
        r"g(?:h[pousr]_(?<![A-Za-z0-9]gh[pousr]_)[A-Za-z0-9]{36,}|ithub_pat_(?<![A-Za-z0-9]github_pat_)\w{22,})",
        "",
    ),
    ("slack-token", r"xox[baprs]-(?<![A-Za-z0-9]xox[baprs]-)[A-Za-z0-9\-]{10,}", ""),
    ("private-key", "", ""),
    (
        "jwt",
        rf"eyJ(?<!{_B64URL}eyJ){_B64URL}{{10,}}\.{_B64URL}{{10,}}\.{_B64URL}{{8,}}(?:\.{_B64URL}{{8,}}){{0,2}}",
        "",
    ),
    (
        "url-credentials",
        (
            r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@?#\"'`<>\\\[\]{}]+:)"
            r"(?!\[REDACTED|(?:\$\{[^}\s@]*\}|\$[A-Za-z_]\w*|pass|password|passwd|pwd|secret|x+|\*+)@)"
            r"[^\s/@?#\"'`<>\\]+@"
        ),
        rf"\g<1>{REDACTED}@",
    ),
    ("google-api-key", rf"AIza{_B64URL}{{35}}", ""),
    (
        "stripe-key",
        r"[sr]k_(?:live|test)_(?<![A-Za-z0-9][sr]k_live_)(?<![A-Za-z0-9][sr]k_test_)[A-Za-z0-9]{10,}",
        "",
    ),
    ("npm-token", r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36,}", ""),
)
_HINTS = {
    "bearer": "bearer",
    "basic-auth": "authorization",
    "private-key": "private key",
    "url-credentials": "://",
}
_RULES = tuple(
    _Rule(
        name,
        partial(re.compile(pat, re.ASCII).subn, repl or _marker(name)) if pat else _redact_pem,
        _HINTS.get(name, ""),
    )
    for name, pat, repl in _PATTERNS
)
_MARKER_RE = re.compile(r"\[REDACTED(?::[a-z0-9-]+)?\]")

# --- secret assignments -------------------------------------------------------------------------

_KEYWORD_RE = re.compile(r"pass(?:word|wd|phrase)|pwd|secret|token|key", re.IGNORECASE)
_AFTER_KEYWORD_RE = re.compile(
    r"(?P<rest>[A-Za-z0-9_.\-]{0,128})(?P<close>\\*[\"'`])?(?P<ws>[ \t]*)"
    r"(?P<op>:=|=>|=(?![=~])|:(?!:))?(?P<ws2>[ \t]*)"
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_SEGMENT_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_KEY_QUALIFIERS = frozenset(
    {"api", "private", "secret", "access", "auth", "encryption", "signing", "master"}
)
_SUFFIX_KINDS = (
    *(("password", w) for w in ("password", "passwd", "passphrase", "secret")),
    ("token", "token"),
    *(("key", w) for w in ("apikey", "privatekey", "secretkey", "accesskey")),
    ("pwd", "pwd"),
)

_QUOTE_OPEN_RE = re.compile(r"(\\*)([\"'`])")
_STRUCT_CHAR_RE = re.compile(r"[\[\]{}\"'\\]")
_ESCAPE_PAIR_RE = re.compile(r"\\.", re.DOTALL)
_JSON_PRIMITIVE_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])|(?:true|false|null)\b")
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_BLOCK_SCALAR_RE = re.compile(r"[|>][+-]?[1-9]?[+-]?(?:[ \t]+#.*)?")
_FORMAT_FIELD_RE = re.compile(r"\{[A-Za-z_][\w.]*(?:\[[^\]{}]*\])?(?:![rsa])?(?::[^{}\n]*)?\}")
_TYPE_EXPR = r"[A-Za-z_][\w.]*(?:\[[^\]\n]*\]|<[^>\n]*>)?"
_TYPE_ANNOTATION_RE = re.compile(
    rf"(?P<type>{_TYPE_EXPR}(?:[ \t]*\|[ \t]*{_TYPE_EXPR})*\??)(?P<eq>[ \t]+=(?![=>])[ \t]*)?"
)
_TYPE_WORDS = frozenset(
    {
        "str",
        "string",
        "bytes",
        "int",
        "integer",
        "number",
        "bool",
        "boolean",
        "any",
        "object",
        "char",
        "union",
    }
    | {"optional", "option", "list", "dict", "none", "null", "undefined", "unknown"}
    | {"secretstr", "secretstring", "secretbytes"}
)
_REFERENCE_RE = re.compile(
    r"\$?\{\{[^{}\n]{0,256}\}\}|\$\{[^{}\n]{0,256}\}|\$\([^()\n]{0,256}\)|(?<!\S)\$[A-Za-z_]\w*|%[A-Za-z_]\w*%"
)
_SCHEME_WORD_RE = re.compile(r"(?i)^(?:bearer|basic|token)\b\s*")
_CODE_LOOKUP_RE = re.compile(
    r"(?:process\.env|import\.meta\.env|Deno\.env|os\.environ)\b|(?:os\.|System\.)?getenv\(|ENV\[|env\("
)
_CODE_LEAD_RE = re.compile(
    r"(?:await\s+|new\s+|not\s+|\*{1,2})?(?P<chain>[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)*)"
    r"(?P<tail>\(|\[|[ \t]*(?:[,;)\]}]|$)|[ \t]+(?:or|and|if|else|\|\||&&|\?\?|\?|\+)[ \t])"
)
_CODE_OBJECTS = frozenset(
    {
        "self",
        "this",
        "cls",
        "process",
        "os",
        "env",
        "config",
        "settings",
        "conf",
        "cfg",
        "ctx",
        "context",
    }
    | {"args", "opts", "options", "req", "request", "params", "props"}
)
_VARIABLE_RE = re.compile(r"[a-z_]+(?:[A-Z][a-z_]+)*\d*|[A-Z]+(?:_[A-Z]+)+\d*")
_DOTTED_PART_RE = re.compile(r"[A-Za-z_][a-z_]*(?:[A-Z][a-z_]+)*\d*|[A-Z]+(?:_[A-Z]+)*\d*")
_SQL_PLACEHOLDER_RE = re.compile(r"(?:\?|%s|%\(\w+\)s|:[A-Za-z_]\w*|\$\d+)(?!\w)")
_PROSE_RE = re.compile(r"[A-Za-z][A-Za-z\s'(),.;:/-]*")
_PROSE_OPENERS = frozenset(
    {"the", "a", "an", "to", "if", "when", "whether", "optional", "optionally", "used"}
)
_HEX_COLOR_RE = re.compile(r"#[0-9A-Fa-f]{3,8}")
_PATH_RE = re.compile(r"(?:~|\.{1,2})?/[\w.\-/~]*|[A-Za-z]:\\.*")
_NOT_SECRET_LITERALS = frozenset(
    {"true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off", "~"}
    | {
        "changeme",
        "placeholder",
        "redacted",
        "example",
        "dummy",
        "value",
        "pass",
        "password",
        "passwd",
        "secret",
    }
    | {"token"}
)

_SHELL_ENDS = r"[\s;&|<>()`\"']"
_QUERY_ENDS = r"[\s&#\"'<>)\]\\]"


def _secret_key_kind(key: str) -> str | None:
    """Which kind of secret a key names (password, token, key, pwd), or None."""
    segs = [s.lower() for s in _SEGMENT_RE.findall(key)]
    if not segs:
        return None
    last = segs[-1]
    if last == "id":
        return "key" if segs[-3:-1] == ["access", "key"] else None
    if last == "key":
        return "key" if len(segs) >= 2 and segs[-2] in _KEY_QUALIFIERS else None
    return next((kind for kind, suffix in _SUFFIX_KINDS if last.endswith(suffix)), None)


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
    ends = [
        r"\r",
        r"\n",
        r"\\[nr]",
        {"shell": _SHELL_ENDS, "query": _QUERY_ENDS}.get(style, r"[ \t]#"),
    ]
    if flow:
        ends.append(r"[,}\])]")
    if inside:
        ends.append(r"\\[nrt\"']|\"")
    if enclosing:
        ends.append(re.escape(enclosing))
    return re.compile("|".join(ends))


def _is_reference(value: str) -> bool:
    if _CODE_LOOKUP_RE.match(value) or re.fullmatch(r"<[^<>]*>|\*[\w-]+", value):
        return True
    rest = _REFERENCE_RE.sub("", _MARKER_RE.sub("", value)).strip()
    return rest != value and len(_SCHEME_WORD_RE.sub("", rest).strip()) < MIN_SECRET_LEN


def _looks_like_type(expr: str, *, capitalized: bool = True) -> bool:
    if any(c in expr for c in "[|<"):
        return True
    first = expr.split(".")[0].rstrip("?")
    return first.lower() in _TYPE_WORDS or (
        capitalized and re.fullmatch(r"[A-Z][A-Za-z]+", first) is not None
    )


def _is_code(value: str, *, bare_names: bool) -> bool:
    """An unquoted value that reads as code: ``auth[1]``, ``self.password or x``, ``load()``, ``?``.

    A bare word stays suspect (``hunter22``). snake_case and camelCase names count as variables only
    where ``bare_names`` says the syntax may be a program; machine-made secrets rarely look like them.
    """
    if value.startswith("(") or _SQL_PLACEHOLDER_RE.match(value):
        return True
    m = _CODE_LEAD_RE.match(value)
    if m is None:
        return False
    if m.group("tail") in ("(", "["):
        return True
    chain = m.group("chain")
    parts = re.split(r"\??\.", chain)
    if parts[0] in _CODE_OBJECTS or _secret_key_kind(parts[-1]) is not None:
        return True
    if len(parts) > 1:
        return all(_DOTTED_PART_RE.fullmatch(p) for p in parts)
    return (
        bare_names
        and _VARIABLE_RE.fullmatch(chain) is not None
        and ("_" in chain or chain.lower() != chain)
    )


def _is_prose(value: str) -> bool:
    """A description such as ``The access token to verify.`` or ``SSH password``.

    It must open with an article-like word or name the secret in its first two words, so
    ``swordfish for the staging db`` is still redacted.
    """
    words = value.lower().split()
    if len(words) < 2 or not _PROSE_RE.fullmatch(value):
        return False
    return words[0] in _PROSE_OPENERS or any(_KEYWORD_RE.search(w) for w in words[:2])


def _keep(value: str, kind: str, *, plain: bool = False, bare_names: bool = False) -> bool:
    """True when a value is plainly not a secret and should stay readable."""
    v = value.strip()
    if plain:
        if v.startswith("#") or _is_code(v, bare_names=bare_names) or _is_prose(v):
            return True
        v = v.rstrip(",;").rstrip()
    if len(v) < MIN_SECRET_LEN or v.lower() in _NOT_SECRET_LITERALS:
        return True
    if not v.strip("*•.x") or _HEX_COLOR_RE.fullmatch(v):
        return True
    if kind == "token" and _NUMBER_RE.fullmatch(v):
        return True
    if kind in ("pwd", "key") and _PATH_RE.fullmatch(v):
        return True
    return _is_reference(v)


class _Assignment(NamedTuple):
    kind: str
    key_start: int
    quote_token: str  # the key's opening quote with its backslashes, "" for a bare key
    op: str  # ":", "=", ":=", "=>", or " " for a command-line flag such as --password x
    op_spaced: bool
    value_start: int


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
        for hit in _KEYWORD_RE.finditer(text):
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
        if close is None:
            token = ""
        if op is None:
            if token or not key.startswith("-") or text.startswith("-", m.end()):
                return None
            op = " "
        spaced = bool(m.group("ws") or m.group("ws2"))
        return _Assignment(kind, key_start, token, op, spaced, m.end()), key_end

    def _value_edit(self, a: _Assignment) -> tuple[int, int, str] | None:
        """The span of the value to replace and its replacement, or None to keep it."""
        text = self.text
        vs = a.value_start
        if (
            vs >= len(text)
            or text[vs] in "\r\n"
            or _MARKER_RE.match(text, vs)
            or _FORMAT_FIELD_RE.match(text, vs)
        ):
            return None
        token_start = a.key_start - len(a.quote_token)
        inside = self.parity.at(token_start)

        quote = _QUOTE_OPEN_RE.match(text, vs)
        if quote is not None:
            if inside and quote.group() == '"':
                return None  # this quote closes the string the assignment sits in
            level, q = len(quote.group(1)), quote.group(2)
            end = _find_close(text, quote.end(), q, level)
            if end is None and q == "'" and level == 0:
                end = _find_close(text, quote.end(), q, level, escapes=False)
            if end is not None:
                return (
                    None if _keep(text[quote.end() : end], a.kind) else (quote.end(), end, REDACTED)
                )

        query = a.op == "=" and text[a.key_start - 1 : a.key_start] in ("?", "&")
        shell = a.op == " " or (a.op == "=" and not a.op_spaced)
        if a.quote_token:
            wrap = a.quote_token
        else:
            wrap = "" if query or shell or inside else '"'
        replacement = f"{wrap}{REDACTED}{wrap}"

        if text[vs] in "{[" and not text.startswith("{{", vs) and vs >= self.unclosed_until:
            end = _match_bracket(text, vs, max(len(a.quote_token) - 1, 0))
            if end is not None:
                return None if end - vs <= 2 else (vs, end, replacement)
            self.unclosed_until = min(len(text), vs + _MAX_STRUCT_LEN)

        if (
            a.quote_token
            and a.op == ":"
            and (prim := _JSON_PRIMITIVE_RE.match(text, vs)) is not None
        ):
            return None if _keep(prim.group(), a.kind) else (vs, prim.end(), replacement)

        if a.op == ":" and not a.quote_token:
            if (block := self._block_scalar(a, vs)) is not None:
                return block
            ann = _TYPE_ANNOTATION_RE.match(text, vs)
            if ann is not None and ann.group("eq") and _looks_like_type(ann.group("type")):
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
        end = self._plain_end(_plain_end_re(style, flow, inside, enclosing), vs)
        after = text[end : end + 1]
        value = text[vs:end].rstrip()
        end = vs + len(value)
        if len(value) > _MAX_PLAIN_LEN:
            return vs, end, replacement
        bare_names = style != "shell" or flow or value.endswith(",")
        if _keep(value, a.kind, plain=True, bare_names=bare_names) or self._is_type_annotation(
            a, value, after
        ):
            return None
        if after in ("(", "[") and re.fullmatch(r"[\w$.]+", value):
            return None  # a call or an index cut short by a shell terminator
        if a.op == " " and value.isalpha() and value.islower():
            return None  # "the --token flag"
        return vs, end, replacement

    def _plain_end(self, pattern: re.Pattern[str], start: int) -> int:
        """Where a plain value starting at ``start`` ends; remembered so kept values stay linear."""
        known = self.plain_ends.get(pattern)
        if known is not None and known[0] <= start < known[1]:
            return known[1]
        stop = pattern.search(self.text, start)
        end = stop.start() if stop is not None else len(self.text)
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
        return _looks_like_type(
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


def _redact(text: str) -> tuple[str, list[str]]:
    families: list[str] = []
    folded = text.lower()
    for rule in _RULES:
        if rule.hint and rule.hint not in folded:
            continue
        text, count = rule.apply(text)
        if count:
            families.append(rule.name)
    if _KEYWORD_RE.search(text):
        text, changed = _AssignmentScanner(text).run()
        if changed:
            families.append("secret-assignment")
    return text, families


def redact(text: str) -> str:
    """Return ``text`` with every secret we recognise replaced by a marker."""
    return _redact(text)[0]


def find_secrets(text: str) -> list[str]:
    """Names of the rule families that would redact something in ``text``, in rule order; ``[]`` if clean."""
    return _redact(text)[1]


def contains_secret(text: str) -> bool:
    return bool(_redact(text)[1])
