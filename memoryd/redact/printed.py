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

from memoryd.redact.lazy import lazy
from memoryd.redact.prefilter import finditer_in
from memoryd.redact.spans import apply_spans, near, sub_where, windows
from memoryd.redact.tokens import looks_random
from memoryd.redact.values import WEAK_KINDS, named_with_hash, password_like, plain

_PASSWORD_NOUN_RE = lazy(
    r"(?i)pass|\bpwd?\b|kennwort|contrase|clave|senha|wachtwoord|parola|has(?:ł|l)o|пароль|şifre"
    r"|lösenord|salasana|heslo|jelszó|adgangskode"
)


def _human_password(value: str) -> bool:
    """After "the password is", a word with a digit or a symbol is enough: ``penguin8-db``."""
    v = value.strip("\"'`")
    if "/" in v or "://" in v or re.fullmatch(r"v?\d+(?:\.\d+)+\w*|\d+[a-z]{1,3}", v):
        return False
    return len(v) >= 6 and any(c.isdigit() for c in v) and any(c.isalpha() for c in v)


_SECRET_NOUN = (
    r"key|token|password|passphrase|passcode|secret|pin|code|credentials?|phrase|mnemonic"
    r"|passwort|kennwort|contrase(?:ñ|n)a|clave|senha|mot[ \t]de[ \t]passe|wachtwoord"
)
_LABEL_RE = lazy(
    r"(?im)^[ \t>*#\-]*(?P<label>(?:[A-Za-z][\w\-']*[ \t]+){0,6}?(?:" + _SECRET_NOUN + r")"
    r"(?:[ \t_\-]?(?:content|value|material|data|string|text|id|ID|Id))?)"
    r"(?:[ \t]+#?\d{1,2})?(?:[ \t]*\[[^\]\n]{0,40}\])?(?:[ \t]*:|[ \t]{2,}=)[ \t]+"
    r"(?P<q>[\"'`]?)(?P<s>[^\s\"'`\\]{6,512}|(?:[a-z0-9]{4}[ \t]){3,11}[a-z0-9]{4})(?P=q)[ \t]*\r?$"
)
_STRONG_LABEL_RE = lazy(
    r"(?i)password|passphrase|passcode|secret|token|api[ \t]*key|access[ \t]*key|private[ \t]*key"
    r"|unseal|recovery|root|master|auth|admin|mnemonic|seed|setup[ \t]key|content|passwort"
    r"|contrase|senha|clave|mot de passe"
)
_NOT_SECRET_LABEL_RE = lazy(
    r"(?i)\b(?:public|fingerprint|id|ttl|type|name|hash|length|count|cache|idempotency|request"
    r"|trace|version|expires?|created|present|policy|format|algorithm|identifier|usage|size)\b"
)
_SENTENCE_RE = lazy(
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
    if plain(value, bare=not m.group("q")):
        return False
    if re.search(r"(?i)secret[ \t_\-]?id", label):
        return True  # Consul's SecretID, Vault's secret_id: the secret half of a pair
    if _NOT_SECRET_LABEL_RE.search(label):
        return False
    return _value_looks_secret(value, strong=_STRONG_LABEL_RE.search(label) is not None)


def _sentence_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    head = m.group()[: m.start("s") - m.start()]
    if plain(value, bare=True) or _NOT_SECRET_LABEL_RE.search(head):
        return False
    if _PASSWORD_NOUN_RE.search(head) and (_human_password(value) or _symbolic(value)):
        return True
    return _value_looks_secret(value, strong=False) or (" " in value)


def _symbolic(value: str) -> bool:
    """``aTCf9x?_(,/M``: generated passwords mix letters, digits and punctuation freely."""
    return (
        len(value) >= 8
        and sum(not c.isalnum() for c in value) >= 2
        and any(c.isdigit() for c in value)
    )


# --- the value on the next line -------------------------------------------------------------------

_NEXT_LINE_RE = lazy(
    r"(?im)^[^\n]{0,120}\b(?:" + _SECRET_NOUN + r")\b[^\n]{0,80}:[ \t]*\r?\n(?:[ \t]*\r?\n){0,2}"
    r"[ \t]*(?P<s>[^\s\\]{8,512})[ \t]*\r?$"
)
_LINE_ENDS_IN_COLON_RE = lazy(r":[ \t]*\r?\n")  # what every match of the pattern above holds
_REDIS_PAIR_RE = lazy(
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

_PROMPT = (
    r"(?:[$#%>][ \t]+|>>>[ \t]+|In[ \t]\[\d+\]:[ \t]*|PS[^\n>]{0,60}>[ \t]*"
    r"|[\w.\-]+@[\w.\-]+[^\n$#]{0,60}[$#][ \t]+|[\w.\-]+(?::\d+)?>[ \t]+)"
)
_PRINTER_RE = lazy(r"(?im)^[ \t]*" + _PROMPT + r"(?P<cmd>[^\n]{2,400})\r?\n")
# a command that reads, decodes or shows a secret, or one that makes a new one
_PRINTS_SECRET_RE = lazy(
    r"(?i)(?=.*(?:secret|passw|token|credential|\.key\b|keys[ \t]+list|show-secrets|node-token"
    r"|id\.json|keypair|auth\.txt|\.pass\b|_pass\b|\.env\b|private|\bpass[ \t]+show|gopass"
    r"|find-(?:generic|internet)-password|keepassxc|lpass|\bbw[ \t]+get|\bop[ \t]+(?:read|item)))"
    r"(?=.*(?:\bget\b|\bread\b|\bshow|\bcat\b|decode|base64[ \t]+-d|output|\bsecret\b[ \t]*$"
    r"|initial-?password|reset-password|list|print|reveal|export|token[ \t]+create|create-token"
    r"|auth:token|auth[ \t]+token|write|bootstrap|\binit\b|generate|\bnew\b|create))"
    r"|.*(?:genkey|genpsk|\brand\b|pwgen|apg\b|keygen|key:generate|generate_?key|token_urlsafe"
    r"|token_hex|token_bytes|randombytes|random_secret|get_random_secret_key|urandom|uuid4\(\)\.hex"
    r"|initial-?password|reset-password)"
)
# the last stage derives a public key: wg pubkey, ssh-keygen -y, openssl pkey -pubout
_DERIVES_PUBLIC_RE = lazy(r"(?i)\|[^|]*(?:pubkey|-pubout|-y\b|public)[^|]*$")
_OUT_PREFIX_RE = lazy(r"^(?:Out\[\d+\]:[ \t]*)?(?:[bru](?=[\"']))?")
_OUTPUT_LABEL_RE = lazy(r"(?P<label>[A-Za-z][\w \-]{0,40}):[ \t]+(?P<s>[^\s\"'`\\]{8,256})")
_TABLE_ROW_RE = lazy(r"(?P<k>[A-Za-z_][\w.\-:]{1,63})[ \t]{2,}(?P<s>[^\s\\]{4,512})")
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
            stripped = _OUT_PREFIX_RE.sub("", stripped)
            if stripped and " " not in stripped and len(stripped) >= 6:
                core = stripped.strip("\"'`,")
                if _hexish(core) or (
                    (password_like(core) or looks_random(core) or _human_password(core))
                    and not plain(core, bare=True)
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
                value = row.group("s")
                weak = kind in WEAK_KINDS
                if (
                    kind not in (None, "cookie")
                    and not plain(value, bare=True)
                    and (not weak or looks_random(value))
                ):
                    a = pos + line.index(stripped) + row.start("s")
                    spans.append((a, a + len(value)))
            pos = end + 1
    return apply_spans(text, spans)


def _hexish(value: str) -> bool:
    return re.fullmatch(r"[0-9a-fA-F]{24,}|\[(?:\d{1,3},\s*){31,}\d{1,3}\]", value) is not None


# --- chat -----------------------------------------------------------------------------------------

# "<noun> … is X" in the languages developers most often write in
_PROSE_RE = lazy(
    r"(?i)\b(?:password|passphrase|passcode|secret|token|api[ \t]key|key|pat|creds|credentials|pwd?"
    r"|passwd|pass(?=:)|passwort|kennwort|contrase(?:ñ|n)a|clave|mot[ \t]de[ \t]passe|senha"
    r"|wachtwoord|parola|has(?:ł|l)o|пароль|şifre\w*|lösenord\w*|salasana|heslo|jelszó|adgangskode)"
    r"\w{0,3}\b[^\n.:=]{0,60}?(?:[ \t](?:is|are|was|ist|lautet|es|est|é|e|è|to|är|er|on|jest|je|=)"
    r"[ \t]+|[ \t]?[:=][ \t]*)"
    r"(?:(?P<user>[\w.\-@]{1,64})[ \t]*[/:][ \t]*)?(?P<s>(?:[a-z0-9]{4}[ \t]){3,11}[a-z0-9]{4}(?![\w])|[^\s\"'`\\]{6,256})"
)


def _prose(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    for m in finditer_in(_PROSE_RE, text, windows(text, _PROSE_WORDS)):
        value = m.group("s").rstrip(".,;:?)")
        if plain(value, bare=True) or "://" in value or named_with_hash(value):
            continue
        noun = m.group()[: m.start("s") - m.start()]
        if re.search(
            r"[:=][ \t]*(?:[\w.\-@]{1,64}[ \t]*[/:][ \t]*)?$", noun
        ) and not _PASSWORD_NOUN_RE.search(noun.split()[0] if noun.split() else noun):
            continue  # "public key: …", "Idempotency-Key: …": a label the assignment rules judge
        if m.group("user") and len(m.group("s")) > 64:
            continue  # base64 with a "/" in it (a SealedSecret), not user/password
        if re.search(r"[?&]", noun):
            continue  # reset-password?user=42: a URL's query, judged by the URL rules
        if re.search(r"(?i)fingerprint|hash|digest|checksum|\bid\b|length|size", noun) or re.match(
            r"(?i)(?:sha\d*|md5):", value
        ):
            continue
        human = _PASSWORD_NOUN_RE.search(noun) is not None and _human_password(value)
        grouped = re.fullmatch(r"(?:[a-z0-9]{4}[ \t]){3,11}[a-z0-9]{4}", value) is not None
        if human or grouped or password_like(value) or looks_random(value) or _hexish(value):
            spans.append((m.start("s"), m.start("s") + len(value)))
    return apply_spans(text, spans)


# "here's the key 2H3p…, keep it safe": a random value right after the noun
_ADJACENT_RE = lazy(
    r"(?i)\b(?:key|token|secret|pat|password|passphrase|credential|pw)s?\b[ \t]+(?P<s>[^\s\"'`\\,;]{20,256})"
)
# "use `Hooli&staging17` as the admin pw": a quoted word in a sentence about a password
_QUOTED_WORD_RE = lazy(r"(?P<q>[`'\"])(?P<s>[^\s`'\"\\]{6,64})(?P=q)")
# postfix sasl_passwd, netrc-like lines: [host]:port user:password
_HOST_USER_PASS_RE = lazy(
    r"(?m)^[ \t]*\[?[\w.\-]+\.[a-z]{2,}\]?(?::\d{1,5})?[ \t]+[\w.+\-]+(?:@[\w.\-]+)?:"
    r"(?P<s>[a-z]{4}(?: [a-z]{4}){3}|[^\s:@]{6,256})[ \t]*\r?$"
)


def _adjacent(m: re.Match[str], text: str) -> bool:
    value = m.group("s").rstrip(".")
    if re.search(r"[=:]", value) or re.fullmatch(r"[0-9a-fA-F]+", value):
        return False  # span_id=…, a key id or fingerprint in hex
    return looks_random(value) and not plain(value) and not named_with_hash(value)


def _quoted_word(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    found = finditer_in(
        _QUOTED_WORD_RE, text, windows(text, (" pw", "pwd", "passw", "passph", "contrase", "senha"))
    )
    for m in found:
        around = text[max(0, m.start() - 50) : m.end() + 50]
        if not re.search(
            r"(?i)\b(?:pw|pwd|password|passphrase|passwort|contrase(?:ñ|n)a|senha)\b", around
        ):
            continue
        value = m.group("s")
        if value.startswith(("-", "$")) or re.search(r"(?i)pass|pw|secret|token|key", value):
            continue  # 'password1', '--password': a field or a flag named for the secret
        if plain(value) or not (_human_password(value) or password_like(value)):
            continue
        spans.append((m.start("s"), m.end("s")))
    return apply_spans(text, spans)


# ASCII tables (mysql, psql): a column whose header names a secret
_TABLE_SEP_RE = lazy(r"^(?:\+[-+]+\+|\|[ :|\-]+\|)$")


def _table_columns(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    secret_cols: set[int] = set()
    pos = 0
    for line in text.split("\n"):
        stripped = line.strip()
        if _TABLE_SEP_RE.match(stripped):
            pass
        elif stripped.startswith("|") and stripped.endswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if not secret_cols:
                secret_cols = {
                    i
                    for i, c in enumerate(cells)
                    if re.search(r"(?i)password|secret|token|api[ _]?key|passwd", c) and len(c) < 40
                }
            else:
                offset = pos + line.index("|")
                cursor = offset + 1
                for i, cell in enumerate(stripped.strip("|").split("|")):
                    value = cell.strip()
                    looks = _human_password(value) or password_like(value) or looks_random(value)
                    if (
                        i in secret_cols
                        and looks
                        and not value.startswith(("-", "`"))
                        and not plain(value, bare=True)
                    ):
                        a = cursor + cell.index(value)
                        spans.append((a, a + len(value)))
                    cursor += len(cell) + 1
        elif not _TABLE_SEP_RE.match(stripped):
            secret_cols = set()
        pos += len(line) + 1
    return apply_spans(text, spans)


# Router and switch configs: "password 7 <hex>", "enable secret 5 $1$…", "key 0 <k>",
# "snmp-server community <c> RO", "key-string <k>", "message-digest-key 1 md5 <k>",
# "auth sha <p> priv aes 128 <p>", "pre-shared-key <k>"
_DEVICE_RE = lazy(
    r"(?im)(?:^|(?<=[ \t]))(?:password|secret|key|community|key-string|pre-shared-key|psk"
    r"|authentication-key|message-digest-key[ \t]+\d+[ \t]+md5|auth[ \t]+(?:sha\d*|md5)"
    r"|priv[ \t]+(?:aes|des|3des)(?:[ \t]+\d+)?)"
    r"[ \t]+(?:(?P<t>[0-9]|ascii|hex|cleartext)[ \t]+)?[\"']?(?P<s>[^\s\"'`\\]{4,256})[\"']?(?=[ \t]|\r?$)"
)
_DEVICE_CONTEXT_RE = lazy(
    r"(?im)^[ \t]*(?:hostname|interface|snmp-server|username|enable|tacacs|radius|crypto|line[ \t]|router"
    r"|ip[ \t]|standby|aaa[ \t]|!$)"
)


def _crypt_hash(value: str) -> bool:
    return re.match(r"\$(?:1|2[abxy]?|5|6|7|8|9|apr1|y|sha1|argon2\w*)\$", value) is not None


def _device_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    if _crypt_hash(value):
        return True
    if plain(value, bare=True) or value.lower() in ("ro", "rw", "sha", "md5", "aes", "des"):
        return False
    strong = bool(m.group("t")) or _human_password(value) or "-" in value
    return strong or password_like(value) or looks_random(value)


_DEVICE_WORDS: tuple[str, ...] = ("password", "secret", "key", "community", "psk", "auth ", "priv ")
_device_lines = near(_DEVICE_WORDS, _DEVICE_RE, _device_judge)


def _devices(text: str) -> tuple[str, int]:
    """Only in text that reads as a device config (a hostname, interface or snmp-server line)."""
    if _DEVICE_CONTEXT_RE.search(text) is None:
        return text, 0
    return _device_lines(text)


# /etc/ipsec.secrets: "left right : PSK "secret"", also EAP and XAUTH entries
_IPSEC_RE = lazy(r"(?m):[ \t]*(?:PSK|EAP|XAUTH|NTLM)[ \t]+(?P<q>[\"'])(?P<s>[^\"'\n]{4,256})(?P=q)")
# pgbouncer userlist.txt: "user" "password-or-hash"
_USERLIST_RE = lazy(r"(?m)^[ \t]*\"[\w.\-@]{1,64}\"[ \t]+\"(?P<s>[^\"\n]{12,512})\"[ \t]*\r?$")


def _userlist_judge(m: re.Match[str], text: str) -> bool:
    value = m.group("s")
    if looks_random(value) or value.startswith(("md5", "SCRAM")):
        return True
    listed = re.search(r'(?m)^[ \t]*"[\w.\-@]{1,64}"[ \t]+"(?:md5|SCRAM)', text) is not None
    return listed and not plain(value)  # a userlist.txt: its other passwords are plain text


# minisign and signify key files: a comment naming a secret key, then the key
_KEYFILE_RE = lazy(
    r"(?i)untrusted comment:[^\n]*secret key[^\n]*\r?\n(?P<s>[A-Za-z0-9+/]{40,}={0,2})"
)
# snmpd.conf: rocommunity <c>, createUser <u> SHA "<auth>" AES "<priv>"
_SNMPD_RE = lazy(
    r"(?im)^[ \t]*(?:r[ow]community6?|com2sec[ \t]+\S+[ \t]+\S+)[ \t]+(?P<s>[^\s#]{3,128})"
)
_CREATEUSER_RE = lazy(
    r"(?i)createUser[ \t]+\S+[ \t]+(?:MD5|SHA(?:-\d+)?)[ \t]+\"?(?P<s>[^\s\"]{4,128})\"?"
)
# 密码是 X, パスワードは X, 비밀번호는 X: no spaces and no word boundaries in these scripts
_CJK_PROSE_RE = lazy(
    r"(?:密码|口令|密碼|パスワード|비밀번호)[^\s:：。，]{0,8}?(?:是|为|為|は|는|은|:|：)[ \t]*"
    r"(?P<s>[\x21-\x7e]{6,128})"
)


_CODES_HEAD_RE = lazy(r"(?i)(?:recovery|backup|one-time|2fa|mfa|emergency)[ \t]+codes?")
_CODE_RE = lazy(
    r"(?m)(?:^|(?<=[ \t]))(?:[-*][ \t]+|\d+[.)][ \t]+)?(?P<s>[A-Za-z0-9]{4,6}-?[A-Za-z0-9]{4,6})"
    r"(?=[ \t]*(?:\r?$|[ \t]{2,}))"
)
_MNEMONIC_HINT_RE = lazy(r"(?i)seed|mnemonic|wallet|recovery[ \t]+phrase|secret[ \t]+phrase")
_MNEMONIC_RE = lazy(
    r"(?:^|(?<=[\n\"'`=:?.!]))[ \t]*(?P<s>[a-z]{3,8}(?:[ \t]+[a-z]{3,8}){11,23})(?![\w\-])",
    re.MULTILINE,
)


def _codes_and_phrases(text: str) -> tuple[str, int]:
    spans: list[tuple[int, int]] = []
    head = _CODES_HEAD_RE.search(text)
    if head is not None:
        for m in _CODE_RE.finditer(text, head.end(), min(len(text), head.end() + 2000)):
            if any(c.isdigit() for c in m.group("s")):
                spans.append((m.start("s"), m.end("s")))
    for hint in _MNEMONIC_HINT_RE.finditer(text):
        for m in _MNEMONIC_RE.finditer(text, hint.start(), min(len(text), hint.end() + 400)):
            words = m.group("s").split()
            if len(words) in (12, 15, 18, 21, 24) and len(set(words)) >= len(words) * 2 // 3:
                spans.append((m.start("s"), m.end("s")))
    return apply_spans(text, spans)


# user:$apr1$…, root:$6$…:19000:0:…, admin:$2y$…: crackable hashes of real accounts
_ACCOUNT_HASH_RE = lazy(
    r"(?m)(?:^|(?<=\\n)|(?<=[\s=,\"']))[\w.\-@]{1,64}:(?P<s>\$\$?(?:apr1|1|2[abxy]?|5|6|y|7|argon2(?:id|i|d)?|scrypt|sha1)"
    r"\$[^\s:\\\"']{8,})"
)


_LABEL_WORDS: tuple[str, ...] = (
    "key",
    "token",
    "pass",
    "secret",
    "pin",
    "code",
    "cred",
    "phrase",
    "mnemonic",
)
_LABEL_WORDS += ("contrase", "senha", "clave", "mot de", "passwort", "kennwort", " pw")
_PROSE_WORDS: tuple[str, ...] = (
    "pass",
    "secret",
    "token",
    "key",
    "pat",
    "cred",
    "contrase",
    "senha",
    "clave",
)
_PROSE_WORDS += ("mot de", "wachtwoord", "parola", "kennwort", " pw", "has", "пароль", "şifre")
_PROSE_WORDS += ("lösenord", "salasana", "heslo", "jelsz", "adgangskode", "pass:")


def _any(m: re.Match[str], text: str) -> bool:
    return not plain(m.group("s"))


EDITS = (
    ("printed-secret", ("$",), sub_where(_ACCOUNT_HASH_RE, lambda m, t: True)),
    ("printed-secret", _LABEL_WORDS, near(_LABEL_WORDS, _LABEL_RE, _label_judge)),
    ("printed-secret", _LABEL_WORDS, near(_LABEL_WORDS, _SENTENCE_RE, _sentence_judge)),
    (
        "printed-secret",
        _LABEL_WORDS,
        near(_LABEL_WORDS, _NEXT_LINE_RE, _next_line_judge, lines=3, held=_LINE_ENDS_IN_COLON_RE),
    ),
    ("printed-secret", (') "',), sub_where(_REDIS_PAIR_RE, _any)),
    ("printed-secret", ("$ ", "# ", "> ", ">>>", "in ["), _command_output),
    ("printed-secret", ("|",), _table_columns),
    ("printed-secret", _DEVICE_WORDS, _devices),
    ("prose-secret", _PROSE_WORDS, _prose),
    ("prose-secret", _PROSE_WORDS, near(_PROSE_WORDS, _ADJACENT_RE, _adjacent)),
    ("prose-secret", ("pw", "pass", "contrase", "senha"), _quoted_word),
    ("config-password", (":",), sub_where(_HOST_USER_PASS_RE, _any)),
    ("private-key", ("untrusted comment",), sub_where(_KEYFILE_RE, lambda m, t: True)),
    ("config-password", ("community", "com2sec"), sub_where(_SNMPD_RE, _any)),
    ("config-password", ("createuser",), sub_where(_CREATEUSER_RE, _any)),
    ("prose-secret", ("密", "口令", "パスワード", "비밀번호"), sub_where(_CJK_PROSE_RE, _any)),
    ("config-password", ("psk", "eap", "xauth", "ntlm"), sub_where(_IPSEC_RE, _any)),
    (
        "config-password",
        ('" "',),
        sub_where(_USERLIST_RE, _userlist_judge),
    ),
    ("printed-secret", ("codes", "seed", "mnemonic", "wallet", "phrase"), _codes_and_phrases),
)
