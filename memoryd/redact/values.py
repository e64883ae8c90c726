"""Which keys name a secret, and which values under them are plainly not one.

A key matches on its last segment (split on ``_ - .`` and camelCase): ``GITHUB_TOKEN``,
``accessToken``, ``PGPASSWORD``, ``SMTP_PASS`` and ``client-key-data`` match; ``max_tokens``,
``token_count``, ``secrets`` and ``bypass`` do not. Kinds come in two strengths:

* *strong* (passwords, secrets, tokens, ``api_key``-style keys, ``Authorization``): any literal
  value goes unless it is plainly not a secret (see :func:`keep`);
* *weak* (a bare ``key`` or ``*_key`` with an unremarkable qualifier, ``auth``, ``credentials``,
  ``sig``/``signature``): only a value that :func:`~memoryd.redact.tokens.looks_random` goes, so
  ``primary_key: id`` and ``auth: required`` stay readable while ``"auth": "dXNlcjpw..."`` does not.

Kept values: shorter than :data:`MIN_SECRET_LEN`, booleans and null, placeholders (``<token>``,
``your-api-key-here``, ``xxxx``, ``changeme``), references (``${TOKEN}``, ``$TOKEN``,
``{{ secrets.X }}``, ``process.env.X``, ``os.environ[...]``), numbers under a ``token`` key (usage
counters), paths under ``pwd``/``*_key`` keys, and unquoted values that read as code or as a
description (``self.password``, ``auth[1]``, ``str | None``, ``The token to use``). Quoted values
are literals. In shell assignments (``KEY=value``) and YAML (``key: value``) a bare word is a
literal even when it ends in a keyword-like word (``CorrectHorse-token``), since neither syntax
would read a variable there.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memoryd.redact.lazy import lazy
from memoryd.redact.tokens import is_filler, looks_random

MIN_SECRET_LEN = 4
STRONG_KINDS = frozenset({"password", "token", "key", "pwd", "authorization"})
WEAK_KINDS = frozenset({"weak", "signature"})  # only a random-looking value is a secret there

SEGMENT_RE = lazy(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_KEY_QUALIFIERS = frozenset(
    {"api", "private", "secret", "access", "auth", "encryption", "signing", "master", "account"}
    | {"shared", "client", "consumer", "license", "hmac", "storage", "subscription", "app"}
    | {"service", "admin", "root", "session", "cookie", "jwt", "webhook", "decryption", "crypt"}
)
_PASS_WORDS = ("password", "passwd", "passphrase", "pword", "contrasena", "secret")
# "pass" ends many words (bypass, minipass): only these spellings name a password
_PASS_NAMES = frozenset(
    {"pass", "dbpass", "rootpass", "adminpass", "userpass", "mypass", "smtppass", "mailpass"}
    | {"ftppass", "sshpass", "storepass", "keypass", "srcstorepass", "deststorepass", "apppass"}
    | {"keystorepass", "truststorepass", "vpnpass", "wifipass", "proxypass", "ldappass"}
)
_WEAK_LAST = frozenset({"auth", "credential", "credentials", "creds", "sig", "signature"})


# A last segment that only qualifies the name before it: ``SECRET_KEY_BASE``, ``DB_PASSWORD_PROD``,
# ``JWT_SECRET_B64``, ``API_TOKEN_V2`` name a secret as much as ``SECRET_KEY`` does.
_MODIFIERS = frozenset(
    {"base", "value", "b64", "base64", "hex", "raw", "str", "plain", "plaintext", "text", "enc"}
    | {"prod", "production", "dev", "development", "staging", "stage", "test", "testing", "live"}
    | {"old", "new", "current", "next", "prev", "previous", "primary", "secondary", "main"}
    | {"local", "remote", "default", "override", "literal", "v", "bytes", "utf8"}
)
# Names of things that are public by design, or keys that are identifiers, not credentials.
_PUBLIC_SEGMENTS = frozenset(
    {"public", "publishable", "pub", "pubkey", "publickey", "site", "sitekey", "recaptcha"}
)
_ID_KEY_QUALIFIERS = frozenset(
    {"idempotency", "cache", "request", "trace", "correlation", "dedup", "dedupe", "partition"}
    | {"sort", "primary", "foreign", "object", "lookup", "hash", "etag", "unique"}
    | {"composite", "group", "message", "event", "s3", "bucket", "map", "dict"}
    | {"index", "row", "column", "cursor", "page", "shard", "lock", "queue", "redis", "kv"}
)
_STRONG_WORDS = frozenset(
    {"mnemonic", "seedphrase", "passcode", "passwort", "contrasena", "contraseña", "senha"}
    | {"motdepasse", "kennwort", "wachtwoord", "parola", "haslo", "geslo", "jelszo"}
)
_WEAK_WORDS = frozenset(
    {"salt", "pepper", "session", "sessionid", "sid", "sess", "jsessionid", "phpsessid", "sessid"}
)


@lru_cache(maxsize=4096)
def secret_key_kind(key: str) -> str | None:
    """Which kind of secret a key names, or None. See the module docstring."""
    segs = [s.lower() for s in SEGMENT_RE.findall(key)]
    if not segs or any(s in _PUBLIC_SEGMENTS for s in segs):
        return None
    while len(segs) > 1 and (segs[-1] in _MODIFIERS or segs[-1].isdigit()):
        segs.pop()
    last = segs[-1]
    if last in _STRONG_WORDS or last.endswith("authtok") or segs[-2:] == ["pass", "phrase"]:
        return "password"  # sssd's ldap_default_authtok, OCI's pass_phrase
    if last in ("encrypt", "encryption", "gossip"):
        return "weak"  # Consul's encrypt = "<base64 key>"
    if last == "pat":
        return "token"  # a personal access token: AZURE_DEVOPS_EXT_PAT, GITLAB_PAT
    if last in ("sig", "signature"):
        return "signature"
    if last in _WEAK_WORDS:
        return "weak"
    if last == "id":
        if segs[-3:-1] == ["access", "key"]:
            return "key"  # AWS access key ids travel with their secret
        return "weak" if segs[-2:-1] == ["secret"] else None  # Vault's secret_id; AWS's names one
    if last == "secretid":
        return "weak"
    if last == "data" and len(segs) >= 2 and segs[-2] == "key":
        return "key"  # kubeconfig client-key-data
    if last in ("authorization", "authorisation"):
        return "authorization"
    if last == "cookie":
        return "cookie"
    if last == "key":
        if len(segs) >= 2 and segs[-2] in _ID_KEY_QUALIFIERS:
            return None
        return "key" if len(segs) >= 2 and segs[-2] in _KEY_QUALIFIERS else "weak"
    if last in ("pw", "pwd", "psk") or last.endswith("pwd"):
        return "pwd" if last.endswith("pwd") else "password"
    if last.endswith("token"):
        return "token"
    if last in _PASS_NAMES or any(last.endswith(w) for w in _PASS_WORDS):
        return "password"
    if last.endswith(("apikey", "privatekey", "secretkey", "accesskey", "authkey")):
        return "key"
    if last.endswith("key") and len(last) > 3:
        return "weak"
    if last in _WEAK_LAST:
        return "weak"
    return None


# --- values that stay ---------------------------------------------------------------------------

_MARKER_RE = lazy(r"\[REDACTED(?::[a-z0-9-]+)?\]")
_KEYWORD_WORD_RE = lazy(r"pass(?:word|wd|phrase)|pwd|secret|token|key", re.IGNORECASE)
_NUMBER_RE = lazy(r"[-+]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_TYPE_WORDS = frozenset(
    {"str", "string", "bytes", "int", "integer", "number", "bool", "boolean", "any", "object"}
    | {"char", "union", "optional", "option", "list", "dict", "none", "null", "undefined"}
    | {"unknown", "secretstr", "secretstring", "secretbytes"}
)
_REFERENCE_RE = lazy(
    r"\$?\{\{[^{}\n]{0,256}\}\}|\$\{[^{}\n]{0,256}\}|\$\([^()\n]{0,256}\)|(?<!\S)\$[A-Za-z_]\w*"
    r"|%[A-Za-z_]\w*%|\{[A-Za-z_][\w.]*\}"
)
_SCHEME_WORD_RE = lazy(r"(?i)^(?:bearer|basic|token)\b\s*")
_CODE_LOOKUP_RE = lazy(
    r"(?:process\.env|import\.meta\.env|Deno\.env|os\.environ)\b|(?:os\.|System\.)?getenv\("
    r"|ENV\[|env\(|secrets\.|vars\.|env\."
)
_CODE_LEAD_RE = lazy(
    r"(?:await\s+|new\s+|not\s+|\*{1,2})?(?P<chain>[A-Za-z_$][\w$]*(?:(?:\??\.|::)[A-Za-z_$][\w$]*)*)"
    r"(?P<tail>\(|\[|[ \t]*(?:[,;)\]}]|$)"
    r"|[ \t]+for[ \t]+\w+[ \t]+in[ \t]|[ \t]+(?:or|and|if|else|in|is|not|\|\||&&|\?\?|[?+\-*/%|&^]{1,2}|[=!]=)(?:[ \t]|$))"
)
_SYMBOL_OPERATOR_RE = lazy(r"[ \t]+(?:[+\-*/%|&^]{1,2}|[=!]=|for[ \t].*)(?:[ \t]|$)")
_NAMING_WORD_RE = lazy(r"(?i)pass|pwd|secret|token|key|hash|cred|auth|cert|salt|sign")
_FUNCTION_RE = lazy(r"(?:async|function|lambda|def|fn|func)\b")
_SEMVER_RANGE_RE = lazy(r"[\^~]|[<>]=?|workspace:|npm:|file:|git\+|github:")
_HUMPS_RE = lazy(r"[A-Za-z][a-z]+(?:[A-Z][a-z]{2,})+\d{0,2}")
_CODE_OBJECTS = frozenset(
    {"self", "this", "cls", "process", "os", "env", "config", "settings", "conf", "cfg", "ctx"}
    | {"context", "args", "opts", "options", "req", "request", "params", "props", "secrets"}
)
_VARIABLE_RE = lazy(r"[a-z_]+(?:[A-Z][a-z_]+)*\d*|[A-Z]+(?:_[A-Z]+)+\d*")
_DOTTED_PART_RE = lazy(r"[A-Za-z_][a-z_]*(?:[A-Z][a-z_]+)*\d*|[A-Z]+(?:_[A-Z]+)*\d*")
_SQL_PLACEHOLDER_RE = lazy(r"(?:\?|%s|%\(\w+\)s|:[A-Za-z_]\w*|\$\d+)(?!\w)")
_PROSE_RE = lazy(r"[A-Za-z][A-Za-z\s'(),.;:/-]*")
_PROSE_OPENERS = frozenset(
    {"the", "a", "an", "to", "if", "when", "whether", "optional", "optionally", "used", "use"}
)
_HEX_COLOR_RE = lazy(r"#[0-9A-Fa-f]{3,8}")
_PATH_RE = lazy(r"(?:~|\.{1,2})?/[\w.\-/~]*|[A-Za-z]:\\.*")
_PLACEHOLDER_RE = lazy(
    r"(?i)<[^<>]*>|\[[^\[\]]*\]|(?:your|insert|enter|replace|put)[-_ ][\w\- ]*|your\w*"
    r"|[\w\- ]*[-_ ](?:here|goes[-_ ]here|placeholder)|x{3,}|(?:replace|change)[-_]?me"
    r"|(?:mock|fake|dummy|test|example|sample|placeholder|not[-_]?a[-_]?real)[-_ ][a-z\-_ ]*"
    r"|todo|tbd|fixme|\*+|\.{3,}|…"
)
_NOT_SECRET_LITERALS = frozenset(
    {"true", "false", "null", "none", "nil", "undefined", "yes", "no", "on", "off", "~"}
    | {"changeme", "placeholder", "redacted", "example", "dummy", "value", "pass", "password"}
    | {"passwd", "secret", "token", "required", "optional", "default", "string", "empty", "text"}
    | {"test", "testing"}
)


# Where a secret is *named* rather than written: secret managers' URIs and ARNs, cloud templates,
# framework lookups (Symfony's %env()%, PowerShell's $env:, Azure's @Microsoft.KeyVault(...)),
# and ciphertext meant to be committed (SOPS ENC[...], ansible-vault).
_NAMED_SECRET_RE = lazy(
    r"(?i)(?:op|vault|sm|gsm|awssm|azkv|akv|doppler|infisical|bw|keeper|onepassword)://"
    r"|arn:aws[\w\-]*:(?:secretsmanager|ssm|kms):|ref\+\w+://|%env\([^)]*\)%|\$env:\w+"
    r"|@microsoft\.keyvault\(|projects/[^/\s]+/secrets/|!(?:ref|sub|getatt|importvalue)\b"
    r"|enc\[[a-z0-9_]+,|\$ansible_vault;|vault:(?:secret|kv)/|secret(?:s)?manager:|ssm:/"
    r"|!vault\b|(?:file|env|fd):[\w/.~\-]|Ag[A-D][A-Za-z0-9+/]{200}|`[^`\n]+`$|%[a-zA-Z]/"
)


_DIGEST_RE = lazy(r"(?:sha\d+=|v\d=|t=\d+,v\d=)?[0-9a-fA-F]{32,}(?:,v\d=[0-9a-fA-F]{32,})*")
_PUBLIC_VALUE_RE = lazy(r"(?:pk_(?:live|test)_|pk\.eyJ|phc_|pub-)")
_SIZE_RE = lazy(r"\d+ (?:bytes?|B|KB|MB|KiB|MiB)")
_UI_TEXT_RE = lazy(r"[A-Z][^\n]{2,200}[.?!…]")
_SQL_LITERAL_RE = lazy(
    r"(?i)(?:null|true|false|default|now\(\)|current_timestamp)(?:[ \t]*(?:,|;|$|\bwhere\b))"
)
_FILE_PATH_RE = lazy(r"(?:\.{1,2}|~)?/(?:[\w.\-]+/)+[\w.\-]+|(?:\.{1,2}|~)/[\w.\-]+\.\w{1,5}")
# kebab-case names ending in what they name: ``smtp-password``, ``stripe-api-key`` (gcloud's
# --secret, Kubernetes' secretName); a literal password seldom ends in the word "password"
_SECRET_NAME_RE = lazy(
    r"[a-z]+(?:-[a-z]+)*-(?:password|passwd|secret|token|key|credentials?|creds)"
    r"|[a-z]+(?:[A-Z][a-z]+)*(?:Password|Passwd|Secret|Token|Key|Pwd|Credentials?)"
)


def is_reference(value: str) -> bool:
    if "${" in value or "{{" in value or "#{" in value:
        return True  # a template: the secret is interpolated, not written
    if _NAMED_SECRET_RE.match(value.strip("\"'`")):
        return True
    if _CODE_LOOKUP_RE.match(value) or re.fullmatch(r"<[^<>]*>", value):
        return True
    if re.fullmatch(r"\*\.?[a-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*", value):
        return True  # *.example.com, *v1.Secret: a glob or a pointer, not a password
    rest = _REFERENCE_RE.sub("", _MARKER_RE.sub("", value)).strip(" \t\"'`+")
    return rest != value and len(_SCHEME_WORD_RE.sub("", rest).strip()) < MIN_SECRET_LEN


def looks_like_type(expr: str, *, capitalized: bool = True) -> bool:
    if any(c in expr for c in "[|<"):
        return True
    first = expr.split(".")[0].rstrip("?")
    return first.lower() in _TYPE_WORDS or (
        capitalized and re.fullmatch(r"[A-Z][A-Za-z]+", first) is not None
    )


def is_code(value: str, *, bare_names: bool, literal_words: str = "") -> bool:
    """An unquoted value that reads as code: ``auth[1]``, ``self.password or x``, ``load()``, ``?``.

    A bare word stays suspect (``hunter22``). snake_case and camelCase names count as variables only
    where ``bare_names`` says the syntax may be a program; machine-made secrets rarely look like
    them. Where ``literal_words`` says the syntax is ``"shell"`` or ``"yaml"``, a dotted or
    secret-sounding word (``hunter2.secret``, ``staging_token``) is a literal, not a variable; in
    YAML-looking ``key: value`` a camelCase name still reads as a JavaScript property value.
    """
    if (
        value.startswith(("(", "&"))
        or _SQL_PLACEHOLDER_RE.match(value)
        or _FUNCTION_RE.match(value)
    ):
        return True
    m = _CODE_LEAD_RE.match(value)
    if m is None:
        return False
    tail = m.group("tail")
    if tail in ("(", "[") or _SYMBOL_OPERATOR_RE.fullmatch(tail):
        return True  # a call, an index, an operator or a comprehension: str | int, a / "b"
    chain = m.group("chain")
    parts = re.split(r"\??\.|::", chain)
    if parts[0] in _CODE_OBJECTS:
        return True
    if literal_words == "yaml" and _HUMPS_RE.fullmatch(chain) and _NAMING_WORD_RE.search(chain):
        return True  # userPassword, ProgressToken: a property or a type, not a passphrase
    if not literal_words and re.fullmatch(r"[A-Z][a-z]+(?:[A-Z][a-z]+)?", chain):
        return True  # token = Error, secret = SecretStr: a class in code (3+ words: a passphrase)
    if literal_words:
        return False
    if secret_key_kind(parts[-1]) is not None and secret_key_kind(parts[-1]) not in WEAK_KINDS:
        return True
    if len(parts) > 1:
        return all(_DOTTED_PART_RE.fullmatch(p) for p in parts)
    return (
        bare_names
        and _VARIABLE_RE.fullmatch(chain) is not None
        and ("_" in chain or chain.lower() != chain)
    )


def is_prose(value: str) -> bool:
    """A description such as ``The access token to verify.`` or ``SSH password``.

    It must open with an article-like word or name the secret in its first two words, so
    ``swordfish for the staging db`` is still redacted.
    """
    words = value.lower().split()
    if len(words) < 2 or not _PROSE_RE.fullmatch(value):
        return False
    return words[0] in _PROSE_OPENERS or any(_KEYWORD_WORD_RE.search(w) for w in words[:2])


def keep(
    value: str,
    kind: str,
    *,
    plain: bool = False,
    bare_names: bool = False,
    literal_words: str = "",
) -> bool:
    """True when a value is plainly not a secret and should stay readable."""
    v = value.strip()
    if plain:
        if v.startswith("#") or is_prose(v):
            return True
        if is_code(v, bare_names=bare_names, literal_words=literal_words):
            return True
        v = v.rstrip(",;").rstrip()
    if len(v) < MIN_SECRET_LEN or v.lower() in _NOT_SECRET_LITERALS:
        return True
    if not v.strip("*•.x:-_ ") or _HEX_COLOR_RE.fullmatch(v) or _PLACEHOLDER_RE.fullmatch(v):
        return True
    if re.match(r"<[^<>\n]{1,120}>(?:\s|$)", v):
        return True  # <set to the key 'password' in secret 'db-creds'>: kubectl describe
    if is_filler(v) or _PUBLIC_VALUE_RE.match(v) or _SIZE_RE.fullmatch(v):
        return True  # sk_live_REPLACE_ME, pk.eyJ… (a public token), "24 bytes" (kubectl describe)
    if _UI_TEXT_RE.fullmatch(v) and v.count(" ") >= 1:
        return True  # "Passwort vergessen?", "Your session has expired. Please sign in again."
    if plain and _SQL_LITERAL_RE.match(v):
        return True  # reset_password_token = NULL, …
    if re.fullmatch(r"[\^~>=<]{0,2}\d+(?:\.\d+){1,2}(?:[-+][\w.]+)?", v) and _SEMVER_RANGE_RE.match(
        v
    ):
        return True  # "minipass": "^7.0.2": a version range
    if re.fullmatch(r"__\w+__", v):
        return True
    if kind == "token" and _NUMBER_RE.fullmatch(v):
        return True
    if kind == "signature" and (
        _DIGEST_RE.fullmatch(v.strip("\"'")) or not looks_random(v.strip("\"'"))
    ):
        return True  # X-Hub-Signature-256: sha256=…, a test vector: a digest of public data
    if (
        kind in ("pwd", "key", "weak", "signature")
        and _PATH_RE.fullmatch(v)
        and not any(looks_random(part) for part in v.split("/"))
    ):
        return True  # a path, not base64 that happens to start with "/"
    if is_reference(v):
        return True
    if _FILE_PATH_RE.fullmatch(v) and not any(looks_random(part) for part in v.split("/")):
        return True  # ./secrets/db_password.txt, /run/secrets/db: where the secret is kept
    if _SECRET_NAME_RE.fullmatch(v):
        return True  # smtp-password, db_api_token: a secret's name, not the secret
    return kind in WEAK_KINDS and not looks_random(v.strip("\"'"))


# --- values that look like secrets (for weak positions) --------------------------------------------

_NOT_A_PASSWORD_RE = lazy(
    r"[a-z]+(?:[_\-.][a-z]+)+|[A-Za-z]+|\d+|.*(?:://|[${}()<>\[\]]).*|[\w\-/.]*/[\w\-/.]*"
    r"|[\w\-]+\.(?:com|org|net|io|dev|local|internal|json|ya?ml|toml|txt|md|py|js|ts|go|rs|sh|pem"
    r"|key|crt|conf|cfg|ini|env|html|css|lock|log|csv|sql|db|xml)"
    r"|v?\d+(?:\.\d+)+(?:[-+][\w.]+)?|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"
)
_ALGORITHMS = frozenset(
    {"hs256", "hs384", "hs512", "rs256", "rs384", "rs512", "es256", "es384", "es512", "ps256"}
    | {"sha1", "sha256", "sha384", "sha512", "md5", "utf-8", "utf8", "ascii", "latin-1", "base64"}
    | {"aes-256-gcm", "aes-256-cbc", "aes256", "eddsa", "ed25519", "x25519", "hex", "utf-16"}
)
# Google and Apple app passwords: four groups of four letters.
_APP_PASSWORD_RE = lazy(r"[a-z]{4}(?:[ \-][a-z]{4}){3}")
_HASH_PART_RE = lazy(r"[0-9a-fA-F]{7,}|\d+")


def named_with_hash(value: str) -> bool:
    """``Linux-pip-95ad…``, ``node-modules-Linux-9984…``, ``v1-deps-d605…``: words and a hash."""
    parts = [p for p in re.split(r"[-_./:]", value) if p]
    words = sum(1 for p in parts if len(p) >= 3 and p.isalpha())
    hashed = any(len(p) >= 7 and _HASH_PART_RE.fullmatch(p) for p in parts)
    if not hashed or words < (1 if len(parts) >= 3 else 2):
        return False
    return all(p.isalpha() or _HASH_PART_RE.fullmatch(p) or len(p) <= 8 for p in parts)


def password_like(value: str) -> bool:
    """A human-chosen password or a machine key: ``Pelican!2291``, ``hunter2-prod-9``, base62."""
    v = value.strip().rstrip(".,;:?)")
    if _APP_PASSWORD_RE.fullmatch(v):
        return True
    if len(v) < 8 or len(v) > 512 or v.startswith("[REDACTED") or " " in v:
        return False
    if named_with_hash(v) or is_filler(v):
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


def plain(value: str, kind: str = "password", *, bare: bool = False) -> bool:
    """Plainly not a secret wherever it stands (references, placeholders, markers, short words);
    a ``bare`` (unquoted) value may also be code (``get_password()``, ``self.token``)."""
    v = value.strip()
    if not v or v.startswith("[REDACTED") or is_reference(v):
        return True
    return keep(v, kind, plain=bare, bare_names=bare)


def weak_ok(value: str, *, bare: bool = False) -> bool:
    """A value in a weak position is a secret only when it also looks like one."""
    return not plain(value, bare=bare) and password_like(value)
