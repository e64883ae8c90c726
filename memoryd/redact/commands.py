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
  (``requirepass X``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from memoryd.redact.tokens import REDACTED, Rule

_VALUE = r"(?P<s>\"[^\"\n]*\"|'[^'\n]*'|[^\s'\"`;|&<>()]+)"
_SEGMENT_END_RE = re.compile(r"[\n;|]|&&")
_REFERENCE_RE = re.compile(r"[\"']?(?:\$\{?[A-Za-z_]\w*\}?|\{\{[^}]*\}\}|<[^<>]*>|\*+|x{3,})[\"']?")
_PORTISH_RE = re.compile(r"[\"']?[\d.:/\-]+(?:tcp|udp)?[\"']?")
_MARKER_START = "[REDACTED"


def _segment(text: str, i: int) -> tuple[int, int]:
    """The command around position ``i``: from the previous to the next ``; | && newline``."""
    lo = max(0, i - 2000)
    start = lo
    for m in _SEGMENT_END_RE.finditer(text, lo, i):
        start = m.end()
    stop = _SEGMENT_END_RE.search(text, i)
    return start, stop.start() if stop is not None else len(text)


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
    pattern: str, context: str | None, *, flags: int = 0, ports_ok: bool = False
) -> Callable[[str], tuple[str, int]]:
    """Redact group ``s`` of ``pattern`` where ``context`` occurs earlier in the same command."""
    regex = re.compile(pattern, flags)
    ctx = re.compile(context) if context else None

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            if not _is_secret_value(m.group("s"), ports_ok=ports_ok):
                return m.group()
            if ctx is not None:
                start, _ = _segment(text, m.start())
                if ctx.search(text, start, m.start() + 1) is None:
                    return m.group()
            count += 1
            return _replace_s(m)

        return regex.sub(repl, text), count

    return apply


_HTTP_CLIENT = r"(?:^|[\s(`\"'])(?:curl|wget|http|https|xh|httpie|lftp)(?=\s)"
_LOGIN_USER = r"(?<!\S)(?:-u|-U|-D|-l|--user|--username)(?:[ \t]+|=)[^\s\-]"
_LOGIN_COMMAND = (
    r"\b(?:sshpass|redis-cli|ldap(?:search|add|modify|delete|passwd|whoami)"
    r"|(?:docker|podman|buildah|skopeo|helm|oras|crane|az|oc|cf|argocd|nerdctl|regctl)"
    r"(?:[ \t]+registry)?[ \t]+login)\b"
)

# user:password after a user flag, attached or spaced, quoted or not
_USERPASS = (
    r"-(?<![\w-]-)(?:u|U|-user|-proxy-user|a|-auth)(?:[ \t]+|=|(?=[^\s\-]))"
    r"(?P<q>['\"]?)[^\s:'\"]*:(?P<s>[^\s'\"]+)(?P=q)"
)
_ATTACHED = r"-(?<=[ \t]-)p(?P<s>[^\s'\"`;|&<>()-][^\s'\"`;|&<>()]*|'[^'\n]*'|\"[^\"\n]*\")"
_SPACED_P = rf"-(?<=[ \t]-)[pw][ \t]+{_VALUE}"


def _userpass(text: str) -> tuple[str, int]:
    regex = _USERPASS_RE
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        user_pass = m.group()[m.start("q") - m.start() + len(m.group("q")) :].split(":", 1)
        user, password = user_pass[0], m.group("s")
        if not _is_secret_value(password) or (user.isdigit() and password.isdigit()):
            return m.group()
        flag = m.group().split(None, 1)[0].split("=", 1)[0]
        if flag in ("-u", "-U", "-a", "--user") or flag.startswith(("-u", "-U", "-a")):
            start, _ = _segment(text, m.start())
            if _HTTP_CLIENT_RE.search(text, start, m.start() + 1) is None:
                return m.group()
        count += 1
        return _replace_s(m)

    return regex.sub(repl, text), count


_USERPASS_RE = re.compile(_USERPASS)
_HTTP_CLIENT_RE = re.compile(_HTTP_CLIENT)

# .netrc: a password (or account) token in a file that names a machine or a login
_NETRC_RE = re.compile(r"p(?<![\w\-]p)ass(?:word|wd)[ \t]+(?P<s>[^\s]+)")
_NETRC_CONTEXT_RE = re.compile(r"(?<![\w\-])(?:machine|default|login)[ \t\n]")


def _netrc(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        value = m.group("s")
        if not _is_secret_value(value, ports_ok=True):
            return m.group()
        line_start = text.rfind("\n", 0, m.start()) + 1
        before = text[max(0, line_start - 300) : m.start()]
        if _NETRC_CONTEXT_RE.search(before) is None:
            return m.group()
        line_end = text.find("\n", m.end())
        after = text[m.end() : len(text) if line_end < 0 else line_end]
        if after.strip() and not re.match(
            r"[ \t]+(?:machine|default|login|account|macdef)\b", after
        ):
            return m.group()  # prose: "password reset for the login page"
        count += 1
        return _replace_s(m)

    return _NETRC_RE.sub(repl, text), count


# .pgpass: hostname:port:database:username:password (a colon or backslash escaped inside)
_PGPASS_RE = re.compile(
    r":(?P<port>\*|\d{1,5}):(?:\*|[^\s:]+):(?:\*|[^\s:]+):(?P<s>(?:\\.|[^\s\\])+?)[ \t]*\r?$",
    re.MULTILINE,
)
_PGPASS_HOST_RE = re.compile(r"\*|[A-Za-z0-9][\w.\-]*")


def _pgpass(text: str) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        line_start = text.rfind("\n", 0, m.start()) + 1
        host, value = text[line_start : m.start()], m.group("s")
        if not _PGPASS_HOST_RE.fullmatch(host):
            return m.group()
        if host != "*" and not any(c.isalpha() for c in host) and host.count(".") != 3:
            return m.group()  # 12:30:00:... is a time, not a host
        if re.fullmatch(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})*", value) or not _is_secret_value(
            value, ports_ok=True
        ):
            return m.group()
        count += 1
        return _replace_s(m)

    return _PGPASS_RE.sub(repl, text), count


_RULES: tuple[tuple[str, tuple[str, ...], Callable[[str], tuple[str, int]]], ...] = (
    ("cli-password", ("-u", "-a", "--auth", "--proxy-user"), _userpass),
    (
        "cli-password",
        ("mysql", "mariadb", "sshpass", "7z"),
        _contextual(_ATTACHED, r"\b(?:mysql\w*|mariadb[\w\-]*|sshpass|7za?)\b", ports_ok=True),
    ),
    ("cli-password", ("-p", "-w"), _contextual(_SPACED_P, _LOGIN_USER)),
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
        _contextual(rf"-(?<=[ \t]-)[NP][ \t]+{_VALUE}", r"\bssh-keygen\b"),
    ),
    ("cli-password", ("zip",), _contextual(rf"-(?<=[ \t]-)P[ \t]+{_VALUE}", r"\b(?:un)?zip\b")),
    ("cli-password", ("openssl",), _contextual(rf"-(?<=[ \t]-)k[ \t]+{_VALUE}", r"\bopenssl\b")),
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
            r"\bhtpasswd[ \t]+-[a-zA-Z]*b[a-zA-Z]*(?:[ \t]+-\S+)*(?:[ \t]+[^\s\-]\S*){1,2}[ \t]+"
            + _VALUE,
            None,
        ),
    ),
    ("netrc", ("password", "passwd"), _netrc),
    ("pgpass", (), _pgpass),
    (
        "config-password",
        ("requirepass", "masterauth", "masterpass", "rpcpassword", "auth_pass"),
        _contextual(
            r"(?m)^[ \t]*(?:requirepass|masterauth|masterpass|rpcpassword|auth_pass)[ \t]+"
            r"(?P<s>\S+)[ \t]*\r?$",
            None,
            ports_ok=True,
        ),
    ),
)

RULES: tuple[Rule, ...] = tuple(Rule(name, apply, hints) for name, hints, apply in _RULES)
