"""Labelled corpora for the redactor: secrets that must disappear, ordinary text that must not change.

Shared by ``tests/unit/redact/test_corpus.py`` and ``bench/redact.py``. Secret values are generated
at import time from a fixed seed, with each provider's documented shape (prefix, alphabet, length),
so no real or literal token sits in the repository and every run sees the same text.

``SECRETS`` holds :class:`Sample` rows: a format label, the text as it would appear in a
transcript, the exact substring that must not survive, and a substring that must survive (the key,
header or command around it) so the redacted text stays readable.

``HAM`` is ordinary coding text, one line per entry, that must come out byte for byte. Placeholder
decisions (what counts as *not* a secret):

* references: ``${VAR}``, ``$VAR``, ``${{ secrets.X }}``, ``{{ .Values.x }}``, ``<%= ENV[...] %>``,
  ``process.env.X``, ``os.environ[...]``, ``$(command)``;
* angle-bracket placeholders (``<your-token-here>``, ``<password>``), ``your-...`` values,
  ``xxxx``/``****``/``...`` fillers, ``changeme`` and the bare words ``password``/``secret``/
  ``token``;
* values under weak keys (``key``, ``*_key`` other than api/secret/private/access..., ``auth``,
  ``signature``) that are words, identifiers or paths rather than random strings;
* public material: certificates (``-----BEGIN CERTIFICATE-----``), ``client-certificate-data``,
  SSH public keys, Stripe publishable keys (``pk_live_``), content hashes and digests.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import NamedTuple

_rng = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def uuid() -> str:
    return "-".join(rnd(k, HEX) for k in (8, 4, 4, 4, 12))


def b64(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


class Sample(NamedTuple):
    fmt: str
    text: str
    secret: str
    keep: str = ""


def _pem(kind: str, lines: int = 6) -> tuple[str, str]:
    body = "\n".join(rnd(64, B64) for _ in range(lines))
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----", body.splitlines()[2]


def _jwt() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = f'{{"sub":"{rnd(10, LOWER_ALNUM)}","exp":1893456000}}'.encode()
    payload = base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return f"{header}.{payload}.{rnd(43, B64URL)}"


def _words(n: int) -> str:
    words = ["Correct", "Horse", "Battery", "Staple", "Violet", "Tango", "Marble", "Quartz"]
    return "".join(_rng.choice(words) for _ in range(n))


def make_secrets(seed: int = 20261201) -> list[Sample]:
    """The secret samples, their random parts drawn from ``seed`` (other seeds: other values)."""
    _rng.seed(seed)
    s: list[Sample] = []

    def add(fmt: str, template: str, secret: str, keep: str = "") -> None:
        s.append(Sample(fmt, template.replace("{S}", secret), secret, keep))

    # --- provider tokens ---------------------------------------------------------------------
    t = "ghp_" + rnd(36)
    add("github-classic", "export GITHUB_TOKEN={S}", t, "GITHUB_TOKEN=")
    add(
        "github-classic",
        "git remote set-url origin https://{S}@github.com/acme/api.git",
        "ghp_" + rnd(36),
        "github.com/acme",
    )
    add("github-fine-grained", "token: {S}", "github_pat_" + rnd(22) + "_" + rnd(59), "token:")
    add(
        "github-oauth",
        '{"access_token": "{S}", "scope": "repo"}',
        "gho_" + rnd(36),
        '"scope": "repo"',
    )
    add("github-app", "GH_INSTALLATION_TOKEN={S} gh api /repos", "ghs_" + rnd(36), "gh api /repos")
    add("github-app", "user-to-server {S} expires in 8h", "ghu_" + rnd(36), "expires in 8h")
    add("github-refresh", "refresh={S}", "ghr_" + rnd(76), "refresh=")
    add(
        "gitlab-pat",
        "curl --header 'PRIVATE-TOKEN: {S}' https://gitlab.com/api/v4/projects",
        "glpat-" + rnd(20, B64URL),
        "PRIVATE-TOKEN",
    )
    add(
        "gitlab-runner",
        "gitlab-runner register --token {S}",
        "glrt-" + rnd(20, B64URL),
        "gitlab-runner register",
    )
    add(
        "gitlab-deploy",
        "deploy token is {S} (read_registry)",
        "gldt-" + rnd(20, B64URL),
        "read_registry",
    )
    add(
        "slack-bot",
        "SLACK_BOT=xoxb-{S}",
        f"{rnd(11, string.digits)}-{rnd(13, string.digits)}-{rnd(24)}",
        "SLACK_BOT=",
    )
    add(
        "slack-bot",
        "client = WebClient(token='{S}')",
        f"xoxb-{rnd(12, string.digits)}-{rnd(12, string.digits)}-{rnd(24)}",
        "WebClient(",
    )
    add(
        "slack-user",
        "{S}",
        f"xoxp-{rnd(12, string.digits)}-{rnd(12, string.digits)}-{rnd(13, string.digits)}-{rnd(32, HEX)}",
    )
    add(
        "slack-webhook",
        'curl -X POST -d \'{"text":"hi"}\' https://hooks.slack.com/services/{S}',
        f"T{rnd(10, UPPER_ALNUM)}/B{rnd(10, UPPER_ALNUM)}/{rnd(24)}",
        "hooks.slack.com",
    )
    add("stripe-secret", 'stripe.api_key = "{S}"', "sk_live_" + rnd(99), "stripe.api_key")
    add("stripe-secret", "STRIPE_KEY={S}", "sk_test_" + rnd(24), "STRIPE_KEY=")
    add(
        "stripe-restricted",
        "restricted key {S} for reporting",
        "rk_live_" + rnd(24),
        "for reporting",
    )
    add(
        "stripe-webhook",
        "STRIPE_WEBHOOK_SIGNING={S}",
        "whsec_" + rnd(32),
        "STRIPE_WEBHOOK_SIGNING=",
    )
    add("twilio-api-key", "twilio api:core:keys:fetch --sid {S}", "SK" + rnd(32, HEX), "--sid")
    add("twilio-auth-token", "TWILIO_AUTH_TOKEN={S}", rnd(32, HEX), "TWILIO_AUTH_TOKEN=")
    add(
        "sendgrid",
        "sg = SendGridAPIClient('{S}')",
        f"SG.{rnd(22, B64URL)}.{rnd(43, B64URL)}",
        "SendGridAPIClient",
    )
    add("mailgun", "auth=('api', '{S}')", "key-" + rnd(32, HEX), "auth=")
    add(
        "mailgun",
        "MAILGUN_API_KEY={S}",
        f"{rnd(32, HEX)}-{rnd(8, HEX)}-{rnd(8, HEX)}",
        "MAILGUN_API_KEY=",
    )
    add("npm", "//registry.npmjs.org/:_authToken={S}", "npm_" + rnd(36), "registry.npmjs.org")
    add("npm", "NPM_TOKEN: {S}", "npm_" + rnd(36), "NPM_TOKEN")
    add("npmrc-auth", "_auth={S}", b64("deploy:" + rnd(16)), "_auth=")
    add("pypi", "password = {S}", "pypi-AgEIcHlwaS5vcmc" + rnd(140, B64URL), "password =")
    add(
        "pypi",
        "twine upload -u __token__ -p {S} dist/*",
        "pypi-AgENdGVzdC5weXBpLm9yZw" + rnd(120, B64URL),
        "twine upload",
    )
    add(
        "docker-hub-pat",
        "echo {S} | docker login -u acme --password-stdin",
        "dckr_pat_" + rnd(27, B64URL),
        "docker login",
    )
    add(
        "openai",
        "OPENAI_API_KEY={S}",
        "sk-proj-" + rnd(74, B64URL) + "T3BlbkFJ" + rnd(74, B64URL),
        "OPENAI_API_KEY=",
    )
    add(
        "openai",
        'client = OpenAI(api_key="{S}")',
        "sk-" + rnd(20) + "T3BlbkFJ" + rnd(20),
        "OpenAI(",
    )
    add("anthropic", "x-api-key: {S}", "sk-ant-api03-" + rnd(93, B64URL) + "AA", "x-api-key")
    add(
        "anthropic",
        "ANTHROPIC_API_KEY='{S}' claude",
        "sk-ant-api03-" + rnd(93, B64URL) + "AA",
        "claude",
    )
    add(
        "google-api-key",
        "https://maps.googleapis.com/maps/api/geocode/json?address=x&key={S}",
        "AIza" + rnd(35, B64URL),
        "maps.googleapis.com",
    )
    add(
        "google-api-key",
        'firebaseConfig = { apiKey: "{S}", projectId: "demo" }',
        "AIza" + rnd(35, B64URL),
        "projectId",
    )
    add(
        "google-oauth-secret",
        "GOOGLE_CLIENT_SECRET={S}",
        "GOCSPX-" + rnd(28, B64URL),
        "GOOGLE_CLIENT_SECRET=",
    )
    add(
        "google-refresh-token",
        '"refresh_token": "{S}",',
        "1//0" + rnd(100, B64URL),
        '"refresh_token"',
    )
    pem, line = _pem("PRIVATE KEY", 8)
    sa = json.dumps(
        {
            "type": "service_account",
            "project_id": "demo-123",
            "private_key_id": rnd(40, HEX),
            "private_key": pem + "\n",
            "client_email": "ci@demo-123.iam.gserviceaccount.com",
        }
    )
    s.append(Sample("gcp-service-account", sa, line, '"client_email"'))
    add(
        "aws-access-key-id",
        "aws_access_key_id = {S}",
        "AKIA" + rnd(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
        "aws_access_key_id",
    )
    add(
        "aws-access-key-id",
        "Credential={S}/20260101/us-east-1/s3/aws4_request",
        "ASIA" + rnd(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
    )
    add("aws-secret-key", "aws_secret_access_key = {S}", rnd(40, B64), "aws_secret_access_key")
    add(
        "aws-secret-key", "export AWS_SECRET_ACCESS_KEY={S}", rnd(40, B64), "AWS_SECRET_ACCESS_KEY="
    )
    add(
        "aws-secret-key",
        '{"Credentials": {"AccessKeyId": "ASIAXXXX", "SecretAccessKey": "{S}", "Expiration": "2026-01-01"}}',
        rnd(40, B64),
        '"Expiration"',
    )
    add(
        "aws-session-token",
        "aws_session_token = {S}",
        "IQoJb3JpZ2luX2Vj" + rnd(300, B64),
        "aws_session_token",
    )
    add(
        "azure-storage",
        "DefaultEndpointsProtocol=https;AccountName=acmeprod;AccountKey={S};EndpointSuffix=core.windows.net",
        rnd(86, B64) + "==",
        "AccountName=acmeprod",
    )
    add(
        "azure-storage",
        'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName=x;AccountKey={S}"',
        rnd(86, B64) + "==",
        "AccountName=x",
    )
    sig = rnd(43, ALNUM) + "%3D"
    add(
        "azure-sas",
        "https://acme.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-01-01T00:00:00Z&sig={S}",
        sig,
        "acme.blob.core.windows.net",
    )
    add(
        "azure-servicebus",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={S}",
        rnd(43, B64) + "=",
        "SharedAccessKeyName",
    )
    add(
        "azure-ad-secret",
        "AZURE_CLIENT_SECRET={S}",
        rnd(3, ALNUM) + "8Q~" + rnd(34, ALNUM + "_~.-"),
        "AZURE_CLIENT_SECRET=",
    )
    add(
        "azure-ad-secret",
        "az login --service-principal -u app -p {S} --tenant t",
        rnd(3, ALNUM) + "7Q~" + rnd(34, ALNUM + "_~."),
        "--tenant t",
    )
    add("digitalocean", "doctl auth init -t {S}", "dop_v1_" + rnd(64, HEX), "doctl auth init")
    add("heroku", "HEROKU_API_KEY={S}", uuid(), "HEROKU_API_KEY=")
    add("heroku", "heroku token: {S}", "HRKU-AA" + rnd(58, B64URL))
    add("shopify", "X-Shopify-Access-Token: {S}", "shpat_" + rnd(32, HEX), "X-Shopify-Access-Token")
    add("shopify", "shared secret {S}", "shpss_" + rnd(32, HEX))
    add(
        "vault", "VAULT_TOKEN={S} vault kv get secret/app", "hvs." + rnd(91, B64URL), "vault kv get"
    )
    add("vault", "export VAULT_TOKEN=s.{S}", rnd(24), "VAULT_TOKEN=")
    add("databricks", "DATABRICKS_TOKEN={S}", "dapi" + rnd(32, HEX), "DATABRICKS_TOKEN=")
    add(
        "databricks",
        "databricks configure --host https://x.cloud.databricks.com with {S}",
        "dapi" + rnd(32, HEX) + "-2",
        "databricks configure",
    )
    add(
        "huggingface",
        "huggingface-cli login --token {S}",
        "hf_" + rnd(34, string.ascii_letters),
        "huggingface-cli login",
    )
    add("huggingface", "HF_TOKEN={S}", "hf_" + rnd(34, string.ascii_letters), "HF_TOKEN=")
    discord = f"M{rnd(25, B64URL)}.{rnd(6, B64URL)}.{rnd(38, B64URL)}"
    add("discord-bot", "DISCORD_TOKEN={S}", discord, "DISCORD_TOKEN=")
    add(
        "discord-bot",
        "discord bot: client.run('{S}')",
        f"N{rnd(25, B64URL)}.{rnd(6, B64URL)}.{rnd(38, B64URL)}",
        "client.run(",
    )
    add(
        "discord-webhook",
        f"https://discord.com/api/webhooks/{rnd(18, string.digits)}/{{S}}",
        rnd(68, B64URL),
        "discord.com/api/webhooks",
    )
    add(
        "telegram-bot",
        "curl https://api.telegram.org/bot{S}/getMe",
        f"{rnd(10, string.digits)}:AA{rnd(33, B64URL)}",
        "api.telegram.org",
    )
    add(
        "telegram-bot",
        "TELEGRAM_BOT_TOKEN={S}",
        f"{rnd(9, string.digits)}:AA{rnd(33, B64URL)}",
        "TELEGRAM_BOT_TOKEN=",
    )
    add("linear", "LINEAR_API_KEY={S}", "lin_api_" + rnd(40), "LINEAR_API_KEY=")
    add("linear", "Authorization: {S}", "lin_api_" + rnd(40), "Authorization")
    add("notion", 'notion = Client(auth="{S}")', "secret_" + rnd(43), "Client(")
    add("notion", "NOTION_TOKEN={S}", "ntn_" + rnd(11, string.digits) + rnd(35), "NOTION_TOKEN=")
    add(
        "atlassian",
        "JIRA_API_TOKEN={S}",
        "ATATT3xFfGF0" + rnd(170, B64URL) + "=" + rnd(8, HEX).upper(),
        "JIRA_API_TOKEN=",
    )
    add(
        "atlassian",
        "curl -u me@acme.io:{S} https://acme.atlassian.net/rest/api/3/myself",
        "ATATT3xFfGF0" + rnd(170, B64URL),
        "acme.atlassian.net",
    )
    add(
        "sentry-dsn",
        "SENTRY_DSN=https://{S}@o450000.ingest.sentry.io/5500000",
        rnd(32, HEX) + ":" + rnd(32, HEX),
        "ingest.sentry.io",
    )
    add("sentry-token", "SENTRY_AUTH_TOKEN={S}", "sntryu_" + rnd(64, HEX), "SENTRY_AUTH_TOKEN=")
    add(
        "sentry-token",
        "sentry-cli --auth-token {S} releases new",
        "sntrys_eyJpYXQiO" + rnd(120, B64) + "_" + rnd(43, B64),
        "releases new",
    )
    add("jwt", "Cookie: session={S}; theme=dark", _jwt(), "theme=dark")
    add("jwt", "id_token={S}", _jwt(), "id_token=")
    add("grafana", "GF_TOKEN={S}", "glsa_" + rnd(32) + "_" + rnd(8, HEX), "GF_TOKEN=")
    add("datadog", "DD_API_KEY={S}", rnd(32, HEX), "DD_API_KEY=")
    add(
        "datadog",
        "datadog:\n  api_key: {S}\n  site: datadoghq.eu",
        rnd(32, HEX),
        "site: datadoghq.eu",
    )
    add("okta", "Authorization: SSWS {S}", "00" + rnd(40, B64URL), "Authorization: SSWS")
    add("cloudflare", "CLOUDFLARE_API_TOKEN={S}", rnd(40, B64URL), "CLOUDFLARE_API_TOKEN=")
    add("mailchimp", "MAILCHIMP_KEY={S}", rnd(32, HEX) + "-us6", "MAILCHIMP_KEY=")
    add(
        "doppler",
        "DOPPLER_TOKEN={S} doppler run -- npm start",
        "dp.st.prd." + rnd(40),
        "doppler run",
    )
    add(
        "planetscale", "DATABASE_PASSWORD={S}", "pscale_pw_" + rnd(43, B64URL), "DATABASE_PASSWORD="
    )
    add(
        "1password",
        "OP_SERVICE_ACCOUNT_TOKEN={S}",
        "ops_eyJ" + rnd(300, B64),
        "OP_SERVICE_ACCOUNT_TOKEN=",
    )
    add(
        "postman",
        "postman login --with-api-key {S}",
        f"PMAK-{rnd(24, HEX)}-{rnd(34, HEX)}",
        "postman login",
    )
    add("newrelic", "NEW_RELIC_LICENSE_KEY={S}", rnd(36, HEX) + "NRAL", "NEW_RELIC_LICENSE_KEY=")
    add(
        "age",
        "# public key: age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgp\n{S}",
        "AGE-SECRET-KEY-1" + rnd(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        "# public key",
    )
    # --- private keys ----------------------------------------------------------------------------
    for kind in (
        "RSA PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "EC PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ):
        pem, line = _pem(kind)
        s.append(
            Sample("pem-" + kind.split()[0].lower(), f"$ cat ~/.ssh/id\n{pem}\n$ ls", line, "$ ls")
        )
    pgp_body = "\n".join(rnd(64, B64) for _ in range(6))
    pgp = f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF{rnd(58, B64)}\n{pgp_body}\n=ab12\n-----END PGP PRIVATE KEY BLOCK-----"
    s.append(Sample("pgp-private", pgp, pgp_body.splitlines()[1]))
    putty = f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPublic-Lines: 2\n{rnd(64, B64)}\n{rnd(20, B64)}\nPrivate-Lines: 1\n{{S}}\nPrivate-MAC: {rnd(64, HEX)}"
    add("putty-private", putty, rnd(44, B64) + "=", "Private-MAC")
    # --- connection strings ----------------------------------------------------------------------
    add(
        "postgres-url",
        "DATABASE_URL=postgres://app:{S}@db.internal:5432/app?sslmode=require",
        rnd(20),
        "db.internal:5432",
    )
    add(
        "postgres-url",
        "psql 'postgresql://admin:{S}@10.0.0.5/prod'",
        rnd(12) + "!#",
        "10.0.0.5/prod",
    )
    add("mysql-url", "mysql://root:{S}@localhost:3306/shop", _words(3), "localhost:3306")
    add(
        "mongodb-srv",
        "MONGO_URI=mongodb+srv://svc:{S}@cluster0.ab1cd.mongodb.net/db?retryWrites=true",
        rnd(16),
        "cluster0.ab1cd.mongodb.net",
    )
    add(
        "mongodb",
        'mongosh "mongodb://admin:{S}@mongo-0:27017,mongo-1:27017/?replicaSet=rs0"',
        rnd(14),
        "replicaSet=rs0",
    )
    add("redis-url", "REDIS_URL=redis://:{S}@cache.internal:6379/0", rnd(24), "cache.internal:6379")
    add("redis-url", "rediss://default:{S}@eu1-vital-ant.upstash.io:6379", rnd(32), "upstash.io")
    add("amqp-url", "CELERY_BROKER_URL=amqp://worker:{S}@rabbit:5672//", rnd(18), "rabbit:5672")
    add(
        "mssql-conn",
        "Server=tcp:sql.acme.net,1433;Database=app;User ID=sa;Password={S};Encrypt=True;",
        _words(2) + "9!",
        "Encrypt=True",
    )
    add(
        "mssql-conn",
        '"ConnectionStrings": {"Default": "Server=.;Database=Shop;User Id=shop;Pwd={S};"}',
        rnd(14),
        "Database=Shop",
    )
    add(
        "jdbc",
        "spring.datasource.url=jdbc:postgresql://db:5432/app?user=app&password={S}&ssl=true",
        rnd(16),
        "ssl=true",
    )
    add(
        "jdbc", "jdbc:mysql://deploy:{S}@mysql.internal:3306/orders", rnd(15), "mysql.internal:3306"
    )
    add(
        "jdbc-oracle",
        "jdbc:oracle:thin:scott/{S}@//ora.acme.net:1521/ORCL",
        rnd(12),
        "ora.acme.net:1521",
    )
    add("sqlplus", "sqlplus system/{S}@XEPDB1", _words(2), "@XEPDB1")
    add(
        "url-userinfo",
        "pip install --index-url https://ci:{S}@pypi.acme.net/simple pkg",
        rnd(20),
        "pypi.acme.net/simple",
    )
    add("url-userinfo", "ftp://backup:{S}@files.acme.net/dumps/", rnd(10) + "$", "files.acme.net")
    add("git-credentials", "https://oauth2:{S}@gitlab.acme.net", rnd(20, B64URL), "gitlab.acme.net")
    # --- command lines ---------------------------------------------------------------------------
    add("curl-user", "curl -u admin:{S} https://api.acme.net/v1/health", rnd(14), "api.acme.net")
    add(
        "curl-user",
        "curl -s --user 'deploy:{S}' -X POST https://ci.acme.net/job/build",
        rnd(12) + "@!",
        "ci.acme.net",
    )
    add(
        "curl-user",
        "curl -sSfu ops:{S} https://registry.acme.net/v2/_catalog",
        rnd(12),
        "registry.acme.net",
    )
    add(
        "httpie-auth",
        "http -a alice:{S} GET https://api.acme.net/me",
        rnd(12),
        "GET https://api.acme.net",
    )
    add("mysql-p", "mysql -u root -p{S} -h 127.0.0.1 shop < dump.sql", rnd(12), "dump.sql")
    add(
        "mysql-p",
        "mysqldump -uroot -p'{S}' --all-databases > all.sql",
        _words(2) + "#1",
        "--all-databases",
    )
    add("mysql-password", "mysql --user=app --password={S} app", rnd(10), "--user=app")
    add(
        "sshpass",
        "sshpass -p '{S}' ssh deploy@10.0.0.7 uptime",
        _words(2) + "!",
        "ssh deploy@10.0.0.7",
    )
    add("sshpass", "sshpass -p{S} scp build.tgz pi@raspberry:/tmp", rnd(10), "scp build.tgz")
    add("pgpassword", "PGPASSWORD={S} psql -h db -U app -c 'select 1'", rnd(16), "psql -h db")
    add(
        "cli-password",
        "az sql server create --admin-user sqladmin --admin-password {S} -n srv",
        rnd(12) + "!A1",
        "-n srv",
    )
    add(
        "cli-password",
        "openssl pkcs12 -export -in cert.pem -inkey key.pem -out b.p12 -passout pass:{S}",
        rnd(12),
        "-out b.p12",
    )
    add("cli-token", "vercel deploy --prod --token {S}", rnd(24), "vercel deploy")
    add(
        "cli-token",
        "terraform login; export TF_TOKEN_app_terraform_io={S}",
        rnd(14) + ".atlasv1." + rnd(60, B64URL),
        "terraform login",
    )
    add(
        "docker-login",
        "docker login -u ci-bot -p {S} registry.acme.net",
        rnd(20),
        "registry.acme.net",
    )
    add("redis-cli", "redis-cli -h cache -a {S} ping", rnd(20), "ping")
    add("ssh-keygen", "ssh-keygen -t ed25519 -N '{S}' -f deploy_key", _words(3), "-f deploy_key")
    add("htpasswd", "htpasswd -bc /etc/nginx/.htpasswd admin {S}", rnd(12), "/etc/nginx/.htpasswd")
    add("smbclient", "smbclient //nas/share -U backup%{S}", rnd(12), "//nas/share")
    add(
        "keytool",
        "keytool -importcert -keystore app.jks -storepass {S} -file ca.crt",
        rnd(12),
        "-file ca.crt",
    )
    add(
        "ldap",
        "ldapsearch -x -D cn=admin,dc=acme,dc=net -w {S} -b dc=acme,dc=net",
        rnd(12),
        "-b dc=acme,dc=net",
    )
    # --- headers ---------------------------------------------------------------------------------
    add("auth-bearer", "Authorization: Bearer {S}", rnd(40, B64URL), "Authorization: Bearer")
    add(
        "auth-bearer",
        'curl -H "Authorization: Bearer {S}" https://api.acme.net',
        rnd(32),
        "api.acme.net",
    )
    add("auth-basic", "Authorization: Basic {S}", b64("admin:" + rnd(12)), "Authorization: Basic")
    add("auth-token", "-H 'Authorization: Token {S}'", rnd(40, HEX), "Authorization: Token")
    add(
        "auth-digest",
        'Authorization: Digest username="bob", realm="api", nonce="{S}", uri="/x", response="'
        + rnd(32, HEX)
        + '"',
        rnd(32, HEX),
        "Authorization: Digest",
    )
    add(
        "auth-aws4",
        "Authorization: AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature={S}",
        rnd(64, HEX),
        "AWS4-HMAC-SHA256",
    )
    add(
        "auth-apikey",
        "Authorization: ApiKey {S}",
        b64(rnd(20) + ":" + rnd(22)),
        "Authorization: ApiKey",
    )
    add("auth-raw", '"Authorization": "{S}"', rnd(48, B64URL), '"Authorization"')
    add(
        "proxy-auth",
        "Proxy-Authorization: Basic {S}",
        b64("proxy:" + rnd(10)),
        "Proxy-Authorization",
    )
    add("x-api-key", "X-Api-Key: {S}", rnd(32), "X-Api-Key")
    add("x-auth-token", "x-auth-token: {S}", uuid(), "x-auth-token")
    add("cookie", "Cookie: _ga=GA1.2.3; sessionid={S}; lang=en", rnd(32, LOWER_ALNUM), "lang=en")
    add(
        "set-cookie",
        "Set-Cookie: __Host-session={S}; Path=/; Secure; HttpOnly; SameSite=Lax",
        rnd(40, B64URL),
        "Path=/; Secure",
    )
    # --- credential files ------------------------------------------------------------------------
    add(
        "netrc",
        "machine api.heroku.com login me@acme.io password {S}",
        uuid(),
        "machine api.heroku.com",
    )
    add(
        "netrc",
        "machine github.com\n  login octocat\n  password {S}\n",
        "ghx" + rnd(30),
        "login octocat",
    )
    add("pgpass", "db.acme.net:5432:app:app_rw:{S}", rnd(18), "db.acme.net:5432:app:app_rw:")
    add("pgpass", "*:*:*:postgres:{S}", _words(2) + "7", "*:*:*:postgres:")
    add(
        "docker-config",
        '{"auths": {"https://index.docker.io/v1/": {"auth": "{S}"}}}',
        b64("acme:" + rnd(20)),
        "index.docker.io",
    )
    add(
        "docker-config",
        '"ghcr.io": {\n    "auth": "{S}",\n    "email": "ci@acme.io"\n}',
        b64("bot:ghp_" + rnd(36)),
        '"email"',
    )
    add(
        "kubeconfig",
        "users:\n- name: admin\n  user:\n    token: {S}\n",
        rnd(40, LOWER_ALNUM),
        "name: admin",
    )
    add(
        "kubeconfig",
        "    client-certificate-data: LS0tLS1CRUdJTi\n    client-key-data: {S}\n",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo" + rnd(200, B64),
        "client-certificate-data: LS0tLS1CRUdJTi",
    )
    add(
        "kubeconfig",
        "  user:\n    username: admin\n    password: {S}\n",
        rnd(16),
        "username: admin",
    )
    add(
        "k8s-secret",
        "apiVersion: v1\nkind: Secret\ndata:\n  DB_PASS: {S}\n",
        b64(rnd(14)),
        "kind: Secret",
    )
    add("redis-conf", "bind 127.0.0.1\nrequirepass {S}\nmaxmemory 2gb", rnd(24), "maxmemory 2gb")
    add("wpa-psk", 'network={\n  ssid="office"\n  psk="{S}"\n}', _words(3), 'ssid="office"')
    # --- assignments -----------------------------------------------------------------------------
    add("env-password", "DB_PASSWORD={S}", _words(4) + "-token", "DB_PASSWORD=")
    add(
        "env-password",
        "export POSTGRES_PASSWORD={S}",
        "staging_" + _words(2).lower() + "_secret",
        "POSTGRES_PASSWORD=",
    )
    add(
        "env-password",
        'ADMIN_PASSWORD="{S}"',
        _words(2) + " " + _words(2) + " key",
        "ADMIN_PASSWORD=",
    )
    add("env-pass", "SMTP_PASS={S}", rnd(16), "SMTP_PASS=")
    add("env-passwd", "LDAP_PASSWD={S}", _words(2) + "99", "LDAP_PASSWD=")
    add("env-pwd", "MYSQL_PWD={S} mysql -u root", rnd(12), "mysql -u root")
    add("env-secret", "JWT_SECRET={S}", rnd(48, HEX), "JWT_SECRET=")
    add("env-secret", "SESSION_SECRET = '{S}'", _words(3).lower() + ".secret", "SESSION_SECRET")
    add(
        "env-token",
        "SLACK_APP_TOKEN={S}",
        "xapp-1-" + rnd(11, UPPER_ALNUM) + "-" + rnd(13, string.digits) + "-" + rnd(64, HEX),
        "SLACK_APP_TOKEN=",
    )
    add("env-api-key", "WEATHER_API_KEY={S}", rnd(32, HEX), "WEATHER_API_KEY=")
    add("env-key", "ENCRYPTION_KEY={S}", b64(rnd(32)), "ENCRYPTION_KEY=")
    add("env-key", "PUSHER_APP_KEY={S}", rnd(20, HEX), "PUSHER_APP_KEY=")
    add("env-key", "RAILS_MASTER_KEY={S}", rnd(32, HEX), "RAILS_MASTER_KEY=")
    add(
        "yaml-password",
        "database:\n  host: db\n  password: {S}\n  pool: 5",
        _words(2) + "2024",
        "pool: 5",
    )
    add(
        "yaml-secret",
        "oauth:\n  client_id: web\n  client_secret: {S}",
        rnd(40, B64URL),
        "client_id: web",
    )
    add(
        "toml-secret",
        '[tool.poetry.http-basic.acme]\nusername = "ci"\npassword = "{S}"',
        rnd(20),
        'username = "ci"',
    )
    add(
        "ini-password",
        "[client]\nuser = backup\npassword = {S}\nhost = db",
        rnd(14) + "%",
        "host = db",
    )
    add("json-secret", '{"clientId": "abc", "clientSecret": "{S}"}', rnd(40), '"clientId": "abc"')
    add(
        "json-password",
        '{"user": "svc", "password": "{S}", "port": 5432}',
        _words(3),
        '"port": 5432',
    )
    add("properties", "spring.datasource.password={S}", rnd(18), "spring.datasource.password=")
    add("properties", "mail.smtp.password = {S}", _words(3), "mail.smtp.password")
    add(
        "python-kwarg",
        "conn = psycopg.connect(host='db', user='app', password='{S}')",
        rnd(14),
        "host='db'",
    )
    add(
        "python-kwarg",
        "client = Minio('s3:9000', access_key='minio', secret_key='{S}')",
        rnd(40, B64),
        "Minio(",
    )
    add(
        "js-object",
        "const cfg = { user: 'app', password: '{S}', host: 'db' };",
        rnd(14),
        "host: 'db'",
    )
    add("high-entropy-key", "signing_key: {S}", rnd(64, B64), "signing_key:")
    add("high-entropy-key", "HMAC_KEY={S}", rnd(64, HEX), "HMAC_KEY=")
    add("high-entropy-credential", "credentials: {S}", b64(rnd(48)), "credentials:")
    add(
        "terraform",
        'resource "aws_db_instance" "db" {\n  username = "admin"\n  password = "{S}"\n}',
        rnd(20),
        'username = "admin"',
    )
    add(
        "docker-compose",
        "    environment:\n      - POSTGRES_PASSWORD={S}\n      - POSTGRES_DB=app",
        rnd(16),
        "POSTGRES_DB=app",
    )
    add(
        "github-actions",
        "      - run: npm publish\n        env:\n          NODE_AUTH_TOKEN: {S}",
        "npm_" + rnd(36),
        "npm publish",
    )
    # --- code, markup and chat -------------------------------------------------------------------
    add(
        "requests-auth",
        "r = requests.get(url, auth=('admin', '{S}'), timeout=5)",
        rnd(14),
        "timeout=5",
    )
    add("go-basic-auth", 'req.SetBasicAuth("deploy", "{S}")', rnd(16), "req.SetBasicAuth(")
    add(
        "xml-password",
        "<datasource>\n  <password>{S}</password>\n</datasource>",
        rnd(14),
        "<datasource>",
    )
    add("nuget-config", '<add key="ClearTextPassword" value="{S}" />', rnd(16), "ClearTextPassword")
    add(
        "prose-password",
        "the staging db password is {S} until friday",
        rnd(10) + "!7",
        "until friday",
    )
    add(
        "discord-bot",
        "bot.run('{S}')",
        f"O{rnd(25, B64URL)}.{rnd(6, B64URL)}.{rnd(38, B64URL)}",
        "bot.run(",
    )
    add(
        "url-userinfo",
        "DATABASE_URL=mysql://app:{S}@db.internal/app",
        rnd(6) + "@" + rnd(6),
        "db.internal/app",
    )
    add("openrouter", "OPENROUTER_API_KEY=sk-or-v1-{S}", rnd(64, HEX), "OPENROUTER_API_KEY=")
    add("xai", "client = Client(api_key='{S}')", "xai-" + rnd(80), "Client(")
    add(
        "powershell-env",
        '$env:AZURE_OPENAI_API_KEY = "{S}"',
        rnd(32, HEX),
        "$env:AZURE_OPENAI_API_KEY",
    )
    add("windows-set", "set DB_PASSWORD={S}&& npm start", rnd(12), "npm start")
    return s


SECRETS: list[Sample] = make_secrets()


# --- ham ------------------------------------------------------------------------------------------


def _ham() -> list[str]:
    r = random.Random(7)

    def hx(n: int) -> str:
        return "".join(r.choice(HEX) for _ in range(n))

    def u() -> str:
        return "-".join(hx(k) for k in (8, 4, 4, 4, 12))

    def b64code(src: str) -> str:
        return base64.b64encode(src.encode()).decode()

    def sri(n: int) -> str:
        return base64.b64encode(bytes(r.randrange(256) for _ in range(n))).decode()

    lines = [
        # git
        f"commit {hx(40)}",
        f"Merge: {hx(7)} {hx(7)}",
        f"{hx(7)} fix: retry the upload when the token endpoint returns 503",
        f"{hx(12)} (HEAD -> main, origin/main) chore: bump deps",
        f"git checkout {hx(40)} -- src/auth/password_reset.py",
        f"git cherry-pick {hx(7)}..{hx(7)}",
        f"index {hx(7)}..{hx(7)} 100644",
        f"Fixes https://github.com/acme/api/commit/{hx(40)}",
        "git push --force-with-lease origin feature/token-refresh",
        "git log --oneline --author=alice -- src/keys/",
        "git diff -u old/settings.py new/settings.py",
        "git rebase -i HEAD~3",
        "diff --git a/src/auth/tokens.py b/src/auth/tokens.py",
        "@@ -12,7 +12,9 @@ def refresh_access_token(session, refresh_token):",
        # ids and hashes
        f"request_id={u()} status=200 duration_ms=41",
        f"trace {u()} span {hx(16)}",
        f'"id": "{u()}",',
        f"  integrity sha512-{sri(64)}",
        f'      "integrity": "sha512-{sri(64)}",',
        '      "resolved": "https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz",',
        f'    {{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:{hx(64)}"}},',
        f'    {{file = "idna-3.7.tar.gz", hash = "sha256:{hx(64)}"}},',
        f"requests==2.32.3 --hash=sha256:{hx(64)}",
        f'sdist = {{ url = "https://files.pythonhosted.org/packages/x/y/httpx-0.27.0.tar.gz", hash = "sha256:{hx(64)}" }}',
        f"FROM python:3.12-slim@sha256:{hx(64)}",
        f"Digest: sha256:{hx(64)}",
        f"docker pull ghcr.io/acme/api@sha256:{hx(64)}",
        f"{hx(64)}  dist/memoryd-0.1.0.tar.gz",
        f"sha1sum: {hx(40)}",
        f'etag: W/"{hx(32)}"',
        f'<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.3/dist/js/bootstrap.bundle.min.js" integrity="sha384-{sri(48)}" crossorigin="anonymous"></script>',
        f"checksum: {hx(64)}",
        f"  content_hash: {hx(64)}",
        f"cache-key: node-modules-{hx(40)}",
        f"build/static/js/main.{hx(8)}.js   142.3 kB",
        f'ETag: "{hx(40)}"',
        f"ami-{hx(17)}",
        f"sg-{hx(17)} allows 443 from 0.0.0.0/0",
        "arn:aws:iam::123456789012:role/deploy-ci",
        "arn:aws:s3:::acme-artifacts/builds/2026-01-01/",
        f"subnet-{hx(17)} vpc-{hx(17)}",
        # base64 of code and data
        f"echo {b64code('import os; print(os.getcwd())')} | base64 -d",
        'data = "' + b64code("def main():\n    return 0\n") + '"',
        f'"content": "{b64code("SELECT id, name FROM users WHERE active = true;")}",',
        f"background-image: url(data:image/png;base64,iVBORw0KGgo{sri(48)});",
        "  payload: " + b64code('{"event": "push", "ref": "refs/heads/main"}'),
        # URLs without credentials
        "https://github.com/acme/api/pull/1234/files",
        "https://docs.python.org/3/library/secrets.html#secrets.token_urlsafe",
        "https://api.acme.net/v1/users?page=2&per_page=50&sort=-created_at",
        "https://example.com/reset-password?user=42&expires=1700000000",
        "https://auth.acme.net/oauth/authorize?response_type=code&client_id=web-app&redirect_uri=https%3A%2F%2Facme.net%2Fcb&scope=openid",
        "postgres://localhost:5432/app_test",
        "postgresql://app@db.internal/app",
        "redis://cache:6379/0",
        "mongodb://mongo-0:27017,mongo-1:27017/?replicaSet=rs0",
        "ssh://git@github.com/acme/api.git",
        "git@github.com:acme/api.git",
        "amqp://rabbit:5672/%2F",
        "http://localhost:3000/api/auth/callback/github",
        "https://registry.npmjs.org/@types%2fnode",
        "file:///home/dev/projects/api/README.md",
        "jdbc:postgresql://db:5432/app?ssl=true&sslmode=require",
        "https://user@example.com is an address, not a login",
        # versions and paths
        "python 3.12.1, pip 24.0, node v20.11.1, npm 10.2.4",
        '"version": "1.4.0-beta.3+build.2026",',
        "Bump actions/checkout from 4.1.1 to 4.1.7",
        "Successfully installed httpx-0.27.0 pydantic-2.7.1 pydantic-core-2.18.2",
        "added 312 packages, and audited 313 packages in 4s",
        "/home/dev/projects/api/src/auth/password_reset.py",
        "C:\\Users\\dev\\AppData\\Local\\Programs\\Python\\Python312\\python.exe",
        "~/.config/opencode/agent/memoryd-extract.md",
        "src/components/TokenInput/TokenInput.test.tsx",
        "./node_modules/.bin/tsc --noEmit -p tsconfig.json",
        "tests/unit/test_secret_manager.py::test_rotate_keys PASSED",
        "tests/unit/test_auth.py::test_password_reset_sends_email[smtp] PASSED                [ 42%]",
        "FAILED tests/api/test_tokens.py::test_expired_token_is_rejected - AssertionError",
        # colours and CSS
        "color: #ff8800;",
        "  --primary: #1e40af; --secondary: #64748b;",
        "border: 1px solid #e5e7eb;",
        ".token.keyword { color: #c678dd; }",
        ".password-input:focus { outline: 2px solid #2563eb; }",
        "theme: { colors: { accent: '#0ea5e9', muted: '#94a3b8' } }",
        "Token: '#d0d0d0',",
        # identifiers and code that mention secrets
        "AbstractSingletonProxyFactoryBean",
        "getAccessTokenFromRefreshTokenAsync(refreshToken)",
        "password_reset_url = reverse('password_reset_confirm', args=[uid, token])",
        "token_count = 5",
        "max_tokens = 4096",
        "PASSWORD_MIN_LENGTH = 12",
        "TOKEN_EXPIRY_SECONDS = 3600",
        "SECRET_ROTATION_DAYS = 90",
        "password = get_password()",
        "user.set_password(form.cleaned_data['password1'])",
        "if not check_password(password, user.password_hash):",
        "def verify_token(token: str, *, leeway: int = 0) -> Claims:",
        "def login(username: str, password: str) -> Session:",
        "async def get_current_user(token: str = Depends(oauth2_scheme)) -> User:",
        "hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
        "password_hash = Column(String(128), nullable=False)",
        "token = jwt.encode(payload, settings.SECRET_KEY, algorithm='HS256')",
        "secret_key = os.environ['SECRET_KEY']",
        'api_key = os.getenv("OPENAI_API_KEY")',
        "const apiKey = import.meta.env.VITE_MAPS_API_KEY;",
        "const token = await getToken({ req, secret: process.env.NEXTAUTH_SECRET });",
        "headers: { Authorization: `Bearer ${token}` },",
        'headers["Authorization"] = f"Bearer {access_token}"',
        "req.headers.authorization = `Basic ${btoa(`${user}:${pass}`)}`;",
        "let token = lexer.next_token()?;",
        "token, err := jwt.Parse(tokenString, keyFunc)",
        'if err != nil { return nil, fmt.Errorf("parse token: %w", err) }',
        "self.refresh_token = response.json()['refresh_token']",
        "password = self.password or secrets.token_urlsafe(32)",
        "KeyError: 'password'",
        "raise InvalidTokenError('token expired')",
        "except jwt.ExpiredSignatureError:",
        "TokenExpiredError: token expired at 2026-01-01T00:00:00Z",
        "sessionStorage.setItem('returnTo', location.pathname)",
        "const [password, setPassword] = useState('');",
        '<input type="password" name="password" autocomplete="current-password" />',
        '<label for="api-key">API key</label>',
        "validates :password, length: { minimum: 12 }",
        "password: { type: String, required: true, select: false },",
        "  password: hashedPassword,",
        "  token: randomToken,",
        "  secret: config.webhookSecret",
        "  apiKey: process.env.STRIPE_KEY,",
        "primary_key: id",
        "foreign_key: user_id",
        "sort_key: created_at",
        "key: ${{ runner.os }}-pip-${{ hashFiles('**/requirements.txt') }}",
        "          key: node-${{ hashFiles('package-lock.json') }}",
        "key: value",
        "auth: required",
        '"auth": "oauth2",',
        '"keywords": ["auth", "token", "jwt"],',
        "signature: str = Field(..., description='HMAC of the body')",
        'key = "feature_flags/new_checkout"',
        "cache_key = f'user:{user_id}:profile'",
        "KEY_PREFIX = 'memoryd:'",
        "credentials: include",
        "credentials: 'same-origin',",
        "withCredentials: true",
        # references and placeholders
        "password: ${{ secrets.DB_PASSWORD }}",
        "          token: ${{ secrets.GITHUB_TOKEN }}",
        "NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "export GITHUB_TOKEN=$(gh auth token)",
        "export API_KEY=$OPENAI_API_KEY",
        "DB_PASSWORD=${DB_PASSWORD:-}",
        'password: "{{ .Values.postgres.password }}"',
        "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>",
        "password = var.db_password",
        "  password = random_password.db.result",
        "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
        "      - POSTGRES_PASSWORD_FILE=/run/secrets/db_password",
        "API_KEY=<your-api-key-here>",
        "OPENAI_API_KEY=your-openai-api-key",
        "Authorization: Bearer <token>",
        "Authorization: Bearer $TOKEN",
        'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com/user',
        'curl -u "$JIRA_USER:$JIRA_TOKEN" https://acme.atlassian.net/rest/api/3/myself',
        "password: <your-token-here>",
        "token: xxxxxxxxxxxxxxxxxxxxxxxx",
        "SECRET_KEY=changeme",
        "password: '********'",
        "password: ...",
        "DB_PASSWORD=",
        "token: null",
        "password: true",
        "secretKeyRef:",
        "  key: password",
        "valueFrom: { secretKeyRef: { name: db, key: password } }",
        "secrets: inherit",
        "token_type: bearer",
        "env_file: .env",
        "PWD=/srv/app",
        "private_key: ~/.ssh/id_ed25519",
        "private_key_path = Path('~/.ssh/id_rsa').expanduser()",
        "IdentityFile ~/.ssh/id_ed25519",
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{sri(30)} dev@laptop",
        "pk_live_ is a publishable key prefix and safe in the browser",
        # command lines that look like credentials but are not
        "ssh -p 2222 deploy@10.0.0.7",
        "scp -P 2222 build.tgz deploy@10.0.0.7:/tmp",
        "docker run --rm -u 1000:1000 -p 8080:80 -v $PWD:/app nginx:1.27",
        "docker run -e POSTGRES_PASSWORD -p 5432:5432 postgres:16",
        "mkdir -p src/app && cd src/app",
        "pytest -p no:cacheprovider -q tests/unit",
        "psql -h localhost -U postgres -p 5433 -d app",
        "pg_dump -U app -p 5432 app > app.sql",
        "mysql -u root -p app < schema.sql",
        "ps -u root -p 1234 -o pid,cmd",
        'curl -u "$USER" https://api.acme.net/me',
        "curl -sS https://api.acme.net/v1/status -H 'Accept: application/json'",
        'curl -X POST https://api.acme.net/v1/items -H "Content-Type: application/json" -d \'{"name": "widget"}\'',
        "wget -q -O - https://get.acme.net/install.sh | sh",
        "docker login ghcr.io -u acme --password-stdin < token.txt",
        "gh auth login --with-token < ~/.config/gh/token",
        "npm config get registry",
        "git config --global credential.helper store",
        "kubectl create secret generic db --from-env-file=.env.prod",
        "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
        "openssl req -new -key server.key -out server.csr -passin env:KEY_PASS",
        "openssl rand -base64 32",
        "ssh-keygen -t ed25519 -C dev@laptop",
        "aws sts get-caller-identity --profile prod",
        "aws s3 cp s3://acme-artifacts/build.tgz . --profile ci",
        "tar -czf backup.tgz -C /var/lib/postgresql data",
        "chmod 600 ~/.netrc ~/.pgpass",
        "sort -u names.txt | uniq -c",
        "grep -rn 'password' src/ --include=*.py",
        "ls -la ~/.ssh",
        # prose and logs
        "The tokenizer splits text; we discussed the password reset flow and secret management.",
        "Bearer token auth is described below.",
        "We store the session token in an HttpOnly cookie and rotate it on login.",
        "The password field in ~/.netrc must not be world-readable.",
        "Remember: never log the Authorization header.",
        "password reset emails go out through the notifications queue",
        "Use a personal access token with the repo scope for CI.",
        "The API key is read from the environment, not from the repo.",
        "login page shows 'Invalid password' after three attempts",
        "machine learning pipelines use the feature store",
        "2026-01-01T10:20:30.123Z INFO  auth.service: issued token for user_id=42 ttl=3600s",
        "2026-01-01 10:20:31,004 WARNING [worker-3] token refresh failed, retrying in 5s",
        '[2026-01-01 10:20:32] ERROR: password authentication failed for user "app"',
        "E0101 10:20:33.123456   12345 reflector.go:138] failed to list *v1.Secret: forbidden",
        "WARN  Slow query (812 ms): SELECT * FROM api_keys WHERE revoked_at IS NULL",
        'DEBUG  urllib3.connectionpool: https://api.acme.net:443 "POST /v1/token HTTP/1.1" 200 512',
        "GET /api/v1/sessions?limit=20 200 12.3ms",
        '127.0.0.1 - - [01/Jan/2026:10:20:34 +0000] "GET /login HTTP/1.1" 200 1534',
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/requests/auth.py", line 96, in __call__',
        '    r.headers["Authorization"] = _basic_auth_str(self.username, self.password)',
        '  File "/app/src/auth/tokens.py", line 41, in refresh_access_token',
        "jwt.exceptions.InvalidSignatureError: Signature verification failed",
        "    at Object.verifyToken (/app/src/middleware/auth.js:27:11)",
        "    at processTicksAndRejections (node:internal/process/task_queues:95:5)",
        "panic: runtime error: invalid memory address or nil pointer dereference",
        "thread 'main' panicked at src/keys.rs:88:14:",
        "error[E0425]: cannot find value `secret` in this scope",
        "src/auth/session.ts:12:5 - error TS2322: Type 'string | undefined' is not assignable to type 'string'.",
        "Ran 128 tests in 4.210s",
        "=================== 412 passed, 3 skipped in 21.37s ===================",
        "    ✓ rejects an expired token (12 ms)",
        "    ✓ hashes the password with argon2 (31 ms)",
        "test_login_with_wrong_password_returns_401",
        "TestTokenRefresh::test_refresh_token_rotates",
        "it('masks the api key in logs', async () => {",
        "describe('PasswordStrengthMeter', () => {",
        # config that is not secret
        "[tool.poetry.dependencies]",
        'python = "^3.11"',
        'httpx = { version = "^0.27", extras = ["http2"] }',
        "[database]",
        "host = db.internal",
        "port = 5432",
        "pool_size = 10",
        "[auth]",
        "token_ttl = 3600",
        "password_min_length = 12",
        "session_cookie_secure = true",
        "spring.datasource.username=app",
        "spring.datasource.url=jdbc:postgresql://db:5432/app",
        "server.ssl.key-store-type=PKCS12",
        "server.ssl.key-store=classpath:keystore.p12",
        "log_level: debug",
        "replicas: 3",
        "image: ghcr.io/acme/api:1.4.0",
        "imagePullSecrets:",
        "  - name: ghcr-pull",
        "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM",
        "    client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUQ",
        "    server: https://10.0.0.1:6443",
        "current-context: kind-dev",
        '{"type": "step-finish", "tokens": {"input": 203, "output": 20, "reasoning": 0}, "cost": 0}',
        '{"input_tokens": 12, "output_tokens": 40, "cache_read_input_tokens": 0}',
        '{"model": "gpt-4o-mini", "max_tokens": 1024, "temperature": 0.2}',
        '"tokens": 512,',
        '"token_usage": {"prompt": 900, "completion": 120}',
        '{"name": "reset_password", "arguments": {"user_id": 42}}',
        '{"error": {"code": "invalid_api_key", "message": "Incorrect API key provided"}}',
        '{"hasPassword": false, "mfaEnabled": true}',
        '{"ok": false, "error": "token_revoked"}',
        '"session": {"id": "ses_dd8985de3ffevWgvaQlvqBQx4t", "title": "Fix login"}',
        "ses_dd8985de3ffevWgvaQlvqBQx4t msg_dd8985de4001Xz prt_dd8985de5002abCD",
        "-----BEGIN CERTIFICATE-----",
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ",
        "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD",
        "-----END CERTIFICATE-----",
        "-----BEGIN PUBLIC KEY-----",
        "MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=",
        "-----END PUBLIC KEY-----",
        "# TODO: move the signing key into the KMS",
        "// the token bucket refills at 10 req/s",
        "/* password rules: 12+ chars, one digit */",
        "<!-- secret sauce: none -->",
        "| token | description |",
        "| `--password` | read the password from a prompt |",
        "Use `--token-file` instead of `--token` on shared machines.",
        "Run `memoryd note add 'deploys need the VPN'`.",
        "the --token flag is deprecated",
        "SELECT id, email FROM users WHERE password_reset_token = $1",
        "UPDATE api_keys SET revoked_at = now() WHERE id = :id",
        "CREATE INDEX idx_tokens_user ON tokens(user_id);",
        "ALTER TABLE users ADD COLUMN password_changed_at timestamptz;",
        "INSERT INTO settings (key, value) VALUES ('theme', 'dark');",
        "  key: theme",
        "  value: dark",
        "x-request-id: 9c1d2e3f",
        "Content-Security-Policy: default-src 'self'; script-src 'self' 'nonce-r4nd0m'",
        "Cookie: theme=dark; lang=en",
        "Set-Cookie: theme=dark; Path=/; Max-Age=31536000",
        "Accept: application/vnd.github+json",
        "X-GitHub-Api-Version: 2022-11-28",
        "X-RateLimit-Remaining: 4999",
        "Cache-Control: no-store",
        "User-Agent: memoryd/0.1.0 (+https://github.com/acme/memoryd)",
        'WWW-Authenticate: Bearer realm="api", error="invalid_token"',
        "Authorization header missing",
        "authorization: required for write endpoints",
        "BenchmarkTokenize-8   	 1000000	      1043 ns/op",
        "Elapsed: 00:01:23.45",
        "12:30:45.123 [main] INFO  App - started in 2.1s",
        "00:1a:2b:3c:4d:5e",
        "fe80::1%lo0",
        "2001:db8::ff00:42:8329",
        "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16",
        "localhost:5432:app:app:* is how you'd wildcard the password in a pgpass example",
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
        "café naïve résumé — ünïcödé text → fine ✓",
        # code that the first versions of the rules misread
        "url, username, password = recorded",
        "token = Error",
        "type_annotation_token = Name",
        "ProgressToken = str | int",
        "progress_token: ProgressToken",
        'secret = tmp_path / "secret.txt"',
        'userpass = b":".join((to_bytes(username), to_bytes(password)))',
        'token = r"[-!#$%&\'*+.^_`|~0-9a-zA-Z]+"',
        "key_or_pass = r'(?:key|pwd|password|pass|token)'",
        "ident_token = f'([{uni.xid_start}][{uni.xid_continue}]+)'",
        'LAST_PASS = "last_pass"',
        "exports.SOCKS5_NO_ACCEPTABLE_AUTH = SOCKS5_NO_ACCEPTABLE_AUTH;",
        "const token = { type: 'star', value, output: star };",
        "const removeToken = async (tokenKey, opts = {}) => {",
        '    "minipass": "^7.1.2",',
        '    "fs-minipass": "^3.0.3",',
        "coalescing pass: adjacent or overlapping intervals collapse",
        "# Single pass: characters present in the language vocabulary",
        "    secret=secret.secret_value,",
        "    progress_token=progress_token,",
        "    ssl_keyfile_password=ssl_keyfile_password,",
        "existing = {secret: secret for secret in self[filename]}",
        'ROOT_KEY = "__root__"',
        'client_secret="my-client-secret",',
        "auth=(user, password)",
        'password = ":****"',
        '"options": {"baseURL": base_url, "apiKey": "mock-key"},',
    ]
    return lines


HAM: list[str] = _ham()
