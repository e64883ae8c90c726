"""Secrets that tools print and people paste: prompts, labels, command output, chat.

* **Labels**: a line whose label names a secret and ends in one value (``AWS Secret Access Key
  [None]: …``, ``Unseal Key 3: …``, ``Key Content : …``, ``Initial Root Token: …``), or a
  sentence naming one before a colon (``A temporary password is generated for root@host: …``).
* **The next line**: a label or a sentence that ends in a colon, the value on the next non-blank
  line (Jenkins' setup log, ``New value:``), and ``redis-cli``'s numbered ``CONFIG GET`` answers.
* **Command output**: the lines a command prints when it reads, decodes or generates a secret
  (``kubectl get secret … | base64 -d``, ``openssl rand -hex 32``, ``wg genkey``, ``bw get
  password``, ``terraform output -raw db_password``, ``cat …/initialAdminPassword``): a line that
  is one secret-looking value, or a ``KEY  VALUE`` table row whose key names a secret.
* **Chat**: "the password … is X" in English and the common phrasings of other languages,
  "creds are user / X", recovery codes listed under "recovery codes", a BIP-39 seed phrase in a
  text that speaks of a seed, mnemonic or wallet.
"""

from __future__ import annotations

import re

from memoryd.redact.spans import apply_spans, sub_where
from memoryd.redact.tokens import looks_random
from memoryd.redact.values import WEAK_KINDS, named_with_hash, password_like, plain

_SECRET_NOUN = (
    r"key|token|password|passphrase|passcode|secret|pin|code|credentials?|phrase|mnemonic"
    r"|passwort|kennwort|contrase(?:ñ|n)a|clave|senha|mot[ \t]de[ \t]passe|wachtwoord"
)
_LABEL_RE = re.compile(
    r"(?im)^[ \t>*#\-]*(?P<label>(?:[A-Za-z][\w\-']*[ \t]+){0,6}?(?:" + _SECRET_NOUN + r")"
    r"(?:[ \t]+(?:content|value|material|data|string|text|id))?)"
    r"(?:[ \t]+#?\d{1,2})?(?:[ \t]*\[[^\]\n]{0,40}\])?[ \t]*:[ \t]+"
    r"(?P<q>[\"'`]?)(?P<s>[^\s\"'`\\]{6,512}|(?:[a-z0-9]{4}[ \t]){3,11}[a-z0-9]{4})(?P=q)[ \t]*\r?$"
)
_STRONG_LABEL_RE = re.compile(
    r"(?i)password|passphrase|passcode|secret|token|api[ \t]*key|access[ \t]*key|private[ \t]*key"
    r"|unseal|recovery|root|master|auth|admin|mnemonic|seed|setup[ \t]key|content|passwort"
    r"|contrase|senha|clave|mot de passe"
)
_NOT_SECRET_LABEL_RE = re.compile(
    r"(?i)\b(?:public|fingerprint|id|ttl|type|name|hash|length|count|cache|idempotency|request"
    r"|trace|version|expires?|created|present|policy|format|algorithm|identifier|usage|size)\b"
)
_SENTENCE_RE = re.compile(
    r"(?im)\b(?:" + _SECRET_NOUN + r")\b[^\n:=]{1,80}?:[ \t]+"
    r"(?P<s>[^\s\"'`\\]{8,256}|(?:[a-z0-9]{4}[ \t]){3,11}[a-z0-9]{4})[ \t]*\r?$"
)


def _value_looks_secret(value: str, *, strong: bool) -> bool:
    if "://" in value or named_with_hash(value):
        return False
    if " " in value:
        return True  # grouped setup keys: "xdwf xu6t n32o …"
    if strong:
        return not re.fullmatch(r"[a-z]+|\d{1,6}|(?i:yes|no|none|true|false|present|absent)", value)
    return password_like(value) or looks_random(value)


def _label_judge(m: re.Match[str], text: str) -> bool:
    value, label = m.group("s"), m.group("label")
    if plain(value, bare=not m.group("q")) or _NOT_SECRET_LABEL_RE.search(label):
        return False
    return _value_looks_secret(value, strong=_STRONG_LABEL_RE.search(label) is not None)


def _sentence_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    head = text[max(0, m.start() - 60) : m.start("s")]
    if plain(value, bare=True) or _NOT_SECRET_LABEL_RE.search(head.rsplit("\n", 1)[-1]):
        return False
    return _value_looks_secret(value, strong=False) or (" " in value)


# --- the value on the next line -------------------------------------------------------------------

_NEXT_LINE_RE = re.compile(
    r"(?im)^[^\n]{0,120}\b(?:" + _SECRET_NOUN + r")\b[^\n]{0,80}:[ \t]*\r?\n(?:[ \t]*\r?\n){0,2}"
    r"[ \t]*(?P<s>[^\s\\]{8,512})[ \t]*\r?$"
)
_REDIS_PAIR_RE = re.compile(
    r"(?m)^\d+\)[ \t]+\"(?P<k>[\w\-]*(?:pass|secret|token|auth|key)[\w\-]*)\"[ \t]*\r?\n"
    r"\d+\)[ \t]+\"(?P<s>[^\"\n]{4,512})\""
)


def _next_line_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    label = m.group()[: m.start("s") - m.start()]
    if _NOT_SECRET_LABEL_RE.search(label):
        return False
    return not plain(value, bare=True) and (password_like(value) or looks_random(value))


# --- command output -------------------------------------------------------------------------------

_PROMPT = r"(?:[$#%>][ \t]+|PS[^\n>]{0,60}>[ \t]*|[\w.\-]+@[\w.\-]+[^\n$#]{0,60}[$#][ \t]+)"
_PRINTER_RE = re.compile(r"(?im)^[ \t]*" + _PROMPT + r"(?P<cmd>[^\n]{2,400})\r?\n")
_PRINTS_SECRET_RE = re.compile(
    r"(?i)(?=.*(?:secret|passw|token|credential|genkey|genpsk|\brand\b|initial-?password|reset-password"
    r"|private|\.key\b|keys[ \t]+list|show-secrets|node-token|pwgen|apg\b|id\.json|keypair))"
    r"(?=.*(?:\bget\b|\bread\b|\bshow|\bcat\b|decode|base64[ \t]+-d|genkey|genpsk|\brand\b|output"
    r"|\bsecret\b[ \t]*$|initial-?password|reset-password|list|print|reveal|export|pwgen|apg\b"
    r"|\bkeygen\b|token[ \t]+create|create-token|auth:token|auth[ \t]+token))"
)
# the last stage derives a public key: wg pubkey, ssh-keygen -y, openssl pkey -pubout
_DERIVES_PUBLIC_RE = re.compile(r"(?i)\|[^|]*(?:pubkey|-pubout|-y\b|public)[^|]*$")
_OUTPUT_LABEL_RE = re.compile(r"(?P<label>[A-Za-z][\w \-]{0,40}):[ \t]+(?P<s>[^\s\"'`\\]{8,256})")
_TABLE_ROW_RE = re.compile(r"(?P<k>[A-Za-z_][\w.\-:]{1,63})[ \t]{2,}(?P<s>[^\s\\]{4,512})")
_OUTPUT_LINES = 12


def _command_output(text: str) -> tuple[str, int]:
    if "\n" not in text:
        return text, 0
    from memoryd.redact.values import secret_key_kind

    spans: list[tuple[int, int]] = []
    for cmd in _PRINTER_RE.finditer(text):
        command = cmd.group("cmd")
        if _PRINTS_SECRET_RE.match(command) is None or _DERIVES_PUBLIC_RE.search(command):
            continue
        pos = cmd.end()
        for _ in range(_OUTPUT_LINES):
            if pos >= len(text):
                break
            nl = text.find("\n", pos)
            end = len(text) if nl < 0 else nl
            line = text[pos:end].rstrip("\r")
            stripped = line.strip()
            if re.match(r"[ \t]*" + _PROMPT, line):
                break  # the next command
            if stripped and " " not in stripped and len(stripped) >= 8:
                core = stripped.strip("\"'`,")
                if _hexish(core) or (
                    (password_like(core) or looks_random(core)) and not plain(core, bare=True)
                ):
                    a = pos + line.index(core)
                    spans.append((a, a + len(core)))
            elif (label := _OUTPUT_LABEL_RE.fullmatch(stripped)) is not None:
                value = label.group("s")
                if (password_like(value) or looks_random(value)) and not plain(value, bare=True):
                    a = pos + line.index(stripped) + label.start("s")
                    spans.append((a, a + len(value)))
            elif (row := _TABLE_ROW_RE.fullmatch(stripped)) is not None:
                kind = secret_key_kind(row.group("k").rsplit(":", 1)[-1])
                if (
                    kind not in (None, "cookie")
                    and kind not in WEAK_KINDS
                    and not plain(row.group("s"), bare=True)
                ):
                    a = pos + line.index(stripped) + row.start("s")
                    spans.append((a, a + len(row.group("s"))))
            pos = end + 1
    return apply_spans(text, spans)


def _hexish(value: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{24,}|\[(?:\d{1,3},\s*){31,}\d{1,3}\]", value) is not None


# --- chat -----------------------------------------------------------------------------------------

# "<noun> … is X" in the languages developers most often write in
_PROSE_RE = re.compile(
    r"(?i)\b(?:password|passphrase|passcode|secret|token|api[ \t]key|key|pat|creds|credentials"
    r"|passwort|kennwort|contrase(?:ñ|n)a|clave|mot[ \t]de[ \t]passe|senha|wachtwoord|parola)\b"
    r"[^\n.:=]{0,60}?[ \t](?:is|are|was|ist|lautet|es|est|é|e|è|=|:)[ \t]+"
    r"(?:(?P<user>[\w.\-@]{1,64})[ \t]*[/:][ \t]*)?(?P<s>[^\s\"'`\\]{6,256})"
)


_PASSWORD_NOUN_RE = re.compile(r"(?i)pass|kennwort|contrase|clave|senha|wachtwoord|parola")


def _human_password(value: str) -> bool:
    """After "the password is", a word with a digit or a symbol is enough: ``penguin8-db``."""
    return len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _prose(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for m in _PROSE_RE.finditer(text):
        value = m.group("s").rstrip(".,;:?)")
        if plain(value, bare=True) or "://" in value or named_with_hash(value):
            continue
        noun = m.group()[: m.start("s") - m.start()]
        human = _PASSWORD_NOUN_RE.search(noun) is not None and _human_password(value)
        if human or password_like(value) or looks_random(value) or _hexish(value):
            spans.append((m.start("s"), m.start("s") + len(value)))
    return apply_spans(text, spans)


_CODES_HEAD_RE = re.compile(r"(?i)(?:recovery|backup|one-time|2fa|mfa|emergency)[ \t]+codes?")
_CODE_LINE_RE = re.compile(
    r"(?m)^[ \t]*(?:[-*][ \t]+|\d+[.)][ \t]+)?(?P<s>[A-Za-z0-9]{4,6}-?[A-Za-z0-9]{4,6})[ \t]*\r?$"
)
_MNEMONIC_HINT_RE = re.compile(r"(?i)seed|mnemonic|wallet|recovery[ \t]+phrase|secret[ \t]+phrase")
_MNEMONIC_RE = re.compile(r"(?<![\w\-])(?P<s>[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,23})(?![\w\-])")


def _codes_and_phrases(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    head = _CODES_HEAD_RE.search(text)
    if head is not None:
        for m in _CODE_LINE_RE.finditer(text, head.end(), min(len(text), head.end() + 2000)):
            if any(c.isdigit() for c in m.group("s")):
                spans.append((m.start("s"), m.end("s")))
    if _MNEMONIC_HINT_RE.search(text):
        for m in _MNEMONIC_RE.finditer(text):
            words = m.group("s").split()
            if len(words) in (12, 15, 18, 21, 24) and len(set(words)) >= len(words) * 2 // 3:
                spans.append((m.start("s"), m.end("s")))
    return apply_spans(text, spans)


# user:$apr1$…, root:$6$…:19000:0:…, admin:$2y$…: crackable hashes of real accounts
_ACCOUNT_HASH_RE = re.compile(
    r"(?m)(?:^|(?<=\\n)|(?<=\s))[\w.\-@]{1,64}:(?P<s>\$(?:apr1|1|2[abxy]?|5|6|y|7|argon2(?:id|i|d)?|scrypt|sha1)"
    r"\$[^\s:\\\"']{8,})"
)


EDITS = (
    ("printed-secret", ("$",), sub_where(_ACCOUNT_HASH_RE, lambda m, t: True)),
    (
        "printed-secret",
        (
            "key",
            "token",
            "pass",
            "secret",
            "pin",
            "code",
            "cred",
            "phrase",
            "mnemonic",
            "contrase",
            "senha",
            "clave",
            "mot de",
        ),
        sub_where(_LABEL_RE, _label_judge),
    ),
    (
        "printed-secret",
        ("password", "passphrase", "token", "secret", "key", "code"),
        sub_where(_SENTENCE_RE, _sentence_judge),
    ),
    (
        "printed-secret",
        ("key", "token", "pass", "secret", "code"),
        sub_where(_NEXT_LINE_RE, _next_line_judge),
    ),
    ("printed-secret", (') "',), sub_where(_REDIS_PAIR_RE, lambda m, t: not plain(m.group("s")))),
    ("printed-secret", ("$ ", "# ", "> "), _command_output),
    (
        "prose-secret",
        (
            "pass",
            "secret",
            "token",
            "key",
            "pat",
            "cred",
            "contrase",
            "senha",
            "clave",
            "mot de",
            "wachtwoord",
            "parola",
        ),
        _prose,
    ),
    ("printed-secret", ("codes", "seed", "mnemonic", "wallet", "phrase"), _codes_and_phrases),
)
