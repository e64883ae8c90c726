"""[Corpus blind-c, written by a helper who saw neither the detector nor any other corpus. Held out while the detector was tuned on blind-a and blind-b; scored once, then looked at and tuned on.]

Blind held-out regression corpus "C" for a transcript secret redactor.

Everything random is produced at import time from one fixed ``random.Random``
seed, shaped like the real format (prefix, alphabet, length).  The file holds
no literal realistic credentials.

SECRETS: text snippets as they would appear in an AI coding-agent session
         (chat, commands, tool output, files read/written) with the exact
         substring that must not survive redaction, plus an optional
         substring that should survive for readability.
HAM:     ordinary developer snippets with secret-ish shapes or secret-ish
         positions that a redactor must leave byte-for-byte unchanged.

Standard library only, Python 3.11.
"""

from __future__ import annotations

import base64
import json
import random
import string
import urllib.parse
from collections import Counter
from typing import NamedTuple


class Secret(NamedTuple):
    family: str  # the kind (snake_case)
    fmt: str  # short unique label of the format
    text: str  # text exactly as it would appear in the session
    secret: str  # exact substring of text that must not survive redaction
    keep: str = ""  # optional substring that should survive


class Ham(NamedTuple):
    family: str
    text: str  # must be left byte-for-byte unchanged


SEED = 0xC0C0A17B
R = random.Random(SEED)

# --------------------------------------------------------------------------
# alphabets and low-level generators
# --------------------------------------------------------------------------
LOW = string.ascii_lowercase
UP = string.ascii_uppercase
DIG = string.digits
AN = LOW + UP + DIG
ANL = LOW + DIG
ANU = UP + DIG
HEXL = "0123456789abcdef"
B64A = AN + "+/"
B64U = AN + "-_"
B32 = UP + "234567"
B32L = LOW + "234567"
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
CROCK = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CRYPT = AN + "./"


def rs(n: int, alpha: str = AN) -> str:
    return "".join(R.choice(alpha) for _ in range(n))


def hx(n: int) -> str:
    return rs(n, HEXL)


def HX(n: int) -> str:
    return rs(n, HEXL.upper())


def num(n: int) -> str:
    return R.choice("123456789") + rs(n - 1, DIG)


def pick(seq):
    return R.choice(seq)


def enc64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def enc64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def b64(n: int) -> str:
    return enc64(R.randbytes(n))


def b64u(n: int) -> str:
    return enc64u(R.randbytes(n))


def uq(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def uuid4() -> str:
    b = bytearray(R.randbytes(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def ulid() -> str:
    return pick("01") + rs(25, CROCK)


def ksuid() -> str:
    return pick("12") + rs(26, AN)


def wrap(s: str, w: int = 64) -> str:
    return "\n".join(s[i : i + w] for i in range(0, len(s), w))


def lines(*xs: str) -> str:
    return "\n".join(xs)


def sshstr(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


# --------------------------------------------------------------------------
# human-chosen passwords
# --------------------------------------------------------------------------
WORDS = [
    "correct",
    "horse",
    "battery",
    "staple",
    "orange",
    "river",
    "mountain",
    "falcon",
    "pickle",
    "tiger",
    "copper",
    "violet",
    "cactus",
    "walnut",
    "harbor",
    "rocket",
    "meadow",
    "lantern",
    "pepper",
    "marble",
    "willow",
    "thunder",
    "basil",
    "comet",
    "maple",
    "sparrow",
    "velvet",
    "canyon",
    "ember",
    "glacier",
    "juniper",
    "kettle",
    "lemon",
    "mango",
    "nectar",
    "otter",
    "pebble",
    "quartz",
    "raven",
    "saffron",
    "tulip",
    "vortex",
    "wombat",
    "yarrow",
    "zephyr",
    "anchor",
    "bramble",
    "cobalt",
    "fjord",
    "granite",
    "hazel",
    "jasper",
    "lotus",
    "nutmeg",
    "orchid",
    "plum",
    "quill",
    "timber",
    "biscuit",
    "noodle",
    "pirate",
    "wizard",
    "banjo",
    "turnip",
]
LONGWORDS = [
    "trombone",
    "elephant",
    "sunflower",
    "keyboard",
    "dolphin",
    "starlight",
    "passport",
    "firewall",
    "database",
    "monitor",
    "penguin",
    "football",
    "champion",
    "butterfly",
    "chocolate",
    "telescope",
]
NAMES = [
    "Lukas",
    "Marie",
    "Sophie",
    "Jonas",
    "Emma",
    "Liam",
    "Olivia",
    "Noah",
    "Mia",
    "Mateo",
    "Lucia",
    "Chloe",
    "Hugo",
    "Ines",
    "Pedro",
    "Giulia",
    "Sven",
    "Anouk",
    "Kasia",
    "Wei",
    "Yuki",
    "Hana",
    "Priya",
    "Omar",
]
SEASONS = ["Winter", "Spring", "Summer", "Autumn", "Fall"]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
KEYB = [
    "qwerty",
    "qwertz",
    "azerty",
    "asdfgh",
    "zxcvbn",
    "1qaz2wsx",
    "qazwsx",
    "letmein",
    "iloveyou",
    "monkey",
    "dragon",
    "sunshine",
    "superman",
    "trustno1",
    "welcome",
]
COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Tyrell",
    "Soylent",
]
ENVS = ["prod", "staging", "dev", "live", "test", "qa", "uat"]
SYM = "!@#*?-_.+=~^%"
SYM_SAFE = "!@*-_.+="
ANIMALS = ["lamb", "cat", "dog", "goat", "otter", "llama", "fox", "owl"]
FOODS = ["tacos", "pizza", "waffles", "sushi", "pretzels", "dumplings"]
PHRASES = [
    "{n} had {d} {a}s",
    "my {a} eats {d} {f}",
    "I love {f} {d} times",
    "{n} loves {f} since {y}",
    "the {a} sat on {d} {f}",
]
LEET = {"a": "@", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"}
BIP39ISH = [
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
    "action",
    "actor",
    "actress",
    "actual",
    "adapt",
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
    "agent",
    "agree",
    "ahead",
    "airport",
    "aisle",
    "alarm",
    "album",
    "alcohol",
    "alert",
    "alien",
    "alley",
    "allow",
    "almost",
    "alone",
    "alpha",
    "already",
    "alter",
    "always",
    "amateur",
    "amazing",
    "among",
    "amount",
    "amused",
    "analyst",
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
    "apart",
    "apology",
    "appear",
    "apple",
    "approve",
    "april",
    "arch",
    "arctic",
    "arena",
    "argue",
    "armed",
    "armor",
    "army",
    "around",
    "arrange",
    "arrest",
    "arrive",
    "arrow",
    "artefact",
    "artist",
    "artwork",
    "aspect",
    "assault",
    "asset",
    "assist",
    "assume",
    "asthma",
]


def leet(w: str) -> str:
    while True:
        out = "".join(LEET[c.lower()] if c.lower() in LEET and R.random() < 0.7 else c for c in w)
        if out != w:
            return out


def pw(space: bool = False, safe: bool = False) -> str:
    """A human-chosen password in one of many styles.

    Never contains quotes, backslashes, '$', '&', ';', ':', '/', '<', '>' or
    backticks, so it can be embedded verbatim in shell/YAML/XML/INI/code.
    """
    s = R.randrange(15)
    sym = pick(SYM_SAFE if safe else SYM)
    y = R.randint(2019, 2026)
    if s == 0:
        return f"{pick(SEASONS)}{y}{sym}"
    if s == 1:
        return f"{pick(WORDS)}-{pick(WORDS)}-{R.randint(1, 99)}"
    if s == 2:
        return f"{leet(pick(['Password', 'Admin', 'Welcome', 'Secret', 'Master', 'Service']))}_{pick(ENVS)}"
    if s == 3:
        return leet(pick(LONGWORDS))
    if s == 4:
        ph = pick(PHRASES).format(
            n=pick(NAMES), d=R.randint(2, 9), a=pick(ANIMALS), f=pick(FOODS), y=y
        )
        return ph if space else "".join(w[:1].upper() + w[1:] for w in ph.split())
    if s == 5:
        return pick(KEYB) + pick(["123", "1234", "12345", "2024", "123!", "69", "007", "!!"])
    if s == 6:
        ws = R.sample(WORDS, 4)
        if space:
            return " ".join(ws)
        if R.random() < 0.6:
            return pick(["", "-", ".", "_"]).join(ws)
        return "".join(w.capitalize() for w in ws)
    if s == 7:
        return f"{pick(NAMES)}{R.randint(1960, 2012)}"
    if s == 8:
        return f"{pick(COMPANIES)}{sym}{y}"
    if s == 9:
        return rs(R.randint(14, 24), AN + SYM_SAFE)
    if s == 10:
        return f"{pick(WORDS).capitalize()}{pick(WORDS).capitalize()}{R.randint(10, 99)}{sym}"
    if s == 11:
        return f"{pick(MONTHS)}{y}{sym}"
    if s == 12:
        return f"{pick(NAMES).lower()}_{pick(WORDS)}_{R.randint(1000, 9999)}"
    if s == 13:
        return f"{pick(COMPANIES).lower()}{pick(ENVS).capitalize()}{sym}{R.randint(1, 99)}"
    return rs(R.randint(10, 16), AN)


def pw_plain() -> str:
    """Password without any punctuation except '_' (for '/'-'@'-';' delimited formats)."""
    s = R.randrange(6)
    if s == 0:
        return f"{pick(NAMES)}{R.randint(1960, 2012)}"
    if s == 1:
        return f"{pick(WORDS).capitalize()}{pick(WORDS).capitalize()}{R.randint(10, 99)}"
    if s == 2:
        return rs(R.randint(16, 28))
    if s == 3:
        return pick(KEYB) + pick(["123", "2024", "1234"])
    if s == 4:
        return f"{pick(SEASONS)}{R.randint(2019, 2026)}"
    return f"{pick(WORDS)}_{pick(WORDS)}_{R.randint(10, 99)}"


# --------------------------------------------------------------------------
# token / key shapes
# --------------------------------------------------------------------------
IAT0 = 1717000000


def ts() -> int:
    return IAT0 + R.randint(0, 20_000_000)


def jwt(payload: dict, alg: str = "HS256", kid: str | None = None, typ: str = "JWT") -> str:
    hdr = {"alg": alg, "typ": typ}
    if kid:
        hdr["kid"] = kid
    sig = {"HS256": 32, "HS512": 64, "RS256": 256, "ES256": 64, "EdDSA": 64}[alg]

    def e(o):
        return enc64u(json.dumps(o, separators=(",", ":")).encode())

    return f"{e(hdr)}.{e(payload)}.{b64u(sig)}"


def akid(prefix: str = "AKIA") -> str:
    return prefix + rs(16, B32)


def aws_sk() -> str:
    return rs(40, AN + "+/")


def aws_st() -> str:
    return "IQoJb3JpZ2luX2VjE" + rs(R.randint(340, 420), AN + "+/")


def ghp(prefix: str = "ghp_") -> str:
    return prefix + rs(36)


def gh_fine() -> str:
    return "github_pat_11" + rs(20, ANU) + "_" + rs(59)


def glpat() -> str:
    return "glpat-" + rs(20, B64U)


def npm_tok() -> str:
    return "npm_" + rs(36)


def pypi_tok() -> str:
    macaroon = (
        b"\x01\x02\x0cpypi.org\x02\x25\x00\x02\x1d"
        + uuid4().encode()
        + b'\x00\x02\x2a[1,"projects"]'
        + R.randbytes(60)
    )
    return "pypi-AgEIcHlwaS5vcmc" + enc64u(macaroon)


def slack_tok(kind: str = "xoxb") -> str:
    if kind == "xoxp":
        return f"xoxp-{num(11)}-{num(11)}-{num(13)}-{hx(32)}"
    return f"{kind}-{num(11)}-{num(13)}-{rs(24)}"


def sk_proj() -> str:
    return "sk-proj-" + rs(74, B64U) + "T3BlbkFJ" + rs(74, B64U)


def sk_ant(kind: str = "api03") -> str:
    return f"sk-ant-{kind}-" + rs(93, B64U) + "AA"


def stripe(prefix: str) -> str:
    return prefix + "51" + rs(96)


def azure_cs() -> str:
    return rs(3) + pick(DIG) + "Q~" + rs(34, AN + "_.~-")


def hvs() -> str:
    return "hvs.CAESI" + rs(R.randint(80, 96), B64U)


def ya29() -> str:
    return "ya29.a0" + rs(R.randint(180, 230), B64U)


def pem(label: str, der: bytes, width: int = 64) -> tuple[str, str]:
    body = wrap(enc64(der), width)
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


def ec_sec1_der() -> bytes:
    return (
        bytes.fromhex("30770201010420")
        + R.randbytes(32)
        + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
        + b"\x04"
        + R.randbytes(64)
    )


def ec_pkcs8_der() -> bytes:
    return (
        bytes.fromhex("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420")
        + R.randbytes(32)
        + bytes.fromhex("a144034200")
        + b"\x04"
        + R.randbytes(64)
    )


def ed25519_pkcs8_der() -> bytes:
    return bytes.fromhex("302e020100300506032b657004220420") + R.randbytes(32)


def rsa_pkcs1_1024_der() -> bytes:
    return bytes.fromhex("3082025d02010002818100") + R.randbytes(598)


def rsa_pkcs8_der() -> bytes:
    return bytes.fromhex(
        "308204be020100300d06092a864886f70d0101010500048204a8308204a40201000282010100"
    ) + R.randbytes(1180)


def enc_pkcs8_der() -> bytes:
    return bytes.fromhex(
        "30820131305b06092a864886f70d01050d304e302d06092a864886f70d01050c3020"
    ) + R.randbytes(280)


def escaped_pem(label: str, der: bytes) -> tuple[str, str]:
    """PEM with literal backslash-n separators, as in JSON/JS string literals."""
    body = wrap(enc64(der)).replace("\n", "\\n")
    return f"-----BEGIN {label}-----\\n{body}\\n-----END {label}-----\\n", body


def openssh_ed25519(comment: str) -> tuple[str, str]:
    pub, priv = R.randbytes(32), R.randbytes(32)
    pubblob = sshstr(b"ssh-ed25519") + sshstr(pub)
    chk = R.randbytes(4)
    sec = (
        chk
        + chk
        + sshstr(b"ssh-ed25519")
        + sshstr(pub)
        + sshstr(priv + pub)
        + sshstr(comment.encode())
    )
    i = 1
    while len(sec) % 8:
        sec += bytes([i])
        i += 1
    blob = (
        b"openssh-key-v1\x00"
        + sshstr(b"none")
        + sshstr(b"none")
        + sshstr(b"")
        + (1).to_bytes(4, "big")
        + sshstr(pubblob)
        + sshstr(sec)
    )
    body = wrap(enc64(blob), 70)
    return f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----", body


def openssh_encrypted() -> tuple[str, str]:
    pubblob = sshstr(b"ssh-ed25519") + sshstr(R.randbytes(32))
    kdf = sshstr(R.randbytes(16)) + (16).to_bytes(4, "big")
    blob = (
        b"openssh-key-v1\x00"
        + sshstr(b"aes256-ctr")
        + sshstr(b"bcrypt")
        + sshstr(kdf)
        + (1).to_bytes(4, "big")
        + sshstr(pubblob)
        + sshstr(R.randbytes(144))
    )
    body = wrap(enc64(blob), 70)
    return f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----", body


def ssh_ed25519_pub(comment: str) -> str:
    return "ssh-ed25519 " + enc64(sshstr(b"ssh-ed25519") + sshstr(R.randbytes(32))) + " " + comment


def ssh_rsa_pub(comment: str) -> str:
    n = b"\x00" + bytes([R.randint(0x80, 0xFF)]) + R.randbytes(255)
    return (
        "ssh-rsa " + enc64(sshstr(b"ssh-rsa") + sshstr(b"\x01\x00\x01") + sshstr(n)) + " " + comment
    )


def ecdsa_pub_blob() -> str:
    return enc64(
        sshstr(b"ecdsa-sha2-nistp256") + sshstr(b"nistp256") + sshstr(b"\x04" + R.randbytes(64))
    )


def pgp_private_block() -> tuple[str, str]:
    pkt = (
        b"\x94\x58\x04"
        + R.randbytes(4)
        + b"\x16\x09\x2b\x06\x01\x04\x01\xda\x47\x0f\x01\x01\x07\x40"
        + R.randbytes(300)
    )
    body = wrap(enc64(pkt))
    text = (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + body
        + "\n="
        + b64(3)
        + "\n-----END PGP PRIVATE KEY BLOCK-----"
    )
    return text, body


def mailgun_key() -> str:
    return f"{hx(32)}-{hx(8)}-{hx(8)}"


def discord_bot() -> str:
    return enc64u(num(18).encode()) + "." + rs(6, B64U) + "." + rs(38, B64U)


def telegram_bot() -> str:
    return f"{num(10)}:AA{rs(33, B64U)}"


SECRETS: list[Secret] = []
HAM: list[Ham] = []


def add(family: str, fmt: str, text: str, secret: str, keep: str = "") -> None:
    SECRETS.append(Secret(family, fmt, text, secret, keep))


def hm(family: str, *texts: str) -> None:
    for t in texts:
        HAM.append(Ham(family, t))


# ==========================================================================
# SECRETS
# ==========================================================================
def _database() -> None:
    F = "database_credential"
    p = pw()
    add(
        F,
        "sql_pg_create_role",
        f"CREATE ROLE app_rw WITH LOGIN PASSWORD '{p}' VALID UNTIL '2026-12-31';",
        p,
        "CREATE ROLE app_rw WITH LOGIN",
    )
    p = pw()
    add(
        F,
        "sql_pg_alter_user",
        f"postgres=# ALTER USER postgres WITH ENCRYPTED PASSWORD '{p}';\nALTER ROLE",
        p,
        "ALTER USER postgres",
    )
    p = pw()
    add(
        F,
        "sql_mysql_create_user",
        f"mysql> CREATE USER 'svc_orders'@'10.0.%' IDENTIFIED BY '{p}';\n"
        "Query OK, 0 rows affected (0.02 sec)",
        p,
        "CREATE USER 'svc_orders'",
    )
    p = pw()
    add(
        F,
        "sql_mysql_alter_native_password",
        f"ALTER USER 'root'@'localhost' IDENTIFIED WITH mysql_native_password BY '{p}';\nFLUSH PRIVILEGES;",
        p,
        "FLUSH PRIVILEGES;",
    )
    p = pw()
    add(
        F,
        "sql_mssql_create_login",
        f"CREATE LOGIN etl_loader WITH PASSWORD = N'{p}', CHECK_POLICY = OFF;\nGO",
        p,
        "CREATE LOGIN etl_loader",
    )
    p = pw_plain()
    add(
        F,
        "sql_oracle_identified_by",
        f'CREATE USER reporting IDENTIFIED BY "{p}" DEFAULT TABLESPACE users QUOTA 500M ON users;',
        p,
        "CREATE USER reporting",
    )
    p = pw()
    add(
        F,
        "sql_mysql_grant_identified",
        f"GRANT SELECT ON analytics.* TO 'bi'@'%' IDENTIFIED BY '{p}';",
        p,
        "GRANT SELECT ON analytics.*",
    )
    p = pw_plain()
    add(
        F,
        "sql_pg_dblink_conninfo",
        f"SELECT * FROM dblink('host=10.20.0.5 dbname=legacy user=etl password={p}', "
        "'SELECT id FROM accounts') AS t(id int);",
        p,
        "dblink(",
    )
    p = pw()
    add(
        F,
        "url_postgres_env",
        f"DATABASE_URL=postgres://app:{uq(p)}@db.internal.acme.io:5432/app_production?sslmode=require",
        uq(p),
        "DATABASE_URL=",
    )
    p = pw()
    add(
        F,
        "url_sqlalchemy_psycopg2",
        f'engine = create_engine("postgresql+psycopg2://analytics:{uq(p)}@10.4.2.17:5432/warehouse", '
        "pool_pre_ping=True)",
        uq(p),
        "create_engine(",
    )
    p = pw_plain()
    add(
        F,
        "ini_alembic_sqlalchemy_url",
        lines(
            "[alembic]",
            "script_location = migrations",
            f"sqlalchemy.url = mysql+pymysql://shop:{p}@127.0.0.1:3306/shop",
        ),
        p,
        "sqlalchemy.url",
    )
    p = pw()
    add(
        F,
        "url_mongodb_srv",
        f'MONGO_URI="mongodb+srv://admin:{uq(p)}@cluster0.{rs(5, ANL)}.mongodb.net/prod'
        '?retryWrites=true&w=majority"',
        uq(p),
        "MONGO_URI=",
    )
    t = rs(32)
    add(
        F,
        "url_rediss_cloud",
        f"REDIS_URL=rediss://default:{t}@redis-{num(5)}.c{R.randint(1, 300)}.us-east-1-2.ec2.redns."
        f"redis-cloud.com:{num(5)}",
        t,
        "REDIS_URL=",
    )
    p = pw()
    add(
        F,
        "cli_redis_cli_a",
        lines(
            f"$ redis-cli -h cache.prod.internal -p 6379 -a '{p}' --no-auth-warning INFO keyspace",
            "# Keyspace",
            "db0:keys=18234,expires=1022,avg_ttl=0",
        ),
        p,
        "redis-cli -h cache.prod.internal",
    )
    p = pw_plain()
    add(
        F,
        "conf_redis_requirepass",
        lines(
            "# redis.conf",
            "bind 0.0.0.0",
            "protected-mode yes",
            f"requirepass {p}",
            "maxmemory 2gb",
        ),
        p,
        "requirepass ",
    )
    p = pw()
    add(
        F,
        "url_amqp_celery",
        f"CELERY_BROKER_URL=amqp://celery:{uq(p)}@rabbitmq.svc:5672/%2F",
        uq(p),
        "CELERY_BROKER_URL=",
    )
    p = pw()
    add(
        F,
        "cli_rabbitmqctl_add_user",
        lines(
            f"$ rabbitmqctl add_user deploy '{p}'",
            'Adding user "deploy" ...',
            "Done. Don't forget to grant the user permissions to some virtual hosts!",
        ),
        p,
        "rabbitmqctl add_user deploy",
    )
    k, s = rs(16, ANU), rs(64, AN + "+/")
    add(
        F,
        "kafka_sasl_jaas_confluent",
        lines(
            f"bootstrap.servers=pkc-{rs(5, ANL)}.eu-west-1.aws.confluent.cloud:9092",
            "security.protocol=SASL_SSL",
            "sasl.mechanism=PLAIN",
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{k}" password="{s}";',
        ),
        s,
        "sasl.mechanism=PLAIN",
    )
    p = pw_plain()
    add(
        F,
        "adonet_mssql_appsettings_json",
        json.dumps(
            {
                "ConnectionStrings": {
                    "DefaultConnection": "Server=tcp:sql-prod-weu.database.windows.net,1433;Initial Catalog=Orders;"
                    f"Persist Security Info=False;User ID=sqladmin;Password={p};Encrypt=True;"
                    "TrustServerCertificate=False;"
                }
            },
            indent=2,
        ),
        p,
        '"DefaultConnection"',
    )
    p = pw()
    add(
        F,
        "cli_sqlcmd_P",
        f"sqlcmd -S localhost,1433 -U sa -P '{p}' -Q \"SELECT name FROM sys.databases\"",
        p,
        "sqlcmd -S localhost,1433 -U sa",
    )
    p = pw()
    add(
        F,
        "jdbc_pg_query_password",
        f"spring.datasource.url=jdbc:postgresql://pg-primary:5432/app?user=app&password={uq(p)}&ssl=true",
        uq(p),
        "spring.datasource.url=",
    )
    p = pw()
    add(
        F,
        "spring_yaml_datasource",
        lines(
            "spring:",
            "  datasource:",
            "    url: jdbc:mysql://mysql.prod:3306/inventory",
            "    username: inventory_svc",
            f'    password: "{p}"',
            "    driver-class-name: com.mysql.cj.jdbc.Driver",
        ),
        p,
        "username: inventory_svc",
    )
    p = pw_plain()
    add(
        F,
        "spring_properties_password",
        lines(
            "spring.datasource.url=jdbc:postgresql://localhost:5432/billing",
            "spring.datasource.username=billing",
            f"spring.datasource.password={p}",
            "spring.jpa.hibernate.ddl-auto=validate",
        ),
        p,
        "spring.datasource.password=",
    )
    p = pw()
    add(
        F,
        "django_databases_dict",
        lines(
            "DATABASES = {",
            "    'default': {",
            "        'ENGINE': 'django.db.backends.postgresql',",
            "        'NAME': 'shop',",
            "        'USER': 'shop',",
            f"        'PASSWORD': '{p}',",
            "        'HOST': 'db.internal',",
            "        'PORT': '5432',",
            "    }",
            "}",
        ),
        p,
        "'PASSWORD': ",
    )
    p = pw()
    add(
        F,
        "rails_database_yml",
        lines(
            "production:",
            "  <<: *default",
            "  database: storefront_production",
            "  username: storefront",
            f"  password: '{p}'",
            "  host: <%= ENV.fetch('DB_HOST', 'localhost') %>",
        ),
        p,
        "storefront_production",
    )
    p = pw_plain()
    add(
        F,
        "laravel_env_db_password",
        lines(
            "DB_CONNECTION=mysql",
            "DB_HOST=127.0.0.1",
            "DB_PORT=3306",
            "DB_DATABASE=laravel",
            "DB_USERNAME=forge",
            f"DB_PASSWORD={p}",
        ),
        p,
        "DB_PASSWORD=",
    )
    p = pw()
    add(
        F,
        "prisma_env_mysql_url",
        f'DATABASE_URL="mysql://prisma:{uq(p)}@aws.connect.psdb.cloud/blog?sslaccept=strict"',
        uq(p),
        "DATABASE_URL=",
    )
    p = pw()
    add(
        F,
        "typeorm_ormconfig_json",
        json.dumps(
            {
                "type": "postgres",
                "host": "localhost",
                "port": 5432,
                "username": "nest",
                "password": p,
                "database": "nest_app",
                "synchronize": False,
            },
            indent=2,
        ),
        p,
        '"username": "nest"',
    )
    p = pw()
    add(
        F,
        "sequelize_config_json",
        json.dumps(
            {
                "production": {
                    "username": "api",
                    "password": p,
                    "database": "api_prod",
                    "host": "10.1.0.12",
                    "dialect": "mysql",
                }
            },
            indent=2,
        ),
        p,
        '"dialect": "mysql"',
    )
    p = pw_plain()
    add(
        F,
        "hibernate_cfg_xml",
        lines(
            '<property name="hibernate.connection.url">jdbc:mysql://db:3306/hr</property>',
            '<property name="hibernate.connection.username">hr_app</property>',
            f'<property name="hibernate.connection.password">{p}</property>',
        ),
        p,
        "hibernate.connection.username",
    )
    p = pw()
    add(
        F,
        "knexfile_js",
        lines(
            "module.exports = {",
            "  production: {",
            "    client: 'pg',",
            "    connection: {",
            "      host: 'pg.prod.internal',",
            "      user: 'knex',",
            f"      password: '{p}',",
            "      database: 'orders',",
            "    },",
            "  },",
            "};",
        ),
        p,
        "client: 'pg'",
    )
    p = pw_plain()
    add(
        F,
        "go_mysql_dsn",
        f'dsn := "gorm:{p}@tcp(127.0.0.1:3306)/gorm?charset=utf8mb4&parseTime=True&loc=Local"\n'
        "db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{})",
        p,
        "gorm.Open(",
    )
    p = pw()
    add(
        F,
        "env_pgpassword_psql",
        f"PGPASSWORD='{p}' psql -h pg.prod.internal -U migrator -d app -f migrations/001_init.sql",
        p,
        "psql -h pg.prod.internal",
    )
    p = pw()
    add(
        F,
        "cli_mysql_p_attached",
        lines(
            f"$ mysql -h db1.internal -u root -p'{p}' -e 'SHOW DATABASES;'",
            "mysql: [Warning] Using a password on the command line interface can be insecure.",
        ),
        p,
        "mysql -h db1.internal -u root",
    )
    p = pw()
    add(
        F,
        "cli_mysqldump_password_eq",
        f"mysqldump --single-transaction --user=backup --password='{p}' --host=10.0.3.4 shop | gzip > shop.sql.gz",
        p,
        "mysqldump --single-transaction",
    )
    p = pw()
    add(
        F,
        "mycnf_client",
        lines(
            "[client]", "user=root", f'password="{p}"', "host=127.0.0.1", "", "[mysqldump]", "quick"
        ),
        p,
        "[client]",
    )
    p = pw_plain()
    add(
        F,
        "pg_service_conf",
        lines(
            "[reporting]",
            "host=pg-replica.internal",
            "port=5432",
            "dbname=reporting",
            "user=metabase",
            f"password={p}",
            "sslmode=verify-full",
        ),
        p,
        "[reporting]",
    )
    p = pw_plain()
    add(
        F,
        "tnsnames_sqlplus",
        lines(
            "PRODDB =",
            "  (DESCRIPTION =",
            "    (ADDRESS = (PROTOCOL = TCP)(HOST = ora-scan.corp)(PORT = 1521))",
            "    (CONNECT_DATA = (SERVICE_NAME = PRODDB.corp)))",
            "",
            f"$ sqlplus system/{p}@PRODDB",
        ),
        p,
        "(SERVICE_NAME = PRODDB.corp)",
    )
    p = pw_plain()
    add(
        F,
        "jdbc_oracle_thin_userpass",
        f"jdbc.url=jdbc:oracle:thin:scott/{p}@//ora-prod.corp:1521/ORCLPDB1",
        p,
        "jdbc:oracle:thin:",
    )
    p = pw()
    add(
        F,
        "cli_clickhouse_client",
        f"clickhouse-client --host ch01.internal --secure --user default --password '{p}' "
        "--query 'SELECT version()'",
        p,
        "clickhouse-client --host ch01.internal",
    )
    p = pw()
    add(
        F,
        "cli_cqlsh",
        f"cqlsh cassandra-0.cassandra.svc 9042 -u cassandra -p '{p}' --ssl",
        p,
        "cqlsh ",
    )
    p = pw_plain()
    add(
        F,
        "env_neo4j_auth",
        f"docker run -d -p 7474:7474 -p 7687:7687 -e NEO4J_AUTH=neo4j/{p} neo4j:5.20",
        p,
        "NEO4J_AUTH=neo4j/",
    )
    t = base64.urlsafe_b64encode(R.randbytes(64)).decode()
    add(
        F,
        "cli_influx_token",
        f"influx config create --config-name prod --host-url https://influx.internal:8086 --org acme "
        f"--token {t} --active",
        t,
        "influx config create",
    )
    p = pw()
    add(
        F,
        "py_snowflake_connect",
        lines(
            "conn = snowflake.connector.connect(",
            '    user="DBT_CLOUD",',
            f'    password="{p}",',
            '    account="xy12345.eu-central-1",',
            '    warehouse="TRANSFORMING",',
            ")",
        ),
        p,
        "snowflake.connector.connect(",
    )
    p = pw_plain()
    add(
        F,
        "odbc_ini_dsn",
        lines(
            "[MSSQL-Prod]",
            "Driver=ODBC Driver 18 for SQL Server",
            "Server=tcp:10.2.0.8,1433",
            "Database=Finance",
            "UID=report_reader",
            f"PWD={p}",
        ),
        p,
        "[MSSQL-Prod]",
    )
    p = pw_plain()
    add(
        F,
        "pgbouncer_userlist_plain",
        lines('"pgbouncer" "md5' + hx(32) + '"', f'"app" "{p}"'),
        p,
        '"pgbouncer"',
    )
    p = pw_plain()
    add(
        F,
        "flyway_conf",
        lines(
            "flyway.url=jdbc:postgresql://localhost:5432/ledger",
            "flyway.user=ledger_owner",
            f"flyway.password={p}",
            "flyway.locations=filesystem:sql",
        ),
        p,
        "flyway.user=ledger_owner",
    )
    p = pw_plain()
    add(
        F,
        "curl_elastic_basic_u",
        f"curl -u elastic:{p} -k 'https://es01.internal:9200/_cat/indices?v'",
        p,
        "curl -u elastic:",
    )
    p = pw()
    add(
        F,
        "url_cockroach_cli",
        f'cockroach sql --url "postgresql://root:{uq(p)}@crdb-public.crdb:26257/defaultdb?sslmode=verify-full"',
        uq(p),
        "cockroach sql --url",
    )
    p = pw()
    add(
        F,
        "ansible_group_vars_mysql",
        lines(
            "# group_vars/dbservers.yml",
            "mysql_root_user: root",
            f'mysql_root_password: "{p}"',
            "mysql_bind_address: 0.0.0.0",
        ),
        p,
        "mysql_root_password: ",
    )
    p = pw()
    add(
        F,
        "tf_aws_db_instance_password",
        lines(
            'resource "aws_db_instance" "main" {',
            '  engine            = "postgres"',
            '  instance_class    = "db.t3.medium"',
            '  username          = "dbadmin"',
            f'  password          = "{p}"',
            "  skip_final_snapshot = true",
            "}",
        ),
        p,
        'resource "aws_db_instance" "main"',
    )
    p = pw()
    add(
        F,
        "cli_couchbase_cbq",
        f"cbq -u Administrator -p '{p}' -e couchbase://cb1.internal "
        "--script='SELECT COUNT(*) FROM `travel-sample`'",
        p,
        "cbq -u Administrator",
    )
    p = pw()
    add(
        F,
        "url_supabase_pooler",
        f"postgresql://postgres.{rs(20, LOW)}:{uq(p)}@aws-0-eu-central-1.pooler.supabase.com:6543/postgres",
        uq(p),
        "pooler.supabase.com:6543",
    )
    p = pw_plain()
    add(
        F,
        "jdbc_sqlserver_semicolon",
        f'String url = "jdbc:sqlserver://sql01:1433;databaseName=hr;user=sa;password={p};'
        'encrypt=true;trustServerCertificate=true";',
        p,
        "jdbc:sqlserver://",
    )
    p = pw()
    add(
        F,
        "py_psycopg2_connect",
        f'conn = psycopg2.connect(host="10.0.0.21", dbname="events", user="ingest", password="{p}")',
        p,
        "psycopg2.connect(",
    )
    p = pw()
    add(
        F,
        "node_pg_pool",
        lines(
            "const pool = new Pool({",
            "  host: 'localhost',",
            "  user: 'node_app',",
            f"  password: '{p}',",
            "  database: 'tasks',",
            "  port: 5432,",
            "});",
        ),
        p,
        "new Pool({",
    )
    p = pw()
    add(
        F,
        "java_drivermanager_getconnection",
        f'Connection c = DriverManager.getConnection("jdbc:mysql://localhost:3306/shop", "shop_rw", "{p}");',
        p,
        "DriverManager.getConnection(",
    )
    p = pw_plain()
    add(
        F,
        "csharp_sqlconnection",
        f'using var conn = new SqlConnection("Data Source=SQLPROD01;Initial Catalog=Payroll;'
        f'User Id=payroll_svc;Password={p};");',
        p,
        "new SqlConnection(",
    )
    p = pw()
    add(
        F,
        "php_pdo_constructor",
        f"$pdo = new PDO('mysql:host=127.0.0.1;dbname=wordpress;charset=utf8mb4', 'wp_user', '{p}');",
        p,
        "new PDO(",
    )
    p = pw()
    add(
        F,
        "php_wp_config_define",
        lines(
            "define( 'DB_NAME', 'wordpress' );",
            "define( 'DB_USER', 'wp_prod' );",
            f"define( 'DB_PASSWORD', '{p}' );",
            "define( 'DB_HOST', 'localhost' );",
        ),
        p,
        "define( 'DB_PASSWORD', ",
    )
    p = pw()
    add(
        F,
        "elixir_ecto_repo_config",
        lines(
            "config :my_app, MyApp.Repo,",
            '  username: "postgres",',
            f'  password: "{p}",',
            '  hostname: "db.prod.internal",',
            '  database: "my_app_prod",',
            "  pool_size: 10",
        ),
        p,
        "config :my_app, MyApp.Repo,",
    )
    p = pw()
    add(
        F,
        "ruby_sequel_connect",
        f"DB = Sequel.connect(adapter: 'postgres', host: 'pg1', database: 'crm', user: 'crm', password: '{p}')",
        p,
        "Sequel.connect(",
    )
    p = pw()
    add(
        F,
        "kotlin_exposed_connect",
        f'Database.connect("jdbc:postgresql://localhost:5432/ktor", driver = "org.postgresql.Driver", '
        f'user = "ktor", password = "{p}")',
        p,
        "Database.connect(",
    )
    p = pw()
    add(
        F,
        "rust_sqlx_dotenv",
        f"# .env\nDATABASE_URL=postgres://sqlx:{uq(p)}@localhost/sqlx_example",
        uq(p),
        "DATABASE_URL=",
    )
    p = pw()
    add(
        F,
        "swift_postgresnio_config",
        lines(
            "let config = PostgresConnection.Configuration(",
            '    host: "db.internal",',
            "    port: 5432,",
            '    username: "vapor",',
            f'    password: "{p}",',
            '    database: "vapor_prod",',
            "    tls: .disable",
            ")",
        ),
        p,
        "PostgresConnection.Configuration(",
    )


def _aws() -> None:
    F = "cloud_aws"
    ak, sk = akid(), aws_sk()
    add(
        F,
        "aws_credentials_ini",
        lines(
            "[default]",
            f"aws_access_key_id = {ak}",
            f"aws_secret_access_key = {sk}",
            "region = eu-west-1",
        ),
        sk,
        "aws_secret_access_key = ",
    )
    ak, sk, st = akid("ASIA"), aws_sk(), aws_st()
    add(
        F,
        "aws_credentials_session_token",
        lines(
            "[sso-dev]",
            f"aws_access_key_id = {ak}",
            f"aws_secret_access_key = {sk}",
            f"aws_session_token = {st}",
        ),
        st,
        "aws_session_token = ",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "aws_env_export",
        lines(
            f"export AWS_ACCESS_KEY_ID={ak}",
            f"export AWS_SECRET_ACCESS_KEY={sk}",
            "export AWS_DEFAULT_REGION=us-east-1",
        ),
        sk,
        "export AWS_SECRET_ACCESS_KEY=",
    )
    ak = akid()
    add(
        F,
        "aws_access_key_id_alone",
        f"AWS_ACCESS_KEY_ID={ak}  # ci-uploader user, the secret half is in 1Password",
        ak,
        "AWS_ACCESS_KEY_ID=",
    )
    sk = aws_sk()
    add(
        F,
        "aws_cli_configure_set",
        f"$ aws configure set aws_secret_access_key {sk} --profile deploy",
        sk,
        "aws configure set aws_secret_access_key",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "tf_provider_aws_static_keys",
        lines(
            'provider "aws" {',
            '  region     = "us-west-2"',
            f'  access_key = "{ak}"',
            f'  secret_key = "{sk}"',
            "}",
        ),
        sk,
        'provider "aws" {',
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "py_boto3_client_keys",
        f's3 = boto3.client("s3", aws_access_key_id="{ak}", aws_secret_access_key="{sk}")',
        sk,
        'boto3.client("s3"',
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "java_basic_aws_credentials",
        f'AWSCredentials creds = new BasicAWSCredentials("{ak}", "{sk}");',
        sk,
        "new BasicAWSCredentials(",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "go_static_credentials_provider",
        f'cfg.Credentials = credentials.NewStaticCredentialsProvider("{ak}", "{sk}", "")',
        sk,
        "credentials.NewStaticCredentialsProvider(",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "ts_s3client_credentials",
        lines(
            "const s3 = new S3Client({",
            "  region: 'eu-central-1',",
            f"  credentials: {{ accessKeyId: '{ak}', secretAccessKey: '{sk}' }},",
            "});",
        ),
        sk,
        "new S3Client({",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "rust_aws_credentials_new",
        f'let creds = Credentials::new("{ak}", "{sk}", None, None, "hardcoded");',
        sk,
        "Credentials::new(",
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "php_aws_sdk_credentials",
        lines(
            "$s3 = new Aws\\S3\\S3Client([",
            "    'region' => 'eu-west-1',",
            "    'version' => 'latest',",
            f"    'credentials' => ['key' => '{ak}', 'secret' => '{sk}'],",
            "]);",
        ),
        sk,
        "S3Client([",
    )
    ak, ses = akid(), "B" + rs(43, AN + "+/")
    add(
        F,
        "aws_ses_smtp_password_env",
        lines(
            "MAIL_MAILER=smtp",
            "MAIL_HOST=email-smtp.eu-west-1.amazonaws.com",
            "MAIL_PORT=587",
            f"MAIL_USERNAME={ak}",
            f"MAIL_PASSWORD={ses}",
        ),
        ses,
        "MAIL_PASSWORD=",
    )
    p = pw()
    add(
        F,
        "cfn_parameters_json_password",
        json.dumps(
            [
                {"ParameterKey": "DBMasterUsername", "ParameterValue": "admin"},
                {"ParameterKey": "DBMasterUserPassword", "ParameterValue": p},
            ],
            indent=2,
        ),
        p,
        '"DBMasterUserPassword"',
    )
    ak, sk = akid(), aws_sk()
    add(
        F,
        "docker_run_aws_env",
        f"docker run --rm -e AWS_ACCESS_KEY_ID={ak} -e AWS_SECRET_ACCESS_KEY={sk} amazon/aws-cli s3 ls",
        sk,
        "amazon/aws-cli s3 ls",
    )


def _gcp() -> None:
    F = "cloud_gcp"
    proj = f"{pick(WORDS)}-{pick(WORDS)}-{num(6)}"
    pem_text, body = pem("PRIVATE KEY", rsa_pkcs8_der())
    sa = {
        "type": "service_account",
        "project_id": proj,
        "private_key_id": hx(40),
        "private_key": pem_text + "\n",
        "client_email": f"ci-deployer@{proj}.iam.gserviceaccount.com",
        "client_id": num(21),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    add(
        F,
        "gcp_service_account_json",
        json.dumps(sa, indent=2),
        body.replace("\n", "\\n"),
        '"type": "service_account"',
    )
    k = "AIza" + rs(35, B64U)
    add(
        F,
        "gcp_gemini_key_in_url",
        f'curl -s "https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-flash:generateContent'
        f'?key={k}" -H "Content-Type: application/json" -d @req.json',
        k,
        "generativelanguage.googleapis.com",
    )
    cs = "GOCSPX-" + rs(28, B64U)
    add(
        F,
        "gcp_oauth_client_secret_json",
        json.dumps(
            {
                "installed": {
                    "client_id": f"{num(12)}-{rs(32, ANL)}.apps.googleusercontent.com",
                    "project_id": proj,
                    "auth_uri": "https://accounts.google.com/o/oauth2/auth",
                    "token_uri": "https://oauth2.googleapis.com/token",
                    "client_secret": cs,
                    "redirect_uris": ["http://localhost"],
                }
            }
        ),
        cs,
        '"installed"',
    )
    rt = "1//0" + rs(99, B64U)
    add(
        F,
        "gcp_adc_authorized_user_refresh",
        json.dumps(
            {
                "account": "",
                "client_id": f"{num(12)}-{rs(32, ANL)}.apps.googleusercontent.com",
                "client_secret": "GOCSPX-" + rs(28, B64U),
                "refresh_token": rt,
                "type": "authorized_user",
                "universe_domain": "googleapis.com",
            },
            indent=2,
        ),
        rt,
        '"type": "authorized_user"',
    )
    sec = rs(40, AN + "+/")
    add(
        F,
        "gcs_hmac_boto_config",
        lines(
            "[Credentials]",
            f"gs_access_key_id = GOOG1E{rs(55, ANU)}",
            f"gs_secret_access_key = {sec}",
        ),
        sec,
        "gs_secret_access_key = ",
    )
    blob = enc64(json.dumps(sa).encode())
    add(
        F,
        "gcp_credentials_base64_env",
        f"GOOGLE_CREDENTIALS_B64={blob}",
        blob,
        "GOOGLE_CREDENTIALS_B64=",
    )
    k = "AIza" + rs(35, B64U)
    add(
        F,
        "go_genai_with_api_key",
        f'client, err := genai.NewClient(ctx, option.WithAPIKey("{k}"))',
        k,
        "genai.NewClient(",
    )
    tok = ya29()
    add(
        F,
        "gcp_bearer_curl",
        f'curl -H "Authorization: Bearer {tok}" https://storage.googleapis.com/storage/v1/b?project={proj}',
        tok,
        "storage.googleapis.com",
    )


def _azure() -> None:
    F = "cloud_azure"
    acct = "st" + rs(10, ANL)
    key = b64(64)
    add(
        F,
        "azure_storage_connection_string",
        f'AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=https;AccountName={acct};'
        f'AccountKey={key};EndpointSuffix=core.windows.net"',
        key,
        "AZURE_STORAGE_CONNECTION_STRING=",
    )
    sig = b64(32)
    add(
        F,
        "azure_blob_sas_sig",
        f"https://{acct}.blob.core.windows.net/backups/db-2024-06-01.bak?sv=2022-11-02&ss=b&srt=sco"
        f"&sp=rwdlacupiytfx&se=2025-12-31T23:59:59Z&st=2024-06-01T00:00:00Z&spr=https&sig={uq(sig)}",
        uq(sig),
        "blob.core.windows.net/backups/",
    )
    cs = azure_cs()
    add(
        F,
        "azure_client_secret_env",
        lines(
            f"AZURE_TENANT_ID={uuid4()}", f"AZURE_CLIENT_ID={uuid4()}", f"AZURE_CLIENT_SECRET={cs}"
        ),
        cs,
        "AZURE_CLIENT_SECRET=",
    )
    key = b64(64)
    add(
        F,
        "azure_cosmos_connection",
        f"AccountEndpoint=https://cosmos-{rs(6, ANL)}.documents.azure.com:443/;AccountKey={key};",
        key,
        "AccountEndpoint=",
    )
    key = b64(32)
    add(
        F,
        "azure_servicebus_sas_key",
        f'"ServiceBusConnection": "Endpoint=sb://sb-orders-prod.servicebus.windows.net/;'
        f'SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={key}"',
        key,
        "SharedAccessKeyName=RootManageSharedAccessKey",
    )
    key = hx(32)
    add(
        F,
        "py_azure_openai_api_key",
        f'client = AzureOpenAI(api_key="{key}", api_version="2024-02-01", '
        'azure_endpoint="https://acme-oai.openai.azure.com")',
        key,
        "AzureOpenAI(",
    )
    code = rs(54, B64U) + "=="
    add(
        F,
        "azure_function_key_url",
        f"curl -X POST 'https://func-ingest-prod.azurewebsites.net/api/HttpTrigger1?code={code}' -d @event.json",
        code,
        "azurewebsites.net/api/HttpTrigger1",
    )
    p = rs(42, AN + "+/") + "+ACR" + rs(6)
    add(
        F,
        "azure_acr_docker_login_p",
        f"docker login acmeregistry.azurecr.io -u acmeregistry -p {p}",
        p,
        "docker login acmeregistry.azurecr.io",
    )
    cs = azure_cs()
    add(
        F,
        "tf_azurerm_client_secret",
        lines(
            'provider "azurerm" {',
            "  features {}",
            f'  subscription_id = "{uuid4()}"',
            f'  client_id       = "{uuid4()}"',
            f'  client_secret   = "{cs}"',
            f'  tenant_id       = "{uuid4()}"',
            "}",
        ),
        cs,
        'provider "azurerm"',
    )
    cs = azure_cs()
    add(
        F,
        "csharp_client_secret_credential",
        f'var cred = new ClientSecretCredential("{uuid4()}", "{uuid4()}", "{cs}");',
        cs,
        "new ClientSecretCredential(",
    )
    cs = azure_cs()
    add(
        F,
        "az_login_service_principal_p",
        f"az login --service-principal -u {uuid4()} -p '{cs}' --tenant acme.onmicrosoft.com",
        cs,
        "az login --service-principal",
    )


def _cloud_other() -> None:
    F = "cloud_other"
    ak, sk = "LTAI" + rs(20), rs(30)
    add(
        F,
        "alibaba_aliyun_config_json",
        json.dumps(
            {
                "current": "default",
                "profiles": [
                    {
                        "name": "default",
                        "mode": "AK",
                        "access_key_id": ak,
                        "access_key_secret": sk,
                        "region_id": "cn-hangzhou",
                    }
                ],
            },
            indent=2,
        ),
        sk,
        '"access_key_secret"',
    )
    ak, sk = "LTAI" + rs(20), rs(30)
    add(
        F,
        "alibaba_env_vars",
        lines(
            f"export ALIBABA_CLOUD_ACCESS_KEY_ID={ak}",
            f"export ALIBABA_CLOUD_ACCESS_KEY_SECRET={sk}",
        ),
        sk,
        "ALIBABA_CLOUD_ACCESS_KEY_SECRET=",
    )
    p = pw()
    fp = ":".join(hx(2) for _ in range(16))
    add(
        F,
        "oci_config_pass_phrase",
        lines(
            "[DEFAULT]",
            f"user=ocid1.user.oc1..aaaaaaaa{rs(52, ANL)}",
            f"fingerprint={fp}",
            "key_file=~/.oci/oci_api_key.pem",
            f"tenancy=ocid1.tenancy.oc1..aaaaaaaa{rs(52, ANL)}",
            "region=eu-frankfurt-1",
            f"pass_phrase={p}",
        ),
        p,
        "key_file=~/.oci/oci_api_key.pem",
    )
    tok = rs(20, AN + "()[]{}<>.;:_-")
    add(
        F,
        "oci_ocir_auth_token",
        f"docker login fra.ocir.io -u 'frxyz1abcd/oracleidentitycloudservice/dana@acme.io' -p '{tok}'",
        tok,
        "docker login fra.ocir.io",
    )
    k = rs(44, B64U)
    add(
        F,
        "ibmcloud_login_apikey",
        f"ibmcloud login --apikey {k} -r eu-de -g default",
        k,
        "ibmcloud login",
    )
    k = rs(44, B64U)
    add(F, "ibmcloud_env_apikey", f"IC_API_KEY={k}\nIBMCLOUD_REGION=us-south", k, "IC_API_KEY=")
    t = "dop_v1_" + hx(64)
    add(
        F,
        "digitalocean_doctl_config",
        lines(
            "# ~/.config/doctl/config.yaml",
            f"access-token: {t}",
            "context: default",
            "output: text",
        ),
        t,
        "access-token: ",
    )
    ak, sk = "DO00" + rs(16, ANU), rs(43, AN + "+/")
    add(
        F,
        "digitalocean_spaces_s3cfg",
        lines(
            "[default]",
            f"access_key = {ak}",
            f"secret_key = {sk}",
            "host_base = fra1.digitaloceanspaces.com",
            "host_bucket = %(bucket)s.fra1.digitaloceanspaces.com",
        ),
        sk,
        "host_base = fra1.digitaloceanspaces.com",
    )
    t = rs(64)
    add(
        F,
        "hetzner_hcloud_token_env",
        f"export HCLOUD_TOKEN={t}\nhcloud server list",
        t,
        "export HCLOUD_TOKEN=",
    )
    t = rs(64)
    add(
        F,
        "hetzner_tfvars",
        lines("# terraform.tfvars", f'hcloud_token = "{t}"', 'location     = "nbg1"'),
        t,
        "hcloud_token = ",
    )
    t = hx(64)
    add(
        F,
        "linode_cli_config",
        lines(
            "[DEFAULT]", "default-user = dana", "", "[dana]", f"token = {t}", "region = eu-central"
        ),
        t,
        "default-user = dana",
    )
    t = rs(40, B64U)
    add(
        F,
        "cloudflare_api_token_env",
        f"CLOUDFLARE_API_TOKEN={t} npx wrangler deploy",
        t,
        "npx wrangler deploy",
    )
    k = hx(37)
    add(
        F,
        "cloudflare_global_api_key_curl",
        f'curl -X GET "https://api.cloudflare.com/client/v4/zones" -H "X-Auth-Email: ops@acme.io" '
        f'-H "X-Auth-Key: {k}"',
        k,
        "api.cloudflare.com/client/v4/zones",
    )
    tunnel = enc64(
        json.dumps({"a": hx(32), "t": uuid4(), "s": b64(32)}, separators=(",", ":")).encode()
    )
    add(
        F,
        "cloudflared_tunnel_token",
        f"sudo cloudflared service install {tunnel}",
        tunnel,
        "sudo cloudflared service install",
    )
    ak, sk = hx(32), hx(64)
    add(
        F,
        "cloudflare_r2_rclone",
        lines(
            "[r2]",
            "type = s3",
            "provider = Cloudflare",
            f"access_key_id = {ak}",
            f"secret_access_key = {sk}",
            f"endpoint = https://{hx(32)}.r2.cloudflarestorage.com",
        ),
        sk,
        "provider = Cloudflare",
    )
    sk = uuid4()
    add(
        F,
        "scaleway_secret_key",
        lines(
            f"SCW_ACCESS_KEY=SCW{rs(17, ANU)}",
            f"SCW_SECRET_KEY={sk}",
            f"SCW_DEFAULT_PROJECT_ID={uuid4()}",
        ),
        sk,
        "SCW_SECRET_KEY=",
    )
    k = rs(36, ANU)
    add(
        F,
        "vultr_api_key_cli",
        f"VULTR_API_KEY={k} vultr-cli instance list",
        k,
        "vultr-cli instance list",
    )
    app_key = "K00" + rs(28, AN + "/+")
    add(
        F,
        "backblaze_b2_authorize",
        f"b2 account authorize 00{hx(23)} {app_key}",
        app_key,
        "b2 account authorize",
    )
    sec = rs(32)
    add(
        F,
        "ovh_conf_application_secret",
        lines(
            "[default]",
            "endpoint=ovh-eu",
            "",
            "[ovh-eu]",
            f"application_key={rs(16)}",
            f"application_secret={sec}",
            f"consumer_key={rs(32)}",
        ),
        sec,
        "endpoint=ovh-eu",
    )


def _paas() -> None:
    F = "paas_token"
    t = rs(24)
    add(
        F,
        "vercel_cli_token_flag",
        f"vercel deploy --prod --token {t} --yes",
        t,
        "vercel deploy --prod",
    )
    t = "nfp_" + rs(36)
    add(
        F,
        "netlify_auth_token_env",
        f"NETLIFY_AUTH_TOKEN={t} netlify deploy --prod --dir=dist",
        t,
        "netlify deploy --prod",
    )
    t = "FlyV1 fm2_" + rs(R.randint(180, 220), B64A) + "," + "fm2_" + rs(120, B64A)
    add(
        F,
        "fly_deploy_token_output",
        lines("$ fly tokens create deploy -x 999999h", t),
        t,
        "fly tokens create deploy",
    )
    t = "fo1_" + rs(43, B64U)
    add(F, "fly_api_token_env", f"FLY_API_TOKEN={t}", t, "FLY_API_TOKEN=")
    t = "rnd_" + rs(32)
    add(
        F,
        "render_api_key_curl",
        f"curl -H 'Authorization: Bearer {t}' https://api.render.com/v1/services?limit=20",
        t,
        "api.render.com/v1/services",
    )
    t = uuid4()
    add(F, "railway_token_env", f"RAILWAY_TOKEN={t} railway up --detach", t, "railway up --detach")
    t = "HRKU-AA" + rs(58, B64U)
    add(
        F,
        "heroku_auth_token_output",
        lines("$ heroku auth:token", t, " ›   Warning: token will expire 06/11/2025"),
        t,
        "heroku auth:token",
    )
    t = "sbp_" + hx(40)
    add(
        F,
        "supabase_access_token_env",
        f"SUPABASE_ACCESS_TOKEN={t} supabase db push",
        t,
        "supabase db push",
    )
    t = "ddp_" + rs(36)
    add(
        F,
        "deno_deploy_token",
        f"deployctl deploy --project=acme-edge --token={t} main.ts",
        t,
        "deployctl deploy --project=acme-edge",
    )
    t = uuid4()
    add(
        F,
        "heroku_netrc_api",
        lines(
            "machine api.heroku.com",
            "  login dana@acme.io",
            f"  password {t}",
            "machine git.heroku.com",
            "  login dana@acme.io",
            f"  password {t}",
        ),
        t,
        "machine api.heroku.com",
    )


def _ci_cd() -> None:
    F = "ci_cd"
    t = npm_tok()
    add(
        F,
        "gha_log_env_block_leak",
        lines(
            "2024-06-12T10:14:03.1234567Z ##[group]Run npm publish --access public",
            "2024-06-12T10:14:03.1235012Z npm publish --access public",
            "2024-06-12T10:14:03.1240031Z shell: /usr/bin/bash -e {0}",
            "2024-06-12T10:14:03.1240107Z env:",
            f"2024-06-12T10:14:03.1240188Z   NODE_AUTH_TOKEN: {t}",
            "2024-06-12T10:14:03.1240260Z ##[endgroup]",
        ),
        t,
        "##[group]Run npm publish --access public",
    )
    t = "sqp_" + hx(40)
    add(
        F,
        "gha_workflow_hardcoded_env",
        lines(
            "      - name: SonarCloud Scan",
            "        uses: SonarSource/sonarcloud-github-action@v2",
            "        env:",
            "          GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
            f"          SONAR_TOKEN: {t}",
        ),
        t,
        "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
    )
    t = "ghs_" + rs(36)
    add(
        F,
        "gha_log_x_access_token_clone",
        f"2024-06-12T09:01:55.0912Z [command]/usr/bin/git clone https://x-access-token:{t}@github.com/acme/private-charts.git",
        t,
        "[command]/usr/bin/git clone",
    )
    t = "gldt-" + rs(20, B64U)
    add(
        F,
        "gitlab_ci_variables_deploy_token",
        lines(
            "variables:",
            "  DEPLOY_TOKEN_USER: gitlab+deploy-token-4411",
            f'  DEPLOY_TOKEN_PASSWORD: "{t}"',
            "  DOCKER_DRIVER: overlay2",
        ),
        t,
        "DEPLOY_TOKEN_USER: gitlab+deploy-token-4411",
    )
    t = "glrt-" + rs(20, B64U)
    add(
        F,
        "gitlab_runner_register_token",
        f'sudo gitlab-runner register --non-interactive --url "https://gitlab.acme.io/" --token "{t}" '
        "--executor docker --docker-image alpine:3.20",
        t,
        "gitlab-runner register",
    )
    t = "glrt-" + rs(20, B64U)
    add(
        F,
        "gitlab_runner_config_toml",
        lines(
            "[[runners]]",
            '  name = "k8s-runner-01"',
            '  url = "https://gitlab.acme.io/"',
            f"  id = {num(5)}",
            f'  token = "{t}"',
            '  executor = "kubernetes"',
        ),
        t,
        "[[runners]]",
    )
    t = "glptt-" + hx(40)
    add(
        F,
        "gitlab_pipeline_trigger_curl",
        f"curl -X POST --fail -F token={t} -F ref=main https://gitlab.acme.io/api/v4/projects/281/trigger/pipeline",
        t,
        "trigger/pipeline",
    )
    t = "CCIPAT_" + rs(22) + "_" + hx(40)
    add(
        F,
        "circleci_cli_yml_token",
        lines("host: https://circleci.com", "endpoint: graphql-unstable", f"token: {t}"),
        t,
        "host: https://circleci.com",
    )
    t = hx(40)
    add(
        F,
        "circleci_api_v1_token_query",
        f"curl https://circleci.com/api/v1.1/project/github/acme/api/tree/main?circle-token={t}",
        t,
        "circleci.com/api/v1.1/project",
    )
    p = pw()
    add(
        F,
        "jenkins_casc_username_password",
        lines(
            "credentials:",
            "  system:",
            "    domainCredentials:",
            "      - credentials:",
            "          - usernamePassword:",
            "              scope: GLOBAL",
            '              id: "nexus-deployer"',
            '              username: "deployer"',
            f'              password: "{p}"',
        ),
        p,
        'id: "nexus-deployer"',
    )
    t = "11" + hx(32)
    add(
        F,
        "jenkins_api_token_curl_u",
        f"curl -X POST -u admin:{t} https://jenkins.acme.io/job/api-deploy/buildWithParameters?ENV=prod",
        t,
        "buildWithParameters?ENV=prod",
    )
    p = pw()
    add(
        F,
        "jenkins_groovy_credentials_impl",
        'def c = new UsernamePasswordCredentialsImpl(CredentialsScope.GLOBAL, "artifactory", "Artifactory deploy", '
        f'"ci-bot", "{p}")',
        p,
        "UsernamePasswordCredentialsImpl(",
    )
    t = rs(50, ANL)
    add(
        F,
        "buildkite_agent_cfg_token",
        lines(
            "# /etc/buildkite-agent/buildkite-agent.cfg",
            f'token="{t}"',
            'name="%hostname-%spawn"',
            'tags="queue=default,os=linux"',
        ),
        t,
        'name="%hostname-%spawn"',
    )
    t = "bkua_" + hx(40)
    add(
        F,
        "buildkite_api_token_env",
        f"export BUILDKITE_API_TOKEN={t}\nbk build list --pipeline api",
        t,
        "export BUILDKITE_API_TOKEN=",
    )
    t = hx(32)
    add(
        F,
        "drone_rpc_secret_compose",
        lines(
            "    environment:",
            "      - DRONE_GITHUB_CLIENT_ID=Iv1." + hx(16),
            f"      - DRONE_RPC_SECRET={t}",
            "      - DRONE_SERVER_HOST=drone.acme.io",
        ),
        t,
        "DRONE_RPC_SECRET=",
    )
    t = hx(40)
    add(
        F,
        "drone_github_client_secret",
        f"DRONE_GITHUB_CLIENT_SECRET={t}",
        t,
        "DRONE_GITHUB_CLIENT_SECRET=",
    )
    p = rs(16, AN + "-")
    add(
        F,
        "argocd_login_password_flag",
        f"argocd login argocd.acme.io --username admin --password '{p}' --grpc-web",
        p,
        "argocd login argocd.acme.io",
    )
    t = jwt({"iss": "argocd", "sub": "ci:apiKey", "nbf": ts(), "iat": ts(), "jti": uuid4()})
    add(
        F,
        "argocd_auth_token_env",
        f"ARGOCD_AUTH_TOKEN={t} argocd app sync payments --prune",
        t,
        "argocd app sync payments",
    )
    t = ghp()
    add(
        F,
        "argocd_repo_add_password",
        f"argocd repo add https://github.com/acme/gitops.git --username git --password {t}",
        t,
        "argocd repo add https://github.com/acme/gitops.git",
    )
    p = pw()
    add(
        F,
        "tekton_basic_auth_secret",
        lines(
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            "  name: git-basic-auth",
            "  annotations:",
            "    tekton.dev/git-0: https://github.com",
            "type: kubernetes.io/basic-auth",
            "stringData:",
            "  username: tekton-bot",
            f'  password: "{p}"',
        ),
        p,
        "tekton.dev/git-0: https://github.com",
    )
    t = uuid4()
    add(
        F,
        "codecov_token_in_workflow",
        lines(
            "      - uses: codecov/codecov-action@v4",
            "        with:",
            f"          token: {t}",
            "          fail_ci_if_error: true",
        ),
        t,
        "codecov/codecov-action@v4",
    )
    t = uuid4()
    add(
        F, "snyk_auth_cli", f"$ snyk auth {t}\nYour account has been authenticated.", t, "snyk auth"
    )
    t = rs(40, B64U)
    add(
        F,
        "atlantis_webhook_secret",
        f"atlantis server --gh-user=atlantis-bot --gh-webhook-secret={t} --repo-allowlist='github.com/acme/*'",
        t,
        "atlantis server",
    )


def _containers() -> None:
    F = "container_k8s"
    p = pw()
    auth = enc64(f"ci-bot:{p}".encode())
    add(
        F,
        "docker_config_json_auth",
        json.dumps(
            {
                "auths": {"registry.acme.io": {"auth": auth}, "https://index.docker.io/v1/": {}},
                "credsStore": "desktop",
            },
            indent="\t",
        ),
        auth,
        '"credsStore": "desktop"',
    )
    p = pw()
    add(
        F,
        "docker_run_e_postgres_password",
        f"docker run -d --name pg -e POSTGRES_PASSWORD='{p}' -p 5432:5432 postgres:16-alpine",
        p,
        "postgres:16-alpine",
    )
    t = "dckr_pat_" + rs(27, B64U)
    add(
        F,
        "docker_login_dockerhub_pat",
        lines(
            f"$ docker login -u acmebot -p {t}",
            "WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
            "Login Succeeded",
        ),
        t,
        "Login Succeeded",
    )
    p = pw()
    add(
        F,
        "compose_environment_mysql",
        lines(
            "services:",
            "  db:",
            "    image: mysql:8.4",
            "    environment:",
            f'      MYSQL_ROOT_PASSWORD: "{p}"',
            "      MYSQL_DATABASE: app",
        ),
        p,
        "image: mysql:8.4",
    )
    p = pw()
    add(
        F,
        "helm_install_set_password",
        f"helm install pg bitnami/postgresql -n data --set auth.postgresPassword='{p}' --set primary.persistence.size=50Gi",
        p,
        "helm install pg bitnami/postgresql",
    )
    p = pw()
    add(
        F,
        "helm_values_yaml_password",
        lines(
            "# values-prod.yaml",
            "redis:",
            "  auth:",
            "    enabled: true",
            f'    password: "{p}"',
            "  replica:",
            "    replicaCount: 3",
        ),
        p,
        "# values-prod.yaml",
    )
    p = pw()
    add(
        F,
        "k8s_secret_data_base64",
        lines(
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            "  name: db-credentials",
            "type: Opaque",
            "data:",
            "  username: " + enc64(b"app"),
            "  password: " + enc64(p.encode()),
        ),
        enc64(p.encode()),
        "name: db-credentials",
    )
    t = "sk_live_51" + rs(96)
    add(
        F,
        "k8s_secret_string_data",
        lines(
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            "  name: stripe",
            "  namespace: payments",
            "stringData:",
            f"  STRIPE_SECRET_KEY: {t}",
        ),
        t,
        "namespace: payments",
    )
    t = jwt(
        {
            "iss": "kubernetes/serviceaccount",
            "kubernetes.io/serviceaccount/namespace": "ci",
            "kubernetes.io/serviceaccount/secret.name": "deployer-token-" + rs(5, ANL),
            "kubernetes.io/serviceaccount/service-account.name": "deployer",
            "sub": "system:serviceaccount:ci:deployer",
        },
        alg="RS256",
        kid=b64u(32),
    )
    add(
        F,
        "kubeconfig_user_token",
        lines(
            "users:",
            "- name: deployer",
            "  user:",
            f"    token: {t}",
            "contexts:",
            "- context:",
            "    cluster: prod",
            "    user: deployer",
        ),
        t,
        "- name: deployer",
    )
    key_pem, _ = pem("EC PRIVATE KEY", ec_sec1_der())
    ckd = enc64((key_pem + "\n").encode())
    add(
        F,
        "kubeconfig_client_key_data",
        lines(
            "users:",
            "- name: kind-dev",
            "  user:",
            f"    client-certificate-data: {b64(420)}",
            f"    client-key-data: {ckd}",
        ),
        ckd,
        "- name: kind-dev",
    )
    p = pw()
    add(
        F,
        "kubectl_create_secret_from_literal",
        f"kubectl -n api create secret generic api-secrets --from-literal=DB_PASSWORD='{p}' --from-literal=LOG_LEVEL=info",
        p,
        "kubectl -n api create secret generic api-secrets",
    )
    t = npm_tok()
    add(
        F,
        "docker_build_arg_npm_token",
        f"docker build --build-arg NPM_TOKEN={t} -t acme/web:dev .",
        t,
        "docker build --build-arg NPM_TOKEN=",
    )
    t = "sk-proj-" + rs(140, B64U)
    add(
        F,
        "dockerfile_env_api_key",
        lines(
            "FROM python:3.12-slim",
            "WORKDIR /app",
            f"ENV OPENAI_API_KEY={t}",
            "COPY . .",
            'CMD ["python", "main.py"]',
        ),
        t,
        "FROM python:3.12-slim",
    )
    dcj = enc64(
        json.dumps(
            {"auths": {"ghcr.io": {"username": "acme-bot", "password": ghp(), "auth": b64(40)}}}
        ).encode()
    )
    add(
        F,
        "k8s_dockerconfigjson_secret",
        lines(
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            "  name: ghcr-pull",
            "type: kubernetes.io/dockerconfigjson",
            "data:",
            f"  .dockerconfigjson: {dcj}",
        ),
        dcj,
        "type: kubernetes.io/dockerconfigjson",
    )
    p = pw()
    auth = enc64(f"dana:{p}".encode())
    add(
        F,
        "podman_auth_json",
        lines(
            "$ cat ${XDG_RUNTIME_DIR}/containers/auth.json",
            json.dumps({"auths": {"quay.io": {"auth": auth}}}, indent=2),
        ),
        auth,
        "containers/auth.json",
    )
    t = rs(32)
    add(
        F,
        "harbor_robot_docker_login",
        f"echo '{t}' | docker login harbor.acme.io -u 'robot$ci+push' --password-stdin",
        t,
        "docker login harbor.acme.io",
    )
    tok = "K10" + hx(64) + "::server:" + hx(32)
    add(
        F,
        "k3s_join_token",
        f"curl -sfL https://get.k3s.io | K3S_URL=https://10.0.0.10:6443 K3S_TOKEN={tok} sh -",
        tok,
        "https://get.k3s.io",
    )
    tok = rs(6, ANL) + "." + rs(16, ANL)
    add(
        F,
        "kubeadm_join_token",
        f"kubeadm join 10.0.0.10:6443 --token {tok} --discovery-token-ca-cert-hash sha256:{hx(64)}",
        tok,
        "kubeadm join 10.0.0.10:6443",
    )
    key_pem, _ = pem("PRIVATE KEY", ec_pkcs8_der())
    tk = enc64((key_pem + "\n").encode())
    add(
        F,
        "k8s_tls_secret_key_base64",
        lines(
            "apiVersion: v1",
            "kind: Secret",
            "metadata:",
            "  name: api-tls",
            "type: kubernetes.io/tls",
            "data:",
            f"  tls.crt: {b64(600)}",
            f"  tls.key: {tk}",
        ),
        tk,
        "type: kubernetes.io/tls",
    )
    tok = "token-" + rs(5, ANL) + ":" + rs(54, ANL)
    add(
        F,
        "rancher_api_token",
        f"rancher login https://rancher.acme.io/v3 --token {tok} --context c-m-{rs(8, ANL)}:p-{rs(5, ANL)}",
        tok,
        "rancher login",
    )
    p = pw()
    add(
        F,
        "docker_secret_create_echo",
        f"printf '%s' '{p}' | docker secret create pg_password -",
        p,
        "docker secret create pg_password -",
    )


def _registries() -> None:
    F = "package_registry"
    t = npm_tok()
    add(
        F,
        "npmrc_authtoken",
        lines(
            "registry=https://registry.npmjs.org/",
            f"//registry.npmjs.org/:_authToken={t}",
            "save-exact=true",
        ),
        t,
        "//registry.npmjs.org/:_authToken=",
    )
    p = pw()
    b = enc64(p.encode())
    add(
        F,
        "npmrc_password_base64",
        lines(
            "@acme:registry=https://nexus.acme.io/repository/npm-private/",
            "//nexus.acme.io/repository/npm-private/:username=ci",
            f"//nexus.acme.io/repository/npm-private/:_password={b}",
            "//nexus.acme.io/repository/npm-private/:always-auth=true",
        ),
        b,
        "@acme:registry=",
    )
    b = enc64(f"deployer:{pw()}".encode())
    add(
        F,
        "npmrc_legacy_auth",
        lines(f"_auth={b}", "email=ci@acme.io", "always-auth=true"),
        b,
        "always-auth=true",
    )
    t = npm_tok()
    add(
        F,
        "yarnrc_yml_npm_auth_token",
        lines(
            "npmScopes:",
            "  acme:",
            '    npmRegistryServer: "https://registry.npmjs.org"',
            f'    npmAuthToken: "{t}"',
            "yarnPath: .yarn/releases/yarn-4.3.0.cjs",
        ),
        t,
        "npmScopes:",
    )
    t = ghp()
    add(
        F,
        "pnpm_config_set_authtoken",
        f"pnpm config set //npm.pkg.github.com/:_authToken {t}",
        t,
        "pnpm config set //npm.pkg.github.com/:_authToken",
    )
    t = rs(20, B64U)
    add(
        F,
        "pip_conf_extra_index_url",
        lines(
            "[global]",
            "timeout = 60",
            f"extra-index-url = https://__token__:{t}@gitlab.acme.io/api/v4/projects/52/packages/pypi/simple",
        ),
        t,
        "extra-index-url = https://__token__:",
    )
    t = (
        enc64(
            json.dumps(
                {"ver": 1, "isi": False, "enc": "A256GCM", "tag": b64(16), "exp": ts()}
            ).encode()
        )
        + "."
        + b64u(300)
    )
    add(
        F,
        "pip_codeartifact_index_url",
        f"pip install --index-url https://aws:{t}@acme-{num(12)}.d.codeartifact.eu-west-1.amazonaws.com/pypi/internal/simple/ acme-core",
        t,
        "pip install --index-url",
    )
    t = pypi_tok()
    add(
        F,
        "poetry_config_pypi_token",
        f"poetry config pypi-token.pypi {t}",
        t,
        "poetry config pypi-token.pypi",
    )
    p = pw()
    add(
        F,
        "poetry_http_basic",
        f"poetry config http-basic.acme ci '{p}'",
        p,
        "poetry config http-basic.acme ci",
    )
    t = pypi_tok()
    add(
        F,
        "twine_upload_p",
        f"twine upload -u __token__ -p {t} dist/*",
        t,
        "twine upload -u __token__",
    )
    t = pypi_tok()
    add(
        F,
        "pypirc_password",
        lines(
            "[distutils]",
            "index-servers =",
            "    pypi",
            "",
            "[pypi]",
            "username = __token__",
            f"password = {t}",
        ),
        t,
        "username = __token__",
    )
    t = "cio" + rs(32)
    add(
        F,
        "cargo_credentials_toml",
        lines("# ~/.cargo/credentials.toml", "[registry]", f'token = "{t}"'),
        t,
        "[registry]",
    )
    t = rs(40, B64U)
    add(
        F,
        "cargo_registry_token_env",
        f"CARGO_REGISTRIES_ACME_TOKEN='Bearer {t}' cargo publish --registry acme",
        t,
        "cargo publish --registry acme",
    )
    t = "rubygems_" + hx(48)
    add(F, "gem_credentials", lines("---", f":rubygems_api_key: {t}"), t, ":rubygems_api_key: ")
    t = rs(40)
    add(
        F,
        "bundler_env_gem_server",
        f"BUNDLE_GEMS__CONTRIBSYS__COM=a1b2c3d4:{t} bundle install",
        t,
        "bundle install",
    )
    t = "oy2" + rs(43, ANL)
    add(
        F,
        "nuget_push_api_key",
        f"dotnet nuget push bin/Release/Acme.Core.2.4.0.nupkg --api-key {t} --source https://api.nuget.org/v3/index.json",
        t,
        "dotnet nuget push",
    )
    t = rs(52, B32L)
    add(
        F,
        "nuget_config_cleartextpassword",
        lines(
            "<packageSourceCredentials>",
            "  <AcmeFeed>",
            '    <add key="Username" value="ci" />',
            f'    <add key="ClearTextPassword" value="{t}" />',
            "  </AcmeFeed>",
            "</packageSourceCredentials>",
        ),
        t,
        "<packageSourceCredentials>",
    )
    p = pw()
    add(
        F,
        "maven_settings_server_password",
        lines(
            "<servers>",
            "  <server>",
            "    <id>ossrh</id>",
            "    <username>acme-release</username>",
            f"    <password>{p}</password>",
            "  </server>",
            "</servers>",
        ),
        p,
        "<id>ossrh</id>",
    )
    p = pw_plain()
    add(
        F,
        "gradle_properties_signing",
        lines(
            "signing.keyId=" + HX(8),
            f"signing.password={p}",
            "signing.secretKeyRingFile=/home/dana/.gnupg/secring.gpg",
        ),
        p,
        "signing.password=",
    )
    t = rs(36)
    add(
        F,
        "gradle_properties_maven_central",
        lines("mavenCentralUsername=" + rs(8, AN), f"mavenCentralPassword={t}"),
        t,
        "mavenCentralPassword=",
    )
    t = ghp("ghp_")
    add(
        F,
        "composer_auth_json_github_oauth",
        json.dumps({"github-oauth": {"github.com": t}, "http-basic": {}}, indent=4),
        t,
        '"github-oauth"',
    )
    p = pw()
    add(
        F,
        "composer_auth_json_http_basic",
        json.dumps(
            {"http-basic": {"repo.packagist.com": {"username": "token", "password": p}}}, indent=4
        ),
        p,
        '"repo.packagist.com"',
    )
    t = rs(32)
    add(
        F,
        "goproxy_with_credentials",
        f"export GOPROXY=https://ci:{t}@artifactory.acme.io/artifactory/api/go/go-virtual,direct",
        t,
        "export GOPROXY=",
    )
    t = "AKCp" + rs(69)
    add(
        F,
        "jfrog_api_key_header",
        f'curl -H "X-JFrog-Art-Api: {t}" -T app.tar.gz https://acme.jfrog.io/artifactory/generic-local/app.tar.gz',
        t,
        "X-JFrog-Art-Api",
    )
    t = enc64(f"reftkn:01:{ts()}:{rs(27)}".encode())
    add(
        F,
        "jfrog_cli_access_token",
        f"jf c add acme --url https://acme.jfrog.io --access-token {t} --interactive=false",
        t,
        "jf c add acme",
    )
    k = hx(32)
    add(
        F,
        "hex_organization_auth_key",
        f"mix hex.organization auth acme --key {k}",
        k,
        "mix hex.organization auth acme",
    )
    p = pw()
    add(
        F,
        "helm_repo_add_password",
        f"helm repo add acme https://charts.acme.io --username ci --password '{p}'",
        p,
        "helm repo add acme",
    )
    p = pw()
    add(
        F,
        "conan_remote_login_p",
        f"conan remote login acme ci -p '{p}'",
        p,
        "conan remote login acme ci",
    )


def _vcs() -> None:
    F = "vcs_token"
    t = ghp()
    add(
        F,
        "github_pat_in_remote_url",
        f"git remote set-url origin https://{t}@github.com/acme/infra.git",
        t,
        "git remote set-url origin",
    )
    t = gh_fine()
    add(F, "github_fine_grained_pat_env", f"export GITHUB_TOKEN={t}", t, "export GITHUB_TOKEN=")
    t = "ghr_" + rs(76)
    add(
        F,
        "github_refresh_token_json",
        json.dumps(
            {
                "access_token": "ghu_" + rs(36),
                "expires_in": 28800,
                "refresh_token": t,
                "refresh_token_expires_in": 15811200,
                "token_type": "bearer",
                "scope": "",
            }
        ),
        t,
        '"refresh_token_expires_in"',
    )
    t = glpat()
    add(
        F,
        "gitlab_private_token_header",
        f'curl --header "PRIVATE-TOKEN: {t}" "https://gitlab.com/api/v4/projects?membership=true"',
        t,
        "PRIVATE-TOKEN",
    )
    t = "ATBB" + rs(32) + HX(8)
    add(
        F,
        "bitbucket_app_password_clone",
        f"git clone https://dana:{t}@bitbucket.org/acme/legacy-monolith.git",
        t,
        "bitbucket.org/acme/legacy-monolith.git",
    )
    t = "ATCTT3xFfGN0" + rs(180, B64U) + "=" + HX(8)
    add(
        F,
        "bitbucket_access_token_bearer",
        f"curl -H 'Authorization: Bearer {t}' https://api.bitbucket.org/2.0/repositories/acme",
        t,
        "api.bitbucket.org/2.0/repositories/acme",
    )
    t = rs(52, B32L)
    add(
        F,
        "azure_devops_pat_git_url",
        f"git clone https://pat:{t}@dev.azure.com/acme/Platform/_git/platform-api",
        t,
        "dev.azure.com/acme",
    )
    t = rs(52, B32L)
    add(
        F,
        "azure_devops_pat_login",
        f"echo {t} | az devops login --organization https://dev.azure.com/acme",
        t,
        "az devops login",
    )
    t = hx(40)
    add(
        F,
        "gitea_tea_config",
        lines(
            "logins:",
            "- name: gitea.acme.io",
            "  url: https://gitea.acme.io",
            f"  token: {t}",
            "  default: true",
        ),
        t,
        "url: https://gitea.acme.io",
    )
    t = "gho_" + rs(36)
    add(
        F,
        "gh_hosts_yml_oauth_token",
        lines(
            "github.com:",
            "    users:",
            "        dana:",
            f"            oauth_token: {t}",
            "    git_protocol: ssh",
            "    user: dana",
        ),
        t,
        "git_protocol: ssh",
    )
    t = "1//0" + rs(80, B64U)
    add(
        F,
        "gitcookies_googlesource",
        f".googlesource.com\tTRUE\t/\tTRUE\t2147483647\to\tgit-dana.acme.com={t}",
        t,
        ".googlesource.com",
    )
    t = "ghp_" + rs(36)
    add(
        F,
        "git_credentials_store_line",
        f"$ cat ~/.git-credentials\nhttps://dana:{t}@github.com",
        t,
        "cat ~/.git-credentials",
    )


def _llm() -> None:
    F = "llm_api_key"
    t = sk_proj()
    add(F, "openai_project_key_python", f'client = OpenAI(api_key="{t}")', t, "client = OpenAI(")
    t = "sk-" + rs(20) + "T3BlbkFJ" + rs(20)
    add(
        F,
        "openai_legacy_key_dotenv",
        f"OPENAI_API_KEY={t}\nOPENAI_ORG_ID=org-{rs(24)}",
        t,
        "OPENAI_API_KEY=",
    )
    t = "sk-svcacct-" + rs(74, B64U) + "T3BlbkFJ" + rs(74, B64U)
    add(
        F,
        "openai_service_account_ts",
        f'const openai = new OpenAI({{ apiKey: "{t}" }});',
        t,
        "new OpenAI(",
    )
    t = sk_ant()
    add(
        F,
        "anthropic_key_ts",
        lines(
            "import Anthropic from '@anthropic-ai/sdk';",
            "",
            f"const anthropic = new Anthropic({{ apiKey: '{t}' }});",
        ),
        t,
        "new Anthropic(",
    )
    t = sk_ant("admin01")
    add(
        F,
        "anthropic_admin_key_curl",
        f'curl https://api.anthropic.com/v1/organizations/api_keys -H "x-api-key: {t}" -H "anthropic-version: 2023-06-01"',
        t,
        "api.anthropic.com/v1/organizations/api_keys",
    )
    t = sk_ant()
    add(
        F,
        "anthropic_key_env_export",
        f"export ANTHROPIC_API_KEY={t}",
        t,
        "export ANTHROPIC_API_KEY=",
    )
    t = rs(32)
    add(F, "mistral_key_python", f'client = Mistral(api_key="{t}")', t, "client = Mistral(")
    t = rs(40)
    add(
        F,
        "cohere_key_js",
        f'const cohere = new CohereClient({{ token: "{t}" }});',
        t,
        "new CohereClient(",
    )
    t = "gsk_" + rs(52)
    add(F, "groq_key_env", f"GROQ_API_KEY={t}", t, "GROQ_API_KEY=")
    t = "hf_" + rs(34, LOW + UP)
    add(
        F,
        "huggingface_cli_login_token",
        f"huggingface-cli login --token {t} --add-to-git-credential",
        t,
        "huggingface-cli login --token",
    )
    t = "r8_" + rs(37)
    add(
        F,
        "replicate_token_env",
        f"REPLICATE_API_TOKEN={t} python predict.py",
        t,
        "python predict.py",
    )
    t = "pplx-" + rs(48)
    add(
        F,
        "perplexity_kotlin_header",
        f'val req = Request.Builder().url(url).addHeader("Authorization", "Bearer {t}").build()',
        t,
        "Request.Builder()",
    )
    t = "xai-" + rs(80)
    add(
        F,
        "xai_swift_header",
        f'request.setValue("Bearer {t}", forHTTPHeaderField: "Authorization")',
        t,
        "forHTTPHeaderField",
    )
    t = hx(64)
    add(F, "together_key_python", f'together.api_key = "{t}"', t, "together.api_key = ")
    t = "sk-" + hx(32)
    add(
        F,
        "deepseek_key_curl",
        f'curl https://api.deepseek.com/chat/completions -H "Authorization: Bearer {t}" -d @body.json',
        t,
        "api.deepseek.com/chat/completions",
    )
    t = "sk-or-v1-" + hx(64)
    add(
        F,
        "openrouter_csharp_httpclient",
        f'http.DefaultRequestHeaders.Authorization = new AuthenticationHeaderValue("Bearer", "{t}");',
        t,
        "AuthenticationHeaderValue(",
    )
    t = "fw_" + rs(24)
    add(F, "fireworks_key_env", f"FIREWORKS_API_KEY={t}", t, "FIREWORKS_API_KEY=")
    t = "pa-" + rs(43, B64U)
    add(
        F,
        "voyage_key_elixir",
        f'config :my_app, :voyage, api_key: "{t}"',
        t,
        "config :my_app, :voyage",
    )
    t = "pcsk_" + rs(6) + "_" + rs(60)
    add(F, "pinecone_key_python", f'pc = Pinecone(api_key="{t}")', t, "pc = Pinecone(")
    t = "lsv2_pt_" + hx(32) + "_" + hx(10)
    add(
        F,
        "langsmith_key_env",
        lines("LANGCHAIN_TRACING_V2=true", f"LANGCHAIN_API_KEY={t}"),
        t,
        "LANGCHAIN_API_KEY=",
    )
    t = hx(40)
    add(
        F,
        "wandb_login_key",
        f"$ wandb login {t}\nwandb: Appending key for api.wandb.ai to your netrc file: /root/.netrc",
        t,
        "wandb login",
    )
    t = "sk_" + hx(48)
    add(
        F,
        "elevenlabs_header_go",
        f'req.Header.Set("xi-api-key", "{t}")',
        t,
        'req.Header.Set("xi-api-key"',
    )
    t = hx(32)
    add(F, "assemblyai_php", f"$client = new AssemblyAI\\Client('{t}');", t, "AssemblyAI\\Client(")
    t = hx(40)
    add(
        F,
        "deepgram_java_header",
        f'conn.setRequestProperty("Authorization", "Token {t}");',
        t,
        "conn.setRequestProperty(",
    )
    t = "AIza" + rs(35, B64U)
    add(
        F, "gemini_key_rust", f'let client = gemini::Client::new("{t}");', t, "gemini::Client::new("
    )
    t = "jina_" + hx(32) + rs(28)
    add(F, "jina_key_ruby", f'JINA_API_KEY = "{t}".freeze', t, "JINA_API_KEY = ")


def _saas() -> None:
    F = "saas_api_key"
    t = "ATATT3xFfGF0" + rs(180, B64U) + "=" + HX(8)
    add(
        F,
        "atlassian_token_python_jira",
        f'jira = JIRA(server="https://acme.atlassian.net", basic_auth=("dana@acme.io", "{t}"))',
        t,
        "jira = JIRA(",
    )
    t = "ntn_" + num(11) + rs(35)
    add(F, "notion_token_js", f"const notion = new Client({{ auth: '{t}' }});", t, "new Client(")
    t = "secret_" + rs(43)
    add(F, "notion_legacy_secret_env", f"NOTION_TOKEN={t}", t, "NOTION_TOKEN=")
    t = "lin_api_" + rs(40)
    add(
        F,
        "linear_key_ts_header",
        f"const res = await fetch('https://api.linear.app/graphql', {{ headers: {{ Authorization: '{t}' }}, method: 'POST', body }});",
        t,
        "api.linear.app/graphql",
    )
    t = "pat" + rs(14) + "." + hx(64)
    add(F, "airtable_pat_ruby", f'Airrecord.api_key = "{t}"', t, "Airrecord.api_key = ")
    t = f"2/{num(16)}/{num(16)}:{hx(32)}"
    add(
        F,
        "asana_pat_go",
        f'client := asana.NewClient(asana.WithToken("{t}"))',
        t,
        "asana.NewClient(",
    )
    t = "figd_" + rs(40, B64U)
    add(
        F,
        "figma_token_curl",
        f"curl -H 'X-Figma-Token: {t}' https://api.figma.com/v1/files/{rs(22)}",
        t,
        "X-Figma-Token",
    )
    t = "sl." + rs(135, B64U)
    add(
        F,
        "dropbox_token_swift",
        f'let client = DropboxClient(accessToken: "{t}")',
        t,
        "DropboxClient(accessToken:",
    )
    t = "dapi" + hx(32)
    add(
        F,
        "databricks_cfg_token",
        lines(
            "[DEFAULT]",
            f"host  = https://adb-{num(16)}.{R.randint(1, 19)}.azuredatabricks.net",
            f"token = {t}",
        ),
        t,
        "[DEFAULT]",
    )
    t = f"PMAK-{hx(24)}-{hx(34)}"
    add(
        F,
        "postman_key_newman",
        f'newman run "https://api.getpostman.com/collections/{uuid4()}?apikey={t}"',
        t,
        "newman run",
    )
    t = "pat-na1-" + uuid4()
    add(
        F,
        "hubspot_pat_php",
        f"$hubspot = \\HubSpot\\Factory::createWithAccessToken('{t}');",
        t,
        "createWithAccessToken(",
    )
    t = "CFPAT-" + rs(43, B64U)
    add(
        F,
        "contentful_cma_token_env",
        f"CONTENTFUL_MANAGEMENT_TOKEN={t}",
        t,
        "CONTENTFUL_MANAGEMENT_TOKEN=",
    )
    t = rs(40)
    add(
        F,
        "zendesk_token_curl_u",
        f"curl https://acme.zendesk.com/api/v2/tickets.json -u dana@acme.io/token:{t}",
        t,
        "acme.zendesk.com",
    )
    t = rs(27, B64U)
    add(
        F,
        "cloudinary_url_env",
        f"CLOUDINARY_URL=cloudinary://{num(15)}:{t}@acme-media",
        t,
        "CLOUDINARY_URL=",
    )
    t = hx(30)
    add(
        F,
        "plaid_secret_kotlin",
        f'val plaid = PlaidClient(clientId = "{hx(24)}", secret = "{t}", env = PlaidEnv.PRODUCTION)',
        t,
        "PlaidClient(",
    )
    t = rs(30, ANL)
    add(
        F,
        "twitch_client_secret_env",
        f"TWITCH_CLIENT_ID={rs(30, ANL)}\nTWITCH_CLIENT_SECRET={t}",
        t,
        "TWITCH_CLIENT_SECRET=",
    )
    t = enc64(f"tok:{uuid4()}:1:0".encode())
    add(
        F,
        "intercom_token_python",
        f'intercom = Client(personal_access_token="{t}")',
        t,
        "personal_access_token=",
    )
    t = "tfp_" + rs(44, B64U) + "_" + rs(14)
    add(F, "typeform_token_env", f"TYPEFORM_TOKEN={t}", t, "TYPEFORM_TOKEN=")
    t = "sk" + rs(180)
    add(
        F,
        "sanity_write_token_ts",
        f"export const client = createClient({{ projectId: '{rs(8, ANL)}', dataset: 'production', token: '{t}', useCdn: false }})",
        t,
        "createClient(",
    )
    t = "ATTA" + hx(64) + HX(8)
    add(
        F,
        "trello_token_query",
        f"curl 'https://api.trello.com/1/members/me/boards?key={hx(32)}&token={t}'",
        t,
        "api.trello.com/1/members/me",
    )
    t = "pk_" + num(8) + "_" + rs(32, ANU)
    add(
        F,
        "clickup_personal_token",
        f'headers = {{"Authorization": "{t}"}}  # ClickUp personal token',
        t,
        "# ClickUp personal token",
    )
    t = rs(32, B64U)
    add(F, "fastly_api_token_cli", f"fastly service list --token {t}", t, "fastly service list")
    t = b64(32)
    add(
        F,
        "akamai_edgerc",
        lines(
            "[default]",
            f"client_secret = {t}",
            f"host = akab-{rs(16, ANL)}-{rs(16, ANL)}.luna.akamaiapis.net",
            f"access_token = akab-{rs(16, ANL)}-{rs(16, ANL)}",
            f"client_token = akab-{rs(16, ANL)}-{rs(16, ANL)}",
        ),
        t,
        "luna.akamaiapis.net",
    )
    t = "00D" + rs(15) + "!" + rs(96, AN + "._")
    add(
        F,
        "salesforce_sf_org_display",
        lines(
            "$ sf org display --target-org prod",
            "KEY              VALUE",
            "─────────────────────────────────────",
            f"Access Token     {t}",
            "Api Version      61.0",
            "Instance Url     https://acme.my.salesforce.com",
        ),
        t,
        "Instance Url     https://acme.my.salesforce.com",
    )


def _messaging() -> None:
    F = "messaging_webhook"
    t = slack_tok("xoxb")
    add(F, "slack_bot_token_python", f'client = WebClient(token="{t}")', t, "client = WebClient(")
    t = slack_tok("xoxp")
    add(F, "slack_user_token_env", f"SLACK_USER_TOKEN={t}", t, "SLACK_USER_TOKEN=")
    t = f"xapp-1-A{rs(10, ANU)}-{num(13)}-{hx(64)}"
    add(
        F,
        "slack_app_level_token",
        f"SLACK_APP_TOKEN={t} node socket-mode.js",
        t,
        "node socket-mode.js",
    )
    url = f"https://hooks.slack.com/services/T{rs(10, ANU)}/B{rs(10, ANU)}/{rs(24)}"
    add(
        F,
        "slack_incoming_webhook_curl",
        f"curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"deploy finished\"}}' {url}",
        url,
        "deploy finished",
    )
    t = discord_bot()
    add(F, "discord_bot_token_js", f"client.login('{t}');", t, "client.login(")
    url = f"https://discord.com/api/webhooks/{num(19)}/{rs(68, B64U)}"
    add(F, "discord_webhook_env", f"DISCORD_WEBHOOK_URL={url}", url, "DISCORD_WEBHOOK_URL=")
    t = telegram_bot()
    add(
        F,
        "telegram_bot_api_url",
        f'curl -s "https://api.telegram.org/bot{t}/sendMessage" -d chat_id=-100{num(10)} -d text="build ok"',
        t,
        "/sendMessage",
    )
    url = (
        f"https://acme.webhook.office.com/webhookb2/{uuid4()}@{uuid4()}/IncomingWebhook/{hx(32)}/"
        f"{uuid4()}/V2{rs(45, B64U)}"
    )
    add(F, "teams_incoming_webhook", f"TEAMS_WEBHOOK_URL={url}", url, "TEAMS_WEBHOOK_URL=")
    t = hx(32)
    add(
        F,
        "twilio_auth_token_ruby",
        f"@client = Twilio::REST::Client.new('AC{hx(32)}', '{t}')",
        t,
        "Twilio::REST::Client.new(",
    )
    t = rs(32)
    add(
        F,
        "twilio_api_key_secret_env",
        f"TWILIO_API_KEY=SK{hx(32)}\nTWILIO_API_SECRET={t}",
        t,
        "TWILIO_API_SECRET=",
    )
    t = "SG." + rs(22, B64U) + "." + rs(43, B64U)
    add(F, "sendgrid_key_php", f"$sendgrid = new \\SendGrid('{t}');", t, "new \\SendGrid(")
    t = "key-" + hx(32)
    add(
        F,
        "mailgun_legacy_key_curl",
        f"curl -s --user 'api:{t}' https://api.mailgun.net/v3/mg.acme.io/messages -F from='ops@acme.io' -F to=dana@acme.io",
        t,
        "api.mailgun.net/v3/mg.acme.io/messages",
    )
    t = mailgun_key()
    add(
        F,
        "mailgun_key_env",
        f"MAILGUN_API_KEY={t}\nMAILGUN_DOMAIN=mg.acme.io",
        t,
        "MAILGUN_API_KEY=",
    )
    t = uuid4()
    add(
        F,
        "postmark_server_token_header",
        f'curl "https://api.postmarkapp.com/email" -H "X-Postmark-Server-Token: {t}" -d @mail.json',
        t,
        "X-Postmark-Server-Token",
    )
    t = hx(20)
    add(
        F,
        "pusher_secret_elixir",
        lines(
            "config :pusher,",
            f'  app_id: "{num(7)}",',
            f'  key: "{hx(20)}",',
            f'  secret: "{t}",',
            '  cluster: "eu"',
        ),
        t,
        "config :pusher,",
    )
    t = f"{rs(6)}.{rs(6)}:{rs(43, B64U)}"
    add(F, "ably_key_swift", f'let client = ARTRealtime(key: "{t}")', t, "ARTRealtime(key:")
    t = hx(32) + "-us" + str(R.randint(1, 21))
    add(
        F,
        "mailchimp_key_python",
        f'client.set_config({{"api_key": "{t}", "server": "us{R.randint(1, 21)}"}})',
        t,
        "client.set_config(",
    )
    t = "xkeysib-" + hx(64) + "-" + rs(16)
    add(F, "brevo_key_env", f"BREVO_API_KEY={t}", t, "BREVO_API_KEY=")
    t = "re_" + rs(8) + "_" + rs(24)
    add(F, "resend_key_ts", f"const resend = new Resend('{t}');", t, "new Resend(")
    t = rs(16)
    add(
        F,
        "vonage_secret_java",
        f'VonageClient client = VonageClient.builder().apiKey("{hx(8)}").apiSecret("{t}").build();',
        t,
        "VonageClient.builder()",
    )
    t = rs(32)
    add(
        F,
        "zuliprc_key",
        lines(
            "[api]",
            "email=deploy-bot@acme.zulipchat.com",
            f"key={t}",
            "site=https://acme.zulipchat.com",
        ),
        t,
        "site=https://acme.zulipchat.com",
    )
    t = "syt_" + enc64u(b"dana") + "_" + rs(20) + "_" + rs(6)
    add(F, "matrix_access_token", f"MATRIX_ACCESS_TOKEN={t}", t, "MATRIX_ACCESS_TOKEN=")


def _payment() -> None:
    F = "payment"
    t = stripe("sk_live_")
    add(F, "stripe_secret_live_ruby", f"Stripe.api_key = '{t}'", t, "Stripe.api_key = ")
    t = stripe("rk_live_")
    add(F, "stripe_restricted_env", f"STRIPE_RESTRICTED_KEY={t}", t, "STRIPE_RESTRICTED_KEY=")
    t = "whsec_" + rs(32)
    add(
        F,
        "stripe_webhook_secret_go",
        f'event, err := webhook.ConstructEvent(payload, r.Header.Get("Stripe-Signature"), "{t}")',
        t,
        "webhook.ConstructEvent(",
    )
    t = stripe("sk_test_")
    add(F, "stripe_secret_test_python", f'stripe.api_key = "{t}"', t, "stripe.api_key = ")
    t = "whsec_" + hx(64)
    add(
        F,
        "stripe_cli_listen_output",
        lines(
            "$ stripe listen --forward-to localhost:4242/webhook",
            f"> Ready! You are using Stripe API Version [2024-06-20]. Your webhook signing secret is {t} (^C to quit)",
        ),
        t,
        "stripe listen --forward-to localhost:4242/webhook",
    )
    t = "E" + rs(79, B64U)
    add(
        F,
        "paypal_client_secret_kotlin",
        f'val env = LiveEnvironment("A{rs(79, B64U)}", "{t}")',
        t,
        "LiveEnvironment(",
    )
    t = hx(32)
    add(
        F,
        "braintree_private_key_php",
        lines(
            "$gateway = new Braintree\\Gateway([",
            "    'environment' => 'production',",
            f"    'merchantId' => '{rs(16, ANL)}',",
            f"    'publicKey' => '{rs(16, ANL)}',",
            f"    'privateKey' => '{t}'",
            "]);",
        ),
        t,
        "new Braintree\\Gateway([",
    )
    t = f"access_token$production${rs(16, ANL)}${hx(32)}"
    add(
        F,
        "braintree_access_token_env",
        f"BRAINTREE_ACCESS_TOKEN='{t}'",
        t,
        "BRAINTREE_ACCESS_TOKEN=",
    )
    t = "AQE" + rs(29, AN) + "=-" + rs(43, AN + "+/") + "=-" + rs(16, AN)
    add(
        F,
        "adyen_api_key_csharp",
        f'var config = new Config {{ XApiKey = "{t}", Environment = Environment.Live }};',
        t,
        "new Config {",
    )
    t = "EAAA" + rs(60, B64U)
    add(
        F,
        "square_access_token_node",
        f"const client = new Client({{ accessToken: '{t}', environment: Environment.Production }});",
        t,
        "Environment.Production",
    )
    t = "sq0csp-" + rs(43, B64U)
    add(
        F,
        "square_oauth_secret_env",
        f"SQUARE_APPLICATION_SECRET={t}",
        t,
        "SQUARE_APPLICATION_SECRET=",
    )
    t = rs(24)
    add(
        F,
        "razorpay_secret_python",
        f'client = razorpay.Client(auth=("rzp_live_{rs(14)}", "{t}"))',
        t,
        "razorpay.Client(",
    )
    t = "shpat_" + hx(32)
    add(
        F,
        "shopify_admin_token_header",
        f"curl -H 'X-Shopify-Access-Token: {t}' https://acme-store.myshopify.com/admin/api/2024-04/products.json",
        t,
        "X-Shopify-Access-Token",
    )
    t = "shpss_" + hx(32)
    add(F, "shopify_shared_secret_env", f"SHOPIFY_API_SECRET={t}", t, "SHOPIFY_API_SECRET=")
    t = "live_" + rs(30)
    add(F, "mollie_key_php", f"$mollie->setApiKey('{t}');", t, "setApiKey(")
    t = "sk_sbox_" + rs(26, ANL)
    add(F, "checkout_com_secret_env", f"CKO_SECRET_KEY={t}", t, "CKO_SECRET_KEY=")


def _auth() -> None:
    F = "auth_provider"
    t = rs(64, B64U)
    add(
        F,
        "auth0_client_secret_env",
        lines(
            "AUTH0_DOMAIN=acme.eu.auth0.com",
            f"AUTH0_CLIENT_ID={rs(32)}",
            f"AUTH0_CLIENT_SECRET={t}",
        ),
        t,
        "AUTH0_CLIENT_SECRET=",
    )
    t = jwt(
        {
            "iss": "https://acme.eu.auth0.com/",
            "sub": rs(32) + "@clients",
            "aud": "https://acme.eu.auth0.com/api/v2/",
            "iat": ts(),
            "exp": ts() + 86400,
            "scope": "read:users update:users",
            "gty": "client-credentials",
        },
        alg="RS256",
        kid=rs(22, B64U),
    )
    add(
        F,
        "auth0_management_token_curl",
        f"curl -H 'Authorization: Bearer {t}' https://acme.eu.auth0.com/api/v2/users?q=email:dana",
        t,
        "acme.eu.auth0.com/api/v2/users",
    )
    t = "00" + rs(40, B64U)
    add(
        F,
        "okta_ssws_header",
        f'curl -H "Authorization: SSWS {t}" "https://acme.okta.com/api/v1/users?limit=25"',
        t,
        "acme.okta.com/api/v1/users",
    )
    t = rs(52, ANL)
    add(
        F,
        "cognito_client_secret_python",
        f'resp = cognito.initiate_auth(ClientId="{rs(26, ANL)}", AuthFlow="USER_PASSWORD_AUTH", '
        f'AuthParameters=params, ClientMetadata={{}})\nCLIENT_SECRET = "{t}"',
        t,
        "cognito.initiate_auth(",
    )
    pem_text, body = escaped_pem("PRIVATE KEY", rsa_pkcs8_der())
    add(
        F,
        "firebase_admin_cert_js",
        lines(
            "admin.initializeApp({",
            "  credential: admin.credential.cert({",
            "    projectId: 'acme-prod',",
            f"    clientEmail: 'firebase-adminsdk-{rs(5, ANL)}@acme-prod.iam.gserviceaccount.com',",
            f'    privateKey: "{pem_text}",',
            "  }),",
            "});",
        ),
        body,
        "admin.credential.cert({",
    )
    t = "AAAA" + rs(7, B64U) + ":APA91b" + rs(134, B64U)
    add(
        F,
        "fcm_legacy_server_key",
        f"curl -H 'Authorization: key={t}' https://fcm.googleapis.com/fcm/send -d @msg.json",
        t,
        "fcm.googleapis.com/fcm/send",
    )
    t = jwt(
        {
            "iss": "supabase",
            "ref": rs(20, LOW),
            "role": "service_role",
            "iat": ts(),
            "exp": ts() + 315360000,
        }
    )
    add(
        F,
        "supabase_service_role_env",
        f"SUPABASE_SERVICE_ROLE_KEY={t}",
        t,
        "SUPABASE_SERVICE_ROLE_KEY=",
    )
    t = "sb_secret_" + rs(31, B64U)
    add(
        F, "supabase_secret_key_py", f'supabase = create_client(url, "{t}")', t, "create_client(url"
    )
    t = "sk_live_" + rs(46)
    add(
        F,
        "clerk_secret_key_env",
        lines(
            "NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=pk_live_" + enc64(b"clerk.acme.io$"),
            f"CLERK_SECRET_KEY={t}",
        ),
        t,
        "CLERK_SECRET_KEY=",
    )
    t = rs(32)
    add(
        F,
        "keycloak_client_secret_spring",
        lines(
            "spring.security.oauth2.client.registration.keycloak.client-id=orders-api",
            f"spring.security.oauth2.client.registration.keycloak.client-secret={t}",
        ),
        t,
        "client-id=orders-api",
    )
    p = pw()
    add(
        F,
        "keycloak_kcadm_credentials",
        f"/opt/keycloak/bin/kcadm.sh config credentials --server http://localhost:8080 --realm master --user admin --password '{p}'",
        p,
        "kcadm.sh config credentials",
    )
    rt = rs(43, B64U)
    add(
        F,
        "oauth_token_response_refresh",
        json.dumps(
            {
                "access_token": rs(43, B64U),
                "token_type": "Bearer",
                "expires_in": 3600,
                "refresh_token": rt,
                "scope": "openid profile offline_access",
            }
        ),
        rt,
        '"token_type": "Bearer"',
    )
    at = jwt(
        {
            "iss": "https://auth.acme.io/",
            "sub": uuid4(),
            "aud": "orders",
            "exp": ts(),
            "scope": "orders:write",
        },
        alg="RS256",
        kid=hx(16),
    )
    add(
        F,
        "oauth_token_response_access",
        json.dumps({"access_token": at, "token_type": "Bearer", "expires_in": 900}, indent=2),
        at,
        '"expires_in": 900',
    )
    t = "0.A" + rs(R.randint(300, 380), B64U + ".")
    add(
        F,
        "microsoft_refresh_token_msal_cache",
        json.dumps(
            {
                "RefreshToken": {
                    f"{uuid4()}.{uuid4()}-login.microsoftonline.com-refreshtoken-{uuid4()}--": {
                        "credential_type": "RefreshToken",
                        "secret": t,
                        "environment": "login.microsoftonline.com",
                    }
                }
            },
            indent=1,
        ),
        t,
        '"credential_type"',
    )
    der = rsa_pkcs8_der()
    body = enc64(der)
    add(
        F,
        "saml_python3_saml_settings",
        json.dumps(
            {
                "strict": True,
                "sp": {
                    "entityId": "https://app.acme.io/saml/metadata",
                    "x509cert": b64(700),
                    "privateKey": body,
                },
            },
            indent=2,
        ),
        body,
        '"entityId": "https://app.acme.io/saml/metadata"',
    )
    t = hx(40)
    add(
        F,
        "github_oauth_app_client_secret",
        lines(f"GITHUB_CLIENT_ID=Ov23li{rs(14)}", f"GITHUB_CLIENT_SECRET={t}"),
        t,
        "GITHUB_CLIENT_SECRET=",
    )
    t = "secret-live-" + rs(36, B64U)
    add(
        F,
        "stytch_secret_env",
        f"STYTCH_PROJECT_ID=project-live-{uuid4()}\nSTYTCH_SECRET={t}",
        t,
        "STYTCH_SECRET=",
    )
    t = rs(40)
    add(
        F,
        "duo_conf_skey",
        lines(
            "[duo]", f"ikey = DI{rs(18, ANU)}", f"skey = {t}", f"host = api-{hx(8)}.duosecurity.com"
        ),
        t,
        "duosecurity.com",
    )
    p = pw()
    add(
        F,
        "sssd_ldap_default_authtok",
        lines(
            "[domain/corp.acme.io]",
            "id_provider = ldap",
            "ldap_uri = ldaps://ldap.corp.acme.io",
            "ldap_default_bind_dn = cn=sssd,ou=svc,dc=acme,dc=io",
            f"ldap_default_authtok = {p}",
        ),
        p,
        "ldap_default_bind_dn",
    )
    t = "sk_" + rs(40)
    add(
        F,
        "workos_key_env",
        f"WORKOS_API_KEY={t}\nWORKOS_CLIENT_ID=client_{ulid()}",
        t,
        "WORKOS_API_KEY=",
    )


def _crypto() -> None:
    F = "crypto_private_key"
    text, body = pem("EC PRIVATE KEY", ec_sec1_der())
    add(F, "pem_ec_sec1_cat", "$ cat certs/server.key\n" + text, body, "$ cat certs/server.key")
    text, body = pem("PRIVATE KEY", ed25519_pkcs8_der())
    add(
        F,
        "pem_pkcs8_ed25519",
        "$ openssl genpkey -algorithm ed25519 -out signing.pem && cat signing.pem\n" + text,
        body,
        "openssl genpkey -algorithm ed25519",
    )
    text, body = pem("PRIVATE KEY", ec_pkcs8_der())
    ind = "\n".join("    " + ln for ln in text.split("\n"))
    add(
        F,
        "pem_pkcs8_in_yaml_block",
        "auth:\n  issuer: https://auth.acme.io\n  jwtSigningKey: |\n" + ind,
        body.replace("\n", "\n    "),
        "jwtSigningKey: |",
    )
    text, body = pem("RSA PRIVATE KEY", rsa_pkcs1_1024_der())
    add(F, "pem_rsa_pkcs1_legacy", text, body, "-----BEGIN RSA PRIVATE KEY-----")
    text, body = pem("ENCRYPTED PRIVATE KEY", enc_pkcs8_der())
    add(F, "pem_encrypted_pkcs8", text, body, "-----END ENCRYPTED PRIVATE KEY-----")
    text, body = openssh_ed25519("deploy@ci")
    ind = "\n".join("    " + ln for ln in text.split("\n"))
    add(
        F,
        "openssh_key_in_ansible_yaml",
        "deploy_user: deploy\ndeploy_ssh_private_key: |\n" + ind,
        body.replace("\n", "\n    "),
        "deploy_ssh_private_key: |",
    )
    text, body = openssh_ed25519("gha-deploy")
    add(
        F,
        "openssh_key_in_json_escaped",
        json.dumps({"host": "10.0.4.12", "user": "ubuntu", "ssh_private_key": text + "\n"}),
        body.replace("\n", "\\n"),
        '"user": "ubuntu"',
    )
    text, body = openssh_encrypted()
    add(F, "openssh_encrypted_key", text, body, "-----BEGIN OPENSSH PRIVATE KEY-----")
    body = enc64(rsa_pkcs8_der())
    add(F, "der_base64_env_private_key", f"JWT_PRIVATE_KEY={body}", body, "JWT_PRIVATE_KEY=")
    d = b64u(32)
    add(
        F,
        "jwk_private_ec",
        json.dumps(
            {
                "kty": "EC",
                "crv": "P-256",
                "kid": "sig-" + hx(8),
                "use": "sig",
                "x": b64u(32),
                "y": b64u(32),
                "d": d,
            }
        ),
        d,
        '"kty": "EC"',
    )
    d = b64u(32)
    add(
        F,
        "jwk_private_okp",
        json.dumps(
            {"kty": "OKP", "crv": "Ed25519", "x": b64u(32), "d": d, "alg": "EdDSA"}, indent=2
        ),
        d,
        '"crv": "Ed25519"',
    )
    d = b64u(256)
    add(
        F,
        "jwk_private_rsa_d",
        json.dumps({"kty": "RSA", "kid": uuid4(), "n": b64u(256), "e": "AQAB", "d": d}),
        d,
        '"e": "AQAB"',
    )
    p12 = enc64(
        bytes.fromhex("308209f1020103308209b706092a864886f70d010701a08209a8048209a4")
        + R.randbytes(720)
    )
    add(
        F,
        "pkcs12_base64_env",
        f"APPLE_SIGNING_CERT_P12_BASE64={p12}",
        p12,
        "APPLE_SIGNING_CERT_P12_BASE64=",
    )
    text, body = pgp_private_block()
    add(
        F,
        "gpg_exported_secret_key",
        "$ gpg --export-secret-keys --armor dana@acme.io\n" + text,
        body,
        "gpg --export-secret-keys --armor",
    )
    k = "AGE-SECRET-KEY-1" + rs(58, BECH32.upper())
    add(
        F,
        "age_keys_txt",
        lines("# created: 2024-06-11T10:22:31+02:00", f"# public key: age1{rs(58, BECH32)}", k),
        k,
        "# created: 2024-06-11T10:22:31+02:00",
    )
    line = enc64(b"EdScB2" + R.randbytes(152))
    add(
        F,
        "minisign_secret_key",
        lines("untrusted comment: minisign encrypted secret key", line),
        line,
        "untrusted comment: minisign encrypted secret key",
    )
    line = enc64(b"EdBK" + (42).to_bytes(4, "big") + R.randbytes(96))
    add(
        F,
        "signify_secret_key",
        lines("untrusted comment: signify secret key", line),
        line,
        "untrusted comment: signify secret key",
    )
    k = b64(32)
    add(
        F,
        "wireguard_private_key",
        lines(
            "[Interface]",
            f"PrivateKey = {k}",
            "Address = 10.8.0.2/24",
            "DNS = 1.1.1.1",
            "",
            "[Peer]",
            f"PublicKey = {b64(32)}",
            "Endpoint = vpn.acme.io:51820",
            "AllowedIPs = 0.0.0.0/0",
        ),
        k,
        "[Interface]",
    )
    k = base64.urlsafe_b64encode(R.randbytes(32)).decode()
    add(
        F,
        "fernet_key_python",
        f'FERNET_KEY = b"{k}"\nf = Fernet(FERNET_KEY)',
        k,
        "f = Fernet(FERNET_KEY)",
    )
    k = "0x" + hx(64)
    add(
        F,
        "eth_private_key_hardhat",
        lines(
            "networks: {",
            "  sepolia: {",
            '    url: "https://eth-sepolia.g.alchemy.com/v2/" + ALCHEMY_KEY,',
            f'    accounts: ["{k}"],',
            "  },",
            "},",
        ),
        k,
        "sepolia: {",
    )
    m = " ".join(R.choice(BIP39ISH) for _ in range(12))
    add(F, "bip39_mnemonic_env", f'MNEMONIC="{m}"', m, "MNEMONIC=")
    k = pick("KL") + rs(51, B58)
    add(
        F,
        "bitcoin_wif_importprivkey",
        f'bitcoin-cli importprivkey "{k}" "cold-wallet" false',
        k,
        "bitcoin-cli importprivkey",
    )
    arr = "[" + ",".join(str(R.randrange(256)) for _ in range(64)) + "]"
    add(
        F,
        "solana_keypair_json",
        f"$ cat ~/.config/solana/id.json\n{arr}",
        arr,
        "cat ~/.config/solana/id.json",
    )
    k = hx(64)
    add(
        F,
        "aes256_hex_key_env",
        f"DATA_ENCRYPTION_KEY={k}  # AES-256-GCM, 32 bytes",
        k,
        "DATA_ENCRYPTION_KEY=",
    )
    p = pw()
    add(
        F,
        "keytool_storepass",
        f"keytool -importkeystore -srckeystore app.p12 -srcstoretype PKCS12 -srcstorepass '{p}' -destkeystore app.jks",
        p,
        "keytool -importkeystore",
    )
    p = pw()
    add(
        F,
        "openssl_passout_pass",
        f"openssl pkcs12 -export -in cert.pem -inkey key.pem -out bundle.p12 -passout 'pass:{p}'",
        p,
        "openssl pkcs12 -export",
    )
    p = pw()
    add(
        F,
        "android_signing_config_gradle",
        lines(
            "signingConfigs {",
            "    release {",
            '        storeFile file("release.keystore")',
            f'        storePassword "{p}"',
            '        keyAlias "upload"',
            f'        keyPassword "{p}"',
            "    }",
            "}",
        ),
        p,
        'keyAlias "upload"',
    )
    pem_text, body = escaped_pem("PRIVATE KEY", ec_pkcs8_der())
    add(
        F,
        "appstore_connect_p8_fastlane_json",
        '{"key_id": "'
        + rs(10, ANU)
        + '", "issuer_id": "'
        + uuid4()
        + '", "key": "'
        + pem_text
        + '", "in_house": false}',
        body,
        '"in_house": false',
    )


def _session() -> None:
    F = "session_token"
    sid = rs(32, ANL)
    add(
        F,
        "cookie_header_django_sessionid",
        f"Cookie: csrftoken={rs(32)}; sessionid={sid}; django_language=en",
        sid,
        "django_language=en",
    )
    val = "s%3A" + rs(32, B64U) + "." + uq(b64(32).rstrip("="))
    add(F, "cookie_express_connect_sid", f"Cookie: connect.sid={val}", val, "Cookie: connect.sid=")
    val = uq(b64(150)) + "--" + uq(b64(12)) + "--" + uq(b64(16))
    add(
        F,
        "cookie_rails_session",
        f"Set-Cookie: _storefront_session={val}; path=/; secure; HttpOnly; SameSite=Lax",
        val,
        "Set-Cookie: _storefront_session=",
    )
    sid = rs(26, ANL)
    add(
        F,
        "cookie_phpsessid",
        f"curl -b 'PHPSESSID={sid}' https://admin.acme.io/wp-admin/",
        sid,
        "PHPSESSID=",
    )
    sid = HX(32)
    add(F, "cookie_jsessionid", f"Cookie: JSESSIONID={sid}; Path=/console", sid, "Path=/console")
    val = "CfDJ8" + rs(420, B64U)
    add(
        F,
        "cookie_aspnetcore_identity",
        f".AspNetCore.Identity.Application={val}",
        val,
        ".AspNetCore.Identity.Application=",
    )
    lv = uq(
        enc64(json.dumps({"iv": b64(16), "value": b64(120), "mac": hx(64), "tag": ""}).encode())
    )
    add(
        F,
        "cookie_laravel_session",
        f"Cookie: XSRF-TOKEN={uq(b64(180))}; laravel_session={lv}",
        lv,
        "laravel_session=",
    )
    t = jwt(
        {"sub": uuid4(), "email": "dana@acme.io", "iat": ts(), "exp": ts(), "scope": "admin"},
        alg="RS256",
        kid=hx(16),
    )
    add(
        F,
        "devtools_copy_as_curl_bearer",
        lines(
            "curl 'https://api.acme.io/v2/admin/users?page=1' \\",
            "  -H 'accept: application/json' \\",
            f"  -H 'authorization: Bearer {t}' \\",
            "  -H 'origin: https://app.acme.io' \\",
            "  --compressed",
        ),
        t,
        "curl 'https://api.acme.io/v2/admin/users?page=1'",
    )
    val = (
        enc64u(json.dumps({"_user_id": str(R.randint(100, 99999))}).encode())
        + "."
        + enc64u(R.randbytes(4))
        + "."
        + b64u(20)
    )
    add(
        F,
        "devtools_copy_as_curl_flask_cookie",
        lines(
            "curl 'https://internal.acme.io/dashboard' \\",
            f"  -b 'session={val}' \\",
            "  -H 'user-agent: Mozilla/5.0 (X11; Linux x86_64)'",
        ),
        val,
        "internal.acme.io/dashboard",
    )
    t = rs(40, B64U)
    add(
        F,
        "har_authorization_header",
        json.dumps(
            {
                "request": {
                    "method": "GET",
                    "url": "https://api.acme.io/v1/me",
                    "headers": [
                        {"name": "accept", "value": "*/*"},
                        {"name": "authorization", "value": f"Bearer {t}"},
                    ],
                }
            },
            indent=2,
        ),
        t,
        '"url": "https://api.acme.io/v1/me"',
    )
    jwe = "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0.." + b64u(12) + "." + b64u(260) + "." + b64u(16)
    add(
        F,
        "har_cookie_nextauth_session",
        json.dumps(
            {
                "cookies": [
                    {
                        "name": "__Secure-next-auth.session-token",
                        "value": jwe,
                        "path": "/",
                        "httpOnly": True,
                        "secure": True,
                    }
                ]
            },
            indent=2,
        ),
        jwe,
        "__Secure-next-auth.session-token",
    )
    t = rs(43, B64U)
    add(
        F,
        "set_cookie_host_session",
        f"< set-cookie: __Host-session={t}; Path=/; Secure; HttpOnly; SameSite=Lax",
        t,
        "__Host-session=",
    )
    b = enc64(f"admin:{pw()}".encode())
    add(
        F,
        "curl_verbose_basic_auth_header",
        lines(
            "> GET /api/health HTTP/1.1",
            "> Host: grafana.acme.io",
            f"> Authorization: Basic {b}",
            "> User-Agent: curl/8.5.0",
            "< HTTP/1.1 200 OK",
        ),
        b,
        "> Host: grafana.acme.io",
    )
    t = hx(64)
    add(
        F,
        "password_reset_link",
        f"Reset link (valid 60 min): https://app.acme.io/password/reset?token={t}&email=dana%40acme.io",
        t,
        "https://app.acme.io/password/reset?token=",
    )
    t = b64u(32)
    add(
        F,
        "magic_login_link",
        f"[mailer] sent magic link https://app.acme.io/auth/magic?code={t} to dana@acme.io",
        t,
        "[mailer] sent magic link",
    )
    sig = hx(64)
    add(
        F,
        "aws_presigned_url_signature",
        f"https://acme-exports.s3.eu-west-1.amazonaws.com/reports/q2.csv?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        f"&X-Amz-Credential={akid()}%2F20240611%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20240611T101500Z"
        f"&X-Amz-Expires=604800&X-Amz-SignedHeaders=host&X-Amz-Signature={sig}",
        sig,
        "X-Amz-Algorithm=AWS4-HMAC-SHA256",
    )
    sig = hx(512)
    add(
        F,
        "gcs_signed_url_signature",
        f"https://storage.googleapis.com/acme-media/raw/video.mp4?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        f"&X-Goog-Date=20240611T101500Z&X-Goog-Expires=3600&X-Goog-SignedHeaders=host&X-Goog-Signature={sig}",
        sig,
        "X-Goog-Algorithm=GOOG4-RSA-SHA256",
    )
    t = jwt({"sub": str(R.randint(1000, 99999)), "ch": "orders", "exp": ts()})
    add(
        F,
        "websocket_access_token_query",
        f"wscat -c 'wss://stream.acme.io/v1/ws?access_token={t}'",
        t,
        "wscat -c",
    )
    t = rs(48, B64U)
    add(
        F,
        "devtools_request_headers_user_session",
        lines(
            ":authority: github.com",
            ":method: GET",
            f"cookie: _octo=GH1.1.{num(9)}.{num(10)}; user_session={t}; logged_in=yes",
            "sec-fetch-mode: navigate",
        ),
        t,
        ":authority: github.com",
    )
    t = rs(32, ANL)
    add(
        F,
        "python_requests_cookies_dict",
        f'r = requests.get("https://admin.acme.io/api/export", cookies={{"sessionid": "{t}"}})',
        t,
        'requests.get("https://admin.acme.io/api/export"',
    )


def _system() -> None:
    F = "system_credential"
    h = f"$6${rs(16, CRYPT)}${rs(86, CRYPT)}"
    add(F, "etc_shadow_sha512", f"deploy:{h}:19876:0:99999:7:::", h, "deploy:")
    h = f"$y$j9T${rs(22, CRYPT)}${rs(43, CRYPT)}"
    add(
        F,
        "etc_shadow_yescrypt",
        f"$ sudo cat /etc/shadow | grep dana\ndana:{h}:19912:0:99999:7:::",
        h,
        "sudo cat /etc/shadow",
    )
    h = f"$apr1${rs(8, CRYPT)}${rs(22, CRYPT)}"
    add(F, "htpasswd_apr1", f"$ cat /etc/nginx/.htpasswd\nadmin:{h}", h, "cat /etc/nginx/.htpasswd")
    h = f"$2y$05${rs(53, CRYPT)}"
    add(
        F,
        "htpasswd_bcrypt",
        f"$ htpasswd -nB metrics\nNew password: \nRe-type new password: \nmetrics:{h}",
        h,
        "htpasswd -nB metrics",
    )
    h = f"$apr1${rs(8, CRYPT)}${rs(22, CRYPT)}"
    hh = h.replace("$", "$$")
    add(
        F,
        "traefik_basicauth_label_doubled_dollar",
        f'      - "traefik.http.middlewares.auth.basicauth.users=admin:{hh}"',
        hh,
        "traefik.http.middlewares.auth.basicauth.users=admin:",
    )
    p = pw()
    add(F, "pgpass_line", f"$ cat ~/.pgpass\ndb.prod.internal:5432:*:app:{p}", p, "cat ~/.pgpass")
    t = ghp()
    add(
        F,
        "netrc_machine_github",
        lines("machine api.github.com", "  login dana", f"  password {t}"),
        t,
        "machine api.github.com",
    )
    p = pw()
    add(
        F,
        "netrc_single_line_ftp",
        f"machine ftp.partner.example login acme_upload password {p}",
        p,
        "machine ftp.partner.example",
    )
    p = pw()
    add(
        F,
        "wpa_supplicant_psk_string",
        lines("network={", '    ssid="ACME-Office"', f'    psk="{p}"', "    key_mgmt=WPA-PSK", "}"),
        p,
        'ssid="ACME-Office"',
    )
    k = hx(64)
    add(
        F,
        "wpa_supplicant_psk_hex",
        lines("network={", '    ssid="lab-iot"', f"    psk={k}", "}"),
        k,
        'ssid="lab-iot"',
    )
    p = pw()
    add(
        F,
        "networkmanager_nmconnection_psk",
        lines(
            "[wifi]",
            "mode=infrastructure",
            "ssid=HomeNet-5G",
            "",
            "[wifi-security]",
            "key-mgmt=wpa-psk",
            f"psk={p}",
        ),
        p,
        "[wifi-security]",
    )
    p = pw()
    add(
        F,
        "openvpn_auth_user_pass_file",
        f"$ cat /etc/openvpn/client/auth.txt\nvpn.dana\n{p}",
        p,
        "cat /etc/openvpn/client/auth.txt",
    )
    p = rs(32, AN + "+/=")
    add(
        F,
        "ipsec_secrets_psk",
        f'# /etc/ipsec.secrets\n203.0.113.10 198.51.100.7 : PSK "{p}"',
        p,
        "/etc/ipsec.secrets",
    )
    p = pw()
    add(
        F,
        "strongswan_swanctl_secret",
        lines(
            "secrets {",
            "    ike-hq {",
            "        id = hq.acme.io",
            f'        secret = "{p}"',
            "    }",
            "}",
        ),
        p,
        "id = hq.acme.io",
    )
    p = pw()
    add(
        F,
        "cifs_credentials_file",
        lines("$ sudo cat /etc/samba/creds-nas", "username=backup", f"password={p}", "domain=CORP"),
        p,
        "cat /etc/samba/creds-nas",
    )
    p = pw_plain()
    add(
        F,
        "fstab_cifs_password",
        f"//nas01/media  /mnt/media  cifs  username=media,password={p},uid=1000,vers=3.0  0  0",
        p,
        "//nas01/media",
    )
    p = pw()
    add(F, "chpasswd_echo", f"echo 'deploy:{p}' | sudo chpasswd", p, "sudo chpasswd")
    p = pw()
    add(
        F,
        "sshpass_p",
        f"sshpass -p '{p}' ssh -o StrictHostKeyChecking=no root@10.0.0.42 uptime",
        p,
        "ssh -o StrictHostKeyChecking=no root@10.0.0.42 uptime",
    )
    p = pw_plain()
    add(
        F,
        "lftp_user_password",
        f"lftp -u acme,{p} sftp://files.partner.example -e 'mirror -R out/ /inbound; bye'",
        p,
        "sftp://files.partner.example",
    )
    p = pw()
    add(
        F,
        "rsync_password_env",
        f"RSYNC_PASSWORD='{p}' rsync -av backup@nas01::snapshots/ /srv/restore/",
        p,
        "rsync -av backup@nas01::snapshots/",
    )
    p = pw()
    add(
        F,
        "ldapsearch_w",
        f"ldapsearch -H ldaps://ldap.corp.acme.io -D 'cn=admin,dc=acme,dc=io' -w '{p}' -b 'ou=people,dc=acme,dc=io' uid=dana",
        p,
        "ldapsearch -H ldaps://ldap.corp.acme.io",
    )
    p = pw()
    add(
        F,
        "msmtprc_password",
        lines(
            "account default",
            "host smtp.fastmail.com",
            "port 465",
            "tls on",
            "user ops@acme.io",
            f"password {p}",
        ),
        p,
        "host smtp.fastmail.com",
    )
    p = " ".join(rs(4, LOW) for _ in range(4))
    add(
        F,
        "postfix_sasl_passwd_gmail_app",
        f"[smtp.gmail.com]:587 alerts.acme@gmail.com:{p}",
        p,
        "[smtp.gmail.com]:587",
    )
    b = enc64(f"x-access-token:{ghp('ghs_')}".encode())
    add(
        F,
        "gitconfig_extraheader_basic",
        lines('[http "https://github.com/"]', f"\textraheader = AUTHORIZATION: basic {b}"),
        b,
        '[http "https://github.com/"]',
    )
    p = pw()
    add(
        F,
        "windows_net_use",
        f"net use Z: \\\\fs01\\finance /user:CORP\\svc_backup {p} /persistent:no",
        p,
        "/persistent:no",
    )
    p = pw()
    add(
        F,
        "windows_cmdkey_pass",
        f"cmdkey /generic:TERMSRV/jump01.corp.acme.io /user:CORP\\dana /pass:{p}",
        p,
        "cmdkey /generic:TERMSRV/jump01.corp.acme.io",
    )
    p = pw()
    add(
        F,
        "powershell_convertto_securestring",
        f'$sec = ConvertTo-SecureString "{p}" -AsPlainText -Force\n'
        "$cred = New-Object System.Management.Automation.PSCredential ('CORP\\svc_sql', $sec)",
        p,
        "ConvertTo-SecureString",
    )
    h = f"grub.pbkdf2.sha512.10000.{HX(128)}.{HX(128)}"
    add(
        F,
        "grub_password_pbkdf2",
        f'set superusers="root"\npassword_pbkdf2 root {h}',
        h,
        "password_pbkdf2 root",
    )
    p = pw()
    add(
        F,
        "ipmitool_P",
        f"ipmitool -I lanplus -H 10.10.0.21 -U ADMIN -P '{p}' chassis power status",
        p,
        "chassis power status",
    )
    p = pw_plain()
    add(
        F,
        "smbclient_user_percent",
        f"smbclient //fs01/it -U 'CORP\\helpdesk%{p}' -c 'ls'",
        p,
        "smbclient //fs01/it",
    )
    p = pw()
    auth = enc64(f"dana:{p}".encode())
    add(
        F,
        "docker_home_config_json_cat",
        "$ cat ~/.docker/config.json\n"
        + json.dumps({"auths": {"ghcr.io": {"auth": auth}}}, indent="\t"),
        auth,
        "cat ~/.docker/config.json",
    )


def _network() -> None:
    F = "network_device"
    t = f"{R.randrange(16):02d}" + HX(20)
    add(
        F,
        "cisco_type7_password",
        f"username netadmin privilege 15 password 7 {t}",
        t,
        "username netadmin privilege 15",
    )
    h = f"$9${rs(14, CRYPT)}${rs(43, CRYPT)}"
    add(F, "cisco_enable_secret_9", f"enable secret 9 {h}", h, "enable secret 9")
    p = pw_plain()
    add(F, "cisco_enable_password_plain", f"enable password {p}", p, "enable password")
    c = rs(12, AN)
    add(
        F,
        "cisco_snmp_community",
        f"snmp-server community {c} RO 10\nsnmp-server location DC1-R12",
        c,
        "snmp-server location DC1-R12",
    )
    c = rs(14, AN)
    add(
        F,
        "snmpd_conf_rocommunity",
        f"# /etc/snmp/snmpd.conf\nrocommunity {c} 10.0.0.0/8\nsysLocation rack-7",
        c,
        "sysLocation rack-7",
    )
    c = rs(12, AN)
    add(
        F,
        "snmpwalk_community_flag",
        f"snmpwalk -v2c -c {c} 10.0.0.1 1.3.6.1.2.1.1",
        c,
        "snmpwalk -v2c",
    )
    p = pw_plain() + "!"
    add(
        F,
        "netsnmp_createuser_v3",
        f'# /var/lib/net-snmp/snmpd.conf\ncreateUser monitor SHA-256 "{p}" AES',
        p,
        "createUser monitor SHA-256",
    )
    p = rs(24, AN)
    add(
        F, "cisco_isakmp_key", f"crypto isakmp key {p} address 198.51.100.7", p, "crypto isakmp key"
    )
    p = rs(20, AN)
    add(
        F,
        "cisco_tacacs_key",
        f"tacacs-server host 10.0.0.5 key {p}",
        p,
        "tacacs-server host 10.0.0.5",
    )
    p = rs(20, AN)
    add(
        F,
        "freeradius_clients_secret",
        lines(
            "client core-switch {",
            "    ipaddr = 10.0.0.2",
            f"    secret = {p}",
            "    nas_type = cisco",
            "}",
        ),
        p,
        "client core-switch {",
    )
    h = f"$6${rs(8, CRYPT)}${rs(86, CRYPT)}"
    add(
        F,
        "junos_encrypted_password",
        f'set system login user ops class super-user authentication encrypted-password "{h}"',
        h,
        "set system login user ops class super-user",
    )
    p = pw_plain()
    add(
        F,
        "mikrotik_user_add",
        f"/user add name=backup group=read password={p}",
        p,
        "/user add name=backup",
    )
    p = pw_plain()
    add(
        F,
        "bgp_neighbor_password",
        f"router bgp 65001\n neighbor 192.0.2.1 remote-as 65002\n neighbor 192.0.2.1 password {p}",
        p,
        "router bgp 65001",
    )
    p = rs(16, AN)
    add(
        F,
        "ospf_md5_key",
        f"interface Gi0/1\n ip ospf message-digest-key 1 md5 {p}",
        p,
        "interface Gi0/1",
    )


def _tool_output() -> None:
    F = "tool_output"
    t = stripe("sk_live_")
    add(
        F,
        "vault_kv_get_table",
        lines(
            "$ vault kv get secret/payments/stripe",
            "====== Secret Path ======",
            "secret/data/payments/stripe",
            "",
            "====== Data ======",
            "Key           Value",
            "---           -----",
            f"secret_key    {t}",
        ),
        t,
        "secret/data/payments/stripe",
    )
    t = hvs()
    add(
        F,
        "vault_login_userpass_output",
        lines(
            "$ vault login -method=userpass username=dana",
            "Password (will be hidden):",
            "Success! You are now authenticated. The token information displayed below",
            "is already stored in the token helper.",
            "",
            "Key                    Value",
            "---                    -----",
            f"token                  {t}",
            "token_duration         768h",
            'token_policies         ["default" "dev"]',
        ),
        t,
        "vault login -method=userpass",
    )
    t = "hvs." + rs(24)
    add(
        F,
        "vault_token_create_json",
        "$ vault token create -policy=ci -format=json | jq .auth\n"
        + json.dumps(
            {
                "client_token": t,
                "accessor": rs(24),
                "policies": ["ci", "default"],
                "lease_duration": 2764800,
                "renewable": True,
            },
            indent=2,
        ),
        t,
        "vault token create -policy=ci",
    )
    root, unseal = "hvs." + rs(24), b64(33)
    add(
        F,
        "vault_operator_init_root_token",
        lines(
            "$ vault operator init -key-shares=1 -key-threshold=1 | grep -i 'root token'",
            f"Initial Root Token: {root}",
        ),
        root,
        "Initial Root Token: ",
    )
    add(
        F,
        "vault_operator_unseal_key",
        lines("$ vault operator init -key-shares=1 -key-threshold=1", f"Unseal Key 1: {unseal}"),
        unseal,
        "vault operator init -key-shares=1",
    )
    p = pw()
    add(
        F,
        "bao_kv_get_field",
        f"$ bao kv get -field=password kv/prod/postgres\n{p}",
        p,
        "bao kv get -field=password kv/prod/postgres",
    )
    p = pw()
    add(
        F,
        "sops_decrypt_output",
        lines(
            "$ sops -d secrets/prod.enc.yaml",
            "db:",
            "    user: app",
            f"    password: {p}",
            "    host: db.prod.internal",
        ),
        p,
        "sops -d secrets/prod.enc.yaml",
    )
    p = pw()
    add(
        F,
        "kubectl_get_secret_yaml",
        lines(
            "$ kubectl get secret db-credentials -o yaml",
            "apiVersion: v1",
            "data:",
            f"  password: {enc64(p.encode())}",
            f"  username: {enc64(b'app')}",
            "kind: Secret",
            "metadata:",
            "  name: db-credentials",
            "  namespace: default",
            "type: Opaque",
        ),
        enc64(p.encode()),
        "kubectl get secret db-credentials -o yaml",
    )
    p = rs(16, AN + "-_")
    add(
        F,
        "kubectl_jsonpath_base64_decode",
        f'$ kubectl -n argocd get secret argocd-initial-admin-secret -o jsonpath="{{.data.password}}" | base64 -d\n{p}',
        p,
        "argocd-initial-admin-secret",
    )
    t = "gho_" + rs(36)
    add(F, "gh_auth_token_output", f"$ gh auth token\n{t}", t, "$ gh auth token")
    t = "gho_" + rs(36)
    add(
        F,
        "gh_auth_status_show_token",
        lines(
            "$ gh auth status --show-token",
            "github.com",
            "  ✓ Logged in to github.com account dana (keyring)",
            "  - Active account: true",
            "  - Git operations protocol: ssh",
            f"  - Token: {t}",
            "  - Token scopes: 'gist', 'read:org', 'repo', 'workflow'",
        ),
        t,
        "gh auth status --show-token",
    )
    ak, sk, st = akid("ASIA"), aws_sk(), aws_st()
    add(
        F,
        "aws_export_credentials_process",
        "$ aws configure export-credentials --profile prod --format process\n"
        + json.dumps(
            {
                "Version": 1,
                "AccessKeyId": ak,
                "SecretAccessKey": sk,
                "SessionToken": st,
                "Expiration": "2024-06-11T18:22:09+00:00",
            },
            indent=2,
        ),
        sk,
        "aws configure export-credentials",
    )
    ak, sk, st = akid("ASIA"), aws_sk(), aws_st()
    add(
        F,
        "aws_export_credentials_env",
        lines(
            "$ aws configure export-credentials --format env",
            f"export AWS_ACCESS_KEY_ID={ak}",
            f"export AWS_SECRET_ACCESS_KEY={sk}",
            f"export AWS_SESSION_TOKEN={st}",
            "export AWS_CREDENTIAL_EXPIRATION=2024-06-11T18:22:09+00:00",
        ),
        st,
        "export AWS_SESSION_TOKEN=",
    )
    ak, sk, st = akid("ASIA"), aws_sk(), aws_st()
    add(
        F,
        "aws_sts_assume_role_output",
        json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": ak,
                    "SecretAccessKey": sk,
                    "SessionToken": st,
                    "Expiration": "2024-06-11T11:15:43+00:00",
                },
                "AssumedRoleUser": {
                    "AssumedRoleId": "AROA" + rs(17, B32) + ":ci",
                    "Arn": f"arn:aws:sts::{num(12)}:assumed-role/Deployer/ci",
                },
            },
            indent=4,
        ),
        sk,
        '"AssumedRoleUser"',
    )
    t = ya29()
    add(
        F,
        "gcloud_print_access_token",
        f"$ gcloud auth print-access-token\n{t}",
        t,
        "gcloud auth print-access-token",
    )
    t = ya29()
    add(
        F,
        "gcloud_adc_print_access_token",
        f"$ gcloud auth application-default print-access-token\n{t}",
        t,
        "application-default print-access-token",
    )
    at = jwt(
        {
            "aud": "https://management.azure.com/",
            "iss": f"https://sts.windows.net/{uuid4()}/",
            "iat": ts(),
            "nbf": ts(),
            "exp": ts(),
            "oid": uuid4(),
            "tid": uuid4(),
            "upn": "dana@acme.io",
        },
        alg="RS256",
        kid=rs(27, B64U),
    )
    add(
        F,
        "az_get_access_token_json",
        "$ az account get-access-token\n"
        + json.dumps(
            {
                "accessToken": at,
                "expiresOn": "2024-06-11 12:34:56.000000",
                "expires_on": ts(),
                "subscription": uuid4(),
                "tenant": uuid4(),
                "tokenType": "Bearer",
            },
            indent=2,
        ),
        at,
        "az account get-access-token",
    )
    cs = azure_cs()
    add(
        F,
        "az_ad_sp_create_for_rbac",
        "$ az ad sp create-for-rbac --name gha-deployer --role contributor --scopes /subscriptions/"
        + uuid4()
        + "\n"
        + json.dumps(
            {"appId": uuid4(), "displayName": "gha-deployer", "password": cs, "tenant": uuid4()},
            indent=2,
        ),
        cs,
        "az ad sp create-for-rbac --name gha-deployer",
    )
    p = rs(42, AN + "+/") + "+ACR" + rs(6)
    add(
        F,
        "az_acr_credential_show",
        "$ az acr credential show -n acmeregistry\n"
        + json.dumps(
            {"passwords": [{"name": "password", "value": p}], "username": "acmeregistry"}, indent=2
        ),
        p,
        "az acr credential show -n acmeregistry",
    )
    t = "dop_v1_" + hx(64)
    add(
        F,
        "doctl_config_cat",
        f"$ cat ~/.config/doctl/config.yaml\naccess-token: {t}\ncontext: default",
        t,
        "cat ~/.config/doctl/config.yaml",
    )
    p = pw()
    add(
        F,
        "op_item_get_reveal",
        f'$ op item get "Prod Postgres" --vault Infra --fields label=password --reveal\n{p}',
        p,
        'op item get "Prod Postgres"',
    )
    t = stripe("sk_live_")
    add(
        F,
        "op_read_reference_output",
        f'$ op read "op://Infra/Stripe/credential"\n{t}',
        t,
        '$ op read "op://Infra/Stripe/credential"',
    )
    p = pw()
    add(
        F,
        "pass_show_output",
        lines("$ pass show infra/grafana-admin", p, "url: https://grafana.acme.io", "user: admin"),
        p,
        "pass show infra/grafana-admin",
    )
    p = pw()
    add(
        F,
        "gopass_show_o",
        f"$ gopass show -o websites/aws-root\n{p}",
        p,
        "gopass show -o websites/aws-root",
    )
    p = pw()
    add(
        F,
        "keepassxc_cli_show_s",
        lines(
            '$ keepassxc-cli show -s ~/Passwords.kdbx "Servers/bastion"',
            "Enter password to unlock /home/dana/Passwords.kdbx:",
            "Title: bastion",
            "UserName: ops",
            f"Password: {p}",
            "URL: ssh://bastion.acme.io",
            "Notes:",
        ),
        p,
        "keepassxc-cli show -s",
    )
    p = pw(space=True)
    add(
        F,
        "macos_security_find_generic_password",
        f'$ security find-generic-password -a dana -s "Office Wi-Fi" -w\n{p}',
        p,
        "security find-generic-password",
    )
    p = pw()
    add(
        F, "bitwarden_bw_get_password", f"$ bw get password 'jira admin'\n{p}", p, "bw get password"
    )
    p = pw()
    add(
        F,
        "lastpass_show_password",
        f"$ lpass show --password 'Shared-Infra/nexus'\n{p}",
        p,
        "lpass show --password",
    )
    text, body = openssh_ed25519("dana@laptop")
    add(
        F, "cat_ssh_id_ed25519", "$ cat ~/.ssh/id_ed25519\n" + text, body, "$ cat ~/.ssh/id_ed25519"
    )
    hp = "p" + hx(64)
    add(
        F,
        "heroku_config_database_url",
        lines(
            "$ heroku config -a acme-api",
            "=== acme-api Config Vars",
            f"DATABASE_URL: postgres://u{rs(13, ANL)}:{hp}@c{rs(10, ANL)}.cluster-{rs(12, ANL)}.eu-west-1.rds.amazonaws.com:5432/d{rs(13, ANL)}",
            "NODE_ENV:     production",
        ),
        hp,
        "=== acme-api Config Vars",
    )
    t = ghp()
    add(
        F,
        "env_grep_token",
        lines("$ env | grep -i token", f"GITHUB_TOKEN={t}", "TOKENIZERS_PARALLELISM=false"),
        t,
        "env | grep -i token",
    )
    t = sk_proj()
    add(F, "printenv_openai", f"$ printenv OPENAI_API_KEY\n{t}", t, "printenv OPENAI_API_KEY")
    p = pw()
    add(
        F,
        "terraform_output_raw",
        f"$ terraform output -raw db_admin_password\n{p}",
        p,
        "terraform output -raw db_admin_password",
    )
    p = pw()
    add(
        F,
        "docker_inspect_env",
        lines(
            "$ docker inspect pg --format '{{json .Config.Env}}'",
            json.dumps(
                [
                    f"POSTGRES_PASSWORD={p}",
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "PG_MAJOR=16",
                ]
            ),
        ),
        p,
        "docker inspect pg",
    )
    t = "ghs_" + rs(36)
    add(
        F,
        "git_config_remote_url_token",
        f"$ git config --get remote.origin.url\nhttps://x-access-token:{t}@github.com/acme/deploy-scripts",
        t,
        "git config --get remote.origin.url",
    )
    t = npm_tok()
    add(
        F,
        "npm_config_get_authtoken",
        f"$ npm config get //registry.npmjs.org/:_authToken\n{t}",
        t,
        "npm config get //registry.npmjs.org/:_authToken",
    )
    t = enc64(
        json.dumps(
            {
                "payload": b64(420),
                "datakey": b64(180),
                "version": "2",
                "type": "DATA_KEY",
                "expiration": ts(),
            }
        ).encode()
    )
    add(
        F,
        "aws_ecr_get_login_password",
        f"$ aws ecr get-login-password --region eu-west-1\n{t}",
        t,
        "aws ecr get-login-password",
    )
    p = pw()
    add(
        F,
        "aws_ssm_get_parameter_decrypted",
        "$ aws ssm get-parameter --name /prod/api/db_password --with-decryption\n"
        + json.dumps(
            {
                "Parameter": {
                    "Name": "/prod/api/db_password",
                    "Type": "SecureString",
                    "Value": p,
                    "Version": 3,
                }
            },
            indent=4,
        ),
        p,
        "--with-decryption",
    )
    p = pw()
    add(
        F,
        "aws_secretsmanager_get_secret_value",
        "$ aws secretsmanager get-secret-value --secret-id prod/orders/db\n"
        + json.dumps(
            {
                "Name": "prod/orders/db",
                "SecretString": json.dumps({"username": "orders", "password": p}),
            },
            indent=4,
        ),
        p,
        "get-secret-value --secret-id prod/orders/db",
    )
    p = pw()
    add(
        F,
        "gcloud_secrets_versions_access",
        f"$ gcloud secrets versions access latest --secret=db-password\n{p}",
        p,
        "gcloud secrets versions access latest",
    )
    p = pw()
    add(
        F,
        "az_keyvault_secret_show_tsv",
        f"$ az keyvault secret show --vault-name kv-acme-prod --name SqlAdminPassword --query value -o tsv\n{p}",
        p,
        "az keyvault secret show",
    )
    t = "dp.st.prd." + rs(43)
    add(
        F,
        "doppler_secrets_get_plain",
        f"$ doppler secrets get DOPPLER_TOKEN_CI --plain\n{t}",
        t,
        "doppler secrets get",
    )
    p = pw()
    add(
        F,
        "cat_dotenv_file",
        lines(
            "$ cat .env",
            "NODE_ENV=development",
            "PORT=3000",
            f"SESSION_SECRET={p}",
            "LOG_LEVEL=debug",
        ),
        p,
        "SESSION_SECRET=",
    )
    skb = hx(128)
    add(
        F,
        "rails_credentials_show",
        lines(
            "$ bin/rails credentials:show",
            f"secret_key_base: {skb}",
            "aws:",
            f"  access_key_id: {akid()}",
        ),
        skb,
        "bin/rails credentials:show",
    )
    p = pw()
    add(
        F,
        "ansible_vault_view_output",
        lines(
            "$ ansible-vault view group_vars/prod/vault.yml",
            "Vault password:",
            f"vault_db_password: {p}",
        ),
        p,
        "ansible-vault view group_vars/prod/vault.yml",
    )
    t = sk_ant()
    add(
        F,
        "git_log_p_added_key",
        lines(
            f"commit {hx(40)}",
            "Author: Dana <dana@acme.io>",
            "",
            "    wip: local config",
            "",
            "diff --git a/.env b/.env",
            "--- a/.env",
            "+++ b/.env",
            "@@ -1,2 +1,3 @@",
            " PORT=3000",
            f"+ANTHROPIC_API_KEY={t}",
        ),
        t,
        "diff --git a/.env b/.env",
    )
    p = pw()
    add(
        F,
        "grep_rn_password_output",
        lines(
            "$ grep -rn password config/",
            f'config/smtp.yml:4:  password: "{p}"',
            "config/app.yml:12:  password_min_length: 12",
        ),
        p,
        "grep -rn password config/",
    )
    p = pw()
    add(
        F,
        "history_grep_mysql",
        lines(
            "$ history | grep mysql",
            f"  512  mysql -u root -p'{p}' shop < dump.sql",
            "  513  history | grep mysql",
        ),
        p,
        "history | grep mysql",
    )
    t = "gho_" + rs(36)
    add(
        F,
        "secret_tool_lookup",
        f"$ secret-tool lookup service gh:github.com username dana\n{t}",
        t,
        "secret-tool lookup service",
    )
    t = "glpat-" + rs(20, B64U)
    add(
        F,
        "kubectl_exec_env_output",
        lines(
            "$ kubectl exec deploy/runner -- env",
            "HOSTNAME=runner-7d9f8c6b5-x2x9q",
            f"GITLAB_TOKEN={t}",
            "KUBERNETES_SERVICE_HOST=10.96.0.1",
        ),
        t,
        "kubectl exec deploy/runner -- env",
    )


def _chat() -> None:
    F = "chat_prose"
    p = pw()
    add(
        F,
        "prose_en_db_password",
        f"ok the staging db password is {p} — can you update the migration script to use it and rerun?",
        p,
        "can you update the migration script",
    )
    t = sk_proj()
    add(
        F,
        "prose_en_rotated_key",
        f"I rotated the key, new one is {t}. try the request again",
        t,
        "I rotated the key",
    )
    p = pw()
    add(
        F,
        "prose_en_user_pass_slash",
        f"use user: admin / pass: {p} for the jenkins box",
        p,
        "for the jenkins box",
    )
    p = pw(space=True)
    add(
        F,
        "prose_en_passphrase_backticks",
        f"my passphrase for the key is literally `{p}` lol, add it to the agent",
        p,
        "add it to the agent",
    )
    p = pw()
    add(
        F,
        "prose_de_passwort",
        f"Das Passwort für den Staging-Server ist {p}, bitte nicht committen.",
        p,
        "bitte nicht committen",
    )
    t = ghp()
    add(
        F,
        "prose_de_token",
        f"Hier ist mein Token: {t} – kannst du damit den Release anstoßen?",
        t,
        "kannst du damit den Release anstoßen?",
    )
    p = pw()
    add(
        F,
        "prose_fr_mot_de_passe",
        f"Le mot de passe de la base de prod est {p} (ne le mets pas dans le repo).",
        p,
        "Le mot de passe de la base de prod est",
    )
    p = pw()
    add(
        F,
        "prose_es_contrasena",
        f"La contraseña del usuario admin es «{p}», cámbiala después del deploy.",
        p,
        "cámbiala después del deploy",
    )
    p = pw()
    add(
        F,
        "prose_pt_senha",
        f"A senha do banco é {p}, usa ela no .env local.",
        p,
        "usa ela no .env local",
    )
    p = pw()
    add(
        F,
        "prose_it_password",
        f"La password del database è {p}, la cambiamo venerdì.",
        p,
        "la cambiamo venerdì",
    )
    p = pw()
    add(
        F,
        "prose_nl_wachtwoord",
        f"Het wachtwoord voor de VPN is {p}, gebruikersnaam is dana.",
        p,
        "gebruikersnaam is dana",
    )
    p = pw()
    add(
        F,
        "prose_pl_haslo",
        f"Hasło do serwera to {p} – zmień je po wdrożeniu.",
        p,
        "zmień je po wdrożeniu",
    )
    p = pw()
    add(F, "prose_zh_mima", f"数据库密码是 {p}，帮我连一下生产库看看。", p, "帮我连一下生产库看看")
    t = "AIza" + rs(35, B64U)
    add(
        F,
        "prose_ja_api_key",
        f"APIキーは {t} です。環境変数に入れてください。",
        t,
        "環境変数に入れてください",
    )
    t = slack_tok("xoxb")
    add(
        F,
        "prose_ko_slack_token",
        f"슬랙 봇 토큰은 {t} 이에요. 알림 채널에 연결해 주세요.",
        t,
        "알림 채널에 연결해 주세요",
    )
    p = pw()
    add(F, "prose_ru_parol", f"Пароль от сервера: {p} (логин root)", p, "(логин root)")
    p = pw()
    add(
        F,
        "prose_tr_sifre",
        f"Sunucu şifresi: {p} — deploy sonrası değiştir.",
        p,
        "deploy sonrası değiştir",
    )
    p = pw()
    add(
        F,
        "prose_en_ssh_root_pw",
        f"pls ssh as root@10.0.3.7, pw is {p}",
        p,
        "pls ssh as root@10.0.3.7",
    )
    t = "A3-" + rs(6, ANU) + "-" + rs(6, ANU) + "-" + "-".join(rs(5, ANU) for _ in range(5))
    add(
        F,
        "prose_en_1password_secret_key",
        f"emergency kit says Secret Key: {t} — store it with the recovery codes",
        t,
        "store it with the recovery codes",
    )
    p = pw()
    add(F, "prose_sv_losenord", f"Lösenordet till NAS:en är {p}", p, "Lösenordet till NAS:en är")


def _observability() -> None:
    F = "observability"
    k = hx(32)
    add(
        F,
        "datadog_agent_yaml_api_key",
        lines(
            "# /etc/datadog-agent/datadog.yaml",
            f"api_key: {k}",
            "site: datadoghq.eu",
            "logs_enabled: true",
        ),
        k,
        "site: datadoghq.eu",
    )
    k = hx(40)
    add(
        F,
        "datadog_tf_app_key",
        lines(
            'provider "datadog" {',
            "  api_key = var.datadog_api_key",
            f'  app_key = "{k}"',
            '  api_url = "https://api.datadoghq.eu/"',
            "}",
        ),
        k,
        "api_key = var.datadog_api_key",
    )
    k = hx(36) + "NRAL"
    add(
        F,
        "newrelic_license_key_yml",
        lines("common: &default_settings", f"  license_key: '{k}'", "  app_name: orders-api"),
        k,
        "app_name: orders-api",
    )
    k = "NRAK-" + rs(27, ANU)
    add(
        F,
        "newrelic_user_api_key_env",
        f"NEW_RELIC_API_KEY={k} newrelic apm application search --name orders",
        k,
        "newrelic apm application search",
    )
    k = rs(22)
    add(
        F,
        "honeycomb_otlp_headers",
        f'OTEL_EXPORTER_OTLP_HEADERS="x-honeycomb-team={k}"',
        k,
        "OTEL_EXPORTER_OTLP_HEADERS=",
    )
    payload = enc64u(
        json.dumps(
            {
                "iat": float(ts()),
                "url": "https://sentry.io",
                "region_url": "https://de.sentry.io",
                "org": "acme",
            }
        ).encode()
    )
    k = "sntrys_" + payload + "_" + rs(43, B64U)
    add(
        F,
        "sentryclirc_org_token",
        lines("[auth]", f"token={k}", "", "[defaults]", "org=acme"),
        k,
        "[defaults]",
    )
    k = "sntryu_" + hx(64)
    add(
        F,
        "sentry_user_token_env",
        f"SENTRY_AUTH_TOKEN={k} sentry-cli releases new 2.14.0",
        k,
        "sentry-cli releases new 2.14.0",
    )
    k = "glsa_" + rs(32) + "_" + hx(8)
    add(
        F,
        "grafana_service_account_token",
        f"curl -H 'Authorization: Bearer {k}' https://grafana.acme.io/api/dashboards/uid/{rs(9, ANL)}",
        k,
        "grafana.acme.io/api/dashboards",
    )
    k = "glc_" + enc64(
        json.dumps(
            {
                "o": num(6),
                "n": "stack-" + num(6) + "-integration-alloy",
                "k": rs(24),
                "m": {"r": "prod-eu-west-2"},
            },
            separators=(",", ":"),
        ).encode()
    )
    add(
        F,
        "grafana_cloud_access_policy_token",
        f"GRAFANA_CLOUD_API_KEY={k}",
        k,
        "GRAFANA_CLOUD_API_KEY=",
    )
    k = uuid4()
    add(
        F,
        "splunk_hec_token_curl",
        f"curl -k https://splunk.acme.io:8088/services/collector -H 'Authorization: Splunk {k}' -d '{{\"event\": \"hello\"}}'",
        k,
        "services/collector",
    )
    k = hx(32)
    add(
        F,
        "pagerduty_routing_key_alertmanager",
        lines(
            "receivers:",
            "  - name: pagerduty-critical",
            "    pagerduty_configs:",
            f"      - routing_key: {k}",
            "        severity: critical",
        ),
        k,
        "name: pagerduty-critical",
    )
    k = "u+" + rs(18, B64U)
    add(
        F,
        "pagerduty_rest_api_token",
        f'curl -H "Authorization: Token token={k}" https://api.pagerduty.com/incidents',
        k,
        "api.pagerduty.com/incidents",
    )
    k = uuid4()
    add(
        F,
        "opsgenie_genie_key",
        f'curl -X POST https://api.opsgenie.com/v2/alerts -H "Authorization: GenieKey {k}"',
        k,
        "api.opsgenie.com/v2/alerts",
    )
    k = enc64(f"{rs(20, B64U)}:{rs(22, B64U)}".encode())
    add(
        F,
        "elastic_apikey_header",
        f"curl -H 'Authorization: ApiKey {k}' https://es.acme.io:9243/_cluster/health",
        k,
        "_cluster/health",
    )
    k = hx(32)
    add(
        F,
        "rollbar_ruby_initializer",
        lines(
            "Rollbar.configure do |config|",
            f"  config.access_token = '{k}'",
            "  config.environment = Rails.env",
            "end",
        ),
        k,
        "Rollbar.configure do |config|",
    )
    k = "xaat-" + uuid4()
    add(F, "axiom_token_env", f"AXIOM_TOKEN={k}\nAXIOM_DATASET=vercel-logs", k, "AXIOM_TOKEN=")
    k = f"dt0c01.{rs(24, ANU)}.{rs(64, ANU)}"
    add(F, "dynatrace_api_token", f"DT_API_TOKEN={k}", k, "DT_API_TOKEN=")
    url = f"https://endpoint4.collection.sumologic.com/receiver/v1/http/{rs(160, B64U)}=="
    add(F, "sumologic_http_source_url", f"SUMO_HTTP_SOURCE={url}", url, "SUMO_HTTP_SOURCE=")
    k = rs(24)
    add(F, "betterstack_source_token", f"LOGTAIL_SOURCE_TOKEN={k}", k, "LOGTAIL_SOURCE_TOKEN=")


def _feature_flags() -> None:
    F = "feature_flag"
    k = "sdk-" + uuid4()
    add(
        F,
        "launchdarkly_sdk_key_go",
        f'client, _ := ld.MakeClient("{k}", 5*time.Second)',
        k,
        "ld.MakeClient(",
    )
    k = "api-" + uuid4()
    add(
        F,
        "launchdarkly_api_token_curl",
        f'curl -H "Authorization: {k}" https://app.launchdarkly.com/api/v2/flags/default',
        k,
        "app.launchdarkly.com",
    )
    k = "ser." + rs(22)
    add(
        F,
        "flagsmith_server_key_python",
        f'flagsmith = Flagsmith(environment_key="{k}")',
        k,
        "Flagsmith(",
    )
    k = "secret-" + rs(43)
    add(
        F,
        "statsig_server_secret_node",
        f"await Statsig.initialize('{k}', {{ environment: {{ tier: 'production' }} }});",
        k,
        "Statsig.initialize(",
    )
    k = "*:production." + hx(64)
    add(
        F,
        "unleash_admin_token_header",
        f'curl -H "Authorization: {k}" https://unleash.acme.io/api/admin/projects',
        k,
        "unleash.acme.io/api/admin",
    )
    k = "default:development." + hx(64)
    add(F, "unleash_client_token_env", f"UNLEASH_API_TOKEN={k}", k, "UNLEASH_API_TOKEN=")
    k = "phx_" + rs(47)
    add(
        F,
        "posthog_personal_api_key",
        f"curl -H 'Authorization: Bearer {k}' https://eu.posthog.com/api/projects/{num(5)}/insights/",
        k,
        "eu.posthog.com/api/projects",
    )


def _search_analytics() -> None:
    F = "search_maps_analytics"
    k = hx(32)
    add(
        F,
        "algolia_admin_key_python",
        f'client = SearchClient.create("{rs(10, ANU)}", "{k}")  # admin key, indexer only',
        k,
        "SearchClient.create(",
    )
    k = hx(32)
    add(F, "algolia_admin_key_env", f"ALGOLIA_ADMIN_API_KEY={k}", k, "ALGOLIA_ADMIN_API_KEY=")
    k = rs(32, B64U)
    add(
        F,
        "meilisearch_master_key_docker",
        f"docker run -d -p 7700:7700 -e MEILI_MASTER_KEY='{k}' -e MEILI_ENV=production getmeili/meilisearch:v1.8",
        k,
        "getmeili/meilisearch:v1.8",
    )
    k = rs(32)
    add(
        F,
        "typesense_server_api_key",
        f"typesense-server --data-dir=/data --api-key={k} --enable-cors",
        k,
        "typesense-server --data-dir=/data",
    )
    k = rs(32)
    add(
        F,
        "typesense_client_ts",
        lines(
            "const client = new Typesense.Client({",
            "  nodes: [{ host: 'search.acme.io', port: 443, protocol: 'https' }],",
            f"  apiKey: '{k}',",
            "});",
        ),
        k,
        "new Typesense.Client({",
    )
    p = pw() + "1Aa"
    add(
        F,
        "opensearch_initial_admin_password",
        f"OPENSEARCH_INITIAL_ADMIN_PASSWORD={p}",
        p,
        "OPENSEARCH_INITIAL_ADMIN_PASSWORD=",
    )
    k = (
        "sk."
        + enc64u(json.dumps({"u": "acme", "a": rs(25, ANL)}, separators=(",", ":")).encode())
        + "."
        + rs(22, B64U)
    )
    add(F, "mapbox_secret_token_env", f"MAPBOX_DOWNLOADS_TOKEN={k}", k, "MAPBOX_DOWNLOADS_TOKEN=")
    k = "AIza" + rs(35, B64U)
    add(
        F,
        "google_maps_server_key_python",
        f'gmaps = googlemaps.Client(key="{k}")',
        k,
        "googlemaps.Client(",
    )
    k = rs(43, B64U)
    add(
        F,
        "here_api_key_url",
        f"https://geocode.search.hereapi.com/v1/geocode?q=Invalidenstr+117+Berlin&apiKey={k}",
        k,
        "geocode.search.hereapi.com",
    )
    k = hx(32)
    add(F, "mixpanel_api_secret_env", f"MIXPANEL_API_SECRET={k}", k, "MIXPANEL_API_SECRET=")
    k = hx(32)
    add(
        F,
        "amplitude_secret_curl_u",
        f"curl -u {hx(32)}:{k} 'https://amplitude.com/api/2/export?start=20240601T00&end=20240601T23'",
        k,
        "amplitude.com/api/2/export",
    )
    k = rs(22, B64U)
    add(
        F,
        "ga4_measurement_protocol_secret",
        f"POST https://www.google-analytics.com/mp/collect?measurement_id=G-{rs(10, ANU)}&api_secret={k}",
        k,
        "www.google-analytics.com/mp/collect",
    )
    k = rs(32)
    add(
        F,
        "segment_server_write_key_python",
        f'analytics.write_key = "{k}"',
        k,
        "analytics.write_key = ",
    )


def _app_secrets() -> None:
    F = "app_secret_key"
    k = "django-insecure-" + rs(50, LOW + DIG + "!@#%^&*(-_=+)")
    add(F, "django_secret_key_insecure", f"SECRET_KEY = '{k}'", k, "SECRET_KEY = ")
    k = rs(50, LOW + DIG + "!@#%^&*(-_=+)")
    add(F, "django_secret_key_env", f'DJANGO_SECRET_KEY="{k}"', k, "DJANGO_SECRET_KEY=")
    k = hx(128)
    add(F, "rails_secret_key_base_env", f"SECRET_KEY_BASE={k}", k, "SECRET_KEY_BASE=")
    k = hx(32)
    add(F, "rails_master_key_cat", f"$ cat config/master.key\n{k}", k, "cat config/master.key")
    k = "base64:" + b64(32)
    add(F, "laravel_app_key", f"APP_NAME=Acme\nAPP_ENV=production\nAPP_KEY={k}", k, "APP_KEY=")
    k = hx(48)
    add(
        F,
        "flask_secret_key_config",
        f'app.config["SECRET_KEY"] = "{k}"',
        k,
        'app.config["SECRET_KEY"]',
    )
    k = rs(64, AN + "-_")
    add(F, "jwt_secret_env", f"JWT_SECRET={k}\nJWT_EXPIRES_IN=15m", k, "JWT_SECRET=")
    k = b64(32)
    add(
        F,
        "nextauth_secret_env",
        f"NEXTAUTH_URL=https://app.acme.io\nNEXTAUTH_SECRET={k}",
        k,
        "NEXTAUTH_SECRET=",
    )
    k = b64(48)
    add(
        F,
        "phoenix_secret_key_base",
        lines(
            "config :my_app, MyAppWeb.Endpoint,",
            f'  secret_key_base: "{k}",',
            '  url: [host: "acme.io", port: 443]',
        ),
        k,
        "MyAppWeb.Endpoint",
    )
    k = HX(128)
    add(
        F,
        "aspnet_machinekey",
        f'<machineKey validationKey="{k}" decryptionKey="{HX(64)}" validation="HMACSHA256" decryption="AES" />',
        k,
        "<machineKey",
    )
    k = hx(32)
    add(F, "symfony_app_secret", f"APP_ENV=prod\nAPP_SECRET={k}", k, "APP_SECRET=")
    k = pw()
    add(
        F,
        "express_session_secret",
        f"app.use(session({{ secret: '{k}', resave: false, saveUninitialized: false, cookie: {{ secure: true }} }}));",
        k,
        "app.use(session(",
    )
    k = pw()
    add(
        F,
        "jasypt_encryptor_password",
        f"java -Djasypt.encryptor.password='{k}' -jar orders-service.jar",
        k,
        "-jar orders-service.jar",
    )
    k = base64.urlsafe_b64encode(R.randbytes(32)).decode()
    add(
        F,
        "airflow_fernet_key",
        lines("[core]", "executor = CeleryExecutor", f"fernet_key = {k}"),
        k,
        "executor = CeleryExecutor",
    )
    k = b64(42)
    add(
        F,
        "superset_secret_key",
        f"SECRET_KEY = '{k}'  # superset_config.py",
        k,
        "# superset_config.py",
    )
    k = rs(32)
    add(F, "n8n_encryption_key", f"N8N_ENCRYPTION_KEY={k}", k, "N8N_ENCRYPTION_KEY=")
    p = pw()
    add(
        F,
        "grafana_admin_password_env",
        f"GF_SECURITY_ADMIN_USER=admin\nGF_SECURITY_ADMIN_PASSWORD={p}",
        p,
        "GF_SECURITY_ADMIN_PASSWORD=",
    )
    p = pw()
    add(
        F,
        "keycloak_admin_password_env",
        f"docker run -p 8080:8080 -e KEYCLOAK_ADMIN=admin -e KEYCLOAK_ADMIN_PASSWORD='{p}' quay.io/keycloak/keycloak:25.0 start-dev",
        p,
        "quay.io/keycloak/keycloak:25.0",
    )
    k = rs(64, AN + "!#%^*()-_[]{}<>~+=,.;:/?|")
    add(
        F,
        "wordpress_auth_key_define",
        f"define( 'AUTH_KEY',         '{k}' );",
        k,
        "define( 'AUTH_KEY',",
    )
    k = hx(40)
    add(F, "github_webhook_secret_env", f"GITHUB_WEBHOOK_SECRET={k}", k, "GITHUB_WEBHOOK_SECRET=")
    k = hx(128)
    add(F, "devise_secret_key", f"  config.secret_key = '{k}'", k, "config.secret_key = ")


def _infra() -> None:
    F = "infra_secret"
    t = rs(14) + ".atlasv1." + rs(67)
    add(
        F,
        "terraform_credentials_tfrc_json",
        json.dumps({"credentials": {"app.terraform.io": {"token": t}}}, indent=2),
        t,
        '"app.terraform.io"',
    )
    t = rs(14) + ".atlasv1." + rs(67)
    add(
        F,
        "terraform_token_env",
        f"export TF_TOKEN_app_terraform_io={t}",
        t,
        "export TF_TOKEN_app_terraform_io=",
    )
    t = "pul-" + hx(40)
    add(
        F,
        "pulumi_access_token_env",
        f"PULUMI_ACCESS_TOKEN={t} pulumi up --stack prod --yes",
        t,
        "pulumi up --stack prod",
    )
    t = "dp.st.prd." + rs(43)
    add(
        F,
        "doppler_service_token_env",
        f"DOPPLER_TOKEN={t} doppler run -- npm start",
        t,
        "doppler run -- npm start",
    )
    t = "hvs." + rs(24)
    add(
        F,
        "vault_token_env",
        f"VAULT_ADDR=https://vault.acme.io:8200 VAULT_TOKEN={t} vault kv list secret/",
        t,
        "vault kv list secret/",
    )
    t = uuid4()
    add(
        F,
        "consul_http_token_env",
        f"export CONSUL_HTTP_TOKEN={t}\nconsul members",
        t,
        "export CONSUL_HTTP_TOKEN=",
    )
    k = b64(32)
    add(
        F,
        "consul_gossip_encrypt_key",
        lines('datacenter = "dc1"', f'encrypt = "{k}"', 'data_dir = "/opt/consul"'),
        k,
        'datacenter = "dc1"',
    )
    t = uuid4()
    add(
        F,
        "nomad_token_env",
        f"NOMAD_TOKEN={t} nomad job run api.nomad.hcl",
        t,
        "nomad job run api.nomad.hcl",
    )
    t = "ops_" + enc64u(
        json.dumps(
            {
                "signInAddress": "my.1password.com",
                "userAuth": {
                    "method": "SRPg-4096",
                    "alg": "PBES2g-HS256",
                    "iterations": 650000,
                    "salt": b64u(16),
                },
                "email": rs(26, ANL) + "@1passwordserviceaccounts.com",
                "srpX": hx(64),
                "muk": {
                    "alg": "A256GCM",
                    "ext": False,
                    "k": b64u(32),
                    "key_ops": ["encrypt", "decrypt"],
                    "kty": "oct",
                    "kid": "mp",
                },
                "secretKey": "A3-" + rs(6, ANU) + "-" + rs(6, ANU),
                "throttleSecret": {"seed": hx(64), "uuid": rs(26, ANU)},
                "deviceUuid": rs(26, ANL),
            }
        ).encode()
    )
    add(
        F,
        "onepassword_service_account_token",
        f"export OP_SERVICE_ACCOUNT_TOKEN={t}",
        t,
        "export OP_SERVICE_ACCOUNT_TOKEN=",
    )
    t = "tskey-auth-" + rs(11) + "CNTRL-" + rs(33)
    add(
        F,
        "tailscale_auth_key",
        f"sudo tailscale up --authkey={t} --advertise-tags=tag:ci",
        t,
        "sudo tailscale up",
    )
    t = pick("123") + rs(26) + "_" + rs(21)
    add(F, "ngrok_authtoken", f"ngrok config add-authtoken {t}", t, "ngrok config add-authtoken")
    t = f"st.{uuid4()}.{hx(32)}.{hx(32)}"
    add(
        F,
        "infisical_service_token",
        f"INFISICAL_TOKEN={t} infisical run --env=prod -- ./start.sh",
        t,
        "infisical run --env=prod",
    )
    p = pw()
    add(
        F,
        "ansible_vault_password_file",
        f"$ cat ~/.ansible/vault_pass.txt\n{p}",
        p,
        "cat ~/.ansible/vault_pass.txt",
    )
    p = pw()
    add(
        F,
        "ansible_inventory_become_pass",
        f"[web]\nweb01.acme.io ansible_user=deploy ansible_become_pass='{p}'",
        p,
        "web01.acme.io ansible_user=deploy",
    )
    t = rs(64, B64U)
    add(
        F,
        "hcp_client_secret_env",
        f"HCP_CLIENT_ID={rs(32)}\nHCP_CLIENT_SECRET={t}",
        t,
        "HCP_CLIENT_SECRET=",
    )
    t = hx(32)
    add(
        F,
        "teleport_join_token",
        f"sudo teleport start --roles=node --token={t} --auth-server=teleport.acme.io:443",
        t,
        "sudo teleport start --roles=node",
    )
    t = "age1" + rs(58, BECH32)
    k = "AGE-SECRET-KEY-1" + rs(58, BECH32.upper())
    add(
        F,
        "sops_age_key_env",
        f"export SOPS_AGE_KEY={k}\nsops -d --age {t} secrets.enc.yaml",
        k,
        "export SOPS_AGE_KEY=",
    )


for _fn in (
    _database,
    _aws,
    _gcp,
    _azure,
    _cloud_other,
    _paas,
    _ci_cd,
    _containers,
    _registries,
    _vcs,
    _llm,
    _saas,
    _messaging,
    _payment,
    _auth,
    _crypto,
    _session,
    _system,
    _network,
    _tool_output,
    _chat,
    _observability,
    _feature_flags,
    _search_analytics,
    _app_secrets,
    _infra,
):
    _fn()


# ==========================================================================
# HAM
# ==========================================================================
def _ham_git() -> None:
    F = "git_sha"
    hm(
        F,
        lines(
            f"commit {hx(40)}",
            "Author: Dana Kim <dana@acme.io>",
            "Date:   Tue Jun 11 14:02:11 2024 +0200",
            "",
            "    fix(auth): retry token refresh on 401",
        ),
        lines(
            "$ git log --oneline -5",
            f"{hx(7)} (HEAD -> main, origin/main) chore(deps): bump jsonwebtoken to 9.0.2",
            f"{hx(7)} feat: rotate API keys without downtime",
            f"{hx(7)} fix: don't log Authorization header",
            f"{hx(7)} refactor(secrets): move loader to pkg/config",
            f"{hx(7)} docs: document PASSWORD_MIN_LENGTH",
        ),
        f"$ git rev-parse HEAD\n{hx(40)}",
        f"Merge: {hx(7)} {hx(7)}",
        f'HEAD is now at {hx(7)} Revert "add password reset flow"',
        f"$ git describe --tags\nv2.14.0-37-g{hx(7)}",
        lines(
            f"[main {hx(7)}] feat(auth): store only sha256 of API tokens",
            " 3 files changed, 41 insertions(+), 12 deletions(-)",
        ),
        f"index {hx(7)}..{hx(7)} 100644",
        f"   {hx(7)}..{hx(7)}  main -> main",
        f"Submodule path 'vendor/libsodium': checked out '{hx(40)}'",
        lines(
            f"pick {hx(7)} wip: secrets loader",
            f"squash {hx(7)} fixup token parsing",
            f"pick {hx(7)} test: add fixtures for password hashing",
        ),
        f"      - uses: actions/checkout@{hx(40)} # v4.1.7",
        f"$ git cherry-pick {hx(40)}\n[release/2.14 {hx(7)}] fix: mask secrets in debug output",
        f"{hx(40)}\trefs/heads/main\n{hx(40)}\trefs/tags/v2.14.0",
        f"$ git stash list\nstash@{{0}}: WIP on main: {hx(7)} wip token cache",
        f"remote: Resolving deltas: 100% (412/412), done.\nFrom github.com:acme/api\n * branch            {hx(40)} -> FETCH_HEAD",
    )


def _ham_integrity() -> None:
    F = "integrity_lockfile"
    hm(
        F,
        lines(
            '    "node_modules/jsonwebtoken": {',
            '      "version": "9.0.2",',
            '      "resolved": "https://registry.npmjs.org/jsonwebtoken/-/jsonwebtoken-9.0.2.tgz",',
            f'      "integrity": "sha512-{b64(64)}",',
        ),
        lines(
            "lodash@^4.17.21:",
            '  version "4.17.21"',
            f'  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#{hx(40)}"',
            f"  integrity sha512-{b64(64)}",
        ),
        f"    resolution: {{integrity: sha512-{b64(64)}}}",
        f'    {{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:{hx(64)}"}},',
        f"cryptography==42.0.8 \\\n    --hash=sha256:{hx(64)} \\\n    --hash=sha256:{hx(64)}",
        f"github.com/golang-jwt/jwt/v5 v5.2.1 h1:{b64(32)}\ngithub.com/golang-jwt/jwt/v5 v5.2.1/go.mod h1:{b64(32)}",
        lines(
            "[[package]]",
            'name = "ring"',
            'version = "0.17.8"',
            'source = "registry+https://github.com/rust-lang/crates.io-index"',
            f'checksum = "{hx(64)}"',
        ),
        f'            "reference": "{hx(40)}",\n            "shasum": ""',
        f"CHECKSUMS\n  bcrypt (3.1.20) sha256={hx(64)}\n  devise (4.9.4) sha256={hx(64)}",
        f"{hx(64)}  dist/acme-cli_2.14.0_linux_amd64.tar.gz",
        f'        "narHash": "sha256-{b64(32)}",',
        f'<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.3/dist/js/bootstrap.bundle.min.js" integrity="sha384-{b64(48)}" crossorigin="anonymous"></script>',
        f'  "jason": {{:hex, :jason, "1.4.1", "{hx(64)}", [:mix], [{{:decimal, "~> 1.0 or ~> 2.0", [hex: :decimal, repo: "hexpm", optional: true]}}], "hexpm", "{hx(64)}"}},',
        f"SPEC CHECKSUMS:\n  Alamofire: {hx(40)}\n  KeychainAccess: {hx(40)}",
        f'    "https://deno.land/std@0.224.0/crypto/mod.ts": "{hx(64)}",',
        f'  "version": "5.6.0",\n  "hashes": [\n    "h1:{b64(32)}",\n    "zh:{hx(64)}",',
    )


def _ham_digest() -> None:
    F = "container_digest"
    hm(
        F,
        f"FROM node:20-alpine@sha256:{hx(64)} AS build",
        f"16-alpine: Pulling from library/postgres\nDigest: sha256:{hx(64)}\nStatus: Downloaded newer image for postgres:16-alpine",
        lines(
            "REPOSITORY          TAG       IMAGE ID       CREATED        SIZE",
            f"acme/api            2.14.0    {hx(12)}   3 hours ago    212MB",
            f"postgres            16        {hx(12)}   2 weeks ago    432MB",
        ),
        lines(
            "CONTAINER ID   IMAGE          COMMAND                  STATUS         NAMES",
            f'{hx(12)}   redis:7.2      "docker-entrypoint.s…"   Up 2 minutes   cache',
        ),
        f"    image: ghcr.io/acme/api@sha256:{hx(64)}",
        f"    imageID: docker.io/library/redis@sha256:{hx(64)}",
        f"#12 writing image sha256:{hx(64)} done\n#12 naming to docker.io/acme/web:dev done",
        f"$ docker run -d --name cache -p 6379:6379 redis:7.2\n{hx(64)}",
        f'{{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:{hx(64)}", "size": 1611}}',
        f"$ crane digest ghcr.io/acme/worker:latest\nsha256:{hx(64)}",
        f"docker.io/library/nginx:1.27   application/vnd.oci.image.index.v1+json sha256:{hx(64)} 67.2 MiB linux/amd64",
        f"Verified OK\ntlog entry verified with uuid: {hx(64)} index: {num(8)}",
    )


def _ham_ids() -> None:
    F = "identifiers"
    hm(
        F,
        f"GET /api/v1/orders/{uuid4()} 200",
        f'{{"id": "{ulid()}", "type": "invoice.created", "created": "2024-06-11T10:02:33Z"}}',
        f"segment ksuid={ksuid()} offset=1882",
        f'{{"post_id": "{rs(21, B64U)}", "title": "Rotating secrets without downtime", "status": "published"}}',
        f'  "customer": "cus_{rs(14)}",\n  "payment_intent": "pi_3P{rs(22)}",\n  "charge": "ch_3P{rs(22)}",',
        f"stripe trigger payment_intent.succeeded\nReceived event evt_1P{rs(22)} [payment_intent.succeeded]",
        f'{{"object": "subscription", "id": "sub_1P{rs(22)}", "price": "price_1P{rs(22)}", "product": "prod_{rs(14)}"}}',
        f"user_id=usr_{rs(24, ANL)} session_id=ses_{rs(24, ANL)} org=org_{rs(24, ANL)}",
        f'db.users.find({{_id: ObjectId("{hx(24)}")}})',
        f'"author": {{"id": "{num(18)}", "username": "dana"}}, "channel_id": "{num(19)}"',
        f'{{"channel": "C0{rs(9, ANU)}", "user": "U0{rs(9, ANU)}", "ts": "{num(10)}.{num(6)}"}}',
        f"aws ec2 describe-instances --instance-ids i-0{hx(16)} --query 'Reservations[].Instances[].VpcId'\n\"vpc-0{hx(16)}\"",
        f"/subscriptions/{uuid4()}/resourceGroups/rg-prod/providers/Microsoft.Web/sites/acme-api",
        f"Idempotency-Key: {uuid4()}",
        f'  "node_id": "{enc64(("010:Repository" + num(9)).encode())}",',
        f"Request-Id: req_{rs(14)}",
        "db/migrate/20240611093000_add_api_keys_table.rb",
        f'{{"project_number": "{num(12)}", "project_id": "acme-prod-{num(6)}"}}',
        f"txn_{rs(20, ANU)} settled amount=42.00 EUR",
    )


def _ham_tracing() -> None:
    F = "tracing"
    hm(
        F,
        f"traceparent: 00-{hx(32)}-{hx(16)}-01",
        f"X-Request-Id: {uuid4()}",
        f"x-amz-request-id: {HX(16)}\nx-amz-id-2: {b64(56)}",
        f"CF-Ray: {hx(16)}-FRA",
        f"X-Cloud-Trace-Context: {hx(32)}/{num(19)};o=1",
        json.dumps(
            {
                "level": "error",
                "msg": "upstream timeout",
                "trace_id": hx(32),
                "span_id": hx(16),
                "service": "checkout",
            }
        ),
        f"uber-trace-id: {hx(16)}:{hx(16)}:0:1",
        f"x-datadog-trace-id: {num(19)}\nx-datadog-parent-id: {num(19)}",
        f"b3: {hx(32)}-{hx(16)}-1",
        f"Sentry event captured: {hx(32)}",
        f"X-GitHub-Request-Id: {HX(4)}:{HX(6)}:{HX(7)}:{HX(7)}:{HX(8)}",
        f"x-vercel-id: fra1::iad1::{rs(5, ANL)}-{num(13)}-{hx(12)}",
        f"h2 2024-06-11T10:15:00.123456Z app/acme-alb/{hx(16)} 10.0.1.5:51234 10.0.2.7:8080 0.001 0.012 0.000 200 200 "
        f'312 1024 "GET https://api.acme.io:443/healthz HTTP/2.0" "curl/8.5.0" - - "Root=1-{hx(8)}-{hx(24)}"',
        f"otel span exported name=HTTP GET /v1/tokens span_id={hx(16)} parent={hx(16)} duration=3.2ms",
    )


def _ham_public() -> None:
    F = "public_key_material"
    hm(
        F,
        ssh_ed25519_pub("dana@laptop"),
        ssh_rsa_pub("ci@build-01"),
        f"github.example.com {ssh_ed25519_pub('').strip()}",
        f"|1|{b64(20)}|{b64(20)} ecdsa-sha2-nistp256 {ecdsa_pub_blob()}",
        f"$ ssh-keygen -lf ~/.ssh/id_ed25519.pub\n256 SHA256:{b64(32).rstrip('=')} dana@laptop (ED25519)",
        f"The key fingerprint is:\nSHA256:{b64(32).rstrip('=')} deploy@ci\nThe key's randomart image is:",
        pem(
            "PUBLIC KEY",
            bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d03010703420004")
            + R.randbytes(64),
        )[0],
        pem("CERTIFICATE", bytes.fromhex("308201d130820177a003020102021411") + R.randbytes(300))[0],
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
        + wrap(enc64(b"\x98\x33\x04" + R.randbytes(150)))
        + "\n="
        + b64(3)
        + "\n-----END PGP PUBLIC KEY BLOCK-----",
        lines(
            "$ gpg --list-keys dana@acme.io",
            "pub   ed25519 2024-01-15 [SC] [expires: 2026-01-14]",
            f"      {HX(40)}",
            "uid           [ultimate] Dana Kim <dana@acme.io>",
            "sub   cv25519 2024-01-15 [E]",
        ),
        f"# public key: age1{rs(58, BECH32)}",
        lines(
            "[Peer]",
            f"PublicKey = {b64(32)}",
            "AllowedIPs = 10.8.0.0/24",
            "Endpoint = vpn.acme.io:51820",
            "PersistentKeepalive = 25",
        ),
        lines("untrusted comment: minisign public key " + HX(16), enc64(b"Ed" + R.randbytes(40))),
        f'Public-Key-Pins: pin-sha256="{b64(32)}"; pin-sha256="{b64(32)}"; max-age=5184000',
        'default._domainkey.acme.io. 3600 IN TXT "v=DKIM1; k=rsa; p='
        + enc64(
            bytes.fromhex("30820122300d06092a864886f70d01010105000382010f003082010a0282010100")
            + R.randbytes(270)
        )
        + '"',
        f'command="/usr/local/bin/backup-only",no-pty,no-port-forwarding {ssh_ed25519_pub("backup@nas")}',
        f"gpg: Signature made Tue 11 Jun 2024 10:02:11 AM CEST\ngpg:                using EDDSA key {HX(40)}\n"
        'gpg: Good signature from "Dana Kim <dana@acme.io>" [ultimate]',
        f"sha256 fingerprint: {':'.join(HX(2) for _ in range(32))}",
    )


def _ham_jwks() -> None:
    F = "jwks_public"
    hm(
        F,
        json.dumps(
            {
                "keys": [
                    {
                        "kty": "RSA",
                        "use": "sig",
                        "alg": "RS256",
                        "kid": hx(40),
                        "n": b64u(256),
                        "e": "AQAB",
                    }
                ]
            }
        ),
        json.dumps(
            {
                "kty": "EC",
                "crv": "P-256",
                "kid": "sig-" + hx(8),
                "use": "sig",
                "x": b64u(32),
                "y": b64u(32),
            },
            indent=2,
        ),
        json.dumps({"kty": "OKP", "crv": "Ed25519", "x": b64u(32), "kid": ulid()}),
        json.dumps(
            {
                "keys": [
                    {
                        "kty": "RSA",
                        "kid": rs(22, B64U),
                        "x5t": b64u(20),
                        "e": "AQAB",
                        "n": b64u(256),
                        "x5c": [b64(600)],
                    }
                ]
            }
        ),
        '  "issuer": "https://auth.acme.io/",\n  "jwks_uri": "https://auth.acme.io/.well-known/jwks.json",\n'
        '  "id_token_signing_alg_values_supported": ["RS256", "ES256"]',
    )


def _ham_publishable() -> None:
    F = "publishable_keys"
    hm(
        F,
        f'const stripe = await loadStripe("pk_live_51{rs(96)}");',
        f"NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=pk_test_51{rs(96)}",
        f'const searchClient = algoliasearch("{rs(10, ANU)}", "{hx(32)}"); // search-only API key, safe for the browser',
        f"mapboxgl.accessToken = 'pk.{enc64u(json.dumps({'u': 'acme', 'a': rs(25, ANL)}, separators=(',', ':')).encode())}.{rs(22, B64U)}';",
        f"posthog.init('phc_{rs(43)}', {{ api_host: 'https://eu.i.posthog.com' }})",
        f"NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=pk_live_{enc64(b'clerk.acme.io$')}",
        f"NEXT_PUBLIC_SUPABASE_PUBLISHABLE_KEY=sb_publishable_{rs(22, B64U)}_{rs(8, B64U)}",
        f'<div class="g-recaptcha" data-sitekey="6L{rs(38, B64U)}"></div>',
        f"gtag('config', 'G-{rs(10, ANU)}');  <!-- GTM-{rs(7, ANU)} -->",
        f"const ldClient = LDClient.initialize('{hx(24)}', context); // client-side ID",
        "Publishable keys (pk_live_/pk_test_) are safe to ship in the browser bundle.",
    )


def _ham_env_ref() -> None:
    F = "env_reference"
    hm(
        F,
        "DB_PASSWORD=${DB_PASSWORD}",
        "      POSTGRES_PASSWORD: ${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}",
        'export GITHUB_TOKEN="$(gh auth token)"',
        'mysql -h "$DB_HOST" -u root -p"$MYSQL_ROOT_PASSWORD" < schema.sql',
        'set "API_KEY=%API_KEY%" && node server.js',
        "az login --service-principal -u $env:AZURE_CLIENT_ID -p $env:AZURE_CLIENT_SECRET --tenant $env:AZURE_TENANT_ID",
        'api_key = os.environ["OPENAI_API_KEY"]',
        'const token = process.env.SLACK_BOT_TOKEN ?? "";',
        'token := os.Getenv("GITHUB_TOKEN")',
        'let key = std::env::var("STRIPE_SECRET_KEY").expect("STRIPE_SECRET_KEY not set");',
        'String pw = System.getenv("DB_PASSWORD");',
        'Rails.application.config.secret_key_base = ENV.fetch("SECRET_KEY_BASE")',
        "  password: {{ .Values.postgresql.auth.password | quote }}",
        'ansible_become_pass: "{{ vault_become_pass }}"',
        "  password = var.db_password",
        "          NODE_AUTH_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "docker login -u gitlab-ci-token -p $CI_JOB_TOKEN $CI_REGISTRY",
        "spring.datasource.password=${DB_PASSWORD:}",
        '    "Password": "#{DbPassword}#"',
        "          value: $(DB_PASSWORD)",
        "EnvironmentFile=/etc/acme/secrets.env",
        'curl -H "Authorization: Bearer ${GITHUB_TOKEN}" https://api.github.com/user',
        "$password = getenv('DB_PASSWORD') ?: throw new RuntimeException('DB_PASSWORD missing');",
        'var conn = builder.Configuration.GetConnectionString("Default");',
        "PGPASSWORD=$(cat /run/secrets/pg_password) pg_dump -h db -U app app > app.sql",
    )


def _ham_secret_ref() -> None:
    F = "secret_reference"
    hm(
        F,
        f"arn:aws:secretsmanager:eu-west-1:{num(12)}:secret:prod/db/password-{rs(6)}",
        lines(
            "        env:",
            "          - name: DB_PASSWORD",
            "            valueFrom:",
            "              secretKeyRef:",
            "                name: db-credentials",
            "                key: password",
        ),
        'op read "op://Engineering/Postgres Prod/password"',
        "DB_PASSWORD=op://dev/postgres/password\nSTRIPE_KEY=op://dev/stripe/secret_key",
        "  STRIPE_KEY: vault:secret/data/payments#stripe_key",
        '      MasterUserPassword: "{{resolve:secretsmanager:prod/db:SecretString:password}}"',
        "      MasterUserPassword: !Ref DBPassword",
        f"projects/{num(12)}/secrets/db-password/versions/latest",
        "@Microsoft.KeyVault(SecretUri=https://kv-acme-prod.vault.azure.net/secrets/DbPassword/)",
        lines(
            "  data:",
            "    - secretKey: api-token",
            "      remoteRef:",
            "        key: prod/api",
            "        property: token",
        ),
        "DB_PASSWORD=ref+vault://secret/data/app#/db_password",
        "spring.datasource.password=${sm://db-password}",
        "aws ssm get-parameter --name /prod/db/password --with-decryption --query Parameter.Value --output text",
        'data "aws_secretsmanager_secret_version" "db" {\n  secret_id = "prod/db"\n}',
        "doppler run --project api --config prd -- npm start",
        "{{ssm-secure:/prod/db/password}}",
        "  password: ENV['DATABASE_PASSWORD'] # loaded from AWS Secrets Manager at boot",
    )


def _ham_placeholder() -> None:
    F = "placeholder_masked"
    hm(
        F,
        "OPENAI_API_KEY=sk-...",
        "password: ********",
        '"token": "<redacted>"',
        "STRIPE_SECRET_KEY=sk_live_REPLACE_ME",
        "license_key: xxxx-xxxx-xxxx-xxxx",
        "GITHUB_TOKEN=ghp_" + "X" * 36,
        "AWS_SECRET_ACCESS_KEY=<your-secret-access-key>",
        'api_key: "your-api-key-here"',
        "Authorization: Bearer <token>",
        "DATABASE_URL=postgres://USER:PASSWORD@HOST:5432/DBNAME",
        "mongodb://<username>:<password>@localhost:27017/?authSource=admin",
        "sk-proj-" + "*" * 32,
        "2024-06-12T10:14:03.1240188Z   NODE_AUTH_TOKEN: ***",
        "  - Token: gho_************************************",
        lines(
            "$ aws configure list",
            "      Name                    Value             Type    Location",
            "      ----                    -----             ----    --------",
            "   profile                <not set>             None    None",
            f"access_key     ****************{rs(4, ANU)} shared-credentials-file",
            f"secret_key     ****************{rs(4, AN)} shared-credentials-file",
        ),
        'export API_TOKEN=""',
        '{"username": "app", "password": null}',
        "SLACK_BOT_TOKEN=xoxb-your-bot-token",
        "REDIS_PASSWORD=",
        "[REDACTED] Authorization header removed from log line",
        "export ANTHROPIC_API_KEY=sk-ant-xxxxxxxx",
        "pk_live_•••• last4 Wq9c rotated 2024-06-01",
    )


def _ham_policy_ui() -> None:
    F = "password_policy_ui"
    hm(
        F,
        "Password must be at least 12 characters and include a number and a symbol.",
        '<input type="password" name="password" autocomplete="current-password" required minlength="12">',
        '  "forgot_password": "Passwort vergessen?",',
        "error.invalid_token = Your session has expired. Please sign in again.",
        "PASSWORD_MIN_LENGTH = 12",
        lines(
            "AUTH_PASSWORD_VALIDATORS = [",
            "    {'NAME': 'django.contrib.auth.password_validation.MinimumLengthValidator', 'OPTIONS': {'min_length': 12}},",
            "    {'NAME': 'django.contrib.auth.password_validation.CommonPasswordValidator'},",
            "]",
        ),
        "Your new password cannot be the same as any of your last 5 passwords.",
        'msgid "Password"\nmsgstr "Mot de passe"',
        'SecureField("Password", text: $password)',
        '<TextField type="password" label="Password" value={password} onChange={e => setPassword(e.target.value)} />',
        '"PasswordPolicy": {"MinimumLength": 12, "RequireUppercase": true, "RequireSymbols": true, "TemporaryPasswordValidityDays": 7}',
        "Enter the 6-digit code from your authenticator app.",
        'placeholder="sk-..." aria-label="OpenAI API key"',
        "La contraseña debe tener al menos 8 caracteres.",
        "パスワードは8文字以上で入力してください。",
    )


def _ham_code() -> None:
    F = "secret_handling_code"
    hm(
        F,
        "hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12))",
        "if not hmac.compare_digest(expected_sig, received_sig):\n    raise PermissionDenied('bad signature')",
        'password = getpass.getpass("Vault password: ")',
        "def verify_password(plain: str, hashed: str) -> bool:\n    return pwd_context.verify(plain, hashed)",
        "if err := bcrypt.CompareHashAndPassword([]byte(user.PasswordHash), []byte(req.Password)); err != nil {",
        "const token = crypto.randomBytes(32).toString('hex');",
        "reset_token = secrets.token_urlsafe(32)",
        'claims = jwt.decode(token, key=public_key, algorithms=["RS256"], audience="api")',
        'if (!/^sk_live_[0-9a-zA-Z]{24,}$/.test(key)) throw new Error("invalid key");',
        lines(
            "[[rules]]",
            'id = "aws-access-key"',
            "regex = '''(A3T[A-Z0-9]|AKIA|ASIA)[A-Z0-9]{16}'''",
            'keywords = ["akia", "asia"]',
        ),
        "let hash = argon2.hash_password(password.as_bytes(), &salt)?.to_string();",
        'String token = request.getHeader("Authorization").substring("Bearer ".length());',
        'headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}',
        'var secret = builder.Configuration["Jwt:Secret"] ?? throw new InvalidOperationException("Jwt:Secret");',
        "$hash = password_hash($password, PASSWORD_ARGON2ID);",
        'REDACT = re.compile(r"(?i)(password|token|secret)=\\S+")',
        "user.password_digest = BCrypt::Password.create(params[:password])",
        "func (c *Client) SetToken(token string) { c.token = token }",
        "assert len(api_key) == 40, 'expected a 40-char key'",
        'const [password, setPassword] = useState("");',
    )


def _ham_login() -> None:
    F = "login_prompt_commands"
    hm(
        F,
        'echo "$CR_PAT" | docker login ghcr.io -u USERNAME --password-stdin',
        "$ npm login --registry=https://npm.pkg.github.com\nUsername: dana\nPassword:\nEmail: (this IS public) dana@acme.io",
        "gh auth login --hostname github.com --git-protocol ssh --web",
        "$ psql -h db.internal -U app -W\nPassword for user app: ",
        "$ mysql -u root -p\nEnter password: ",
        "vault login -method=oidc role=dev",
        "$ aws configure\nAWS Access Key ID [None]: \nAWS Secret Access Key [None]: \nDefault region name [None]: eu-west-1",
        "az login --use-device-code",
        "gcloud auth login --no-launch-browser",
        '$ ssh-keygen -t ed25519 -C "dana@laptop"\nEnter passphrase (empty for no passphrase): \nEnter same passphrase again: ',
        "Enter passphrase for key '/home/dana/.ssh/id_ed25519': ",
        "[sudo] password for dana: ",
        "kubectl create secret generic db-creds --from-env-file=.env.prod --dry-run=client -o yaml | kubeseal -o yaml > sealed.yaml",
        "$ op signin\nEnter the password for dana@acme.io at my.1password.com: ",
        "$ heroku login -i\nheroku: Enter your login credentials\nEmail: dana@acme.io\nPassword: ",
        "$ cargo login\nplease paste the token found on https://crates.io/me below",
        "$ twine upload dist/*\nUploading distributions to https://upload.pypi.org/legacy/\nEnter your API token: ",
        "$ npx wrangler secret put STRIPE_KEY\n? Enter a secret value: › ********",
        "$ read -rs -p 'DB password: ' PGPASSWORD && export PGPASSWORD",
    )


def _ham_encrypted() -> None:
    F = "encrypted_at_rest"

    def enc(n) -> str:
        return f"ENC[AES256_GCM,data:{b64(n)},iv:{b64(32)},tag:{b64(16)},type:str]"

    hm(
        F,
        lines(
            "db:",
            f"    user: {enc(3)}",
            f"    password: {enc(18)}",
            "sops:",
            "    age:",
            f"        - recipient: age1{rs(58, BECH32)}",
            '    lastmodified: "2024-06-11T10:02:33Z"',
            f"    mac: {enc(32)}",
            "    version: 3.8.1",
        ),
        json.dumps(
            {
                "api_token": enc(40),
                "sops": {"version": "3.8.1", "lastmodified": "2024-06-11T10:02:33Z"},
            },
            indent=2,
        ),
        f"DB_PASSWORD={enc(20)}",
        "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(hx(80) for _ in range(5)),
        lines(
            "vault_db_password: !vault |",
            "          $ANSIBLE_VAULT;1.1;AES256",
            *["          " + hx(80) for _ in range(4)],
        ),
        lines(
            "apiVersion: bitnami.com/v1alpha1",
            "kind: SealedSecret",
            "metadata:",
            "  name: db-credentials",
            "spec:",
            "  encryptedData:",
            "    password: " + enc64(bytes([2, 0]) + R.randbytes(420)),
        ),
        "-----BEGIN AGE ENCRYPTED FILE-----\n"
        + wrap(enc64(b"age-encryption.org/v1\n-> X25519 " + R.randbytes(160)))
        + "\n-----END AGE ENCRYPTED FILE-----",
        "-----BEGIN PGP MESSAGE-----\n\n"
        + wrap(enc64(b"\x84\x5e\x03" + R.randbytes(200)))
        + "\n="
        + b64(3)
        + "\n-----END PGP MESSAGE-----",
        f"{b64(240)}--{b64(12)}--{b64(16)}",
        lines("env:", "  global:", f'    - secure: "{b64(256)}"'),
        f'HELLO="encrypted:{b64(120)}"\nDOTENV_PUBLIC_KEY="02{hx(64)}"',
        json.dumps(
            {
                "id": "aws",
                "password": {
                    "encrypted_data": b64(64),
                    "iv": b64(12),
                    "auth_tag": b64(16),
                    "version": 3,
                    "cipher": "aes-256-gcm",
                },
            },
            indent=2,
        ),
    )


def _ham_media() -> None:
    F = "base64_media"
    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00\x1f\xf3\xffa"
        + R.randbytes(180)
    )
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M12 2L2 7l10 5 10-5-10-5z"/></svg>'
    hm(
        F,
        f'.logo {{ background: url("data:image/png;base64,{enc64(png)}"); }}',
        '<img alt="" src="data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7">',
        f"  src: url(data:font/woff2;base64,{enc64(b'wOF2' + R.randbytes(300))}) format('woff2');",
        f'<link rel="icon" href="data:image/svg+xml;base64,{enc64(svg)}">',
        f"data:image/x-icon;base64,{enc64(bytes.fromhex('000001000100101000000100200068040000160000002800000010000000200000000100200000000000') + R.randbytes(120))}",
        f'"thumbnail": "data:image/jpeg;base64,{enc64(bytes.fromhex("ffd8ffe000104a46494600010100000100010000") + R.randbytes(200))}"',
        f'ICON_PNG = base64.b64decode(\n    "{enc64(png)}"\n)',
        f'"preview": "data:image/webp;base64,{enc64(b"RIFF" + R.randbytes(4) + b"WEBPVP8 " + R.randbytes(160))}"',
        f"attachment.pdf: {enc64(b'%PDF-1.7' + bytes([10]) + R.randbytes(150))}",
    )


def _ham_fixture() -> None:
    F = "test_fixture_hashes"
    hm(
        F,
        f'EXPECTED_SHA256 = "{hx(64)}"',
        f'assert hashlib.md5(data).hexdigest() == "{hx(32)}"',
        f"checksum: sha1:{hx(40)}",
        json.dumps({"file": "testdata/large.bin", "sha256": hx(64), "size": 1048576}),
        f'\t\t{{name: "empty-body", want: "{hx(64)}"}}, // sha256 of testdata/empty.json',
        f'expect(sha1(fixture)).toBe("{hx(40)}"); // sha1 of __fixtures__/invoice.pdf',
        'key = bytes.fromhex("0b" * 20)  # RFC 4231 test case 1',
        f'"ETag": "\\"{hx(32)}\\""',
        f"Content-MD5: {b64(16)}",
        f"xxh64: {hx(16)}  assets/bundle.js",
        f"{hx(128)}  node-v20.14.0-linux-x64.tar.xz",
        f'<sha256 value="{hx(64)}" origin="Generated by Gradle"/>',
        f"blake3 {hx(64)} target/release/acme",
        f"    snapshot_hash: {hx(16)}  # regenerate with `make snapshots`",
        f"crc32c={b64(4)} md5={b64(16)}",
    )


def _ham_cache() -> None:
    F = "ci_cache_keys"
    hm(
        F,
        "          key: ${{ runner.os }}-pnpm-${{ hashFiles('**/pnpm-lock.yaml') }}",
        f"Cache restored from key: Linux-node-{hx(64)}",
        f"Cache saved with key: node-cache-Linux-x64-npm-{hx(64)}",
        f"Checking cache for deps-{hx(40)}-protected...\nSuccessfully extracted cache",
        '      - restore_cache:\n          keys:\n            - v1-deps-{{ checksum "package-lock.json" }}',
        f"Found a cache from build 4521 at v1-deps-{b64(32)}",
        f"remote cache hit for action digest {hx(64)}/142",
        f"api:build: cache hit, replaying logs {hx(16)}",
        "docker buildx build --cache-from type=registry,ref=ghcr.io/acme/api:buildcache --cache-to type=registry,ref=ghcr.io/acme/api:buildcache,mode=max .",
        f"sccache: Cache hits: 1423  Cache misses: 12  key={hx(40)}",
    )


def _ham_tags() -> None:
    F = "docker_tags_semver"
    hm(
        F,
        "    image: ghcr.io/acme/api:1.42.0-rc.3+build.1877",
        "FROM node:20.11.1-alpine3.19",
        "FROM python:3.12.4-slim-bookworm AS base",
        f"\tgithub.com/acme/lib v0.0.0-20240611093000-{hx(12)}",
        "version: 1.0.0+20130313144700",
        f'version = "2.3.0-beta.2+exp.sha.{hx(7)}"',
        f"registry.gitlab.com/acme/web:main-{hx(8)}",
        f"Successfully tagged acme/worker:sha-{hx(7)}",
        f"helm upgrade --install api ./chart -n prod --set image.tag={hx(40)}",
        f'  "version": "0.0.0-nightly.20240611.{hx(7)}",',
        f'__version__ = "1.4.2.dev37+g{hx(7)}"',
        "ii  openssl  3.0.13-0ubuntu3.1  amd64  Secure Sockets Layer toolkit - cryptographic utility",
        f"kubectl set image deployment/api api=acme/api:2024.06.11-{hx(7)}",
    )


def _ham_tokens() -> None:
    F = "llm_token_counts"
    hm(
        F,
        "tokens: 1234",
        "response = client.messages.create(model=model, max_tokens=4096, messages=msgs)",
        '"usage": {"prompt_tokens": 812, "completion_tokens": 231, "total_tokens": 1043}',
        "Total tokens: 12,345 (input 10,001 / output 2,344)",
        '{"token_type": "Bearer", "expires_in": 3599, "scope": "repo"}',
        ">>> enc.encode('hello world')\n[15339, 1917]",
        "cl100k_base: 87 tokens",
        "usage: input_tokens=1520 output_tokens=388 cache_read_input_tokens=12000",
        "context_window = 200_000",
        "Rate limit reached: 40,000 tokens per minute (TPM). Please try again in 1.2s.",
        '  "max_output_tokens": 8192,',
        '    "<|endoftext|>": 100257,',
        "x-ratelimit-remaining-tokens: 149984\nx-ratelimit-reset-tokens: 6ms",
        "llama_print_timings: prompt eval time = 812.33 ms / 512 tokens (1.59 ms per token)",
        "token_budget: 32000  # per agent turn",
    )


def _ham_http() -> None:
    F = "http_logs"
    hm(
        F,
        '203.0.113.7 - - [11/Jun/2024:10:00:01 +0000] "GET /api/v1/users/42 HTTP/1.1" 200 512 "-" "Mozilla/5.0"',
        "GET /api/v1/users/42 200 12.3ms",
        'HTTP/1.1 401 Unauthorized\nWWW-Authenticate: Bearer realm="api", error="invalid_token"',
        "POST /oauth/token 400 invalid_grant (refresh token expired)",
        '10.0.0.12 - - [11/Jun/2024:10:00:02 +0000] "GET /search?q=password+reset&page=2&per_page=50 HTTP/1.1" 200 9911',
        '127.0.0.1 - - [11/Jun/2024:10:00:01 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"',
        json.dumps(
            {
                "level": "info",
                "msg": "request",
                "method": "GET",
                "path": "/v1/tokens",
                "status": 200,
                "duration_ms": 3,
            }
        ),
        "< HTTP/2 200\n< content-type: application/json\n< x-ratelimit-remaining: 4999",
        "Set-Cookie: theme=dark; Path=/; SameSite=Lax",
        f"Cookie: _ga=GA1.1.{num(10)}.{num(10)}; cookie_consent=accepted",
        "127.0.0.1:8080 POST /api/login 302 -> /dashboard 41ms",
        '[GIN] 2024/06/11 - 10:00:01 | 403 |     182.5µs |   10.0.0.5 | DELETE   "/api/keys/17"',
        "HTTP/1.1 429 Too Many Requests\nRetry-After: 30",
    )


def _ham_paths() -> None:
    F = "file_paths"
    hm(
        F,
        "chmod 600 ~/.pgpass ~/.netrc ~/.my.cnf",
        lines(
            "$ ls -la ~/.ssh",
            "-rw------- 1 dana dana  411 Jun 11 09:12 id_ed25519",
            "-rw-r--r-- 1 dana dana  100 Jun 11 09:12 id_ed25519.pub",
            "-rw-r--r-- 1 dana dana 2210 Jun 10 18:40 known_hosts",
        ),
        "    ssl_certificate_key /etc/ssl/private/api.acme.io.key;",
        "Host bastion\n    HostName bastion.acme.io\n    User ops\n    IdentityFile ~/.ssh/id_ed25519_deploy",
        "GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json",
        lines(
            ".env", ".env.*", "!.env.example", "*.pem", "*.p12", "secrets/", "terraform.tfstate*"
        ),
        "COPY --chown=app:app config/secrets.example.yaml /app/config/secrets.yaml",
        "        volumeMounts:\n          - name: tls\n            mountPath: /etc/tls\n            readOnly: true",
        'db_password = open("/run/secrets/db_password").read().strip()',
        "export KUBECONFIG=~/.kube/config:~/.kube/prod.yaml",
        'find . -name "*.p12" -o -name "*.jks" -o -name "id_rsa*"',
        "ls ~/.aws\nconfig  credentials  sso",
        "vim ~/.docker/config.json ~/.npmrc ~/.pypirc ~/.m2/settings.xml",
    )


def _ham_help() -> None:
    F = "cli_help_text"
    hm(
        F,
        "      --password string     the password to use for authentication",
        "  -p, --token TOKEN         API token (env: API_TOKEN)",
        "      --client-secret string   OAuth2 client secret (prefer --client-secret-file)",
        "  -p, --password[=name] Password to use when connecting to server. If password is not given it's asked from the tty.",
        "Usage: vault login [options] [AUTH K=V...]",
        "  --secret-access-key TEXT  AWS secret access key. Defaults to $AWS_SECRET_ACCESS_KEY.",
        "  -k, --api-key=<key>       Datadog API key",
        "  -p, --password string   Password\n      --password-stdin    Take the password from stdin",
        "      --password string          The password of an account to authenticate",
        "PGPASSWORD behaves the same as the password connection parameter. Use of this environment variable is not recommended for security reasons.",
        'Flags:\n  -t, --token string   Authentication token (default "")',
        "  --auth-token <TOKEN>   Sentry auth token [env: SENTRY_AUTH_TOKEN=]",
        "usage: twine upload [-h] [-r REPOSITORY] [-u USERNAME] [-p PASSWORD] dist [dist ...]",
    )


def _ham_sql() -> None:
    F = "sql_password_columns"
    hm(
        F,
        "SELECT id, email, password_hash FROM users WHERE email = $1;",
        "ALTER TABLE users ADD COLUMN password_digest varchar(255) NOT NULL DEFAULT '';",
        "UPDATE users SET reset_password_token = NULL, reset_password_sent_at = NULL WHERE id = ?;",
        "CREATE TABLE api_keys (id uuid PRIMARY KEY, key_prefix text NOT NULL, key_hash bytea NOT NULL, created_at timestamptz DEFAULT now());",
        "\\set pw `cat /run/secrets/app_pw`\nCREATE ROLE app LOGIN PASSWORD :'pw';",
        "INSERT INTO oauth_tokens (user_id, access_token_enc, expires_at) VALUES ($1, pgp_sym_encrypt($2, current_setting('app.key')), $3);",
        '      t.string :encrypted_password, null: false, default: ""',
        "SELECT rolname, rolpassword IS NOT NULL AS has_pw FROM pg_authid;",
        "EXPLAIN ANALYZE SELECT * FROM sessions WHERE token_hash = decode($1, 'hex');",
        "DELETE FROM password_resets WHERE created_at < now() - interval '1 hour';",
        "GRANT SELECT (id, email) ON users TO analyst;  -- no access to password columns",
        "SELECT user, host, plugin, authentication_string IS NOT NULL FROM mysql.user;",
        "ALTER USER app WITH PASSWORD NULL;",
    )


def _ham_config() -> None:
    F = "config_non_secret"
    fp = ":".join(hx(2) for _ in range(16))
    hm(
        F,
        "PasswordAuthentication no\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes",
        "token_ttl: 3600\nrefresh_token_ttl: 2592000",
        "auth_type: password",
        "session_cookie_secure = true",
        "secret_name: db-credentials",
        f"[DEFAULT]\nuser=ocid1.user.oc1..aaaaaaaa{rs(52, ANL)}\nfingerprint={fp}\nkey_file=~/.oci/oci_api_key.pem\nregion=eu-frankfurt-1",
        "jwt:\n  algorithm: RS256\n  issuer: https://auth.acme.io/\n  audience: api",
        "[auth]\nmethod = oauth\ntoken_url = https://auth.acme.io/oauth/token",
        "spring.security.oauth2.resourceserver.jwt.jwk-set-uri=https://auth.acme.io/.well-known/jwks.json",
        'vault {\n  address     = "https://vault.acme.io:8200"\n  auth_method = "kubernetes"\n}',
        "max_password_age_days = 90",
        "encryption:\n  enabled: true\n  algorithm: AES256",
        "KEY_ROTATION_INTERVAL=30d",
        f"[profile prod]\nrole_arn = arn:aws:iam::{num(12)}:role/Deployer\nsource_profile = default\nregion = eu-west-1",
        "credential_process = aws-vault exec prod --json",
        '[credential "https://github.com"]\n\thelper = !/usr/bin/gh auth git-credential',
        "require_mfa: true\npassword_reset_url: https://id.acme.io/reset",
        "[client]\nprotocol=tcp\nssl-mode=REQUIRED",
    )


def _ham_k8s() -> None:
    F = "k8s_nonsecret"
    hm(
        F,
        lines(
            "apiVersion: v1",
            "kind: ConfigMap",
            "metadata:",
            "  name: api-config",
            "data:",
            "  LOG_LEVEL: info",
            '  PASSWORD_MIN_LENGTH: "12"',
            "  TOKEN_ISSUER: https://auth.acme.io/",
        ),
        lines(
            "$ kubectl describe secret db-credentials",
            "Name:         db-credentials",
            "Type:  Opaque",
            "",
            "Data",
            "====",
            "password:  24 bytes",
            "username:  3 bytes",
        ),
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: deployer\nautomountServiceAccountToken: false",
        "          envFrom:\n            - secretRef:\n                name: app-secrets",
        "      imagePullSecrets:\n        - name: regcred",
        'rules:\n  - apiGroups: [""]\n    resources: ["secrets"]\n    verbs: ["get", "list"]',
        "$ kubectl get secrets\nNAME             TYPE     DATA   AGE\ndb-credentials   Opaque   2      41d",
        '      objects: |\n        - objectName: "prod/db/password"\n          objectType: "secretsmanager"',
        f"$ fly secrets list\nNAME            DIGEST              CREATED AT\nDATABASE_URL    {hx(16)}    2m ago",
        '  + resource "aws_db_instance" "main" {\n      + password = (sensitive value)',
        "secret/db-credentials created\nsealedsecret.bitnami.com/api-secrets configured",
    )


def _ham_hex_misc() -> None:
    F = "hex_noise_misc"
    hm(
        F,
        f"panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation addr=0x0 pc=0x{hx(6)}]",
        "goroutine 1 [running]:\nmain.main()\n\t/app/main.go:42 +0x1d",
        "  --color-primary: #1f2937;\n  --color-accent: #f59e0b;",
        f"link/ether {':'.join(hx(2) for _ in range(6))} brd ff:ff:ff:ff:ff:ff",
        f"inet6 fe80::{hx(4)}:{hx(4)}:{hx(4)}:{hx(4)}/64 scope link",
        f"bin/acme: ELF 64-bit LSB pie executable, x86-64, BuildID[sha1]={hx(40)}, stripped",
        f"tx hash 0x{hx(64)} from 0x{hx(40)} (block {num(8)})",
        f"bc1q{rs(38, BECH32)}",
        f"HKEY_CLASSES_ROOT\\CLSID\\{{{uuid4().upper()}}}",
        f"ipfs://bafybei{rs(52, B32L)}",
        f"<__main__.TokenCache object at 0x{hx(12)}>",
        f'UUID="{uuid4()}" TYPE="crypto_LUKS"',
        f"java.lang.IllegalStateException: token expired at com.acme.auth.TokenService@{hx(8)}",
        f"coverage: 87.3% of statements\nok  \tgithub.com/acme/api/internal/secrets\t0.{num(3)}s",
    )


def _ham_prose() -> None:
    F = "chat_prose_nonsecret"
    hm(
        F,
        "The password is stored in Vault under secret/data/prod/db — don't paste it here, just read it at runtime.",
        "Das Passwort liegt im Vault, bitte nicht ins Repo committen.",
        "Le mot de passe est dans 1Password (coffre Infra), je ne le colle pas ici.",
        "La contraseña está en el gestor de secretos; usa la variable DB_PASSWORD.",
        "can you rotate the Stripe key? the old one leaked in a CI log yesterday",
        "数据库密码在 Vault 里，不要写进代码。",
        "APIキーは環境変数 OPENAI_API_KEY から読み込んでください。",
        "I set the token as a GitHub Actions secret called NPM_TOKEN, the workflow should pick it up.",
        "we use `aws sso login` now, no more long-lived access keys",
        "Il token scade dopo 15 minuti, poi serve il refresh.",
        "Het wachtwoord moet minstens 12 tekens lang zijn.",
        "please make sure the password field is hashed with argon2id before it hits the DB",
    )


for _fn in (
    _ham_git,
    _ham_integrity,
    _ham_digest,
    _ham_ids,
    _ham_tracing,
    _ham_public,
    _ham_jwks,
    _ham_publishable,
    _ham_env_ref,
    _ham_secret_ref,
    _ham_placeholder,
    _ham_policy_ui,
    _ham_code,
    _ham_login,
    _ham_encrypted,
    _ham_media,
    _ham_fixture,
    _ham_cache,
    _ham_tags,
    _ham_tokens,
    _ham_http,
    _ham_paths,
    _ham_help,
    _ham_sql,
    _ham_config,
    _ham_k8s,
    _ham_hex_misc,
    _ham_prose,
):
    _fn()


# ==========================================================================
# build + checks
# ==========================================================================
def _check() -> None:
    assert len(SECRETS) >= 220, len(SECRETS)
    fmts = {s.fmt for s in SECRETS}
    assert len(fmts) >= 80, len(fmts)
    assert len(fmts) == len(SECRETS), "fmt labels must be unique"
    assert len(HAM) >= 250, len(HAM)
    assert len({h.family for h in HAM}) >= 20
    for s in SECRETS:
        assert s.secret, s.fmt
        assert s.secret in s.text, s.fmt
        if s.keep:
            assert s.keep in s.text.replace(s.secret, ""), s.fmt
            assert s.secret not in s.keep, s.fmt
    ham_blob = "\n\x00\n".join(h.text for h in HAM)
    for s in SECRETS:
        assert s.secret not in ham_blob, f"secret of {s.fmt} appears in ham"
    assert len({h.text for h in HAM}) == len(HAM), "duplicate ham"


_check()


if __name__ == "__main__":
    sc = Counter(s.family for s in SECRETS)
    hc = Counter(h.family for h in HAM)
    print(
        f"SECRETS: {len(SECRETS)} over {len({s.fmt for s in SECRETS})} fmt labels, {len(sc)} families"
    )
    for fam, n in sorted(sc.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {fam:28s} {n}")
    print(f"HAM: {len(HAM)} over {len(hc)} families")
    for fam, n in sorted(hc.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {fam:28s} {n}")
