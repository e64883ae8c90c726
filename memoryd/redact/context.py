"""Secrets found by where they stand: the position says "a credential goes here", whatever its shape.

The provider rules (:mod:`~memoryd.redact.tokens`) know formats; the assignment scanner
(:mod:`~memoryd.redact.assign`) knows ``key = value``. A developer's sessions hold secrets in
places neither sees, and no list of formats ever catches up with them. This layer finds the
*position* instead, by kind:

* **SQL clauses**: a quoted literal after ``PASSWORD``, ``IDENTIFIED BY``, ``SECRET``
  (``CREATE USER … PASSWORD '…'``, ``SET PASSWORD FOR u = '…'``, ``OPTIONS (password '…')``).
* **Code**: a secret-named key and a literal side by side in a call or a subscript
  (``os.Setenv("DB_PASSWORD", "…")``, ``Header.Set("X-Api-Key", "…")``, ``env["TOKEN"] = "…"``);
  a setter or builder named for a secret with one literal argument (``.password("…")``,
  ``setApiKey("…")``); literals passed positionally to a login, connect, bind, sign or client call
  that read like a password or a random key (``smtp.login("me@x.io", "…")``).
* **Command lines**: a literal piped or here-stringed into a command that reads a credential on
  stdin (``echo … | docker login --password-stdin``); the value flags and ``K=V`` words of a
  command that stores secrets (``gh secret set``, ``aws ssm put-parameter --value``, ``doppler
  secrets set``); the positional credential of commands known to take one (``ngrok
  add-authtoken``, ``mc alias set``, ``rabbitmqctl add_user``); ``KEY VALUE`` pairs after a
  ``config set`` whose key names a secret (``npm config set …:_authToken …``).
* **Printed by tools**: a prompt or label line that names a secret and ends in a value
  (``AWS Secret Access Key [None]: …``, ``Unseal Key 1: …``, ``temporary password … : …``).

A value in a strong position (a quoted SQL literal, a pair whose key names a password) goes
unless it is plainly ordinary (:func:`~memoryd.redact.values.keep`: references, placeholders,
booleans, numbers under a counter key...). In a weak position (a bare word, a positional call
argument, a label that only says "key") it must also *look* like a secret: random
(:func:`~memoryd.redact.tokens.looks_random`) or password-like (letters and digits with mixed
case or a symbol). Every rule is gated by cheap substring hints and runs in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memoryd.redact.tokens import REDACTED, Rule, looks_random
from memoryd.redact.values import is_reference, keep, secret_key_kind

_MARK = "[REDACTED"
# A quoted literal at any JSON escaping depth: \" inside a JSON string, \\\" one level deeper.
_Q = r"(?P<q>\\*[\"'`])(?P<s>(?:(?!(?P=q))[^\n\\])*?)(?P=q)"
_Q2 = r"(?P<q2>\\*[\"'`])(?P<s>(?:(?!(?P=q2))[^\n\\])*?)(?P=q2)"
_BARE = r"(?P<s>[^\s\"'`;|&<>()\\,]+)"
# A quoted literal or a bare word: one group ``s`` either way (Python's re has no branch reset).
_VAL = r"(?:(?P<q>\\*[\"'`]))?(?P<s>(?(q)(?:(?!(?P=q))[^\n\\])*?|[^\s\"'`;|&<>()\\,]+))(?(q)(?P=q))"
_CMD = r"(?:(?<![\w\-./])|(?<=\\[nt]))"
_SEGMENT_END_RE = re.compile(r"[\n;|]|&&|\\n")
_NOT_A_PASSWORD_RE = re.compile(
    r"[a-z]+(?:[_\-.][a-z]+)+|[A-Za-z]+|\d+|.*(?:://|[${}()<>\[\]]).*|[\w\-/.]*/[\w\-/.]*"
    r"|[\w\-]+\.(?:com|org|net|io|dev|local|internal|json|ya?ml|toml|txt|md|py|js|ts|go|rs|sh|pem|key|crt|conf|cfg|ini|env)"
    r"|v?\d+(?:\.\d+)+(?:[-+][\w.]+)?|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"
)
_ALGORITHMS = frozenset(
    {"hs256", "hs384", "hs512", "rs256", "rs384", "rs512", "es256", "es384", "es512", "ps256"}
    | {"sha1", "sha256", "sha384", "sha512", "md5", "utf-8", "utf8", "ascii", "latin-1", "base64"}
    | {"aes-256-gcm", "aes-256-cbc", "aes256", "eddsa", "ed25519", "x25519", "hex", "utf-16"}
)


def password_like(value: str) -> bool:
    """A human-chosen password or a machine key: ``Pelican!2291``, ``hunter2-prod-9``, base62."""
    v = value.strip().rstrip(".,;:!?)")
    if len(v) < 8 or len(v) > 512 or v.startswith(_MARK) or " " in v:
        return False
    if v.lower() in _ALGORITHMS or _NOT_A_PASSWORD_RE.fullmatch(v):
        return looks_random(v)
    if looks_random(v):
        return True
    letters = sum(c.isalpha() for c in v)
    digits = sum(c.isdigit() for c in v)
    if not letters or not digits:
        return False
    symbols = sum(not c.isalnum() for c in v)
    mixed = v.lower() != v and v.upper() != v
    return mixed or (symbols > 0 and not re.fullmatch(r"[a-z0-9]+(?:[_\-.][a-z0-9]+)*", v))


def _plain(value: str, kind: str = "password", *, bare: bool = False) -> bool:
    """Plainly not a secret, wherever it stands (references, placeholders, markers, short words);
    a ``bare`` (unquoted) value may also be code (``get_password()``, ``self.token``)."""
    v = value.strip()
    if not v or v.startswith(_MARK) or is_reference(v):
        return True
    return keep(v, kind, plain=bare, bare_names=bare)


def _weak_ok(value: str) -> bool:
    """A value in a weak position is a secret only when it also looks like one."""
    return not _plain(value) and password_like(value)


def _replace(m: re.Match[str], group: str = "s") -> str:
    whole = m.group()
    a, b = m.start(group) - m.start(), m.end(group) - m.start()
    return f"{whole[:a]}{REDACTED}{whole[b:]}"


def _segment_start(text: str, i: int) -> int:
    lo = max(0, i - 2000)
    start = lo
    for m in _SEGMENT_END_RE.finditer(text, lo, i):
        start = m.end()
    return start


def _sub(
    regex: re.Pattern[str], judge: Callable[[re.Match[str], str], bool]
) -> Callable[[str], tuple[str, int]]:
    """Replace group ``s`` of each match that ``judge(match, text)`` accepts."""

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            if not judge(m, text):
                return m.group()
            count += 1
            return _replace(m)

        return regex.sub(repl, text), count

    return apply


# --- SQL ------------------------------------------------------------------------------------------

_SQL_RE = re.compile(
    r"(?i)\b(?:set[ \t]+password(?:[ \t]+for[ \t]+\S+)?[ \t]*=[ \t]*(?:password[ \t]*\([ \t]*)?"
    r"(?=\\*['\"])|password|passwd|secret|identified[ \t]+(?:with[ \t]+\w+[ \t]+)?by(?:[ \t]+password)?)"
    r"[ \t]*(?:=[ \t]*|\bto[ \t]+|\bas[ \t]+|\(?[ \t]*)?(?:password[ \t]*\([ \t]*)?"
    r"(?<![\w\\])(?:[EN](?=['\"]))?" + _Q
)


def _sql_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    if m.group("q").lstrip("\\") == "`":
        return False  # a quoted identifier, not a literal
    return not _plain(value) and not re.fullmatch(r"[\w.]+\(\)?|\*+|\?|%s", value)


# --- code -----------------------------------------------------------------------------------------

# "KEY", "VALUE" side by side: Setenv, set_var, Header.Set, put, headers.append, config.set...
_PAIR_RE = re.compile(r"(?P<q>\\*[\"'`])(?P<k>[A-Za-z_][\w.\-]{0,63})(?P=q)[ \t]*[,:][ \t]*" + _Q2)
# env["TOKEN"] = "VALUE", headers['X-Api-Key'] = 'VALUE'
_SUBSCRIPT_RE = re.compile(
    r"\[[ \t]*(?P<q>\\*[\"'])(?P<k>[A-Za-z_][\w.\-]{0,63})(?P=q)[ \t]*\][ \t]*(?:=|:=|\|\|=)[ \t]*"
    + _Q2
)


def _pair_judge(m: re.Match[str], text: str) -> bool:
    key, value = m.group("k"), m.group("s")
    kind = secret_key_kind(key)
    if kind is None or kind == "cookie":
        return False
    if kind == "authorization":
        value = re.sub(r"(?i)^(?:bearer|basic|token|digest|apikey)[ \t]+", "", value)
    if kind == "weak":
        return not _plain(value, "weak") and looks_random(value)
    return not _plain(value, kind)


# Every "(" opening on a literal is a candidate call; the name before it decides what it is.
_OPEN_RE = re.compile(r"\((?=[^()\n]{0,160}?[\"'`])")
_ARG_RE = re.compile(
    r"(?:[bruBRU]{1,2}(?=[\"']))?(?P<q>\\*[\"'`])(?P<s>(?:(?!(?P=q))[^\n\\])*?)(?P=q)"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_CREDENTIAL_CALL_RE = re.compile(
    r"(?i)(?:log_?in|logon|sign_?in|authenticate|auth|bind(?:_s)?|connect|credentials?|sign"
    r"|encode|decode|hmac|new|fernet|client|session|api|sdk|pool|smtp\w*|imap\w*|ftp\w*)"
    r"(?:async|_s|_sync)?"
)
_KEYWORD_ARG_RE = re.compile(
    r"(?i)(?:user(?:name)?|host(?:name)?|login|email|dsn|url|db|database|name|algorithm|region"
    r"|port|scheme|path|file\w*|mode|charset|encoding)\w*[ \t]*[=:][ \t]*\Z"
)
_CALL_SPAN = 400


def _callee(text: str, i: int) -> tuple[str, bool]:
    """The name right before the "(" at ``i`` and whether ``new`` precedes it."""
    j = i
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    k = j
    lo = max(0, j - 64)
    while k > lo and text[k - 1] in _NAME_CHARS:
        k -= 1
    name = text[k:j]
    head = text[max(0, k - 40) : k]
    constructed = re.search(r"(?<![\w$])new[ \t]+(?:[\w$]+\.)*\Z", head) is not None
    return name, constructed


def _literal_args(text: str, start: int) -> list[re.Match[str]]:
    """The quoted literals directly in the argument list opening at ``start`` (after the "(")."""
    depth, i, limit = 1, start, min(len(text), start + _CALL_SPAN)
    args: list[re.Match[str]] = []
    while i < limit and depth:
        ch = text[i]
        if ch in "\"'`" or (ch == "\\" and text.startswith(('\\"', "\\'"), i)):
            m = _ARG_RE.match(text, i)
            if m is None:
                break
            if depth == 1:
                args.append(m)
            i = m.end()
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "\n":
            break
        i += 1
    return args


def _setter_edit(name: str, args: list[re.Match[str]]) -> re.Match[str] | None:
    """``.password("V")``, ``setApiKey("V")``, ``withClientSecret('V')``: one literal, a secret name."""
    bare = re.sub(r"^(?:set|with|use)_?(?=[A-Z_a-z])", "", name)
    if len(args) != 1 or not bare or bare.lower() in ("get", "set", "with", "use"):
        return None
    kind = secret_key_kind(bare)
    if kind is None or kind in ("cookie", "weak"):
        return None
    value = args[0].group("s")
    if kind == "authorization":
        value = re.sub(r"(?i)^(?:bearer|basic|token|digest)[ \t]+", "", value)
    if _plain(value, kind) or re.fullmatch(r"[A-Z_][A-Z0-9_]*", value):
        return None
    return args[0]


def _calls(text: str) -> tuple[str, int]:
    """Literals in calls that carry a credential: a secret-named setter's one argument, or the
    password-like literals a login, connect, bind, sign or client call is given positionally."""
    edits: list[tuple[int, int]] = []
    for opening in _OPEN_RE.finditer(text):
        name, constructed = _callee(text, opening.start())
        if not name:
            continue
        args = _literal_args(text, opening.end())
        if not args:
            continue
        hit = _setter_edit(name, args)
        if hit is not None:
            edits.append((hit.start("s"), hit.end("s")))
            continue
        if not constructed and _CREDENTIAL_CALL_RE.search(name) is None:
            continue
        for arg in args:
            if _KEYWORD_ARG_RE.search(text, max(opening.end(), arg.start() - 40), arg.start()):
                continue  # a keyword argument that names the user or the host
            value = arg.group("s")
            if _weak_ok(value) and not _host_like(value):
                edits.append((arg.start("s"), arg.end("s")))
    return _apply(text, edits)


def _apply(text: str, edits: list[tuple[int, int]]) -> tuple[str, int]:
    """``text`` with each (start, end) span replaced by the marker; overlapping spans once."""
    if not edits:
        return text, 0
    out: list[str] = []
    copied = 0
    for start, end in sorted(set(edits)):
        if start < copied:
            continue
        out += [text[copied:start], REDACTED]
        copied = end
    return "".join(out) + text[copied:], len(out) // 2


def _host_like(value: str) -> bool:
    return bool(
        re.fullmatch(r"[\w\-]+(?:\.[\w\-]+)+(?::\d+)?|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?", value)
        or "://" in value
        or "@" in value
        and "." in value.rsplit("@", 1)[-1]
    )


# --- command lines --------------------------------------------------------------------------------

_STDIN_READER_RE = re.compile(
    r"(?i)stdin|login|secret|passw|token|credential|keyring|keychain|vault|auth|chpasswd"
    r"|--data-file|gpg|openssl|\bkey\b|\bput\b"
)
_PIPE_RE = re.compile(
    rf"{_CMD}(?:echo|printf)(?:[ \t]+-[neE]+)*[ \t]+{_VAL}[ \t]*(?:\\n)?[ \t]*\|(?!\|)"
    r"(?P<cmd>[^\n;&|]{1,300})"
)
_HERESTRING_RE = re.compile(r"<<<[ \t]*" + _VAL)


def _stdin_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    if _plain(value) or value.startswith("-"):
        return False
    if "cmd" in m.groupdict():
        return _STDIN_READER_RE.search(m.group("cmd")) is not None
    start = _segment_start(text, m.start())  # a here-string: the command stands before it
    return _STDIN_READER_RE.search(text, start, m.start()) is not None


# Commands that store a secret: their value flags and K=V words carry it.
_STORE_CMD_RE = re.compile(
    r"(?i)(?<![\w\-./])(?:secrets?|secretsmanager|put-secret-value|create-secret|keyvault|ssm|put-parameter|set-parameter|vault|credentials?"
    r"|keychain|keyring|kv|parameter-store|secrets?:set|add-generic-password|add-internet-password"
    r"|secret-tool[ \t]+store|cmdkey)(?=[ \t])"
)
# The first words of a command (after sudo, env and VAR=value prefixes): where a store names itself.
_CMD_HEAD_RE = re.compile(
    r"[ \t]*(?:(?:sudo|env|exec|time)[ \t]+)*(?:[A-Za-z_]\w*=\S*[ \t]+)*"
    r"(?P<words>[a-z][\w.\-]*(?:[ \t]+[\w.:\-/]+){0,4})(?![=:\w])"
)
_STORE_FLAG_RE = re.compile(
    r"(?<![\w\-])(?:--value|--body|-b|--secret-string|--secret|--secret-value|--data|--plaintext"
    r"|--password|--passphrase|--token|--literal|-w)(?:[ \t]+|=)" + _VAL + ""
)
_KV_RE = re.compile(
    r"(?:(?<![\w\-./:=\\])|(?<=\\[nt]))(?P<k>[A-Za-z_][A-Za-z0-9_.\-]{1,63})=" + _VAL + ""
)


def _store_segments(text: str) -> list[tuple[int, int]]:
    """The commands (start, end) whose first words name a secret store."""
    spans: list[tuple[int, int]] = []
    for hit in _STORE_CMD_RE.finditer(text):
        if spans and hit.start() < spans[-1][1]:
            continue
        start = _segment_start(text, hit.start())
        head = _CMD_HEAD_RE.match(text, start)
        if head is None or head.end("words") < hit.end():
            continue  # the word is not among the command's first words
        if re.search(r"(?i)\b(?:get|read|show|list|describe|delete|rm)\b", head.group("words")):
            continue
        stop = _SEGMENT_END_RE.search(text, hit.end())
        spans.append((start, stop.start() if stop is not None else len(text)))
    return spans


def _store_value_ok(value: str) -> bool:
    if _plain(value) or value.startswith(("file:", "fileb:", "@", "-")):
        return False
    return not re.fullmatch(r"[\w.\-]+/[\w.\-/]+|\d+|true|false", value, re.IGNORECASE)


def _stores(text: str) -> tuple[str, int]:
    """Value flags and ``K=V`` words of commands that store a secret (``gh secret set``, ...)."""
    count = 0
    out: list[str] = []
    copied = 0
    for start, end in _store_segments(text):
        part = text[start:end]
        for regex in (_STORE_FLAG_RE, _KV_RE):

            def repl(m: re.Match[str]) -> str:
                nonlocal count
                if not _store_value_ok(m.group("s")):
                    return m.group()
                count += 1
                return _replace(m)

            part = regex.sub(repl, part)
        out += [text[copied:start], part]
        copied = end
    if not count:
        return text, 0
    return "".join(out) + text[copied:], count


# Known commands whose positional argument is a credential: (command pattern, how many plain
# words to skip after it, how many credential words follow).
_POSITIONAL: tuple[tuple[str, int, int], ...] = (
    (r"ngrok(?:[ \t]+config)?[ \t]+(?:add-)?authtoken", 0, 1),
    (r"cargo[ \t]+login", 0, 1),
    (r"vault[ \t]+login(?![ \t]+-)", 0, 1),
    (r"mc[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)", 2, 2),
    (r"rabbitmqctl[ \t]+(?:add_user|change_password|authenticate_user)", 1, 1),
    (r"poetry[ \t]+config[ \t]+http-basic\.\S+", 1, 1),
    (r"poetry[ \t]+config[ \t]+pypi-token\.\S+", 0, 1),
    (r"wpa_passphrase", 1, 1),
    (r"redis-cli(?:[ \t]+-\S+(?:[ \t]+[^\s\-]\S*)?)*[ \t]+auth", 0, 1),
    (r"AUTH(?:[ \t]+default)?", 0, 1),
    (r"heroku[ \t]+authorizations:create[ \t]+-d", 0, 0),
    (r"gh[ \t]+auth[ \t]+login[ \t]+--with-token[ \t]*<<<", 0, 1),
    (r"npm[ \t]+token[ \t]+revoke", 0, 1),
    (r"op[ \t]+signin[ \t]+--raw", 0, 0),
)
_WORD = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`;|&<>()\\]+)"


def _lead(pattern: str) -> str:
    """``pattern`` as a command name: its literal first word first (fast), then the check that
    it starts a word (or follows a JSON-escaped newline)."""
    word = re.match(r"[A-Za-z_][\w\-]*", pattern)
    assert word is not None
    lit = word.group()
    return f"{lit}(?:(?<![\\w\\-./]{lit})|(?<=\\\\[nt]{lit})){pattern[len(lit) :]}"


_POSITIONAL_RES = tuple(
    re.compile(
        rf"{_lead(cmd)}(?P<skip>(?:[ \t]+-{{1,2}}[\w\-]+(?:=\S+)?)*(?:[ \t]+{_WORD}){{{skip}}})"
        rf"(?P<creds>(?:[ \t]+{_WORD}){{{n}}})"
    )
    for cmd, skip, n in _POSITIONAL
    if n
)
_WORD_RE = re.compile(_WORD)


def _positional(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        creds = m.group("creds")
        out: list[str] = []
        copied = 0
        for w in _WORD_RE.finditer(creds):
            raw = w.group()
            value = raw.strip("\"'")
            if _plain(value) or value.startswith("-") or "://" in value:
                continue
            if not (password_like(value) or len(value) >= 6):
                continue
            q = raw[0] if raw[0] in "\"'" else ""
            out += [creds[copied : w.start()], f"{q}{REDACTED}{q}"]
            copied = w.end()
        if not out:
            return m.group()
        count += len(out) // 2
        head = m.group()[: m.start("creds") - m.start()]
        return head + "".join(out) + creds[copied:]

    for regex in _POSITIONAL_RES:
        text = regex.sub(repl, text)
    return text, count


# ``npm config set //registry/:_authToken VALUE``, ``aws configure set aws_secret_access_key V``,
# ``git config --global github.token V``: a config setter whose key names a secret anywhere.
_CONFIG_SET_RE = re.compile(
    r"config(?:(?<![\w\-.]config)|(?<=\\[nt]config))(?:ure)?(?:[ \t]+(?:set|create|add|--global|--local"
    r"|--system|--user|-g))*(?P<mid>(?:[ \t]+[^\s;|&\\]+)*?)[ \t]+(?P<k>[^\s;|&=\\]{2,120})[ \t]+"
    r"" + _VAL + ""
)
_SECRET_WORD_RE = re.compile(
    r"(?i)pass(?:word|wd|phrase)?(?![a-z])|pwd|secret|token|api[-_.]?key|auth(?![a-z])|authtoken"
    r"|access[-_.]?key|private[-_.]?key|credential"
)


def _config_set_judge(m: re.Match[str], text: str) -> bool:
    key, value = m.group("k"), m.group("s")
    if not _SECRET_WORD_RE.search(key) or _plain(value):
        return False
    if re.search(r"(?i)(?:ttl|timeout|expir|length|type|url|file|path|helper|cmd|command)", key):
        return False
    return not re.fullmatch(r"true|false|\d+", value, re.IGNORECASE)


# Windows-style ``/pass:VALUE`` and ``/password:VALUE`` (cmdkey, net use, runas).
_SLASH_PASS_RE = re.compile(r"(?i)(?<![\w/])/p(?:ass(?:word)?)?:" + _BARE)


# --- prompts and labels printed by tools ----------------------------------------------------------

# A line whose label names a secret and ends in one value: "AWS Secret Access Key [None]: V",
# "Unseal Key 3: V", "Initial Root Token: V", "Your API key: V", "Recovery code 1: V".
_LABEL_RE = re.compile(
    r"(?im)^[ \t>*#\-]*(?P<label>(?:[A-Za-z][\w\-']*[ \t]+){0,6}?"
    r"(?:key|token|password|passphrase|passcode|secret|pin|code|credentials?|phrase|mnemonic))"
    r"(?:[ \t]+#?\d{1,2})?(?:[ \t]*\[[^\]\n]{0,40}\])?[ \t]*:[ \t]+"
    r"(?P<q>[\"'`]?)(?P<s>[^\s\"'`]{6,512})(?P=q)[ \t]*\r?$"
)
_STRONG_LABEL_RE = re.compile(
    r"(?i)password|passphrase|passcode|secret|token|api[ \t]*key|access[ \t]*key|private[ \t]*key"
    r"|unseal|recovery|root|master|auth|admin|mnemonic|seed"
)
# "A temporary password is generated for root@localhost: V"
_SENTENCE_RE = re.compile(
    r"(?i)\b(?:password|passphrase|token|secret|api[ \t]key)\b[^\n:=]{1,80}?[:][ \t]+"
    r"(?P<s>[^\s\"'`]{8,256})[ \t]*\r?$",
    re.MULTILINE,
)


def _label_judge(m: re.Match[str], text: str) -> bool:
    value, label = m.group("s"), m.group("label")
    if _plain(value, bare=not m.group("q")) or "://" in value:
        return False
    strong = _STRONG_LABEL_RE.search(label) is not None
    if re.search(r"(?i)\b(?:public|fingerprint|id|ttl|type|name|hash|length|count)\b", label):
        return False
    return password_like(value) if not strong else not re.fullmatch(r"[a-z]+|\d{1,5}", value)


def _sentence_judge(m: re.Match[str], text: str) -> bool:
    return _weak_ok(m.group("s")) and "://" not in m.group("s")


_RULES: tuple[tuple[str, tuple[str, ...], Callable[[str], tuple[str, int]]], ...] = (
    ("sql-password", ("password", "passwd", "identified", "secret"), _sub(_SQL_RE, _sql_judge)),
    (
        "code-secret",
        ("pass", "secret", "token", "key", "auth", "pwd", "cred"),
        _sub(_PAIR_RE, _pair_judge),
    ),
    ("code-secret", ("[",), _sub(_SUBSCRIPT_RE, _pair_judge)),
    ("code-credentials", ("(",), _calls),
    ("cli-password", ("echo", "printf"), _sub(_PIPE_RE, _stdin_judge)),
    ("cli-password", ("<<<",), _sub(_HERESTRING_RE, _stdin_judge)),
    (
        "cli-secret",
        (
            "secret",
            "ssm",
            "vault",
            "parameter",
            "keychain",
            "keyring",
            "kv",
            "cred",
            "cmdkey",
            "store",
            "-password",
        ),
        _stores,
    ),
    (
        "cli-secret",
        ("ngrok", "login", "alias", "mc ", "rabbitmq", "poetry", "wpa_", "auth"),
        _positional,
    ),
    ("cli-secret", ("config",), _sub(_CONFIG_SET_RE, _config_set_judge)),
    ("cli-password", ("/p",), _sub(_SLASH_PASS_RE, lambda m, t: not _plain(m.group("s")))),
    (
        "printed-secret",
        ("key", "token", "pass", "secret", "pin", "code", "cred", "phrase", "mnemonic"),
        _sub(_LABEL_RE, _label_judge),
    ),
    (
        "printed-secret",
        ("password", "passphrase", "token", "secret", "api key"),
        _sub(_SENTENCE_RE, _sentence_judge),
    ),
)

RULES: tuple[Rule, ...] = tuple(Rule(name, apply, hints) for name, hints, apply in _RULES)
