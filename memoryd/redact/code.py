"""Secrets that code and SQL put in a credential's place, whatever the language.

* **SQL**: a literal after ``PASSWORD``, ``IDENTIFIED BY`` (quoted, or Oracle's bare word),
  ``SET PASSWORD … =``, ``@…password = N'…'`` and ``OPTIONS (password '…')``.
* **Pairs**: a secret-named key and a literal side by side, in a call or a map
  (``os.Setenv("DB_PASSWORD", "…")``, ``Header.Set("X-Api-Key", "…")``), in a subscript
  (``env["TOKEN"] = "…"``), in a bracketed form key (``config[secret]=…``), or as a secret-named
  word and a quoted literal with nothing between (``DB_PASSWORD "…"``, nginx, Caddy, dumps).
* **Name/value items**: ``- name: DB_PASSWORD`` / ``value: …`` (Kubernetes env), ``"Name":
  "/prod/db/password", "Value": …`` (SSM), ``"keyName": "key1", … "value": …`` (Azure),
  Terraform's ``variable "db_password" { default = "…" }``.
* **Calls**: a setter or builder named for a secret takes its last literal (``.password("…")``,
  ``changeUserPassword("u", "…")``); a login, connect, bind, sign, OTP or client call, and any
  call shaped like a connection (a host or a port among its arguments), has its password-like
  literals redacted (``smtp.login("me@x.io", "…")``, ``Redis("cache", 6379, 0, "…")``).
* **JWK** private parameters (``"d"``, ``"p"``, ``"q"``, ``"dp"``, ``"dq"``, ``"qi"``, ``"k"``).

Strong positions (a quoted SQL literal, a pair whose key names a password) lose any value that
is not plainly ordinary; weak ones (positional call arguments) only values that look like secrets.
"""

from __future__ import annotations

import re

from memoryd.redact.lazy import lazy
from memoryd.redact.prefilter import finditer_in
from memoryd.redact.spans import QUOTED, VAL, apply_spans, near, sub_where, windows
from memoryd.redact.tokens import looks_random
from memoryd.redact.values import WEAK_KINDS, password_like, plain, secret_key_kind, weak_ok

# --- SQL ------------------------------------------------------------------------------------------

_SQL_RE = lazy(
    r"(?i)(?:\bset[ \t]+password(?:[ \t]+for[ \t]+\S+)?[ \t]*=[ \t]*(?:password[ \t]*\([ \t]*)?"
    r"(?=\\*['\"])|(?:\b|(?<=@)[a-z_]{0,24})(?:password|passwd)|\bsecret"
    r"|\bidentified[ \t]+(?:with[ \t]+\w+[ \t]+)?by(?:[ \t]+password)?)"
    r"[ \t]*(?:=[ \t]*|\bto[ \t]+|\bas[ \t]+|\(?[ \t]*)?(?:password[ \t]*\([ \t]*)?"
    r"(?<![\w\\])(?:[EN](?=['\"]))?" + QUOTED
)
_ORACLE_RE = lazy(r"(?i)\bidentified[ \t]+by[ \t]+(?P<s>(?![\"'`:?])[^\s;\"'`]+)")
_SQL_WORDS = frozenset(
    {"values", "null", "default", "password", "externally", "globally", "random", "with"}
)
# DB2: CONNECT TO db USER u USING pw
_USING_RE = lazy(r"(?i)\buser[ \t]+[\w.\-@]+[ \t]+using[ \t]+" + VAL)


def _sql_judge(m: re.Match[str], text: str) -> bool:
    if m.group("q").lstrip("\\") == "`":
        return False  # a quoted identifier, not a literal
    value = m.group("s")
    return not plain(value) and not re.fullmatch(r"[\w.]+\(\)?|\*+|\?|%s", value)


def _oracle_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    return value.lower() not in _SQL_WORDS and not plain(value, bare=True)


# --- pairs ----------------------------------------------------------------------------------------

_PAIR_RE = lazy(
    r"(?P<kq>\\*[\"'`])(?P<k>[A-Za-z_][\w.\-]{0,63})(?P=kq)[ \t]*(?:[,:]|=>|->|[ \t]to)[ \t]*"
    + QUOTED.replace("<q>", "<q2>").replace("(?P=q)", "(?P=q2)")
)
_SUBSCRIPT_RE = lazy(
    r"\[[ \t]*(?P<kq>\\*[\"'])(?P<k>[A-Za-z_][\w.\-]{0,63})(?P=kq)[ \t]*\][ \t]*(?:=|:=|\|\|=)[ \t]*"
    + QUOTED
)
_BRACKET_KEY_RE = lazy(r"\[(?P<k>[A-Za-z_][\w\-]{0,63})\][ \t]*=[ \t]*" + VAL)
# KEY ?= v, KEY += v, KEY ::= v (make); KEY: &str = "v", key: String = "v" (annotated)
_MAKE_RE = lazy(r"(?m)^(?P<k>[A-Za-z_][\w.\-]{0,63})[ \t]*(?:\?=|\+=|::=)[ \t]*(?P<s>[^\s#\\]+)")
_ANNOTATED_RE = lazy(
    r"(?<![\w$])(?P<k>[A-Za-z_][\w]{0,63})[ \t]*:[ \t]*&?'?[\w]*[ \t]*[\w\[\]<>:, ]{0,40}?[ \t]*=[ \t]*"
    + QUOTED
)
# "lit".into(), []byte("lit"), Buffer.from("lit"), Some("lit"), String::from("lit"): a literal
# wrapped in a conversion, assigned to a secret-named key
_WRAPPED_RE = lazy(
    r"(?<![\w$])(?P<k>[A-Za-z_][\w]{0,63})[ \t]*(?::=|=|:)[ \t]*(?:&?\[\]byte|Buffer\.from|bytes(?:\.fromhex)?"
    r"|String::from|Some|SecretStr|SecretString::new|Secret::new|base64\.b64decode|bytearray|str|String"
    r"|Encoding\.UTF8\.GetBytes|\w+\.encode)\([ \t]*(?:[bru]{1,2}(?=[\"']))?"
    + QUOTED
    + r"|(?<![\w$])(?P<k2>[A-Za-z_][\w]{0,63})[ \t]*(?::=|=|:)[ \t]*"
    + QUOTED.replace("<q>", "<q3>").replace("(?P=q)", "(?P=q3)").replace("<s>", "<s3>")
    + r"\.(?:into|to_string|to_owned|encode|getBytes|toCharArray|as_bytes|bytes|strip|trim)\("
)


def _wrapped(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for m in finditer_in(_WRAPPED_RE, text, windows(text, _WRAPPERS)):
        key, group = (m.group("k"), "s") if m.group("k") else (m.group("k2"), "s3")
        kind = secret_key_kind(key)
        value = m.group(group)
        if kind is None or kind == "cookie":
            continue
        if kind in WEAK_KINDS and not looks_random(value):
            continue
        if not plain(value, kind):
            spans.append((m.start(group), m.end(group)))
    return apply_spans(text, spans)


# "Bearer " + "lit", 'Token ' + 'lit': a scheme word concatenated with a literal
_SCHEME_CONCAT_RE = lazy(
    r"(?i)[\"'`](?:bearer|token|basic|apikey|digest)[ \t]+[\"'`][ \t]*\+[ \t]*" + QUOTED
)
# :basic, 'user', 'pw' (Faraday); basic_auth=("user", "pw"); auth: ['user', 'pw']
_AUTH_PAIR_RE = lazy(
    r"(?i)(?::basic|\w*auth\w*[ \t]*[=:][ \t]*[(\[])[ \t]*,?[ \t]*(?P<uq>\\*[\"'])[^\"'\n]{1,128}(?P=uq)[ \t]*,[ \t]*"
    + QUOTED
)
# Hardhat/Foundry: accounts: ["0x<64 hex>"], a deployer's private key
_EVM_ACCOUNTS_RE = lazy(r"accounts[ \t]*:[ \t]*\[[ \t]*(?P<q>[\"'`])(?P<s>0x[0-9a-fA-F]{64})(?P=q)")
# DB_PASSWORD "x", auth_basic_user_file…: a secret-named word, blanks, a quoted literal, line end
_SPACED_RE = lazy(
    r"(?m)(?:^|(?<=[\s(]))(?P<k>[A-Za-z_@][\w.\-]{1,63})[ \t]+" + QUOTED + r"[ \t;,]*(?=\r?$|\\n)"
)


# $db_password = '…' (PHP, Perl, PowerShell): a variable named for a secret given a literal
_SIGIL_RE = lazy(r"(?<![\w$])\$(?P<k>[A-Za-z_]\w{1,63})[ \t]*(?:=|:=)[ \t]*" + QUOTED)
# session=…, _acme_session=…, JSESSIONID=…, SESSION_SALT=…: random values of session-ish names
_SESSION_RE = lazy(
    r"(?i)(?<![\w\-])(?P<k>[\w.\-]*(?:session|sess|sid|salt|pepper|identity|aspnetcore|remember_?me)(?:id|\.application)?)[\"']?[ \t]*[=:][ \t]*"
    + VAL
)


def _session_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    return len(value) >= 16 and looks_random(value) and not plain(value, "weak")


# NEO4J_AUTH=neo4j/pw, DOCKER_AUTH=user:pw, BUNDLE_GEMS__HOST__COM=user:pw: a user and a password
_USER_PASS_VALUE_RE = lazy(
    r"(?<![\w\-])(?P<k>[A-Z][A-Z0-9_]*(?:AUTH|CREDENTIALS?|CREDS|LOGIN|USERPASS|__COM|__IO|__ORG|__NET)"
    r"[A-Z0-9_]*)=[\"']?(?P<u>[\w.\-@]{1,64})[/:](?P<s>[^\s\"'/:@]{4,256})"
)


def _user_pass_value(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    return not plain(value) and (password_like(value) or _has_letters_and_digits(value))


def _has_letters_and_digits(value: str) -> bool:
    return len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


# mount options: username=u,password=pw,uid=1000 (fstab, mount -o, smb credentials)
_OPTION_RE = lazy(r"(?i)(?<![\w\-])(?:password|passwd|pass|pwd)=(?P<s>[^,\s\"']{3,256})(?=,)")


_COMMAND_SUBSTITUTION_RE = lazy(
    r"(?:cat|echo|printf|pass|op|vault|aws|gcloud|az|security|gopass)\s"
)


def _pair_judge(m: re.Match[str], text: str) -> bool:
    kind = secret_key_kind(m.group("k"))
    value = m.group("s")
    if (m.groupdict().get("q") or "").endswith("`") and _COMMAND_SUBSTITUTION_RE.match(value):
        return False  # \set pw `cat /run/secrets/pw`: a command that reads the secret
    if kind is None or kind == "cookie":
        return False
    if kind == "authorization":
        value = re.sub(r"(?i)^(?:bearer|basic|token|digest|apikey)[ \t]+", "", value)
    if kind in WEAK_KINDS:
        return not plain(value, "weak") and looks_random(value)
    return not plain(value, kind)


# --- name / value items ---------------------------------------------------------------------------

_NAME_FIELD_RE = lazy(
    r"(?i)(?<![\w\-])[\"']?(?:parameter|setting|secret|option|attribute|field)?"
    r"(?:name|key|keyname|parameter|param|id|env|variable)[\"']?[ \t]*[:=][ \t]*"
    r"[\"']?(?P<k>[A-Za-z_/@][\w.\-/@]{0,127})[\"']?"
)
_VALUE_FIELD_RE = lazy(
    r"(?i)(?<![\w\-])[\"']?(?:parameter|setting|secret|option|attribute|field)?_?value[\"']?"
    r"[ \t]*[:=][ \t]*" + VAL
)
_VALUE_HEAD_RE = lazy(r"(?i)value[\"']?[ \t]*[:=]")  # what every value field holds
_ITEM_REACH = 240


def _named_values(text: str) -> tuple[str, int]:
    """A ``value`` field in the same item as a ``name`` field that names a secret."""
    spans: list[tuple[int, int]] = []
    if _VALUE_HEAD_RE.search(text) is None:
        return text, 0  # no value field at all (most texts with "value" in them): no name to find
    for name in _NAME_FIELD_RE.finditer(text):
        key = name.group("k").rsplit("/", 1)[-1]
        kind = secret_key_kind(key)
        numbered_key = re.fullmatch(r"(?i)key\d", key) is not None  # Azure's key1, key2
        if kind is None and not numbered_key:
            continue
        window_end = min(len(text), name.end() + _ITEM_REACH)
        value = _VALUE_FIELD_RE.search(text, name.end(), window_end)
        if value is None:
            continue
        between = text[name.end() : value.start()]
        if re.search(r"[{}\]]|(?:^|\n|\\n)[ \t]*-[ \t]|\bname\b", between):
            continue  # another item starts before the value
        v = value.group("s")
        if (kind is None or kind in WEAK_KINDS) and not looks_random(v):
            continue
        if not plain(v, kind or "weak", bare=not value.group("q")):
            spans.append((value.start("s"), value.end("s")))
    return apply_spans(text, spans)


_TF_VARIABLE_RE = lazy(
    r"variable[ \t]+\"(?P<k>[\w\-]+)\"[ \t]*\{(?P<body>[^{}]{0,600}?)\}", re.DOTALL
)
_TF_DEFAULT_RE = lazy(r"\bdefault[ \t]*=[ \t]*" + QUOTED)


def _terraform_defaults(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for block in _TF_VARIABLE_RE.finditer(text):
        kind = secret_key_kind(block.group("k"))
        sensitive = re.search(r"\bsensitive[ \t]*=[ \t]*true", block.group("body")) is not None
        if kind is None and not sensitive:
            continue
        d = _TF_DEFAULT_RE.search(text, block.start("body"), block.end("body"))
        if d is not None and not plain(d.group("s"), kind or "password"):
            spans.append((d.start("s"), d.end("s")))
    return apply_spans(text, spans)


_JWK_PRIVATE_RE = lazy(r"(?P<kq>\\*\")(?:d|p|q|dp|dq|qi|k)(?P=kq)[ \t]*:[ \t]*" + QUOTED)


def _jwk(text: str) -> tuple[str, int]:
    if '"kty' not in text and '\\"kty' not in text:
        return text, 0
    return sub_where(_JWK_PRIVATE_RE, lambda m, t: len(m.group("s")) >= 16)(text)


# --- calls ----------------------------------------------------------------------------------------

_OPEN_RE = lazy(r"\((?=[\s\S]{0,200}?[\"'`])")
_ARG_RE = lazy(r"(?:[bruBRUfF]{1,2}(?=[\"']))?(?P<q>\\*[\"'`])(?P<s>(?:(?!(?P=q))[^\n\\])*?)(?P=q)")
_ARG_STRUCT_RE = lazy(r"[\"'`()\[\]{}]|\\(?=[\"'])")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")
_CREDENTIAL_CALL_RE = lazy(
    r"(?i)(?:log_?in|logon|sign_?in|authenticate|auth|bind(?:_s)?|connect|credentials?|sign"
    r"|encode|hmac|fernet|cipher|client|session|sdk|pool|smtp\w*|imap\w*|ftp\w*|t?otp|hotp"
    r"|securestring|handler|keypair|wallet|signer|account|aes|des|jwt|jose|crypt|mac)(?:async|_s|_sync)?"
)
_SETTER_PREFIX_RE = lazy(
    r"^(?:set|with|use|change|update|create|store|save|put|add|write|register|assign|init)"
    r"_?(?=[A-Z_a-z])"
)
_GETTER_RE = lazy(
    r"(?i)^(?:get|read|fetch|load|lookup|find|has|check|verify|validate|hash|compare|is|prompt"
    r"|ask|input|reset|forgot|request|delete|remove|clear|revoke|generate|rotate|mask|redact)"
)
_KEYWORD_ARG_RE = lazy(
    r"(?i)(?:user(?:name)?|host(?:name)?|login|email|dsn|url|db|database|name|algorithm|region"
    r"|port|scheme|path|file\w*|mode|charset|encoding|driver|dialect|issuer|audience|label"
    r"|title|prompt|message|description)\w*[ \t]*[=:][ \t]*\Z"
)
_HOST_RE = lazy(
    r"localhost|[\w\-]+(?:\.[\w\-]+)+(?::\d+)?|\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?|[\w\-.]+:\d{2,5}"
)
_CALL_SPAN = 600
_CALL_LITERALS = 12


def _callee(text: str, i: int) -> tuple[str, bool]:
    """The (dotted) name right before the "(" at ``i``, and whether ``new`` precedes it."""
    j = i
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    k = j
    lo = max(0, j - 96)
    while k > lo and (
        text[k - 1] in _NAME_CHARS
        or (text[k - 1] in ".:" and k - 1 > lo and text[k - 2] in _NAME_CHARS | {":"})
    ):
        k -= 1
    constructed = re.search(r"(?<![\w$])new[ \t]+\Z", text[max(0, k - 40) : k])
    return text[k:j], constructed is not None


def _arguments(text: str, start: int, *, nested: bool = False) -> tuple[list[re.Match[str]], str]:
    """The literals in the argument list opening at ``start`` (directly in it, or at any depth
    when ``nested``: ``AES.new(bytes.fromhex("…"))``), and the list's text."""
    depth, i, limit = 1, start, min(len(text), start + _CALL_SPAN)
    args: list[re.Match[str]] = []
    literals = 0
    while depth and (hit := _ARG_STRUCT_RE.search(text, i, limit)) is not None:
        i, ch = hit.start(), hit.group()[0]
        if ch in "\"'`\\":
            m = _ARG_RE.match(text, i)
            literals += 1
            if m is None or literals > _CALL_LITERALS:
                break  # no call takes more literals than that: a data table, or hostile text
            if depth == 1 or nested:
                args.append(m)
            i = m.end()
            continue
        depth += 1 if ch in "([{" else -1
        i += 1
    else:
        i = limit if depth else i
    return args, text[start:i]


def _reads_a_secret(name: str) -> bool:
    """``getPassword()``, ``read_token``, ``os.getenv``: a call that fetches or checks a secret."""
    last = re.split(r"\.|::", name)[-1]
    m = _GETTER_RE.match(last)
    return m is not None and (
        secret_key_kind(last[m.end() :] or "x") is not None or last.lower() in ("getenv", "get")
    )


def _random_constructor_args(args: list[re.Match[str]]) -> list[tuple[int, int]]:
    """A class given a long random literal: an SDK's client id and secret, whatever its name."""
    return [
        (arg.start("s"), arg.end("s"))
        for arg in args
        if len(arg.group("s")) >= 24
        and not plain(arg.group("s"))
        and looks_random(arg.group("s"))
        and not re.fullmatch(r"[0-9a-fA-F\-]+", arg.group("s"))
    ]


def _setter(name: str, args: list[re.Match[str]]) -> re.Match[str] | None:
    last = re.split(r"\.|::", name)[-1]
    bare = _SETTER_PREFIX_RE.sub("", last)
    if not bare or _GETTER_RE.match(last) or bare.lower() in ("get", "set", "with", "use"):
        return None
    kind = secret_key_kind(bare)
    if kind is None or kind == "cookie" or kind in WEAK_KINDS:
        return None
    value = args[-1].group("s")
    if kind == "authorization":
        value = re.sub(r"(?i)^(?:bearer|basic|token|digest)[ \t]+", "", value)
    if plain(value, kind) or (len(args) == 1 and re.fullmatch(r"[A-Z_][A-Z0-9_]*", value)):
        return None
    return args[-1]


def _connection_shaped(args: list[re.Match[str]], arglist: str) -> bool:
    if any(_HOST_RE.fullmatch(a.group("s")) for a in args):
        return True
    return re.search(r"(?<![\w.\-])\d{4,5}(?![\w.\-])", arglist) is not None  # a port


def _calls(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for opening in _OPEN_RE.finditer(text):
        name, constructed = _callee(text, opening.start())
        if not name:
            continue
        credential = _CREDENTIAL_CALL_RE.search(name) is not None
        args, arglist = _arguments(text, opening.end(), nested=credential)
        if not args:
            continue
        hit = _setter(name, args)
        if hit is not None:
            spans.append((hit.start("s"), hit.end("s")))
            continue
        if _reads_a_secret(name):
            continue
        connection = _connection_shaped(args, arglist)
        if not (credential or constructed or connection):
            if name.rsplit(".", 1)[-1][:1].isupper():
                spans += _random_constructor_args(args)  # LiveEnvironment("<id>", "<secret>")
            continue
        after_user = False
        for arg in args:
            if _KEYWORD_ARG_RE.search(text, max(opening.end(), arg.start() - 40), arg.start()):
                after_user = False
                continue  # a keyword argument that names the user, the host or the like
            value = arg.group("s")
            if _host_like(value) or plain(value):
                after_user = _user_like(value) and not _HOST_RE.fullmatch(value)
                continue
            strong = after_user and (credential or connection)
            if weak_ok(value) or (strong and _not_a_name(value)):
                spans.append((arg.start("s"), arg.end("s")))
            after_user = _user_like(value)
    return apply_spans(text, spans)


_USER_RE = lazy(
    r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+|(?:cn|uid|dn)=[^\n]+|[a-z][a-z0-9_.\-]{0,31}|[A-Z]+\\\\?[\w.\-]+"
)


def _user_like(value: str) -> bool:
    """An email, a DN or a login name: what a login or connect call takes before the password."""
    return _USER_RE.fullmatch(value) is not None


def _not_a_name(value: str) -> bool:
    """After a user, anything but an ordinary word, a number, a path, a host or a sentence is the
    password (16 lower-case letters included: Google's app passwords)."""
    if len(value) < 6 or value.isdigit() or "/" in value or _HOST_RE.fullmatch(value):
        return False
    if value.count(" ") >= 2 and not re.fullmatch(r"[a-z]{4}(?: [a-z]{4}){3}", value):
        return False  # a message, a subject line
    if re.fullmatch(r"[a-z]{12,}", value):
        return True
    return not re.fullmatch(r"[a-z]+|[A-Z][a-z]+|[a-z]+_[a-z]+|utf-?8\w*", value)


def _host_like(value: str) -> bool:
    if "://" in value or _HOST_RE.fullmatch(value):
        return True
    return "@" in value and "." in value.rsplit("@", 1)[-1]


_SECRET_WORDS: tuple[str, ...] = ("pass", "secret", "token", "key", "auth", "pwd", "cred", "pw")
_WRAPPERS: tuple[str, ...] = (
    "byte(",
    "buffer.from(",
    "bytes(",
    "fromhex(",
    "::from(",
    "some(",
    "secret",
    "b64decode(",
)
_WRAPPERS += ("bytearray(", "str(", "string(", "getbytes(", ".encode(", ".into(", "to_string(")
_WRAPPERS += ("to_owned(", "as_bytes(", "tochararray(", ".strip(", ".trim(")
_SESSION_WORDS: tuple[str, ...] = (
    "sess",
    "sid",
    "salt",
    "pepper",
    "identity",
    "aspnet",
    "remember",
)
_SQL_WORDS_HINT: tuple[str, ...] = ("pass", "identified", "secret")


def _literal(m: re.Match[str], text: str) -> bool:
    return not plain(m.group("s"))


EDITS = (
    ("sql-password", _SQL_WORDS_HINT, near(_SQL_WORDS_HINT, _SQL_RE, _sql_judge)),
    ("sql-password", ("identified",), sub_where(_ORACLE_RE, _oracle_judge)),
    ("sql-password", ("using",), sub_where(_USING_RE, _oracle_judge)),
    ("code-secret", _SECRET_WORDS, sub_where(_PAIR_RE, _pair_judge)),
    ("code-secret", ("[",), sub_where(_SUBSCRIPT_RE, _pair_judge)),
    ("code-secret", ("]",), near(_SECRET_WORDS, _BRACKET_KEY_RE, _pair_judge)),
    ("code-secret", _SECRET_WORDS, near(_SECRET_WORDS, _SPACED_RE, _pair_judge)),
    ("code-secret", ("$",), near(_SECRET_WORDS, _SIGIL_RE, _pair_judge)),
    ("code-secret", ("?=", "+=", "::="), sub_where(_MAKE_RE, _pair_judge)),
    ("code-secret", (":",), near(_SECRET_WORDS, _ANNOTATED_RE, _pair_judge)),
    ("code-secret", _WRAPPERS, _wrapped),
    ("code-secret", ("+",), sub_where(_SCHEME_CONCAT_RE, _literal)),
    ("code-credentials", ("auth", ":basic"), near(("auth", ":basic"), _AUTH_PAIR_RE, _literal)),
    ("code-secret", ("accounts",), sub_where(_EVM_ACCOUNTS_RE, lambda m, t: True)),
    ("code-secret", _SESSION_WORDS, near(_SESSION_WORDS, _SESSION_RE, _session_judge)),
    (
        "code-secret",
        ("auth", "cred", "login", "userpass", "__"),
        sub_where(_USER_PASS_VALUE_RE, _user_pass_value),
    ),
    ("config-password", ("pass", "pwd"), sub_where(_OPTION_RE, _literal)),
    ("code-secret", ("value",), _named_values),
    ("code-secret", ("variable",), _terraform_defaults),
    ("code-secret", ("kty",), _jwk),
    ("code-credentials", ("(",), _calls),
)
