"""[Corpus blind-a, written by a helper who saw neither the detector nor any other corpus. Recall before any tuning on it: see bench/README.md ("Redaction by kind").]

Blind test corpus A for a secret redactor.

Written without looking at the redactor.  Every secret-looking value in this
file is generated at import time from a fixed ``random.Random`` seed, with the
shape (prefix, alphabet, length) of the real format.  No literal realistic
credential appears in the source.

Two lists are built at import time:

* ``SECRETS`` -- ``Secret(family, fmt, text, secret, keep)``: ``secret`` is the
  exact substring of ``text`` that must not survive redaction; ``keep`` (if
  non-empty) is a substring that should survive so the text stays readable.
* ``HAM`` -- ``Ham(family, text)``: ordinary lines that must be left byte for
  byte unchanged.

Standard library only, Python 3.11, deterministic.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from collections import Counter
from typing import NamedTuple


class Secret(NamedTuple):
    family: str
    fmt: str
    text: str
    secret: str
    keep: str = ""


class Ham(NamedTuple):
    family: str
    text: str


SECRETS: list[Secret] = []
HAM: list[Ham] = []

R = random.Random(0x5EC12E7A)

# ---------------------------------------------------------------------------
# generators
# ---------------------------------------------------------------------------

LOW = string.ascii_lowercase
UP = string.ascii_uppercase
DIG = string.digits
ALNUM = LOW + UP + DIG
HEXL = "0123456789abcdef"
HEXU = "0123456789ABCDEF"
B64URL = ALNUM + "-_"
B32 = UP + "234567"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def rs(n: int, alpha: str = ALNUM) -> str:
    return "".join(R.choice(alpha) for _ in range(n))


def hx(n: int) -> str:
    return rs(n, HEXL)


def HX(n: int) -> str:
    return rs(n, HEXU)


def digits(n: int) -> str:
    return R.choice("123456789") + rs(n - 1, DIG)


def b64(nbytes: int) -> str:
    return base64.b64encode(R.randbytes(nbytes)).decode()


def b64u(nbytes: int) -> str:
    return base64.urlsafe_b64encode(R.randbytes(nbytes)).decode().rstrip("=")


def b64s(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def b64us(s: str) -> str:
    return base64.urlsafe_b64encode(s.encode()).decode().rstrip("=")


def uid() -> str:
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def ulid() -> str:
    return R.choice("01234567") + rs(25, CROCKFORD)


def ksuid() -> str:
    return rs(27, ALNUM)


def nanoid() -> str:
    return rs(21, B64URL)


def jwt(claims: dict, alg: str = "HS256") -> str:
    head = b64us(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")))
    body = b64us(json.dumps(claims, separators=(",", ":")))
    sig = b64u(32 if alg.startswith("HS") else 256)
    return f"{head}.{body}.{sig}"


WORDS = [
    "summer",
    "winter",
    "autumn",
    "spring",
    "dragon",
    "monkey",
    "tiger",
    "falcon",
    "hunter",
    "purple",
    "sunshine",
    "rocket",
    "orange",
    "coffee",
    "banana",
    "pirate",
    "castle",
    "thunder",
    "matrix",
    "shadow",
    "welcome",
    "galaxy",
    "penguin",
    "cookie",
    "butterfly",
    "mustang",
    "phoenix",
    "raven",
    "maple",
    "harbor",
    "tractor",
    "lobster",
    "cobalt",
    "velvet",
    "jupiter",
    "cactus",
    "biscuit",
    "walnut",
    "meadow",
    "granite",
]
ENVS = ["prod", "staging", "dev", "db", "admin", "ops", "qa"]


def human_pw() -> str:
    """Human-chosen password: words + digits + symbols."""
    w1, w2 = R.sample(WORDS, 2)
    st = R.randrange(6)
    if st == 0:
        return w1.capitalize() + str(R.randint(2015, 2026)) + R.choice("!#*?")
    if st == 1:
        return f"{w1}{R.randint(1, 9)}-{R.choice(ENVS)}"
    if st == 2:
        leet = w1.capitalize().translate(str.maketrans("oaeis", "04315"))
        return f"{leet}{R.choice('&%#!')}{R.randint(1, 99)}"
    if st == 3:
        return w1.capitalize() + w2.capitalize() + str(R.randint(10, 999))
    if st == 4:
        return f"{w1}_{w2}_{R.randint(1000, 9999)}!"
    return f"{w1.capitalize()}.{w2}.{R.randint(10, 99)}"


PW_SYMS = "!#%^*-_=+"


def strong_pw(n: int = 20, syms: str = PW_SYMS) -> str:
    """Password-manager style password (no quotes, backslashes, spaces, ;)."""
    chars = [R.choice(LOW), R.choice(UP), R.choice(DIG), R.choice(syms)]
    chars += [R.choice(ALNUM + syms) for _ in range(n - 4)]
    R.shuffle(chars)
    s = "".join(chars)
    if not s[0].isalnum():
        s = R.choice(LOW) + s[1:]
    return s


def alnum_pw(n: int = 18) -> str:
    return R.choice(LOW + UP) + rs(n - 1)


def url_pw(n: int = 20) -> str:
    return R.choice(ALNUM) + rs(n - 2, ALNUM + "-_.") + R.choice(ALNUM)


def wrap(s: str, w: int = 64) -> str:
    return "\n".join(s[i : i + w] for i in range(0, len(s), w))


def der_b64(prefix: bytes, n: int) -> str:
    return base64.b64encode(prefix + R.randbytes(n)).decode()


RSA_PREFIX = bytes.fromhex("308204a4 02010002 82010100")
PKCS8_PREFIX = bytes.fromhex("308204be020100300d06092a864886f70d0101010500048204a8")
EC_PREFIX = bytes.fromhex("30770201010420")
EC_PKCS8_PREFIX = bytes.fromhex(
    "308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420"
)
ENC_PKCS8_PREFIX = bytes.fromhex("3082051f304906092a864886f70d01050d303c")
OPENSSH_PREFIX = (
    b"openssh-key-v1\x00\x00\x00\x00\x04none\x00\x00\x00\x04none"
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x003\x00\x00\x00"
    b"\x0bssh-ed25519\x00\x00\x00 "
)
CERT_PREFIX = bytes.fromhex("3082030d308201f5a00302010202")


def rsa_pem_body() -> str:
    return wrap(der_b64(RSA_PREFIX, 1180))


def pkcs8_pem_body() -> str:
    return wrap(der_b64(PKCS8_PREFIX, 1190))


def ec_pem_body() -> str:
    return wrap(der_b64(EC_PREFIX, 32 + 2 + 10 + 3 + 66))


def ec_pkcs8_body() -> str:
    return wrap(der_b64(EC_PKCS8_PREFIX, 32 + 2 + 71))


def cert_body(n: int = 780) -> str:
    return wrap(der_b64(CERT_PREFIX, n))


def openssh_body() -> str:
    return wrap(der_b64(OPENSSH_PREFIX, 32 + 200), 70)


def ssh_ed25519_pub() -> str:
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + R.randbytes(32)
    return "ssh-ed25519 " + base64.b64encode(blob).decode()


def ssh_rsa_pub() -> str:
    blob = b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x03\x01\x00\x01\x00\x00\x01\x81\x00" + R.randbytes(
        384
    )
    return "ssh-rsa " + base64.b64encode(blob).decode()


def ssh_ecdsa_pub() -> str:
    blob = (
        b"\x00\x00\x00\x13ecdsa-sha2-nistp256\x00\x00\x00\x08nistp256"
        b"\x00\x00\x00\x41\x04" + R.randbytes(64)
    )
    return "ecdsa-sha2-nistp256 " + base64.b64encode(blob).decode()


# --- provider token shapes --------------------------------------------------


def t_github_pat() -> str:
    return "ghp_" + rs(36)


def t_github_oauth() -> str:
    return "gho_" + rs(36)


def t_github_server() -> str:
    return "ghs_" + rs(36)


def t_github_fine() -> str:
    return "github_pat_11" + rs(20, UP + DIG) + "_" + rs(59)


def t_gitlab_pat() -> str:
    return "glpat-" + rs(20, B64URL)


def t_gitlab_deploy() -> str:
    return "gldt-" + rs(20, B64URL)


def t_npm() -> str:
    return "npm_" + rs(36)


def t_pypi() -> str:
    return "pypi-AgEIcHlwaS5vcmc" + rs(150, B64URL)


def t_aws_akid() -> str:
    return "AKIA" + rs(16, UP + "234567")


def t_aws_secret() -> str:
    return rs(40, ALNUM + "+/")


def t_stripe_live() -> str:
    return "sk_live_51" + rs(97)


def t_stripe_test() -> str:
    return "sk_test_51" + rs(97)


def t_stripe_restricted() -> str:
    return "rk_live_51" + rs(97)


def t_whsec() -> str:
    return "whsec_" + rs(32)


def t_openai() -> str:
    return "sk-proj-" + rs(74, B64URL) + "T3BlbkFJ" + rs(74, B64URL)


def t_anthropic() -> str:
    return "sk-ant-api03-" + rs(93, B64URL) + "AA"


def t_slack_bot() -> str:
    return f"xoxb-{digits(12)}-{digits(13)}-{rs(24)}"


def t_slack_user() -> str:
    return f"xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{hx(32)}"


def t_slack_app() -> str:
    return f"xapp-1-A{rs(10, UP + DIG)}-{digits(13)}-{hx(64)}"


def t_sendgrid() -> str:
    return "SG." + rs(22, B64URL) + "." + rs(43, B64URL)


def t_vault_root() -> str:
    return "hvs." + rs(24)


def t_vault_service() -> str:
    return "hvs.CAESI" + rs(86, B64URL)


def t_hf() -> str:
    return "hf_" + rs(34, LOW + UP)


def t_telegram() -> str:
    return f"{digits(10)}:AA{rs(33, B64URL)}"


def t_discord() -> str:
    return f"{b64us(digits(18))}.{rs(6, B64URL)}.{rs(38, B64URL)}"


def t_heroku() -> str:
    return "HRKU-AA" + rs(58, B64URL)


def t_azure_client_secret() -> str:
    return rs(3, ALNUM) + "8Q~" + rs(34, ALNUM + "~._-")


def t_google_oauth_secret() -> str:
    return "GOCSPX-" + rs(28, B64URL)


def t_google_access() -> str:
    return "ya29.a0" + rs(180, B64URL)


def t_google_refresh() -> str:
    return "1//0" + rs(99, B64URL)


def t_azure_storage_key() -> str:
    return b64(64)


def t_datadog() -> str:
    return hx(32)


def t_quay_robot() -> str:
    return rs(64, UP + DIG)


def t_cratesio() -> str:
    return "cio" + rs(32)


def t_ngrok() -> str:
    return digits(1) + rs(26) + "_" + rs(21)


def t_resend() -> str:
    return "re_" + rs(8) + "_" + rs(24)


def t_dockerhub() -> str:
    return "dckr_pat_" + rs(27, B64URL)


def t_contentful() -> str:
    return "CFPAT-" + rs(43, B64URL)


def t_sonar() -> str:
    return "squ_" + hx(40)


def t_confluent_key() -> str:
    return rs(16, UP + DIG)


def t_confluent_secret() -> str:
    return rs(64, ALNUM + "+/")


def t_atlassian() -> str:
    return "ATATT3xFfGF0" + rs(172, B64URL) + "=" + HX(8)


def S(family: str, fmt: str, text: str, secret: str, keep: str = "") -> None:
    SECRETS.append(Secret(family, fmt, text, secret, keep))


def H(family: str, text: str) -> None:
    HAM.append(Ham(family, text))


# ===========================================================================
# SECRETS
# ===========================================================================

# ---------------------------------------------------------------- 1. sql ---
F = "sql"
p = strong_pw()
S(
    F,
    "pg_create_user_with_password",
    f"CREATE USER app_rw WITH PASSWORD '{p}';",
    p,
    "CREATE USER app_rw",
)
p = human_pw()
S(
    F,
    "pg_create_role_login_password",
    f"CREATE ROLE reporting LOGIN PASSWORD '{p}' VALID UNTIL '2026-01-01';",
    p,
    "CREATE ROLE reporting",
)
p = strong_pw(16)
S(
    F,
    "mysql_create_user_identified_by",
    f"CREATE USER 'svc_orders'@'%' IDENTIFIED BY '{p}';",
    p,
    "IDENTIFIED BY",
)
p = human_pw()
S(
    F,
    "mysql_alter_user_root_identified_by",
    f"mysql> ALTER USER 'root'@'localhost' IDENTIFIED BY '{p}';\n"
    f"Query OK, 0 rows affected (0.02 sec)\n\nmysql> FLUSH PRIVILEGES;",
    p,
    "FLUSH PRIVILEGES;",
)
p = strong_pw(24)
S(
    F,
    "pg_alter_role_with_password",
    f"postgres=# ALTER ROLE postgres WITH PASSWORD '{p}';\nALTER ROLE",
    p,
    "ALTER ROLE postgres",
)
p = human_pw()
S(
    F,
    "mysql_set_password_for",
    f"SET PASSWORD FOR 'bob'@'localhost' = '{p}';",
    p,
    "SET PASSWORD FOR",
)
p = strong_pw(18)
S(
    F,
    "mysql_grant_identified_by",
    f"GRANT ALL PRIVILEGES ON shop.* TO 'shop'@'10.0.%' IDENTIFIED BY '{p}' WITH GRANT OPTION;",
    p,
    "GRANT ALL PRIVILEGES ON shop.*",
)
p = strong_pw(22)
S(
    F,
    "mssql_create_login_with_password",
    f"CREATE LOGIN etl_user WITH PASSWORD = '{p}', CHECK_POLICY = OFF;\nGO\n"
    f"CREATE USER etl_user FOR LOGIN etl_user;",
    p,
    "CREATE LOGIN etl_user",
)
p = strong_pw(16)
S(F, "mssql_alter_login_sa_nstring", f"ALTER LOGIN sa WITH PASSWORD = N'{p}';", p, "ALTER LOGIN sa")
p = alnum_pw(14)
S(
    F,
    "oracle_create_user_unquoted",
    f"SQL> CREATE USER hr_app IDENTIFIED BY {p} DEFAULT TABLESPACE users QUOTA UNLIMITED ON users;\n\n"
    f"User created.",
    p,
    "User created.",
)
p = strong_pw(15, "#_")
S(
    F,
    "oracle_alter_user_quoted",
    f'ALTER USER system IDENTIFIED BY "{p}" ACCOUNT UNLOCK;',
    p,
    "ACCOUNT UNLOCK",
)
p = strong_pw(16, "#_")
S(
    F,
    "oracle_create_database_link",
    f"CREATE DATABASE LINK fin_link CONNECT TO fin_ro IDENTIFIED BY \"{p}\" USING 'FINPDB';",
    p,
    "CREATE DATABASE LINK fin_link",
)
p = strong_pw(20, "#%^*-_=+")
S(
    F,
    "bash_psql_c_alter_role",
    f"$ psql -h localhost -U postgres -c \"ALTER ROLE app WITH PASSWORD '{p}';\"\nALTER ROLE",
    p,
    "psql -h localhost -U postgres",
)
p = human_pw()
S(
    F,
    "bash_mysql_e_create_user",
    f"mysql -uroot -e \"CREATE USER 'wordpress'@'localhost' IDENTIFIED BY '{p}'; "
    f"GRANT ALL ON wordpress.* TO 'wordpress'@'localhost'; FLUSH PRIVILEGES;\"",
    p,
    "mysql -uroot -e",
)
p = strong_pw(20, "#%^*-_=+")
S(
    F,
    "docker_exec_psql_encrypted_password",
    f"docker exec -it pg16 psql -U postgres -c \"CREATE USER grafana WITH ENCRYPTED PASSWORD '{p}'\"",
    p,
    "docker exec -it pg16",
)
p = url_pw(18)
S(
    F,
    "pg_dblink_connstr",
    f"SELECT * FROM dblink('host=10.20.0.15 port=5432 dbname=sales user=ro_sync password={p}',\n"
    f"                     'SELECT id, total FROM orders') AS t(id int, total numeric);",
    p,
    "dblink(",
)
p = strong_pw(20)
S(
    F,
    "pg_fdw_user_mapping_options",
    f"CREATE USER MAPPING FOR app_user SERVER legacy_mysql\n    OPTIONS (username 'fdw', password '{p}');",
    p,
    "CREATE USER MAPPING FOR app_user",
)
p = strong_pw(20)
S(
    F,
    "clickhouse_identified_with_plaintext",
    f"CREATE USER analyst IDENTIFIED WITH plaintext_password BY '{p}' SETTINGS PROFILE 'readonly';",
    p,
    "CREATE USER analyst",
)
p = human_pw()
S(
    F,
    "mysql_identified_with_plugin_by",
    f"ALTER USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY '{p}';",
    p,
    "IDENTIFIED WITH mysql_native_password",
)
p = strong_pw(20)
S(
    F,
    "snowflake_create_user_password_eq",
    f"CREATE USER loader PASSWORD = '{p}' DEFAULT_ROLE = LOADER MUST_CHANGE_PASSWORD = FALSE;",
    p,
    "DEFAULT_ROLE = LOADER",
)
p = strong_pw(16)
S(
    F,
    "redshift_alter_user_password",
    f"ALTER USER etl PASSWORD '{p}' VALID UNTIL '2025-12-31';",
    p,
    "ALTER USER etl",
)
p = strong_pw(20)
S(
    F,
    "python_cursor_execute_create_user",
    f"cur.execute(\"CREATE USER metrics WITH PASSWORD '{p}'\")\nconn.commit()",
    p,
    "cur.execute(",
)
p = strong_pw(20)
S(
    F,
    "mssql_sp_addlinkedsrvlogin",
    f"EXEC sp_addlinkedsrvlogin @rmtsrvname = N'LEGACY01', @useself = N'False',\n"
    f"     @locallogin = NULL, @rmtuser = N'sa', @rmtpassword = N'{p}';",
    p,
    "sp_addlinkedsrvlogin",
)
p = strong_pw(20)
S(
    F,
    "mongo_shell_create_user_pwd",
    f'admin> db.createUser({{ user: "orders", pwd: "{p}", roles: [{{ role: "readWrite", db: "orders" }}] }})\n'
    f"{{ ok: 1 }}",
    p,
    "db.createUser(",
)
p = human_pw()
S(
    F,
    "mongo_change_user_password",
    f'db.getSiblingDB("admin").changeUserPassword("reporting", "{p}")',
    p,
    "changeUserPassword",
)
p = strong_pw(18)
S(
    F,
    "cassandra_create_role_with_password",
    f"cqlsh> CREATE ROLE cass_app WITH PASSWORD = '{p}' AND LOGIN = true;",
    p,
    "CREATE ROLE cass_app",
)
p = strong_pw(20)
S(
    F,
    "kubectl_exec_mysql_e_alter_user",
    f"kubectl exec -n db mysql-0 -- mysql -uroot -e \"ALTER USER 'app'@'%' IDENTIFIED BY '{p}';\"",
    p,
    "kubectl exec -n db mysql-0",
)

# -------------------------------------------------------- 2. code_assign ---
F = "code_assign"
k = hx(32)
S(
    F,
    "py_os_environ_setitem",
    f'os.environ["OPENWEATHER_API_KEY"] = "{k}"',
    k,
    'os.environ["OPENWEATHER_API_KEY"]',
)
t = t_gitlab_pat()
S(
    F,
    "py_subprocess_env_dict",
    f'subprocess.run(["./scripts/deploy.sh", "staging"], env={{**os.environ, "CI_DEPLOY_TOKEN": "{t}"}}, check=True)',
    t,
    "CI_DEPLOY_TOKEN",
)
s = rs(40)
S(
    F,
    "py_config_dict_api_secret",
    f'config = {{"base_url": "https://api.paymo.io/v3", "api_secret": "{s}", "timeout": 30}}',
    s,
    '"api_secret"',
)
s = b64(48)
S(
    F,
    "node_process_env_assign",
    f"process.env.SESSION_SECRET = '{s}';",
    s,
    "process.env.SESSION_SECRET",
)
t = t_vault_root()
S(
    F,
    "go_os_setenv",
    f'\tos.Setenv("VAULT_TOKEN", "{t}")\n\tclient, err := vault.NewClient(vault.DefaultConfig())',
    t,
    'os.Setenv("VAULT_TOKEN"',
)
p = strong_pw(22)
S(
    F,
    "rust_env_set_var",
    f'    std::env::set_var("DATABASE_PASSWORD", "{p}");',
    p,
    "std::env::set_var",
)
p = strong_pw(20)
S(
    F,
    "go_struct_literal_passwd",
    f'cfg := mysql.Config{{\n\tUser:   "orders",\n\tPasswd: "{p}",\n\tNet:    "tcp",\n'
    f'\tAddr:   "127.0.0.1:3306",\n\tDBName: "orders",\n}}',
    p,
    "Passwd:",
)
p = strong_pw(20)
S(
    F,
    "java_datasource_builder_password",
    f'return DataSourceBuilder.create()\n        .url("jdbc:postgresql://db:5432/billing")\n'
    f'        .username("billing")\n        .password("{p}")\n        .build();',
    p,
    ".password(",
)
s = t_google_oauth_secret()
S(
    F,
    "kotlin_const_val_client_secret",
    f'private const val CLIENT_SECRET = "{s}"',
    s,
    "CLIENT_SECRET",
)
p = strong_pw(20)
S(
    F,
    "csharp_sqlconnection_string",
    f'var conn = new SqlConnection("Server=tcp:acme-sql.database.windows.net,1433;Initial Catalog=crm;'
    f'User ID=sqladmin;Password={p};Encrypt=True;");',
    p,
    "new SqlConnection(",
)
t = jwt({"sub": "svc-billing", "iss": "auth.acme.io", "iat": 1718000000, "exp": 1749536000})
S(
    F,
    "go_header_set_bearer",
    f'req.Header.Set("Authorization", "Bearer {t}")',
    t,
    'req.Header.Set("Authorization"',
)
k = rs(32)
S(
    F,
    "py_headers_setitem_api_key",
    f'headers["X-Api-Key"] = "{k}"\nresp = requests.post(url, json=payload, headers=headers)',
    k,
    'headers["X-Api-Key"]',
)
t = hx(40)
S(
    F,
    "js_xhr_setrequestheader_token",
    f'xhr.setRequestHeader("Authorization", "Token {t}");',
    t,
    "setRequestHeader",
)
t = t_openai()
S(
    F,
    "js_fetch_headers_template_bearer",
    "const res = await fetch(`${API}/v1/chat/completions`, {\n"
    f"  headers: {{ Authorization: `Bearer {t}`, 'Content-Type': 'application/json' }},\n"
    "  method: 'POST',\n});",
    t,
    "await fetch(",
)
k = t_datadog()
S(
    F,
    "curl_header_dd_api_key",
    f'curl -X POST "https://api.datadoghq.eu/api/v2/series" \\\n  -H "Content-Type: application/json" \\\n'
    f'  -H "DD-API-KEY: {k}" \\\n  -d @metrics.json',
    k,
    "DD-API-KEY",
)
k = t_stripe_live()
S(F, "ruby_stripe_api_key_assign", f"Stripe.api_key = '{k}'", k, "Stripe.api_key")
k = hx(32) + "-us21"
S(
    F,
    "ruby_env_setitem_or_assign",
    f'ENV["MAILCHIMP_API_KEY"] ||= "{k}"',
    k,
    'ENV["MAILCHIMP_API_KEY"]',
)
p = human_pw()
S(
    F,
    "php_variable_db_password",
    f"$db_host = 'localhost';\n$db_user = 'shop';\n$db_password = '{p}';\n"
    f"$mysqli = new mysqli($db_host, $db_user, $db_password, 'shop');",
    p,
    "$db_password",
)
p = strong_pw(24)
S(
    F,
    "terraform_variable_default",
    f'variable "db_password" {{\n  type      = string\n  sensitive = true\n  default   = "{p}"\n}}',
    p,
    'variable "db_password"',
)
p = strong_pw(24, "!#%^*-_=+")
S(
    F,
    "terraform_resource_master_password",
    f'resource "aws_db_instance" "main" {{\n  engine         = "postgres"\n  instance_class = "db.t3.micro"\n'
    f'  username       = "dbadmin"\n  password       = "{p}"\n}}',
    p,
    'resource "aws_db_instance"',
)
t = "lin_api_" + rs(40)
S(
    F,
    "py_dataclass_field_default",
    f'@dataclass\nclass LinearSettings:\n    team_id: str = "ENG"\n    api_token: str = "{t}"',
    t,
    "class LinearSettings",
)
p = strong_pw(18)
S(
    F,
    "csharp_object_initializer_password",
    f'var smtp = new SmtpClient("smtp.office365.com", 587)\n{{\n    EnableSsl = true,\n'
    f'    Credentials = new NetworkCredential {{ UserName = "alerts@contoso.com", Password = "{p}" }}\n}};',
    p,
    "new SmtpClient(",
)
k = t_anthropic()
S(F, "swift_let_api_key", f'let anthropicKey = "{k}"', k, "let anthropicKey")
p = strong_pw(20, "%^*-_=+")
S(
    F,
    "bash_inline_env_prefix",
    f"ARTIFACTORY_USER=ci ARTIFACTORY_PASSWORD='{p}' ./gradlew publish",
    p,
    "./gradlew publish",
)
p = strong_pw(20)
S(
    F,
    "java_properties_setproperty",
    f'props.setProperty("user", "kafka-client");\nprops.setProperty("password", "{p}");',
    p,
    'props.setProperty("password"',
)
p = human_pw()
S(
    F,
    "py_requests_auth_tuple",
    f'r = requests.get("https://jenkins.internal/api/json", auth=("admin", "{p}"), timeout=10)',
    p,
    "requests.get(",
)
p = strong_pw(20)
S(
    F,
    "js_axios_auth_object",
    f"await axios.get(registryUrl, {{ auth: {{ username: 'ci-bot', password: '{p}' }} }});",
    p,
    "axios.get(",
)
p = strong_pw(16)
S(
    F,
    "java_system_setproperty_keystore",
    f'System.setProperty("javax.net.ssl.keyStorePassword", "{p}");',
    p,
    "javax.net.ssl.keyStorePassword",
)
p = strong_pw(20)
S(
    F,
    "powershell_convertto_securestring",
    f'$secpw = ConvertTo-SecureString "{p}" -AsPlainText -Force\n'
    f'$cred = New-Object System.Management.Automation.PSCredential ("CORP\\svc_deploy", $secpw)',
    p,
    "ConvertTo-SecureString",
)
t = t_npm()
S(
    F,
    "dockerfile_env_instruction",
    f"FROM node:20-alpine\nWORKDIR /app\nENV NPM_TOKEN={t}\nCOPY package*.json .npmrc ./\nRUN npm ci",
    t,
    "FROM node:20-alpine",
)
a, k = t_aws_akid(), t_aws_secret()
S(
    F,
    "py_settings_constant_aws_secret",
    f'AWS_ACCESS_KEY_ID = "{a}"\nAWS_SECRET_ACCESS_KEY = "{k}"\nAWS_STORAGE_BUCKET_NAME = "acme-media"',
    k,
    "AWS_STORAGE_BUCKET_NAME",
)
p = strong_pw(20)
S(
    F,
    "elixir_config_repo_password",
    f'config :my_app, MyApp.Repo,\n  username: "postgres",\n  password: "{p}",\n'
    f'  hostname: "localhost",\n  pool_size: 10',
    p,
    "config :my_app, MyApp.Repo",
)
t = uid()
S(
    F,
    "js_headers_postmark_uuid_token",
    f"  headers: {{ 'Accept': 'application/json', 'X-Postmark-Server-Token': '{t}' }},",
    t,
    "X-Postmark-Server-Token",
)
s = t_azure_client_secret()
S(
    F,
    "go_map_literal_client_secret",
    f'form := url.Values{{\n\t"grant_type":    {{"client_credentials"}},\n\t"client_id":     {{"{uid()}"}},\n'
    f'\t"client_secret": {{"{s}"}},\n}}',
    s,
    "client_credentials",
)
k = t_sendgrid()
S(
    F,
    "python_headers_dict_literal_bearer",
    f'headers = {{"Authorization": "Bearer {k}", "Content-Type": "application/json"}}',
    k,
    '"Content-Type": "application/json"',
)
p = strong_pw(20)
S(
    F,
    "spring_java_config_annotation_default",
    f'@Value("${{mail.password:{p}}}")\nprivate String mailPassword;',
    p,
    "private String mailPassword;",
)
t = t_slack_bot()
S(
    F,
    "typescript_object_literal_token",
    f"export const slackConfig = {{\n  channel: '#deploys',\n  token: '{t}',\n}};",
    t,
    "slackConfig",
)
p = strong_pw(20)
S(
    F,
    "scala_config_case_class",
    f'val db = DbConfig(url = "jdbc:postgresql://db/ledger", user = "ledger", password = "{p}")',
    p,
    "DbConfig(",
)

# ----------------------------------------------------------- 3. cli_args ---
F = "cli_args"
t = t_dockerhub()
S(
    F,
    "docker_login_p_flag",
    f"docker login -u acmebot -p {t} docker.io",
    t,
    "docker login -u acmebot",
)
t = t_quay_robot()
S(
    F,
    "podman_login_password_flag",
    f"podman login quay.io --username 'acme+ci' --password '{t}'",
    t,
    "podman login quay.io",
)
p = alnum_pw(24)
S(
    F,
    "helm_registry_login_password",
    f"helm registry login registry.acme.io --username ci --password {p}",
    p,
    "helm registry login",
)
t = t_github_pat()
S(F, "oras_login_p", f"oras login -u octocat -p {t} ghcr.io", t, "oras login")
t = t_github_pat()
S(
    F,
    "echo_pipe_docker_login_password_stdin",
    f"echo {t} | docker login ghcr.io -u octocat --password-stdin",
    t,
    "--password-stdin",
)
p = alnum_pw(16)
S(
    F,
    "mysql_p_attached",
    f"mysql -h 127.0.0.1 -P 3306 -u root -p{p} shop < dump.sql",
    p,
    "mysql -h 127.0.0.1",
)
p = strong_pw(20)
S(
    F,
    "mongosh_password_flag",
    f"mongosh \"mongodb://db0.internal:27017/admin\" --username admin --password '{p}' --authenticationDatabase admin",
    p,
    "mongosh",
)
p = strong_pw(32)
S(
    F,
    "redis_cli_a",
    f"redis-cli -h cache.internal -p 6380 --tls -a '{p}' INFO replication",
    p,
    "redis-cli",
)
p = strong_pw(20)
S(
    F,
    "pgpassword_env_prefix_psql",
    f"PGPASSWORD='{p}' psql -h db.internal -U app -d app -c '\\dt'",
    p,
    "psql -h db.internal",
)
p = alnum_pw(20)
S(
    F,
    "pgpassword_export_pg_dump",
    f"export PGPASSWORD={p}\npg_dump -h 10.0.3.4 -U backup -Fc inventory > inventory.dump",
    p,
    "pg_dump -h 10.0.3.4",
)
p = strong_pw(18)
S(
    F,
    "sqlcmd_P_flag",
    f'sqlcmd -S localhost,1433 -U sa -P "{p}" -Q "SELECT @@VERSION"',
    p,
    "sqlcmd -S localhost,1433",
)
t = t_npm()
S(
    F,
    "gh_secret_set_body",
    f'gh secret set NPM_TOKEN --repo acme/web --body "{t}"',
    t,
    "gh secret set NPM_TOKEN",
)
p = strong_pw(24, "%^*-_=+")
S(
    F,
    "vault_kv_put_kv_pair",
    f"vault kv put -mount=secret billing/db username=billing password='{p}'",
    p,
    "vault kv put",
)
k = t_sendgrid()
S(
    F,
    "doppler_secrets_set",
    f"doppler secrets set SENDGRID_API_KEY='{k}' --project web --config prd",
    k,
    "doppler secrets set",
)
t = t_sonar()
S(
    F,
    "glab_variable_set_value",
    f"glab variable set SONAR_TOKEN --value '{t}' --masked --protected",
    t,
    "glab variable set",
)
t = t_heroku()
S(
    F,
    "circleci_context_store_secret_stdin",
    f"echo -n '{t}' | circleci context store-secret github acme deploy-ctx HEROKU_API_KEY",
    t,
    "circleci context store-secret",
)
p = strong_pw(24)
S(
    F,
    "aws_secretsmanager_put_secret_string",
    f"aws secretsmanager put-secret-value --secret-id prod/orders/db \\\n"
    f'  --secret-string \'{{"username":"orders","password":"{p}"}}\'',
    p,
    "put-secret-value",
)
p = strong_pw(24)
S(
    F,
    "az_keyvault_secret_set_value",
    f"az keyvault secret set --vault-name kv-acme-prod --name SqlAdminPassword --value '{p}'",
    p,
    "az keyvault secret set",
)
p = strong_pw(20, "%^*-_=+")
S(
    F,
    "gcloud_secrets_versions_add_echo",
    f'echo -n "{p}" | gcloud secrets versions add smtp-password --data-file=-',
    p,
    "gcloud secrets versions add",
)
k = t_openai()
S(
    F,
    "kubectl_create_secret_from_literal",
    f"kubectl create secret generic api-keys -n prod --from-literal=OPENAI_API_KEY={k} "
    f"--dry-run=client -o yaml | kubectl apply -f -",
    k,
    "kubectl create secret generic api-keys",
)
t = t_gitlab_deploy()
S(
    F,
    "kubectl_create_secret_docker_registry",
    f"kubectl create secret docker-registry regcred --docker-server=registry.gitlab.com "
    f"--docker-username=gitlab+deploy-token-12 --docker-password={t}",
    t,
    "docker-registry regcred",
)
s = hx(64)
S(
    F,
    "aws_ssm_put_parameter_value",
    f"aws ssm put-parameter --name /prod/api/jwt-secret --type SecureString --value '{s}' --overwrite",
    s,
    "aws ssm put-parameter",
)
t = t_ngrok()
S(
    F,
    "ngrok_config_add_authtoken",
    f"$ ngrok config add-authtoken {t}\nAuthtoken saved to configuration file: /home/alice/.config/ngrok/ngrok.yml",
    t,
    "ngrok config add-authtoken",
)
cf = b64s(json.dumps({"a": hx(32), "t": uid(), "s": b64(32)}, separators=(",", ":")))
S(
    F,
    "cloudflared_tunnel_run_token",
    f"sudo cloudflared service install {cf}",
    cf,
    "cloudflared service install",
)
t = t_npm()
S(
    F,
    "npm_config_set_authtoken",
    f'npm config set //registry.npmjs.org/:_authToken "{t}"',
    t,
    "npm config set",
)
t = t_pypi()
S(
    F,
    "twine_upload_p",
    f"twine upload --repository pypi -u __token__ -p {t} dist/*",
    t,
    "twine upload",
)
p = strong_pw(20, "%^*-_=+")
S(
    F,
    "poetry_config_http_basic",
    f"poetry config http-basic.internal deploy '{p}'",
    p,
    "poetry config http-basic.internal",
)
t = t_pypi()
S(
    F,
    "poetry_config_pypi_token",
    f"poetry config pypi-token.pypi {t}",
    t,
    "poetry config pypi-token.pypi",
)
t = t_cratesio()
S(
    F,
    "cargo_login_token",
    f"$ cargo login {t}\n       Login token for `crates-io` saved",
    t,
    "cargo login",
)
kk = hx(8)
S(
    F,
    "bundle_config_gem_source_credentials",
    f"bundle config set --global enterprise.contribsys.com {hx(8)}:{kk}",
    kk,
    "bundle config set --global",
)
k = t_openai()
S(
    F,
    "macos_security_add_generic_password",
    f'security add-generic-password -a "$USER" -s openai-api -w "{k}" -U',
    k,
    "security add-generic-password",
)
p = strong_pw(20)
S(
    F,
    "secret_tool_store_echo",
    f"echo -n '{p}' | secret-tool store --label='Nextcloud' service nextcloud username alice",
    p,
    "secret-tool store",
)
p = alnum_pw(18)
S(
    F,
    "windows_cmdkey_pass",
    f"cmdkey /generic:TERMSRV/build-win01 /user:CORP\\builder /pass:{p}",
    p,
    "cmdkey /generic:TERMSRV/build-win01",
)
p = strong_pw(20)
S(
    F,
    "rabbitmqctl_add_user",
    f"rabbitmqctl add_user orders_svc '{p}' && rabbitmqctl set_permissions -p / orders_svc '.*' '.*' '.*'",
    p,
    "rabbitmqctl add_user orders_svc",
)
p = human_pw()
S(
    F,
    "rabbitmqctl_change_password",
    f"sudo rabbitmqctl change_password admin '{p}'",
    p,
    "rabbitmqctl change_password admin",
)
ck, cs = t_confluent_key(), t_confluent_secret()
S(
    F,
    "kafka_sasl_jaas_config_property",
    f"kafka-console-producer.sh --bootstrap-server pkc-x8w3q.eu-west-1.aws.confluent.cloud:9092 --topic orders \\\n"
    f"  --producer-property security.protocol=SASL_SSL --producer-property sasl.mechanism=PLAIN \\\n"
    f"  --producer-property 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
    f'required username="{ck}" password="{cs}";\'',
    cs,
    "kafka-console-producer.sh",
)
a, s = rs(20, UP + DIG), rs(40, ALNUM)
S(F, "minio_mc_alias_set", f"mc alias set prod https://s3.acme.io {a} {s}", s, "mc alias set prod")
p = strong_pw(18)
S(
    F,
    "rclone_config_create_pass",
    f"rclone config create nas sftp host 192.168.1.20 user alice pass '{p}' --obscure",
    p,
    "rclone config create",
)
a, s = t_aws_akid(), t_aws_secret()
S(
    F,
    "s3cmd_secret_key_flag",
    f"s3cmd --access_key={a} --secret_key={s} ls s3://acme-backups",
    s,
    "s3cmd",
)
s = t_aws_secret()
S(
    F,
    "aws_configure_set_secret",
    f"aws configure set aws_secret_access_key {s} --profile staging",
    s,
    "aws configure set",
)
p = human_pw()
S(F, "htpasswd_batch_b", f"htpasswd -bc /etc/nginx/.htpasswd admin '{p}'", p, "htpasswd -bc")
p = strong_pw(20, "*-_=+")
S(
    F,
    "curl_u_user_colon_pass",
    f"curl -u 'elastic:{p}' -k 'https://localhost:9200/_cluster/health?pretty'",
    p,
    "_cluster/health",
)
p = human_pw()
S(
    F,
    "sshpass_p",
    f"sshpass -p '{p}' ssh -o StrictHostKeyChecking=no pi@192.168.1.42 'sudo reboot'",
    p,
    "sshpass",
)
p = alnum_pw(16)
S(
    F,
    "openssl_passout_pass",
    f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout pass:{p}",
    p,
    "openssl pkcs12 -export",
)
p = strong_pw(20)
S(
    F,
    "openssl_enc_pass_arg",
    f"openssl enc -aes-256-cbc -pbkdf2 -salt -in backup.tar -out backup.tar.enc -pass 'pass:{p}'",
    p,
    "openssl enc -aes-256-cbc",
)
p = strong_pw(18)
S(
    F,
    "wget_user_password",
    f"wget --user=deploy --password='{p}' https://nexus.acme.io/repository/raw/releases/app-2.3.1.tgz",
    p,
    "wget --user=deploy",
)
s = hx(128)
S(
    F,
    "heroku_config_set",
    f"heroku config:set SECRET_KEY_BASE={s} -a acme-api",
    s,
    "heroku config:set",
)
k = t_stripe_live()
S(
    F,
    "fly_secrets_set",
    f"fly secrets set STRIPE_SECRET_KEY={k} -a acme-billing",
    k,
    "fly secrets set",
)
s = b64(32)
S(
    F,
    "vercel_env_add_echo",
    f"echo '{s}' | vercel env add NEXTAUTH_SECRET production",
    s,
    "vercel env add",
)
t = t_contentful()
S(
    F,
    "netlify_env_set",
    f"netlify env:set CONTENTFUL_MANAGEMENT_TOKEN {t} --context production",
    t,
    "netlify env:set",
)
t = t_resend()
S(
    F,
    "supabase_secrets_set",
    f"supabase secrets set RESEND_API_KEY={t} --project-ref {rs(20, LOW)}",
    t,
    "supabase secrets set",
)
k = t_anthropic()
S(
    F,
    "wrangler_secret_put_echo",
    f'echo "{k}" | npx wrangler secret put ANTHROPIC_API_KEY',
    k,
    "wrangler secret put",
)
p = alnum_pw(20)
S(
    F,
    "docker_run_env_password",
    f"docker run -d --name pg -e POSTGRES_PASSWORD={p} -p 5432:5432 postgres:16",
    p,
    "docker run -d --name pg",
)
p = alnum_pw(14)
S(
    F,
    "keytool_storepass",
    f"keytool -importkeystore -srckeystore bundle.p12 -srcstoretype PKCS12 -srcstorepass {p} "
    f"-destkeystore app.jks -deststorepass {p}",
    p,
    "keytool -importkeystore",
)
s = t_azure_client_secret()
S(
    F,
    "az_login_service_principal_p",
    f"az login --service-principal -u {uid()} -p '{s}' --tenant {uid()}",
    s,
    "az login --service-principal",
)
p = strong_pw(20)
S(
    F,
    "influx_setup_password",
    f"influx setup --org acme --bucket metrics --username admin --password '{p}' --force",
    p,
    "influx setup",
)
p = strong_pw(16)
S(
    F,
    "mosquitto_pub_P",
    f"mosquitto_pub -h mqtt.local -u sensor01 -P '{p}' -t home/livingroom/temp -m 21.5",
    p,
    "mosquitto_pub",
)
p = strong_pw(20)
S(
    F,
    "ldapsearch_w",
    f'ldapsearch -x -H ldaps://ldap.corp.acme.com -D "cn=svc-jenkins,ou=svc,dc=acme,dc=com" '
    f'-w \'{p}\' -b "dc=acme,dc=com" "(uid=alice)"',
    p,
    "ldapsearch -x",
)
p = human_pw()
S(
    F,
    "smbclient_user_percent_pass",
    f"smbclient //fileserver/share -U 'CORP/alice%{p}' -c 'ls'",
    p,
    "smbclient //fileserver/share",
)
p = strong_pw(16)
S(
    F,
    "xfreerdp_p_flag",
    f"xfreerdp /v:10.1.0.25 /u:Administrator /p:'{p}' /cert:ignore",
    p,
    "xfreerdp /v:10.1.0.25",
)
p = alnum_pw(14)
S(
    F,
    "windows_net_use_password",
    f"net use Z: \\\\nas01\\projects {p} /user:CORP\\alice /persistent:yes",
    p,
    "net use Z:",
)
p = alnum_pw(20)
S(
    F,
    "etcdctl_user_root_pass",
    f"etcdctl --endpoints=https://10.0.0.11:2379 --user root:{p} get /registry --prefix --keys-only",
    p,
    "etcdctl --endpoints",
)
t = uid()
S(F, "consul_token_flag_uuid", f"consul kv get -token={t} config/app/db", t, "consul kv get")
t = uid()
S(F, "snyk_auth_uuid_token", f"snyk auth {t}", t, "snyk auth")
p = human_pw()
S(
    F,
    "mysqladmin_password_subcommand",
    f"mysqladmin -u root password '{p}'",
    p,
    "mysqladmin -u root password",
)
p = strong_pw(16)
S(
    F,
    "ansible_extra_vars_become_pass",
    f"ansible-playbook site.yml -i inventory/prod -e 'ansible_become_pass={p}'",
    p,
    "ansible-playbook site.yml",
)
p = alnum_pw(24)
S(
    F,
    "helm_set_password",
    f"helm install redis bitnami/redis --set auth.password={p} -n cache",
    p,
    "helm install redis",
)
p = strong_pw(20)
S(
    F,
    "terraform_apply_var",
    f"terraform apply -var 'db_password={p}' -auto-approve",
    p,
    "terraform apply",
)
t = t_github_pat()
S(
    F,
    "docker_build_arg_token",
    f"docker build --build-arg GITHUB_TOKEN={t} -t acme/api:dev .",
    t,
    "docker build",
)
k = t_azure_storage_key()
S(
    F,
    "az_storage_account_key_flag",
    f"az storage blob upload --account-name acmeassets --account-key {k} -c public -f logo.png -n logo.png",
    k,
    "az storage blob upload",
)
t = t_github_fine()
S(
    F,
    "gh_auth_login_with_token_echo",
    f"echo {t} | gh auth login --with-token",
    t,
    "gh auth login --with-token",
)
t = t_hf()
S(
    F,
    "huggingface_cli_login_token",
    f"huggingface-cli login --token {t} --add-to-git-credential",
    t,
    "huggingface-cli login",
)
p = strong_pw(20)
S(
    F,
    "mongodump_password_flag",
    f"mongodump --host rs0/db1:27017,db2:27017 -u backup -p '{p}' --authenticationDatabase admin --gzip --archive=/backups/orders.gz",
    p,
    "mongodump",
)
t = t_vault_root()
S(F, "vault_login_token_arg", f"vault login {t}", t, "vault login")

# ---------------------------------------------------- 4. positional_call ---
F = "positional_call"
sid, tok = "AC" + hx(32), hx(32)
S(
    F,
    "twilio_client_sid_token",
    f'from twilio.rest import Client\nclient = Client("{sid}", "{tok}")',
    tok,
    "from twilio.rest import Client",
)
app_pw = " ".join(rs(4, LOW) for _ in range(4))
S(
    F,
    "smtplib_login_app_password",
    f'with smtplib.SMTP("smtp.gmail.com", 587) as s:\n    s.starttls()\n'
    f'    s.login("ops.alerts@gmail.com", "{app_pw}")\n    s.send_message(msg)',
    app_pw,
    "s.starttls()",
)
p = strong_pw(18)
S(
    F,
    "pymysql_connect_positional",
    f'conn = pymysql.connect("db.internal", "report", "{p}", "analytics")',
    p,
    "pymysql.connect(",
)
p = url_pw(20)
S(
    F,
    "psycopg2_connect_dsn_string",
    f'conn = psycopg2.connect("host=localhost dbname=app user=app password={p}")',
    p,
    "psycopg2.connect(",
)
s = b64u(32)
S(
    F,
    "pyjwt_encode_secret_positional",
    f'token = jwt.encode({{"sub": str(user.id), "exp": exp}}, "{s}", algorithm="HS256")',
    s,
    "jwt.encode(",
)
s = rs(48)
S(
    F,
    "node_jsonwebtoken_sign",
    f"const token = jwt.sign({{ uid: user.id }}, '{s}', {{ expiresIn: '7d' }});",
    s,
    "jwt.sign(",
)
k = t_stripe_test()
S(
    F,
    "node_new_stripe_key",
    f"const stripe = new Stripe('{k}', {{ apiVersion: '2024-06-20' }});",
    k,
    "new Stripe(",
)
p = strong_pw(28)
S(
    F,
    "py_redis_positional_password",
    f'r = redis.Redis("cache.internal", 6379, 0, "{p}")',
    p,
    "redis.Redis(",
)
p = strong_pw(18)
S(
    F,
    "python_ldap_simple_bind_s",
    f'l = ldap.initialize("ldaps://ldap.acme.com")\nl.simple_bind_s("cn=admin,dc=acme,dc=com", "{p}")',
    p,
    "simple_bind_s",
)
p = human_pw()
S(
    F,
    "ftplib_login",
    f'ftp = FTP("ftp.partner-edi.com")\nftp.login("acme_edi", "{p}")\nftp.cwd("/outbound")',
    p,
    "ftp.login(",
)
s = rs(40)
S(
    F,
    "python_hmac_new_key_bytes",
    f'sig = hmac.new(b"{s}", body, hashlib.sha256).hexdigest()',
    s,
    "hmac.new(",
)
w = t_whsec()
S(
    F,
    "node_crypto_createhmac",
    f"const sig = crypto.createHmac('sha256', '{w}').update(rawBody).digest('hex');",
    w,
    "crypto.createHmac(",
)
t = t_github_pat()
S(F, "octokit_auth_option", f'const octokit = new Octokit({{ auth: "{t}" }});', t, "new Octokit(")
p = strong_pw(18)
S(
    F,
    "paramiko_connect_positional",
    f"ssh = paramiko.SSHClient()\nssh.set_missing_host_key_policy(paramiko.AutoAddPolicy())\n"
    f'ssh.connect("10.0.4.17", 22, "deploy", "{p}")',
    p,
    "ssh.connect(",
)
a, s = t_aws_akid(), t_aws_secret()
S(
    F,
    "boto3_session_positional_keys",
    f'session = boto3.Session("{a}", "{s}", region_name="eu-central-1")',
    s,
    "boto3.Session(",
)
a, s = t_aws_akid(), t_aws_secret()
S(
    F,
    "aws_sdk_js_credentials_positional",
    f"AWS.config.credentials = new AWS.Credentials('{a}', '{s}');",
    s,
    "new AWS.Credentials(",
)
t = t_atlassian()
S(
    F,
    "requests_httpbasicauth",
    f'auth = HTTPBasicAuth("svc-confluence@acme.io", "{t}")',
    t,
    "HTTPBasicAuth(",
)
t = t_github_pat()
S(F, "pygithub_github_token", f'g = Github("{t}")\nrepo = g.get_repo("acme/web")', t, "g.get_repo(")
t = t_slack_bot()
S(F, "slack_webclient_token", f'client = WebClient("{t}")', t, "WebClient(")
k = t_sendgrid()
S(F, "sendgrid_client_key", f'sg = SendGridAPIClient("{k}")', k, "SendGridAPIClient(")
t = t_telegram()
S(
    F,
    "telegram_application_builder_token",
    f'app = ApplicationBuilder().token("{t}").build()',
    t,
    "ApplicationBuilder()",
)
t = t_discord()
S(F, "discord_bot_run_token", f'bot.run("{t}")', t, "bot.run(")
ck_, cs_, at_, ats_ = rs(25), rs(50), digits(19) + "-" + rs(30), rs(45)
S(
    F,
    "tweepy_oauth1_positional",
    f'auth = tweepy.OAuth1UserHandler(\n    "{ck_}",\n    "{cs_}",\n    "{at_}",\n    "{ats_}",\n)',
    cs_,
    "tweepy.OAuth1UserHandler(",
)
p = strong_pw(20)
S(
    F,
    "java_drivermanager_getconnection",
    f'Connection c = DriverManager.getConnection("jdbc:postgresql://db:5432/ledger", "ledger", "{p}");',
    p,
    "DriverManager.getConnection(",
)
p = rs(16, LOW + DIG)
S(
    F,
    "imaplib_login",
    f'M = imaplib.IMAP4_SSL("imap.fastmail.com")\nM.login("alice@fastmail.com", "{p}")',
    p,
    "M.login(",
)
p = strong_pw(18)
S(
    F,
    "ldap3_connection_positional",
    f'conn = Connection(server, "CN=svc_ldap,OU=Service,DC=corp,DC=local", "{p}", auto_bind=True)',
    p,
    "auto_bind=True",
)
p = strong_pw(16)
S(
    F,
    "pywinrm_session_auth_tuple",
    f"s = winrm.Session('win-build01', auth=('Administrator', '{p}'), transport='ntlm')",
    p,
    "winrm.Session(",
)
p = strong_pw(16)
S(
    F,
    "ruby_net_ssh_start",
    f"Net::SSH.start('10.0.0.8', 'deploy', password: '{p}') do |ssh|\n  puts ssh.exec!('uptime')\nend",
    p,
    "Net::SSH.start(",
)
p = strong_pw(18)
S(
    F,
    "php_pdo_constructor",
    f'$pdo = new PDO("mysql:host=127.0.0.1;dbname=shop;charset=utf8mb4", "shop", "{p}");',
    p,
    "new PDO(",
)
p = human_pw()
S(
    F,
    "php_mysqli_connect_positional",
    f'$link = mysqli_connect("localhost", "wp_user", "{p}", "wordpress");',
    p,
    "mysqli_connect(",
)
p = rs(43, B64URL)
S(
    F,
    "neo4j_driver_auth_tuple",
    f'driver = GraphDatabase.driver("neo4j+s://{hx(8)}.databases.neo4j.io", auth=("neo4j", "{p}"))',
    p,
    "GraphDatabase.driver(",
)
fk = base64.urlsafe_b64encode(R.randbytes(32)).decode()
S(F, "fernet_key_bytes_literal", f'f = Fernet(b"{fk}")\ntoken = f.encrypt(data)', fk, "Fernet(")
p = strong_pw(20)
S(
    F,
    "pika_plaincredentials",
    f'creds = pika.PlainCredentials("orders", "{p}")',
    p,
    "pika.PlainCredentials(",
)
ak = rs(32)
S(F, "pycryptodome_aes_new_key", f'cipher = AES.new(b"{ak}", AES.MODE_GCM)', ak, "AES.MODE_GCM")
p = rs(16, LOW)
S(
    F,
    "javamail_password_authentication",
    f'return new PasswordAuthentication("noreply@acme.io", "{p}");',
    p,
    "new PasswordAuthentication(",
)
p = strong_pw(18)
S(
    F,
    "go_smtp_plainauth",
    f'auth := smtp.PlainAuth("", "alerts@acme.io", "{p}", "smtp.mailgun.org")',
    p,
    "smtp.PlainAuth(",
)
k = "key-" + hx(32)
S(
    F,
    "mailgun_client_positional",
    f"const mg = mailgun.client({{ username: 'api', key: '{k}', url: 'https://api.eu.mailgun.net' }});",
    k,
    "mailgun.client(",
)
p = strong_pw(20)
S(
    F,
    "sqlalchemy_url_create_positional",
    f'url = URL.create("postgresql+psycopg", "app", "{p}", "db.internal", 5432, "app")',
    p,
    "URL.create(",
)
p = strong_pw(16)
S(
    F,
    "csharp_networkcredential_positional",
    f'client.Credentials = new NetworkCredential("svc_backup", "{p}", "CORP");',
    p,
    "new NetworkCredential(",
)

# ------------------------------------------------- 5. interactive_output ---
F = "interactive_output"
a, s = t_aws_akid(), t_aws_secret()
S(
    F,
    "aws_configure_prompt_secret",
    f"$ aws configure --profile staging\nAWS Access Key ID [None]: {a}\nAWS Secret Access Key [None]: {s}\n"
    f"Default region name [None]: eu-west-1\nDefault output format [None]: json",
    s,
    "Default region name",
)
keys = [b64(33) for _ in range(5)]
rt = t_vault_root()
vault_init = "\n".join(f"Unseal Key {i + 1}: {k_}" for i, k_ in enumerate(keys))
S(
    F,
    "vault_operator_init_unseal_key",
    f"$ vault operator init -key-shares=5 -key-threshold=3\n{vault_init}\n\nInitial Root Token: {rt}",
    keys[1],
    "vault operator init",
)
keys2 = [b64(33) for _ in range(3)]
rt2 = t_vault_root()
S(
    F,
    "vault_operator_init_root_token",
    "Unseal Key 1: "
    + keys2[0]
    + "\nUnseal Key 2: "
    + keys2[1]
    + "\nUnseal Key 3: "
    + keys2[2]
    + f"\n\nInitial Root Token: {rt2}\n\nVault initialized with 3 key shares and a key threshold of 2.",
    rt2,
    "Vault initialized with 3 key shares",
)
t = t_github_oauth()
S(F, "gh_auth_token_output", f"$ gh auth token\n{t}", t, "gh auth token")
t = t_github_oauth()
S(
    F,
    "gh_auth_status_show_token",
    f"github.com\n  ✓ Logged in to github.com account alice (keyring)\n  - Active account: true\n"
    f"  - Git operations protocol: https\n  - Token: {t}\n  - Token scopes: 'gist', 'read:org', 'repo', 'workflow'",
    t,
    "Logged in to github.com",
)
s = t_azure_client_secret()
S(
    F,
    "az_ad_sp_create_for_rbac_json",
    "$ az ad sp create-for-rbac --name gh-actions-deployer --role contributor --scopes /subscriptions/"
    + uid()
    + "\n"
    + json.dumps(
        {"appId": uid(), "displayName": "gh-actions-deployer", "password": s, "tenant": uid()},
        indent=2,
    ),
    s,
    "create-for-rbac",
)
p = strong_pw(24)
S(
    F,
    "kubectl_get_secret_base64_decode",
    f"$ kubectl get secret db-credentials -n prod -o jsonpath='{{.data.password}}' | base64 -d\n{p}",
    p,
    "kubectl get secret db-credentials",
)
t = t_heroku()
S(
    F,
    "heroku_auth_token_output",
    f"$ heroku auth:token\n ›   Warning: token will expire 04/12/2026\n ›   Use heroku authorizations:create to generate a long-term token\n{t}",
    t,
    "heroku auth:token",
)
s = hx(128)
S(F, "rails_secret_output", f"$ bin/rails secret\n{s}", s, "bin/rails secret")
s = hx(64)
S(
    F,
    "openssl_rand_hex_output_then_assign",
    f"$ openssl rand -hex 32\n{s}\n\nok, put that in JWT_SIGNING_KEY for staging",
    s,
    "openssl rand -hex 32",
)
s = b64(32)
S(F, "openssl_rand_base64_output", f"$ openssl rand -base64 32\n{s}", s, "openssl rand -base64 32")
h = "$apr1$" + rs(8, ALNUM + "./") + "$" + rs(22, ALNUM + "./")
S(
    F,
    "htpasswd_nb_output_apr1_hash",
    f"$ htpasswd -n admin\nNew password: \nRe-type new password: \nadmin:{h}",
    h,
    "htpasswd -n admin",
)
swm = "SWMTKN-1-" + rs(50, LOW + DIG) + "-" + rs(25, LOW + DIG)
S(
    F,
    "docker_swarm_join_token_output",
    f"$ docker swarm join-token worker\nTo add a worker to this swarm, run the following command:\n\n"
    f"    docker swarm join --token {swm} 192.168.65.3:2377",
    swm,
    "docker swarm join-token worker",
)
mp = rs(12, ALNUM + "#>:,_<%&()!?")
S(
    F,
    "mysql_temporary_password_log",
    f"2024-03-14T09:21:07.123456Z 6 [Note] [MY-010454] [Server] A temporary password is generated for root@localhost: {mp}",
    mp,
    "A temporary password is generated for root@localhost",
)
jp = hx(32)
S(
    F,
    "jenkins_initial_admin_password_cat",
    f"$ sudo cat /var/lib/jenkins/secrets/initialAdminPassword\n{jp}",
    jp,
    "initialAdminPassword",
)
jp = hx(32)
S(
    F,
    "jenkins_setup_wizard_log",
    "*************************************************************\n\nJenkins initial setup is required. "
    "An admin user has been created and a password generated.\nPlease use the following password to proceed to installation:\n\n"
    f"{jp}\n\nThis may also be found at: /var/jenkins_home/secrets/initialAdminPassword",
    jp,
    "Jenkins initial setup is required.",
)
ap = rs(16, ALNUM + "-")
S(
    F,
    "argocd_admin_initial_password",
    f"$ argocd admin initial-password -n argocd\n{ap}\n\n This password must be only used for first time login. "
    f"We strongly recommend you update the password using `argocd account update-password`.",
    ap,
    "argocd admin initial-password",
)
gp = rs(40)
S(
    F,
    "grafana_admin_password_jsonpath",
    f'$ kubectl get secret --namespace monitoring grafana -o jsonpath="{{.data.admin-password}}" | base64 --decode ; echo\n{gp}',
    gp,
    "kubectl get secret --namespace monitoring grafana",
)
glp = b64(32)
S(
    F,
    "gitlab_initial_root_password_file",
    "$ sudo cat /etc/gitlab/initial_root_password\n# WARNING: This value is valid only in the following conditions\n"
    "#          1. If provided manually (either via `GITLAB_ROOT_PASSWORD` environment variable or via `gitlab_rails['initial_root_password']` setting in `gitlab.rb`, it was provided before database was seeded for the first time (usually, the first reconfigure run).\n"
    f"\nPassword: {glp}\n\n# NOTE: This file will be automatically deleted in the first reconfigure run after 24 hours.",
    glp,
    "initial_root_password",
)
ep = rs(20, ALNUM + "*_=+-")
S(
    F,
    "elasticsearch_reset_password_output",
    "$ bin/elasticsearch-reset-password -u elastic\nThis tool will reset the password of the [elastic] user to an autogenerated value.\n"
    "The password will be printed in the console.\nPlease confirm that you would like to continue [y/N]y\n\n\n"
    f"Password for the [elastic] user successfully reset.\nNew value: {ep}",
    ep,
    "elasticsearch-reset-password",
)
kt = rs(6, LOW + DIG) + "." + rs(16, LOW + DIG)
S(
    F,
    "kubeadm_join_command_token",
    f"$ kubeadm token create --print-join-command\nkubeadm join 10.0.0.10:6443 --token {kt} "
    f"--discovery-token-ca-cert-hash sha256:{hx(64)}",
    kt,
    "kubeadm join 10.0.0.10:6443",
)
k3 = f"K10{hx(64)}::server:{hx(32)}"
S(
    F,
    "k3s_node_token_cat",
    f"$ sudo cat /var/lib/rancher/k3s/server/node-token\n{k3}",
    k3,
    "/var/lib/rancher/k3s/server/node-token",
)
t = t_google_access()
S(
    F,
    "gcloud_print_access_token",
    f"$ gcloud auth print-access-token\n{t}",
    t,
    "gcloud auth print-access-token",
)
sts_s, sts_t = t_aws_secret(), "IQoJb3JpZ2luX2VjE" + rs(300, ALNUM + "+/")
S(
    F,
    "aws_sts_get_session_token_json",
    "$ aws sts get-session-token --duration-seconds 3600\n"
    + json.dumps(
        {
            "Credentials": {
                "AccessKeyId": "ASIA" + rs(16, UP + "234567"),
                "SecretAccessKey": sts_s,
                "SessionToken": sts_t,
                "Expiration": "2024-06-12T18:04:11+00:00",
            }
        },
        indent=4,
    ),
    sts_s,
    "get-session-token",
)
st2 = "IQoJb3JpZ2luX2VjE" + rs(300, ALNUM + "+/")
S(
    F,
    "aws_configure_export_credentials_env",
    f"$ aws configure export-credentials --profile sso-admin --format env\nexport AWS_ACCESS_KEY_ID=ASIA{rs(16, UP + '234567')}\n"
    f"export AWS_SECRET_ACCESS_KEY={t_aws_secret()}\nexport AWS_SESSION_TOKEN={st2}",
    st2,
    "aws configure export-credentials",
)
wh = "whsec_" + hx(64)
S(
    F,
    "stripe_listen_signing_secret",
    f"$ stripe listen --forward-to localhost:4242/webhook\n> Ready! You are using Stripe API Version [2024-06-20]. "
    f"Your webhook signing secret is {wh} (^C to quit)",
    wh,
    "stripe listen",
)
ft = t_google_refresh()
S(
    F,
    "firebase_login_ci_token",
    f'✔  Success! Use this token to login on a CI server:\n\n{ft}\n\nExample: firebase deploy --token "$FIREBASE_TOKEN"',
    ft,
    "Use this token to login on a CI server",
)
vt = t_vault_service()
S(
    F,
    "vault_token_create_table",
    f"$ vault token create -policy=ci -ttl=768h\nKey                  Value\n---                  -----\n"
    f"token                {vt}\ntoken_accessor       {rs(24)}\ntoken_duration       768h\n"
    f'token_renewable      true\ntoken_policies       ["ci" "default"]',
    vt,
    "vault token create",
)
nt = t_npm()
S(
    F,
    "npm_token_create_table",
    "$ npm token create --read-only\n┌────────────────┬──────────────────────────────────────────┐\n"
    f"│ token          │ {nt} │\n├────────────────┼──────────────────────────────────────────┤\n"
    "│ readonly       │ true                                     │\n└────────────────┴──────────────────────────────────────────┘",
    nt,
    "npm token create",
)
sr = jwt({"iss": "supabase-demo", "role": "service_role", "exp": 1983812996})
S(
    F,
    "supabase_status_service_role_key",
    f"$ supabase status\n         API URL: http://127.0.0.1:54321\n          DB URL: postgresql://postgres:postgres@127.0.0.1:54322/postgres\n"
    f"service_role key: {sr}",
    sr,
    "supabase status",
)
wg = b64(32)
S(F, "wg_genkey_output", f"$ wg genkey\n{wg}", wg, "wg genkey")
bp = strong_pw(24)
S(F, "bitwarden_cli_get_password", f"$ bw get password github.com\n{bp}", bp, "bw get password")
tp = strong_pw(24)
S(
    F,
    "terraform_output_raw",
    f"$ terraform output -raw db_password\n{tp}",
    tp,
    "terraform output -raw",
)
pp = human_pw()
S(
    F,
    "pulumi_config_show_secrets_table",
    f"$ pulumi config --show-secrets\nKEY              VALUE\naws:region       us-west-2\ndbPassword       {pp}\n"
    f"instanceType     t3.small",
    pp,
    "pulumi config --show-secrets",
)
rp = strong_pw(32)
S(
    F,
    "redis_config_get_requirepass",
    f'127.0.0.1:6379> CONFIG GET requirepass\n1) "requirepass"\n2) "{rp}"',
    rp,
    "CONFIG GET requirepass",
)
dt = t_dockerhub()
S(
    F,
    "docker_credential_helper_get",
    "$ echo https://index.docker.io/v1/ | docker-credential-desktop get\n"
    + json.dumps(
        {"ServerURL": "https://index.docker.io/v1/", "Username": "alice", "Secret": dt},
        separators=(",", ":"),
    ),
    dt,
    "docker-credential-desktop get",
)
gt = t_github_oauth()
S(
    F,
    "git_credential_fill_output",
    f"$ printf 'protocol=https\\nhost=github.com\\n' | git credential fill\nprotocol=https\nhost=github.com\n"
    f"username=alice\npassword={gt}",
    gt,
    "git credential fill",
)
sk1 = t_azure_storage_key()
S(
    F,
    "az_storage_account_keys_list_json",
    "$ az storage account keys list -g rg-prod -n acmeassets\n"
    + json.dumps(
        [
            {
                "creationTime": "2024-02-11T10:22:31.552134+00:00",
                "keyName": "key1",
                "permissions": "FULL",
                "value": sk1,
            }
        ],
        indent=2,
    ),
    sk1,
    "az storage account keys list",
)
at = jwt(
    {
        "aud": "https://management.core.windows.net/",
        "iss": f"https://sts.windows.net/{uid()}/",
        "oid": uid(),
        "upn": "alice@contoso.com",
    },
    "RS256",
)
S(
    F,
    "az_account_get_access_token_json",
    '$ az account get-access-token\n{\n  "accessToken": "'
    + at
    + '",\n  "expiresOn": "2024-06-12 19:31:07.000000",\n'
    '  "tokenType": "Bearer"\n}',
    at,
    "az account get-access-token",
)
kt2 = jwt(
    {"aud": ["https://kubernetes.default.svc"], "sub": "system:serviceaccount:ci:deployer"}, "RS256"
)
S(
    F,
    "kubectl_create_token_output",
    f"$ kubectl create token deployer -n ci --duration=24h\n{kt2}",
    kt2,
    "kubectl create token deployer",
)
vtk = t_vault_root()
S(F, "cat_vault_token_file", f"$ cat ~/.vault-token\n{vtk}", vtk, "cat ~/.vault-token")
opv = strong_pw(28)
S(F, "op_read_output", f'$ op read "op://Private/Prod Postgres/password"\n{opv}', opv, "op read")

# ------------------------------------------------------- 6. token_shapes ---
F = "token_shapes"
t = "dp.st.prd." + rs(40)
S(F, "doppler_service_token_env", f"export DOPPLER_TOKEN={t}", t, "export DOPPLER_TOKEN=")
t = "lin_api_" + rs(40)
S(F, "linear_api_key_dotenv", f"LINEAR_API_KEY={t}", t, "LINEAR_API_KEY=")
t = "secret_" + rs(43)
S(
    F,
    "notion_legacy_secret_chat",
    f"here's the notion integration token: {t} -- it has access to the Roadmap db",
    t,
    "notion integration token",
)
t = "ntn_" + digits(11) + rs(35)
S(F, "notion_ntn_token_env", f'NOTION_TOKEN="{t}"', t, "NOTION_TOKEN=")
t = "pat" + rs(14) + "." + hx(64)
S(
    F,
    "airtable_pat_log",
    f"[airtable-sync] GET https://api.airtable.com/v0/appXk2/Tasks auth=Bearer {t} -> 200 (312ms)",
    t,
    "[airtable-sync]",
)
t = "PMAK-" + hx(24) + "-" + hx(34)
S(F, "postman_api_key_cli", f"postman login --with-api-key {t}", t, "postman login --with-api-key")
t = "pul-" + hx(40)
S(F, "pulumi_access_token_env", f"export PULUMI_ACCESS_TOKEN={t}", t, "PULUMI_ACCESS_TOKEN")
t = rs(14) + ".atlasv1." + rs(67)
S(F, "terraform_cloud_token_env", f"TF_TOKEN_app_terraform_io={t}", t, "TF_TOKEN_app_terraform_io=")
t = "shpat_" + hx(32)
S(
    F,
    "shopify_admin_token_error",
    f"ShopifyAPI::Errors::HttpResponseError: [401] Invalid API key or access token (unrecognized login or wrong password) token={t}",
    t,
    "ShopifyAPI::Errors::HttpResponseError",
)
t = "shpss_" + hx(32)
S(F, "shopify_shared_secret_dotenv", f"SHOPIFY_API_SECRET={t}", t, "SHOPIFY_API_SECRET=")
t = rs(24)
S(F, "vercel_token_ci_flag", f"npx vercel deploy --prod --token={t} --yes", t, "npx vercel deploy")
t = "nfp_" + rs(36)
S(
    F,
    "netlify_pat_env",
    f"NETLIFY_AUTH_TOKEN={t} netlify deploy --prod --dir=dist",
    t,
    "netlify deploy",
)
t = "sbp_" + hx(40)
S(
    F,
    "supabase_access_token_export",
    f'export SUPABASE_ACCESS_TOKEN="{t}"',
    t,
    "SUPABASE_ACCESS_TOKEN",
)
t = "pscale_pw_" + rs(43, ALNUM + "_")
S(F, "planetscale_password_dotenv", f"DATABASE_PASSWORD={t}", t, "DATABASE_PASSWORD=")
t = "fo1_" + rs(43, B64URL)
S(F, "flyio_token_env", f'FLY_API_TOKEN="{t}" flyctl deploy --remote-only', t, "flyctl deploy")
t = "glsa_" + rs(32) + "_" + hx(8)
S(
    F,
    "grafana_service_account_token_curl",
    f'curl -H "Authorization: Bearer {t}" https://grafana.acme.io/api/dashboards/uid/k8s-overview',
    t,
    "https://grafana.acme.io/api/dashboards",
)
t = "glc_" + b64s(
    json.dumps(
        {
            "o": digits(6),
            "n": "stack-" + digits(6) + "-hm-read",
            "k": rs(24),
            "m": {"r": "prod-eu-west-2"},
        },
        separators=(",", ":"),
    )
)
S(F, "grafana_cloud_access_policy_token", f"GRAFANA_CLOUD_TOKEN={t}", t, "GRAFANA_CLOUD_TOKEN=")
t = (
    "sntrys_"
    + b64us(
        json.dumps(
            {
                "iat": 1718000000.1,
                "url": "https://sentry.io",
                "region_url": "https://us.sentry.io",
                "org": "acme",
            },
            separators=(",", ":"),
        )
    )
    + "_"
    + rs(43, ALNUM + "+/")
)
S(F, "sentry_org_auth_token_sentryclirc", f"[auth]\ntoken={t}", t, "[auth]")
t = "sntryu_" + hx(64)
S(F, "sentry_user_token_env", f"export SENTRY_AUTH_TOKEN={t}", t, "SENTRY_AUTH_TOKEN")
t = "dapi" + hx(32)
S(
    F,
    "databricks_pat_cfg",
    f"[DEFAULT]\nhost  = https://adb-{digits(16)}.7.azuredatabricks.net\ntoken = {t}",
    t,
    "[DEFAULT]",
)
t = t_hf()
S(
    F,
    "huggingface_token_python_error",
    f"huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-{hx(8)}-{hx(24)})\n"
    f"Invalid credentials in Authorization header (token: {t})",
    t,
    "RepositoryNotFoundError",
)
t = "r8_" + rs(37)
S(F, "replicate_api_token_export", f"export REPLICATE_API_TOKEN={t}", t, "REPLICATE_API_TOKEN")
t = t_anthropic()
S(F, "anthropic_key_dotenv", f"ANTHROPIC_API_KEY={t}", t, "ANTHROPIC_API_KEY=")
t = t_openai()
S(
    F,
    "openai_project_key_error",
    f"openai.AuthenticationError: Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {t}. "
    f"You can find your API key at https://platform.openai.com/account/api-keys.', 'type': 'invalid_request_error'}}}}",
    t,
    "openai.AuthenticationError",
)
t = t_gitlab_pat()
S(
    F,
    "gitlab_pat_chat",
    f"my gitlab token is {t}, scopes api + read_registry",
    t,
    "scopes api + read_registry",
)
t = t_npm()
S(
    F,
    "npm_automation_token_npmrc_env",
    f"NPM_TOKEN={t} npm publish --access public",
    t,
    "npm publish --access public",
)
t = t_pypi()
S(
    F,
    "pypi_token_env_twine",
    f"TWINE_USERNAME=__token__ TWINE_PASSWORD={t} twine upload dist/*",
    t,
    "twine upload dist/*",
)
t = "dop_v1_" + hx(64)
S(F, "digitalocean_token_doctl", f"doctl auth init --access-token {t}", t, "doctl auth init")
t = "key-" + hx(32)
S(
    F,
    "mailgun_key_dotenv",
    f"MAILGUN_API_KEY={t}\nMAILGUN_DOMAIN=mg.acme.io",
    t,
    "MAILGUN_DOMAIN=mg.acme.io",
)
t = t_sendgrid()
S(
    F,
    "sendgrid_key_log",
    f"2024-06-12 10:11:02 WARN  mailer: sendgrid rejected request (403) using key {t}",
    t,
    "sendgrid rejected request",
)
t = "SK" + hx(32)
sec = rs(32)
S(
    F,
    "twilio_api_key_secret_env",
    f"TWILIO_API_KEY={t}\nTWILIO_API_SECRET={sec}",
    sec,
    "TWILIO_API_KEY=",
)
t = t_discord()
S(F, "discord_bot_token_env", f"DISCORD_BOT_TOKEN={t}", t, "DISCORD_BOT_TOKEN=")
t = t_telegram()
S(
    F,
    "telegram_bot_token_curl",
    f"curl -s https://api.telegram.org/bot{t}/getUpdates | jq .",
    t,
    "getUpdates",
)
t = t_slack_bot()
S(F, "slack_bot_token_env", f"SLACK_BOT_TOKEN={t}", t, "SLACK_BOT_TOKEN=")
t = t_slack_app()
S(F, "slack_app_level_token_env", f"SLACK_APP_TOKEN={t}", t, "SLACK_APP_TOKEN=")
t = t_slack_user()
S(
    F,
    "slack_user_token_chat",
    f"use my user token for the export script: {t}",
    t,
    "for the export script",
)
t = "EAAA" + rs(60, B64URL)
S(
    F,
    "square_access_token_env",
    f"SQUARE_ACCESS_TOKEN={t}\nSQUARE_ENVIRONMENT=production",
    t,
    "SQUARE_ENVIRONMENT",
)
t = t_atlassian()
S(F, "atlassian_api_token_env", f"JIRA_API_TOKEN={t}", t, "JIRA_API_TOKEN=")
t = "AGE-SECRET-KEY-1" + rs(58, BECH32).upper()
S(F, "age_secret_key_sops_env", f"export SOPS_AGE_KEY={t}", t, "SOPS_AGE_KEY")
t = t_github_fine()
S(F, "github_fine_grained_pat_env", f"GITHUB_TOKEN={t}", t, "GITHUB_TOKEN=")
t = t_github_server()
S(
    F,
    "github_app_installation_token_log",
    f"::debug::Installation token for acme/web: {t} (expires 2024-06-12T11:10:00Z)",
    t,
    "Installation token for acme/web",
)
t = "tskey-auth-" + rs(12) + "CNTRL-" + rs(32)
S(F, "tailscale_auth_key_up", f"sudo tailscale up --authkey={t} --ssh", t, "tailscale up")
t = "bkua_" + hx(40)
S(F, "buildkite_api_token_env", f"BUILDKITE_API_TOKEN={t}", t, "BUILDKITE_API_TOKEN=")
t = "sgp_" + hx(16) + "_" + hx(40)
S(
    F,
    "sourcegraph_token_src_cli",
    f"SRC_ACCESS_TOKEN={t} src search 'repo:acme/ lang:go context.TODO'",
    t,
    "src search",
)
t = "gsk_" + rs(52)
S(F, "groq_api_key_env", f"GROQ_API_KEY={t}", t, "GROQ_API_KEY=")
t = "xai-" + rs(80)
S(F, "xai_api_key_export", f'export XAI_API_KEY="{t}"', t, "XAI_API_KEY")
t = "pplx-" + rs(48)
S(F, "perplexity_key_yaml", f"providers:\n  perplexity:\n    api_key: {t}", t, "providers:")
t = "lsv2_pt_" + hx(32) + "_" + hx(10)
S(
    F,
    "langsmith_key_env",
    f"LANGCHAIN_TRACING_V2=true\nLANGCHAIN_API_KEY={t}",
    t,
    "LANGCHAIN_TRACING_V2=true",
)
t = "pcsk_" + rs(5) + "_" + rs(60)
S(
    F,
    "pinecone_key_python",
    f'pc = Pinecone(api_key="{t}")\nindex = pc.Index("docs")',
    t,
    'pc.Index("docs")',
)
t = "rubygems_" + hx(48)
S(F, "rubygems_api_key_env", f"GEM_HOST_API_KEY={t} gem push acme-client-0.4.1.gem", t, "gem push")
t = "dt0c01." + rs(24, UP + DIG) + "." + rs(64, UP + DIG)
S(F, "dynatrace_token_env", f"DT_API_TOKEN={t}", t, "DT_API_TOKEN=")
t = "NRAK-" + rs(27, UP + DIG)
S(F, "newrelic_user_key_env", f"NEW_RELIC_API_KEY={t}", t, "NEW_RELIC_API_KEY=")
t = "figd_" + rs(40, B64URL)
S(F, "figma_pat_header", f"X-Figma-Token: {t}", t, "X-Figma-Token:")
t = "00" + rs(40, ALNUM + "-_")
S(F, "okta_api_token_header", f"Authorization: SSWS {t}", t, "Authorization: SSWS")
t = "sk.eyJ1IjoiYWNtZSIsImEiOiJ" + rs(28, B64URL) + "." + rs(22, B64URL)
S(F, "mapbox_secret_token_env", f"MAPBOX_DOWNLOADS_TOKEN={t}", t, "MAPBOX_DOWNLOADS_TOKEN=")
t = "2/" + digits(16) + "/" + digits(16) + ":" + hx(32)
S(F, "asana_pat_env", f"ASANA_ACCESS_TOKEN={t}", t, "ASANA_ACCESS_TOKEN=")
t = "sl." + rs(135, B64URL)
S(F, "dropbox_short_lived_token", f"DROPBOX_ACCESS_TOKEN={t}", t, "DROPBOX_ACCESS_TOKEN=")
t = "api-" + uid()
S(F, "launchdarkly_api_token_env", f"LD_API_KEY={t}", t, "LD_API_KEY=")
t = "cmVmdGtuOjAxOjE3" + rs(48)
S(F, "jfrog_reference_token_env", f"JFROG_ACCESS_TOKEN={t}", t, "JFROG_ACCESS_TOKEN=")
t = t_cratesio()
S(F, "cargo_registry_token_env", f"CARGO_REGISTRY_TOKEN={t} cargo publish", t, "cargo publish")
t = "AAAA" + rs(7, B64URL) + ":APA91b" + rs(134, B64URL)
S(F, "fcm_legacy_server_key_header", f"Authorization: key={t}", t, "Authorization: key=")
t = uid()
S(F, "heroku_legacy_api_key_uuid_env", f"HEROKU_API_KEY={t}", t, "HEROKU_API_KEY=")
t = rs(40, ALNUM + "_-")
S(F, "cloudflare_api_token_env", f"CLOUDFLARE_API_TOKEN={t}", t, "CLOUDFLARE_API_TOKEN=")
t = "access_token$production$" + rs(16, LOW + DIG) + "$" + hx(32)
S(F, "braintree_access_token_env", f"BRAINTREE_ACCESS_TOKEN={t}", t, "BRAINTREE_ACCESS_TOKEN=")
t = hx(32)
S(
    F,
    "algolia_admin_key_chat",
    f"algolia admin key for the staging app is {t} (don't put it in the frontend, use the search-only one)",
    t,
    "use the search-only one",
)
t = t_stripe_restricted()
S(F, "stripe_restricted_key_env", f"STRIPE_RESTRICTED_KEY={t}", t, "STRIPE_RESTRICTED_KEY=")
t = "squ_" + hx(40)
S(
    F,
    "sonarqube_user_token_scanner",
    f"sonar-scanner -Dsonar.projectKey=acme-web -Dsonar.token={t}",
    t,
    "sonar-scanner",
)
t = "tfp_" + rs(44) + "_" + rs(14)
S(F, "typeform_pat_env", f"TYPEFORM_TOKEN={t}", t, "TYPEFORM_TOKEN=")
t = "CLOJARS_" + hx(60)
S(F, "clojars_deploy_token_env", f"CLOJARS_PASSWORD={t}", t, "CLOJARS_PASSWORD=")
t = "hvb." + rs(120, B64URL)
S(
    F,
    "vault_batch_token_chat",
    f"fyi the vault token they gave us: {t}",
    t,
    "the vault token they gave us",
)

# ------------------------------------------------------- 7. encoded_keys ---
F = "encoded_keys"
pem = "-----BEGIN RSA PRIVATE KEY-----\n" + rsa_pem_body() + "\n-----END RSA PRIVATE KEY-----\n"
enc = b64s(pem)
S(F, "b64_pem_in_env_signing_key", f"SIGNING_KEY_B64={enc}", enc, "SIGNING_KEY_B64=")
crt = b64s("-----BEGIN CERTIFICATE-----\n" + cert_body(600) + "\n-----END CERTIFICATE-----\n")
key = b64s("-----BEGIN EC PRIVATE KEY-----\n" + ec_pem_body() + "\n-----END EC PRIVATE KEY-----\n")
S(
    F,
    "k8s_tls_secret_data_tls_key",
    f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-tls\n  namespace: prod\ntype: kubernetes.io/tls\ndata:\n"
    f"  tls.crt: {crt}\n  tls.key: {key}",
    key,
    "kind: Secret",
)
body = pkcs8_pem_body()
esc = body.replace("\n", "\\n")
sa = (
    '{"type": "service_account", "project_id": "acme-prod-4821", "private_key_id": "'
    + hx(40)
    + '", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
    + esc
    + '\\n-----END PRIVATE KEY-----\\n", '
    '"client_email": "ci-deployer@acme-prod-4821.iam.gserviceaccount.com", "client_id": "'
    + digits(21)
    + '", "token_uri": "https://oauth2.googleapis.com/token"}'
)
S(F, "gcp_service_account_json_private_key", sa, esc, '"type": "service_account"')
body = openssh_body()
S(
    F,
    "pem_openssh_private_key_cat",
    f"$ cat ~/.ssh/deploy_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----",
    body,
    "$ cat ~/.ssh/deploy_ed25519",
)
body = ec_pem_body()
S(
    F,
    "pem_ec_private_key_file",
    f"-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n-----BEGIN EC PRIVATE KEY-----\n{body}\n"
    f"-----END EC PRIVATE KEY-----",
    body,
)
pgp = wrap(base64.b64encode(b"\x94\x58\x04" + R.randbytes(300)).decode())
S(
    F,
    "pem_pgp_private_key_block",
    f"$ gpg --armor --export-secret-keys alice@example.com\n-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pgp}\n"
    f"={b64(3)}\n-----END PGP PRIVATE KEY BLOCK-----",
    pgp,
    "gpg --armor --export-secret-keys",
)
body = wrap(der_b64(ENC_PKCS8_PREFIX, 330))
S(
    F,
    "pem_encrypted_pkcs8_private_key",
    f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}\n-----END ENCRYPTED PRIVATE KEY-----",
    body,
)
body = wrap(b64(608))
S(
    F,
    "pem_rsa_legacy_encrypted_dek_info",
    f"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,{HX(32)}\n\n{body}\n"
    f"-----END RSA PRIVATE KEY-----",
    body,
)
body = rsa_pem_body()
S(
    F,
    "pem_rsa_private_key_in_heredoc",
    f"cat > /etc/ssl/private/api.key <<'EOF'\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nEOF",
    body,
    "cat > /etc/ssl/private/api.key",
)
wgk, wgp = b64(32), b64(32)
S(
    F,
    "wireguard_interface_private_key",
    f"[Interface]\nPrivateKey = {wgk}\nAddress = 10.8.0.2/32\nDNS = 1.1.1.1\n\n[Peer]\nPublicKey = {wgp}\n"
    f"Endpoint = vpn.acme.io:51820\nAllowedIPs = 0.0.0.0/0",
    wgk,
    "[Interface]",
)
agep = "age1" + rs(58, BECH32)
ages = "AGE-SECRET-KEY-1" + rs(58, BECH32).upper()
S(
    F,
    "age_identity_file",
    f"$ cat ~/.config/sops/age/keys.txt\n# created: 2024-05-02T10:11:12+02:00\n# public key: {agep}\n{ages}",
    ages,
    "# created: 2024-05-02T10:11:12+02:00",
)
jd = b64u(32)
jwk = json.dumps(
    {"kty": "EC", "crv": "P-256", "kid": hx(16), "x": b64u(32), "y": b64u(32), "d": jd}
)
S(F, "jwk_private_d_param", f"JWT_PRIVATE_JWK='{jwk}'", jd, "JWT_PRIVATE_JWK=")
p12 = base64.b64encode(bytes.fromhex("30820a5f020103") + R.randbytes(1400)).decode()
S(F, "p12_keystore_b64_env", f"ANDROID_KEYSTORE_BASE64={p12}", p12, "ANDROID_KEYSTORE_BASE64=")
body = ec_pkcs8_body()
esc = body.replace("\n", "\\n")
S(
    F,
    "apple_p8_key_escaped_env",
    f'APPLE_API_KEY_P8="-----BEGIN PRIVATE KEY-----\\n{esc}\\n-----END PRIVATE KEY-----"',
    esc,
    "APPLE_API_KEY_P8=",
)
sshb = b64s(
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    + openssh_body()
    + "\n-----END OPENSSH PRIVATE KEY-----\n"
)
S(
    F,
    "b64_openssh_key_ci_variable",
    f"      - name: Configure deploy key\n        run: |\n          mkdir -p ~/.ssh\n"
    f"          echo '{sshb}' | base64 -d > ~/.ssh/id_ed25519\n          chmod 600 ~/.ssh/id_ed25519",
    sshb,
    "Configure deploy key",
)
ckd = b64s(
    "-----BEGIN RSA PRIVATE KEY-----\n" + rsa_pem_body() + "\n-----END RSA PRIVATE KEY-----\n"
)
S(
    F,
    "kubeconfig_client_key_data",
    f"users:\n- name: kind-dev\n  user:\n    client-certificate-data: {b64s('-----BEGIN CERTIFICATE-----')}{b64(300)}\n"
    f"    client-key-data: {ckd}",
    ckd,
    "name: kind-dev",
)
pk = b64(64)
S(
    F,
    "ed25519_raw_b64_private_env",
    f"NODE_ED25519_PRIVATE_KEY={pk}",
    pk,
    "NODE_ED25519_PRIVATE_KEY=",
)
body = ec_pkcs8_body()
S(
    F,
    "pem_private_key_in_python_string",
    f'PRIVATE_KEY = """-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"""',
    body,
    "PRIVATE_KEY = ",
)

# ------------------------------------------------------- 8. url_userinfo ---
F = "url_userinfo"
p = url_pw(22)
S(
    F,
    "postgres_url_dotenv",
    f"DATABASE_URL=postgres://app:{p}@db.internal:5432/app?sslmode=require",
    p,
    "DATABASE_URL=",
)
p = url_pw(20)
S(
    F,
    "sqlalchemy_asyncpg_url",
    f'engine = create_async_engine("postgresql+asyncpg://svc:{p}@10.0.1.12:5432/orders", pool_size=10)',
    p,
    "create_async_engine(",
)
p = url_pw(16)
S(
    F,
    "mongodb_srv_url",
    f'MONGODB_URI="mongodb+srv://appUser:{p}@cluster0.{rs(5, LOW + DIG)}.mongodb.net/shop?retryWrites=true&w=majority"',
    p,
    "MONGODB_URI=",
)
p = url_pw(24)
S(
    F,
    "amqps_url_celery",
    f'broker_url = "amqps://orders:{p}@b-{uid()}.mq.eu-west-1.amazonaws.com:5671"',
    p,
    "broker_url =",
)
p = url_pw(32)
S(F, "redis_url_empty_user", f"REDIS_URL=redis://:{p}@cache.internal:6379/0", p, "REDIS_URL=")
p = rs(34, ALNUM)
S(
    F,
    "rediss_upstash_default_user",
    f"redis-cli --tls -u rediss://default:{p}@eu1-{rs(8, LOW)}-{digits(5)}.upstash.io:{digits(5)}",
    p,
    "redis-cli --tls -u",
)
t = t_github_pat()
S(F, "git_clone_token_as_user", f"git clone https://{t}@github.com/acme/infra.git", t, "git clone")
t = t_github_server()
S(
    F,
    "git_x_access_token_remote",
    f"git remote set-url origin https://x-access-token:{t}@github.com/acme/web.git",
    t,
    "git remote set-url origin",
)
t = t_gitlab_pat()
S(
    F,
    "gitlab_oauth2_user_url",
    f"git push https://oauth2:{t}@gitlab.com/acme/platform/api.git HEAD:main",
    t,
    "git push",
)
t = t_pypi()
S(
    F,
    "pip_index_url_token",
    f"pip install --index-url https://__token__:{t}@pypi.acme.io/simple/ acme-internal==2.1.0",
    t,
    "pip install",
)
t = "EAAG" + rs(180)
S(
    F,
    "query_access_token_graph_api",
    f'curl "https://graph.facebook.com/v19.0/me/accounts?access_token={t}"',
    t,
    "graph.facebook.com",
)
sig = b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
S(
    F,
    "azure_sas_sig_param",
    f"https://acmeassets.blob.core.windows.net/backups/db-2024-06-11.bak?sv=2022-11-02&ss=b&srt=o&sp=r"
    f"&se=2024-06-12T18:00:00Z&st=2024-06-11T10:00:00Z&spr=https&sig={sig}",
    sig,
    "acmeassets.blob.core.windows.net",
)
k = hx(32)
S(
    F,
    "query_api_key_param",
    f'requests.get(f"https://api.openweathermap.org/data/2.5/weather?q=Berlin&appid={k}")',
    k,
    "api.openweathermap.org",
)
k = rs(32)
S(
    F,
    "query_api_key_underscore",
    f"GET /v1/reports?from=2024-06-01&api_key={k} HTTP/1.1",
    k,
    "GET /v1/reports",
)
sg = hx(64)
S(
    F,
    "s3_presigned_x_amz_signature",
    f"https://acme-exports.s3.eu-west-1.amazonaws.com/reports/q2.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    f"&X-Amz-Credential={t_aws_akid()}%2F20240612%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20240612T101500Z"
    f"&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={sg}",
    sg,
    "acme-exports.s3",
)
gs = hx(512)
S(
    F,
    "gcs_signed_url_x_goog_signature",
    f"https://storage.googleapis.com/acme-media/videos/intro.mp4?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    f"&X-Goog-Credential=signer%40acme-prod.iam.gserviceaccount.com%2F20240612%2Fauto%2Fstorage%2Fgoog4_request"
    f"&X-Goog-Date=20240612T101500Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature={gs}",
    gs,
    "storage.googleapis.com",
)
p = url_pw(18)
S(
    F,
    "mysql_url_django_env",
    f"DATABASE_URL=mysql://django:{p}@127.0.0.1:3306/django",
    p,
    "DATABASE_URL=mysql://",
)
p = url_pw(18)
S(
    F,
    "jdbc_url_password_param",
    f"spring.datasource.url=jdbc:postgresql://db:5432/app?user=app&password={p}&ssl=true",
    p,
    "spring.datasource.url=",
)
p = url_pw(16)
S(
    F,
    "smtp_url_userinfo",
    f"EMAIL_URL=smtp+tls://postmaster%40mg.acme.io:{p}@smtp.mailgun.org:587",
    p,
    "EMAIL_URL=",
)
p = url_pw(12)
S(
    F,
    "ftp_url_userinfo",
    f"curl -T build.zip ftp://uploader:{p}@ftp.acme-partner.de/incoming/",
    p,
    "curl -T build.zip",
)
p = t_github_pat()
S(
    F,
    "git_credentials_file_line",
    f"$ cat ~/.git-credentials\nhttps://alice:{p}@github.com",
    p,
    "~/.git-credentials",
)
ck, csec = digits(15), rs(27, B64URL)
S(
    F,
    "cloudinary_url",
    f"CLOUDINARY_URL=cloudinary://{ck}:{csec}@acme-media",
    csec,
    "CLOUDINARY_URL=",
)
t = t_github_pat()
S(
    F,
    "git_config_url_insteadof",
    f'git config --global url."https://{t}:x-oauth-basic@github.com/".insteadOf "https://github.com/"',
    t,
    "git config --global url.",
)
t = rs(40, B64URL)
S(
    F,
    "websocket_token_query",
    f"WebSocket connection to 'wss://realtime.acme.io/socket?vsn=2.0.0&token={t}' failed",
    t,
    "WebSocket connection to",
)
p = url_pw(20)
S(
    F,
    "mssql_pyodbc_url",
    f'SQLALCHEMY_DATABASE_URI = "mssql+pyodbc://sa:{p}@sqlserver:1433/crm?driver=ODBC+Driver+18+for+SQL+Server"',
    p,
    "SQLALCHEMY_DATABASE_URI",
)
p = url_pw(20)
S(
    F,
    "elasticsearch_url_userinfo",
    f'es = Elasticsearch("https://elastic:{p}@es01.internal:9200", verify_certs=False)',
    p,
    "Elasticsearch(",
)
p = url_pw(20)
S(
    F,
    "artifactory_url_userinfo_npm_registry",
    f"npm install --registry https://ci-bot:{p}@acme.jfrog.io/artifactory/api/npm/npm-virtual/",
    p,
    "npm install --registry",
)
p = url_pw(24)
S(
    F,
    "amqp_url_python_pika",
    f'params = pika.URLParameters("amqp://svc_mail:{p}@rabbitmq.internal:5672/%2F")',
    p,
    "pika.URLParameters(",
)
t = rs(48, B64URL)
S(
    F,
    "query_token_param_prometheus_remote",
    f"remote_write:\n  - url: https://metrics.acme.io/api/v1/push?token={t}",
    t,
    "remote_write:",
)
p = url_pw(18)
S(
    F,
    "clickhouse_http_password_param",
    f"curl 'https://ch.internal:8443/?user=etl&password={p}' --data-binary 'SELECT count() FROM events'",
    p,
    "--data-binary",
)

# ------------------------------------------------------- 9. config_files ---
F = "config_files"
t = t_npm()
S(
    F,
    "npmrc_authtoken_line",
    f"@acme:registry=https://npm.pkg.github.com\n//registry.npmjs.org/:_authToken={t}\nalways-auth=true",
    t,
    "@acme:registry=https://npm.pkg.github.com",
)
a = b64s("ci-bot:" + strong_pw(20))
S(
    F,
    "npmrc_underscore_auth_base64",
    f"registry=https://nexus.acme.io/repository/npm-group/\n_auth={a}\nemail=ci@acme.io",
    a,
    "email=ci@acme.io",
)
p = strong_pw(20)
S(
    F,
    "pypirc_password",
    f"[distutils]\nindex-servers =\n    internal\n\n[internal]\nrepository = https://nexus.acme.io/repository/pypi-hosted/\n"
    f"username = deploy\npassword = {p}",
    p,
    "[distutils]",
)
p = url_pw(20)
S(
    F,
    "pip_conf_index_url_creds",
    f"[global]\nindex-url = https://build:{p}@artifactory.acme.io/api/pypi/pypi-remote/simple\ntimeout = 60",
    p,
    "[global]",
)
p = strong_pw(20)
S(
    F,
    "maven_settings_xml_password",
    f"<servers>\n  <server>\n    <id>acme-releases</id>\n    <username>deployer</username>\n    <password>{p}</password>\n"
    f"  </server>\n</servers>",
    p,
    "<id>acme-releases</id>",
)
p = t_heroku()
S(
    F,
    "netrc_machine_password",
    f"machine api.heroku.com\n  login alice@acme.io\n  password {p}\nmachine git.heroku.com\n  login alice@acme.io\n  password {p}",
    p,
    "machine api.heroku.com",
)
au = b64s("gitlab-ci-token:" + t_gitlab_pat())
S(
    F,
    "docker_config_json_auths",
    json.dumps({"auths": {"registry.gitlab.com": {"auth": au}}, "credsStore": ""}, indent=2),
    au,
    '"auths"',
)
kt = jwt(
    {
        "iss": "kubernetes/serviceaccount",
        "kubernetes.io/serviceaccount/namespace": "ci",
        "sub": "system:serviceaccount:ci:deployer",
    },
    "RS256",
)
S(
    F,
    "kubeconfig_user_token",
    f"users:\n- name: ci-deployer\n  user:\n    token: {kt}",
    kt,
    "name: ci-deployer",
)
p = strong_pw(20)
S(
    F,
    "spring_application_properties_password",
    f"spring.datasource.url=jdbc:mysql://db:3306/shop\nspring.datasource.username=shop\nspring.datasource.password={p}",
    p,
    "spring.datasource.username=shop",
)
p = strong_pw(20)
S(
    F,
    "spring_application_yml_password",
    f"spring:\n  datasource:\n    url: jdbc:postgresql://db:5432/app\n    username: app\n    password: {p}",
    p,
    "datasource:",
)
p = strong_pw(20, "!#%^*-_=+")
S(
    F,
    "wp_config_define_db_password",
    f"define( 'DB_NAME', 'wordpress' );\ndefine( 'DB_USER', 'wp' );\ndefine( 'DB_PASSWORD', '{p}' );\ndefine( 'DB_HOST', 'localhost' );",
    p,
    "define( 'DB_NAME', 'wordpress' );",
)
salt = rs(64, ALNUM + "!#%^*-_=+[]{}()<>.,:|~`@$")
S(
    F,
    "wp_config_auth_key_salt",
    f"define( 'AUTH_KEY',         '{salt}' );",
    salt,
    "define( 'AUTH_KEY',",
)
dk = "django-insecure-" + rs(50, LOW + DIG + "!@#%^&*(-_=+)")
S(F, "django_secret_key_setting", f"SECRET_KEY = '{dk}'\nDEBUG = True", dk, "DEBUG = True")
skb = hx(128)
S(F, "rails_secret_key_base_yml", f"production:\n  secret_key_base: {skb}", skb, "production:")
w = t_whsec()
S(F, "dotenv_stripe_webhook_signing", f"STRIPE_WEBHOOK_SIGNING={w}", w, "STRIPE_WEBHOOK_SIGNING=")
s = rs(32)
S(F, "dotenv_session_salt", f"SESSION_SALT={s}", s, "SESSION_SALT=")
s = b64(32)
S(F, "dotenv_cookie_secret", f'COOKIE_SECRET="{s}"', s, "COOKIE_SECRET=")
s = hx(64)
S(F, "dotenv_jwt_signing_key", f"JWT_SIGNING_KEY={s}\nJWT_TTL=900", s, "JWT_TTL=900")
p = human_pw()
S(F, "dotenv_db_pass", f"DB_HOST=localhost\nDB_USER=app\nDB_PASS='{p}'", p, "DB_USER=app")
p = strong_pw(16)
S(F, "dotenv_passwd", f"SMB_USER=scanner\nSMB_PASSWD={p}", p, "SMB_USER=scanner")
p = alnum_pw(16)
S(F, "dotenv_mysql_pwd", f"MYSQL_PWD={p}", p, "MYSQL_PWD=")
p = strong_pw(18)
S(
    F,
    "odbc_ini_pwd",
    f"[crm]\nDriver = ODBC Driver 18 for SQL Server\nServer = tcp:sql01,1433\nUID = crm_ro\nPWD = {p}",
    p,
    "[crm]",
)
mk = hx(32)
S(F, "dotenv_master_key", f"RAILS_MASTER_KEY={mk}", mk, "RAILS_MASTER_KEY=")
ek = b64(32)
S(F, "dotenv_encryption_key", f"ENCRYPTION_KEY=base64:{ek}", ek, "ENCRYPTION_KEY=")
cc = b64s(uid() + ":" + t_azure_client_secret())
S(F, "dotenv_client_credentials_b64", f"CLIENT_CREDENTIALS={cc}", cc, "CLIENT_CREDENTIALS=")
p = strong_pw(20)
S(
    F,
    "yaml_flow_mapping_auth_pass",
    f"smtp:\n  host: smtp.fastmail.com\n  port: 465\n  auth: {{ user: alerts@acme.io, pass: {p} }}",
    p,
    "smtp:",
)
p = strong_pw(20)
S(
    F,
    "toml_database_password",
    f'[database]\nhost = "db.internal"\nuser = "ledger"\npassword = "{p}"\npool = 20',
    p,
    "[database]",
)
t = rs(14) + ".atlasv1." + rs(67)
S(
    F,
    "terraformrc_credentials_block",
    f'credentials "app.terraform.io" {{\n  token = "{t}"\n}}',
    t,
    'credentials "app.terraform.io"',
)
p = alnum_pw(24)
S(
    F,
    "docker_compose_environment_password",
    f"services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_USER: app\n      POSTGRES_PASSWORD: {p}",
    p,
    "image: postgres:16",
)
a, s = t_aws_akid(), t_aws_secret()
S(
    F,
    "aws_credentials_ini",
    f"[default]\naws_access_key_id = {a}\naws_secret_access_key = {s}\nregion = eu-west-1",
    s,
    "region = eu-west-1",
)
p = strong_pw(20)
S(
    F,
    "gradle_properties_ossrh_password",
    f"ossrhUsername=acme-release\nossrhPassword={p}\nsigning.keyId={HX(8)}",
    p,
    "ossrhUsername=acme-release",
)
t = t_github_oauth()
S(
    F,
    "composer_auth_json_github_oauth",
    json.dumps({"github-oauth": {"github.com": t}}, indent=4),
    t,
    '"github-oauth"',
)
t = t_npm()
S(
    F,
    "yarnrc_yml_npm_auth_token",
    f'npmScopes:\n  acme:\n    npmRegistryServer: "https://registry.npmjs.org"\n    npmAuthToken: "{t}"',
    t,
    "npmScopes:",
)
p = strong_pw(32)
S(
    F,
    "redis_conf_requirepass",
    f"bind 0.0.0.0\nprotected-mode yes\nrequirepass {p}",
    p,
    "protected-mode yes",
)
p = url_pw(20)
S(F, "pgpass_line", f"$ cat ~/.pgpass\ndb.internal:5432:*:app:{p}", p, "~/.pgpass")
p = strong_pw(20)
S(
    F,
    "my_cnf_client_password",
    f'[client]\nuser=root\npassword="{p}"\nhost=127.0.0.1',
    p,
    "[client]",
)
p = strong_pw(18)
S(
    F,
    "appsettings_json_connection_string",
    json.dumps(
        {
            "ConnectionStrings": {
                "Default": f"Server=sql01;Database=Crm;User Id=crm_app;Password={p};TrustServerCertificate=True"
            }
        },
        indent=2,
    ),
    p,
    '"ConnectionStrings"',
)
t = (
    "sntrys_"
    + b64us(json.dumps({"iat": 1718100000.5, "url": "https://sentry.io", "org": "acme"}))
    + "_"
    + rs(43)
)
S(
    F,
    "sentry_properties_auth_token",
    f"defaults.org=acme\ndefaults.project=ios-app\nauth.token={t}",
    t,
    "defaults.org=acme",
)
s = t_aws_secret()
S(
    F,
    "s3cfg_secret_key",
    f"[default]\naccess_key = {t_aws_akid()}\nsecret_key = {s}\nhost_base = s3.amazonaws.com",
    s,
    "host_base = s3.amazonaws.com",
)
p = strong_pw(20)
S(
    F,
    "tfvars_db_password",
    f'region      = "eu-west-1"\ndb_username = "app"\ndb_password = "{p}"',
    p,
    'region      = "eu-west-1"',
)
p = human_pw()
S(
    F,
    "ansible_group_vars_become_pass",
    f'ansible_user: deploy\nansible_become: true\nansible_become_pass: "{p}"',
    p,
    "ansible_user: deploy",
)
p = alnum_pw(20)
S(
    F,
    "helm_values_root_password",
    f"auth:\n  rootPassword: {p}\n  database: app\n  username: app",
    p,
    "database: app",
)
s = b64(32)
S(
    F,
    "dotenv_local_nextauth_secret",
    f"NEXTAUTH_URL=http://localhost:3000\nNEXTAUTH_SECRET={s}",
    s,
    "NEXTAUTH_URL=",
)
p = strong_pw(20)
S(
    F,
    "grafana_ini_admin_password",
    f"[security]\nadmin_user = admin\nadmin_password = {p}",
    p,
    "[security]",
)
t = t_github_oauth()
S(
    F,
    "gh_hosts_yml_oauth_token",
    f"github.com:\n    user: alice\n    oauth_token: {t}\n    git_protocol: https",
    t,
    "git_protocol: https",
)
t = t_cratesio()
S(F, "cargo_credentials_toml", f'[registry]\ntoken = "{t}"', t, "[registry]")
t = "rubygems_" + hx(48)
S(F, "gem_credentials_yaml", f"---\n:rubygems_api_key: {t}", t, ":rubygems_api_key:")
rt = t_google_refresh()
S(
    F,
    "gcloud_adc_refresh_token_json",
    json.dumps(
        {
            "client_id": digits(12) + "-" + rs(32, LOW + DIG) + ".apps.googleusercontent.com",
            "client_secret": rs(24, B64URL),
            "refresh_token": rt,
            "type": "authorized_user",
        },
        indent=2,
    ),
    rt,
    '"type": "authorized_user"',
)
p = strong_pw(20)
S(
    F,
    "supervisord_inet_http_password",
    f"[inet_http_server]\nport = 127.0.0.1:9001\nusername = admin\npassword = {p}",
    p,
    "[inet_http_server]",
)
t = t_vault_service()
S(
    F,
    "vault_agent_hcl_token",
    f'vault {{\n  address = "https://vault.acme.io:8200"\n  token   = "{t}"\n}}',
    t,
    "address",
)
p = strong_pw(20)
S(
    F,
    "github_actions_env_literal",
    f"    env:\n      NODE_ENV: test\n      DB_PASSWORD: {p}\n    steps:\n      - uses: actions/checkout@v4",
    p,
    "NODE_ENV: test",
)
k = t_datadog()
S(
    F,
    "datadog_agent_yaml_api_key",
    f"api_key: {k}\nsite: datadoghq.eu\nlogs_enabled: true",
    k,
    "site: datadoghq.eu",
)
p = strong_pw(16)
S(
    F,
    "cloud_init_chpasswd",
    f"#cloud-config\nchpasswd:\n  expire: false\n  users:\n    - name: ubuntu\n      password: {p}\n      type: text",
    p,
    "#cloud-config",
)

# ------------------------------------------------------ 10. chat_and_logs ---
F = "chat_and_logs"
p = human_pw()
S(
    F,
    "chat_staging_db_password_prose",
    f"the staging db password is {p} and the user is app_staging, can you check why migrations fail?",
    p,
    "can you check why migrations fail?",
)
k = t_openai()
S(F, "chat_use_this_key", f"use this key: {k}", k, "use this key:")
t = t_github_fine()
S(
    F,
    "chat_new_pat_update_workflow",
    f"my new PAT is {t} -- can you update the release workflow to use it?",
    t,
    "update the release workflow",
)
k = t_stripe_live()
S(
    F,
    "chat_rotated_new_one",
    f"ok I rotated it, the new one is\n{k}\nold one is revoked",
    k,
    "old one is revoked",
)
ba = b64s("admin:" + strong_pw(16))
S(
    F,
    "curl_verbose_authorization_basic",
    f"> POST /api/v1/login HTTP/2\n> Host: staging.acme.io\n> user-agent: curl/8.5.0\n> accept: */*\n"
    f"> authorization: Basic {ba}\n> content-type: application/json",
    ba,
    "Host: staging.acme.io",
)
k = rs(40)
S(
    F,
    "requests_debug_send_x_api_key",
    f"send: b'GET /v2/inventory HTTP/1.1\\r\\nHost: api.supplier.com\\r\\nUser-Agent: python-requests/2.32.3\\r\\n"
    f"X-Api-Key: {k}\\r\\nAccept: */*\\r\\n\\r\\n'",
    k,
    "python-requests/2.32.3",
)
sess = b64u(24) + "." + b64u(6) + "." + b64u(20)
S(
    F,
    "request_dump_cookie_session",
    f"GET /admin/users HTTP/1.1\nHost: localhost:5000\nCookie: session={sess}; theme=dark\nAccept: text/html",
    sess,
    "GET /admin/users HTTP/1.1",
)
sid = rs(32, B64URL)
S(
    F,
    "response_dump_set_cookie",
    f"< HTTP/1.1 302 Found\n< Location: /dashboard\n< Set-Cookie: sid={sid}; Path=/; HttpOnly; Secure; SameSite=Lax",
    sid,
    "< Location: /dashboard",
)
t = t_github_pat()
S(
    F,
    "git_remote_v_output_token",
    f"$ git remote -v\norigin\thttps://{t}@github.com/acme/api.git (fetch)\norigin\thttps://{t}@github.com/acme/api.git (push)",
    t,
    "$ git remote -v",
)
p = strong_pw(20)
t2 = t_aws_secret()
S(
    F,
    "env_grep_output",
    f"$ env | grep -i -E 'pass|secret'\nPOSTGRES_PASSWORD={p}\nAWS_SECRET_ACCESS_KEY={t2}",
    t2,
    "env | grep",
)
p = strong_pw(20)
S(
    F,
    "log_dict_repr_password",
    f"2024-06-12 10:11:02,123 INFO app.db Connecting with config {{'host': 'db', 'port': 5432, 'user': 'app', 'password': '{p}'}}",
    p,
    "Connecting with config",
)
k = t_aws_secret()
S(
    F,
    "node_console_log_object",
    f"{{\n  region: 'us-east-1',\n  accessKeyId: '{t_aws_akid()}',\n  secretAccessKey: '{k}'\n}}",
    k,
    "region: 'us-east-1'",
)
t = t_github_pat()
S(
    F,
    "bash_xtrace_curl_token",
    f"+ curl -sf -H 'Authorization: token {t}' https://api.github.com/repos/acme/web/releases/latest",
    t,
    "https://api.github.com/repos/acme/web/releases/latest",
)
p = alnum_pw(20)
S(
    F,
    "docker_inspect_env_list",
    f'            "Env": [\n                "POSTGRES_PASSWORD={p}",\n                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",\n'
    f'                "PG_MAJOR=16"\n            ],',
    p,
    '"PG_MAJOR=16"',
)
p = human_pw()
S(
    F,
    "chat_german_password",
    f"Das Passwort für den Staging-Server ist {p} – bitte nicht ins Repo committen.",
    p,
    "bitte nicht ins Repo committen",
)
p = human_pw()
S(
    F,
    "chat_jenkins_creds_slash",
    f"fyi the jenkins admin creds are admin / {p}",
    p,
    "jenkins admin creds",
)
p = url_pw(24)
S(
    F,
    "heroku_config_output_url",
    f"=== acme-api Config Vars\nDATABASE_URL: postgres://u{rs(13, LOW + DIG)}:{p}@ec2-3-250-1-2.eu-west-1.compute.amazonaws.com:5432/d{rs(13, LOW + DIG)}\n"
    f"LOG_LEVEL:    info",
    p,
    "=== acme-api Config Vars",
)
p = strong_pw(20)
S(
    F,
    "laravel_debug_env_dump",
    f'DB_CONNECTION "mysql"\nDB_HOST "127.0.0.1"\nDB_USERNAME "forge"\nDB_PASSWORD "{p}"',
    p,
    'DB_CONNECTION "mysql"',
)
k = t_anthropic()
S(
    F,
    "traceback_local_vars_api_key",
    f'  File "/app/llm.py", line 42, in complete\n    resp = client.messages.create(**kwargs)\n'
    f"    api_key = '{k}'\n    kwargs = {{'model': 'claude-3-5-sonnet', 'max_tokens': 1024}}",
    k,
    'File "/app/llm.py", line 42',
)
p = strong_pw(20)
S(
    F,
    "chat_spanish_password",
    f"la contraseña del usuario root en el servidor de pruebas es {p}",
    p,
    "la contraseña del usuario root",
)
t = t_slack_bot()
S(
    F,
    "ci_log_unmasked_token",
    f"2024-06-12T10:15:22.1234567Z Run ./notify.sh\n2024-06-12T10:15:22.2345678Z posting to #deploys with token {t}",
    t,
    "Run ./notify.sh",
)

# ------------------------------------------------------------- webhooks ---
F = "webhooks"
seg = rs(24)
S(
    F,
    "slack_incoming_webhook_url",
    f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T{rs(8, UP + DIG)}/B{rs(10, UP + DIG)}/{seg}",
    seg,
    "SLACK_WEBHOOK_URL=",
)
seg = rs(68, B64URL)
S(
    F,
    "discord_webhook_url",
    f"curl -H 'Content-Type: application/json' -d '{{\"content\":\"deploy ok\"}}' https://discord.com/api/webhooks/{digits(19)}/{seg}",
    seg,
    "deploy ok",
)
seg = hx(32)
S(
    F,
    "teams_incoming_webhook_url",
    f"$uri = 'https://acme.webhook.office.com/webhookb2/{uid()}@{uid()}/IncomingWebhook/{seg}/{uid()}'",
    seg,
    "$uri =",
)
seg = rs(43, B64URL)
S(
    F,
    "google_chat_webhook_token",
    f"https://chat.googleapis.com/v1/spaces/AAAA{rs(7, B64URL)}/messages?key=AIzaSy{rs(33, B64URL)}&token={seg}",
    seg,
    "chat.googleapis.com",
)
seg = rs(26, LOW + DIG)
S(
    F,
    "mattermost_webhook_url",
    f"MATTERMOST_HOOK=https://chat.acme.io/hooks/{seg}",
    seg,
    "MATTERMOST_HOOK=",
)
s = hx(40)
S(
    F,
    "github_webhook_secret_gh_api",
    f"gh api repos/acme/web/hooks -f name=web -f 'config[url]=https://ci.acme.io/github' -f 'config[secret]={s}' -F active=true",
    s,
    "gh api repos/acme/web/hooks",
)

# -------------------------------------------------------------- cookies ---
F = "cookies"
fs = b64us(json.dumps({"_user_id": "42", "_fresh": True})) + "." + b64u(4) + "." + b64u(20)
S(
    F,
    "curl_cookie_flag_session",
    f'curl -b "session={fs}" http://localhost:5000/admin',
    fs,
    "http://localhost:5000/admin",
)
cs_ = "s%3A" + rs(32, B64URL) + "." + rs(43, B64URL)
S(F, "express_connect_sid_cookie", f"Cookie: connect.sid={cs_}", cs_, "Cookie: connect.sid=")
rc = b64(96) + "--" + hx(40)
S(
    F,
    "rails_session_cookie",
    f"_acme_session={rc}; path=/; secure; httponly; samesite=lax",
    rc,
    "; path=/; secure",
)
at = jwt({"sub": "alice", "scope": "admin"})
S(
    F,
    "document_cookie_auth_token",
    f'document.cookie = "auth_token={at}; path=/; max-age=86400";',
    at,
    "document.cookie",
)
jwe = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0.." + b64u(12) + "." + b64u(300) + "." + b64u(16)
S(
    F,
    "nextauth_session_token_set_cookie",
    f"set-cookie: __Secure-next-auth.session-token={jwe}; Path=/; Expires=Fri, 12 Jul 2024 10:00:00 GMT; HttpOnly; Secure; SameSite=Lax",
    jwe,
    "__Secure-next-auth.session-token=",
)
js = HX(32)
S(
    F,
    "jsessionid_cookie_devtools",
    f"copy(document.cookie)\n'JSESSIONID={js}; _ga=GA1.1.{digits(9)}.{digits(10)}'",
    js,
    "copy(document.cookie)",
)

# ------------------------------------------------------------------ otp ---
F = "otp"
seed = rs(32, B32)
S(
    F,
    "otpauth_totp_uri_secret",
    f"otpauth://totp/GitHub:alice?secret={seed}&issuer=GitHub&algorithm=SHA1&digits=6&period=30",
    seed,
    "otpauth://totp/GitHub:alice",
)
codes = [f"{hx(5)}-{hx(5)}" for _ in range(8)]
S(
    F,
    "github_recovery_codes_paste",
    "here are my github recovery codes in case I get locked out:\n" + "\n".join(codes[:4]),
    codes[2],
    "github recovery codes",
)
seed = rs(32, B32)
S(
    F,
    "pyotp_totp_seed_literal",
    f'totp = pyotp.TOTP("{seed}")\nprint(totp.now())',
    seed,
    "print(totp.now())",
)
setup = " ".join(rs(4, B32.lower()) for _ in range(8))
S(
    F,
    "totp_setup_key_spaced",
    f"Can't scan the QR code? Enter this setup key instead: {setup}",
    setup,
    "Enter this setup key instead",
)

# --------------------------------------------------------------- crypto ---
F = "crypto"
BIP39 = [
    "abandon",
    "ability",
    "able",
    "about",
    "above",
    "absent",
    "absorb",
    "abstract",
    "absurd",
    "abuse",
    "access",
    "accident",
    "account",
    "accuse",
    "achieve",
    "acid",
    "acoustic",
    "acquire",
    "across",
    "act",
    "action",
    "actor",
    "actress",
    "actual",
    "adapt",
    "add",
    "addict",
    "address",
    "adjust",
    "admit",
    "adult",
    "advance",
    "advice",
    "aerobic",
    "affair",
    "afford",
    "afraid",
    "again",
    "age",
    "agent",
    "agree",
    "ahead",
    "aim",
    "air",
    "airport",
    "aisle",
    "alarm",
    "album",
    "alcohol",
    "alert",
    "alien",
    "all",
    "alley",
    "allow",
    "almost",
    "alone",
    "alpha",
    "already",
    "also",
    "alter",
    "always",
    "amateur",
    "amazing",
    "among",
    "amount",
    "amused",
    "analyst",
    "anchor",
    "ancient",
    "anger",
    "angle",
    "angry",
    "animal",
    "ankle",
    "announce",
    "annual",
    "another",
    "answer",
    "antenna",
    "antique",
    "anxiety",
    "any",
    "apart",
    "apology",
    "appear",
    "apple",
    "approve",
    "april",
    "arch",
    "arctic",
    "area",
    "arena",
    "argue",
    "arm",
    "armed",
    "armor",
    "army",
    "around",
    "arrange",
    "arrest",
    "arrive",
    "arrow",
    "art",
    "artefact",
    "artist",
    "artwork",
    "ask",
    "aspect",
    "assault",
    "asset",
    "assist",
    "assume",
    "asthma",
    "athlete",
    "atom",
    "attack",
    "attend",
    "attitude",
    "attract",
    "auction",
    "audit",
    "august",
    "aunt",
    "author",
    "auto",
    "autumn",
    "average",
    "avocado",
    "avoid",
    "awake",
    "aware",
    "away",
    "awesome",
    "awful",
    "awkward",
    "axis",
    "baby",
    "bachelor",
    "bacon",
    "badge",
    "bag",
    "balance",
    "balcony",
    "ball",
    "bamboo",
    "banana",
    "banner",
    "bar",
    "barely",
    "bargain",
    "barrel",
    "base",
    "basic",
    "basket",
    "battle",
    "beach",
    "bean",
    "beauty",
    "because",
    "become",
    "beef",
    "before",
    "begin",
    "behave",
    "behind",
    "believe",
    "below",
    "belt",
    "bench",
    "benefit",
    "best",
    "betray",
    "better",
    "between",
    "beyond",
    "bicycle",
    "bid",
    "bike",
    "bind",
    "biology",
    "bird",
    "birth",
    "bitter",
    "black",
    "blade",
    "blame",
    "blanket",
    "blast",
    "bleak",
    "bless",
    "blind",
    "blood",
    "blossom",
    "blouse",
    "blue",
    "blur",
    "blush",
    "board",
    "boat",
    "body",
    "boil",
    "bomb",
    "bone",
    "bonus",
    "book",
    "boost",
    "border",
    "boring",
    "borrow",
    "boss",
    "bottom",
    "bounce",
    "box",
    "boy",
    "bracket",
    "brain",
    "brand",
    "brass",
    "brave",
    "bread",
    "breeze",
    "brick",
    "bridge",
    "brief",
    "bright",
    "bring",
    "brisk",
    "broccoli",
    "broken",
    "bronze",
    "broom",
    "brother",
    "brown",
    "brush",
    "bubble",
    "buddy",
    "budget",
    "buffalo",
    "build",
    "bulb",
    "bulk",
    "bullet",
    "bundle",
    "bunker",
    "burden",
    "burger",
    "burst",
    "bus",
    "business",
    "busy",
    "butter",
    "buyer",
    "buzz",
    "cabbage",
    "cabin",
    "cable",
    "cactus",
    "cage",
    "cake",
    "call",
    "calm",
    "camera",
    "camp",
    "can",
    "canal",
    "cancel",
    "candy",
    "cannon",
    "canoe",
    "canvas",
    "canyon",
    "capable",
    "capital",
    "captain",
    "car",
    "carbon",
    "card",
    "cargo",
    "carpet",
    "carry",
    "cart",
    "case",
    "cash",
    "casino",
    "castle",
    "casual",
    "cat",
    "catalog",
    "catch",
    "category",
    "cattle",
    "caught",
    "cause",
    "caution",
    "cave",
    "ceiling",
    "celery",
    "cement",
    "census",
    "century",
    "cereal",
    "certain",
    "chair",
    "chalk",
    "champion",
    "change",
    "chaos",
    "chapter",
    "charge",
    "chase",
    "chat",
    "cheap",
    "check",
    "cheese",
    "chef",
    "cherry",
    "chest",
    "chicken",
    "chief",
    "child",
    "chimney",
    "choice",
    "choose",
    "chronic",
    "chuckle",
    "chunk",
    "churn",
    "cigar",
    "cinnamon",
    "circle",
    "citizen",
    "city",
    "civil",
    "claim",
    "clap",
    "clarify",
    "claw",
    "clay",
    "clean",
    "clerk",
    "clever",
    "click",
    "client",
    "cliff",
    "climb",
    "clinic",
    "clip",
    "clock",
    "clog",
    "close",
    "cloth",
    "cloud",
    "clown",
    "club",
    "clump",
    "cluster",
    "clutch",
    "coach",
    "coast",
    "coconut",
    "code",
    "coffee",
    "coil",
    "coin",
    "collect",
    "color",
    "column",
    "combine",
    "come",
    "comfort",
    "comic",
    "common",
    "company",
    "concert",
    "conduct",
    "confirm",
    "congress",
    "connect",
    "consider",
    "control",
    "convince",
    "cook",
    "cool",
    "copper",
    "copy",
    "coral",
    "core",
    "corn",
    "correct",
    "cost",
    "cotton",
    "couch",
    "country",
    "couple",
    "course",
    "cousin",
    "cover",
    "coyote",
    "crack",
    "cradle",
    "craft",
    "cram",
    "crane",
    "crash",
    "crater",
    "crawl",
    "crazy",
    "cream",
    "credit",
    "creek",
    "crew",
    "cricket",
    "crime",
    "crisp",
    "critic",
    "crop",
    "cross",
    "crouch",
    "crowd",
    "crucial",
    "cruel",
    "cruise",
    "crumble",
    "crunch",
    "crush",
    "cry",
    "crystal",
    "cube",
    "culture",
    "cup",
    "cupboard",
    "curious",
    "current",
    "curtain",
    "curve",
    "cushion",
    "custom",
    "cute",
    "cycle",
]
m12 = " ".join(R.choice(BIP39) for _ in range(12))
S(
    F,
    "bip39_mnemonic_12_dotenv",
    f'MNEMONIC="{m12}"\nINFURA_PROJECT_ID={hx(32)}',
    m12,
    "INFURA_PROJECT_ID=",
)
m24 = " ".join(R.choice(BIP39) for _ in range(24))
S(
    F,
    "bip39_mnemonic_24_chat",
    f"I restored the test wallet with this seed, can you derive the first 5 addresses?\n{m24}",
    m24,
    "derive the first 5 addresses",
)
ek = "0x" + hx(64)
S(
    F,
    "eth_private_key_hardhat_env",
    f"DEPLOYER_PRIVATE_KEY={ek}\nETHERSCAN_API_KEY={rs(34, UP + DIG)}",
    ek,
    "DEPLOYER_PRIVATE_KEY=",
)
ek = "0x" + hx(64)
S(
    F,
    "forge_script_private_key_flag",
    f"forge script script/Deploy.s.sol --rpc-url $SEPOLIA_RPC --private-key {ek} --broadcast",
    ek,
    "forge script",
)
wif = R.choice("KL") + rs(51, B58)
S(
    F,
    "bitcoin_wif_importprivkey",
    f'bitcoin-cli importprivkey "{wif}" "cold-1" false',
    wif,
    "bitcoin-cli importprivkey",
)
arr = "[" + ",".join(str(R.randrange(256)) for _ in range(64)) + "]"
S(
    F,
    "solana_keypair_json_array",
    f"$ cat ~/.config/solana/id.json\n{arr}",
    arr,
    "~/.config/solana/id.json",
)

# ------------------------------------------------------------------ ssh ---
F = "ssh"
old, new = human_pw(), strong_pw(20)
S(
    F,
    "ssh_keygen_change_passphrase_N",
    f"ssh-keygen -p -f ~/.ssh/id_ed25519 -P '{old}' -N '{new}'",
    new,
    "ssh-keygen -p -f ~/.ssh/id_ed25519",
)
pp = human_pw()
S(
    F,
    "ssh_keygen_new_key_N",
    f"ssh-keygen -t ed25519 -C deploy@ci -N '{pp}' -f ./deploy_key",
    pp,
    "ssh-keygen -t ed25519",
)
pp = strong_pw(20)
S(
    F,
    "expect_send_passphrase",
    f'spawn ssh-add /home/ci/.ssh/id_rsa\nexpect "Enter passphrase for /home/ci/.ssh/id_rsa:"\nsend "{pp}\\r"\nexpect eof',
    pp,
    "spawn ssh-add",
)
pp = human_pw()
S(
    F,
    "ssh_askpass_script_echo",
    f"#!/bin/sh\n# used as SSH_ASKPASS in the nightly job\necho '{pp}'",
    pp,
    "SSH_ASKPASS",
)

# ----------------------------------------------------------------- wifi ---
F = "wifi"
psk = human_pw()
S(
    F,
    "wpa_supplicant_psk",
    f'network={{\n    ssid="Acme-Office"\n    psk="{psk}"\n    key_mgmt=WPA-PSK\n}}',
    psk,
    'ssid="Acme-Office"',
)
psk = human_pw()
S(
    F,
    "nmcli_wifi_connect_password",
    f"nmcli device wifi connect 'Acme-Guest' password '{psk}'",
    psk,
    "nmcli device wifi connect",
)
psk = strong_pw(16)
S(
    F,
    "hostapd_wpa_passphrase",
    f"interface=wlan0\nssid=lab-ap\nwpa=2\nwpa_passphrase={psk}\nwpa_key_mgmt=WPA-PSK",
    psk,
    "interface=wlan0",
)
psk = human_pw()
S(
    F,
    "netsh_wlan_key_content",
    f"Security settings\n-----------------\n    Authentication         : WPA2-Personal\n    Cipher                 : CCMP\n"
    f"    Security key           : Present\n    Key Content            : {psk}",
    psk,
    "Authentication         : WPA2-Personal",
)
psk = human_pw().replace(";", "")
S(
    F,
    "wifi_qr_string",
    f'qrencode -o wifi.png "WIFI:T:WPA;S:CoffeeLab;P:{psk};;"',
    psk,
    "qrencode -o wifi.png",
)

# ----------------------------------------------------------- basic_auth ---
F = "basic_auth"
ba = b64s("deploy:" + strong_pw(18))
S(
    F,
    "curl_header_authorization_basic",
    f'curl -H "Authorization: Basic {ba}" https://nexus.acme.io/service/rest/v1/components?repository=maven-releases',
    ba,
    "https://nexus.acme.io/service/rest/v1/components",
)
ba = b64s("metrics:" + strong_pw(18))
S(
    F,
    "nginx_proxy_set_header_basic",
    f'location /metrics/ {{\n    proxy_pass http://prometheus:9090/;\n    proxy_set_header Authorization "Basic {ba}";\n}}',
    ba,
    "location /metrics/",
)
p = strong_pw(18)
S(
    F,
    "python_b64encode_user_pass_bytes",
    f'auth = base64.b64encode(b"admin:{p}").decode()\nheaders = {{"Authorization": f"Basic {{auth}}"}}',
    p,
    "base64.b64encode(",
)
p = strong_pw(18)
S(F, "go_request_setbasicauth", f'req.SetBasicAuth("admin", "{p}")', p, "req.SetBasicAuth(")
ba = b64s("api:" + "key-" + hx(32))
S(
    F,
    "http_log_authorization_basic_line",
    f'10.0.0.7 - - [12/Jun/2024:10:11:12 +0000] "POST /v3/messages HTTP/1.1" 401 - headers={{"Authorization": "Basic {ba}"}}',
    ba,
    '"POST /v3/messages HTTP/1.1" 401',
)

# ===========================================================================
# HAM
# ===========================================================================

# ----------------------------------------------------------- git_hashes ---
F = "git_hashes"
H(
    F,
    f"commit {hx(40)}\nAuthor: Alice Example <alice@example.com>\nDate:   Tue Jun 11 10:12:44 2024 +0200",
)
H(F, f"HEAD is now at {hx(7)} fix(auth): refresh token rotation race")
H(F, f"{hx(7)} (HEAD -> main, origin/main) chore(deps): bump axios from 1.6.8 to 1.7.2")
H(F, f"Merge: {hx(7)} {hx(7)}")
H(F, f"diff --git a/src/auth/session.ts b/src/auth/session.ts\nindex {hx(7)}..{hx(7)} 100644")
H(F, f"Change-Id: I{hx(40)}")
H(F, f"$ git rev-parse HEAD\n{hx(40)}")
H(F, f"git cherry-pick {hx(40)}")
H(F, f"Updating {hx(7)}..{hx(7)}\nFast-forward\n src/config.py | 4 ++--")
H(F, f"git push origin {hx(40)}:refs/heads/release/2.4")
H(F, f"BUILD_SHA={hx(40)}")
H(
    F,
    f"[main {hx(7)}] Add password reset endpoint\n 3 files changed, 88 insertions(+), 2 deletions(-)",
)
H(F, f"This reverts commit {hx(40)}.")
H(F, f"go: downloading github.com/acme/auth v0.0.0-20240611093012-{hx(12)}")
H(F, f"{hx(40)} refs/tags/v2.4.0")
H(F, f"git bisect bad {hx(7)}")
H(
    F,
    f"Signed-off-by: Alice Example <alice@example.com>\nCo-authored-by: Bob <bob@example.com>\n(cherry picked from commit {hx(40)})",
)
H(
    F,
    f"  remote: Resolving deltas: 100% (12/12), completed with 7 local objects.\n   {hx(7)}..{hx(7)}  main -> main",
)

# -------------------------------------------------------------- digests ---
F = "digests"
H(F, f"Digest: sha256:{hx(64)}\nStatus: Downloaded newer image for postgres:16")
H(F, f"ghcr.io/acme/api@sha256:{hx(64)}")
H(
    F,
    f'"@babel/core@^7.24.0":\n  version "7.24.7"\n  resolved "https://registry.yarnpkg.com/@babel/core/-/core-7.24.7.tgz#{hx(40)}"\n  integrity sha512-{b64(64)}',
)
H(F, f'      "integrity": "sha512-{b64(64)}",')
H(F, f"github.com/stretchr/testify v1.9.0 h1:{b64(32)}")
H(F, f"github.com/stretchr/testify v1.9.0/go.mod h1:{b64(32)}")
H(F, f"requests==2.32.3 \\\n    --hash=sha256:{hx(64)} \\\n    --hash=sha256:{hx(64)}")
H(F, f"{hx(64)}  terraform_1.9.5_linux_amd64.zip")
H(
    F,
    f'[[package]]\nname = "serde"\nversion = "1.0.203"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{hx(64)}"',
)
H(F, f'ETag: "{hx(32)}"')
H(
    F,
    f'<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.3/dist/js/bootstrap.bundle.min.js" integrity="sha384-{b64(48)}" crossorigin="anonymous"></script>',
)
H(F, f'    hash = "sha256-{b64(32)}";')
H(F, f"$ md5sum backup-2024-06-01.sql.gz\n{hx(32)}  backup-2024-06-01.sql.gz")
H(F, f'    {{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:{hx(64)}"}},')
H(
    F,
    f"npm notice shasum:        {hx(40)}\nnpm notice integrity:     sha512-{b64(64)[:20]}[...]{b64(9)}",
)
H(F, f"IMAGE_DIGEST=sha256:{hx(64)}")
H(F, f"x-goog-hash: crc32c={b64(4)}\nx-goog-hash: md5={b64(16)}")
H(F, f"sha256sum: {hx(64)}  node-v20.14.0-linux-x64.tar.xz")
H(F, f"#12 writing image sha256:{hx(64)} done\n#12 naming to docker.io/acme/api:dev done")
H(F, f'  "content_hash": "{hx(64)}"')

# ------------------------------------------------------------------ ids ---
F = "ids"
H(F, f"Created order {uid()} for customer cus_{rs(14)}")
H(F, json.dumps({"id": uid(), "status": "queued", "attempt": 1}))
H(F, f"event_id={ulid()} type=user.signed_up")
H(F, f"segment ksuid={ksuid()}")
H(F, f"user_id: {nanoid()}")
H(F, f'db.orders.find({{ _id: ObjectId("{hx(24)}") }})')
H(F, f"pi_{rs(24)}  succeeded  42.00 EUR  2024-06-11 10:02")
H(F, f"Refunded charge ch_{rs(24)} (evt_{rs(24)})")
H(F, f"arn:aws:iam::{digits(12)}:role/github-actions-deploy")
H(F, f"i-0{hx(16)}  running  t3.medium  eu-west-1a  10.0.3.14")
H(F, f"Created security group sg-0{hx(16)} in vpc-0{hx(16)}")
H(F, f'  ami           = "ami-0{hx(16)}"')
H(F, f"pod/api-{rs(10, LOW + DIG)}-{rs(5, LOW + DIG)}   1/1     Running   0          3m12s")
H(F, f"/subscriptions/{uid()}/resourceGroups/rg-prod/providers/Microsoft.Web/sites/acme-api")
H(F, f"INSERT INTO sessions_audit (id, user_id, created_at) VALUES ('{uid()}', 42, now());")
H(F, f"Job {uid()} finished in 12.4s")
H(F, f"message_id={digits(19)} channel_id={digits(18)}")
H(F, f"Ticket JIRA-4821 linked to PR #{R.randint(100, 9999)} (node_id PR_kwDO{rs(16, B64URL)})")
H(F, f'"installation_id": {digits(8)}, "app_id": {digits(6)}')
H(F, f"Invoice in_{rs(24)} finalized for sub_{rs(24)}")
H(F, f"stripe trigger payment_intent.succeeded --override payment_intent:customer=cus_{rs(14)}")
H(F, f"acct_{rs(16)}")

# ---------------------------------------------------------- public_keys ---
F = "public_keys"
H(F, f"{ssh_ed25519_pub()} alice@laptop")
H(F, f"{ssh_rsa_pub()} bob@workstation")
H(F, f"github.com {ssh_ed25519_pub()}")
H(F, f'command="/usr/bin/rrsync /srv/backup",restrict {ssh_ed25519_pub()} backup@nas')
H(F, f"|1|{b64(20)}|{b64(20)} {ssh_ecdsa_pub()}")
H(F, f"# public key: age1{rs(58, BECH32)}")
H(F, f"creation_rules:\n  - path_regex: secrets/.*\\.yaml$\n    age: age1{rs(58, BECH32)}")
H(F, f"[Peer]\nPublicKey = {b64(32)}\nAllowedIPs = 10.8.0.0/24\nEndpoint = vpn.acme.io:51820")
H(F, f"$ wg genkey | tee privatekey | wg pubkey\n{b64(32)}")
H(
    F,
    "-----BEGIN PUBLIC KEY-----\n"
    + wrap(der_b64(bytes.fromhex("30820122300d06092a864886f70d01010105000382010f00"), 270))
    + "\n-----END PUBLIC KEY-----",
)
H(
    F,
    f"      Key fingerprint = {' '.join(HX(4) for _ in range(5))}  {' '.join(HX(4) for _ in range(5))}",
)
H(
    F,
    f"pub   ed25519 2024-01-15 [SC]\n      {HX(40)}\nuid           [ultimate] Alice Example <alice@example.com>\nsub   cv25519 2024-01-15 [E]",
)
H(F, f"The key fingerprint is:\nSHA256:{b64(32).rstrip('=')} alice@laptop")
H(
    F,
    f"ED25519 key fingerprint is SHA256:{b64(32).rstrip('=')}.\nThis key is not known by any other names.",
)
H(
    F,
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
    + wrap(base64.b64encode(b"\x98\x33\x04" + R.randbytes(300)).decode())
    + f"\n={b64(3)}\n-----END PGP PUBLIC KEY BLOCK-----",
)
H(
    F,
    json.dumps(
        {
            "keys": [
                {
                    "kty": "RSA",
                    "e": "AQAB",
                    "use": "sig",
                    "alg": "RS256",
                    "kid": hx(16),
                    "n": b64u(256),
                }
            ]
        }
    ),
)
H(F, f'gpg: key {HX(16)}: public key "Alice Example <alice@example.com>" imported')
H(F, f"{ssh_ed25519_pub()} deploy@ci")

# --------------------------------------------------------- certificates ---
F = "certificates"
H(F, "-----BEGIN CERTIFICATE-----\n" + cert_body() + "\n-----END CERTIFICATE-----")
H(
    F,
    f"  tls.crt: {b64s('-----BEGIN CERTIFICATE-----' + chr(10) + cert_body(400) + chr(10) + '-----END CERTIFICATE-----' + chr(10))}",
)
H(
    F,
    f"    certificate-authority-data: {b64s('-----BEGIN CERTIFICATE-----' + chr(10) + cert_body(500) + chr(10) + '-----END CERTIFICATE-----' + chr(10))}",
)
H(F, f"SHA256 Fingerprint={':'.join(HX(2) for _ in range(32))}")
H(F, f"        Serial Number:\n            {':'.join(hx(2) for _ in range(16))}")
H(F, f"  --discovery-token-ca-cert-hash sha256:{hx(64)}")
H(
    F,
    "-----BEGIN CERTIFICATE REQUEST-----\n"
    + wrap(b64(600))
    + "\n-----END CERTIFICATE REQUEST-----",
)
H(
    F,
    f"            X509v3 Subject Key Identifier: \n                {':'.join(HX(2) for _ in range(20))}",
)

# --------------------------------------------------------- placeholders ---
F = "placeholders"
for line in [
    "OPENAI_API_KEY=<your-api-key>",
    "export GITHUB_TOKEN=YOUR_TOKEN_HERE",
    "DB_PASSWORD=changeme",
    "api_key: xxxxxxxxxxxxxxxxxxxxxxxx",
    "password: ****",
    'const client = new OpenAI({ apiKey: "sk-..." });',
    "STRIPE_SECRET_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
    'token = "REPLACE_ME"',
    "mysql -u root -p<password> mydb",
    'curl -H "Authorization: Bearer <token>" https://api.example.com/v1/me',
    '"client_secret": "TODO: fill in from the console",',
    "SECRET_KEY=your-secret-key-here",
    "AWS_SECRET_ACCESS_KEY=...",
    'password = ""  # set via env',
    "docker login -u <username> -p <password> registry.example.com",
    "ANTHROPIC_API_KEY=sk-ant-xxxxxxxx",
    "export SLACK_BOT_TOKEN=xoxb-your-token",
    "JWT_SECRET=dummy",
    "postgres://user:password@localhost:5432/mydb",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "api_key = '${API_KEY}'",
    "DATABASE_URL=postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
    "Replace {{YOUR_API_KEY}} with the key from the dashboard.",
    "PASSWORD=",
]:
    H(F, line)

# ------------------------------------------------------------- env_refs ---
F = "env_refs"
for line in [
    "      password: ${DB_PASSWORD}",
    'PGPASSWORD="$PGPASSWORD" pg_dump -h "$DB_HOST" -U "$DB_USER" app > app.sql',
    "          NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
    '        run: echo "${{ secrets.GCP_SA_KEY }}" > /tmp/sa.json',
    "const apiKey = process.env.API_KEY;",
    'token = os.getenv("TOKEN")',
    "          value: {{ .Values.postgresql.auth.password | quote }}",
    "    password: '%env(DATABASE_PASSWORD)%'",
    '$headers = @{ Authorization = "Bearer $env:GITHUB_TOKEN" }',
    'secret_key_base: <%= ENV.fetch("SECRET_KEY_BASE") %>',
    'String pw = System.getenv("DB_PASS");',
    "  password = var.db_password",
    'docker run -e POSTGRES_PASSWORD="$POSTGRES_PASSWORD" postgres:16',
    "spring.datasource.password=${SPRING_DATASOURCE_PASSWORD}",
    'curl -u "$NEXUS_USER:$NEXUS_PASS" https://nexus.internal/service/rest/v1/status',
    "DATABASE_URL=postgres://${DB_USER}:${DB_PASS}@${DB_HOST}:5432/${DB_NAME}",
    'export VAULT_TOKEN="$(vault login -token-only -method=oidc)"',
    'ansible_become_pass: "{{ vault_become_pass }}"',
    "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-credentials\n        key: password",
    'auth_token = ENV["TWILIO_AUTH_TOKEN"]',
    'let key = std::env::var("OPENAI_API_KEY")?;',
    "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    'password = "${file("${path.module}/secrets/db_password.txt")}"',
    "export AWS_SECRET_ACCESS_KEY=$(jq -r .SecretAccessKey creds.json)",
]:
    H(F, line)

# ---------------------------------------------------- code_reads_secret ---
F = "code_reads_secret"
for line in [
    'password = getpass.getpass("Vault password: ")',
    'pw := os.Getenv("DB_PASS")',
    'token = keyring.get_password("github", "alice")',
    "def verify_api_key(key: str) -> bool:",
    "if not hmac.compare_digest(signature, expected):",
    'hashed = bcrypt.hashpw(password.encode("utf-8"), bcrypt.gensalt(rounds=12))',
    'const token = req.headers.authorization?.split(" ")[1];',
    'secret = client.access_secret_version(name=name).payload.data.decode("utf-8")',
    'read -rs -p "Password: " PW && echo',
    "func (s *Store) GetSecret(ctx context.Context, name string) ([]byte, error) {",
    "user.password_hash = generate_password_hash(form.password.data)",
    "if (!jwt.verify(token, process.env.JWT_SECRET)) throw new UnauthorizedError();",
    'api_key = request.headers.get("X-Api-Key")',
    'creds = service_account.Credentials.from_service_account_file("sa.json")',
    "password = forms.CharField(widget=forms.PasswordInput, min_length=12)",
    'value = sm.get_secret_value(SecretId="prod/db")["SecretString"]',
    'let password = rpassword::prompt_password("Password: ")?;',
    "if user is None or not check_password_hash(user.password_hash, password):",
    'req.Header.Set("Authorization", "Bearer "+token)',
    'headers = {"Authorization": f"Bearer {token}"}',
    "conn = psycopg2.connect(host=host, user=user, password=password, dbname=db)",
    'ssh.connect(hostname, username=user, key_filename=os.path.expanduser("~/.ssh/id_ed25519"))',
    's.login(os.environ["SMTP_USER"], os.environ["SMTP_PASSWORD"])',
    'client = Client(os.environ["TWILIO_ACCOUNT_SID"], os.environ["TWILIO_AUTH_TOKEN"])',
]:
    H(F, line)

# -------------------------------------------------------- cli_no_secret ---
F = "cli_no_secret"
for line in [
    "docker login -u alice --password-stdin < ~/.pw",
    'echo "$CR_PAT" | docker login ghcr.io -u USERNAME --password-stdin',
    "docker login -u alice registry.example.com",
    "cat ~/.ghcr_token | docker login ghcr.io -u alice --password-stdin",
    f"aws ecr get-login-password --region eu-west-1 | docker login --username AWS --password-stdin {digits(12)}.dkr.ecr.eu-west-1.amazonaws.com",
    "mysql -u root -p",
    'psql "$DATABASE_URL" -c "select 1"',
    "gh secret set NPM_TOKEN < token.txt",
    "vault kv get -field=password secret/db",
    "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text",
    'op read "op://Private/Postgres/password"',
    "export GITHUB_TOKEN=$(gh auth token)",
    "kubectl create secret generic db-credentials --from-file=password=./secrets/db_password.txt",
    "kubectl get secret db-credentials -o yaml",
    'ssh-keygen -t ed25519 -C "alice@example.com" -f ~/.ssh/id_ed25519',
    "gh auth login --with-token < ~/.config/gh-token",
    "npm login --registry=https://npm.pkg.github.com --scope=@acme",
    "redis-cli -h cache.internal --askpass",
    "htpasswd -c /etc/nginx/.htpasswd admin",
    "sshpass -f ~/.ssh/pi_pass ssh pi@raspberrypi.local",
    'openssl req -new -newkey rsa:4096 -nodes -keyout server.key -out server.csr -subj "/CN=api.acme.io"',
    "PGPASSFILE=~/.pgpass psql -h db.internal -U app",
    "git config --global credential.helper osxkeychain",
    "aws configure --profile staging",
    "az keyvault secret show --vault-name kv-acme-prod --name SqlAdminPassword --query value -o tsv",
    "vault operator unseal",
    "gcloud secrets versions access latest --secret=smtp-password",
    "openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout env:P12_PASS",
    "twine upload --repository testpypi dist/*",
    "mysql --defaults-extra-file=~/.my-prod.cnf -e 'SHOW DATABASES'",
    'echo "$KUBECONFIG_B64" | base64 -d > ~/.kube/config',
    "gpg --batch --passphrase-file /run/secrets/gpg_pass --decrypt backup.tar.gpg > backup.tar",
]:
    H(F, line)

# ------------------------------------------------------- sql_no_literal ---
F = "sql_no_literal"
for line in [
    "SELECT id, email, password_hash FROM users WHERE email = $1;",
    "ALTER TABLE users ADD COLUMN password_reset_token VARCHAR(64);",
    "CREATE USER 'app'@'%' IDENTIFIED WITH caching_sha2_password;",
    "UPDATE users SET password = $1, updated_at = now() WHERE id = $2;",
    "GRANT SELECT ON ALL TABLES IN SCHEMA public TO readonly;",
    "CREATE ROLE readonly NOLOGIN;",
    "ALTER ROLE app VALID UNTIL 'infinity';",
    "SELECT user, host, plugin, password_expired FROM mysql.user;",
    "INSERT INTO api_keys (id, prefix, key_hash, created_at) VALUES ($1, $2, $3, now());",
    "CREATE INDEX idx_tokens_expires_at ON auth_tokens (expires_at);",
    'postgres=# \\password postgres\nEnter new password for user "postgres": \nEnter it again: ',
    'cur.execute("ALTER ROLE app WITH PASSWORD %s", (new_password,))',
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
    'FATAL:  password authentication failed for user "app"',
    "SELECT rolname, rolpassword IS NOT NULL AS has_password FROM pg_authid;",
    "ALTER USER app WITH PASSWORD NULL;",
    "DELETE FROM sessions WHERE token_expires_at < now() - interval '7 days';",
    "CREATE TABLE secrets (id uuid PRIMARY KEY, name text NOT NULL, ciphertext bytea NOT NULL, nonce bytea NOT NULL);",
    "SHOW VARIABLES LIKE 'validate_password%';",
    "CREATE LOGIN [CORP\\svc_sql] FROM WINDOWS;",
]:
    H(F, line)

# ------------------------------------------------------- config_benign ---
F = "config_benign"
for line in [
    "TOKEN_TTL=3600",
    "MAX_PASSWORD_LENGTH=128",
    "PWD=/home/alice/project",
    "OLDPWD=/home/alice",
    "    key: app.kubernetes.io/name",
    "      secretName: tls-cert",
    "auth: true",
    "password_min_length: 12",
    "SESSION_COOKIE_SECURE=True",
    "JWT_ALGORITHM=HS256",
    "JWT_EXPIRES_IN=15m",
    "API_BASE_URL=https://api.example.com/v2",
    "always-auth=true",
    "registry=https://registry.npmjs.org/",
    "token_endpoint: https://oauth2.googleapis.com/token",
    "grant_type=client_credentials&scope=read:orders",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "AUTH_TYPE=oauth2",
    "encryption: aes-256-gcm\nkeySize: 2048",
    "sslmode=require",
    "spring.datasource.username=app",
    "[credential]\n\thelper = osxkeychain",
    "auth_method: password",
    "VAULT_ADDR=https://vault.internal:8200",
    "PasswordAuthentication no\nPubkeyAuthentication yes",
    "secret_store: aws-secretsmanager",
    "requirepass-file: /etc/redis/pass",
    "KEY_ROTATION_DAYS=90",
    "ssh_key_path: ~/.ssh/id_ed25519",
    "SECRET_KEY_FALLBACKS = []",
    "imagePullSecrets:\n  - name: regcred",
    "      - secretRef:\n          name: app-env",
    "ENCRYPTION_ALGORITHM=AES-256-GCM",
    "COOKIE_SAMESITE=Lax\nCOOKIE_HTTPONLY=true",
    "max_connections = 200\nshared_buffers = 4GB\npassword_encryption = scram-sha-256",
    "PubkeyAcceptedKeyTypes +ssh-rsa",
]:
    H(F, line)

# ------------------------------------------------------- urls_no_secret ---
F = "urls_no_secret"
for line in [
    "ssh://git@github.com/acme/infra.git",
    "git@github.com:acme/web.git",
    "https://alice@bitbucket.org/acme/mobile.git",
    "http://localhost:5432",
    "postgres://localhost/devdb",
    "postgresql://app@localhost:5432/app",
    "redis://localhost:6379/0",
    "https://acme-public.s3.amazonaws.com/brand/logo.png",
    f"https://cdn.acme.io/assets/app.{hx(8)}.js",
    f"https://github.com/acme/web/commit/{hx(40)}",
    f"https://accounts.google.com/o/oauth2/v2/auth?client_id={digits(12)}-{rs(32, LOW + DIG)}.apps.googleusercontent.com&redirect_uri=http%3A%2F%2Flocalhost%3A3000%2Fcallback&response_type=code&scope=openid%20email&state={hx(16)}",
    "https://example.com/orders?page=2&sort=desc&per_page=50",
    f"https://www.youtube.com/watch?v={rs(11, B64URL)}",
    "mongodb://mongo:27017/test",
    f"https://github.com/acme/web/actions/runs/{digits(10)}/job/{digits(11)}",
    "https://registry.npmjs.org/jsonwebtoken/-/jsonwebtoken-9.0.2.tgz",
    "http://127.0.0.1:8200/ui/vault/secrets/secret/kv/app%2Fdb/details?version=3",
    "https://login.microsoftonline.com/common/oauth2/v2.0/authorize?response_type=code&prompt=select_account",
    f"https://sentry.io/organizations/acme/issues/{digits(10)}/?project={digits(7)}",
    "file:///home/alice/project/docs/index.html",
    f"https://app.terraform.io/app/acme/workspaces/prod/runs/run-{rs(16, B64URL)}",
    "https://user@example.com is shown as the git remote after clone",
    f"https://d{rs(13, LOW + DIG)}.cloudfront.net/static/media/hero.{hx(20)}.webp",
]:
    H(F, line)

# ------------------------------------------------------- versions_paths ---
F = "versions_paths"
for line in [
    "node v20.14.0\nnpm 10.7.0",
    "Python 3.11.9",
    '"version": "4.17.21",',
    "/home/alice/.ssh/id_ed25519",
    "~/.aws/credentials",
    "src/auth/token_service.py",
    "tests/fixtures/aGVsbG8td29ybGQtZml4dHVyZQ.json",
    f"docker pull acme/api:{hx(7)}",
    f"ghcr.io/acme/api:v1.4.2@sha256:{hx(64)}",
    "go 1.22.4\ntoolchain go1.22.4",
    "Successfully installed cryptography-42.0.8 cffi-1.16.0 pycparser-2.22",
    "/var/run/secrets/kubernetes.io/serviceaccount/token",
    "/etc/ssl/private/server.key",
    "C:\\Users\\alice\\AppData\\Roaming\\npm\\node_modules",
    f"acme-web-{hx(10)}.tar.gz",
    "Kernel: 6.8.0-35-generic x86_64",
    "terraform-provider-aws_v5.54.1_x5",
    'openjdk version "21.0.3" 2024-04-16 LTS',
]:
    H(F, line)

# ------------------------------------------------------------- logs_ids ---
F = "logs_ids"
H(
    F,
    f"2024-06-12T10:11:02.123Z INFO  http request method=GET path=/healthz status=200 trace_id={hx(32)} span_id={hx(16)}",
)
H(F, f"X-Request-Id: {uid()}")
H(F, f"traceparent: 00-{hx(32)}-{hx(16)}-01")
H(F, f"REPORT RequestId: {uid()}\tDuration: 12.34 ms\tBilled Duration: 13 ms\tMemory Size: 256 MB")
H(F, f"x-amz-request-id: {HX(16)}\nx-amz-id-2: {b64(56)}")
H(F, f"cf-ray: {hx(16)}-FRA")
H(F, f"Idempotency-Key: {uid()}")
H(F, f'{{"level":"error","msg":"upstream timeout","correlationId":"{uid()}","durationMs":30001}}')
H(F, f"Sentry event sent: {hx(32)}")
H(F, f"Build ID: {uid()}\nStep #1: Already have image (with digest): gcr.io/cloud-builders/docker")
H(F, f"x-github-request-id: {HX(4)}:{HX(5)}:{HX(7)}:{HX(7)}:{HX(8)}")
H(F, f"[{hx(8)}] POST /api/v1/login 401 Unauthorized 12ms")
H(F, f"Error: Request failed with status code 429 (request id: req_{hx(32)})")
H(F, f"anthropic-request-id: req_{rs(24)}")
H(F, f"2024-06-12 10:11:02 DEBUG session created sid_prefix={hx(6)}… user=42 ip=10.0.0.7")
H(
    F,
    f'{{"@timestamp":"2024-06-12T10:11:02Z","pid":{R.randint(100, 99999)},"tid":"0x{hx(12)}","msg":"GC pause 12ms"}}',
)

# -------------------------------------------------------- ci_cache_keys ---
F = "ci_cache_keys"
H(F, "          key: ${{ runner.os }}-pip-${{ hashFiles('**/requirements.txt') }}")
H(F, f"Cache restored from key: Linux-pip-{hx(64)}")
H(F, f"Cache saved with key: node-modules-Linux-{hx(64)}")
H(F, "          restore-keys: |\n            ${{ runner.os }}-pip-")
H(
    F,
    f"Received 52428800 of 183500800 (28.6%), 49.9 MBs/sec\nCache Size: ~175 MB (183500800 B)\nCache restored successfully\nCache restored from key: setup-go-Linux-ubuntu22-go-1.22.4-{hx(64)}",
)
H(F, f"    - uses: actions/cache@{hx(40)} # v4.0.2")
H(F, "cache:\n  key: $CI_COMMIT_REF_SLUG\n  paths:\n    - node_modules/")
H(F, f"Checking out commit {hx(40)} on detached HEAD")
H(F, f"##[group]Run actions/setup-node@{hx(40)}")
H(F, f"gradle-{hx(32)}-{hx(32)}")
H(F, f"Restored cache key: v1-deps-{hx(40)}")

# --------------------------------------------------- public_identifiers ---
F = "public_identifiers"
H(F, f"const stripe = Stripe('pk_live_51{rs(97)}');")
H(F, f"NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=pk_test_51{rs(97)}")
H(F, f"GOOGLE_CLIENT_ID={digits(12)}-{rs(32, LOW + DIG)}.apps.googleusercontent.com")
H(F, f"GITHUB_APP_CLIENT_ID=Iv1.{hx(16)}")
H(F, f"AUTH0_DOMAIN=acme.eu.auth0.com\nAUTH0_CLIENT_ID={rs(32)}")
H(F, f"NEXT_PUBLIC_SUPABASE_URL=https://{rs(20, LOW)}.supabase.co")
H(F, f"MAPBOX_PUBLIC_TOKEN=pk.eyJ1IjoiYWNtZSIsImEiOiJ{rs(28, B64URL)}.{rs(22, B64URL)}")
H(F, f"NEXT_PUBLIC_POSTHOG_KEY=phc_{rs(43)}")
H(F, f"COGNITO_USER_POOL_ID=eu-west-1_{rs(9)}\nCOGNITO_APP_CLIENT_ID={rs(26, LOW + DIG)}")
H(F, f"AWS_ACCOUNT_ID={digits(12)}")
H(F, f"ALGOLIA_APP_ID={rs(10, UP + DIG)}")

# ---------------------------------------------------------- base64_data ---
F = "base64_data"
H(
    F,
    f'<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAA{b64(120)}" alt="logo">',
)
H(F, "$ echo aGVsbG8gd29ybGQ= | base64 -d\nhello world")
H(F, "Content-Transfer-Encoding: base64")
H(F, f"  src: url(data:font/woff2;base64,d09GMgABAAAAA{b64(150)}) format('woff2');")
H(F, f"binaryData:\n  favicon.ico: AAABAAEAEBAAAAEAIABoBAAAFgAAACgAAAAQ{b64(90)}")
H(
    F,
    f"data:image/svg+xml;base64,{b64s('<svg xmlns=' + chr(34) + 'http://www.w3.org/2000/svg' + chr(34) + ' viewBox=' + chr(34) + '0 0 10 10' + chr(34) + '><circle cx=' + chr(34) + '5' + chr(34) + ' cy=' + chr(34) + '5' + chr(34) + ' r=' + chr(34) + '4' + chr(34) + '/></svg>')}",
)
H(F, f"  config.json: {b64s(json.dumps({'logLevel': 'info', 'features': ['search', 'export']}))}")
_pl = b64s(json.dumps({"event": "page_view", "path": "/pricing"}))
H(F, json.dumps({"payload": _pl, "encoding": "base64"}))

# ----------------------------------------------------- code_identifiers ---
F = "code_identifiers"
for line in [
    "private long authenticationTokenRefreshIntervalMillis = 300_000L;",
    "class PasswordResetTokenGenerator(PasswordResetTokenGeneratorBase):",
    'import jwt from "jsonwebtoken";',
    'import { createTokenAuth } from "@octokit/auth-token";',
    "npm install secret-handshake csrf-token keytar",
    'const API_KEY_HEADER = "X-Api-Key";',
    "password = models.CharField(max_length=128)",
    'type Credentials struct {\n\tUsername string `json:"username"`\n\tPassword string `json:"password"`\n}',
    'assertEquals("password", field.getName());',
    "def rotate_client_secret(app_id: str) -> ClientSecretRotationResult:",
    "export function useAccessTokenOrRefresh(): UseAccessTokenResult {",
    'SECRET_PATTERNS = re.compile(r"(?i)(api[_-]?key|secret|token)\\s*[:=]")',
    "it('rejects an expired refresh token', async () => {",
    "fn derive_key_from_passphrase(passphrase: &[u8], salt: &[u8; 16]) -> [u8; 32] {",
    "public interface ISecretProvider { Task<string> GetSecretAsync(string name); }",
    "from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey",
    "key = Ed25519PrivateKey.generate()",
    "    test_login_with_wrong_password_returns_401 PASSED",
]:
    H(F, line)

# ---------------------------------------------------------- policy_text ---
F = "policy_text"
for line in [
    "Passwords must be at least 12 characters and contain a number and a symbol.",
    "Your token will expire in 30 days.",
    "Error: invalid api key",
    '{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}',
    "Never commit .env files; add them to .gitignore.",
    "Remember to rotate the secret after the incident review.",
    "ValueError: Fernet key must be 32 url-safe base64-encoded bytes.",
    "Password: ",
    "Enter passphrase (empty for no passphrase): ",
    "Token has been revoked.",
    "Generating public/private ed25519 key pair.",
    "Your identification has been saved in /home/alice/.ssh/id_ed25519",
    "remote: Support for password authentication was removed on August 13, 2021.",
    "WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
    "Login Succeeded",
    "hint: the API key is shown only once; store it in your password manager",
]:
    H(F, line)

# -------------------------------------------------------- masked_values ---
F = "masked_values"
for line in [
    "AWS_SECRET_ACCESS_KEY=****************",
    'token: "[REDACTED]"',
    f"  - Token: gho_{'*' * 36}",
    "Set-Cookie: session=; Max-Age=0; Path=/",
    "DB_PASSWORD=<redacted>",
    f"Using key sk-...{rs(4)} for requests",
    "Authorization: Bearer ***",
    "password: '********'",
    "  ::add-mask::***",
    f"Token: ****{hx(4)} (created 2024-06-01, last used 3 hours ago)",
]:
    H(F, line)

# ===========================================================================
# checks
# ===========================================================================

del F

_fmt_family: dict[str, str] = {}
for _s in SECRETS:
    assert _s.secret, f"empty secret in {_s.fmt}"
    assert _s.secret in _s.text, f"secret not in text: {_s.family}/{_s.fmt}"
    assert not _s.keep or _s.keep in _s.text, f"keep not in text: {_s.family}/{_s.fmt}"
    assert not _s.keep or _s.secret not in _s.keep, f"keep contains secret: {_s.family}/{_s.fmt}"
    # an fmt label belongs to exactly one family
    assert _fmt_family.setdefault(_s.fmt, _s.family) == _s.family, (
        f"fmt {_s.fmt} used in two families"
    )
assert len({(s.family, s.fmt, s.text) for s in SECRETS}) == len(SECRETS), "duplicate secret sample"
assert len({(s.family, s.fmt) for s in SECRETS}) == len(SECRETS), "an fmt label is reused"
assert len(SECRETS) >= 170, len(SECRETS)
assert len(_fmt_family) >= 65, len(_fmt_family)
assert len({s.family for s in SECRETS}) >= 10

assert len(HAM) >= 170, len(HAM)
assert len({h.family for h in HAM}) >= 15
assert len({h.text for h in HAM}) == len(HAM), "duplicate ham line"
# no generated secret value leaks into a ham line
_ham_blob = "\n".join(h.text for h in HAM)
for _s in SECRETS:
    assert _s.secret not in _ham_blob, f"secret of {_s.fmt} appears in ham"
del _s, _ham_blob


if __name__ == "__main__":
    sc = Counter(s.family for s in SECRETS)
    hc = Counter(h.family for h in HAM)
    print(
        f"SECRETS: {len(SECRETS)} samples, {len(_fmt_family)} distinct fmt labels, {len(sc)} families"
    )
    for fam, n in sc.items():
        print(f"  {fam:22s} {n}")
    print(f"HAM: {len(HAM)} lines, {len(hc)} families")
    for fam, n in hc.items():
        print(f"  {fam:22s} {n}")
