"""Credentials that only their surroundings reveal: command lines and credential files.

A value after ``-p`` is a port for ``ssh`` and a password for ``sshpass``; ``user:pass`` after
``-u`` is a login for ``curl`` and a uid:gid for ``docker``. These rules look at the command or
file the value sits in, so the general assignment scanner need not guess:

* ``curl -u user:pass`` (also ``--user``, ``--proxy-user``, ``-U``; httpie's ``-a``/``--auth``);
* ``mysql -pSECRET`` and the other attached-password tools (``sshpass -pX``, ``7z -pX``);
* ``-p VALUE`` / ``-w VALUE`` on a login-style command line (one that also names a user with
  ``-u``/``-U``/``-D``/``--username``) and on ``sshpass``, ``docker login``, ``redis-cli -a``;
  values that read as ports (``5432``, ``8080:80``) stay;
* ``openssl ... -passin pass:X``, ``ssh-keygen -N X``, ``zip -P X``, ``smbclient -U user%X``,
  ``htpasswd -b file user X``;
* ``.netrc`` (``machine h login u password p``, one token per line or all on one line);
* ``.pgpass`` lines (``host:port:db:user:password``) and ``redis.conf``-style directives
  (``requirepass X``);
* XML elements and attributes named for a secret (``<password>X</password>``,
  ``<add key="Password" value="X"/>``), positional credentials in code (``auth=("u", "X")``,
  ``SetBasicAuth("u", "X")``) and chat (``the password is X`` where X looks like one).

The rules also work where the text is a JSON string (tool output as opencode stores it): an
escaped ``\n`` ends a line and ``\"`` is a quote.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memoryd.redact.lazy import lazy
from memoryd.redact.spans import segment_end, segment_start
from memoryd.redact.tokens import REDACTED, Rule, looks_random
from memoryd.redact.values import keep, secret_key_kind

_VALUE = r"(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"`;|&<>()]+)"
_REFERENCE_RE = lazy(
    r"[\"']?(?:\$env:[A-Za-z_]\w*|\$\{?[A-Za-z_]\w*\}?|\{\{[^}]*\}\}|<[^<>]*>|\*+|x{3,})[\"']?"
)
_PORTISH_RE = lazy(r"[\"']?[\d.:/\-]+(?:tcp|udp)?[\"']?")
_MARKER_START = "[REDACTED"


def _segment(text: str, i: int) -> tuple[int, int]:
    """The command around position ``i``: from the previous to the next ``; | && newline``."""
    return segment_start(text, i), segment_end(text, i)


def _is_secret_value(value: str, *, ports_ok: bool = False) -> bool:
    v = value.strip("\"'")
    if len(v) < 3 or v.startswith(_MARKER_START) or v.startswith("-"):
        return False
    if _REFERENCE_RE.fullmatch(value):
        return False
    return ports_ok or not _PORTISH_RE.fullmatch(value)


def _replace_s(m: re.Match[str], group: str = "s") -> str:
    """The match with group ``group`` replaced, keeping the value's quotes."""
    value = m.group(group)
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
    whole = m.group()
    a, b = m.start(group) - m.start(), m.end(group) - m.start()
    return f"{whole[:a]}{quote}{REDACTED}{quote}{whole[b:]}"


def _contextual(
    pattern: str,
    context: str | None,
    *,
    ports_ok: bool = False,
    unless: str | None = None,
    line_start: bool = False,
) -> Callable[[str], tuple[str, int]]:
    """Redact group ``s`` of ``pattern`` where ``context`` occurs earlier in the same command
    (and ``unless`` does not)."""
    regex = lazy(pattern)
    ctx = lazy(context) if context else None
    not_ctx = lazy(unless) if unless else None

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            if not _is_secret_value(m.group("s"), ports_ok=ports_ok):
                return m.group()
            if line_start and text[_line_bounds(text, m.start(), m.start())[0] : m.start()].strip():
                return m.group()  # a directive opens its line
            if ctx is not None or not_ctx is not None:
                start, _ = _segment(text, m.start())
                if ctx is not None and ctx.search(text, start, m.start() + 1) is None:
                    return m.group()
                if not_ctx is not None and not_ctx.search(text, start, m.start() + 1):
                    return m.group()
            count += 1
            return _replace_s(m)

        return regex.sub(repl, text), count

    return apply


# A command name starts a word; after a JSON-escaped newline (``\\n``) too.
_CMD = r"(?:(?<![\w\-])|(?<=\\[nt]))"
_HTTP_CLIENT = rf"{_CMD}(?:curl|wget|http|https|xh|httpie|lftp)(?=\s)"
_LOGIN_USER = r"(?<!\S)(?:-u|-U|-D|-l|--user|--username)(?:[ \t]+|=)[^\s\-]"
_LOGIN_COMMAND = (
    rf"{_CMD}(?:sshpass|redis-cli|ldap(?:search|add|modify|delete|passwd|whoami)"
    r"|(?:docker|podman|buildah|skopeo|helm|oras|crane|az|oc|cf|argocd|nerdctl|regctl)"
    r"(?:[ \t]+registry)?[ \t]+login)\b"
)

# user:password after a user flag, attached or spaced, quoted or not (``-sSfu u:p`` too)
_USERPASS_RE = lazy(
    r"-(?<![\w-]-)(?:[A-Za-z]{0,6}[uUa]|-user|-proxy-user|-auth)(?:[ \t]+|=|(?=[^\s\-]))"
    r"(?P<q>['\"]?)(?P<user>[^\s:'\"]*):(?P<s>[^\s'\"]+)(?P=q)"
)
_HTTP_CLIENT_RE = lazy(_HTTP_CLIENT)
_ATTACHED = r"-(?<=[ \t]-)p(?P<s>[^\s'\"`;|&<>()-][^\s'\"`;|&<>()]*|'[^'\n]*'|\"[^\"\n]*\")"
_SPACED_P = rf"-(?<=[ \t]-)[pw][ \t]+{_VALUE}"


def _userpass(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        user, password = m.group("user"), m.group("s")
        if not _is_secret_value(password) or (user.isdigit() and password.isdigit()):
            return m.group()
        if not m.group().startswith(("--auth", "--proxy-user")):
            start, _ = _segment(text, m.start())
            if _HTTP_CLIENT_RE.search(text, start, m.start() + 1) is None:
                return m.group()  # docker run -u app:staff, chown-style pairs
        count += 1
        return _replace_s(m)

    return _USERPASS_RE.sub(repl, text), count


# Values and line ends that also hold where the text is a JSON string: ``\n`` and a closing quote
# end a line there.
_WORD = r"(?:[^\s\\\"]|\\(?![nrt\"\\]))+"
_EOL = r"(?=[ \t]*(?:\r?$|\\[nr]|\"))"
_BOL = r"(?:^|(?<=\\n)|(?<=\"))"
_LINE_BREAK_RE = lazy(r"\n|\\n|(?<!\\)\"")


def _line_bounds(text: str, start: int, end: int, reach: int = 300) -> tuple[int, int]:
    """The line around ``start:end``, looking at most ``reach`` characters either side."""
    lo = max(0, start - reach)
    head = lo
    for m in _LINE_BREAK_RE.finditer(text, lo, start):
        head = m.end()
    stop = _LINE_BREAK_RE.search(text, end, min(len(text), end + reach))
    return head, stop.start() if stop is not None else min(len(text), end + reach)


# .netrc: a password token in a file that names a machine or a login
_NETRC_RE = lazy(rf"assw(?<=passw)(?<![\w\-]passw)(?:ord|d)[ \t]+(?P<s>{_WORD})")
_NETRC_CONTEXT_RE = lazy(rf"{_CMD}(?:machine|default|login)(?:[ \t\n]|\\n)")
_NETRC_NEXT_RE = lazy(r"[ \t]+(?:machine|default|login|account|macdef)\b")


def _netrc(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        if not _is_secret_value(m.group("s"), ports_ok=True):
            return m.group()
        if _NETRC_CONTEXT_RE.search(text, max(0, m.start() - 300), m.start()) is None:
            return m.group()
        _, line_end = _line_bounds(text, m.start(), m.end())
        after = text[m.end() : line_end]
        if after.strip() and not _NETRC_NEXT_RE.match(after):
            return m.group()  # prose: "the password field in .netrc"
        count += 1
        return _replace_s(m)

    return _NETRC_RE.sub(repl, text), count


# .pgpass: hostname:port:database:username:password (``\:`` and ``\\`` escaped inside)
_PGPASS_RE = lazy(
    r":(?P<port>\*|\d{1,5}):(?:\*|[^\s:\"]+):(?:\*|[^\s:\"]+):"
    rf"(?P<s>(?:\\[:\\]|[^\s\\\"])+){_EOL}",
    re.MULTILINE,
)
_PGPASS_HOST_RE = lazy(r"\*|[A-Za-z0-9][\w.\-]*")
_MAC_RE = lazy(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})*")


def _pgpass(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        line_start, _ = _line_bounds(text, m.start(), m.start(), 200)
        host, value = text[line_start : m.start()], m.group("s")
        if not _PGPASS_HOST_RE.fullmatch(host):
            return m.group()
        if host != "*" and not any(c.isalpha() for c in host) and host.count(".") != 3:
            return m.group()  # 12:30:00:... is a time, not a host
        if _MAC_RE.fullmatch(value) or not _is_secret_value(value, ports_ok=True):
            return m.group()
        count += 1
        return _replace_s(m)

    return _PGPASS_RE.sub(repl, text), count


# XML: <password>x</password>, <entry key="db.password">x</entry>, <add key="Password" value="x"/>
_XML_ELEMENT_RE = lazy(
    r"<(?P<tag>[A-Za-z_][\w.:\-]{0,64})(?P<attrs>\s[^<>\n]{0,200})?>(?P<s>[^<>\n]{1,512})</(?P=tag)>"
)
_XML_KEYWORD_RE = lazy(r"(?i)pass|pwd|secret|token|key|auth|credential|cookie|master")
# cheap gates: a closing tag or a key/name attribute that names a secret
_XML_GATE_RE = lazy(
    r"</[\w.:\-]{0,30}?(?i:pass|pwd|secret|token|key|auth|credential|master)"
    r"|\b(?:key|name)\s*=\s*\\?[\"'][^\"'\\]{0,40}?(?i:pass|pwd|secret|token|key|auth|credential)"
)
_XML_NAME_ATTR_RE = lazy(r"\b(?:key|name)\s*=\s*\\?[\"']([^\"'\\]{1,64})\\?[\"']")
_XML_PAIR_RE = lazy(
    r"\b(?:key|name)\s*=\s*\\?\"(?P<k>[^\"\\]{1,64})\\?\"\s+value\s*=\s*\\?\""
    r"(?P<s>[^\"\\\n]{1,512})\\?\""
)


def _xml_kind(tag: str, attrs: str | None) -> str | None:
    if tag in ("master", "masterPassword"):
        return "password"  # Maven's settings-security.xml: the master password
    kind = secret_key_kind(tag.rsplit(":", 1)[-1])
    if kind is None and attrs and (named := _XML_NAME_ATTR_RE.search(attrs)) is not None:
        kind = secret_key_kind(named.group(1))
    return kind


def _xml(text: str) -> tuple[str, int]:
    count = 0

    def element(m: re.Match[str]) -> str:
        nonlocal count
        if not _XML_KEYWORD_RE.search(m.group("tag")) and not (
            m.group("attrs") and _XML_KEYWORD_RE.search(m.group("attrs"))
        ):
            return m.group()
        kind = _xml_kind(m.group("tag"), m.group("attrs"))
        if kind is None or kind == "cookie" or keep(m.group("s"), kind):
            return m.group()
        count += 1
        return _replace_s(m)

    def pair(m: re.Match[str]) -> str:
        nonlocal count
        kind = secret_key_kind(m.group("k"))
        if kind is None or kind == "cookie" or keep(m.group("s"), kind):
            return m.group()
        count += 1
        return _replace_s(m)

    if _XML_GATE_RE.search(text):
        text = _XML_ELEMENT_RE.sub(element, text)
    if "value=" in text:
        text = _XML_PAIR_RE.sub(pair, text)
    return text, count


# Code that passes a user and a literal password positionally: requests' auth=("u", "p"),
# HTTPBasicAuth("u", "p"), Go's SetBasicAuth("u", "p"), Java's UsernamePasswordCredentials("u", "p")
_CREDENTIAL_PAIR = (
    r"[ \t]*(?P<q1>\\?['\"])[^'\"\\\n]{1,128}(?P=q1)[ \t]*,[ \t]*(?P<q2>\\?['\"])"
    r"(?P<s>[^'\"\\\n]{1,256})(?P=q2)"
)
# Each opens with a literal (fast); the lookbehinds name the call.
_CODE_CREDENTIALS_RES = tuple(
    lazy(head + _CREDENTIAL_PAIR)
    for head in (
        r"auth(?<![\w.]auth)[ \t]*=[ \t]*\(",
        r"Auth(?:(?<=BasicAuth)|(?<=DigestAuth))[ \t]*\(",
        r"Credential(?:(?<=UsernamePasswordCredential)s|(?<=NetworkCredential))[ \t]*\(",
        r"Authentication(?<=PasswordAuthentication)[ \t]*\(",
    )
)


def _code_credentials(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        if keep(m.group("s"), "password"):
            return m.group()
        count += 1
        return _replace_s(m)

    for regex in _CODE_CREDENTIALS_RES:
        text = regex.sub(repl, text)
    return text, count


# Chat and prose: "password Tr0ub4dor&3", "the token is 9f8e7d6c5b4a39281706".
# Each keyword is found by its literal tail (fast); the lookbehinds check its first letter and that
# it starts a word.
_PROSE_SECRET_RES = tuple(
    lazy(
        rf"{tail}(?<=(?i:{first}){tail})(?<![\w\-].{tail})(?:[ \t]+(?:is|was))?[ \t]+"
        r"(?P<s>[^\s\"'`]{8,128})"
    )
    for first, tail in (
        ("p", "assword"),
        ("p", "asswd"),
        ("p", "assphrase"),
        ("s", "ecret"),
        ("t", "oken"),
        ("a", "pi key"),
        ("a", "pi_key"),
        ("a", "pikey"),
    )
)
_NOT_A_PASSWORD_RE = lazy(
    r"[A-Za-z][A-Za-z0-9]*(?:[_\-][A-Za-z0-9]+)+|.*(?:://|[/=${}()<>\[\]]).*|.*\.\w{1,4}"
)


def _looks_like_password(value: str) -> bool:
    v = value.rstrip(".,;:!?)")
    if len(v) < 8 or _NOT_A_PASSWORD_RE.fullmatch(v) or v.startswith(_MARKER_START):
        return False
    if not any(c.isdigit() for c in v) or not any(c.isalpha() for c in v):
        return False
    mixed = v.lower() != v and v.upper() != v
    return mixed or not v.isalnum() or looks_random(v)


def _prose(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("s")
        if not _looks_like_password(value):
            return m.group()
        count += 1
        v = value.rstrip(".,;:!?)")
        return m.group()[: m.start("s") - m.start()] + REDACTED + value[len(v) :]

    for regex in _PROSE_SECRET_RES:
        text = regex.sub(repl, text)
    return text, count


_RULES: tuple[tuple[str, tuple[str, ...], Callable[[str], tuple[str, int]]], ...] = (
    ("cli-password", ("curl", "wget", "http", "xh", "lftp", "--auth", "--proxy-user"), _userpass),
    (
        "cli-password",
        ("mysql", "mariadb", "sshpass", "7z"),
        _contextual(_ATTACHED, rf"{_CMD}(?:mysql\w*|mariadb[\w\-]*|sshpass|7za?)\b", ports_ok=True),
    ),
    # mysql's spaced -p prompts for the password and the next word is a database
    (
        "cli-password",
        ("-p", "-w"),
        _contextual(_SPACED_P, _LOGIN_USER, unless=rf"{_CMD}(?:mysql|mariadb)"),
    ),
    (
        "cli-password",
        ("sshpass", "login", "redis-cli", "ldap"),
        _contextual(
            rf"-(?<=[ \t]-)[pwa][ \t]+{_VALUE}",
            _LOGIN_COMMAND,
        ),
    ),
    (
        "cli-password",
        ("pass:",),
        _contextual(r"-(?<![\w-]-)(?:pass(?:in|out)?|passwd)[ \t]+pass:(?P<s>[^\s'\"]+)", None),
    ),
    (
        "cli-password",
        ("ssh-keygen",),
        _contextual(rf"-(?<=[ \t]-)[NP][ \t]+{_VALUE}", rf"{_CMD}ssh-keygen\b"),
    ),
    (
        "cli-password",
        ("zip",),
        _contextual(rf"-(?<=[ \t]-)P[ \t]+{_VALUE}", rf"{_CMD}(?:un)?zip\b"),
    ),
    (
        "cli-password",
        ("openssl",),
        _contextual(rf"-(?<=[ \t]-)k[ \t]+{_VALUE}", rf"{_CMD}openssl\b"),
    ),
    (
        "cli-password",
        ("%",),
        _contextual(
            r"-(?<![\w-]-)(?:U|-user(?:name)?)[ \t=]+['\"]?[^\s%'\"]+%(?P<s>[^\s'\"]+)", None
        ),
    ),
    (
        "cli-password",
        ("htpasswd",),
        _contextual(
            r"htpasswd(?:(?<![\w\-]htpasswd)|(?<=\\[nt]htpasswd))[ \t]+"
            r"-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+-\S+)*(?:[ \t]+[^\s\-]\S*){1,2}[ \t]+" + _VALUE,
            None,
        ),
    ),
    ("netrc", ("password", "passwd"), _netrc),
    ("xml-secret", ("</", "value="), _xml),
    ("code-credentials", ("auth", "credential"), _code_credentials),
    ("prose-secret", ("password", "passwd", "passphrase", "secret", "token", "api"), _prose),
    ("pgpass", (":",), _pgpass),
    *(
        (
            "config-password",
            (directive,),
            _contextual(
                rf"(?m){directive}[ \t]+"
                rf"(?P<s>\\?\"[^\"\\\n]*\\?\"|'[^'\n]*'|{_WORD}){_EOL}",
                None,
                ports_ok=True,
                line_start=True,
            ),
        )
        for directive in ("requirepass", "masterauth", "masterpass", "rpcpassword", "auth_pass")
    ),
)

RULES: tuple[Rule, ...] = tuple(Rule(name, apply, hints) for name, hints, apply in _RULES)
