"""Secrets known by a shape no single provider owns: encoded keys, prefixed tokens, URL parts.

* a private key base64-encoded as a whole (``LS0tLS1CRUdJTi…``, "-----BEGIN " in base64) or as DER
  (``MII…``: PKCS#1, PKCS#8, SEC1 keys and PKCS#12 keystores; certificates start otherwise);
* ``Basic <base64>`` anywhere, when it decodes to ``user:password``;
* ``prefix_`` and a long random tail: the shape most providers now give their tokens, so a new
  provider's token is caught before any rule names it (digests, ids and public keys of that shape
  are told apart by prefix and tail);
* the secret parts of URLs: incoming-webhook paths, query parameters named for a credential,
  Go's ``user:password@tcp(host)`` DSN, Wi-Fi QR payloads.
"""

from __future__ import annotations

import base64
import re

from memoryd.redact.lazy import lazy
from memoryd.redact.tokens import REDACTED, Rule, entropy, is_placeholder, looks_random, marker

# "-----BEGIN " base64-encoded, as a private key sits in a Kubernetes Secret or a *_B64 variable.
_B64_PEM_RE = lazy(
    r"LS0tLS1CRUdJT[A-Za-z0-9+/]{8,}={0,2}(?:(?:\\n|\s){1,3}[A-Za-z0-9+/]{4,}={0,2})*"
)


def _redact_b64_pem(text: str) -> tuple[str, int]:
    """A base64 run whose decoded head is a private-key block; certificates and public keys stay."""
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        head = m.group()[:88]
        head = head[: len(head) // 4 * 4]
        try:
            decoded = base64.b64decode(head)
        except ValueError:
            return m.group()
        if b"PRIVATE" not in decoded and b"ENCRYPTED" not in decoded:
            return m.group()
        count += 1
        return marker("private-key")

    return _B64_PEM_RE.sub(repl, text), count


# ``prefix_`` + a long random base62 tail: the shape nearly every provider now gives its tokens
# (``lin_api_…``, ``pscale_pw_…``, ``sbp_…``), including providers no rule names yet. Digests,
# public keys and object ids of that shape are told apart by their prefix and their tail.
_PREFIXED_RE = lazy(
    r"(?<![A-Za-z0-9_\-./+=])(?P<p>[A-Za-z][A-Za-z0-9]{0,14}(?:[_\-.][A-Za-z0-9]{1,14}){0,2}[_\-.])"
    r"(?P<t>[A-Za-z0-9]{20,}(?:[_\-][A-Za-z0-9]{4,}){0,3})(?![A-Za-z0-9_\-+/=])",
    re.ASCII,
)
_PUBLIC_PREFIXES = lazy(
    r"(?i)(?:sha\d*|md5|blake\d*\w*|xxh\w*|crc\d*|pk|pk[_.](?:live|test)|sha256~|phc)[_\-.]"
    r"|(?:pk_(?:live|test)|cus|ch|pi|pm|seti|price|prod|sub|in|ii|evt|req|acct|txn|po|tr|re|src)_"
)
_ALNUM_RUN_RE = lazy(r"[A-Za-z0-9]{20}")
_SECRETISH_PREFIX = lazy(r"(?i)key|tok|secret|pat|sk|api|auth|pw|pass|cred|bearer|access")


def _redact_prefixed(text: str) -> tuple[str, int]:
    if _ALNUM_RUN_RE.search(text) is None:
        return text, 0  # every match holds a run of 20 letters and digits (most prose has none)
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        prefix, tail = m.group("p"), m.group("t")
        if _PUBLIC_PREFIXES.fullmatch(prefix) or _PUBLIC_PREFIXES.match(prefix):
            return m.group()
        word = re.sub(r"[_\-.]", "", prefix)
        if word.lower() != word and word.upper() != word:
            return m.group()  # "AIlMf_…": a mixed-case prefix is base64 that holds a "_"
        core = re.sub(r"[_\-]", "", tail)
        if len(core) < (20 if _SECRETISH_PREFIX.search(prefix) else 30):
            return m.group()
        if re.fullmatch(r"[0-9a-f]+|[0-9A-F]+", core) and not _SECRETISH_PREFIX.search(prefix):
            return m.group()  # a digest or an id in hex
        if not (any(c.isdigit() for c in core) and any(c.isalpha() for c in core)):
            return m.group()
        one_case = core.lower() == core or core.upper() == core
        if (
            one_case
            and not re.fullmatch(r"[0-9a-f]+", core)
            and not _SECRETISH_PREFIX.search(prefix)
        ):
            return m.group()  # one letter case: a ULID, a base32 id, a build name
        if entropy(core) < 3.7 or is_placeholder(core):
            return m.group()
        count += 1
        return marker("token")

    return _PREFIXED_RE.sub(repl, text), count


# DER in base64 (``MII…``/``MH…``): a private key (PKCS#1, PKCS#8, SEC1) or a PKCS#12 keystore
# starts with a SEQUENCE and a small version INTEGER; a certificate starts with two SEQUENCEs.
_DER_B64_RE = lazy(r"(?<![A-Za-z0-9+/])M[IH][A-Za-z0-9+/]{62,}={0,2}")


def _redact_der_b64(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        try:
            head = base64.b64decode(m.group()[:16])
        except ValueError:
            return m.group()
        offset = 4 if head[1] == 0x82 else 3 if head[1] == 0x81 else 2
        if len(head) < offset + 3 or head[0] != 0x30 or head[offset : offset + 2] != b"\x02\x01":
            return m.group()
        if head[offset + 2] not in (0, 1, 3):
            return m.group()
        count += 1
        return marker("private-key")

    return _DER_B64_RE.sub(repl, text), count


# ``Basic <base64>`` anywhere (a header set in nginx, a log line): a credential when it decodes to
# ``user:password``.
_BASIC_RE = lazy(r"asic(?<=[Bb]asic)[ \t]+(?P<s>[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])")


def _redact_basic(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        raw = m.group("s")
        try:
            decoded = base64.b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
        except ValueError:
            return m.group()
        if ":" not in decoded or not decoded.isprintable():
            return m.group()
        count += 1
        return m.group()[: m.start("s") - m.start()] + REDACTED

    return _BASIC_RE.sub(repl, text), count


# Incoming-webhook URLs carry their secret in the path (Teams, Mattermost, Zapier, generic ones).
_HOOK_URL_RE = lazy(
    r"(?i)://[^\s/\\\"'`]*(?:hook|webhook)[^\s\\\"'`]*|/(?:hooks?|webhooks?|webhookb2|receiver|collector"
    r"|ingest|http-inputs)/[^\s\\\"'`]+"
)
_PATH_PART_RE = lazy(r"(?<=/)[A-Za-z0-9_\-]{16,}={0,2}(?=[/?#]|$)")


def _redact_hook_paths(text: str) -> tuple[str, int]:
    count = 0

    def part(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group()
        if re.fullmatch(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", value):
            return value  # tenant and app ids
        if not (looks_random(value) or re.fullmatch(r"[0-9a-f]{24,}|[a-z0-9]{24,}", value)):
            return value
        if not any(c.isdigit() for c in value) or is_placeholder(value):
            return value
        count += 1
        return REDACTED

    def url(m: re.Match[str]) -> str:
        return _PATH_PART_RE.sub(part, m.group())

    return _HOOK_URL_RE.sub(url, text), count


# ?appid=…&key=…&sig=…: query parameters named for a credential, when the value looks random
_QUERY_SECRET_RE = lazy(
    r"(?i)[?&](?P<k>[\w.\-]*(?:app_?id|api_?key|key|token|secret|sig|signature|auth|access_?key"
    r"|client_?secret|password|passwd|pwd|apikey|session|sid|code|credential)[\w.\-]*)="
    r"(?P<s>[^&#\s\"'`<>\\]{12,})"
)


def _redact_query_secrets(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("s")
        if value.startswith("[REDACTED") or not (
            looks_random(value) or re.fullmatch(r"[0-9a-fA-F]{24,}", value)
        ):
            return m.group()
        count += 1
        return m.group()[: m.start("s") - m.start()] + REDACTED

    return _QUERY_SECRET_RE.subn(repl, text)[0], count


# Go's MySQL DSN: user:password@tcp(host:port)/db
_GO_DSN_RE = lazy(r"(?P<u>[\w.\-]{1,64}):(?P<s>[^\s@\"'/:]{3,256})@(?:tcp|unix|udp)\(")


def _redact_go_dsn(text: str) -> tuple[str, int]:
    return _GO_DSN_RE.subn(
        lambda m: f"{m.group('u')}:{REDACTED}@" + m.group()[m.end("s") + 1 - m.start() :], text
    )


# OTEL_EXPORTER_OTLP_HEADERS="x-honeycomb-team=KEY,authorization=Basic …": header values
_OTLP_HEADERS_RE = lazy(
    r"OTEL_EXPORTER_OTLP(?:_[A-Z]+)?_HEADERS[\"']?[ \t]*[=:][ \t]*[\"']?(?P<v>[^\s\"'\n]{4,2048})"
)
_HEADER_VALUE_RE = lazy(r"(?<==)(?P<s>[^,=&\s]{8,512})")


def _redact_otlp_headers(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        def value(v: re.Match[str]) -> str:
            nonlocal count
            if v.group().startswith("[REDACTED"):
                return v.group()
            count += 1
            return REDACTED

        return m.group()[: m.start("v") - m.start()] + _HEADER_VALUE_RE.sub(value, m.group("v"))

    return _OTLP_HEADERS_RE.sub(repl, text), count


# Wi-Fi QR payloads: WIFI:T:WPA;S:<ssid>;P:<password>;;
_WIFI_QR_RE = lazy(r"WIFI:(?:[^;\n\"']*;)*?P:(?P<s>(?:\\;|[^;\n\"'])+);")


def _redact_wifi_qr(text: str) -> tuple[str, int]:
    return _WIFI_QR_RE.subn(lambda m: m.group()[: m.start("s") - m.start()] + REDACTED + ";", text)


RULES: tuple[Rule, ...] = (
    Rule("private-key", _redact_b64_pem, (), "LS0tLS1CRUdJT"),
    Rule("private-key", _redact_der_b64, (), "M"),
    Rule("basic-auth", _redact_basic, ("basic",)),
    Rule(
        "url-credentials",
        _redact_hook_paths,
        ("hook", "receiver", "collector", "ingest", "http-inputs"),
    ),
    Rule("wifi-password", _redact_wifi_qr, (), "WIFI:"),
    Rule("header-secret", _redact_otlp_headers, (), "OTEL_EXPORTER_OTLP"),
    Rule("url-credentials", _redact_query_secrets, ("=",)),
    Rule("url-credentials", _redact_go_dsn, ("@tcp(", "@unix(", "@udp(")),
    Rule("token", _redact_prefixed, ()),
)
