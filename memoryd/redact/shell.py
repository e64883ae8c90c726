"""Secrets on command lines: what everyday tools take as an argument, a flag value or stdin.

:mod:`~memoryd.redact.commands` knows a handful of tools' own flags (``curl -u``, ``mysql -p``).
This module finds the *kinds* of place a command line carries a credential:

* a literal piped or here-stringed into a command that reads a credential on stdin
  (``echo … | docker login --password-stdin``, ``… <<< "$(…)"`` stays, a literal goes), and an
  ``expect`` script's ``send`` after a password prompt, an askpass helper's ``echo``;
* the value flags and ``K=V`` words of a command that stores a secret (``gh secret set --body``,
  ``aws ssm put-parameter --value``, ``doppler secrets set K=V``, ``security … -w``);
* ``KEY VALUE`` pairs after a ``config set`` whose key names a secret (``npm config set
  …:_authToken …``, ``rclone config create … pass …``, ``bundle config host user:pass``);
* the positional credential of commands known to take one (``ngrok add-authtoken``,
  ``mc alias set``, ``rabbitmqctl add_user``, ``net use``, ``snyk auth``, ``cloudflared service
  install``) and of any ``<tool> auth|login <token>`` whose argument is a random token;
* a password flag given with a user flag (``-U sa -P …``, ``-u x -P …``), ``--user u:p`` on any
  tool, Windows' ``/p:…`` and ``/pass:…``, ``ConvertTo-SecureString "…" -AsPlainText``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from memoryd.redact.lazy import lazy
from memoryd.redact.spans import (
    QUOTED,
    VAL,
    apply_spans,
    lead,
    lines_with,
    replace_group,
    segment_end,
    segment_start,
    sub_where,
)
from memoryd.redact.tokens import looks_random
from memoryd.redact.values import password_like, plain

# --- stdin ----------------------------------------------------------------------------------------

_STDIN_READER_RE = lazy(
    r"(?i)stdin|login|secret|passw|token|credential|keyring|keychain|vault|auth|chpasswd"
    r"|--data-file|gpg|openssl|\bkey\b|\bput\b|\bset\b"
)
_ECHO = (
    r"(?:echo|printf)(?:(?<![\w\-./]echo)|(?<![\w\-./]printf)|(?<=\\[nt]echo)|(?<=\\[nt]printf))"
)
_PIPE_RE = lazy(
    _ECHO
    + r"(?:[ \t]+-[neE]+)*[ \t]+"
    + VAL
    + r"[ \t]*(?:\\n)?[ \t]*\|(?!\|)(?P<cmd>[^\n;&|]{1,300})"
)
_HERESTRING_RE = lazy(r"<<<[ \t]*" + VAL)
_EXPECT_SEND_RE = lazy(
    r"(?i)expect[^\n]{0,200}?(?:password|passphrase|passcode|pin|secret|token)[^\n]{0,100}\n"
    r"[ \t]*send[ \t]+(?:--[ \t]+)?\"(?P<s>[^\"\n]*?)(?:\\[rn])*\""
)
_ECHO_RE = lazy(_ECHO + r"(?:[ \t]+-[neE]+)*[ \t]+" + VAL)


def _stdin_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    if plain(value, bare=not m.group("q")) or value.startswith("-"):
        return False
    if m.groupdict().get("cmd") is not None:
        return _STDIN_READER_RE.search(m.group("cmd")) is not None
    start = segment_start(text, m.start())  # a here-string: the command stands before it
    return _STDIN_READER_RE.search(text, start, m.start()) is not None


def _expect_send(text: str) -> tuple[str, int]:
    return sub_where(_EXPECT_SEND_RE, lambda m, t: not plain(m.group("s")))(text)


def _askpass(text: str) -> tuple[str, int]:
    """An askpass helper prints the password: its ``echo`` literals are secrets."""
    if "askpass" not in text.lower():
        return text, 0
    return sub_where(
        _ECHO_RE, lambda m, t: not plain(m.group("s")) and password_like(m.group("s"))
    )(text)


# --- commands that store a secret -----------------------------------------------------------------

_STORE_CMD_RE = lazy(
    r"(?i)(?<![\w\-./])(?:secrets?|secretsmanager|put-secret-value|create-secret|keyvault|ssm"
    r"|put-parameter|set-parameter|vault|credentials?|keychain|keyring|kv|parameter-store"
    r"|secrets?:set|config:set|config:add|env:add|add-generic-password|add-internet-password"
    r"|secret-tool[ \t]+store|cmdkey|variables?)(?=[ \t])"
)
# The first words of a command (after sudo, env and VAR=value prefixes): where a store names itself.
_CMD_HEAD_RE = lazy(
    r"[ \t$>#]*(?:(?:sudo|env|exec|time)[ \t]+)*(?:[A-Za-z_]\w*=\S*[ \t]+)*"
    r"(?P<words>[a-z][\w.\-]*(?:[ \t]+[\w.:\-/]+){0,4})(?![=:\w])"
)
_READ_VERBS_RE = lazy(
    r"(?i)(?<![\w\-])(?:get|read|show|list|describe|delete|rm|access|versions|view|ls|inspect|login"
    r"|lookup|status|version|help|revoke)(?![\w\-])"
)
_STORE_FLAG_RE = lazy(
    r"(?<![\w\-])(?:--value|--body|-b|--secret-string|--secret-value|--data|--plaintext"
    r"|--password|--passphrase|--token|--literal|-w|--secret-binary)(?:[ \t]+|=)" + VAL
)
_KV_RE = lazy(r"(?:(?<![\w\-./:=\\])|(?<=\\[nt]))(?P<k>[A-Za-z_][A-Za-z0-9_.\-]{1,63})=" + VAL)


def _command_head(text: str, start: int) -> re.Match[str] | None:
    head = _CMD_HEAD_RE.match(text, start)
    if head is None or re.match(r"[ \t]*[=:(]", text[head.end("words") : head.end("words") + 3]):
        return None  # an assignment or a call, not a command line
    return head


def _commands_named(
    text: str, word: re.Pattern[str], *, from_word: bool = False
) -> list[tuple[int, int]]:
    """The commands whose first words include ``word`` and no read-only verb, as (start, end)
    spans: from the command's start, or from just after ``word`` when ``from_word``."""
    spans: list[tuple[int, int]] = []
    for hit in word.finditer(text):
        if spans and hit.start() < spans[-1][1]:
            continue
        start = segment_start(text, hit.start())
        head = _command_head(text, start)
        if (
            head is None
            or head.end("words") < hit.end()
            or _READ_VERBS_RE.search(head.group("words"))
        ):
            continue
        spans.append((hit.end() if from_word else start, segment_end(text, hit.end())))
    return spans


def _store_segments(text: str) -> list[tuple[int, int]]:
    """The commands (start, end) whose first words name a secret store."""
    return _commands_named(text, _STORE_CMD_RE)


def _store_value_ok(value: str) -> bool:
    if plain(value) or value.startswith(("file:", "fileb:", "@", "-", "./", "/", "~/")):
        return False
    return not re.fullmatch(r"[\w.\-]+/[\w.\-/]+|\d+|true|false", value, re.IGNORECASE)


def _in_segments(
    text: str,
    spans: list[tuple[int, int]],
    regexes: tuple[re.Pattern[str], ...],
    ok: Callable[[re.Match[str]], bool],
) -> tuple[str, int]:
    """Apply ``regexes`` inside each span, redacting group ``s`` where ``ok(match)`` holds."""
    count = 0
    out: list[str] = []
    copied = 0
    for start, end in spans:
        part = text[start:end]
        for regex in regexes:

            def repl(m: re.Match[str]) -> str:
                nonlocal count
                if not ok(m):
                    return m.group()
                count += 1
                return replace_group(m)

            part = regex.sub(repl, part)
        out += [text[copied:start], part]
        copied = end
    if not count:
        return text, 0
    return "".join(out) + text[copied:], count


def _stores(text: str) -> tuple[str, int]:
    return _in_segments(
        text,
        _store_segments(text),
        (_STORE_FLAG_RE, _KV_RE),
        lambda m: _store_value_ok(m.group("s")),
    )


# --- config setters -------------------------------------------------------------------------------

_CONFIG_RE = lazy(r"config(?:ure)?(?:(?<![\w\-.]config)|(?<![\w\-.]configure))(?=[ \t])")
_SECRET_WORD_RE = lazy(
    r"(?i)pass(?:word|wd|phrase)?(?![a-z])|pwd|secret|token|api[-_.]?key|auth(?![a-z])|authtoken"
    r"|access[-_.]?key|private[-_.]?key|credential|http-basic"
)
_NOT_SECRET_KEY_RE = lazy(
    r"(?i)ttl|timeout|expir|length|type|url|file|path|helper|cmd|command|store|method|provider"
)
_USER_PASS_RE = lazy(r"(?P<user>[^\s:@/]{1,64}):(?P<pw>[^\s:@]{4,256})")


def _config_segments(text: str) -> list[tuple[int, int]]:
    return _commands_named(text, _CONFIG_RE, from_word=True)


def _config_sets(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for start, end in _config_segments(text):
        words = list(_WORD_RE.finditer(text, start, end))
        for key_word, value_word in zip(words, words[1:], strict=False):
            key, raw = key_word.group(), value_word.group()
            q = 1 if raw[0] in "\"'" else 0
            value = raw[q : len(raw) - q]
            a, b = value_word.start() + q, value_word.end() - q
            if key.startswith("-") or plain(value, bare=not q):
                continue
            if "http-basic" in key:
                continue  # http-basic.<repo> <user> <password>: the word after the user
            if (
                words.index(key_word) > 0
                and "http-basic" in words[words.index(key_word) - 1].group()
            ):
                spans.append((a, b))
            elif _SECRET_WORD_RE.search(key) and not _NOT_SECRET_KEY_RE.search(key):
                if not re.fullmatch(r"(?i)true|false|\d+", value):
                    spans.append((a, b))
            elif (
                "." in key
                and (up := _USER_PASS_RE.fullmatch(value)) is not None
                and not plain(up.group("pw"))
            ):  # bundle config gems.example.com user:pass, a host's credentials
                spans.append((a + up.start("pw"), a + up.end("pw")))
    return apply_spans(text, spans)


# --- positional credentials -----------------------------------------------------------------------

_WORD = r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`;|&<>()\\]+)"
# (command, plain words to skip after it, credential words that follow)
_POSITIONAL: tuple[tuple[str, str, int, int], ...] = (
    ("ngrok", r"(?:[ \t]+config)?[ \t]+(?:add-)?authtoken", 0, 1),
    ("cargo", r"[ \t]+login", 0, 1),
    ("vault", r"[ \t]+login(?![ \t]+-)", 0, 1),
    ("mc", r"[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)", 2, 2),
    ("rabbitmqctl", r"[ \t]+(?:add_user|change_password|authenticate_user)", 1, 1),
    ("wpa_passphrase", "", 1, 1),
    ("cloudflared", r"[ \t]+service[ \t]+install", 0, 1),
    ("bitcoin-cli", r"(?:[ \t]+-\S+)*[ \t]+importprivkey", 0, 1),
    ("net", r"[ \t]+use(?:[ \t]+[A-Za-z]:)?[ \t]+\\\\\S+", 0, 2),
    ("AUTH", r"(?:[ \t]+default)?", 0, 1),
    ("vault", r"[ \t]+operator[ \t]+unseal", 0, 1),
    ("bw", r"[ \t]+(?:login|unlock)", 1, 1),
    ("consul", r"[ \t]+acl[ \t]+set-agent-token", 1, 1),
    ("snyk", r"[ \t]+auth", 0, 1),
    ("heroku", r"[ \t]+auth:token", 0, 0),
)
_POSITIONAL_RES = tuple(
    lazy(
        rf"{lead(cmd)}{tail}(?P<skip>(?:[ \t]+-{{1,2}}[\w\-]+(?:=\S+)?)*(?:[ \t]+{_WORD}){{{skip}}})"
        rf"(?P<creds>(?:[ \t]+{_WORD}){{{n}}})"
    )
    for cmd, tail, skip, n in _POSITIONAL
    if n
)
# <tool> auth|login <token>: only a random token (or a UUID) is taken there
_AUTH_SUBCOMMAND_RE = lazy(
    r"(?:(?<=[\s>$])|^)(?P<tool>[a-z][\w\-]{1,30})(?:[ \t]+[a-z]{3,12})?[ \t]+"
    r"(?:auth|login|authenticate|authorize|authorize-account|signin|token)"
    r"(?:[ \t]+(?:add|set|login))?(?:[ \t]+[A-Za-z0-9_\-.]{8,64})?[ \t]+(?P<q>[\"']?)"
    r"(?P<s>[A-Za-z0-9_\-.:=+/]{16,})(?P=q)(?=[\s;|&]|$)",
    re.MULTILINE,
)
_AUTH_WORDS = ("auth", "login", "signin", "token")  # every subcommand above holds one
# what every match holds from its subcommand on (the pattern less its start and its end): a line
# without it is not scanned from every word (most lines with "token" in them have no token)
_AUTH_TAIL_RE = lazy(
    r"(?:auth|login|authenticate|authorize|authorize-account|signin|token)"
    r"(?:[ \t]+(?:add|set|login))?(?:[ \t]+[A-Za-z0-9_\-.]{8,64})?[ \t]+[\"']?"
    r"[A-Za-z0-9_\-.:=+/]{16}"
)
_WORD_RE = lazy(_WORD)


def q_wrapped(raw: str) -> bool:
    return raw[:1] in "\"'" and raw[-1:] == raw[:1]


_UUID_RE = lazy(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def _auth_subcommands(text: str) -> Iterator[re.Match[str]]:
    """The matches of :data:`_AUTH_SUBCOMMAND_RE` in ``text``, as a scan of the whole finds them.

    Each match is on one line and holds a subcommand and the token after it: only the lines that
    hold such a tail are scanned (the pattern starts at any word; tried at every position of
    every text with "token" in it, it was a tenth of a redaction)."""
    for a, b in lines_with(text, _AUTH_WORDS):
        if _AUTH_TAIL_RE.search(text, a, b) is not None:
            yield from _AUTH_SUBCOMMAND_RE.finditer(text, a, b)


def _positional(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for regex in _POSITIONAL_RES:
        for m in regex.finditer(text):
            base = m.start("creds")
            for w in _WORD_RE.finditer(m.group("creds")):
                raw = w.group()
                value = raw.strip("\"'")
                if re.match(r"[A-Za-z_][\w.\-]*=.", value) and not q_wrapped(raw):
                    continue  # role=engineer: a parameter, not a credential
                if (
                    plain(value, bare=raw[0] not in "\"'")
                    or value.startswith(("-", "/"))
                    or "://" in value
                ):
                    continue
                if password_like(value) or len(value) >= 6:
                    q = 1 if raw[0] in "\"'" else 0
                    spans.append((base + w.start() + q, base + w.end() - q))
    for m in _auth_subcommands(text):
        value = m.group("s")
        if "@" in value or "." in value and not looks_random(value):
            continue
        if looks_random(value) or _UUID_RE.fullmatch(value):
            spans.append((m.start("s"), m.end("s")))
    return apply_spans(text, spans)


# --- password flags -------------------------------------------------------------------------------

_USER_FLAG_RE = lazy(r"(?<![\w\-])(?:-u|-U|--user|--username|-l|--login)(?:[ \t]+|=)\S")
_CAPITAL_P_RE = lazy(r"(?<=[ \t])-P(?:[ \t]+|=)" + VAL)
_LOGIN_P_RE = lazy(r"(?<=[ \t])-p(?:[ \t]+|=)" + VAL)
_LONG_USER_RE = lazy(
    r"(?<![\w\-])--user(?:name)?(?:[ \t]+|=)(?P<qq>[\"']?)(?P<user>[^\s:'\"]{1,64}):(?P<s>[^\s'\"]{4,256})(?P=qq)"
)
_SNMP_FLAG_RE = lazy(lead("snmp") + r"[\w\-]*(?:[ \t]+[^\s\\]+){0,12}?[ \t]+-[cAX][ \t]+" + VAL)
_COMMA_USER_RE = lazy(r"(?<![\w\-])-u[ \t]+[\"']?[\w.\-@]+,(?P<s>[^\s,\"']{4,256})")
_SLASH_PASS_RE = lazy(r"(?i)(?<![\w/])/p(?:ass(?:word)?)?:" + VAL)
_SECURESTRING_RE = lazy(
    r"(?i)ConvertTo-SecureString(?:[ \t]+-String)?[ \t]+" + QUOTED + r"(?=[^\n]*-AsPlainText)"
)


def _password_flags(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for m in _CAPITAL_P_RE.finditer(text):
        value = m.group("s")
        start = segment_start(text, m.start())
        if value.isdigit() or plain(value, bare=not m.group("q")):
            continue  # scp -P 2222: a port
        if _USER_FLAG_RE.search(text, start, segment_end(text, m.end())):
            spans.append((m.start("s"), m.end("s")))
    for m in _LOGIN_P_RE.finditer(text):
        value = m.group("s")
        head = text[segment_start(text, m.start()) : m.start()]
        login = re.search(r"(?<![\w\-])(?:login|signin)(?![\w\-])", head) is not None
        other = re.search(r"(?<![\w\-])(?:mysql\w*|mariadb|ssh|scp|docker|podman)(?![\w\-])", head)
        if (
            login
            and other is None
            and not value.isdigit()
            and not plain(value, bare=not m.group("q"))
        ):
            spans.append((m.start("s"), m.end("s")))
    for m in _LONG_USER_RE.finditer(text):
        value = m.group("s")
        if m.group("user").isdigit() and value.isdigit():
            continue  # --user 1000:1000
        if password_like(value) and not plain(value):
            spans.append((m.start("s"), m.end("s")))
    for m in _COMMA_USER_RE.finditer(text):
        if re.search(r"(?:lftp|ncftp|ftp)\b", text[segment_start(text, m.start()) : m.start()]):
            spans.append((m.start("s"), m.end("s")))
    for regex in (_SLASH_PASS_RE, _SECURESTRING_RE, _SNMP_FLAG_RE):
        for m in regex.finditer(text):
            if not plain(m.group("s")):
                spans.append((m.start("s"), m.end("s")))
    return apply_spans(text, spans)


EDITS = (
    ("cli-password", ("echo", "printf"), sub_where(_PIPE_RE, _stdin_judge)),
    ("cli-password", ("<<<",), sub_where(_HERESTRING_RE, _stdin_judge)),
    ("cli-password", ("expect",), _expect_send),
    ("cli-password", ("askpass",), _askpass),
    (
        "cli-secret",
        ("secret", "ssm", "vault", "parameter", "keychain", "keyring", "kv", "cred", "cmdkey")
        + ("store", "-password", "config:", "variable"),
        _stores,
    ),
    ("cli-secret", ("config",), _config_sets),
    (
        "cli-secret",
        (
            "ngrok",
            "login",
            "alias",
            "mc ",
            "rabbitmq",
            "wpa_",
            "auth",
            "cloudflared",
            "privkey",
            "unseal",
            "bw ",
            "consul",
        )
        + ("net ", "token", "signin"),
        _positional,
    ),
    ("cli-password", ("-p", "--user", "/p", "securestring", "snmp", "-u"), _password_flags),
)

__all__ = ["EDITS"]
