"""Every labelled corpus of the redactor, by family: the house corpus and the blind ones.

* ``house``: :mod:`tests.unit.redact_corpus`, written alongside the detector, one format at a time.
* ``blind-a`` … ``blind-d``: :mod:`tests.unit.redact_blind_a` … ``_d``, each written by someone
  who had seen neither the detector's code nor any other corpus, from a list of the kinds of
  secrets developers' sessions hold. Each was scored *before* the detector was tuned on it
  (bench/README.md, "Redaction by kind"): blind-b was held out while the detector was tuned on
  blind-a, blind-c while it was tuned on blind-a and -b; blind-d was never tuned on, so its
  figures are recall on data the detector has not seen.

Each corpus names its own families; :data:`FAMILY` maps them onto the families the detector's
rules are written for (:data:`memoryd.redact.RULE_FAMILIES`), so ``bench/redact.py`` can switch a
family's own rules off and see how much of it the rest still catches (leave-one-family-out).
"""

from __future__ import annotations

from typing import NamedTuple

from tests.unit import redact_blind_a, redact_blind_b, redact_blind_c, redact_blind_d, redact_corpus


class Labelled(NamedTuple):
    corpus: str
    family: str  # one of the detector's families (or the corpus's own name for a new kind)
    fmt: str
    text: str
    secret: str
    keep: str = ""


class Ordinary(NamedTuple):
    corpus: str
    family: str
    text: str


_HOUSE_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("private_keys", ("pem-", "pgp-private", "putty-private", "gcp-service-account")),
    (
        "url_credentials",
        ("amqp-url", "jdbc", "mongodb", "mysql-url", "postgres-url", "redis-url", "url-userinfo")
        + ("git-credentials", "sentry-dsn", "slack-webhook", "discord-webhook", "azure-sas")
        + ("sqlplus",),
    ),
    ("headers", ("auth-", "cookie", "set-cookie", "x-api-key", "x-auth-token", "proxy-auth")),
    (
        "cli",
        ("cli-", "curl-user", "docker-login", "htpasswd", "httpie-auth", "keytool", "ldap")
        + ("mysql-p", "redis-cli", "smbclient", "ssh-keygen", "sshpass"),
    ),
    (
        "code",
        ("go-basic-auth", "js-object", "python-kwarg", "requests-auth", "powershell-env")
        + ("windows-set",),
    ),
    (
        "config_files",
        ("env-", "docker-compose", "docker-config", "ini-password", "json-", "k8s-secret")
        + ("kubeconfig", "netrc", "npmrc-auth", "nuget-config", "pgpass", "properties")
        + ("redis-conf", "toml-secret", "xml-password", "yaml-", "wpa-psk", "mssql-conn")
        + ("azure-servicebus", "azure-storage", "mysql-password"),
    ),
    ("prose", ("prose-password", "high-entropy-")),
)


def _house_family(fmt: str) -> str:
    for family, prefixes in _HOUSE_PREFIXES:
        if fmt.startswith(prefixes):
            return family
    return "provider_tokens"


# The blind corpora's own family names -> the detector's families.
FAMILY: dict[str, str] = {
    # blind-a
    "sql": "sql",
    "code_assign": "code",
    "cli_args": "cli",
    "positional_call": "code",
    "interactive_output": "printed",
    "token_shapes": "provider_tokens",
    "encoded_keys": "private_keys",
    "url_userinfo": "url_credentials",
    "config_files": "config_files",
    "chat_and_logs": "prose",
    "webhooks": "url_credentials",
    "cookies": "headers",
    "basic_auth": "headers",
    "otp": "printed",
    "crypto": "private_keys",
    "ssh": "cli",
    "wifi": "config_files",
    # blind-b
    "sql_passwords": "sql",
    "code_literals": "code",
    "cli_secrets": "cli",
    "call_arguments": "code",
    "tool_output": "printed",
    "provider_tokens": "provider_tokens",
    "encoded_private_keys": "private_keys",
    "url_credentials": "url_credentials",
    "config_entries": "config_files",
    "prose_and_logs": "prose",
    "crypto_wallets": "private_keys",
    "network_device_secrets": "config_files",
    "credential_files": "config_files",
    # blind-c
    "database_credential": "sql",
    "system_credential": "config_files",
    "crypto_private_key": "private_keys",
    "package_registry": "config_files",
    "llm_api_key": "provider_tokens",
    "saas_api_key": "provider_tokens",
    "ci_cd": "config_files",
    "messaging_webhook": "url_credentials",
    "app_secret_key": "config_files",
    "container_k8s": "config_files",
    "auth_provider": "provider_tokens",
    "chat_prose": "prose",
    "session_token": "headers",
    "cloud_aws": "provider_tokens",
    "cloud_azure": "provider_tokens",
    "cloud_gcp": "provider_tokens",
    "cloud_other": "provider_tokens",
    "network_device": "config_files",
    "paas_token": "provider_tokens",
    "vcs_token": "provider_tokens",
    # blind-d
    "app_secret": "config_files",
    "auth_token": "headers",
    "chat": "prose",
    "cli_secret": "cli",
    "cloud": "provider_tokens",
    "database": "sql",
    "deploy_config": "config_files",
    "llm": "provider_tokens",
    "network_creds": "config_files",
    "private_key": "private_keys",
    "saas_token": "provider_tokens",
    "vcs": "provider_tokens",
    "webhook_messaging": "url_credentials",
}


def _blind(name: str, module: object) -> tuple[list[Labelled], list[Ordinary]]:
    secrets = [
        Labelled(name, FAMILY.get(s.family, s.family), s.fmt, s.text, s.secret, s.keep)
        for s in module.SECRETS  # type: ignore[attr-defined]
    ]
    ham = [Ordinary(name, h.family, h.text) for h in module.HAM]  # type: ignore[attr-defined]
    return secrets, ham


def corpora() -> dict[str, tuple[list[Labelled], list[Ordinary]]]:
    house = (
        [
            Labelled("house", _house_family(s.fmt), s.fmt, s.text, s.secret, s.keep)
            for s in redact_corpus.SECRETS
        ],
        [Ordinary("house", "ordinary", line) for line in redact_corpus.HAM],
    )
    return {
        "house": house,
        "blind-a": _blind("blind-a", redact_blind_a),
        "blind-b": _blind("blind-b", redact_blind_b),
        "blind-c": _blind("blind-c", redact_blind_c),
        "blind-d": _blind("blind-d", redact_blind_d),
    }
