"""[Corpus blind-b, written by a helper who saw neither the detector nor any other corpus. Held out while the detector was tuned on blind-a; scored once, then looked at.]

Blind held-out corpus "B" for a secret redactor working on coding-agent transcripts.

Everything random is produced at import time from one seeded ``random.Random`` so the
corpus is deterministic, and no realistic credential literal lives in this file.

SECRETS: text snippets (chat, shell commands, tool output, code / config excerpts) each
containing exactly one value (``secret``) that must not survive redaction, plus an
optional ``keep`` substring that a good redactor should leave readable.

HAM: ordinary lines that must come through byte-for-byte unchanged.  Policy decisions:
  * a computed digest of (public) data is ham: content hashes, checksums, SRI hashes,
    git object ids, HMAC test-vector outputs computed with a published key, webhook
    signature headers;
  * public material is ham: public keys, certificates, fingerprints, addresses,
    publishable / public client ids, ARNs, resource ids;
  * ciphertext designed to be committed (SOPS, SealedSecrets, ansible-vault, age
    armour, KMS blobs) is ham;
  * crackable hashes of real account passwords (shadow, htpasswd, IOS ``enable
    secret 5``) and anything replayable are secrets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import string
import struct
import urllib.parse
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


SEED = 0x5EC2B
R = random.Random(SEED)

# --------------------------------------------------------------------------- alphabets
LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
LETTERS = string.ascii_letters
DIGITS = string.digits
ALNUM = LETTERS + DIGITS
LALNUM = LOWER + DIGITS
UALNUM = UPPER + DIGITS
HEXL = "0123456789abcdef"
B64CH = ALNUM + "+/"
B64U = ALNUM + "-_"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
B32 = UPPER + "234567"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
CROCK = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# symbol sets for human passwords depending on where they are pasted
SQLSYM = "!#%*?@^&"  # inside single-quoted SQL / shell
SHQ = "#%*-_.@^"  # inside double-quoted shell (no $ ! `)
URLSYM = "-_.~"  # URL userinfo without percent-encoding
CONNSYM = "!#%*-_.@"  # key=value;key=value connection strings
BARE = ""  # bare words (no symbol at all)


# --------------------------------------------------------------------------- helpers
def rs(alpha: str, n: int) -> str:
    return "".join(R.choice(alpha) for _ in range(n))


def hx(n: int) -> str:
    return rs(HEXL, n)


def HX(n: int) -> str:
    return hx(n).upper()


def rb(n: int) -> bytes:
    return R.randbytes(n)


def b64(n: int) -> str:
    return base64.b64encode(rb(n)).decode()


def b64url(n: int) -> str:
    return base64.urlsafe_b64encode(rb(n)).decode().rstrip("=")


def b64s(s: str | bytes) -> str:
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


def b64us(s: str | bytes) -> str:
    if isinstance(s, str):
        s = s.encode()
    return base64.urlsafe_b64encode(s).decode().rstrip("=")


def digits(n: int) -> str:
    return str(R.randint(1, 9)) + rs(DIGITS, n - 1)


def uid() -> str:
    return str(uuid.UUID(bytes=rb(16), version=4))


def wrap(s: str, width: int = 64) -> str:
    return "\n".join(s[i : i + width] for i in range(0, len(s), width))


WORDS = [
    "pelican",
    "granite",
    "harbor",
    "maple",
    "falcon",
    "orchid",
    "tundra",
    "copper",
    "lantern",
    "meadow",
    "walrus",
    "saffron",
    "juniper",
    "cobalt",
    "thistle",
    "marble",
    "otter",
    "quartz",
    "bramble",
    "cedar",
    "sparrow",
    "nimbus",
    "velvet",
    "pumpkin",
    "glacier",
    "mango",
    "raven",
    "willow",
    "ember",
    "badger",
    "coral",
    "summit",
    "hazel",
    "pepper",
    "lobster",
    "sequoia",
    "comet",
    "biscuit",
    "mosaic",
    "tiger",
    "avocado",
    "bluebird",
    "cactus",
    "dolphin",
    "eclipse",
    "fjord",
    "gopher",
    "hammock",
]
ENVS = ["staging", "prod", "dev", "qa", "uat", "test", "local", "preprod", "sandbox"]
SEASONS = ["Spring", "Summer", "Autumn", "Winter"]
COMPANY = [
    "acme",
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "wayne",
    "stark",
    "tyrell",
    "cyberdyne",
    "wonka",
    "vandelay",
    "soylent",
]


def _leet(w: str) -> str:
    return w.translate(str.maketrans({"a": "4", "o": "0", "e": "3", "i": "1"}))


def human_pw(syms: str = "!#%*?@&") -> str:
    """A password a human would pick: word+digits+symbol, word-env, season+year..."""
    k = R.randrange(8)
    w, w2 = R.choice(WORDS), R.choice(WORDS)
    sym = R.choice(syms) if syms else ""
    if k == 0:
        return f"{w.capitalize()}{sym}{R.randint(1000, 9999)}"
    if k == 1:
        return f"{w}-{R.choice(ENVS)}"
    if k == 2:
        return f"{R.choice(SEASONS)}{R.randint(2019, 2025)}{sym}"
    if k == 3:
        return f"{w.capitalize()}{w2.capitalize()}{R.randint(10, 99)}{sym}"
    if k == 4:
        return f"{_leet(w).capitalize()}{R.randint(10, 99)}{sym}"
    if k == 5:
        return f"{R.choice(COMPANY).capitalize()}{sym}{R.choice(ENVS)}{R.randint(1, 99):02d}"
    if k == 6:
        s2 = sym or "-"
        return f"{w}{s2}{w2}{s2}{R.randint(1, 9)}"
    return f"{R.choice(COMPANY)}{R.choice(ENVS)}{R.randint(100, 999)}"


def mpw(n: int = 20, alpha: str = ALNUM) -> str:
    """A machine-generated password."""
    return rs(alpha, n)


def jwt(claims: dict | None = None, alg: str = "HS256", sig_bytes: int = 32) -> str:
    hdr = {"alg": alg, "typ": "JWT"}
    if alg.startswith("RS"):
        hdr["kid"] = b64url(20)
    now = 1718000000 + R.randint(0, 5000000)
    body = (
        claims
        if claims is not None
        else {
            "sub": digits(6),
            "iat": now,
            "exp": now + 3600,
            "scope": R.choice(["read write", "api", "admin", "openid profile"]),
        }
    )

    def enc(o):
        return b64us(json.dumps(o, separators=(",", ":")))

    return f"{enc(hdr)}.{enc(body)}.{b64url(sig_bytes)}"


# --------------------------------------------------------------------------- provider shapes
def aws_akid(prefix: str = "AKIA") -> str:
    return prefix + rs(UPPER + "234567", 16)


def aws_secret() -> str:
    return rs(ALNUM + "+/", 40)


def ghp() -> str:
    return "ghp_" + rs(ALNUM, 36)


def gho() -> str:
    return "gho_" + rs(ALNUM, 36)


def ghs() -> str:
    return "ghs_" + rs(ALNUM, 36)


def ghr() -> str:
    return "ghr_" + rs(ALNUM, 76)


def github_pat() -> str:
    return "github_pat_" + rs(ALNUM, 22) + "_" + rs(ALNUM, 59)


def glpat() -> str:
    return "glpat-" + rs(ALNUM + "-_", 20)


def glrt() -> str:
    return "glrt-" + rs(ALNUM + "-_", 20)


def npm_tok() -> str:
    return "npm_" + rs(ALNUM, 36)


def pypi_tok() -> str:
    return "pypi-AgEIcHlwaS5vcmc" + rs(B64U, 150)


def hvs() -> str:
    return "hvs." + (rs(ALNUM, 24) if R.random() < 0.5 else "CAESI" + rs(B64U, 86))


def ya29() -> str:
    return "ya29.a0" + rs(B64U, 160)


def xoxb() -> str:
    return f"xoxb-{digits(12)}-{digits(13)}-{rs(ALNUM, 24)}"


def xoxp() -> str:
    return f"xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{hx(32)}"


def xapp() -> str:
    return f"xapp-1-A{rs(UALNUM, 10)}-{digits(13)}-{hx(64)}"


def sk_live() -> str:
    return "sk_live_51" + rs(ALNUM, 97)


def sk_test() -> str:
    return "sk_test_" + rs(ALNUM, 24)


def rk_live() -> str:
    return "rk_live_51" + rs(ALNUM, 97)


def whsec() -> str:
    return "whsec_" + rs(ALNUM, 32)


def openai_key() -> str:
    return "sk-proj-" + rs(B64U, 74) + "T3BlbkFJ" + rs(B64U, 74)


def openai_legacy() -> str:
    return "sk-" + rs(ALNUM, 20) + "T3BlbkFJ" + rs(ALNUM, 20)


def anthropic_key() -> str:
    return "sk-ant-api03-" + rs(B64U, 93) + "AA"


def aiza() -> str:
    return "AIza" + rs(B64U, 35)


def gocspx() -> str:
    return "GOCSPX-" + rs(B64U, 28)


def sendgrid() -> str:
    return "SG." + rs(B64U, 22) + "." + rs(B64U, 43)


def hf_tok() -> str:
    return "hf_" + rs(LETTERS, 34)


def dop() -> str:
    return "dop_v1_" + hx(64)


def shpat() -> str:
    return "shpat_" + hx(32)


def discord_bot() -> str:
    return b64us(digits(18)) + "." + rs(B64U, 6) + "." + rs(B64U, 38)


def telegram_bot() -> str:
    return digits(10) + ":AA" + rs(B64U, 33)


def azure_client_secret() -> str:
    return rs(ALNUM, 3) + R.choice(DIGITS) + "Q~" + rs(ALNUM + "~._-", 34)


def google_refresh() -> str:
    return "1//0" + rs(B64U, 100)


def bip_code() -> str:
    return f"{hx(5)}-{hx(5)}"


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
]


def mnemonic(n: int = 12) -> str:
    return " ".join(R.choice(BIP39) for _ in range(n))


# --------------------------------------------------------------------------- key material
def sshstr(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def ed25519_pkcs8() -> bytes:
    return bytes.fromhex("302e020100300506032b657004220420") + rb(32)


def ec_sec1() -> bytes:
    return (
        bytes.fromhex("30770201010420")
        + rb(32)
        + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
        + b"\x04"
        + rb(64)
    )


def ec_pkcs8() -> bytes:
    return (
        bytes.fromhex("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420")
        + rb(32)
        + bytes.fromhex("a144034200")
        + b"\x04"
        + rb(64)
    )


def rsa2048_pkcs8() -> bytes:
    hdr = bytes.fromhex(
        "308204bd020100300d06092a864886f70d0101010500048204a7308204a30201000282010100"
    )
    return hdr + rb(4 + 0x4BD - len(hdr))


def rsa1024_pkcs1() -> bytes:
    hdr = bytes.fromhex("3082025c02010002818100")
    return hdr + rb(4 + 0x25C - len(hdr))


def encrypted_pkcs8() -> bytes:
    hdr = bytes.fromhex("3081ee305906092a864886f70d01050d304c")
    return hdr + rb(3 + 0xEE - len(hdr))


def pem(label: str, der: bytes) -> tuple[str, str]:
    body = wrap(base64.b64encode(der).decode(), 64)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def openssh_ed25519(comment: str) -> tuple[str, str, str]:
    pub, priv = rb(32), rb(32)
    pubblob = sshstr(b"ssh-ed25519") + sshstr(pub)
    chk = rb(4)
    sec_ = (
        chk
        + chk
        + sshstr(b"ssh-ed25519")
        + sshstr(pub)
        + sshstr(priv + pub)
        + sshstr(comment.encode())
    )
    pad = 1
    while len(sec_) % 8:
        sec_ += bytes([pad])
        pad += 1
    blob = (
        b"openssh-key-v1\0"
        + sshstr(b"none")
        + sshstr(b"none")
        + sshstr(b"")
        + struct.pack(">I", 1)
        + sshstr(pubblob)
        + sshstr(sec_)
    )
    body = wrap(base64.b64encode(blob).decode(), 70)
    full = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----"
    publine = "ssh-ed25519 " + base64.b64encode(pubblob).decode() + " " + comment
    return full, body, publine


def ssh_ed25519_pub(comment: str) -> str:
    return "ssh-ed25519 " + b64s(sshstr(b"ssh-ed25519") + sshstr(rb(32))) + " " + comment


def ssh_rsa_pub(comment: str) -> str:
    blob = sshstr(b"ssh-rsa") + sshstr(b"\x01\x00\x01") + sshstr(b"\x00\xc1" + rb(255))
    return "ssh-rsa " + b64s(blob) + " " + comment


def ssh_ecdsa_pub() -> str:
    blob = sshstr(b"ecdsa-sha2-nistp256") + sshstr(b"nistp256") + sshstr(b"\x04" + rb(64))
    return "ecdsa-sha2-nistp256 " + b64s(blob)


def cert_pem() -> str:
    der = bytes.fromhex("308201f430820199a0030201020214") + rb(20 + 460)
    return pem("CERTIFICATE", der)[0]


SECRETS: list[Secret] = []
HAM: list[Ham] = []


def sec(family: str, fmt: str, text: str, secret: str, keep: str = "") -> None:
    SECRETS.append(Secret(family, fmt, text, secret, keep))


def ham(family: str, *texts: str) -> None:
    for t in texts:
        HAM.append(Ham(family, t))


# =========================================================================== sql_passwords
F = "sql_passwords"
p = human_pw(SQLSYM)
sec(
    F,
    "pg_create_user_with_password",
    f"CREATE USER app_rw WITH PASSWORD '{p}';",
    p,
    "CREATE USER app_rw",
)
p = human_pw(SQLSYM)
sec(
    F,
    "pg_alter_role_login_valid_until",
    f"ALTER ROLE reporting WITH LOGIN PASSWORD '{p}' VALID UNTIL '2025-12-31';",
    p,
    "ALTER ROLE reporting",
)
p = mpw(18)
sec(
    F,
    "mysql_create_user_identified_by",
    f"CREATE USER 'svc_orders'@'%' IDENTIFIED BY '{p}';",
    p,
    "IDENTIFIED BY",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysql_alter_user_identified_with_plugin",
    f"ALTER USER 'root'@'localhost' IDENTIFIED WITH mysql_native_password BY '{p}';",
    p,
    "ALTER USER",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysql_set_password_for",
    f"mysql> SET PASSWORD FOR 'bob'@'10.0.%' = '{p}';\nQuery OK, 0 rows affected (0.01 sec)",
    p,
    "SET PASSWORD FOR",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysql_grant_identified_by_legacy",
    f"GRANT ALL PRIVILEGES ON shop.* TO 'shop'@'localhost' IDENTIFIED BY '{p}' WITH GRANT OPTION;",
    p,
    "GRANT ALL PRIVILEGES",
)
p = R.choice(UPPER) + mpw(11)
sec(
    F,
    "oracle_create_user_unquoted",
    f"CREATE USER hr_app IDENTIFIED BY {p}\n  DEFAULT TABLESPACE users\n  QUOTA 100M ON users;",
    p,
    "CREATE USER hr_app",
)
p = human_pw(SQLSYM)
sec(
    F,
    "oracle_alter_user_quoted_unlock",
    f'SQL> ALTER USER system IDENTIFIED BY "{p}" ACCOUNT UNLOCK;\n\nUser altered.',
    p,
    "ALTER USER system",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mssql_create_login_nstring",
    f"CREATE LOGIN [etl_user] WITH PASSWORD = N'{p}', CHECK_POLICY = OFF, DEFAULT_DATABASE = [staging];\nGO",
    p,
    "CREATE LOGIN",
)
p = mpw(16)
sec(
    F,
    "mssql_alter_login_sa",
    f"ALTER LOGIN [sa] WITH PASSWORD = '{p}';\nALTER LOGIN [sa] ENABLE;",
    p,
    "ALTER LOGIN",
)
p = human_pw(CONNSYM)
sec(
    F,
    "pg_dblink_connstr",
    f"SELECT t.id, t.total\nFROM dblink('host=10.20.0.4 port=5432 dbname=ledger user=ledger_ro password={p}',\n"
    f"            'SELECT id, total FROM invoices') AS t(id int, total numeric);",
    p,
    "dblink",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysql_fdw_server_and_user_mapping",
    "CREATE EXTENSION IF NOT EXISTS mysql_fdw;\n"
    "CREATE SERVER legacy_mysql FOREIGN DATA WRAPPER mysql_fdw OPTIONS (host '10.0.3.7', port '3306');\n"
    "CREATE USER MAPPING FOR app_user SERVER legacy_mysql\n"
    f"    OPTIONS (username 'legacy_ro', password '{p}');",
    p,
    "CREATE USER MAPPING",
)
p = mpw(24)
sec(
    F,
    "postgres_fdw_user_mapping_public",
    f"CREATE USER MAPPING FOR PUBLIC SERVER warehouse OPTIONS (user 'wh_reader', password '{p}');",
    p,
    "USER MAPPING",
)
p = human_pw(SQLSYM)
sec(
    F,
    "pg_alter_user_mapping_set_password",
    f"ALTER USER MAPPING FOR analytics SERVER warehouse OPTIONS (SET password '{p}');",
    p,
    "ALTER USER MAPPING",
)
p = human_pw(SHQ)
sec(
    F,
    "psql_c_create_role",
    f"$ psql -h db.internal -U postgres -c \"CREATE ROLE grafana WITH LOGIN PASSWORD '{p}';\"\nCREATE ROLE",
    p,
    "psql -h db.internal",
)
p = human_pw(SHQ)
sec(
    F,
    "mysql_e_alter_user_flush",
    f"mysql -h 127.0.0.1 -uroot -e \"ALTER USER 'wp'@'%' IDENTIFIED BY '{p}'; FLUSH PRIVILEGES;\"",
    p,
    "mysql -h 127.0.0.1",
)
p = human_pw(SHQ)
sec(
    F,
    "sqlcmd_q_create_login",
    f"sqlcmd -S tcp:sql01.corp.local,1433 -E -Q \"CREATE LOGIN [svc_bi] WITH PASSWORD=N'{p}', DEFAULT_DATABASE=[reporting]\"",
    p,
    "sqlcmd",
)
p = human_pw(SQLSYM)
sec(
    F,
    "snowflake_create_user",
    f"CREATE USER loader PASSWORD = '{p}' DEFAULT_ROLE = LOADER DEFAULT_WAREHOUSE = LOAD_WH MUST_CHANGE_PASSWORD = FALSE;",
    p,
    "CREATE USER loader",
)
p = mpw(22)
sec(
    F,
    "clickhouse_identified_with_sha256",
    f"CREATE USER IF NOT EXISTS metrics IDENTIFIED WITH sha256_password BY '{p}' HOST IP '10.0.0.0/8';",
    p,
    "sha256_password",
)
p = R.choice(UPPER) + mpw(14) + R.choice(DIGITS)
sec(
    F,
    "redshift_create_user_connection_limit",
    f"create user etl_loader password '{p}' connection limit 10;",
    p,
    "create user etl_loader",
)
p = human_pw(SQLSYM)
sec(
    F,
    "cockroach_create_user_if_not_exists",
    f"root@localhost:26257/defaultdb> CREATE USER IF NOT EXISTS roach WITH PASSWORD '{p}';\nCREATE ROLE",
    p,
    "CREATE USER",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mariadb_ed25519_using_password",
    f"CREATE USER IF NOT EXISTS 'backup'@'localhost' IDENTIFIED VIA ed25519 USING PASSWORD('{p}');",
    p,
    "IDENTIFIED VIA ed25519",
)
p = human_pw(SQLSYM)
sec(
    F,
    "flyway_migration_encrypted_password",
    f"-- V7__reporting_role.sql\nCREATE ROLE reporting_ro LOGIN ENCRYPTED PASSWORD '{p}';\nGRANT pg_read_all_data TO reporting_ro;",
    p,
    "V7__reporting_role.sql",
)
p = R.choice(UPPER) + mpw(9)
sec(
    F,
    "db2_connect_using",
    f'$ db2 "CONNECT TO SAMPLE USER db2inst1 USING {p}"\n\n   Database Connection Information\n\n Database server        = DB2/LINUXX8664 11.5.8.0',
    p,
    "CONNECT TO SAMPLE",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mssql_sp_addlinkedsrvlogin",
    f"EXEC master.dbo.sp_addlinkedsrvlogin @rmtsrvname = N'LEGACY01', @useself = N'False', "
    f"@locallogin = NULL, @rmtuser = N'link_reader', @rmtpassword = N'{p}';",
    p,
    "sp_addlinkedsrvlogin",
)
p = R.choice(UPPER) + mpw(11)
sec(
    F,
    "oracle_create_database_link",
    f"CREATE DATABASE LINK fin_link CONNECT TO fin_ro IDENTIFIED BY {p} USING 'FINPROD';",
    p,
    "CREATE DATABASE LINK",
)
p = mpw(20)
sec(
    F,
    "mysql_change_replication_source",
    "CHANGE REPLICATION SOURCE TO\n  SOURCE_HOST='10.0.0.5',\n  SOURCE_USER='repl',\n"
    f"  SOURCE_PASSWORD='{p}',\n  SOURCE_AUTO_POSITION=1;\nSTART REPLICA;",
    p,
    "CHANGE REPLICATION SOURCE",
)
p = mpw(20)
sec(
    F,
    "pg_create_subscription_connection",
    f"CREATE SUBSCRIPTION orders_sub\n  CONNECTION 'host=10.1.2.3 port=5432 user=repl password={p} dbname=orders sslmode=require'\n"
    "  PUBLICATION orders_pub;",
    p,
    "CREATE SUBSCRIPTION",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mssql_create_master_key",
    f"USE [payroll];\nCREATE MASTER KEY ENCRYPTION BY PASSWORD = '{p}';",
    p,
    "CREATE MASTER KEY",
)
sig = urllib.parse.quote(b64(32), safe="")
sec(
    F,
    "mssql_database_scoped_credential_sas",
    "CREATE DATABASE SCOPED CREDENTIAL blob_cred\n  WITH IDENTITY = 'SHARED ACCESS SIGNATURE',\n"
    f"  SECRET = 'sv=2022-11-02&ss=b&srt=co&sp=rl&se=2025-03-01T00:00:00Z&spr=https&sig={sig}';",
    sig,
    "CREATE DATABASE SCOPED CREDENTIAL",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mssql_open_symmetric_key_password",
    f"OPEN SYMMETRIC KEY SSN_Key_01 DECRYPTION BY PASSWORD = '{p}';\nSELECT CONVERT(varchar, DecryptByKey(ssn_enc)) FROM dbo.employees;",
    p,
    "OPEN SYMMETRIC KEY",
)
k = mpw(32)
sec(
    F,
    "pgcrypto_pgp_sym_encrypt_key",
    f"UPDATE customers SET ssn_enc = pgp_sym_encrypt(ssn, '{k}') WHERE ssn_enc IS NULL;",
    k,
    "pgp_sym_encrypt",
)
k = hx(32)
sec(
    F,
    "mysql_aes_encrypt_key",
    f"INSERT INTO cards (user_id, pan_enc) VALUES (42, AES_ENCRYPT('4111111111111111', UNHEX(SHA2('{k}', 256))));",
    k,
    "AES_ENCRYPT",
)
p = mpw(16)
sec(
    F,
    "psql_meta_connect_conninfo",
    f'postgres=# \\c "dbname=billing user=billing_admin password={p} host=pg-billing.internal"\n'
    'You are now connected to database "billing" as user "billing_admin".',
    p,
    "You are now connected",
)
gp = rs(ALNUM + "<>;:,./?!%&*()[]{}-_=+^~", 20)
sec(
    F,
    "mysql_random_password_result_table",
    "mysql> CREATE USER 'ci_runner'@'%' IDENTIFIED BY RANDOM PASSWORD;\n"
    "+-----------+------+----------------------+-------------+\n"
    "| user      | host | generated password   | auth_factor |\n"
    "+-----------+------+----------------------+-------------+\n"
    f"| ci_runner | %    | {gp} |           1 |\n"
    "+-----------+------+----------------------+-------------+",
    gp,
    "IDENTIFIED BY RANDOM PASSWORD",
)

# =========================================================================== code_literals
F = "code_literals"
p = human_pw()
sec(
    F,
    "python_os_environ_setitem",
    f'import os\n\nos.environ["DB_PASSWORD"] = "{p}"\nfrom app.db import engine',
    p,
    "DB_PASSWORD",
)
p = mpw(24)
sec(
    F,
    "python_os_environ_setdefault",
    f'os.environ.setdefault("REDIS_PASSWORD", "{p}")',
    p,
    "REDIS_PASSWORD",
)
k = b64url(48)
sec(
    F,
    "node_process_env_assign",
    f"process.env.JWT_SECRET = '{k}';\nconst app = require('./app');",
    k,
    "JWT_SECRET",
)
t = hvs()
sec(
    F,
    "go_os_setenv",
    f'\tos.Setenv("VAULT_TOKEN", "{t}")\n\tclient, err := vault.NewClient(vault.DefaultConfig())',
    t,
    "VAULT_TOKEN",
)
p = human_pw()
sec(
    F,
    "rust_env_set_var",
    f'    std::env::set_var("DATABASE_PASSWORD", "{p}");',
    p,
    "DATABASE_PASSWORD",
)
p = human_pw()
sec(
    F,
    "java_system_setproperty_keystore",
    f'System.setProperty("javax.net.ssl.keyStorePassword", "{p}");',
    p,
    "javax.net.ssl.keyStorePassword",
)
p = human_pw()
sec(
    F,
    "csharp_set_environment_variable",
    f'Environment.SetEnvironmentVariable("SQL_PWD", "{p}");',
    p,
    "SQL_PWD",
)
p = human_pw()
sec(F, "ruby_env_hash_assign", f'ENV["SIDEKIQ_WEB_PASSWORD"] = "{p}"', p, "SIDEKIQ_WEB_PASSWORD")
p = human_pw()
sec(F, "php_putenv", f'putenv("MAIL_PASSWORD={p}");', p, "MAIL_PASSWORD")
s_ = azure_client_secret()
sec(
    F,
    "powershell_env_assign",
    f'PS C:\\infra> $env:ARM_CLIENT_SECRET = "{s_}"\nPS C:\\infra> terraform plan',
    s_,
    "ARM_CLIENT_SECRET",
)
p = human_pw()
sec(
    F,
    "django_databases_dict",
    'DATABASES = {\n    "default": {\n        "ENGINE": "django.db.backends.postgresql",\n'
    f'        "NAME": "shop",\n        "USER": "shop",\n        "PASSWORD": "{p}",\n'
    '        "HOST": "db.internal",\n    }\n}',
    p,
    '"PASSWORD"',
)
p = human_pw()
sec(
    F,
    "js_object_literal_pass_key",
    f"const ftpConfig = {{ host: 'files.example.net', user: 'deploy', pass: '{p}', port: 21 }};",
    p,
    "ftpConfig",
)
p = human_pw()
sec(
    F,
    "go_struct_literal_password",
    f'cfg := &smtp.Config{{\n\tHost:     "smtp.mailgun.org",\n\tUsername: "postmaster@mg.acme.io",\n\tPassword: "{p}",\n}}',
    p,
    "Password:",
)
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "rust_struct_literal_into",
    f'let creds = Credentials {{\n    access_key: "{ak}".into(),\n    secret_key: "{sk}".into(),\n    region: "eu-central-1".into(),\n}};',
    sk,
    "secret_key",
)
p = human_pw()
sec(
    F,
    "java_testcontainers_with_password",
    f'new PostgreSQLContainer<>("postgres:16")\n        .withDatabaseName("it")\n        .withUsername("it_user")\n        .withPassword("{p}");',
    p,
    "withPassword",
)
p = human_pw()
sec(
    F,
    "java_hikari_set_password",
    f'HikariConfig hc = new HikariConfig();\nhc.setJdbcUrl("jdbc:postgresql://db:5432/app");\nhc.setUsername("app");\nhc.setPassword("{p}");',
    p,
    "setPassword",
)
p = human_pw()
sec(
    F,
    "csharp_network_credential_initializer",
    f'var cred = new NetworkCredential {{ UserName = "svc_reports", Password = "{p}", Domain = "CORP" }};',
    p,
    "NetworkCredential",
)
k = rs(ALNUM, 40)
sec(
    F,
    "kotlin_map_of_api_secret",
    f'val params = mapOf("apiKey" to "pub_4821", "apiSecret" to "{k}", "sandbox" to "false")',
    k,
    "apiSecret",
)
p = human_pw("#%*-_.")
sec(
    F,
    "spring_value_annotation_default",
    f'    @Value("${{smtp.password:{p}}}")\n    private String smtpPassword;',
    p,
    "@Value",
)
k = hx(32)
sec(
    F,
    "python_requests_headers_dict",
    f'headers = {{"X-Api-Key": "{k}", "Accept": "application/json"}}\nr = requests.get(f"{{BASE}}/v2/orders", headers=headers)',
    k,
    "X-Api-Key",
)
t = jwt()
sec(
    F,
    "js_bearer_string_concat",
    f'const res = await fetch(url, {{\n  headers: {{ Authorization: "Bearer " + "{t}" }},\n}});',
    t,
    "Authorization",
)
t = rs(ALNUM, 32)
sec(F, "go_header_set_x_auth_token", f'req.Header.Set("X-Auth-Token", "{t}")', t, "X-Auth-Token")
t = rs(B64U, 43)
sec(
    F,
    "csharp_authentication_header_value",
    f'client.DefaultRequestHeaders.Authorization = new AuthenticationHeaderValue("Bearer", "{t}");',
    t,
    "AuthenticationHeaderValue",
)
t = hx(64)
sec(
    F,
    "js_document_cookie_remember_token",
    f'document.cookie = "remember_token={t}; path=/; max-age=2592000; secure";',
    t,
    "remember_token",
)
t = rs(LALNUM, 32)
sec(
    F,
    "python_requests_session_cookie_set",
    f's = requests.Session()\ns.cookies.set("sessionid", "{t}", domain="admin.acme.io")',
    t,
    "sessionid",
)
t = rs(ALNUM, 40)
sec(
    F,
    "go_grpc_metadata_append",
    f'ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer {t}")',
    t,
    "AppendToOutgoingContext",
)
k = rs(ALNUM, 32)
sec(
    F,
    "python_grpc_metadata_tuple",
    f'resp = stub.ListFeatures(req, metadata=[("x-api-key", "{k}")], timeout=5)',
    k,
    "x-api-key",
)
k = b64url(32)
sec(
    F,
    "pydantic_settings_kwarg",
    f'settings = Settings(secret_key="{k}", debug=False, allowed_hosts=["*"])',
    k,
    "secret_key",
)
k = rs(ALNUM, 32)
sec(
    F,
    "ts_private_readonly_field",
    f'export class PaymentsClient {{\n  private readonly apiSecret = "{k}";\n  constructor(private http: HttpClient) {{}}',
    k,
    "apiSecret",
)
k = rs(ALNUM, 40)
sec(
    F,
    "swift_static_let_client_secret",
    f'enum Config {{\n    static let clientID = "ios-app"\n    static let clientSecret = "{k}"\n}}',
    k,
    "clientSecret",
)
p = human_pw()
sec(
    F,
    "php_config_array_password",
    f"        'mysql' => [\n            'host' => '127.0.0.1',\n            'username' => 'forge',\n"
    f"            'password' => '{p}',\n        ],",
    p,
    "'password'",
)
p = human_pw()
sec(
    F,
    "kotlin_data_class_default_param",
    f'data class SmtpConfig(val host: String = "smtp.office365.com", val user: String = "noreply", val password: String = "{p}")',
    p,
    "SmtpConfig",
)
p = human_pw()
sec(
    F,
    "python_basic_header_b64_concat",
    f'auth = "Basic " + base64.b64encode(b"jenkins:{p}").decode()',
    p,
    "Basic",
)
p = human_pw()
sec(
    F,
    "c_define_db_pass",
    f'#define DB_USER "iot"\n#define DB_PASS "{p}"\n#define DB_HOST "192.168.10.2"',
    p,
    "#define DB_PASS",
)
p = human_pw()
sec(
    F,
    "elixir_config_repo_password",
    f'config :shop, Shop.Repo,\n  username: "shop",\n  password: "{p}",\n  hostname: "localhost"',
    p,
    "Shop.Repo",
)
p = mpw(20)
sec(
    F,
    "java_kafka_sasl_jaas_config",
    'props.put("sasl.jaas.config",\n    "org.apache.kafka.common.security.plain.PlainLoginModule required '
    f'username=\\"orders-svc\\" password=\\"{p}\\";");',
    p,
    "sasl.jaas.config",
)
k = openai_key()
sec(
    F,
    "jupyter_env_magic_with_output",
    f"In [1]: %env OPENAI_API_KEY={k}\nenv: OPENAI_API_KEY={k}",
    k,
    "%env",
)
t = npm_tok()
sec(F, "fish_set_gx", f"set -gx NPM_TOKEN {t}", t, "set -gx")
t = rs(ALNUM, 40)
sec(
    F,
    "okhttp_add_header_token_concat",
    f'Request request = new Request.Builder()\n    .url(API + "/projects")\n    .addHeader("Authorization", "Token " + "{t}")\n    .build();',
    t,
    "addHeader",
)
k = hx(48)
sec(
    F,
    "flask_app_config_secret_key",
    f'app = Flask(__name__)\napp.config["SECRET_KEY"] = "{k}"',
    k,
    "SECRET_KEY",
)
k = rs(ALNUM, 32)
sec(
    F,
    "axios_defaults_header",
    f'axios.defaults.headers.common["X-API-KEY"] = "{k}";',
    k,
    "axios.defaults",
)
k = b64(32)
sec(F, "go_byte_slice_signing_key", f'var jwtKey = []byte("{k}")', k, "jwtKey")
k = rs(ALNUM, 32)
sec(F, "rust_const_str", f'const API_SECRET: &str = "{k}";', k, "API_SECRET")
k = rs(ALNUM, 40)
sec(
    F,
    "dart_header_map",
    f"final headers = {{'x-access-token': '{k}', 'content-type': 'application/json'}};",
    k,
    "x-access-token",
)
p = human_pw()
sec(
    F,
    "ruby_faraday_basic_auth",
    f"conn = Faraday.new(url: 'https://jira.corp.local') do |f|\n  f.request :authorization, :basic, 'svc-jira', '{p}'\nend",
    p,
    "Faraday.new",
)

# =========================================================================== cli_secrets
F = "cli_secrets"
p = mpw(20)
sec(
    F,
    "docker_login_p_flag",
    f"$ docker login registry.gitlab.com -u deploy-bot -p {p}\nWARNING! Using --password via the CLI is insecure. Use --password-stdin.\nLogin Succeeded",
    p,
    "docker login",
)
p = mpw(32)
sec(
    F,
    "skopeo_creds_robot_account",
    f"skopeo copy --src-creds 'robot$ci+pusher:{p}' docker://harbor.corp.local/app/api:1.8.0 docker://registry.example.io/app/api:1.8.0",
    p,
    "skopeo copy",
)
t = ghp()
sec(F, "crane_auth_login_p", f"crane auth login ghcr.io -u octo-ci -p {t}", t, "crane auth login")
p = human_pw(SHQ)
sec(
    F,
    "helm_repo_add_password",
    f'helm repo add internal https://charts.corp.local/stable --username ci --password "{p}"',
    p,
    "helm repo add",
)
p = mpw(14)
sec(
    F,
    "mysqladmin_p_attached",
    f"$ mysqladmin -uroot -p{p} status\nUptime: 86400  Threads: 4  Questions: 1203  Slow queries: 0",
    p,
    "mysqladmin",
)
p = human_pw(SQLSYM)
sec(
    F,
    "pgpassword_prefix_pg_dump",
    f"PGPASSWORD='{p}' pg_dump -h db.internal -U app -Fc appdb > /tmp/app.dump",
    p,
    "pg_dump",
)
p = human_pw(URLSYM)
sec(
    F,
    "mongodump_uri",
    f'mongodump --uri="mongodb://backup:{p}@mongo-0.mongo:27017/?authSource=admin" --gzip --archive=/backups/m.gz',
    p,
    "mongodump",
)
p = mpw(32)
sec(
    F,
    "redis_cli_a_flag",
    f"redis-cli -h cache.internal -p 6379 -a '{p}' --no-auth-warning INFO replication",
    p,
    "redis-cli",
)
t = b64(64)
sec(
    F,
    "influx_config_create_token",
    f"influx config create --config-name prod --host-url https://influx.corp.local:8086 --org acme --token {t} --active",
    t,
    "influx config create",
)
t = uid()
sec(
    F,
    "gh_secret_set_body_uuid",
    f'gh secret set SNYK_TOKEN --body "{t}" --repo acme/api',
    t,
    "gh secret set SNYK_TOKEN",
)
t = hvs()
sec(
    F,
    "vault_login_positional_token",
    f"$ vault login {t}\nSuccess! You are now authenticated. The token information displayed below",
    t,
    "vault login",
)
p = mpw(24)
sec(
    F,
    "vault_write_database_config_password",
    "vault write database/config/pg plugin_name=postgresql-database-plugin \\\n"
    '    connection_url="postgresql://{{username}}:{{password}}@db.internal:5432/app" \\\n'
    f'    allowed_roles=readonly username="vault" password="{p}"',
    p,
    "vault write",
)
p = human_pw(SQLSYM)
sec(
    F,
    "op_item_create_password_field",
    f"op item create --category=login --title=\"Grafana prod\" --vault=Infra username=admin 'password={p}' url=https://grafana.corp.local",
    p,
    "op item create",
)
p = human_pw(SQLSYM)
sec(F, "bw_login_positional", f"bw login ops@acme.io '{p}' --raw", p, "bw login")
t = whsec()
sec(
    F,
    "doppler_secrets_set_kv",
    f"doppler secrets set STRIPE_WEBHOOK_SECRET={t} --project api --config prd",
    t,
    "doppler secrets set",
)
p = human_pw(SQLSYM)
sec(
    F,
    "aws_ssm_put_parameter_value",
    f"aws ssm put-parameter --name /prod/api/db_password --type SecureString --value '{p}' --overwrite",
    p,
    "aws ssm put-parameter",
)
s_ = azure_client_secret()
sec(
    F,
    "az_login_service_principal_p",
    f"az login --service-principal -u {uid()} -p '{s_}' --tenant {uid()}",
    s_,
    "az login --service-principal",
)
p = human_pw(SQLSYM)
sec(
    F,
    "az_sql_server_create_admin_password",
    f"az sql server create -n sql-prod-weu -g rg-data --admin-user sqladmin --admin-password '{p}' -l westeurope",
    p,
    "az sql server create",
)
p = human_pw(SQLSYM)
sec(
    F,
    "gcloud_sql_users_set_password",
    f"gcloud sql users set-password app --instance=pg-prod --password='{p}'",
    p,
    "gcloud sql users",
)
p = human_pw(SQLSYM)
sec(
    F,
    "kubectl_create_secret_from_literal",
    f"kubectl create secret generic db-credentials --from-literal=username=app --from-literal=password='{p}' -n prod",
    p,
    "kubectl create secret generic",
)
p = mpw(32)
sec(
    F,
    "kubectl_docker_registry_password",
    "kubectl create secret docker-registry regcred --docker-server=harbor.corp.local \\\n"
    f"  --docker-username='robot$k8s' --docker-password={p} --docker-email=ops@acme.io",
    p,
    "docker-registry regcred",
)
t = digits(1) + rs(ALNUM, 26) + "_" + rs(ALNUM, 21)
sec(
    F,
    "ngrok_config_add_authtoken",
    f"$ ngrok config add-authtoken {t}\nAuthtoken saved to configuration file: /home/dev/.config/ngrok/ngrok.yml",
    t,
    "ngrok config add-authtoken",
)
t = b64s(json.dumps({"a": hx(32), "t": uid(), "s": b64(32)}, separators=(",", ":")))
sec(
    F,
    "cloudflared_tunnel_run_token",
    f"cloudflared tunnel --no-autoupdate run --token {t}",
    t,
    "cloudflared tunnel",
)
t = "tskey-auth-k" + rs(ALNUM, 10) + "CNTRL-" + rs(ALNUM, 33)
sec(
    F,
    "tailscale_up_authkey",
    f"sudo tailscale up --authkey {t} --advertise-tags=tag:ci --ssh",
    t,
    "tailscale up",
)
t = npm_tok()
sec(
    F,
    "npm_set_registry_authtoken",
    f'npm set "//registry.npmjs.org/:_authToken" "{t}"',
    t,
    "npm set",
)
t = npm_tok()
sec(
    F,
    "yarn_config_set_npm_auth_token",
    f"yarn config set npmAuthToken {t} -H",
    t,
    "yarn config set npmAuthToken",
)
t = pypi_tok()
sec(F, "twine_upload_p_token", f"twine upload -u __token__ -p {t} dist/*", t, "twine upload")
t = pypi_tok()
sec(
    F,
    "poetry_config_pypi_token",
    f"poetry config pypi-token.pypi {t}",
    t,
    "poetry config pypi-token.pypi",
)
t = "cio" + rs(ALNUM, 32)
sec(
    F,
    "cargo_login_token",
    f"$ cargo login {t}\n       Login token for `crates-io` saved",
    t,
    "cargo login",
)
t = "rubygems_" + hx(48)
sec(
    F,
    "gem_host_api_key_env_prefix",
    f"GEM_HOST_API_KEY={t} gem push pkg/acme-cli-0.4.1.gem",
    t,
    "gem push",
)
p = human_pw(SQLSYM)
sec(
    F,
    "macos_security_add_internet_password",
    f"security add-internet-password -a deploy -s git.corp.local -r htps -w '{p}' -U",
    p,
    "security add-internet-password",
)
p = human_pw(SQLSYM)
sec(
    F,
    "secret_tool_store_echo_pipe",
    f"echo -n '{p}' | secret-tool store --label='NAS backup' service nas user backup",
    p,
    "secret-tool store",
)
t = pypi_tok()
sec(
    F,
    "keyring_set_printf_pipe",
    f"printf '%s' '{t}' | keyring set https://upload.pypi.org/legacy/ __token__",
    t,
    "keyring set",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "windows_cmdkey_pass",
    rf"C:\> cmdkey /generic:TERMSRV/jump01.corp.local /user:CORP\svc_rdp /pass:{p}"
    + "\n\nCMDKEY: Credential added successfully.",
    p,
    "cmdkey",
)
p = human_pw(SQLSYM)
sec(
    F,
    "rabbitmqctl_change_password",
    f"$ rabbitmqctl change_password orders '{p}'\nChanging password for user \"orders\" ...",
    p,
    "rabbitmqctl change_password",
)
p = human_pw(SQLSYM)
sec(
    F,
    "nats_cli_user_password",
    f"nats --server nats://nats.corp.local:4222 --user orders --password '{p}' pub orders.created '{{\"id\":1}}'",
    p,
    "nats --server",
)
ak, sk = rs(UALNUM, 20), rs(ALNUM + "+/", 40)
sec(
    F,
    "mc_alias_set_access_secret",
    f"$ mc alias set minio http://127.0.0.1:9000 {ak} {sk}\nAdded `minio` successfully.",
    sk,
    "mc alias set",
)
p = human_pw(URLSYM)
sec(
    F,
    "rclone_config_create_pass_obscure",
    f"rclone config create nas webdav url=https://nas.local/remote.php/dav/files/me vendor=nextcloud user=me pass={p} --obscure",
    p,
    "rclone config create",
)
p = human_pw(SQLSYM)
sec(
    F,
    "restic_password_env_prefix",
    f"RESTIC_PASSWORD='{p}' restic -r s3:s3.amazonaws.com/acme-backups backup /srv --tag nightly",
    p,
    "restic",
)
p = human_pw(SQLSYM) + " " + R.choice(WORDS)
sec(
    F,
    "borg_passphrase_env_prefix",
    f"BORG_PASSPHRASE='{p}' borg create --stats ssh://borg@backup.local/./repo::{{hostname}}-{{now}} /etc /home",
    p,
    "borg create",
)
p = human_pw(SQLSYM)
sec(
    F,
    "openssl_enc_k_flag",
    f"openssl enc -aes-256-cbc -salt -pbkdf2 -in db.sql -out db.sql.enc -k '{p}'",
    p,
    "openssl enc",
)
p = human_pw(SQLSYM)
sec(F, "zip_P_flag", f"zip -r -P '{p}' exports-2024-06.zip exports/", p, "zip -r")
p = human_pw(SQLSYM)
sec(F, "sevenzip_p_attached", f"7z a -p'{p}' -mhe=on certs.7z ./certs", p, "7z a")
p = human_pw(SQLSYM)
sec(
    F,
    "gpg_batch_passphrase",
    f"gpg --batch --yes --pinentry-mode loopback --passphrase '{p}' -d backup.tar.gpg | tar x",
    p,
    "gpg --batch",
)
p = human_pw(SQLSYM)
sec(
    F,
    "sshpass_p",
    f"sshpass -p '{p}' ssh -o StrictHostKeyChecking=no pi@192.168.1.40 'sudo reboot'",
    p,
    "sshpass",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "lftp_u_user_comma_pw",
    f'lftp -u deploy,{p} sftp://files.example.net -e "mirror -R dist/ /var/www/html; bye"',
    p,
    "lftp",
)
p = human_pw("#*-_.@!")
sec(
    F,
    "smbclient_U_user_percent_pw",
    f"smbclient //fs01/finance -U 'CORP\\jdoe%{p}' -c 'ls'",
    p,
    "smbclient",
)
p = human_pw("#%*-_.@!")
sec(
    F,
    "mount_cifs_password_option",
    f"sudo mount -t cifs //nas.local/media /mnt/media -o username=kodi,password={p},uid=1000,vers=3.0",
    p,
    "mount -t cifs",
)
t = ghs()
sec(
    F,
    "git_c_http_extraheader_bearer",
    f'git -c http.extraheader="AUTHORIZATION: bearer {t}" clone https://github.com/acme/infra.git',
    t,
    "http.extraheader",
)
t = ya29()
sec(
    F,
    "curl_oauth2_bearer",
    f"curl -sS --oauth2-bearer {t} https://www.googleapis.com/drive/v3/files",
    t,
    "--oauth2-bearer",
)
p = human_pw("#%*-_.@")
sec(F, "httpie_a_user_pw", f"http -a admin:{p} POST :8080/api/reindex full:=true", p, "http -a")
p = human_pw(SQLSYM)
sec(
    F,
    "wget_http_password",
    f"wget --http-user=ci --http-password='{p}' https://artifacts.corp.local/builds/app-1.9.2.tar.gz",
    p,
    "wget",
)
p = rs(ALNUM + "*=_-+", 20)
sec(
    F,
    "curl_u_user_colon_pw",
    f'$ curl -u \'elastic:{p}\' -k https://localhost:9200/_cluster/health?pretty\n{{\n  "cluster_name" : "docker-cluster",',
    p,
    "curl -u",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysql_p_quoted_attached",
    f"mysql -h 10.0.5.12 -u app -p'{p}' app_db < dump.sql",
    p,
    "mysql -h",
)
p = human_pw(SQLSYM)
sec(
    F,
    "ldapsearch_w_bind_password",
    f'ldapsearch -x -H ldaps://ldap.corp.local -D "cn=admin,dc=corp,dc=local" -w \'{p}\' -b "ou=people,dc=corp,dc=local" "(uid=jdoe)"',
    p,
    "ldapsearch",
)
p = mpw(16)
sec(
    F,
    "openssl_pkcs12_passout_pass",
    f"openssl pkcs12 -export -in tls.crt -inkey tls.key -out keystore.p12 -name api -passout pass:{p}",
    p,
    "openssl pkcs12",
)
p = mpw(12)
sec(
    F,
    "keytool_storepass_same_twice",
    f"keytool -importkeystore -srckeystore keystore.p12 -srcstoretype PKCS12 -srcstorepass {p} -destkeystore api.jks -deststorepass {p}",
    p,
    "keytool -importkeystore",
)
k = b64(64)
sec(
    F,
    "az_storage_account_key_flag",
    f"az storage blob upload --account-name acmeprodlogs --account-key {k} -c exports -f report.csv -n 2024/06/report.csv",
    k,
    "az storage blob upload",
)
k = hx(64)
sec(
    F,
    "heroku_config_set_kv",
    f"heroku config:set SESSION_SECRET={k} -a acme-api",
    k,
    "heroku config:set",
)
p = human_pw(SQLSYM)
sec(
    F,
    "fly_secrets_set",
    f"fly secrets set DATABASE_PASSWORD='{p}' -a acme-api",
    p,
    "fly secrets set",
)
t = discord_bot()
sec(
    F,
    "wrangler_secret_put_echo_pipe",
    f'echo "{t}" | npx wrangler secret put DISCORD_BOT_TOKEN',
    t,
    "wrangler secret put",
)
t = ghp()
sec(
    F,
    "gh_auth_login_with_token_herestring",
    f'gh auth login --with-token <<< "{t}"',
    t,
    "gh auth login",
)
p = human_pw(SQLSYM)
sec(
    F,
    "terraform_apply_var_flag",
    f"terraform apply -var 'db_password={p}' -var-file=prod.tfvars",
    p,
    "terraform apply",
)
p = human_pw(SHQ)
sec(
    F,
    "ansible_playbook_extra_vars_become_pass",
    f'ansible-playbook site.yml -i inventories/prod --extra-vars "ansible_become_pass={p}"',
    p,
    "ansible-playbook",
)
p = mpw(16)
sec(
    F,
    "docker_run_e_postgres_password",
    f"docker run -d --name pg -e POSTGRES_PASSWORD={p} -p 5432:5432 postgres:16",
    p,
    "docker run",
)
p = mpw(20)
sec(
    F,
    "helm_upgrade_set_auth_password",
    f"helm upgrade --install redis bitnami/redis -n cache --set auth.password={p} --set architecture=standalone",
    p,
    "helm upgrade",
)
p = human_pw(SQLSYM)
sec(
    F,
    "pulumi_config_set_secret",
    f"pulumi config set --secret dbPassword '{p}'",
    p,
    "pulumi config set --secret",
)
p = rs(B64U, 16)
sec(
    F,
    "argocd_login_password",
    f"argocd login argocd.corp.local --username admin --password {p} --grpc-web",
    p,
    "argocd login",
)
p = human_pw(SQLSYM)
sec(
    F,
    "jfrog_config_add_password",
    f"jf config add corp --url=https://corp.jfrog.io --user=ci --password='{p}' --interactive=false",
    p,
    "jf config add",
)
p = human_pw(SHQ) + " " + R.choice(WORDS)
sec(
    F,
    "mvn_deploy_gpg_passphrase",
    f'mvn -B deploy -Prelease -Dgpg.passphrase="{p}"',
    p,
    "mvn -B deploy",
)
p = human_pw(SQLSYM)
sec(
    F,
    "gradle_signing_password_property",
    f"./gradlew publish -Psigning.keyId=24875D73 -PsigningPassword='{p}' -Psigning.secretKeyRingFile=/tmp/secring.gpg",
    p,
    "./gradlew publish",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mongosh_u_p",
    f"mongosh \"mongodb://mongo-0:27017/admin\" -u root -p '{p}' --eval 'db.getUsers()'",
    p,
    "mongosh",
)
t = uid()
sec(
    F,
    "consul_acl_set_agent_token",
    f'$ consul acl set-agent-token agent {t}\nACL token "agent" set successfully',
    t,
    "consul acl set-agent-token",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "etcdctl_user_root_colon_pw",
    f"ETCDCTL_API=3 etcdctl --endpoints=https://10.0.0.11:2379 --user root:{p} get /registry --prefix --keys-only",
    p,
    "etcdctl",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "xfreerdp_p_slash",
    f"xfreerdp /v:jump01.corp.local /u:jdoe /d:CORP /p:{p} /cert:ignore +clipboard",
    p,
    "xfreerdp",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "windows_net_use_password",
    rf"C:\> net use Z: \\fs01\shared {p} /user:CORP\jdoe /persistent:no"
    + "\nThe command completed successfully.",
    p,
    "net use",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "psexec_p_flag",
    rf'PsExec64.exe \\build02 -u CORP\svc_build -p {p} cmd /c "C:\ci\run.bat"',
    p,
    "PsExec64.exe",
)
p = human_pw(SQLSYM)
sec(
    F,
    "ssh_keygen_N_passphrase",
    f"ssh-keygen -t ed25519 -N '{p}' -f ~/.ssh/deploy_ed25519 -C deploy@ci",
    p,
    "ssh-keygen",
)
p = human_pw("#%*-_.@")
sec(
    F,
    "spring_boot_cli_datasource_password",
    f"java -jar build/libs/orders-0.3.1.jar --spring.profiles.active=prod --spring.datasource.password={p}",
    p,
    "java -jar",
)
p = human_pw(SHQ)
sec(
    F,
    "powershell_convertto_securestring",
    f'New-LocalUser -Name svc_backup -Password (ConvertTo-SecureString "{p}" -AsPlainText -Force) -PasswordNeverExpires',
    p,
    "New-LocalUser",
)
k = rs(ALNUM, 40)
sec(
    F,
    "vault_kv_put_kv",
    f"vault kv put secret/payments/api api_key={k} env=prod",
    k,
    "vault kv put",
)
p = human_pw(SQLSYM)
sec(
    F,
    "gcloud_secrets_versions_add_stdin",
    f"printf '%s' '{p}' | gcloud secrets versions add db-password --data-file=-",
    p,
    "gcloud secrets versions add",
)
p = human_pw("#%*-_.@!")
sec(
    F,
    "aws_secretsmanager_secret_string_json",
    f'aws secretsmanager create-secret --name prod/orders/db --secret-string \'{{"username":"orders","password":"{p}"}}\'',
    p,
    "aws secretsmanager create-secret",
)
t = glpat()
sec(
    F,
    "curl_private_token_header",
    f"curl --header 'PRIVATE-TOKEN: {t}' 'https://gitlab.corp.local/api/v4/projects?membership=true'",
    t,
    "PRIVATE-TOKEN",
)
p = human_pw(SQLSYM)
sec(
    F,
    "az_keyvault_secret_set_value",
    f"az keyvault secret set --vault-name kv-prod-weu --name DbPassword --value '{p}'",
    p,
    "az keyvault secret set",
)
p = human_pw(SQLSYM)
sec(
    F,
    "crontab_pgpassword_pg_dumpall",
    f"15 2 * * * PGPASSWORD='{p}' /usr/bin/pg_dumpall -h localhost -U postgres | gzip > /backup/all-$(date +\\%F).sql.gz",
    p,
    "pg_dumpall",
)
p = human_pw(SQLSYM)
sec(
    F,
    "mysqldump_password_long_flag",
    f"mysqldump --single-transaction --password='{p}' -u backup shop | gzip > shop.sql.gz",
    p,
    "mysqldump",
)
p = human_pw(SQLSYM)
sec(
    F,
    "nmcli_connection_modify_vpn_secrets",
    f"nmcli connection modify corp-vpn vpn.secrets 'password={p}'",
    p,
    "nmcli connection modify",
)

# =========================================================================== call_arguments
F = "call_arguments"
p = human_pw()
sec(
    F,
    "pymysql_connect_positional",
    f'conn = pymysql.connect("db.internal", "shop", "{p}", "shop", charset="utf8mb4")',
    p,
    "pymysql.connect",
)
p = human_pw()
sec(
    F,
    "psycopg2_connect_kwargs",
    f'conn = psycopg2.connect(host="10.0.4.2", dbname="ledger", user="ledger_rw", password="{p}", sslmode="require")',
    p,
    "psycopg2.connect",
)
p = human_pw(URLSYM)
sec(
    F,
    "go_sql_open_mysql_dsn",
    f'db, err := sql.Open("mysql", "orders:{p}@tcp(10.0.4.2:3306)/orders?parseTime=true")',
    p,
    "sql.Open",
)
p = human_pw()
sec(
    F,
    "jdbc_drivermanager_getconnection",
    f'Connection c = DriverManager.getConnection("jdbc:postgresql://db:5432/app", "app", "{p}");',
    p,
    "DriverManager.getConnection",
)
p = rs(LOWER, 16)
sec(
    F,
    "smtplib_login_app_password",
    f'server = smtplib.SMTP_SSL("smtp.gmail.com", 465)\nserver.login("alerts.acme@gmail.com", "{p}")',
    p,
    "server.login",
)
p = human_pw()
sec(
    F,
    "imaplib_login",
    f'M = imaplib.IMAP4_SSL("imap.fastmail.com")\nM.login("support@acme.io", "{p}")',
    p,
    "M.login",
)
p = human_pw()
sec(
    F,
    "ftplib_login",
    f'ftp = FTP("ftp.partner.example")\nftp.login("acme_upload", "{p}")\nftp.cwd("/inbound")',
    p,
    "ftp.login",
)
p = human_pw()
sec(
    F,
    "ldap3_connection_positional",
    f'conn = Connection(server, "cn=svc-sso,ou=services,dc=corp,dc=local", "{p}", auto_bind=True)',
    p,
    "Connection(server",
)
p = human_pw()
sec(
    F,
    "python_ldap_simple_bind_s",
    f'l.simple_bind_s("uid=jenkins,ou=people,dc=corp,dc=local", "{p}")',
    p,
    "simple_bind_s",
)
p = mpw(32)
sec(
    F,
    "redis_py_password_kwarg",
    f'r = redis.Redis(host="cache.internal", port=6379, password="{p}", ssl=True)',
    p,
    "redis.Redis",
)
p = mpw(32)
sec(
    F,
    "ioredis_auth_call",
    f"const redis = new Redis(6379, 'cache.internal');\nawait redis.auth('{p}');",
    p,
    "redis.auth",
)
p = human_pw()
sec(
    F,
    "bmemcached_client_sasl",
    f'mc = bmemcached.Client(["mc.internal:11211"], "app", "{p}")',
    p,
    "bmemcached.Client",
)
k = b64url(32)
sec(
    F,
    "pyjwt_encode_secret_positional",
    f'token = jwt.encode({{"sub": user.id}}, "{k}", algorithm="HS256")',
    k,
    "jwt.encode",
)
k = rs(ALNUM, 40)
sec(
    F,
    "jsonwebtoken_sign_secret",
    f"const token = jwt.sign({{ uid: user.id }}, '{k}', {{ expiresIn: '1h' }});",
    k,
    "jwt.sign",
)
k = rs(ALNUM + "!@#%^&*", 32)
sec(
    F,
    "go_jwt_signedstring_byte_slice",
    f'ss, err := token.SignedString([]byte("{k}"))',
    k,
    "SignedString",
)
k = hx(64)
sec(
    F,
    "python_hmac_new_literal_key",
    f'sig = hmac.new(b"{k}", body, hashlib.sha256).hexdigest()',
    k,
    "hmac.new",
)
k = rs(ALNUM, 48)
sec(
    F,
    "node_crypto_createhmac_literal",
    f"const sig = crypto.createHmac('sha256', '{k}').update(rawBody).digest('hex');",
    k,
    "createHmac",
)
k = b64us(rb(32)) + "="
sec(F, "fernet_literal_key", f'f = Fernet(b"{k}")\ntoken = f.encrypt(b"card=4242")', k, "Fernet(")
k = hx(64)
sec(
    F,
    "pycryptodome_aes_new_fromhex",
    f'cipher = AES.new(bytes.fromhex("{k}"), AES.MODE_GCM)',
    k,
    "AES.new",
)
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "boto3_client_kwargs_secret",
    f"s3 = boto3.client('s3', aws_access_key_id='{ak}', aws_secret_access_key='{sk}', region_name='eu-west-1')",
    sk,
    "boto3.client",
)
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "boto3_session_positional",
    f"session = boto3.Session('{ak}', '{sk}')\nddb = session.resource('dynamodb')",
    sk,
    "boto3.Session",
)
sid, tok = "AC" + hx(32), hx(32)
sec(
    F,
    "twilio_client_positional",
    f'client = Client("{sid}", "{tok}")\nclient.messages.create(to=to, from_="+15017122661", body=msg)',
    tok,
    "Client(",
)
t = sk_live()
sec(F, "stripe_client_constructor", f'client = stripe.StripeClient("{t}")', t, "StripeClient")
t = sendgrid()
sec(
    F,
    "sendgrid_api_client",
    f"sg = SendGridAPIClient('{t}')\nresponse = sg.send(message)",
    t,
    "SendGridAPIClient",
)
k = hx(20)
sec(
    F,
    "pusher_constructor_secret",
    f"pusher_client = pusher.Pusher(app_id='1782214', key='{hx(20)}', secret='{k}', cluster='eu', ssl=True)",
    k,
    "pusher.Pusher",
)
p = human_pw()
sec(
    F,
    "requests_auth_tuple",
    f'resp = requests.get(f"{{JENKINS}}/api/json", auth=("admin", "{p}"), timeout=10)',
    p,
    "requests.get",
)
p = human_pw()
sec(
    F,
    "requests_httpbasicauth",
    f'requests.post(url, json=payload, auth=HTTPBasicAuth("svc-nexus", "{p}"))',
    p,
    "HTTPBasicAuth",
)
p = human_pw()
sec(
    F,
    "aiohttp_basicauth",
    f'async with session.get(url, auth=aiohttp.BasicAuth("grafana", "{p}")) as r:',
    p,
    "aiohttp.BasicAuth",
)
p = human_pw()
sec(
    F,
    "paramiko_connect_password",
    f'ssh = paramiko.SSHClient()\nssh.set_missing_host_key_policy(paramiko.AutoAddPolicy())\nssh.connect("10.0.0.21", username="root", password="{p}")',
    p,
    "ssh.connect",
)
ak, sk = rs(UALNUM, 20), rs(ALNUM, 40)
sec(
    F,
    "minio_client_positional",
    f'client = Minio("minio.corp.local:9000", "{ak}", "{sk}", secure=True)',
    sk,
    "Minio(",
)
p = rs(ALNUM + "*=_-+", 20)
sec(
    F,
    "elasticsearch_basic_auth_tuple",
    f'es = Elasticsearch("https://es01:9200", basic_auth=("elastic", "{p}"), verify_certs=False)',
    p,
    "Elasticsearch(",
)
p = mpw(24)
sec(
    F,
    "kafka_producer_sasl_plain_password",
    f"producer = KafkaProducer(bootstrap_servers='b-1.msk:9096', security_protocol='SASL_SSL',\n"
    f"                         sasl_mechanism='SCRAM-SHA-512', sasl_plain_username='orders', sasl_plain_password='{p}')",
    p,
    "KafkaProducer",
)
p = human_pw()
sec(
    F,
    "pika_plain_credentials",
    f'creds = pika.PlainCredentials("orders", "{p}")',
    p,
    "PlainCredentials",
)
p = human_pw()
sec(
    F,
    "nodemailer_transport_auth",
    f"const transporter = nodemailer.createTransport({{\n  host: 'smtp.office365.com', port: 587,\n  auth: {{ user: 'noreply@acme.io', pass: '{p}' }},\n}});",
    p,
    "createTransport",
)
p = human_pw()
sec(
    F,
    "ruby_net_smtp_start",
    f"Net::SMTP.start('smtp.sendgrid.net', 587, 'acme.io', 'apikey', '{p}', :login) do |smtp|",
    p,
    "Net::SMTP.start",
)
p = human_pw()
sec(
    F,
    "php_pdo_constructor",
    f"$pdo = new PDO('mysql:host=127.0.0.1;dbname=wp', 'wp', '{p}');",
    p,
    "new PDO",
)
p = human_pw()
sec(
    F,
    "php_mysqli_connect",
    f'$link = mysqli_connect("localhost", "wordpress", "{p}", "wordpress");',
    p,
    "mysqli_connect",
)
p = human_pw()
sec(
    F,
    "csharp_network_credential_ctor",
    f'smtp.Credentials = new NetworkCredential("alerts@acme.io", "{p}");',
    p,
    "NetworkCredential(",
)
p = human_pw()
sec(
    F,
    "spring_security_test_auth_token",
    f'var auth = new UsernamePasswordAuthenticationToken("admin", "{p}");\nauthenticationManager.authenticate(auth);',
    p,
    "UsernamePasswordAuthenticationToken",
)
p = rs(LOWER, 16)
sec(
    F,
    "go_smtp_plain_auth",
    f'auth := smtp.PlainAuth("", "reports@acme.io", "{p}", "smtp.gmail.com")',
    p,
    "smtp.PlainAuth",
)
p = human_pw()
sec(
    F,
    "go_redis_options_password",
    f'rdb := redis.NewClient(&redis.Options{{Addr: "cache:6379", Password: "{p}", DB: 0}})',
    p,
    "redis.NewClient",
)
p = human_pw()
sec(
    F,
    "rust_reqwest_basic_auth",
    f'let resp = client.get(url).basic_auth("ci", Some("{p}")).send().await?;',
    p,
    "basic_auth",
)
k = openai_key()
sec(F, "openai_client_api_key_kwarg", f'client = OpenAI(api_key="{k}")', k, "OpenAI(")
k = anthropic_key()
sec(
    F,
    "anthropic_client_api_key_kwarg",
    f"client = anthropic.Anthropic(api_key='{k}')",
    k,
    "anthropic.Anthropic",
)
t = hvs()
sec(
    F,
    "hvac_client_token_kwarg",
    f"client = hvac.Client(url='https://vault.corp.local:8200', token='{t}')",
    t,
    "hvac.Client",
)
t = glpat()
sec(
    F,
    "python_gitlab_private_token",
    f"gl = gitlab.Gitlab('https://gitlab.corp.local', private_token='{t}')",
    t,
    "gitlab.Gitlab",
)
t = ghp()
sec(
    F,
    "pygithub_positional_token",
    f'g = Github("{t}")\nrepo = g.get_repo("acme/api")',
    t,
    "Github(",
)
t = xoxb()
sec(
    F,
    "slack_sdk_webclient_token",
    f'client = WebClient(token="{t}")\nclient.chat_postMessage(channel="#deploys", text="done")',
    t,
    "WebClient",
)
t = discord_bot()
sec(F, "discord_py_client_run", f'bot.run("{t}")', t, "bot.run")
t = telegram_bot()
sec(
    F,
    "telebot_constructor",
    f'bot = telebot.TeleBot("{t}", parse_mode="HTML")',
    t,
    "telebot.TeleBot",
)
p = human_pw()
sec(
    F,
    "ssh2_node_connect_password",
    f"conn.connect({{ host: '10.0.0.30', port: 22, username: 'pi', password: '{p}' }});",
    p,
    "conn.connect",
)
p = human_pw()
sec(
    F,
    "ruby_net_ldap_auth",
    f"ldap = Net::LDAP.new(host: 'ldap.corp.local', port: 636, encryption: :simple_tls,\n"
    f"  auth: {{ method: :simple, username: 'cn=redmine,dc=corp,dc=local', password: '{p}' }})",
    p,
    "Net::LDAP.new",
)
k = rs(ALNUM, 24)
sec(F, "lua_redis_auth", f'local ok, err = red:auth("{k}")', k, "red:auth")
p = human_pw()
sec(
    F,
    "pysftp_connection_kwargs",
    f"with pysftp.Connection('sftp.bank.example', username='acme', password='{p}') as sftp:",
    p,
    "pysftp.Connection",
)
p = human_pw()
sec(
    F,
    "sqlalchemy_url_create_kwargs",
    f'url = URL.create("postgresql+psycopg", username="app", password="{p}", host="db", database="app")',
    p,
    "URL.create",
)

# =========================================================================== tool_output
F = "tool_output"
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "aws_configure_prompt_transcript",
    f"$ aws configure --profile prod\nAWS Access Key ID [None]: {ak}\nAWS Secret Access Key [None]: {sk}\n"
    "Default region name [None]: eu-west-1\nDefault output format [None]: json",
    sk,
    "AWS Secret Access Key",
)
keys = [b64(33) for _ in range(3)]
sec(
    F,
    "vault_operator_init_unseal_keys",
    "$ vault operator init -key-shares=3 -key-threshold=2\n"
    + "\n".join(f"Unseal Key {i + 1}: {k}" for i, k in enumerate(keys))
    + f"\n\nInitial Root Token: {hvs()}",
    keys[0],
    "Unseal Key 1:",
)
rt = hvs()
sec(
    F,
    "vault_operator_init_root_token",
    f"Unseal Key 1: {b64(33)}\n\nInitial Root Token: {rt}\n\nVault initialized with 1 key shares and a key threshold of 1.",
    rt,
    "Initial Root Token:",
)
k = b64(33)
sec(
    F,
    "vault_operator_unseal_command",
    f"$ vault operator unseal {k}\nKey             Value\n---             -----\nSealed          false",
    k,
    "vault operator unseal",
)
t = gho()
sec(F, "gh_auth_token_output", f"$ gh auth token\n{t}", t, "gh auth token")
s_ = azure_client_secret()
sec(
    F,
    "az_ad_sp_create_for_rbac_json",
    "$ az ad sp create-for-rbac --name gh-actions-deployer --role contributor --scopes /subscriptions/"
    + uid()
    + "\n{\n"
    + f'  "appId": "{uid()}",\n  "displayName": "gh-actions-deployer",\n  "password": "{s_}",\n'
    + f'  "tenant": "{uid()}"\n}}',
    s_,
    '"password"',
)
p = human_pw()
bp = b64s(p)
sec(
    F,
    "kubectl_get_secret_yaml_base64",
    f"$ kubectl get secret db-credentials -n prod -o yaml\napiVersion: v1\ndata:\n  password: {bp}\n  username: YXBw\n"
    "kind: Secret\nmetadata:\n  name: db-credentials",
    bp,
    "kind: Secret",
)
p = human_pw()
sec(
    F,
    "kubectl_jsonpath_base64_decode",
    f"$ kubectl get secret grafana -o jsonpath='{{.data.admin-password}}' | base64 -d\n{p}",
    p,
    "base64 -d",
)
t = "HRKU-AA" + rs(B64U, 58)
sec(
    F,
    "heroku_auth_token_output",
    f"$ heroku auth:token\n ›   Warning: token will expire 06/11/2025\n{t}",
    t,
    "heroku auth:token",
)
k = hx(128)
sec(
    F,
    "rails_credentials_show",
    f"$ bin/rails credentials:show\n# aws:\n#   access_key_id: 123\n#   secret_access_key: 345\n\nsecret_key_base: {k}",
    k,
    "secret_key_base:",
)
k = "base64:" + b64(32)
sec(
    F, "php_artisan_key_generate_show", f"$ php artisan key:generate --show\n{k}", k, "key:generate"
)
t = "SWMTKN-1-" + rs(LALNUM, 50) + "-" + rs(LALNUM, 25)
sec(
    F,
    "docker_swarm_join_token_worker",
    "$ docker swarm join-token worker\nTo add a worker to this swarm, run the following command:\n\n"
    f"    docker swarm join --token {t} 10.0.1.4:2377\n",
    t,
    "docker swarm join",
)
gp = rs(ALNUM + ";:,./<>?!%&*()-_=+", 12)
sec(
    F,
    "mysql_temporary_password_log",
    f"2024-06-11T09:14:03.512345Z 6 [Note] [MY-010454] [Server] A temporary password is generated for root@localhost: {gp}",
    gp,
    "A temporary password is generated",
)
p = hx(32)
sec(
    F,
    "jenkins_initial_admin_password_banner",
    "*************************************************************\n\nJenkins initial setup is required. An admin user has been created and a password generated.\n"
    f"Please use the following password to proceed to installation:\n\n{p}\n\n"
    "This may also be found at: /var/jenkins_home/secrets/initialAdminPassword",
    p,
    "initialAdminPassword",
)
p = rs(B64U, 16)
sec(
    F,
    "argocd_admin_initial_password",
    f"$ argocd admin initial-password -n argocd\n{p}\n\n This password must be only used for first time login. "
    "We strongly recommend you update the password using `argocd account update-password`.",
    p,
    "initial-password",
)
p = rs(ALNUM + "-_", 32)
sec(
    F,
    "step_ca_init_generated_password",
    "✔ Deployment Type: Standalone\nWhat would you like to name your new PKI?\n✔ (e.g. Smallstep): acme-internal\n"
    "Choose a password for your CA keys and first provisioner.\n✔ [leave empty and we'll generate one]:\n"
    f"✔ Password: {p}",
    p,
    "✔ Password:",
)
k = b64(32)
sec(
    F,
    "openssl_rand_base64_then_used",
    f"$ openssl rand -base64 32\n{k}\n\nok, put that in .env as NEXTAUTH_SECRET and restart the dev server",
    k,
    "openssl rand",
)
p = mpw(20)
sec(F, "pwgen_secure_output", f"$ pwgen -s 20 1\n{p}", p, "pwgen")
k = b64(32)
sec(F, "wg_genkey_tee_output", f"$ wg genkey | tee /etc/wireguard/privatekey\n{k}", k, "wg genkey")
p = human_pw(SHQ)
sec(
    F,
    "ssh_keygen_expect_transcript",
    "expect <<'EOF'\nspawn ssh-keygen -t ed25519 -f /home/ci/.ssh/id_deploy\nexpect \"Enter passphrase\"\n"
    f'send "{p}\\r"\nexpect "Enter same passphrase again"\nsend "{p}\\r"\nexpect eof\nEOF',
    p,
    "spawn ssh-keygen",
)
codes = [bip_code() for _ in range(16)]
block = "\n".join(f"  {codes[i]}    {codes[i + 1]}" for i in range(0, 16, 2))
sec(
    F,
    "github_2fa_recovery_codes_block",
    "Your two-factor recovery codes (each can be used once). Save them somewhere safe:\n\n" + block,
    block,
    "recovery codes",
)
t = ya29()
sec(
    F,
    "gcloud_print_access_token",
    f"$ gcloud auth print-access-token\n{t}",
    t,
    "print-access-token",
)
ak, sk, st = aws_akid("ASIA"), aws_secret(), "IQoJb3JpZ2luX2VjE" + rs(B64CH, 300)
sec(
    F,
    "aws_sts_get_session_token_json",
    '{\n    "Credentials": {\n'
    + f'        "AccessKeyId": "{ak}",\n        "SecretAccessKey": "{sk}",\n'
    + f'        "SessionToken": "{st}",\n        "Expiration": "2024-06-11T21:02:11+00:00"\n    }}\n}}',
    sk,
    "SecretAccessKey",
)
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "aws_iam_create_access_key_json",
    '$ aws iam create-access-key --user-name ci-deployer\n{\n    "AccessKey": {\n        "UserName": "ci-deployer",\n'
    + f'        "AccessKeyId": "{ak}",\n        "Status": "Active",\n        "SecretAccessKey": "{sk}",\n'
    + '        "CreateDate": "2024-06-11T09:30:12+00:00"\n    }\n}',
    sk,
    "create-access-key",
)
p = human_pw()
sec(
    F,
    "terraform_output_raw",
    f"$ terraform output -raw rds_master_password\n{p}",
    p,
    "terraform output",
)
p = mpw(24, ALNUM + "!#%&*()-_=+[]{}<>:?")
sec(
    F,
    "terraform_output_json_sensitive",
    '$ terraform output -json\n{\n  "db_password": {\n    "sensitive": true,\n    "type": "string",\n'
    + f'    "value": "{p}"\n  }}\n}}',
    p,
    '"sensitive": true',
)
t = jwt(alg="RS256", sig_bytes=256)
sec(
    F,
    "kubectl_config_view_raw_token",
    f"users:\n- name: ci-deployer\n  user:\n    token: {t}",
    t,
    "users:",
)
p = mpw(18)
sec(
    F,
    "docker_inspect_env_array",
    "$ docker inspect pg --format '{{json .Config.Env}}'\n"
    + f'["POSTGRES_PASSWORD={p}","POSTGRES_USER=app","PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","PG_MAJOR=16"]',
    p,
    "docker inspect",
)
p = b64(32)
sec(
    F,
    "gitlab_initial_root_password_file",
    "$ sudo cat /etc/gitlab/initial_root_password\n# WARNING: This value is valid only in the following conditions\n"
    "#          1. If provided manually (either via `GITLAB_ROOT_PASSWORD` environment variable or via `gitlab_rails['initial_root_password']` setting in `gitlab.rb`, it was provided before database was seeded for the first time (usually, the first reconfigure run).\n"
    f"\nPassword: {p}\n\n# NOTE: This file will be automatically deleted in the first reconfigure run after 24 hours.",
    p,
    "initial_root_password",
)
p = rs(ALNUM + "*=_-+", 20)
sec(
    F,
    "elasticsearch_first_start_banner",
    "✅ Elasticsearch security features have been automatically configured!\n✅ Authentication is enabled and cluster connections are encrypted.\n\n"
    f"ℹ️  Password for the elastic user (reset with `bin/elasticsearch-reset-password -u elastic`):\n  {p}",
    p,
    "Password for the elastic user",
)
p = rs(ALNUM + "*=_-+", 20)
sec(
    F,
    "elasticsearch_reset_password_new_value",
    f"$ bin/elasticsearch-reset-password -u elastic -b\nPassword for the [elastic] user successfully reset.\nNew value: {p}",
    p,
    "New value:",
)
t = "K10" + hx(64) + "::server:" + hx(32)
sec(
    F,
    "k3s_node_token_cat",
    f"$ sudo cat /var/lib/rancher/k3s/server/node-token\n{t}",
    t,
    "node-token",
)
t = rs(LALNUM, 6) + "." + rs(LALNUM, 16)
sec(
    F,
    "kubeadm_print_join_command",
    f"$ kubeadm token create --print-join-command\nkubeadm join 10.0.0.10:6443 --token {t} --discovery-token-ca-cert-hash sha256:{hx(64)}",
    t,
    "kubeadm join",
)
t = uid()
sec(
    F,
    "consul_acl_bootstrap_secretid",
    f"$ consul acl bootstrap\nAccessorID:       {uid()}\nSecretID:         {t}\nDescription:      Bootstrap Token (Global Management)\n"
    "Local:            false\nPolicies:\n   00000000-0000-0000-0000-000000000001 - global-management",
    t,
    "SecretID:",
)
t = uid()
sec(
    F,
    "nomad_acl_bootstrap_secret_id",
    f"$ nomad acl bootstrap\nAccessor ID  = {uid()}\nSecret ID    = {t}\nName         = Bootstrap Token\nType         = management",
    t,
    "Secret ID",
)
t = uid()
sec(
    F,
    "vault_approle_secret_id_output",
    f"$ vault write -f auth/approle/role/ci/secret-id\nKey                   Value\n---                   -----\nsecret_id             {t}\n"
    f"secret_id_accessor    {uid()}\nsecret_id_ttl         0s",
    t,
    "secret_id ",
)
t = b64url(32)
sec(
    F,
    "python_repl_secrets_token_urlsafe",
    f">>> import secrets\n>>> secrets.token_urlsafe(32)\n'{t}'",
    t,
    "token_urlsafe",
)
k = b64us(rb(32)) + "="
sec(
    F,
    "ipython_fernet_generate_key_out",
    f"In [3]: from cryptography.fernet import Fernet\n\nIn [4]: Fernet.generate_key()\nOut[4]: b'{k}'",
    k,
    "Fernet.generate_key",
)
k = hx(64)
sec(
    F,
    "node_e_randombytes_hex",
    f"$ node -e \"console.log(require('crypto').randomBytes(32).toString('hex'))\"\n{k}",
    k,
    "randomBytes",
)
k = hx(128)
sec(F, "rails_secret_output", f"$ bin/rails secret\n{k}", k, "bin/rails secret")
k = rs(ALNUM + "+/", 64)
sec(F, "mix_phx_gen_secret_output", f"$ mix phx.gen.secret\n{k}", k, "phx.gen.secret")
k = rs("abcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*(-_=+)", 50)
sec(
    F,
    "django_get_random_secret_key_repl",
    f">>> from django.core.management.utils import get_random_secret_key\n>>> get_random_secret_key()\n'{k}'",
    k,
    "get_random_secret_key",
)
t = whsec()
sec(
    F,
    "stripe_listen_signing_secret",
    f"$ stripe listen --forward-to localhost:3000/api/webhooks\n> Ready! You are using Stripe API Version [2024-04-10]. "
    f"Your webhook signing secret is {t} (^C to quit)",
    t,
    "stripe listen",
)
t = google_refresh()
sec(
    F,
    "firebase_login_ci_token",
    f'✔  Success! Use this token to login on a CI server:\n\n{t}\n\nExample: firebase deploy --token "$FIREBASE_TOKEN"',
    t,
    "firebase deploy",
)
t = jwt(alg="RS256", sig_bytes=256)
sec(
    F,
    "kubectl_create_token_output",
    f"$ kubectl create token ci-deployer -n ci --duration=24h\n{t}",
    t,
    "kubectl create token",
)
jsec = rs(ALNUM, 40)
anon = jwt({"iss": "supabase-demo", "role": "anon", "exp": 1983812996})
srv = jwt({"iss": "supabase-demo", "role": "service_role", "exp": 1983812996})
sec(
    F,
    "supabase_status_service_role_key",
    "         API URL: http://127.0.0.1:54321\n     GraphQL URL: http://127.0.0.1:54321/graphql/v1\n"
    f"      JWT secret: {jsec}\n        anon key: {anon}\nservice_role key: {srv}",
    srv,
    "service_role key:",
)
k = hx(32)
sec(F, "rails_master_key_cat", f"$ cat config/master.key\n{k}", k, "config/master.key")
t = npm_tok()
sec(
    F,
    "npm_token_create_table",
    "$ npm token create --read-only\n┌────────────────┬──────────────────────────────────────────┐\n"
    f"│ token          │ {t} │\n├────────────────┼──────────────────────────────────────────┤\n"
    "│ readonly       │ true                                     │\n└────────────────┴──────────────────────────────────────────┘",
    t,
    "npm token create",
)

# =========================================================================== provider_tokens
F = "provider_tokens"
_now = "2024-06-11T09:{:02d}:{:02d}.{:03d}Z"


def ts() -> str:
    return _now.format(R.randint(0, 59), R.randint(0, 59), R.randint(0, 999))


PROVIDERS = [
    ("github_classic_pat_env_export", ghp(), "export GITHUB_TOKEN={t}", "GITHUB_TOKEN"),
    (
        "github_fine_grained_pat_mcp_json",
        github_pat(),
        '{{\n  "mcpServers": {{\n    "github": {{\n      "command": "npx",\n      "args": ["-y", "@modelcontextprotocol/server-github"],\n'
        '      "env": {{ "GITHUB_PERSONAL_ACCESS_TOKEN": "{t}" }}\n    }}\n  }}\n}}',
        "GITHUB_PERSONAL_ACCESS_TOKEN",
    ),
    (
        "github_refresh_token_json",
        ghr(),
        '{{"access_token":"{a}","expires_in":28800,"refresh_token":"{t}","refresh_token_expires_in":15811200,"token_type":"bearer"}}',
        "refresh_token",
    ),
    (
        "gitlab_pat_chat_message",
        glpat(),
        "can you check why the pipeline can't pull the submodule? I created a token {t} with read_repository scope",
        "read_repository",
    ),
    (
        "gitlab_runner_token_register",
        glrt(),
        "gitlab-runner register --non-interactive --url https://gitlab.corp.local --token {t} --executor docker",
        "gitlab-runner register",
    ),
    (
        "slack_bot_token_dotenv",
        xoxb(),
        "SLACK_BOT_TOKEN={t}\nSLACK_SIGNING_SECRET={h}",
        "SLACK_BOT_TOKEN",
    ),
    (
        "slack_user_token_error",
        xoxp(),
        "slack_sdk.errors.SlackApiError: The request to the Slack API failed. (url: https://www.slack.com/api/chat.postMessage, token: {t})\n"
        "The server responded with: {{'ok': False, 'error': 'missing_scope'}}",
        "SlackApiError",
    ),
    (
        "slack_app_level_token_socket_mode",
        xapp(),
        "SLACK_APP_TOKEN={t}  # socket mode",
        "SLACK_APP_TOKEN",
    ),
    (
        "stripe_secret_key_log_line",
        sk_live(),
        "{ts} WARN  payments: retrying charge with key={t} attempt=2",
        "payments: retrying charge",
    ),
    (
        "stripe_restricted_key_yaml",
        rk_live(),
        "stripe:\n  restricted_key: {t}\n  account: acct_1Nw3Xz2eZvKYlo2C",
        "restricted_key",
    ),
    (
        "openai_project_key_traceback",
        openai_key(),
        "openai.AuthenticationError: Error code: 401 - {{'error': {{'message': 'Incorrect API key provided: {t}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.', 'type': 'invalid_request_error', 'code': 'invalid_api_key'}}}}",
        "openai.AuthenticationError",
    ),
    (
        "openai_legacy_key_shell_echo",
        openai_legacy(),
        "$ echo $OPENAI_API_KEY\n{t}",
        "echo $OPENAI_API_KEY",
    ),
    (
        "anthropic_key_claude_settings_env",
        anthropic_key(),
        '{{\n  "env": {{\n    "ANTHROPIC_API_KEY": "{t}",\n    "DISABLE_TELEMETRY": "1"\n  }}\n}}',
        "ANTHROPIC_API_KEY",
    ),
    (
        "google_api_key_curl_query",
        aiza(),
        'curl "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={t}"',
        "maps.googleapis.com",
    ),
    (
        "google_oauth_client_secret_json",
        gocspx(),
        '{{"web":{{"client_id":"{cid}.apps.googleusercontent.com","project_id":"acme-sso","client_secret":"{t}",'
        '"redirect_uris":["http://localhost:8080/callback"]}}}}',
        "client_secret",
    ),
    (
        "sendgrid_key_docker_run_e",
        sendgrid(),
        "docker run --rm -e SENDGRID_API_KEY={t} acme/mailer:1.2 send --to ops@acme.io",
        "SENDGRID_API_KEY",
    ),
    (
        "twilio_api_key_secret_pair",
        rs(ALNUM, 32),
        "TWILIO_API_KEY=SK{h}\nTWILIO_API_SECRET={t}",
        "TWILIO_API_SECRET",
    ),
    (
        "mailgun_private_key_curl_user",
        "key-" + hx(32),
        "curl -s --user 'api:{t}' https://api.mailgun.net/v3/mg.acme.io/messages -F to=ops@acme.io -F subject=test",
        "api.mailgun.net",
    ),
    (
        "mailchimp_key_dc_suffix",
        hx(32) + "-us" + str(R.randint(2, 21)),
        "MAILCHIMP_API_KEY = '{t}'",
        "MAILCHIMP_API_KEY",
    ),
    (
        "huggingface_token_cli_login",
        hf_tok(),
        "$ huggingface-cli login --token {t}\nToken is valid (permission: write).\nLogin successful",
        "huggingface-cli login",
    ),
    ("digitalocean_token_doctl", dop(), "doctl auth init --context acme -t {t}", "doctl auth init"),
    (
        "shopify_admin_token_header",
        shpat(),
        "curl -H 'X-Shopify-Access-Token: {t}' https://acme-store.myshopify.com/admin/api/2024-04/products.json",
        "X-Shopify-Access-Token",
    ),
    (
        "discord_bot_token_env_chat",
        discord_bot(),
        "bot keeps disconnecting, here's the .env:\nDISCORD_TOKEN={t}\nGUILD_ID=112233445566778899",
        "DISCORD_TOKEN",
    ),
    (
        "telegram_bot_token_url_log",
        telegram_bot(),
        "{ts} ERROR requests: HTTPSConnectionPool(host='api.telegram.org', port=443): Max retries exceeded with url: /bot{t}/getUpdates",
        "api.telegram.org",
    ),
    (
        "datadog_api_key_helm_values",
        hx(32),
        "datadog:\n  apiKey: {t}\n  appKey: {h40}\n  site: datadoghq.eu",
        "apiKey",
    ),
    (
        "newrelic_user_key_terraform",
        "NRAK-" + rs(UALNUM, 27),
        'provider "newrelic" {{\n  account_id = 3921744\n  api_key    = "{t}"\n  region     = "EU"\n}}',
        'provider "newrelic"',
    ),
    (
        "linear_api_key_header",
        "lin_api_" + rs(ALNUM, 40),
        "curl -X POST https://api.linear.app/graphql -H 'Authorization: {t}' -H 'Content-Type: application/json'",
        "api.linear.app",
    ),
    (
        "notion_integration_token_env",
        "ntn_" + digits(11) + rs(ALNUM, 35),
        "NOTION_TOKEN={t}",
        "NOTION_TOKEN",
    ),
    (
        "postman_api_key_newman",
        "PMAK-" + hx(24) + "-" + hx(34),
        "newman run https://api.getpostman.com/collections/{u}?apikey={t}",
        "newman run",
    ),
    (
        "atlassian_api_token_basic_user",
        "ATATT3xFfGF0" + rs(B64U, 170) + "=" + HX(8),
        "JIRA_USER=jdoe@acme.io\nJIRA_API_TOKEN={t}",
        "JIRA_API_TOKEN",
    ),
    (
        "figma_pat_header",
        "figd_" + rs(B64U, 40),
        "fetch('https://api.figma.com/v1/files/' + key, {{ headers: {{ 'X-Figma-Token': '{t}' }} }})",
        "X-Figma-Token",
    ),
    (
        "doppler_service_token_gha_env",
        "dp.st.prd." + rs(ALNUM, 40),
        "    env:\n      DOPPLER_TOKEN: {t}\n    steps:\n      - run: doppler run -- npm test",
        "DOPPLER_TOKEN",
    ),
    (
        "pulumi_access_token_export",
        "pul-" + hx(40),
        "export PULUMI_ACCESS_TOKEN={t}",
        "PULUMI_ACCESS_TOKEN",
    ),
    (
        "terraform_cloud_token_credentials_tfrc",
        rs(ALNUM, 14) + ".atlasv1." + rs(ALNUM, 67),
        '{{\n  "credentials": {{\n    "app.terraform.io": {{\n      "token": "{t}"\n    }}\n  }}\n}}',
        "app.terraform.io",
    ),
    (
        "sentry_user_auth_token_sentryclirc",
        "sntryu_" + hx(64),
        "[auth]\ntoken={t}\n\n[defaults]\norg=acme",
        "[auth]",
    ),
    (
        "netlify_pat_deploy_cmd",
        "nfp_" + rs(ALNUM, 36),
        "netlify deploy --prod --dir=dist --auth {t} --site {u}",
        "netlify deploy",
    ),
    (
        "supabase_access_token_cli",
        "sbp_" + hx(40),
        "SUPABASE_ACCESS_TOKEN={t} supabase db push",
        "supabase db push",
    ),
    (
        "planetscale_service_token",
        "pscale_tok_" + rs(B64U, 43),
        "PLANETSCALE_SERVICE_TOKEN_ID={h12}\nPLANETSCALE_SERVICE_TOKEN={t}",
        "PLANETSCALE_SERVICE_TOKEN",
    ),
    (
        "databricks_pat_cfg",
        "dapi" + hx(32),
        "[DEFAULT]\nhost  = https://adb-4821937458219.7.azuredatabricks.net\ntoken = {t}",
        "[DEFAULT]",
    ),
    (
        "groq_key_python_literal_warning",
        "gsk_" + rs(ALNUM, 52),
        "UserWarning: GROQ_API_KEY looks invalid: '{t}' (expected prefix gsk_)",
        "UserWarning",
    ),
    (
        "replicate_token_env",
        "r8_" + rs(ALNUM, 37),
        "REPLICATE_API_TOKEN={t}",
        "REPLICATE_API_TOKEN",
    ),
    (
        "cloudflare_api_token_wrangler_env",
        rs(B64U, 40),
        "CLOUDFLARE_API_TOKEN={t} npx wrangler deploy",
        "wrangler deploy",
    ),
    (
        "grafana_service_account_token",
        "glsa_" + rs(ALNUM, 32) + "_" + hx(8),
        '{ts} level=error logger=context error="invalid API key" token={t}',
        "invalid API key",
    ),
    (
        "square_access_token_ruby",
        "EAAA" + rs(B64U, 60),
        "client = Square::Client.new(access_token: '{t}', environment: 'production')",
        "Square::Client",
    ),
    (
        "mapbox_secret_token_netrc",
        "sk.eyJ1IjoiYWNtZS1tYXBzIiwiYSI6I" + rs(B64U, 30) + "." + rs(B64U, 22),
        "machine api.mapbox.com\nlogin mapbox\npassword {t}",
        "api.mapbox.com",
    ),
    (
        "jfrog_api_key_header",
        "AKCp" + rs(ALNUM, 69),
        "curl -H 'X-JFrog-Art-Api: {t}' -T app.jar https://corp.jfrog.io/artifactory/libs-release/app.jar",
        "X-JFrog-Art-Api",
    ),
    (
        "azure_devops_pat_git_askpass",
        rs("abcdefghijklmnopqrstuvwxyz234567", 52),
        "AZURE_DEVOPS_EXT_PAT={t} az devops project list --org https://dev.azure.com/acme",
        "az devops",
    ),
    (
        "okta_api_token_header",
        "00" + rs(B64U, 40),
        "Authorization: SSWS {t}",
        "Authorization: SSWS",
    ),
    (
        "asana_pat_bearer",
        "2/" + digits(16) + "/" + digits(16) + ":" + hx(32),
        'curl https://app.asana.com/api/1.0/users/me -H "Authorization: Bearer {t}"',
        "app.asana.com",
    ),
    (
        "circleci_pat_env",
        "CCIPAT_" + rs(ALNUM, 22) + "_" + hx(40),
        "CIRCLECI_TOKEN={t}",
        "CIRCLECI_TOKEN",
    ),
    (
        "buildkite_agent_api_token",
        "bkua_" + hx(40),
        "export BUILDKITE_API_TOKEN={t}",
        "BUILDKITE_API_TOKEN",
    ),
    (
        "render_api_key_header",
        "rnd_" + rs(ALNUM, 32),
        "requests.get('https://api.render.com/v1/services', headers={{'Authorization': 'Bearer {t}'}})",
        "api.render.com",
    ),
    (
        "contentful_cma_token",
        "CFPAT-" + rs(B64U, 43),
        "CONTENTFUL_MANAGEMENT_TOKEN={t}",
        "CONTENTFUL_MANAGEMENT_TOKEN",
    ),
    (
        "pinecone_api_key_env",
        "pcsk_" + rs(ALNUM, 5) + "_" + rs(ALNUM, 63),
        "PINECONE_API_KEY={t}",
        "PINECONE_API_KEY",
    ),
    (
        "fcm_legacy_server_key_header",
        "AAAA" + rs(B64U, 7) + ":APA91b" + rs(B64U, 134),
        "Authorization: key={t}",
        "Authorization: key=",
    ),
    (
        "shopify_shared_secret_env",
        "shpss_" + hx(32),
        "SHOPIFY_API_SECRET={t}",
        "SHOPIFY_API_SECRET",
    ),
    (
        "dropbox_short_lived_token_error",
        "sl." + rs(B64U, 136),
        "dropbox.exceptions.AuthError: AuthError('{u}', AuthError('expired_access_token', None)) token={t}",
        "dropbox.exceptions",
    ),
    (
        "postmark_server_token_uuid",
        uid(),
        "curl https://api.postmarkapp.com/email -H 'X-Postmark-Server-Token: {t}' -d @mail.json",
        "X-Postmark-Server-Token",
    ),
    ("launchdarkly_sdk_key", "sdk-" + uid(), "LD_SDK_KEY={t}", "LD_SDK_KEY"),
    (
        "alibaba_accesskey_secret",
        rs(ALNUM, 30),
        "ALIBABA_CLOUD_ACCESS_KEY_ID=LTAI{h20}\nALIBABA_CLOUD_ACCESS_KEY_SECRET={t}",
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
    ),
    (
        "resend_api_key_ts",
        "re_" + rs(ALNUM, 8) + "_" + rs(ALNUM, 24),
        "const resend = new Resend('{t}');",
        "new Resend",
    ),
    (
        "brevo_api_key_env",
        "xkeysib-" + hx(64) + "-" + rs(ALNUM, 16),
        "BREVO_API_KEY={t}",
        "BREVO_API_KEY",
    ),
    (
        "airtable_pat_header",
        "pat" + rs(ALNUM, 14) + "." + hx(64),
        "curl https://api.airtable.com/v0/appQ3xT9z2LmN8kPq/Tasks -H 'Authorization: Bearer {t}'",
        "api.airtable.com",
    ),
    (
        "sonarqube_user_token_gha",
        "squ_" + hx(40),
        "    env:\n      SONAR_TOKEN: {t}\n      SONAR_HOST_URL: https://sonar.corp.local",
        "SONAR_TOKEN",
    ),
    ("snyk_token_uuid_env", uid(), "SNYK_TOKEN={t} snyk test --all-projects", "snyk test"),
    (
        "aws_secret_in_chat",
        aws_secret(),
        "I made an IAM user for the bot: access key {ak} / secret {t} — can you wire it into the lambda?",
        "IAM user",
    ),
    (
        "fly_deploy_token_env",
        "FlyV1 fm2_" + rs(B64CH, 220) + "==",
        'FLY_API_TOKEN="{t}"',
        "FLY_API_TOKEN",
    ),
    (
        "heroku_api_key_netrc",
        uid(),
        "machine api.heroku.com\n  login dev@acme.io\n  password {t}",
        "api.heroku.com",
    ),
    (
        "cohere_key_python_kwarg",
        rs(ALNUM, 40),
        'co = cohere.Client(api_key="{t}")',
        "cohere.Client",
    ),
    (
        "mistral_key_langchain",
        rs(ALNUM, 32),
        'llm = ChatMistralAI(model="mistral-large-latest", api_key="{t}")',
        "ChatMistralAI",
    ),
    (
        "algolia_admin_key_env",
        hx(32),
        "ALGOLIA_APP_ID=Q3XT9Z2LMN\nALGOLIA_ADMIN_API_KEY={t}",
        "ALGOLIA_ADMIN_API_KEY",
    ),
]
for fmt, tok, tpl, keep in PROVIDERS:
    text = tpl.format(
        t=tok,
        ts=ts(),
        h=hx(32),
        h40=hx(40),
        h12=rs(LALNUM, 12),
        h20=rs(ALNUM, 20),
        u=uid(),
        cid=digits(12) + "-" + rs(LALNUM, 32),
        a=gho(),
        ak=aws_akid(),
    )
    sec(F, fmt, text, tok, keep)

# =========================================================================== encoded_private_keys
F = "encoded_private_keys"
full, body = pem("EC PRIVATE KEY", ec_sec1())
blob = b64s(full + "\n")
sec(
    F,
    "base64_pem_in_ordinary_env_var",
    f"# .env.production\nAPP_NAME=orders\nSIGNING_BLOB={blob}\nLOG_LEVEL=info",
    blob,
    "SIGNING_BLOB",
)
full, body = pem("PRIVATE KEY", ec_pkcs8())
blob = b64s(full + "\n")
crt = b64s(cert_pem() + "\n")
sec(
    F,
    "k8s_tls_secret_data_tls_key",
    f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-tls\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {crt}\n  tls.key: {blob}",
    blob,
    "tls.key",
)
full, body = pem("PRIVATE KEY", rsa2048_pkcs8())
esc = full.replace("\n", "\\n") + "\\n"
body_esc = body.replace("\n", "\\n")
sec(
    F,
    "gcp_service_account_json_private_key",
    '{\n  "type": "service_account",\n  "project_id": "acme-prod-4821",\n'
    f'  "private_key_id": "{hx(40)}",\n  "private_key": "{esc}",\n'
    '  "client_email": "deployer@acme-prod-4821.iam.gserviceaccount.com",\n'
    f'  "client_id": "{digits(21)}",',
    body_esc,
    '"type": "service_account"',
)
full, body = pem("EC PRIVATE KEY", ec_sec1())
sec(
    F,
    "pem_ec_private_key_block",
    f"$ cat certs/jwt-signing.key\n{full}",
    body,
    "-----BEGIN EC PRIVATE KEY-----",
)
full, body = pem("PRIVATE KEY", ed25519_pkcs8())
sec(
    F,
    "pem_pkcs8_ed25519_block",
    f"here's the signing key for the license server:\n\n{full}",
    body,
    "-----BEGIN PRIVATE KEY-----",
)
full, body, _pub = openssh_ed25519("deploy@ci")
sec(
    F,
    "pem_openssh_private_key_block",
    f"$ cat ~/.ssh/id_ed25519_deploy\n{full}",
    body,
    "-----BEGIN OPENSSH PRIVATE KEY-----",
)
full, body = pem("ENCRYPTED PRIVATE KEY", encrypted_pkcs8())
sec(F, "pem_encrypted_pkcs8_block", full, body, "-----BEGIN ENCRYPTED PRIVATE KEY-----")
enc_body = wrap(b64(128), 64)
sec(
    F,
    "pem_legacy_encrypted_ec_proc_type",
    f"-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,{HX(32)}\n\n{enc_body}\n-----END EC PRIVATE KEY-----",
    enc_body,
    "Proc-Type: 4,ENCRYPTED",
)
full, body = pem("RSA PRIVATE KEY", rsa1024_pkcs1())
sec(
    F,
    "pem_rsa_pkcs1_block_in_chat",
    f"the old jenkins agent key is this one, can you add it to the new box?\n{full}",
    body,
    "-----BEGIN RSA PRIVATE KEY-----",
)
pgp_body = wrap(base64.b64encode(b"\x94\x58\x04" + rb(330)).decode(), 64)
sec(
    F,
    "pgp_private_key_block",
    f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pgp_body}\n={b64(3)}\n-----END PGP PRIVATE KEY BLOCK-----",
    pgp_body,
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
)
pub32, priv32 = rb(32), rb(32)
pubb = base64.b64encode(sshstr(b"ssh-ed25519") + sshstr(pub32)).decode()
privb = base64.b64encode(sshstr(priv32)).decode()
sec(
    F,
    "putty_ppk_private_lines",
    f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: eddsa-key-20240311\nPublic-Lines: 2\n{pubb[:64]}\n{pubb[64:]}\n"
    f"Private-Lines: 1\n{privb}\nPrivate-MAC: {hx(64)}",
    privb,
    "Private-Lines: 1",
)
k = b64(32)
sec(
    F,
    "wireguard_interface_private_key",
    f"[Interface]\nAddress = 10.8.0.2/24\nPrivateKey = {k}\nDNS = 1.1.1.1\n\n[Peer]\nPublicKey = {b64(32)}\nEndpoint = vpn.acme.io:51820\nAllowedIPs = 0.0.0.0/0",
    k,
    "[Interface]",
)
k = "AGE-SECRET-KEY-1" + rs(BECH32.upper(), 58)
sec(
    F,
    "age_identity_file",
    f"# created: 2024-03-02T10:11:54+01:00\n# public key: age1{rs(BECH32, 58)}\n{k}",
    k,
    "# public key:",
)
d = b64url(32)
jwk = json.dumps(
    {
        "kty": "EC",
        "crv": "P-256",
        "kid": "sig-2024-06",
        "use": "sig",
        "x": b64url(32),
        "y": b64url(32),
        "d": d,
    },
    indent=2,
)
sec(F, "jwk_ec_private_d_param", jwk, d, '"kty": "EC"')
full, body, _pub = openssh_ed25519("github-actions")
indented = "\n".join("          " + ln for ln in full.splitlines())
sec(
    F,
    "yaml_block_scalar_ssh_private_key",
    f"deploy:\n  ssh:\n    host: 10.0.0.5\n    private_key: |\n{indented}",
    "\n".join("          " + ln for ln in body.splitlines()).strip(),
    "private_key: |",
)
full, body = pem("EC PRIVATE KEY", ec_sec1())
esc = full.replace("\n", "\\n")
sec(
    F,
    "python_string_literal_escaped_pem",
    f'APPLE_PRIVATE_KEY = "{esc}"',
    body.replace("\n", "\\n"),
    "APPLE_PRIVATE_KEY",
)
full, body = pem("RSA PRIVATE KEY", rsa1024_pkcs1())
esc = full.replace("\n", "\\n") + "\\n"
sec(
    F,
    "terraform_state_tls_private_key_pem",
    '        "attributes": {\n          "algorithm": "RSA",\n'
    f'          "private_key_pem": "{esc}",\n          "rsa_bits": 1024',
    body.replace("\n", "\\n"),
    "private_key_pem",
)
full, body, _pub = openssh_ed25519("ci@runner")
blob = b64s(full + "\n")
sec(F, "base64_openssh_key_ci_variable", f"DEPLOY_KEY_B64: {blob}", blob, "DEPLOY_KEY_B64")
p12 = base64.b64encode(
    bytes.fromhex("30820a1a020103308209d006092a864886f70d010701a08209c1") + rb(600)
).decode()
sec(
    F,
    "k8s_secret_data_pkcs12_keystore",
    f"data:\n  keystore.p12: {p12}\n  keystore-password: {b64s(mpw(12))}",
    p12,
    "keystore.p12",
)
raw = base64.b64encode(ed25519_pkcs8()).decode()
sec(
    F,
    "json_raw_der_base64_no_pem_headers",
    f'{{\n  "issuer": "license.acme.io",\n  "privateKey": "{raw}",\n  "algorithm": "EdDSA"\n}}',
    raw,
    '"privateKey"',
)
full, body = pem("PRIVATE KEY", ec_pkcs8())
esc = full.replace("\n", "\\n")
sec(
    F,
    "apns_p8_key_env_quoted",
    f'APNS_KEY_ID=7XK2M9QZ4L\nAPNS_PRIVATE_KEY="{esc}"',
    body.replace("\n", "\\n"),
    "APNS_PRIVATE_KEY",
)
full, body = pem("RSA PRIVATE KEY", rsa1024_pkcs1())
sec(
    F,
    "github_app_private_key_multiline_env",
    f'GITHUB_APP_ID=912044\nGITHUB_APP_PRIVATE_KEY="{full}"',
    body,
    "GITHUB_APP_PRIVATE_KEY",
)

# =========================================================================== url_credentials
F = "url_credentials"
p = human_pw(URLSYM)
sec(
    F,
    "postgres_url_user_password",
    f"DATABASE_URL=postgres://app:{p}@db.internal:5432/app?sslmode=require",
    p,
    "DATABASE_URL",
)
t = ghp()
sec(
    F,
    "token_as_userinfo_user_only",
    f"git remote set-url origin https://{t}@github.com/acme/api.git",
    t,
    "git remote set-url",
)
t = glpat()
sec(
    F,
    "oauth2_user_gitlab_clone",
    f"git clone https://oauth2:{t}@gitlab.corp.local/platform/terraform-modules.git",
    t,
    "git clone",
)
t = ghs()
sec(
    F,
    "x_access_token_user_clone",
    f"[command]/usr/bin/git submodule update --init https://x-access-token:{t}@github.com/acme/shared-protos.git",
    t,
    "submodule update",
)
t = glpat()
sec(
    F,
    "dunder_token_pip_index_url",
    f"pip install acme-internal --index-url https://__token__:{t}@gitlab.corp.local/api/v4/projects/412/packages/pypi/simple",
    t,
    "pip install",
)
p = human_pw(URLSYM)
sec(
    F,
    "jdbc_mysql_password_query_param",
    f"spring.datasource.url=jdbc:mysql://db:3306/app?user=app&password={p}&useSSL=true&serverTimezone=UTC",
    p,
    "spring.datasource.url",
)
p = human_pw(URLSYM)
sec(
    F,
    "jdbc_sqlserver_semicolon_password",
    f"jdbc:sqlserver://sql01.corp.local:1433;databaseName=hr;user=hr_app;password={p};encrypt=true;trustServerCertificate=true",
    p,
    "jdbc:sqlserver",
)
p = human_pw(CONNSYM)
sec(
    F,
    "odbc_connection_string_pwd",
    f"Driver={{ODBC Driver 18 for SQL Server}};Server=tcp:sql-prod.database.windows.net,1433;Database=sales;Uid=sales_ro;Pwd={p};Encrypt=yes;",
    p,
    "Driver={ODBC Driver 18 for SQL Server}",
)
p = human_pw(CONNSYM)
sec(
    F,
    "adonet_connection_string_password",
    f'"ConnectionStrings": {{\n  "Default": "Server=sql01;Database=Orders;User Id=orders_app;Password={p};TrustServerCertificate=True"\n}}',
    p,
    "ConnectionStrings",
)
k = b64(64)
sec(
    F,
    "azure_storage_connection_string_account_key",
    f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acmeprodlogs;AccountKey={k};EndpointSuffix=core.windows.net",
    k,
    "AZURE_STORAGE_CONNECTION_STRING",
)
sig = urllib.parse.quote(b64(32), safe="")
sec(
    F,
    "azure_sas_url_sig",
    f"https://acmeprodlogs.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=o&sp=r&se=2024-06-12T18:00:00Z&st=2024-06-11T10:00:00Z&spr=https&sig={sig}",
    sig,
    "blob.core.windows.net",
)
t = rs(B64U, 40)
sec(
    F,
    "websocket_token_query_param",
    f"connecting to wss://realtime.acme.io/socket/websocket?token={t}&vsn=2.0.0",
    t,
    "wss://realtime.acme.io",
)
h = rs(ALNUM, 24)
sec(
    F,
    "slack_incoming_webhook_path",
    f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T0{rs(UALNUM, 8)}/B0{rs(UALNUM, 9)}/{h}",
    h,
    "hooks.slack.com",
)
h = rs(B64U, 68)
sec(
    F,
    "discord_webhook_path",
    f"curl -H 'Content-Type: application/json' -d '{{\"content\":\"deploy ok\"}}' https://discord.com/api/webhooks/{digits(19)}/{h}",
    h,
    "discord.com/api/webhooks",
)
sig = hx(64)
sec(
    F,
    "s3_presigned_url_signature",
    f"https://acme-exports.s3.eu-west-1.amazonaws.com/2024/06/dump.sql.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={aws_akid()}%2F20240611%2Feu-west-1%2Fs3%2Faws4_request"
    f"&X-Amz-Date=20240611T101500Z&X-Amz-Expires=604800&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}",
    sig,
    "X-Amz-Algorithm",
)
sig = hx(512)
sec(
    F,
    "gcs_signed_url_goog_signature",
    "https://storage.googleapis.com/acme-artifacts/builds/app-1.9.2.tar.gz?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    "&X-Goog-Credential=signer%40acme-prod.iam.gserviceaccount.com%2F20240611%2Fauto%2Fstorage%2Fgoog4_request"
    f"&X-Goog-Date=20240611T101500Z&X-Goog-Expires=3600&X-Goog-SignedHeaders=host&X-Goog-Signature={sig}",
    sig,
    "X-Goog-Algorithm",
)
p = human_pw(URLSYM)
sec(
    F,
    "amqp_url_vhost",
    f"CELERY_BROKER_URL=amqp://orders:{p}@rabbitmq.internal:5672/orders",
    p,
    "CELERY_BROKER_URL",
)
p = mpw(32)
sec(
    F,
    "redis_url_empty_user",
    f"REDIS_URL=rediss://:{p}@cache-prod.abc123.ng.0001.euw1.cache.amazonaws.com:6379/0",
    p,
    "REDIS_URL",
)
p = human_pw(URLSYM)
sec(
    F,
    "mongodb_srv_url",
    f'MONGO_URI="mongodb+srv://atlas-admin:{p}@cluster0.q3xt9.mongodb.net/app?retryWrites=true&w=majority"',
    p,
    "MONGO_URI",
)
p = human_pw(URLSYM)
sec(
    F,
    "ftp_url_userinfo",
    f"curl -T backup.tar.gz ftp://backup:{p}@ftp.hosting.example/uploads/",
    p,
    "curl -T",
)
h = hx(32)
sec(
    F,
    "teams_incoming_webhook_url",
    f"https://acme.webhook.office.com/webhookb2/{uid()}@{uid()}/IncomingWebhook/{h}/{uid()}",
    h,
    "IncomingWebhook",
)
p = human_pw(URLSYM)
sec(
    F,
    "bitbucket_clone_user_password",
    f"git clone https://deploy-bot:{p}@bitbucket.org/acme/legacy-php.git",
    p,
    "bitbucket.org",
)
p = human_pw(URLSYM)
sec(
    F,
    "http_proxy_env_userinfo",
    f"export https_proxy=http://jdoe:{p}@proxy.corp.local:3128",
    p,
    "https_proxy",
)
raw = human_pw("@#/:?")
enc = urllib.parse.quote(raw, safe="")
sec(
    F,
    "percent_encoded_password_in_url",
    f"SQLALCHEMY_DATABASE_URI=postgresql+psycopg://admin:{enc}@10.0.0.7/metrics",
    enc,
    "SQLALCHEMY_DATABASE_URI",
)
p = rs(ALNUM + "*_-", 20)
sec(
    F,
    "elastic_basic_url",
    f"ELASTICSEARCH_URL=https://elastic:{p}@es01.internal:9200",
    p,
    "ELASTICSEARCH_URL",
)
t = sendgrid()
sec(
    F, "smtp_url_apikey_user", f"EMAIL_URL=smtps://apikey:{t}@smtp.sendgrid.net:465", t, "EMAIL_URL"
)
t = telegram_bot()
sec(
    F,
    "telegram_bot_api_url_path",
    f'curl -s "https://api.telegram.org/bot{t}/sendMessage?chat_id=-100123456789&text=deploy%20done"',
    t,
    "sendMessage",
)
tok = b64url(32)
sec(
    F,
    "google_chat_webhook_key_and_token",
    f"https://chat.googleapis.com/v1/spaces/AAAA{rs(B64U, 7)}/messages?key={aiza()}&token={urllib.parse.quote(tok)}",
    tok,
    "chat.googleapis.com",
)
pub_, secret_ = hx(32), hx(32)
sec(
    F,
    "sentry_legacy_dsn_with_secret",
    f"SENTRY_DSN=https://{pub_}:{secret_}@sentry.corp.local/12",
    secret_,
    "SENTRY_DSN",
)
p = human_pw(URLSYM)
sec(
    F,
    "kafka_connect_jdbc_connection_url_json",
    f'"connection.url": "jdbc:postgresql://pg:5432/orders?user=connect&password={p}",',
    p,
    "connection.url",
)
p = human_pw(URLSYM)
sec(
    F,
    "docker_compose_healthcheck_url_creds",
    f'      test: ["CMD", "curl", "-f", "http://admin:{p}@localhost:15672/api/healthchecks/node"]',
    p,
    "healthchecks",
)
t = rs(B64U, 32)
sec(
    F,
    "grafana_render_auth_token_query",
    f"https://grafana.corp.local/render/d-solo/abc/api?orgId=1&panelId=4&auth_token={t}",
    t,
    "grafana.corp.local",
)

# =========================================================================== config_entries
F = "config_entries"
p = human_pw() + " " + R.choice(WORDS)
sec(
    F,
    "dotenv_passphrase_quoted",
    f'KEYSTORE_PATH=./certs/app.jks\nKEYSTORE_PASSPHRASE="{p}"',
    p,
    "KEYSTORE_PASSPHRASE",
)
p = human_pw()
sec(
    F,
    "ini_pass_key",
    f"[smtp]\nhost = mail.acme.io\nuser = noreply\npass = {p}\nport = 587",
    p,
    "[smtp]",
)
p = human_pw()
sec(
    F,
    "yaml_pwd_key",
    f"ldap:\n  bind_dn: cn=svc,dc=corp,dc=local\n  pwd: '{p}'\n  base: dc=corp,dc=local",
    p,
    "bind_dn",
)
p = human_pw()
sec(
    F,
    "toml_passwd_key",
    f'[database]\nhost = "10.0.0.7"\nuser = "metrics"\npasswd = "{p}"',
    p,
    "[database]",
)
k = hx(128)
sec(F, "yaml_secret_key_base", f"production:\n  secret_key_base: {k}", k, "secret_key_base")
k = b64(32)
sec(
    F,
    "toml_signing_key",
    f'[jwt]\nissuer = "auth.acme.io"\nsigning_key = "{k}"\nttl = "15m"',
    k,
    "signing_key",
)
s1, s2 = rs(ALNUM, 22), rs(ALNUM, 32)
sec(
    F,
    "json_salt_and_pepper",
    f'{{\n  "hashing": {{\n    "algorithm": "argon2id",\n    "salt": "{s1}",\n    "pepper": "{s2}"\n  }}\n}}',
    s2,
    '"pepper"',
)
k = rs(ALNUM, 40)
sec(
    F,
    "json_client_secret_oidc",
    f'{{\n  "issuer": "https://login.acme.io/realms/main",\n  "client_id": "grafana",\n  "client_secret": "{k}"\n}}',
    k,
    '"client_secret"',
)
k = hx(32)
sec(
    F,
    "php_return_array_app_secret",
    f"<?php\nreturn [\n    'app_id' => '1928374650',\n    'app_secret' => '{k}',\n];",
    k,
    "'app_secret'",
)
k = hx(32)
sec(F, "yaml_master_key", f'encryption:\n  master_key: "{k}"\n  rotate_days: 90', k, "master_key")
k = b64(32)
sec(
    F,
    "xml_encryption_key_element",
    f'<configuration>\n  <appSettings>\n    <add key="EncryptionKey" value="{k}" />\n    <add key="Environment" value="Production" />\n  </appSettings>\n</configuration>',
    k,
    "EncryptionKey",
)
k = rs(ALNUM, 32)
sec(
    F,
    "properties_webhook_secret",
    f"github.webhook-secret={k}\ngithub.app-id=912044",
    k,
    "github.webhook-secret",
)
t = glpat()
sec(
    F,
    "python_gitlab_cfg_private_token",
    f"[global]\ndefault = corp\nssl_verify = true\n\n[corp]\nurl = https://gitlab.corp.local\nprivate_token = {t}\napi_version = 4",
    t,
    "private_token",
)
t = telegram_bot()
sec(F, "toml_bot_token", f'[telegram]\nbot_token = "{t}"\nchat_id = -1001234567890', t, "bot_token")
t = google_refresh()
sec(
    F,
    "rclone_conf_token_json_refresh",
    f'[gdrive]\ntype = drive\nscope = drive\ntoken = {{"access_token":"{ya29()}","token_type":"Bearer","refresh_token":"{t}","expiry":"2024-06-11T11:02:11.0+02:00"}}',
    t,
    "[gdrive]",
)
k = b64url(32)
sec(
    F,
    "hcl_session_secret",
    f'session {{\n  cookie_name    = "_acme_sess"\n  session_secret = "{k}"\n}}',
    k,
    "session_secret",
)
k = b64url(32)
sec(
    F,
    "oauth2_proxy_cookie_secret",
    f'provider = "github"\nclient_id = "Ov23li{rs(ALNUM, 14)}"\ncookie_secret = "{k}"',
    k,
    "cookie_secret",
)
k = hx(40)
sec(
    F,
    "newrelic_yml_license_key",
    f"common: &default_settings\n  license_key: '{k}'\n  app_name: orders-api",
    k,
    "license_key",
)
pub_, k = hx(32), hx(32)
sec(
    F,
    "python_settings_dsn_with_secret",
    f'RAVEN_CONFIG = {{\n    "dsn": "https://{pub_}:{k}@sentry.corp.local/7",\n    "release": GIT_SHA,\n}}',
    k,
    "RAVEN_CONFIG",
)
t = npm_tok()
sec(
    F,
    "npmrc_authtoken_scoped",
    f"@acme:registry=https://npm.pkg.github.com\n//npm.pkg.github.com/:_authToken={t}\nalways-auth=true",
    t,
    "_authToken",
)
u, p = "ci-bot", mpw(24)
a = b64s(f"{u}:{p}")
sec(
    F,
    "docker_config_json_auth_b64",
    f'{{\n  "auths": {{\n    "harbor.corp.local": {{\n      "auth": "{a}"\n    }}\n  }}\n}}',
    a,
    '"auths"',
)
p = human_pw()
sec(
    F,
    "spring_properties_datasource_password",
    f"spring.datasource.url=jdbc:postgresql://db:5432/orders\nspring.datasource.username=orders\nspring.datasource.password={p}",
    p,
    "spring.datasource.password",
)
p = human_pw()
sec(
    F,
    "maven_settings_xml_server_password",
    f"<server>\n  <id>corp-releases</id>\n  <username>deployer</username>\n  <password>{p}</password>\n</server>",
    p,
    "<server>",
)
p = human_pw()
sec(
    F,
    "gradle_properties_signing_password",
    f"signing.keyId=24875D73\nsigning.password={p}\nsigning.secretKeyRingFile=/home/dev/.gnupg/secring.gpg",
    p,
    "signing.password",
)
t = rs(ALNUM, 52)
sec(
    F,
    "nuget_config_cleartextpassword",
    f'<packageSourceCredentials>\n  <corp>\n    <add key="Username" value="ci" />\n    <add key="ClearTextPassword" value="{t}" />\n  </corp>\n</packageSourceCredentials>',
    t,
    "ClearTextPassword",
)
k = rs("".join(c for c in string.printable[:94] if c not in "'\\"), 64)
sec(F, "wordpress_wp_config_auth_key", f"define( 'AUTH_KEY',         '{k}' );", k, "AUTH_KEY")
p = human_pw()
sec(
    F,
    "terraform_tfvars_password",
    f'db_username = "admin"\ndb_password = "{p}"\ninstance_class = "db.t4g.medium"',
    p,
    "db_password",
)
p = human_pw()
sec(
    F,
    "terraform_variable_default_sensitive",
    f'variable "grafana_admin_password" {{\n  type      = string\n  sensitive = true\n  default   = "{p}"\n}}',
    p,
    'variable "grafana_admin_password"',
)
p = human_pw()
sec(
    F,
    "terraform_resource_inline_password",
    f'resource "aws_db_instance" "main" {{\n  engine         = "postgres"\n  username       = "master"\n  password       = "{p}"\n  skip_final_snapshot = true\n}}',
    p,
    'resource "aws_db_instance"',
)
p = human_pw()
sec(
    F,
    "ansible_host_vars_become_password",
    f"---\nansible_host: 10.0.0.21\nansible_user: deploy\nansible_become_password: {p}",
    p,
    "ansible_become_password",
)
p = human_pw()
sec(
    F,
    "ansible_task_mysql_user_password",
    f"- name: create app db user\n  community.mysql.mysql_user:\n    name: app\n    password: \"{p}\"\n    priv: 'app.*:ALL'",
    p,
    "community.mysql.mysql_user",
)
p = mpw(20)
sec(
    F,
    "docker_compose_environment_map",
    f"services:\n  db:\n    image: mysql:8.4\n    environment:\n      MYSQL_DATABASE: shop\n      MYSQL_ROOT_PASSWORD: {p}",
    p,
    "MYSQL_ROOT_PASSWORD",
)
p = human_pw()
sec(
    F,
    "k8s_deployment_env_value_literal",
    f'        env:\n          - name: DB_USER\n            value: app\n          - name: DB_PASSWORD\n            value: "{p}"',
    p,
    "DB_PASSWORD",
)
p = human_pw()
sec(
    F,
    "k8s_configmap_password_misuse",
    f'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  SMTP_HOST: smtp.office365.com\n  SMTP_PASSWORD: "{p}"',
    p,
    "SMTP_PASSWORD",
)
t = rs(ALNUM, 40)
sec(
    F,
    "systemd_unit_environment_token",
    f'[Service]\nUser=exporter\nEnvironment="API_TOKEN={t}"\nExecStart=/usr/local/bin/exporter --listen :9100',
    t,
    "Environment=",
)
u, p = "prometheus", human_pw()
a = b64s(f"{u}:{p}")
sec(
    F,
    "nginx_proxy_set_header_basic",
    f'location /metrics/ {{\n    proxy_pass http://127.0.0.1:9090/;\n    proxy_set_header Authorization "Basic {a}";\n}}',
    a,
    "proxy_set_header Authorization",
)
p = human_pw()
sec(
    F,
    "apache_setenv_db_pass",
    f'<VirtualHost *:443>\n    ServerName intranet.corp.local\n    SetEnv DB_PASS "{p}"\n',
    p,
    "SetEnv DB_PASS",
)
t = npm_tok()
sec(
    F,
    "dockerfile_env_npm_token",
    f"FROM node:20-alpine\nWORKDIR /app\nENV NPM_TOKEN={t}\nCOPY package*.json .npmrc ./\nRUN npm ci",
    t,
    "ENV NPM_TOKEN",
)
t = npm_tok()
sec(
    F,
    "dockerfile_run_echo_npmrc",
    f'RUN echo "//registry.npmjs.org/:_authToken={t}" > .npmrc && npm ci && rm .npmrc',
    t,
    "RUN echo",
)
t = rs(ALNUM, 40)
sec(
    F,
    "makefile_conditional_assign_token",
    f'DEPLOY_TOKEN ?= {t}\n\ndeploy:\n\tcurl -fsS -H "Authorization: Bearer $(DEPLOY_TOKEN)" $(DEPLOY_URL)',
    t,
    "DEPLOY_TOKEN ?=",
)
t = pypi_tok()
sec(
    F,
    "pypirc_password_token",
    f"[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = {t}",
    t,
    "[pypi]",
)
t = "rubygems_" + hx(48)
sec(F, "gem_credentials_yaml", f"---\n:rubygems_api_key: {t}", t, ":rubygems_api_key:")
t = "cio" + rs(ALNUM, 32)
sec(F, "cargo_credentials_toml", f'[registry]\ntoken = "{t}"', t, "[registry]")
p = mpw(32)
sec(F, "pgbouncer_userlist", f'"pgbouncer" "{p}"\n"app" "{mpw(32)}"', p, '"pgbouncer"')
p = mpw(32)
sec(
    F,
    "redis_conf_requirepass",
    f"bind 0.0.0.0\nprotected-mode yes\nrequirepass {p}\nmaxmemory 2gb",
    p,
    "requirepass",
)
p = mpw(24)
sec(F, "redis_conf_masterauth", f"replicaof 10.0.0.11 6379\nmasterauth {p}", p, "masterauth")
p = human_pw()
sec(
    F,
    "rabbitmq_conf_default_pass",
    f"default_user = orders\ndefault_pass = {p}\nlisteners.tcp.default = 5672",
    p,
    "default_pass",
)
p = human_pw()
sec(
    F,
    "php_fpm_pool_env",
    f"[www]\nuser = www-data\nenv[DB_HOST] = 127.0.0.1\nenv[DB_PASS] = {p}",
    p,
    "env[DB_PASS]",
)
p = human_pw()
sec(
    F,
    "grafana_ini_admin_password",
    f"[security]\nadmin_user = admin\nadmin_password = {p}\ndisable_gravatar = true",
    p,
    "admin_password",
)
k = b64us(rb(32)) + "="
sec(
    F,
    "airflow_cfg_fernet_key",
    f"[core]\nexecutor = CeleryExecutor\nfernet_key = {k}",
    k,
    "fernet_key",
)
k = "django-insecure-" + rs("abcdefghijklmnopqrstuvwxyz0123456789!@#%^&*(-_=+)", 50)
sec(F, "django_settings_secret_key_insecure", f"SECRET_KEY = '{k}'\nDEBUG = True", k, "SECRET_KEY")
k = rs(ALNUM + "/+", 48)
sec(
    F,
    "nextcloud_config_php_secret",
    f"  'passwordsalt' => '{rs(ALNUM, 30)}',\n  'secret' => '{k}',\n  'trusted_domains' => array (0 => 'cloud.acme.io'),",
    k,
    "'secret'",
)
p = "-".join(rs(LOWER, 4) for _ in range(4)).replace("-", " ")
sec(
    F,
    "postfix_sasl_passwd_gmail_app_password",
    f"[smtp.gmail.com]:587 alerts.acme@gmail.com:{p.replace(' ', '')}",
    p.replace(" ", ""),
    "[smtp.gmail.com]:587",
)
p = human_pw()
sec(
    F,
    "msmtprc_password",
    f"account default\nhost smtp.fastmail.com\nport 465\nuser me@acme.io\npassword {p}\ntls on",
    p,
    "account default",
)
p = human_pw()
sec(
    F,
    "muttrc_smtp_pass",
    f'set smtp_url = "smtps://me@acme.io@smtp.fastmail.com:465/"\nset smtp_pass = "{p}"',
    p,
    "smtp_pass",
)
ak, sk = aws_akid(), aws_secret()
sec(
    F,
    "aws_credentials_ini_profile",
    f"[default]\naws_access_key_id = {ak}\naws_secret_access_key = {sk}\n\n[prod]\nrole_arn = arn:aws:iam::{digits(12)}:role/admin\nsource_profile = default",
    sk,
    "aws_secret_access_key",
)
ak, sk = rs(UALNUM, 20), rs(ALNUM + "+/", 40)
sec(
    F,
    "s3cfg_secret_key",
    f"[default]\naccess_key = {ak}\nsecret_key = {sk}\nhost_base = s3.wasabisys.com",
    sk,
    "secret_key",
)
p = human_pw()
sec(
    F,
    "my_cnf_client_password",
    f'[client]\nuser=root\npassword="{p}"\nhost=127.0.0.1',
    p,
    "[client]",
)
k = rs(ALNUM, 32)
sec(
    F,
    "github_actions_env_literal_secret",
    f"jobs:\n  e2e:\n    runs-on: ubuntu-latest\n    env:\n      CYPRESS_RECORD_KEY: {uid()}\n      PERCY_TOKEN: {k}",
    k,
    "PERCY_TOKEN",
)
k = uid()
sec(
    F,
    "github_actions_cypress_record_key_uuid",
    f"      - run: npx cypress run --record --key {k}",
    k,
    "cypress run",
)
p = human_pw()
sec(
    F,
    "supervisord_environment",
    f'[program:worker]\ncommand=/srv/app/bin/worker\nenvironment=DB_PASSWORD="{p}",QUEUE=default',
    p,
    "[program:worker]",
)
p = human_pw()
sec(
    F,
    "helm_values_yaml_nested_password",
    f"postgresql:\n  auth:\n    username: app\n    password: {p}\n    database: app",
    p,
    "postgresql:",
)
k = b64(24)
sec(
    F,
    "jenkins_casc_yaml_secret",
    f'credentials:\n  system:\n    domainCredentials:\n      - credentials:\n          - string:\n              id: slack-token\n              secret: "{k}"',
    k,
    "domainCredentials",
)
p = human_pw()
sec(
    F,
    "appsettings_json_smtp_password",
    f'"Smtp": {{\n    "Host": "smtp.sendgrid.net",\n    "UserName": "apikey",\n    "Password": "{p}"\n}}',
    p,
    '"Smtp"',
)
p = human_pw()
sec(
    F,
    "netplan_wifi_password_config",
    f'network:\n  version: 2\n  wifis:\n    wlan0:\n      dhcp4: true\n      access-points:\n        "Office-5G":\n          password: "{p}"',
    p,
    "access-points",
)

# =========================================================================== prose_and_logs
F = "prose_and_logs"
p = human_pw()
sec(
    F,
    "chat_password_for_staging_is",
    f"the password for staging is {p} — can you log in to the admin panel and check the orders page?",
    p,
    "the password for staging is",
)
k = rs(ALNUM, 40)
sec(
    F,
    "chat_heres_the_key_keep_safe",
    f"here's the key {k}, keep it safe and don't commit it pls",
    k,
    "keep it safe",
)
p = human_pw()
sec(
    F,
    "chat_use_backticked_admin_pw",
    f"just use `{p}` as the admin pw for now, I'll rotate it after the demo",
    p,
    "admin pw",
)
p = human_pw()
sec(
    F,
    "chat_spanish_password",
    f"la contraseña del servidor de staging es {p}, cámbiala cuando termines",
    p,
    "la contraseña",
)
p = human_pw()
sec(
    F,
    "chat_german_password",
    f"Das Passwort für die Test-DB ist {p} (User: tester)",
    p,
    "Das Passwort",
)
p = human_pw()
sec(
    F,
    "chat_short_creds_line",
    f"creds for the router ui:\nuser: admin\npw: {p}",
    p,
    "creds for the router ui",
)
u, p = "jenkins", human_pw()
a = b64s(f"{u}:{p}")
sec(
    F,
    "curl_verbose_authorization_basic",
    f"> GET /api/json HTTP/1.1\n> Host: ci.corp.local\n> Authorization: Basic {a}\n> User-Agent: curl/8.5.0\n> Accept: */*",
    a,
    "> Host: ci.corp.local",
)
t = jwt()
sec(
    F,
    "http_dump_authorization_bearer_jwt",
    f"POST /v1/orders HTTP/1.1\nHost: api.acme.io\nAuthorization: Bearer {t}\nContent-Type: application/json",
    t,
    "POST /v1/orders",
)
t = hx(40)
sec(
    F,
    "http_authorization_token_drf",
    f"GET /api/v1/projects/ HTTP/1.1\nAuthorization: Token {t}",
    t,
    "GET /api/v1/projects/",
)
resp = hx(32)
sec(
    F,
    "http_authorization_digest_response",
    f'Authorization: Digest username="admin", realm="camera", nonce="{hx(32)}", uri="/ISAPI/System/deviceInfo", '
    f'qop=auth, nc=00000001, cnonce="{hx(16)}", response="{resp}"',
    resp,
    "Authorization: Digest",
)
sid = rs(LALNUM, 32)
sec(
    F,
    "http_cookie_sessionid_csrftoken",
    f"Cookie: csrftoken={rs(ALNUM, 32)}; sessionid={sid}; django_language=en",
    sid,
    "Cookie:",
)
sid = hx(32)
sec(
    F,
    "http_set_cookie_gitlab_session",
    f"< HTTP/2 302\n< set-cookie: _gitlab_session={sid}; path=/; secure; HttpOnly; SameSite=None\n< location: https://gitlab.corp.local/",
    sid,
    "set-cookie",
)
t = rs(ALNUM, 32)
sec(
    F,
    "http_x_auth_token_header_dump",
    f"X-Auth-Token: {t}\nX-Request-Id: {uid()}",
    t,
    "X-Auth-Token",
)
u, p = "jdoe", human_pw()
a = b64s(f"{u}:{p}")
sec(
    F,
    "http_proxy_authorization_basic",
    f"CONNECT api.github.com:443 HTTP/1.1\nProxy-Authorization: Basic {a}",
    a,
    "Proxy-Authorization",
)
p = human_pw()
sec(
    F,
    "env_sorted_output_db_password",
    f"$ env | sort\nDB_HOST=db.internal\nDB_PASSWORD={p}\nDB_USER=app\nHOME=/root\nHOSTNAME=api-7c9f6d8b5-x2lqk",
    p,
    "env | sort",
)
t = sendgrid()
sec(F, "printenv_single_var", f"$ printenv SENDGRID_API_KEY\n{t}", t, "printenv")
t = glpat()
sec(
    F,
    "ci_bash_xtrace_leak",
    f"$ ./scripts/release.sh\n+ VERSION=1.9.2\n+ curl -fsS --header 'PRIVATE-TOKEN: {t}' -X POST https://gitlab.corp.local/api/v4/projects/12/releases",
    t,
    "./scripts/release.sh",
)
p = human_pw()
sec(
    F,
    "ci_set_x_export_mysql_pwd",
    f"+ export MYSQL_PWD={p}\n+ mysql -h db -u root -e 'SELECT 1'",
    p,
    "MYSQL_PWD",
)
p = human_pw()
sec(
    F,
    "python_traceback_dsn_source_line",
    'Traceback (most recent call last):\n  File "/srv/app/sync.py", line 42, in connect\n    conn = psycopg2.connect(dsn)\n'
    f"    dsn = 'host=db.internal user=sync password={p} dbname=crm'\n"
    'psycopg2.OperationalError: connection to server at "db.internal" (10.0.0.7), port 5432 failed: timeout expired',
    p,
    "Traceback",
)
p = human_pw()
sec(
    F,
    "axios_error_config_dump",
    "AxiosError: Request failed with status code 403\n    at settle (node_modules/axios/lib/core/settle.js:19:12) {\n  code: 'ERR_BAD_REQUEST',\n"
    f"  config: {{\n    auth: {{ username: 'svc-reporting', password: '{p}' }},\n    url: 'https://jira.corp.local/rest/api/2/search',",
    p,
    "AxiosError",
)
p = human_pw()
sec(
    F,
    "kubectl_describe_pod_env",
    f"    Environment:\n      NODE_ENV:        production\n      REDIS_PASSWORD:  {p}\n      PORT:            8080",
    p,
    "Environment:",
)
k = rs(ALNUM, 32)
sec(
    F,
    "nginx_access_log_api_key_query",
    f'203.0.113.42 - - [11/Jun/2024:09:14:03 +0000] "GET /v1/weather?q=Berlin&api_key={k} HTTP/1.1" 200 512 "-" "python-requests/2.31.0"',
    k,
    "GET /v1/weather",
)
p = human_pw()
sec(
    F,
    "app_log_connecting_with_password",
    f"{ts()} INFO  cache: connecting to redis://cache.internal:6379 with password={p} db=0",
    p,
    "connecting to redis",
)
p = human_pw()
sec(
    F,
    "rails_log_unfiltered_params",
    f'Started POST "/users/sign_in" for 10.0.0.1 at 2024-06-11 09:14:03 +0000\n'
    f'  Parameters: {{"authenticity_token"=>"[FILTERED]", "user"=>{{"email"=>"ops@acme.io", "password"=>"{p}"}}, "commit"=>"Log in"}}',
    p,
    "Started POST",
)
p = human_pw()
sec(
    F,
    "http_form_body_login",
    f"POST /login HTTP/1.1\nContent-Type: application/x-www-form-urlencoded\n\nusername=admin&password={urllib.parse.quote(p)}",
    urllib.parse.quote(p),
    "POST /login",
)
t = rs(ALNUM, 40)
sec(
    F,
    "grpc_debug_log_metadata",
    f"{ts()} DEBUG grpc: outgoing metadata: map[authorization:[Bearer {t}] user-agent:[grpc-go/1.64.0]]",
    t,
    "outgoing metadata",
)
p = human_pw()
sec(
    F,
    "docker_compose_config_rendered",
    f"$ docker compose config\nservices:\n  api:\n    environment:\n      JWT_SECRET: {rs(ALNUM, 32)}\n      SMTP_PASSWORD: {p}",
    p,
    "docker compose config",
)
p = human_pw()
sec(
    F,
    "chat_same_as_before_password",
    f"ssh is deploy@10.0.0.5, password is the same as the wifi one: {p}",
    p,
    "ssh is deploy",
)

# =========================================================================== crypto_wallets
F = "crypto_wallets"
m = mnemonic(12)
sec(F, "bip39_12_words_dotenv", f'MNEMONIC="{m}"\nINFURA_PROJECT_ID={hx(32)}', m, "MNEMONIC")
m = mnemonic(24)
sec(
    F,
    "bip39_24_words_chat",
    f"I restored my metamask with this seed on the test box, can you derive the first address? {m}",
    m,
    "metamask",
)
k = "0x" + hx(64)
sec(
    F,
    "hardhat_accounts_private_key",
    f'  networks: {{\n    sepolia: {{\n      url: `https://sepolia.infura.io/v3/${{INFURA_KEY}}`,\n      accounts: ["{k}"],\n    }},',
    k,
    "accounts:",
)
k = "0x" + hx(64)
sec(
    F,
    "ethers_wallet_constructor",
    f"const wallet = new ethers.Wallet('{k}', provider);",
    k,
    "ethers.Wallet",
)
k = "0x" + hx(64)
sec(
    F,
    "foundry_forge_script_private_key",
    f"forge script script/Deploy.s.sol --rpc-url $SEPOLIA_RPC --broadcast --private-key {k}",
    k,
    "forge script",
)
k = hx(64)
sec(
    F,
    "web3_private_key_env_no_prefix",
    f"PRIVATE_KEY={k}\nRPC_URL=https://arb1.arbitrum.io/rpc",
    k,
    "PRIVATE_KEY",
)
k = "0x" + hx(64)
sec(F, "web3py_account_from_key", f'acct = w3.eth.account.from_key("{k}")', k, "from_key")
k = "xprv9s21ZrQH143K" + rs(B58, 95)
sec(
    F,
    "bip32_xprv_electrum_output",
    f">>> wallet.keystore.get_master_private_key(None)\n'{k}'",
    k,
    "get_master_private_key",
)
k = R.choice("KL") + rs(B58, 51)
sec(
    F,
    "bitcoin_wif_importprivkey",
    f'bitcoin-cli -rpcwallet=hot importprivkey "{k}" "hot-1" false',
    k,
    "importprivkey",
)
arr = "[" + ",".join(str(b) for b in rb(64)) + "]"
sec(F, "solana_keypair_json_array", f"$ cat ~/.config/solana/id.json\n{arr}", arr, "solana/id.json")
m = mnemonic(24)
sec(
    F,
    "cosmos_keys_add_recover_transcript",
    f"$ gaiad keys add validator --recover\n> Enter your bip39 mnemonic\n{m}\n\n- address: cosmos1{rs(BECH32, 38)}",
    m,
    "keys add validator",
)

# =========================================================================== network_device_secrets
F = "network_device_secrets"
p = human_pw()
sec(
    F,
    "wpa_supplicant_psk_quoted",
    f'network={{\n    ssid="Office-5G"\n    psk="{p}"\n    key_mgmt=WPA-PSK\n}}',
    p,
    'ssid="Office-5G"',
)
p = human_pw(SHQ)
sec(
    F,
    "nmcli_wifi_connect_password",
    f'nmcli device wifi connect "HomeNet-5G" password "{p}" ifname wlan0',
    p,
    "nmcli device wifi connect",
)
p = human_pw()
sec(
    F,
    "hostapd_wpa_passphrase",
    f"interface=wlan0\nssid=pi-ap\nwpa=2\nwpa_passphrase={p}\nwpa_key_mgmt=WPA-PSK",
    p,
    "wpa_passphrase=",
)
p, psk = human_pw(SQLSYM), hx(64)
sec(
    F,
    "wpa_passphrase_derived_psk_output",
    f'$ wpa_passphrase HomeNet-5G \'{p}\'\nnetwork={{\n\tssid="HomeNet-5G"\n\t#psk="{p}"\n\tpsk={psk}\n}}',
    psk,
    "wpa_passphrase HomeNet-5G",
)
p = human_pw()
sec(
    F,
    "windows_netsh_key_content",
    "Security settings\n-----------------\n    Authentication         : WPA2-Personal\n    Cipher                 : CCMP\n"
    f"    Security key           : Present\n    Key Content            : {p}",
    p,
    "Key Content",
)
p = human_pw("-_.")
sec(
    F,
    "wifi_qr_payload",
    f"qrencode -t ansiutf8 'WIFI:T:WPA;S:Guest-Lounge;P:{p};;'",
    p,
    "WIFI:T:WPA",
)
c = f"{R.choice(COMPANY)}-{R.choice(['ro', 'mon', 'snmp'])}{digits(4)}"
sec(
    F,
    "cisco_snmp_server_community",
    f"snmp-server community {c} RO 10\nsnmp-server location DC1-R12",
    c,
    "snmp-server community",
)
c = f"{R.choice(WORDS)}{digits(3)}{R.choice(['!', '#', ''])}"
sec(F, "snmpwalk_c_community", f"snmpwalk -v2c -c '{c}' 10.0.10.1 1.3.6.1.2.1.1", c, "snmpwalk")
a1, a2 = human_pw(), human_pw()
sec(
    F,
    "snmpv3_user_auth_priv",
    f"snmp-server user nms NMS-GROUP v3 auth sha {a1} priv aes 128 {a2}",
    a2,
    "snmp-server user",
)
h = f"$1${rs(ALNUM + './', 4)}${rs(ALNUM + './', 22)}"
sec(
    F,
    "cisco_enable_secret_type5",
    f"hostname edge-rtr-01\nenable secret 5 {h}\n!",
    h,
    "enable secret 5",
)
h = f"{R.randint(0, 15):02d}" + HX(20)
sec(
    F,
    "cisco_username_password_type7",
    f"username admin privilege 15 password 7 {h}",
    h,
    "username admin privilege 15",
)
p = human_pw()
sec(
    F,
    "cisco_enable_password_plain",
    f"edge-rtr-01(config)# enable password {p}",
    p,
    "enable password",
)
p = human_pw()
sec(
    F,
    "x11vnc_passwd_flag",
    f"x11vnc -display :0 -forever -shared -passwd '{p}' -rfbport 5900",
    p,
    "x11vnc",
)
p = rs(ALNUM, 8)
sec(F, "vncpasswd_f_herestring", f"vncpasswd -f <<< '{p}' > ~/.vnc/passwd", p, "vncpasswd")
p = human_pw()
sec(
    F,
    "ipmitool_lanplus_P",
    f"ipmitool -I lanplus -H 10.0.50.21 -U ADMIN -P '{p}' chassis power status",
    p,
    "ipmitool",
)
p = mpw(24)
sec(
    F,
    "freeradius_clients_conf_secret",
    f"client office-ap {{\n    ipaddr = 10.0.20.0/24\n    secret = {p}\n    shortname = aps\n}}",
    p,
    "client office-ap",
)
p = mpw(16)
sec(
    F,
    "tacacs_server_key",
    f"tacacs server ISE01\n address ipv4 10.0.0.40\n key 0 {p}",
    p,
    "tacacs server",
)
p = mpw(16)
sec(
    F,
    "bgp_neighbor_password",
    f"router bgp 65010\n neighbor 192.0.2.1 remote-as 64512\n neighbor 192.0.2.1 password {p}",
    p,
    "router bgp",
)
p = mpw(12)
sec(
    F,
    "ospf_message_digest_key",
    f"interface Gi0/1\n ip ospf message-digest-key 1 md5 {p}",
    p,
    "message-digest-key",
)
p = mpw(32)
sec(
    F,
    "strongswan_ipsec_secrets_psk",
    f'# /etc/ipsec.secrets\n203.0.113.10 198.51.100.20 : PSK "{p}"',
    p,
    "ipsec.secrets",
)
p = mpw(8)
sec(
    F,
    "keepalived_auth_pass",
    f"vrrp_instance VI_1 {{\n    state MASTER\n    authentication {{\n        auth_type PASS\n        auth_pass {p}\n    }}",
    p,
    "vrrp_instance",
)
p = human_pw()
sec(F, "mikrotik_user_add", f'/user add name=netops password="{p}" group=full', p, "/user add")
p = mpw(16)
sec(
    F,
    "hsrp_md5_key_string",
    f"interface Vlan10\n standby 1 authentication md5 key-string {p}",
    p,
    "standby 1 authentication",
)

# =========================================================================== credential_files
F = "credential_files"
t = rs(ALNUM, 40)
sec(
    F,
    "netrc_machine_login_password",
    f"$ cat ~/.netrc\nmachine artifacts.corp.local\n  login ci\n  password {t}",
    t,
    "machine artifacts.corp.local",
)
p = human_pw()
sec(F, "pgpass_line", f"# ~/.pgpass\ndb.internal:5432:*:app:{p}", p, "~/.pgpass")
t = ghp()
sec(
    F,
    "git_credentials_store_line",
    f"$ cat ~/.git-credentials\nhttps://octo-dev:{t}@github.com",
    t,
    ".git-credentials",
)
p = human_pw(SQLSYM)
sec(F, "htpasswd_b_batch_mode", f"htpasswd -bc /etc/nginx/.htpasswd admin '{p}'", p, "htpasswd")
h = f"$apr1${rs(ALNUM + './', 8)}${rs(ALNUM + './', 22)}"
sec(F, "htpasswd_apr1_line", f"admin:{h}\nmetrics:{'$2y$05$' + rs(ALNUM + './', 53)}", h, "admin:")
h = f"$6${rs(ALNUM + './', 16)}${rs(ALNUM + './', 86)}"
sec(F, "etc_shadow_sha512_line", f"deploy:{h}:19700:0:99999:7:::", h, "deploy:")
s_ = rs(B32, 32)
sec(
    F,
    "otpauth_uri_secret",
    f"otpauth://totp/Acme%20VPN:jdoe@acme.io?secret={s_}&issuer=Acme%20VPN&algorithm=SHA1&digits=6&period=30",
    s_,
    "otpauth://totp",
)
s_ = " ".join(rs(B32, 4) for _ in range(8)).lower()
sec(
    F,
    "totp_setup_key_grouped_chat",
    f"the 2FA setup key the AWS console showed me is {s_} — can you add it to the shared vault?",
    s_,
    "2FA setup key",
)
t = gho()
sec(
    F,
    "gh_hosts_yml_oauth_token",
    f"github.com:\n    users:\n        octo-dev:\n            oauth_token: {t}\n    git_protocol: https\n    user: octo-dev",
    t,
    "oauth_token",
)
t = hvs()
sec(F, "vault_token_file_cat", f"$ cat ~/.vault-token\n{t}", t, ".vault-token")
m = "{" + b64(32) + "}"
sec(
    F,
    "maven_settings_security_master",
    f"<settingsSecurity>\n  <master>{m}</master>\n</settingsSecurity>",
    m,
    "<settingsSecurity>",
)
p = human_pw()
sec(
    F,
    "openvpn_auth_user_pass_file",
    f"$ cat /etc/openvpn/client/auth.txt\njdoe\n{p}",
    p,
    "auth.txt",
)
t = rs(ALNUM, 40)
sec(
    F,
    "docker_credentials_helper_json_secret",
    f'$ echo harbor.corp.local | docker-credential-pass get\n{{"ServerURL":"harbor.corp.local","Username":"ci","Secret":"{t}"}}',
    t,
    "docker-credential-pass get",
)
p = human_pw()
sec(
    F,
    "smb_credentials_file",
    f"$ sudo cat /root/.smbcredentials\nusername=kodi\npassword={p}\ndomain=WORKGROUP",
    p,
    ".smbcredentials",
)

# =========================================================================== HAM
H = "git_refs"
ham(
    H,
    f"{hx(7)} (HEAD -> main, origin/main) Fix race in token refresh scheduler",
    f"commit {hx(40)}",
    f"HEAD is now at {hx(7)} Bump pydantic to 2.7.4",
    f"Merge: {hx(7)} {hx(7)}",
    f"index {hx(7)}..{hx(7)} 100644",
    f"Updating {hx(7)}..{hx(7)}",
    f"   {hx(7)}..{hx(7)}  main -> main",
    f"      - uses: actions/checkout@{hx(40)} # v4.1.7",
    f"{hx(40)}\trefs/heads/release/2.3",
    f"Change-Id: I{hx(40)}",
    f"git cherry-pick {hx(12)}",
    f"fatal: bad object {hx(40)}",
    f'  Reverts commit {hx(40)} ("Rotate session secret handling")',
)

H = "content_digests"
ham(
    H,
    f"Digest: sha256:{hx(64)}",
    f"{hx(64)}  dist/acme-cli_1.9.2_linux_amd64.tar.gz",
    f'      "integrity": "sha512-{b64(64)}",',
    f'ETag: "{hx(32)}"',
    f"x-amz-checksum-sha256: {b64(32)}",
    f"md5: {hx(32)}  backup-2024-06-11.sql.gz",
    f"SHA1 (terraform_1.8.5_linux_amd64.zip) = {hx(40)}",
    f"blake3 {hx(64)} model.safetensors",
    f"Content-MD5: {b64(16)}",
    f"x-goog-hash: crc32c={b64(4)},md5={b64(16)}",
)

H = "lockfile_hashes"
ham(
    H,
    f"github.com/spf13/cobra v1.8.0 h1:{b64(32)}",
    f"github.com/spf13/cobra v1.8.0/go.mod h1:{b64(32)}",
    f'checksum = "{hx(64)}"',
    f"    --hash=sha256:{hx(64)} \\",
    f'    {{file = "urllib3-2.2.1-py3-none-any.whl", hash = "sha256:{hx(64)}"}},',
    f"  integrity sha512-{b64(64)}",
    f'  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#{hx(40)}"',
    f'            "reference": "{hx(40)}",',
    f'        "narHash": "sha256-{b64(32)}",',
    f'    hash = "sha256-{b64(32)}";',
    f'                "sha256:{hx(64)}",',
    f"  rack (3.0.11) sha256={hx(64)}",
    f"requests==2.32.3 --hash=sha256:{hx(64)} --hash=sha256:{hx(64)}",
)

H = "identifiers"


def ulid() -> str:
    return "01" + rs(CROCK, 24)


ham(
    H,
    f'  "id": "{uid()}",',
    f"order_id={ulid()} status=paid amount=4200",
    f"ksuid={str(R.randint(2, 2))}{rs(ALNUM, 26)} created",
    f'{{"id": "c{rs(LALNUM, 24)}", "title": "Q3 roadmap"}}',
    f"const id = nanoid() // -> '{rs(B64U, 21)}'",
    f'db.orders.find({{ _id: ObjectId("{hx(24)}") }})',
    f'    "customer": "cus_{rs(ALNUM, 14)}",',
    f'    "payment_intent": "pi_3{rs(ALNUM, 23)}",',
    f"evt_1{rs(ALNUM, 23)}  invoice.payment_succeeded  [200] POST http://localhost:3000/api/webhooks",
    f"posted message ts=1718096112.{digits(6)} in channel C0{rs(UALNUM, 9)}",
    f"user_id: 12{digits(17)}",
    f"job_id={hx(32)} queue=default attempts=1",
    f'  "price": "price_1{rs(ALNUM, 23)}",',
)

H = "tracing_ids"
ham(
    H,
    f"traceparent: 00-{hx(32)}-{hx(16)}-01",
    f"X-Request-Id: {uid()}",
    f'level=info msg="request completed" trace_id={hx(32)} span_id={hx(16)} status=200 duration_ms=41',
    f"x-amzn-RequestId: {uid()}",
    f"X-Amzn-Trace-Id: Root=1-{hx(8)}-{hx(24)};Parent={hx(16)};Sampled=1",
    f"cf-ray: {hx(16)}-FRA",
    f"Sentry captured event {hx(32)}",
    f"dd.trace_id={digits(19)} dd.span_id={digits(19)}",
    f"X-Cloud-Trace-Context: {hx(32)}/{digits(19)};o=1",
    f"x-github-request-id: {HX(4)}:{HX(5)}:{HX(6)}:{HX(7)}:{HX(8)}",
    f"correlationId={uid()} step=charge",
)

H = "public_keys"
_, _, deploy_pub = openssh_ed25519("deploy@ci")
ham(
    H,
    ssh_ed25519_pub("jdoe@laptop"),
    ssh_rsa_pub("build@jenkins-agent-03"),
    deploy_pub,
    f"git.corp.local,10.0.0.7 {ssh_ecdsa_pub()}",
    f"|1|{b64(20)}|{b64(20)} {ssh_ed25519_pub('').strip()}",
    f"256 SHA256:{b64(32).rstrip('=')} deploy@ci (ED25519)",
    "      " + " ".join(HX(4) for _ in range(5)) + "  " + " ".join(HX(4) for _ in range(5)),
    f"# public key: age1{rs(BECH32, 58)}",
    f"PublicKey = {b64(32)}",
    f'{{"keys":[{{"kty":"RSA","use":"sig","kid":"{hx(16)}","alg":"RS256","n":"{b64url(256)}","e":"AQAB"}}]}}',
    f'{{"kty":"EC","crv":"P-256","kid":"{hx(8)}","x":"{b64url(32)}","y":"{b64url(32)}"}}',
    f"untrusted comment: minisign public key {HX(16)}\n{base64.b64encode(b'Ed' + rb(40)).decode()}",
    f"  deployer: 0x{hx(40)}",
    "account 0 watch-only xpub: xpub661MyMwAqRbc" + rs(B58, 95),
    pem(
        "PUBLIC KEY",
        bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d03010703420004") + rb(64),
    )[0],
    f"pub   ed25519 2023-11-02 [SC]\n      {HX(40)}\nuid           [ultimate] Jane Doe <jane@acme.io>",
    f'command="/usr/local/bin/borg serve --restrict-to-path /srv/borg",restrict {ssh_ed25519_pub("backup@db01")}',
)

H = "certificates"
ham(
    H,
    cert_pem(),
    f"    certificate-authority-data: {b64s(cert_pem() + chr(10))}",
    f"  ca.crt: {b64s(cert_pem() + chr(10))}",
    "sha256 Fingerprint=" + ":".join(HX(2) for _ in range(32)),
    "        Serial Number:\n            " + ":".join(hx(2) for _ in range(16)),
    "            X509v3 Subject Key Identifier: \n                "
    + ":".join(HX(2) for _ in range(20)),
    "issuer=C = US, O = Let's Encrypt, CN = R11",
    "    ssl_certificate_key /etc/letsencrypt/live/acme.io/privkey.pem;",
    f'Public-Key-Pins: pin-sha256="{b64(32)}"; pin-sha256="{b64(32)}"; max-age=5184000',
    f"      caBundle: {b64s(cert_pem() + chr(10))}",
)

H = "ci_cache_keys"
ham(
    H,
    "          key: ${{ runner.os }}-pip-${{ hashFiles('**/requirements*.txt') }}",
    f"Cache restored from key: Linux-pip-{hx(64)}",
    f"Cache saved with key: node-cache-Linux-x64-npm-{hx(64)}",
    '      - v1-deps-{{ checksum "package-lock.json" }}',
    f"Found a cache from build 4812 at v1-deps-{b64(32)}",
    f"@acme/web:build: cache hit, replaying logs {hx(16)}",
    f"Checking cache for {hx(40)}-3-protected...",
    f"#14 exporting config sha256:{hx(64)} done",
    "          restore-keys: |\n            ${{ runner.os }}-gradle-",
    f"Restored build cache entry {hx(32)} (2.1 MB) from remote cache",
)

H = "container_images"
ham(
    H,
    f"FROM python:3.12-slim@sha256:{hx(64)}",
    f"    image: ghcr.io/acme/api:sha-{hx(7)}",
    f"acme/api          1.9.2     {hx(12)}   2 days ago     187MB",
    f'{hx(12)}   postgres:16   "docker-entrypoint.s…"   3 hours ago   Up 3 hours   0.0.0.0:5432->5432/tcp   pg',
    f"Successfully built {hx(12)}",
    f"    imageID: docker-pullable://registry.k8s.io/pause@sha256:{hx(64)}",
    f"{digits(12)}.dkr.ecr.eu-west-1.amazonaws.com/payments-api:2024.06.11-{hx(7)}",
    f"{hx(12)}: Pull complete",
    f"  - containerID: containerd://{hx(64)}",
    f"#22 writing image sha256:{hx(64)} done",
)

H = "versions"
ham(
    H,
    f'  "version": "2.14.0-rc.3+build.20240611.{hx(7)}",',
    f"\tgolang.org/x/crypto v0.0.0-20240604190554-{hx(12)} // indirect",
    '__version__ = "4.2.1.post3"',
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.207 Safari/537.36",
    f"rustc 1.78.0 ({hx(9)} 2024-04-29)",
    f"Build 20240611.3 (commit {hx(7)}) on node v20.13.1",
    f"Kustomize Version: v5.0.4-0.20230601165947-{hx(12)}",
    "Python 3.11.9 (main, Apr  2 2024, 08:25:04) [GCC 12.2.0] on linux",
    "  mypy==1.10.0",
    "go version go1.22.4 linux/amd64",
)

H = "data_uris"
png = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
    + rb(60)
)
svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path d="M8 0L16 16H0z" fill="#0af"/></svg>'
ham(
    H,
    f'<img alt="logo" src="data:image/png;base64,{b64s(png)}">',
    f"data:image/gif;base64,{b64s(b'GIF89a' + rb(30))}",
    f"  src: url(data:font/woff2;base64,{b64s(b'wOF2' + rb(120))}) format('woff2');",
    f'  background-image: url("data:image/svg+xml;base64,{b64s(svg)}");',
    f"![chart](data:image/jpeg;base64,{b64s(bytes.fromhex('ffd8ffe000104a46494600') + rb(90))})",
    f'      "image/png": "{b64s(png)}",',
    f'<link rel="icon" href="data:image/webp;base64,{b64s(b"RIFF" + rb(4) + b"WEBPVP8 " + rb(40))}">',
    f"data:application/octet-stream;base64,{b64s(b'PK' + bytes([3, 4]) + rb(40))}",
)

H = "paths_and_identifiers"
ham(
    H,
    "PWD=/home/dev/src/github.com/acme/secrets-operator",
    "/var/run/secrets/kubernetes.io/serviceaccount/token",
    "    IdentityFile ~/.ssh/id_ed25519_deploy",
    "src/auth/passwordResetTokenService.ts",
    "  public validateRefreshTokenRotationPolicyForClient(clientId: string): boolean {",
    "public class PasswordEncoderConfiguration {",
    "    def get_secret_value(self) -> str:",
    "    private final OAuth2AuthorizedClientService authorizedClientService;",
    f"dist/assets/index-{rs(B64U, 8)}.js   142.31 kB │ gzip: 45.90 kB",
    f"node_modules/.cache/babel-loader/{hx(32)}.json",
    "GOOGLE_APPLICATION_CREDENTIALS=/secrets/gcp/sa.json",
    "AWS_PROFILE=prod-readonly",
    "SSH_AUTH_SOCK=/tmp/ssh-XXXXkJ3b9q/agent.4821",
    "func (s *SecretStore) GetPasswordForUser(ctx context.Context, userID string) (string, error) {",
    "  --client-secret-file=/etc/oauth2-proxy/client-secret",
)

H = "env_references"
ham(
    H,
    "      POSTGRES_PASSWORD: ${DB_PASSWORD}",
    "DB_PASSWORD=$(cat /run/secrets/db_password)",
    'api_key = os.environ.get("OPENAI_API_KEY")',
    'String pw = System.getenv("DB_PASSWORD");',
    "const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!);",
    '    @Value("${db.password}")',
    "SECRET_KEY = env('DJANGO_SECRET_KEY')",
    'var conn = Environment.GetEnvironmentVariable("ConnectionStrings__Default");',
    'redis_password = ENV.fetch("REDIS_PASSWORD")',
    "'password' => env('DB_PASSWORD', ''),",
    "  password = var.db_password",
    'export PGPASSWORD="$PROD_PG_PASSWORD"',
    "$env:ARM_CLIENT_SECRET = $env:SP_SECRET",
    'token := os.Getenv("VAULT_TOKEN")',
    'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user',
)

H = "templating"
ham(
    H,
    "  password: {{ .Values.auth.password | quote }}",
    'mysql_root_password: "{{ vault_mysql_root_password }}"',
    "DATABASE_URL = 'postgresql://%(DB_USER)s:%(PASSWORD)s@%(DB_HOST)s/app'",
    "  secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>",
    "          password: ${{ secrets.REGISTRY_PASSWORD }}",
    '  token = file("~/.secrets/linode_token")',
    "api_token: \"{{ lookup('env', 'API_TOKEN') }}\"",
    '  password = jsondecode(aws_secretsmanager_secret_version.db.secret_string)["password"]',
    "ConnectionString=Server=#{DbHost};Password=#{DbPassword}",
    "    httpHeaderValue1: Bearer $__env{GRAFANA_TOKEN}",
    '  .dockerconfigjson: {{ printf "{\\"auths\\":{\\"%s\\":{\\"auth\\":\\"%s\\"}}}" .Values.registry (printf "%s:%s" .Values.user .Values.pass | b64enc) | b64enc }}',
    'smtp_password: "{{ smtp_password | default(omit) }}"',
)

H = "placeholders"
ham(
    H,
    "password: <password>",
    "API_KEY=YOUR_API_KEY",
    "DB_PASSWORD=changeme",
    "Password: ********",
    'export OPENAI_API_KEY="sk-xxxxxxxxxxxxxxxxxxxxxxxx"',
    "Authorization: Bearer REDACTED",
    "token: [hidden]",
    "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "SLACK_BOT_TOKEN=xoxb-your-bot-token",
    "AWS_SECRET_ACCESS_KEY=...",
    'password: ""',
    "DB_PASSWORD=",
    "secret: null",
    "  api_key: <your-api-key-here>",
    "STRIPE_SECRET_KEY=sk_test_...",
    "mysql://user:password@localhost:3306/dbname",
    "Password: [REDACTED]",
    "--password <redacted>",
)

H = "policy_prose"
ham(
    H,
    "Passwords must be at least 12 characters long and are rotated every 90 days.",
    "Never commit tokens to the repo; put them in the secret manager and reference them by name.",
    "The token expired, so run `gh auth login` again and retry the push.",
    "Set DB_PASSWORD in your local .env before running the migrations.",
    "I rotated the Stripe key this morning; the old one is revoked.",
    "What's the difference between an access token and a refresh token in OAuth 2.0?",
    "Password reset email sent to user 48213",
    "WARN auth: invalid password for user 'admin' from 10.0.0.14 (attempt 3/5)",
    "Error: 401 Unauthorized - token expired",
    "The API key lives in AWS Secrets Manager under prod/payments/api-key.",
    "You can generate a personal access token under Settings → Developer settings → Tokens.",
    "Let me check whether the secret is mounted into the pod before changing the code.",
)

H = "login_without_secret"
ham(
    H,
    'echo "$CR_PAT" | docker login ghcr.io -u octo-ci --password-stdin',
    f"aws ecr get-login-password --region eu-west-1 | docker login --username AWS --password-stdin {digits(12)}.dkr.ecr.eu-west-1.amazonaws.com",
    "gh auth login --web --git-protocol https",
    "az login --use-device-code",
    "vault login -method=oidc role=engineer",
    "npm login --scope=@acme --auth-type=web",
    "psql -h db.internal -U app -W appdb",
    "mysql -u root -p",
    "ssh -i ~/.ssh/id_ed25519 deploy@10.0.0.5",
    "kubectl create secret generic db --from-file=password=./db-pass.txt",
    "Login Succeeded",
    "restic -r s3:s3.amazonaws.com/acme-backups --password-file /etc/restic/password backup /srv",
    "openssl enc -aes-256-cbc -pbkdf2 -in db.sql -out db.sql.enc -pass file:/etc/backup/key.txt",
    "gpg --batch --pinentry-mode loopback --passphrase-file /run/secrets/gpg_pass -d backup.tar.gpg",
    "sudo mount -t cifs //nas.local/media /mnt/media -o credentials=/root/.smbcredentials,uid=1000",
    "curl --netrc -sS https://artifacts.corp.local/builds/latest.txt",
    "bw unlock --passwordenv BW_PASSWORD --raw",
    "sshpass -f ~/.config/pi.pass ssh pi@192.168.1.40",
)

H = "auth_metadata_fields"
ham(
    H,
    '  "token_type": "Bearer",',
    '  "expires_in": 3599,',
    "    password_hash VARCHAR(255) NOT NULL,",
    '  "scope": "repo read:org workflow",',
    "grant_type=client_credentials&scope=api.read",
    "password_changed_at: 2024-05-01T10:12:00Z",
    '  "token_endpoint_auth_method": "client_secret_basic",',
    '{"has_password": true, "mfa_enabled": true}',
    'WWW-Authenticate: Bearer realm="api", error="invalid_token", error_description="The access token expired"',
    "x-ratelimit-remaining-tokens: 149000",
    '  "refresh_token_expires_in": 15724800,',
    "Authorization: Bearer ${TOKEN}",
    "  authorization: Bearer $(gcloud auth print-identity-token)",
    '    "token_use": "access",',
)

H = "public_client_ids"
ham(
    H,
    f"NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=pk_live_51{rs(ALNUM, 97)}",
    f'  client_id: "{digits(12)}-{rs(LALNUM, 32)}.apps.googleusercontent.com"',
    f"GITHUB_CLIENT_ID=Ov23li{rs(ALNUM, 14)}",
    f"  client_id: Iv1.{hx(16)}",
    f'  "clientId": "{uid()}",\n  "tenantId": "{uid()}",',
    f"NEXT_PUBLIC_POSTHOG_KEY=phc_{rs(ALNUM, 43)}",
    f'<div class="g-recaptcha" data-sitekey="6L{rs(B64U, 38)}"></div>',
    f"MAPBOX_PUBLIC_TOKEN=pk.{b64us(json.dumps({'u': 'acme-maps', 'a': rs(B64U, 25)}, separators=(',', ':')))}.{rs(B64U, 22)}",
    f"AUTH0_CLIENT_ID={rs(ALNUM, 32)}",
    "APPLE_TEAM_ID=7XK2M9QZ4L",
)

H = "cloud_resource_ids"
acct = digits(12)
ham(
    H,
    f"arn:aws:iam::{acct}:role/github-actions-deployer",
    f'    "Account": "{acct}",',
    f"arn:aws:secretsmanager:eu-west-1:{acct}:secret:prod/db-credentials-{rs(ALNUM, 6)}",
    f"/subscriptions/{uid()}/resourceGroups/rg-data/providers/Microsoft.Sql/servers/sql-prod-weu",
    "projects/482193745821/secrets/db-password/versions/3",
    f"arn:aws:kms:eu-west-1:{acct}:key/{uid()}",
    f"sg-0{hx(16)}  i-0{hx(16)}  vpc-0{hx(16)}",
    f"ami-0{hx(16)}",
    f"https://kv-prod-weu.vault.azure.net/secrets/DbPassword/{hx(32)}",
    f'{{\n    "UserId": "AIDA{rs(UPPER + "234567", 17)}",\n    "Account": "{acct}",\n    "Arn": "arn:aws:iam::{acct}:user/ci"\n}}',
    f'    "UserId": "AROA{rs(UPPER + "234567", 17)}:botocore-session-1718096112",',
)

H = "k8s_secret_refs"
ham(
    H,
    "            valueFrom:\n              secretKeyRef:\n                name: db-credentials\n                key: password",
    "      secretName: api-tls",
    "          envFrom:\n            - secretRef:\n                name: app-secrets",
    "      imagePullSecrets:\n        - name: regcred",
    "db-credentials          Opaque                           2      14d",
    "      remoteRef:\n        key: prod/db\n        property: password",
    "type: kubernetes.io/dockerconfigjson",
    "      serviceAccountName: external-secrets",
    "  - secretRef:\n      name: grafana-admin\n    passwordKey: admin-password",
    "kubectl get secret db-credentials -o jsonpath='{.data.password}' | base64 -d | wc -c",
)

H = "feature_flags_and_limits"
ham(
    H,
    "require_password: true",
    "MAX_TOKENS=4096",
    "tokens_used: 1234",
    "password_min_length = 12",
    '  "max_completion_tokens": 2048,',
    "PASSWORD_RESET_TIMEOUT = 259200",
    "enable_token_auth = false",
    "  token_bucket_capacity: 500",
    "session_ttl_seconds: 86400",
    'usage: {"prompt_tokens": 812, "completion_tokens": 233, "total_tokens": 1045}',
    "ALLOW_PASSWORD_LOGIN=false",
    "secrets_scan: enabled",
)

H = "tokenizer_code"
ham(
    H,
    "tokens = tokenizer.encode(text, add_special_tokens=False)",
    "from transformers import AutoTokenizer",
    "for tok in lexer.tokens():",
    'enc = tiktoken.get_encoding("cl100k_base")',
    "token_ids = [101, 7592, 2088, 102]",
    "    case TokenType.IDENTIFIER:",
    "const tokens = text.split(/\\s+/).filter(Boolean);",
    "input_ids: tensor([[  101,  2023,  2003,  1037,  3231,   102]])",
    "vocab_size=50257, n_positions=1024",
    "fn next_token(&mut self) -> Option<Token> {",
)

H = "computed_digests"
_msg = b"The quick brown fox jumps over the lazy dog"
_tv = hmac.new(b"test-vector-key", b"GET\n/v1/ping", hashlib.sha256).hexdigest()
ham(
    H,
    f'    assert hmac_sha256(b"key", b"The quick brown fox jumps over the lazy dog") == "{hmac.new(b"key", _msg, hashlib.sha256).hexdigest()}"',
    f">>> hashlib.sha256(b\"hello world\").hexdigest()\n'{hashlib.sha256(b'hello world').hexdigest()}'",
    f"checksum sha256={hx(64)} file=release-1.9.2.tar.gz verified=true",
    f"X-Hub-Signature-256: sha256={hx(64)}",
    f'<script src="https://cdn.jsdelivr.net/npm/alpinejs@3.14.0/dist/cdn.min.js" integrity="sha384-{b64(48)}" crossorigin="anonymous"></script>',
    f"$ git hash-object README.md\n{hx(40)}",
    f"{hashlib.md5(b'').hexdigest()}  empty.txt",
    f'expected_signature = "{_tv}"  # test vector: key and message are published in the spec',
    f"Stripe-Signature: t=1718096112,v1={hx(64)}",
    f"sha256sum model.onnx -> {hx(64)}",
)

H = "encrypted_blobs"
ham(
    H,
    f"    password: ENC[AES256_GCM,data:{b64(12)},iv:{b64(32)},tag:{b64(16)},type:str]",
    f"  encryptedData:\n    password: AgB{b64(330)}",
    "db_password: !vault |\n          $ANSIBLE_VAULT;1.1;AES256\n"
    + "\n".join("          " + hx(80) for _ in range(4)),
    "-----BEGIN AGE ENCRYPTED FILE-----\n"
    + wrap(b64(180), 64)
    + "\n-----END AGE ENCRYPTED FILE-----",
    f'    "CiphertextBlob": "AQICAH{b64(170)}",',
    f"      enc: CiQA{b64(90)}",
    "sops:\n    age:\n        - recipient: age1" + rs(BECH32, 58),
)

H = "hardware_ids"
ham(
    H,
    f"    link/ether 02:42:{hx(2)}:{hx(2)}:{hx(2)}:{hx(2)} brd ff:ff:ff:ff:ff:ff",
    f"UUID={uid()}  /  ext4  defaults,noatime  0 1",
    f'/dev/nvme0n1p2: UUID="{uid()}" BLOCK_SIZE="4096" TYPE="ext4" PARTUUID="{uid()}"',
    f"inet6 fe80::{hx(4)}:{hx(4)}:{hx(4)}:{hx(4)}/64 scope link",
    f"Serial Number: S5GXNF0R{digits(6)}A",
    f"BSSID: {':'.join(hx(2) for _ in range(6))}  SSID: Office-5G  Signal: 72%",
    f"wwn-0x5002538e{hx(8)} -> ../../sda",
)

# =========================================================================== checks
REQUIRED_FAMILIES = {
    "sql_passwords",
    "code_literals",
    "cli_secrets",
    "call_arguments",
    "tool_output",
    "provider_tokens",
    "encoded_private_keys",
    "url_credentials",
    "config_entries",
    "prose_and_logs",
}

assert len(SECRETS) >= 160, len(SECRETS)
assert len({s.fmt for s in SECRETS}) >= 60
assert len({s.fmt for s in SECRETS}) == len(SECRETS), [
    f for f, n in Counter(s.fmt for s in SECRETS).items() if n > 1
]
assert {s.family for s in SECRETS} >= REQUIRED_FAMILIES
assert len({s.family for s in SECRETS} - REQUIRED_FAMILIES) >= 2
assert len(HAM) >= 160, len(HAM)
assert len({h.family for h in HAM}) >= 15
assert len({h.text for h in HAM}) == len(HAM)
for _s in SECRETS:
    assert _s.secret and _s.secret in _s.text, _s.fmt
    assert len(_s.secret) >= 6, _s.fmt
    assert not _s.keep or _s.keep in _s.text, _s.fmt
    assert not _s.keep or _s.secret not in _s.keep, _s.fmt
    assert _s.fmt == _s.fmt.strip() and _s.family.islower()
for _h in HAM:
    for _s in SECRETS:
        assert _s.secret not in _h.text, (_h.family, _s.fmt)

del _s, _h

if __name__ == "__main__":
    sc = Counter(s.family for s in SECRETS)
    hc = Counter(h.family for h in HAM)
    print(
        f"SECRETS: {len(SECRETS)} over {len(sc)} families, {len({s.fmt for s in SECRETS})} distinct fmt labels"
    )
    for fam, n in sorted(sc.items()):
        print(f"  {fam:26s} {n:4d}")
    print(f"HAM: {len(HAM)} over {len(hc)} families")
    for fam, n in sorted(hc.items()):
        print(f"  {fam:26s} {n:4d}")
