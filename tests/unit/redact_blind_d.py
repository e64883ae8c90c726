"""[Corpus blind-d, written by a helper who saw neither the detector nor any other corpus. Held out: scored once after the tuning on blind-a, -b and -c, and never tuned on; its figures are the detector's recall on data it has not seen.]

Blind held-out corpus D for a transcript secret redactor.

Everything is generated at import time from a fixed seed, so the file holds no
literal credential.  SECRETS are snippets as they would appear in a coding-agent
session (chat, shell output, files read or written, logs) with the exact
substring that must not survive redaction.  HAM are ordinary lines that must
come out byte-for-byte unchanged.

Standard library only, Python 3.11.
"""

from __future__ import annotations

import base64
import json
import random
import string
import struct
import urllib.parse
import uuid
from collections import Counter
from typing import NamedTuple
from xml.sax.saxutils import escape as xml_escape


class Secret(NamedTuple):
    family: str
    fmt: str  # short unique label
    text: str  # text exactly as it appears in the session; 1 to ~10 lines
    secret: str  # exact substring of text that must not survive redaction
    keep: str = ""


class Ham(NamedTuple):
    family: str
    text: str  # ordinary text that must come out byte-for-byte unchanged


SEED = 0x0D2026B1
R = random.Random(SEED)

# --------------------------------------------------------------------------
# character sets and primitive generators
# --------------------------------------------------------------------------
DIG = string.digits
LOW = string.ascii_lowercase
UPP = string.ascii_uppercase
AL = UPP + LOW + DIG
LAL = LOW + DIG
UAL = UPP + DIG
HEX = "0123456789abcdef"
UHEX = HEX.upper()
B64 = AL + "+/"
B64U = AL + "-_"
B62 = DIG + UPP + LOW
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
CROCK = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
BECH = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def rs(n: int, cs: str = AL) -> str:
    return "".join(cs[R.randrange(len(cs))] for _ in range(n))


def hx(n: int) -> str:
    return rs(n, HEX)


def pick(seq):
    return seq[R.randrange(len(seq))]


def num(a: int, b: int) -> int:
    return R.randint(a, b)


def rb(n: int) -> bytes:
    return R.randbytes(n)


def b64(n: int) -> str:
    return base64.b64encode(rb(n)).decode()


def b64u(n: int) -> str:
    return base64.urlsafe_b64encode(rb(n)).decode().rstrip("=")


def b64s(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def b64us(obj) -> str:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uid() -> str:
    return str(uuid.UUID(bytes=rb(16), version=4))


def ulid() -> str:
    return pick("01") + rs(25, CROCK)


def ksuid() -> str:
    return rs(27, B62)


def snow() -> str:
    return str(num(10**17, 19 * 10**17))


def ip10() -> str:
    return f"10.{num(0, 255)}.{num(0, 255)}.{num(2, 254)}"


def ippub() -> str:
    return f"{pick([34, 52, 18, 35, 104, 142, 172, 203])}.{num(1, 254)}.{num(1, 254)}.{num(1, 254)}"


def when() -> str:
    return (
        f"2026-{num(1, 4):02d}-{num(1, 28):02d}T{num(0, 23):02d}:{num(0, 59):02d}:{num(0, 59):02d}Z"
    )


def whenms() -> str:
    return f"2026-{num(1, 4):02d}-{num(1, 28):02d}T{num(0, 23):02d}:{num(0, 59):02d}:{num(0, 59):02d}.{num(0, 9999999):07d}Z"


def epoch() -> int:
    return num(1767225600, 1777593600)


def wrap(s: str, n: int) -> list[str]:
    return [s[i : i + n] for i in range(0, len(s), n)]


def jwt(
    payload: dict | None = None, alg: str = "HS256", sig: int = 32, kid: str | None = None
) -> str:
    header = {"alg": alg, "typ": "JWT"}
    if kid:
        header["kid"] = kid
    if payload is None:
        t = epoch()
        payload = {"sub": uid(), "iat": t, "exp": t + 3600}
    return f"{b64us(header)}.{b64us(payload)}.{b64u(sig)}"


def _sshstr(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def ssh_ed25519_pub() -> str:
    return "ssh-ed25519 " + base64.b64encode(_sshstr(b"ssh-ed25519") + _sshstr(rb(32))).decode()


def ssh_rsa_pub() -> str:
    mod = b"\x00" + bytes([num(0xC0, 0xFF)]) + rb(383)
    blob = _sshstr(b"ssh-rsa") + _sshstr(b"\x01\x00\x01") + _sshstr(mod)
    return "ssh-rsa " + base64.b64encode(blob).decode()


def ssh_ecdsa_pub() -> str:
    blob = _sshstr(b"ecdsa-sha2-nistp256") + _sshstr(b"nistp256") + _sshstr(b"\x04" + rb(64))
    return "ecdsa-sha2-nistp256 " + base64.b64encode(blob).decode()


def openssh_ed25519_priv(comment: str) -> list[str]:
    pub, priv = rb(32), rb(32)
    pubblob = _sshstr(b"ssh-ed25519") + _sshstr(pub)
    chk = rb(4)
    sec = (
        chk
        + chk
        + _sshstr(b"ssh-ed25519")
        + _sshstr(pub)
        + _sshstr(priv + pub)
        + _sshstr(comment.encode())
    )
    pad = 1
    while len(sec) % 8:
        sec += bytes([pad])
        pad += 1
    blob = (
        b"openssh-key-v1\x00"
        + _sshstr(b"none")
        + _sshstr(b"none")
        + _sshstr(b"")
        + struct.pack(">I", 1)
        + _sshstr(pubblob)
        + _sshstr(sec)
    )
    return wrap(base64.b64encode(blob).decode(), 70)


def ec_priv_lines() -> list[str]:
    der = (
        bytes.fromhex("30770201010420")
        + rb(32)
        + bytes.fromhex("a00a06082a8648ce3d030107a144034200")
        + b"\x04"
        + rb(64)
    )
    return wrap(base64.b64encode(der).decode(), 64)


def rsa_priv_lines() -> list[str]:
    der = bytes.fromhex("308204a40201000282010100") + bytes([num(0xC0, 0xFF)]) + rb(1190)
    return wrap(base64.b64encode(der).decode(), 64)


def pkcs8_priv_lines() -> list[str]:
    der = (
        bytes.fromhex(
            "308204bd020100300d06092a864886f70d0101010500048204a7308204a30201000282010100"
        )
        + bytes([num(0xC0, 0xFF)])
        + rb(1150)
    )
    return wrap(base64.b64encode(der).decode(), 64)


def cert_pem() -> str:
    der = bytes.fromhex("308203") + rb(2) + bytes.fromhex("308202") + rb(560)
    body = "\n".join(wrap(base64.b64encode(der).decode(), 64))
    return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


# --------------------------------------------------------------------------
# human passwords
# --------------------------------------------------------------------------
WORDS = [
    "otter",
    "maple",
    "river",
    "candle",
    "orbit",
    "falcon",
    "cactus",
    "pepper",
    "harbor",
    "willow",
    "glacier",
    "lantern",
    "meadow",
    "copper",
    "thunder",
    "velvet",
    "pixel",
    "nectar",
    "saffron",
    "tundra",
    "quartz",
    "ember",
    "cobalt",
    "biscuit",
    "walnut",
    "juniper",
    "pelican",
    "marble",
    "sparrow",
    "zephyr",
    "banjo",
    "mango",
    "koala",
    "nimbus",
    "rocket",
    "puffin",
    "basil",
    "cedar",
    "dolphin",
    "hammock",
    "pretzel",
]
LONGWORDS = [
    "troubador",
    "wildflower",
    "starlight",
    "moonbeam",
    "butterfly",
    "waterfall",
    "snowboard",
    "blackbird",
    "firefly",
    "sunflower",
    "nightingale",
    "cornflake",
]
COLORS = ["blue", "red", "green", "amber", "violet", "silver", "golden", "black", "coral", "teal"]
SEASONS = ["Winter", "Spring", "Summer", "Autumn", "Fall"]
PETS = ["dog", "cat", "horse", "bunny", "puppy", "kitty", "parrot"]
NAMES = [
    "sophie",
    "max",
    "luna",
    "oliver",
    "emma",
    "noah",
    "mia",
    "leo",
    "chloe",
    "felix",
    "hannah",
    "lukas",
    "ines",
    "mateo",
    "yuki",
    "wei",
    "amara",
    "jonas",
]
WEAK = [
    "letmein",
    "welcome",
    "qwerty",
    "dragon",
    "sunshine",
    "monkey",
    "football",
    "iloveyou",
    "trustno1",
    "shadow",
    "master",
    "baseball",
    "superman",
    "princess",
]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Wonka", "Stark"]
CITIES = ["Berlin", "Lisboa", "Madrid", "Paris", "Krakow", "Utrecht", "Osaka", "Chengdu"]
_PW_I = [0]


def pw(style: int | None = None) -> str:
    """Human-chosen password in one of many styles (no quotes, backslashes or spaces)."""
    if style is None:
        style = _PW_I[0] % 12
        _PW_I[0] += 1
    year = num(2019, 2026)
    if style == 0:
        return f"{pick(SEASONS)}{year}{pick('!@#$')}"
    if style == 1:
        return f"{pick(COLORS)}-{pick(WORDS)}-{num(10, 99)}"
    if style == 2:
        w = pick(LONGWORDS)
        table = {"a": "4", "o": "0", "e": "3", "i": "1", "s": "5"}
        out = "".join(table[c] if c in table and R.random() < 0.65 else c for c in w)
        return out[0].upper() + out[1:] + pick("&%*!") + str(num(1, 9))
    if style == 3:
        return f"{pick(WEAK)}{pick([str(year), '123', '1', '12', '2024!', '99'])}"
    if style == 4:
        n = num(7, 11)
        while True:
            s = rs(n, AL + "!#$%*@^")
            if (
                any(c in LOW for c in s)
                and any(c in UPP for c in s)
                and any(c in DIG for c in s)
                and any(c in "!#$%*@^" for c in s)
            ):
                return s
    if style == 5:
        return pick(
            ["ilovemy" + pick(PETS), "ilove" + pick(NAMES), "my" + pick(PETS) + "is" + pick(NAMES)]
        )
    if style == 6:
        sep = pick(["-", ".", "_"])
        return sep.join(pick(WORDS) for _ in range(4))
    if style == 7:
        return f"{pick(NAMES).capitalize()}{num(1970, 2012)}{pick(['!', '', '#', '?'])}"
    if style == 8:
        return f"{pick(COLORS).capitalize()}{pick(WORDS).capitalize()}{num(1, 999)}"
    if style == 9:
        return f"{pick(COMPANIES)}@{year}{pick(['#', '!', '', '$$'])}"
    if style == 10:
        return f"{pick(CITIES)}{pick(['_', '.', '!'])}{num(10, 99)}{pick(WORDS)}"
    # style 11: keyboard-ish with digits
    return (
        pick(["Qwerty", "Asdf", "Zxcv", "Passw0rd", "Admin"])
        + pick(["!23", "#2025", "123$", "@99", "!!"])
        + rs(2, DIG)
    )


def passphrase(n: int = 4) -> str:
    return " ".join(pick(WORDS) for _ in range(n))


def strong(n: int = 24) -> str:
    return rs(n, AL)


def q(s: str) -> str:
    """percent-encode a password for use in a URL userinfo"""
    return urllib.parse.quote(s, safe="")


USERS = [
    "app",
    "deploy",
    "svc_api",
    "admin",
    "ci-bot",
    "etl",
    "reporting",
    "backend",
    "root",
    "postgres",
]
DEVS = ["alice", "bob", "dmitri", "priya", "jlopez", "mwagner", "kchen", "sato", "ana", "tomasz"]
HOSTS = [
    "db.internal",
    "pg-prod-1.acme.local",
    "10.0.3.17",
    "mysql-primary.svc.cluster.local",
    "prod-db.c9xk2ab1.eu-west-1.rds.amazonaws.com",
    "staging-db",
    "localhost",
    "db",
]
ORGS = ["acme", "globex", "initech", "hooli", "umbrella-labs", "stark-ind"]
REPOS = ["api", "web", "billing-service", "infra", "data-pipeline", "mobile-app", "platform"]


# ==========================================================================
# SECRETS
# ==========================================================================
SECRETS: list[Secret] = []


def S(family: str, fmt: str, text: str, secret: str, keep: str = "") -> None:
    SECRETS.append(Secret(family, fmt, text, secret, keep))


def _llm() -> None:
    fam = "llm"
    for i in range(3):
        k = "sk-proj-" + rs(74, B64U) + "T3BlbkFJ" + rs(74, B64U)
        S(
            fam,
            "openai_proj_dotenv",
            f"$ cat .env\nOPENAI_API_KEY={k}\nOPENAI_MODEL=gpt-4.1-mini\nLOG_LEVEL={pick(['debug', 'info'])}\n",
            k,
            "OPENAI_API_KEY",
        )
    for i in range(2):
        k = "sk-" + rs(20) + "T3BlbkFJ" + rs(20)
        S(
            fam,
            "openai_legacy_traceback",
            "Traceback (most recent call last):\n"
            f'  File "/home/{pick(DEVS)}/src/{pick(REPOS)}/llm/client.py", line {num(10, 90)}, in <module>\n'
            f'    client = OpenAI(api_key="{k}")\n'
            "openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
            f"sk-{k[3:5]}****{k[-4:]}.', 'type': 'invalid_request_error', 'code': 'invalid_api_key'}}}}",
            k,
            "openai.AuthenticationError",
        )
    for i in range(2):
        k = "sk-svcacct-" + rs(74, B64U) + "T3BlbkFJ" + rs(74, B64U)
        S(
            fam,
            "openai_svcacct_gha_env",
            f"{whenms()} ##[group]Run python scripts/eval.py --suite {pick(['smoke', 'nightly'])}\n"
            f"{whenms()} \x1b[36;1mpython scripts/eval.py\x1b[0m\n"
            f"{whenms()} shell: /usr/bin/bash -e {{0}}\n"
            f"{whenms()} env:\n"
            f"{whenms()}   pythonLocation: /opt/hostedtoolcache/Python/3.12.8/x64\n"
            f"{whenms()}   OPENAI_API_KEY: {k}\n"
            f"{whenms()} ##[endgroup]",
            k,
            "pythonLocation",
        )
    for i in range(2):
        k = "sk-ant-api03-" + rs(93, B64U) + "AA"
        S(
            fam,
            "anthropic_history",
            f"$ history | tail -4\n {num(400, 900)}  cd ~/src/{pick(REPOS)}\n {num(900, 950)}  export ANTHROPIC_API_KEY={k}\n"
            f" {num(951, 999)}  uv run pytest -q tests/test_agent.py\n {num(1000, 1100)}  history | tail -4",
            k,
            "ANTHROPIC_API_KEY",
        )
    for i in range(2):
        k = "sk-ant-api03-" + rs(93, B64U) + "AA"
        S(
            fam,
            "anthropic_curl_header",
            "$ curl https://api.anthropic.com/v1/messages \\\n"
            f'    -H "x-api-key: {k}" \\\n'
            '    -H "anthropic-version: 2023-06-01" -H "content-type: application/json" \\\n'
            f'    -d \'{{"model": "claude-sonnet-4-5", "max_tokens": {pick([256, 1024])}, "messages": [{{"role": "user", "content": "ping"}}]}}\'',
            k,
            "anthropic-version",
        )
    for i in range(2):
        k = "sk-ant-admin01-" + rs(93, B64U) + "AA"
        S(
            fam,
            "anthropic_admin_zshrc_diff",
            f"diff --git a/dotfiles/zshrc b/dotfiles/zshrc\nindex {hx(7)}..{hx(7)} 100644\n--- a/dotfiles/zshrc\n+++ b/dotfiles/zshrc\n"
            f'@@ -41,3 +41,4 @@ alias k=kubectl\n export EDITOR=nvim\n+export ANTHROPIC_ADMIN_KEY={k}\n export PATH="$HOME/.local/bin:$PATH"',
            k,
            "ANTHROPIC_ADMIN_KEY",
        )
    for i in range(2):
        k = "AIza" + rs(35, B64U)
        launch = {
            "version": "0.2.0",
            "configurations": [
                {
                    "name": "Python: agent",
                    "type": "debugpy",
                    "request": "launch",
                    "program": "${workspaceFolder}/agent/main.py",
                    "env": {
                        "GEMINI_API_KEY": k,
                        "GOOGLE_CLOUD_PROJECT": f"{pick(ORGS)}-ml-{num(100, 999)}",
                    },
                    "console": "integratedTerminal",
                }
            ],
        }
        S(
            fam,
            "gemini_launch_json",
            "$ cat .vscode/launch.json\n" + json.dumps(launch, indent=2),
            k,
            "GEMINI_API_KEY",
        )
    for i in range(2):
        k = "AIza" + rs(35, B64U)
        S(
            fam,
            "gemini_query_key",
            f'$ curl -s "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent?key={k}" \\\n'
            "    -H 'Content-Type: application/json' -d @prompt.json | jq .candidates[0].content",
            k,
            "generativelanguage.googleapis.com",
        )
    for i in range(2):
        k = rs(32)
        S(
            fam,
            "mistral_bearer",
            "$ curl -sS https://api.mistral.ai/v1/chat/completions \\\n"
            f'  -H "Authorization: Bearer {k}" \\\n'
            "  -H 'Content-Type: application/json' \\\n"
            '  -d \'{"model":"mistral-large-latest","messages":[{"role":"user","content":"hi"}]}\'',
            k,
            "api.mistral.ai",
        )
    for i in range(2):
        k = rs(40)
        cell = {
            "cell_type": "code",
            "execution_count": num(1, 40),
            "metadata": {},
            "source": [
                "import cohere\n",
                f'co = cohere.ClientV2(api_key="{k}")\n',
                'resp = co.embed(texts=docs, model="embed-v4.0")',
            ],
            "outputs": [],
        }
        S(fam, "cohere_ipynb_cell", json.dumps(cell, indent=1), k, "cohere.ClientV2")
    for i in range(2):
        k = "gsk_" + rs(52)
        S(
            fam,
            "groq_compose_env",
            f"services:\n  worker:\n    image: ghcr.io/{pick(ORGS)}/agent-worker:{num(1, 3)}.{num(0, 20)}.{num(0, 9)}\n"
            f"    environment:\n      - LOG_LEVEL=info\n      - GROQ_API_KEY={k}\n      - QUEUE_URL=redis://queue:6379/0\n    restart: unless-stopped",
            k,
            "GROQ_API_KEY",
        )
    for i in range(2):
        k = "tgp_v1_" + rs(43, B64U)
        S(
            fam,
            "together_envrc",
            f"$ cat .envrc\nuse flake\nexport TOGETHER_API_KEY={k}\nexport HF_HOME=$PWD/.hf\ndirenv: loading ~/src/{pick(REPOS)}/.envrc",
            k,
            "TOGETHER_API_KEY",
        )
    for i in range(2):
        k = "fw_" + rs(24)
        nb = {
            "cells": [
                {
                    "cell_type": "code",
                    "execution_count": 3,
                    "metadata": {},
                    "outputs": [
                        {
                            "name": "stdout",
                            "output_type": "stream",
                            "text": [
                                "using fireworks key " + k + "\n",
                                "model: accounts/fireworks/models/llama-v3p1-70b-instruct\n",
                            ],
                        }
                    ],
                    "source": [
                        "import os\n",
                        "print('using fireworks key', os.environ['FIREWORKS_API_KEY'])",
                    ],
                }
            ]
        }
        S(fam, "fireworks_ipynb_output", json.dumps(nb, indent=1), k, "FIREWORKS_API_KEY")
    for i in range(2):
        k = "sk-" + hx(32)
        S(
            fam,
            "deepseek_rich_locals",
            "╭─────────────────────────────── locals ───────────────────────────────╮\n"
            f"│   base_url = 'https://api.deepseek.com'                              │\n"
            f"│    api_key = '{k}'                     │\n"
            f"│      model = 'deepseek-chat'                                         │\n"
            f"│    retries = {num(2, 5)}                                                       │\n"
            "╰──────────────────────────────────────────────────────────────────────╯\n"
            "APIConnectionError: Connection error.",
            k,
            "APIConnectionError",
        )
    for i in range(2):
        k = "sk-or-v1-" + hx(64)
        exp = {
            "_type": "export",
            "__export_format": 4,
            "resources": [
                {
                    "_id": "req_" + hx(32),
                    "_type": "request",
                    "name": "chat completion",
                    "method": "POST",
                    "url": "https://openrouter.ai/api/v1/chat/completions",
                    "headers": [
                        {"name": "Authorization", "value": "Bearer " + k},
                        {"name": "HTTP-Referer", "value": "http://localhost:3000"},
                    ],
                }
            ],
        }
        S(fam, "openrouter_insomnia", json.dumps(exp, indent=2), k, "openrouter.ai")
    for i in range(2):
        k = "pplx-" + rs(48)
        col = {
            "info": {
                "_postman_id": uid(),
                "name": "perplexity",
                "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json",
            },
            "item": [
                {
                    "name": "sonar search",
                    "request": {
                        "auth": {
                            "type": "bearer",
                            "bearer": [{"key": "token", "value": k, "type": "string"}],
                        },
                        "method": "POST",
                        "url": {"raw": "https://api.perplexity.ai/chat/completions"},
                    },
                }
            ],
        }
        S(fam, "perplexity_postman", json.dumps(col, indent=2), k, "api.perplexity.ai")
    for i in range(2):
        k = "r8_" + rs(37)
        S(
            fam,
            "replicate_envrc",
            f"# .envrc\nexport REPLICATE_API_TOKEN={k}\nexport MODEL_VERSION={hx(64)}\n",
            k,
            "REPLICATE_API_TOKEN",
        )
    for i in range(2):
        k = "hf_" + rs(34, UPP + LOW)
        u = pick(DEVS)
        S(
            fam,
            "hf_clone_url",
            f"$ git clone https://{u}:{k}@huggingface.co/datasets/{pick(ORGS)}/support-tickets\nCloning into 'support-tickets'...\nremote: Enumerating objects: {num(20, 900)}, done.",
            k,
            "huggingface.co",
        )
    for i in range(2):
        k = "hf_" + rs(34, UPP + LOW)
        S(
            fam,
            "hf_token_file",
            f"$ cat ~/.cache/huggingface/token\n{k}\n$ huggingface-cli whoami\n{pick(DEVS)}",
            k,
            "huggingface-cli whoami",
        )
    for i in range(2):
        k = "xai-" + rs(80)
        S(
            fam,
            "xai_vscode_settings",
            '{\n  "editor.formatOnSave": true,\n  "python.analysis.typeCheckingMode": "basic",\n'
            f'  "grok.apiKey": "{k}",\n  "files.exclude": {{"**/.venv": true}}\n}}',
            k,
            "grok.apiKey",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "azure_openai_curl_v",
            f"* Connected to {pick(ORGS)}-oai.openai.azure.com ({ippub()}) port 443\n"
            "> POST /openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21 HTTP/2\n"
            f"> Host: {pick(ORGS)}-oai.openai.azure.com\n> user-agent: curl/8.7.1\n> accept: */*\n"
            f"> api-key: {k}\n> content-type: application/json\n>\n< HTTP/2 200",
            k,
            "api-version=2024-10-21",
        )


def _vcs() -> None:
    fam = "vcs"
    for i in range(2):
        k = "ghp_" + rs(36)
        u = pick(DEVS)
        S(
            fam,
            "gh_hosts_yml",
            f"$ cat ~/.config/gh/hosts.yml\ngithub.com:\n    users:\n        {u}:\n            oauth_token: {k}\n"
            f"    git_protocol: https\n    oauth_token: {k}\n    user: {u}",
            k,
            "git_protocol",
        )
    for i in range(2):
        k = f"github_pat_11{rs(20, UAL)}_{rs(59)}"
        o, r = pick(ORGS), pick(REPOS)
        S(
            fam,
            "gh_fine_grained_remote",
            f"$ git remote -v\norigin\thttps://{k}@github.com/{o}/{r}.git (fetch)\norigin\thttps://{k}@github.com/{o}/{r}.git (push)",
            k,
            f"github.com/{o}/{r}.git",
        )
    for i in range(2):
        k = "gho_" + rs(36)
        S(
            fam,
            "hub_config",
            f"$ cat ~/.config/hub\ngithub.com:\n- user: {pick(DEVS)}\n  oauth_token: {k}\n  protocol: https",
            k,
            "protocol: https",
        )
    for i in range(2):
        k = "ghs_" + rs(36)
        o, r = pick(ORGS), pick(REPOS)
        S(
            fam,
            "ghs_push_url_log",
            f"{whenms()} + git push https://x-access-token:{k}@github.com/{o}/{r}.git HEAD:refs/heads/release\n"
            f"{whenms()} To https://github.com/{o}/{r}.git\n{whenms()}    {hx(7)}..{hx(7)}  HEAD -> release",
            k,
            "x-access-token",
        )
    for i in range(2):
        k = "glpat-" + rs(20, AL + "_-")
        S(
            fam,
            "gitlab_private_token",
            f'$ curl --header "PRIVATE-TOKEN: {k}" "https://gitlab.{pick(ORGS)}.com/api/v4/projects/{num(10, 999)}/pipelines?status=failed"',
            k,
            "PRIVATE-TOKEN",
        )
    for i in range(2):
        k = "glrt-" + rs(20, AL + "_-")
        S(
            fam,
            "gitlab_runner_toml",
            f'concurrent = 4\n\n[[runners]]\n  name = "docker-{num(1, 9)}"\n  url = "https://gitlab.com/"\n  id = {num(1000000, 9999999)}\n'
            f'  token = "{k}"\n  executor = "docker"\n  [runners.docker]\n    image = "alpine:3.20"',
            k,
            'executor = "docker"',
        )
    for i in range(2):
        k = "ATBB" + rs(32)
        S(
            fam,
            "bitbucket_git_credentials",
            f"$ cat ~/.git-credentials\nhttps://{pick(DEVS)}:{k}@bitbucket.org\n",
            k,
            "bitbucket.org",
        )
    for i in range(2):
        k = "ghp_" + rs(36)
        S(
            fam,
            "composer_auth_json",
            json.dumps(
                {
                    "github-oauth": {"github.com": k},
                    "http-basic": {
                        "repo.packagist.com": {
                            "username": "token",
                            "password": "${PACKAGIST_TOKEN}",
                        }
                    },
                },
                indent=4,
            ),
            k,
            "github-oauth",
        )
    for i in range(2):
        k = "ghp_" + rs(36)
        S(
            fam,
            "git_insteadof",
            f'$ git config --global url."https://{pick(DEVS)}:{k}@github.com/".insteadOf "https://github.com/"\n$ go mod download',
            k,
            "insteadOf",
        )


def _cloud() -> None:
    fam = "cloud"
    for i in range(2):
        akid, sk = "AKIA" + rs(16, UAL), rs(40, B64)
        S(
            fam,
            "aws_credentials_file",
            f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {akid}\naws_secret_access_key = {sk}\n\n[{pick(ORGS)}-prod]\nsource_profile = default\nrole_arn = arn:aws:iam::{num(10**11, 10**12 - 1)}:role/Admin",
            sk,
            "aws_secret_access_key",
        )
    for i in range(2):
        asia, sk = "ASIA" + rs(16, UAL), rs(40, B64)
        st = "IQoJb3JpZ2luX2VjE" + rs(num(330, 380), B64) + "=="
        body = json.dumps(
            {
                "Credentials": {
                    "AccessKeyId": asia,
                    "SecretAccessKey": sk,
                    "SessionToken": st,
                    "Expiration": when().replace("Z", "+00:00"),
                }
            },
            indent=4,
        )
        text = (
            "$ aws sts get-session-token --serial-number arn:aws:iam::"
            + str(num(10**11, 10**12 - 1))
            + ":mfa/"
            + pick(DEVS)
            + " --token-code "
            + str(num(100000, 999999))
            + "\n"
            + body
        )
        S(fam, "aws_sts_secret_key", text, sk, "SecretAccessKey")
        S(fam, "aws_sts_session_token", text, st, "SessionToken")
    for i in range(2):
        sk = rs(40, B64)
        env = [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "AWS_REGION=eu-west-1",
            f"AWS_ACCESS_KEY_ID=AKIA{rs(16, UAL)}",
            f"AWS_SECRET_ACCESS_KEY={sk}",
            "PYTHONUNBUFFERED=1",
        ]
        S(
            fam,
            "aws_docker_inspect_env",
            f"$ docker inspect --format '{{{{json .Config.Env}}}}' {pick(REPOS)}-{hx(6)} | jq .\n"
            + json.dumps(env, indent=2),
            sk,
            "AWS_REGION=eu-west-1",
        )
    for i in range(2):
        k = "ya29.a0" + rs(num(190, 230), B64U)
        S(
            fam,
            "gcloud_print_access_token",
            f'$ gcloud auth print-access-token\n{k}\n$ curl -s -H "Authorization: Bearer $(gcloud auth print-access-token)" https://storage.googleapis.com/storage/v1/b?project={pick(ORGS)}-data',
            k,
            "print-access-token",
        )
    for i in range(2):
        lines = pkcs8_priv_lines()
        body = "\\n".join(lines)
        proj = f"{pick(ORGS)}-prod-{num(100, 999)}"
        text = (
            '{\n  "type": "service_account",\n'
            f'  "project_id": "{proj}",\n'
            f'  "private_key_id": "{hx(40)}",\n'
            f'  "private_key": "-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n",\n'
            f'  "client_email": "ci-deployer@{proj}.iam.gserviceaccount.com",\n  "client_id": "{num(10**20, 10**21 - 1)}",\n'
            '  "token_uri": "https://oauth2.googleapis.com/token"\n}'
        )
        S(fam, "gcp_sa_json_private_key", text, body, "service_account")
    for i in range(2):
        k = b64(64)
        acct = pick(ORGS).replace("-", "") + "store" + str(num(1, 99))
        S(
            fam,
            "azure_storage_connstr",
            '{\n  "Logging": {"LogLevel": {"Default": "Information"}},\n  "ConnectionStrings": {\n'
            f'    "Blob": "DefaultEndpointsProtocol=https;AccountName={acct};AccountKey={k};EndpointSuffix=core.windows.net"\n  }}\n}}',
            k,
            "EndpointSuffix=core.windows.net",
        )
    for i in range(2):
        sig = q(b64(32))
        S(
            fam,
            "azure_sas_sig",
            f"$ azcopy copy ./dist 'https://{pick(ORGS).replace('-', '')}cdn.blob.core.windows.net/$web?sv=2022-11-02&ss=b&srt=co&sp=rwdlacup&se=2026-12-31T23:59:59Z&st=2026-01-01T00:00:00Z&spr=https&sig={sig}' --recursive",
            sig,
            "azcopy copy",
        )
    for i in range(2):
        k = rs(3) + "8Q~" + rs(31, AL + "~._-")
        S(
            fam,
            "azure_client_secret_env",
            f"AZURE_TENANT_ID={uid()}\nAZURE_CLIENT_ID={uid()}\nAZURE_CLIENT_SECRET={k}\n",
            k,
            "AZURE_CLIENT_SECRET",
        )
    for i in range(2):
        k = "dop_v1_" + hx(64)
        S(
            fam,
            "digitalocean_tfvars",
            f'$ cat terraform.tfvars\nregion   = "{pick(["fra1", "ams3", "nyc3"])}"\ndo_token = "{k}"\ndroplet_size = "s-2vcpu-4gb"',
            k,
            "do_token",
        )
    for i in range(2):
        k = rs(40, AL + "_-")
        S(
            fam,
            "cloudflare_wrangler",
            f"$ CLOUDFLARE_API_TOKEN={k} npx wrangler deploy --env production\n ⛅️ wrangler 3.{num(60, 99)}.0\nUploaded {pick(REPOS)} ({num(1, 9)}.{num(10, 99)} sec)",
            k,
            "wrangler deploy",
        )
    for i in range(2):
        k = uid()
        S(
            fam,
            "heroku_netrc",
            f"$ cat ~/.netrc\nmachine api.heroku.com\n  login {pick(DEVS)}@{pick(ORGS)}.com\n  password {k}\nmachine git.heroku.com\n  login {pick(DEVS)}@{pick(ORGS)}.com\n  password {k}",
            k,
            "machine api.heroku.com",
        )
    for i in range(2):
        k = "FlyV1 fm2_" + b64(150)
        S(
            fam,
            "fly_api_token",
            f"$ fly tokens create deploy -x 999999h\n{k}\n",
            k[6:],
            "fly tokens create",
        )
    for i in range(2):
        k = rs(24)
        S(
            fam,
            "vercel_token_cli",
            f"$ npx vercel deploy --prod --token {k} --scope {pick(ORGS)}\nVercel CLI 39.{num(1, 9)}.0\n🔍  Inspect: https://vercel.com/{pick(ORGS)}/{pick(REPOS)}/{rs(9, LAL)}",
            k,
            "Vercel CLI",
        )
    for i in range(2):
        k = "nfp_" + rs(36)
        S(
            fam,
            "netlify_auth_token",
            f"- name: Deploy\n  run: netlify deploy --prod --dir=dist --auth {k} --site {uid()}",
            k,
            "netlify deploy",
        )
    for i in range(2):
        t = epoch()
        k = jwt(
            {
                "iss": "supabase",
                "ref": rs(20, LOW),
                "role": "service_role",
                "iat": t,
                "exp": t + 315360000,
            }
        )
        S(
            fam,
            "supabase_service_role",
            f"NEXT_PUBLIC_SUPABASE_URL=https://{rs(20, LOW)}.supabase.co\nSUPABASE_SERVICE_ROLE_KEY={k}\n",
            k,
            "SUPABASE_SERVICE_ROLE_KEY",
        )
    for i in range(2):
        k = "sbp_" + hx(40)
        S(
            fam,
            "supabase_access_token",
            f"$ SUPABASE_ACCESS_TOKEN={k} supabase db push --linked",
            k,
            "supabase db push",
        )
    for i in range(2):
        k = "dapi" + hx(32)
        S(
            fam,
            "databricks_cfg",
            f"$ cat ~/.databrickscfg\n[DEFAULT]\nhost  = https://adb-{num(10**15, 10**16 - 1)}.{num(1, 19)}.azuredatabricks.net\ntoken = {k}",
            k,
            "azuredatabricks.net",
        )
    for i in range(2):
        k = rs(14) + ".atlasv1." + rs(67)
        S(
            fam,
            "terraformrc_credentials",
            f'$ cat ~/.terraform.d/credentials.tfrc.json\n{{\n  "credentials": {{\n    "app.terraform.io": {{\n      "token": "{k}"\n    }}\n  }}\n}}',
            k,
            "app.terraform.io",
        )
    for i in range(2):
        p = strong(num(16, 28))
        st = {
            "version": 4,
            "terraform_version": "1.9.8",
            "resources": [
                {
                    "mode": "managed",
                    "type": "aws_db_instance",
                    "name": "main",
                    "provider": 'provider["registry.terraform.io/hashicorp/aws"]',
                    "instances": [
                        {
                            "schema_version": 2,
                            "attributes": {
                                "engine": "postgres",
                                "engine_version": "16.4",
                                "username": "app",
                                "password": p,
                                "port": 5432,
                                "identifier": f"{pick(REPOS)}-prod",
                            },
                        }
                    ],
                }
            ],
        }
        S(
            fam,
            "tfstate_db_password",
            "$ terraform state pull | head -40\n" + json.dumps(st, indent=2),
            p,
            "aws_db_instance",
        )
    for i in range(2):
        k = "pul-" + hx(40)
        S(
            fam,
            "pulumi_access_token",
            f"$ export PULUMI_ACCESS_TOKEN={k}\n$ pulumi up --stack {pick(ORGS)}/prod --yes",
            k,
            "pulumi up",
        )
    for i in range(2):
        k = "hvs." + rs(24)
        S(
            fam,
            "vault_login_table",
            "$ vault login -method=oidc role=dev\nSuccess! You are now authenticated.\n\nKey                  Value\n---                  -----\n"
            f'token                {k}\ntoken_accessor       {rs(24)}\ntoken_duration       768h\ntoken_renewable      true\ntoken_policies       ["default" "dev"]',
            k,
            "token_duration",
        )
    for i in range(2):
        k = "dp.st.prd." + rs(40)
        S(
            fam,
            "doppler_service_token",
            f'ENV DOPPLER_TOKEN={k}\nCMD ["doppler", "run", "--", "node", "server.js"]',
            k,
            "doppler",
        )
    for i in range(2):
        k = "ops_" + b64us(
            {
                "signInAddress": "my.1password.com",
                "userAuth": {
                    "method": "SRPg-4096",
                    "alg": "PBES2g-HS256",
                    "iterations": 650000,
                    "salt": b64u(16),
                },
                "email": f"{rs(26, LAL)}@1passwordserviceaccounts.com",
                "srpX": hx(64),
                "muk": {
                    "alg": "A256GCM",
                    "ext": True,
                    "k": b64u(32),
                    "key_ops": ["encrypt", "decrypt"],
                    "kty": "oct",
                    "kid": "mp",
                },
                "secretKey": "A3-" + rs(6, UAL) + "-" + rs(6, UAL),
                "throttleSecret": {"seed": hx(64), "uuid": rs(26, UAL)},
                "deviceUuid": rs(26, LAL),
            }
        )
        S(
            fam,
            "onepassword_service_account",
            f"OP_SERVICE_ACCOUNT_TOKEN={k}\n",
            k,
            "OP_SERVICE_ACCOUNT_TOKEN",
        )
    for i in range(2):
        k = "AGE-SECRET-KEY-1" + rs(58, BECH.upper())
        S(
            fam,
            "age_secret_key",
            f"$ cat ~/.config/sops/age/keys.txt\n# created: {when().replace('T', ' ')[:19]}\n# public key: age1{rs(58, BECH)}\n{k}",
            k,
            "# public key:",
        )
    for i in range(2):
        k = f"tskey-auth-k{rs(11)}CNTRL-{rs(33)}"
        S(
            fam,
            "tailscale_authkey",
            f"$ sudo tailscale up --authkey={k} --advertise-tags=tag:ci --ssh",
            k,
            "tailscale up",
        )
    for i in range(2):
        k = f"2{rs(26)}_{rs(21)}"
        S(
            fam,
            "ngrok_yml",
            f'$ cat ~/.config/ngrok/ngrok.yml\nversion: "3"\nagent:\n    authtoken: {k}\ntunnels:\n  web:\n    proto: http\n    addr: 3000',
            k,
            "authtoken",
        )
    for i in range(2):
        k = "glsa_" + rs(32) + "_" + hx(8)
        S(
            fam,
            "grafana_sa_token",
            f'$ curl -s -H "Authorization: Bearer {k}" https://grafana.{pick(ORGS)}.io/api/dashboards/uid/{rs(9, LAL)}',
            k,
            "api/dashboards",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "datadog_helm_set",
            f"$ helm upgrade --install datadog datadog/datadog -n monitoring \\\n    --set datadog.site=datadoghq.eu \\\n    --set datadog.apiKey={k} \\\n    --set clusterAgent.enabled=true",
            k,
            "datadog.apiKey",
        )
    for i in range(2):
        k = "NRAK-" + rs(27, UAL)
        S(
            fam,
            "newrelic_user_key",
            f"$ newrelic profiles add --profile prod --region US --apiKey {k} --accountId {num(10**6, 10**7)}",
            k,
            "newrelic profiles add",
        )
    for i in range(2):
        k = "sntryu_" + hx(64)
        S(
            fam,
            "sentry_auth_token",
            f"[auth]\ntoken={k}\n\n[defaults]\norg={pick(ORGS)}\nproject={pick(REPOS)}",
            k,
            "[defaults]",
        )


def _k8s_and_config() -> None:
    fam = "deploy_config"
    for i in range(2):
        p = pw()
        enc = b64s(p)
        S(
            fam,
            "k8s_secret_yaml_data",
            f"$ kubectl get secret db-creds -n {pick(REPOS)} -o yaml\napiVersion: v1\ndata:\n  password: {enc}\n  username: {b64s('app')}\nkind: Secret\nmetadata:\n  name: db-creds\ntype: Opaque",
            enc,
            "name: db-creds",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "kubectl_describe_pod_env",
            f"$ kubectl describe pod {pick(REPOS)}-{hx(10)}-{rs(5, LAL)}\n...\n    Environment:\n      NODE_ENV:           production\n"
            f"      DB_HOST:            {pick(HOSTS)}\n      DB_PASSWORD:        {p}\n      REDIS_URL:          <set to the key 'url' in secret 'redis'>  Optional: false\n    Mounts:",
            p,
            "DB_PASSWORD:",
        )
    for i in range(2):
        t = epoch()
        k = jwt(
            {
                "iss": "kubernetes/serviceaccount",
                "kubernetes.io/serviceaccount/namespace": "ci",
                "kubernetes.io/serviceaccount/service-account.name": "deployer",
                "sub": "system:serviceaccount:ci:deployer",
                "iat": t,
            },
            alg="RS256",
            sig=256,
            kid=b64u(32),
        )
        S(
            fam,
            "kubeconfig_sa_token",
            f"users:\n- name: deployer\n  user:\n    token: {k}\ncontexts:\n- context:\n    cluster: prod\n    user: deployer",
            k,
            "name: deployer",
        )
    for i in range(2):
        p1, p2 = pw(), strong(20)
        S(
            fam,
            "helm_set_password",
            f"$ helm upgrade --install {pick(REPOS)} ./charts/app -n prod \\\n  --set image.tag={hx(7)} \\\n  --set postgresql.auth.password={p1} \\\n  --set redis.auth.password={p2}",
            p1,
            "postgresql.auth.password",
        )
        SECRETS.append(
            Secret(fam, "helm_set_redis_password", SECRETS[-1].text, p2, "redis.auth.password")
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "ansible_inventory_vars",
            f"[web]\nweb{num(1, 9)}.{pick(ORGS)}.internal ansible_host={ip10()}\n\n[web:vars]\nansible_user=deploy\nansible_become=true\nansible_become_password={p}",
            p,
            "ansible_become_password",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "ansible_ssh_pass_yaml",
            f'all:\n  hosts:\n    nas01:\n      ansible_host: {ip10()}\n      ansible_user: admin\n      ansible_ssh_pass: "{p}"',
            p,
            "ansible_ssh_pass",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "vagrantfile_password",
            f'Vagrant.configure("2") do |config|\n  config.vm.box = "bento/ubuntu-24.04"\n  config.ssh.username = "vagrant"\n  config.ssh.password = "{p}"\n  config.vm.network "private_network", ip: "192.168.56.{num(10, 99)}"\nend',
            p,
            "config.ssh.password",
        )
    for i in range(2):
        k = strong(32)
        S(
            fam,
            "systemd_environment",
            f"$ systemctl cat {pick(REPOS)}.service\n# /etc/systemd/system/{pick(REPOS)}.service\n[Service]\nUser=svc\n"
            f'Environment="API_TOKEN={k}"\nEnvironment=PORT=8080\nExecStart=/opt/app/bin/server --config /etc/app/config.toml\nRestart=on-failure',
            k,
            "ExecStart",
        )
    for i in range(2):
        k = rs(40, B64U)
        S(
            fam,
            "crontab_curl_bearer",
            f"$ crontab -l\n# m h dom mon dow command\n*/{pick([5, 10, 15])} * * * * curl -fsS -H 'Authorization: Bearer {k}' https://hc.{pick(ORGS)}.io/ping/{uid()} >/dev/null\n0 3 * * * /usr/local/bin/backup.sh",
            k,
            "backup.sh",
        )
    for i in range(2):
        k = "npm_" + rs(36)
        S(
            fam,
            "dockerfile_arg_npm",
            f'FROM node:22-alpine AS build\nWORKDIR /app\nARG NPM_TOKEN={k}\nRUN echo "//registry.npmjs.org/:_authToken=${{NPM_TOKEN}}" > .npmrc && npm ci',
            k,
            "ARG NPM_TOKEN",
        )
    for i in range(2):
        k = hx(128)
        S(
            fam,
            "dockerfile_env_secret_key_base",
            f"FROM ruby:3.3-slim\nENV RAILS_ENV=production \\\n    SECRET_KEY_BASE={k} \\\n    RAILS_LOG_TO_STDOUT=1\nRUN bundle exec rails assets:precompile",
            k,
            "SECRET_KEY_BASE",
        )
    for i in range(2):
        p = pw()
        u = pick(USERS)
        S(
            fam,
            "procfile_amqp",
            f"web: gunicorn app.wsgi --bind 0.0.0.0:$PORT\nworker: celery -A app worker -b amqp://{u}:{q(p)}@rabbit.internal:5672// --concurrency 4",
            q(p),
            "celery -A app worker",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "ps_aux_java_password",
            f"$ ps aux | grep [j]ava\nsvc      {num(1000, 60000)}  {num(1, 40)}.{num(0, 9)}  4.1 {num(10**6, 9 * 10**6)} {num(10**5, 9 * 10**5)} ?  Ssl  Mar0{num(1, 9)} {num(10, 99)}:{num(10, 59)} /usr/bin/java -Xmx2g -jar /opt/app/app.jar --spring.datasource.url=jdbc:postgresql://{pick(HOSTS)}:5432/app --spring.datasource.password={p}",
            p,
            "spring.datasource.url",
        )
    for i in range(2):
        p = strong(18)
        S(
            fam,
            "ps_aux_redis_requirepass",
            f"redis     {num(100, 9999)}  0.3  0.1  72788  9640 ?        Ssl  09:1{num(0, 9)}   0:41 /usr/bin/redis-server 127.0.0.1:6379 --requirepass {p} --appendonly yes",
            p,
            "redis-server",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "bash_history_mysql",
            f"$ tail -n 3 ~/.bash_history\ncd /var/www\nmysql -h {pick(HOSTS)} -u root -p'{p}' -e 'SHOW DATABASES;'\nsudo systemctl restart php8.3-fpm",
            p,
            "SHOW DATABASES",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "bash_history_sshpass",
            f"  {num(100, 999)}  sshpass -p '{p}' ssh -o StrictHostKeyChecking=no admin@{ip10()}\n  {num(1000, 1999)}  ls -la",
            p,
            "StrictHostKeyChecking",
        )
    for i in range(2):
        k = "sk_live_51" + rs(97)
        S(
            fam,
            "git_log_p_stripe",
            f"commit {hx(40)}\nAuthor: {pick(DEVS).capitalize()} <{pick(DEVS)}@{pick(ORGS)}.com>\nDate:   Tue Feb 10 16:{num(10, 59)}:{num(10, 59)} 2026 +0100\n\n    wip payments\n\n"
            f"diff --git a/.env.production b/.env.production\n--- a/.env.production\n+++ b/.env.production\n@@ -3,0 +4 @@ APP_URL=https://shop.example.com\n+STRIPE_SECRET_KEY={k}",
            k,
            "STRIPE_SECRET_KEY",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "git_diff_config_password",
            f'$ git diff config/database.yml\n@@ -12,7 +12,7 @@ production:\n   adapter: postgresql\n   host: {pick(HOSTS)}\n   username: app\n-  password: <%= ENV["DATABASE_PASSWORD"] %>\n+  password: "{p}"\n   pool: 10',
            p,
            'ENV["DATABASE_PASSWORD"]',
        )
    for i in range(2):
        k = "sk_test_51" + rs(97)
        S(
            fam,
            "pytest_fixture_failure",
            "_________________________ test_create_checkout_session _________________________\n\n"
            f"stripe_client = <StripeClient api_key='{k}' api_base='https://api.stripe.com'>\n\n"
            "    def test_create_checkout_session(stripe_client):\n        session = stripe_client.checkout.sessions.create(params)\n"
            ">       assert session.status == \"open\"\nE       AssertionError: assert 'expired' == 'open'",
            k,
            "test_create_checkout_session",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "werkzeug_traceback_locals",
            f'  File "/srv/app/auth/ldap.py", line {num(20, 200)}, in bind\n    conn.simple_bind_s(dn, password)\n'
            f"    dn = 'uid={pick(DEVS)},ou=people,dc={pick(ORGS)},dc=com'\n    password = '{p}'\n    conn = <ldap.ldapobject.SimpleLDAPObject object at 0x7f{hx(10)}>\nldap.INVALID_CREDENTIALS: {{'msgtype': 97, 'desc': 'Invalid credentials'}}",
            p,
            "ldap.INVALID_CREDENTIALS",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "django_debug_database_url",
            "Settings\nUsing settings module config.settings.dev\n\nSetting\tValue\nALLOWED_HOSTS\t['*']\n"
            f"DATABASE_URL\t'postgres://app:{q(p)}@{pick(HOSTS)}:5432/app'\nDATABASES\t{{'default': {{'ENGINE': 'django.db.backends.postgresql', 'PASSWORD': '********************'}}}}\nDEBUG\tTrue",
            q(p),
            "Using settings module",
        )
    for i in range(2):
        k = rs(32, B64U) + "." + rs(27, B64U)
        S(
            fam,
            "curl_v_cookie",
            f"> GET /api/v2/me HTTP/1.1\n> Host: app.{pick(ORGS)}.com\n> User-Agent: curl/8.7.1\n> Accept: */*\n> Cookie: __Secure-session={k}; theme=dark\n>\n< HTTP/1.1 200 OK",
            k,
            "theme=dark",
        )
    for i in range(2):
        k = jwt(alg="RS256", sig=256, kid=hx(16))
        har = {
            "log": {
                "version": "1.2",
                "creator": {"name": "WebInspector", "version": "537.36"},
                "entries": [
                    {
                        "startedDateTime": when(),
                        "request": {
                            "method": "GET",
                            "url": f"https://api.{pick(ORGS)}.com/v1/projects?limit=50",
                            "headers": [
                                {"name": "accept", "value": "application/json"},
                                {"name": "authorization", "value": "Bearer " + k},
                            ],
                        },
                    }
                ],
            }
        }
        S(fam, "har_authorization", json.dumps(har, indent=2), k, "WebInspector")
    for i in range(2):
        p = pw()
        st = {
            "sqltools.connections": [
                {
                    "previewLimit": 50,
                    "server": pick(HOSTS),
                    "port": 5432,
                    "driver": "PostgreSQL",
                    "name": "prod-readonly",
                    "database": "app",
                    "username": "readonly",
                    "password": p,
                }
            ]
        }
        S(fam, "vscode_sqltools", json.dumps(st, indent=4), p, "sqltools.connections")
    for i in range(2):
        p = pw()
        x = xml_escape(p)
        S(
            fam,
            "jetbrains_datasources_xml",
            '<?xml version="1.0" encoding="UTF-8"?>\n<project version="4">\n  <component name="DataSourceManagerImpl" format="xml" multifile-model="true">\n'
            f'    <data-source source="LOCAL" name="prod@{pick(HOSTS)}" uuid="{uid()}">\n      <driver-ref>postgresql</driver-ref>\n'
            f"      <jdbc-url>jdbc:postgresql://{pick(HOSTS)}:5432/app?user=app&amp;password={x}</jdbc-url>\n    </data-source>\n  </component>\n</project>",
            x,
            "DataSourceManagerImpl",
        )
    for i in range(2):
        k = hx(48)
        S(
            fam,
            "jupyter_server_token_url",
            f"[I {when()[:10]} 10:{num(10, 59)}:{num(10, 59)}.{num(100, 999)} ServerApp] Jupyter Server 2.14.2 is running at:\n"
            f"[I ServerApp] http://localhost:8888/lab?token={k}\n[I ServerApp]     http://127.0.0.1:8888/lab?token={k}",
            k,
            "Jupyter Server",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "kubectl_from_literal",
            f"$ kubectl create secret generic smtp -n mail --from-literal=username=postmaster --from-literal=password='{p}'\nsecret/smtp created",
            p,
            "secret/smtp created",
        )


def _keys() -> None:
    fam = "private_key"
    for i in range(2):
        c = f"{pick(DEVS)}@{pick(['laptop', 'mbp', 'devbox', 'wsl'])}"
        lines = openssh_ed25519_priv(c)
        body = "\n".join(lines)
        S(
            fam,
            "openssh_ed25519_cat",
            f"$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----",
            body,
            "$ cat ~/.ssh/id_ed25519",
        )
    for i in range(2):
        lines = rsa_priv_lines()[:7]
        body = "\n".join(lines)
        S(
            fam,
            "rsa_pem_head",
            f"$ head -8 deploy/{pick(REPOS)}-deploy.pem\n-----BEGIN RSA PRIVATE KEY-----\n{body}",
            body,
            "head -8",
        )
    for i in range(2):
        lines = ec_priv_lines()
        body = "\n".join(lines)
        S(
            fam,
            "ec_private_key",
            f"$ openssl ecparam -name prime256v1 -genkey -noout\n-----BEGIN EC PRIVATE KEY-----\n{body}\n-----END EC PRIVATE KEY-----",
            body,
            "openssl ecparam",
        )
    for i in range(2):
        priv = base64.b64encode(_sshstr(rb(32))).decode()
        pub = base64.b64encode(_sshstr(b"ssh-ed25519") + _sshstr(rb(32))).decode()
        S(
            fam,
            "putty_ppk_v3",
            f"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: {pick(DEVS)}@win11\nPublic-Lines: 2\n{pub[:64]}\n{pub[64:]}\nPrivate-Lines: 1\n{priv}\nPrivate-MAC: {hx(64)}",
            priv,
            "PuTTY-User-Key-File-3",
        )
    for i in range(2):
        k = b64(32)
        S(
            fam,
            "wireguard_private_key",
            f"$ sudo cat /etc/wireguard/wg0.conf\n[Interface]\nAddress = 10.66.{num(0, 9)}.{num(2, 250)}/24\nPrivateKey = {k}\nListenPort = 51820\n\n[Peer]\nPublicKey = {b64(32)}\nEndpoint = vpn.{pick(ORGS)}.net:51820\nAllowedIPs = 10.66.0.0/16",
            k,
            "PrivateKey = ",
        )
    for i in range(2):
        lines = openssh_ed25519_priv(f"deploy@{pick(REPOS)}")
        body = "\n".join(lines)
        S(
            fam,
            "gha_deploy_key_env_yaml",
            f"env:\n  DEPLOY_HOST: {ip10()}\n  SSH_PRIVATE_KEY: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n"
            + "\n".join("    " + ln for ln in lines)
            + "\n    -----END OPENSSH PRIVATE KEY-----",
            "\n".join("    " + ln for ln in lines),
            "SSH_PRIVATE_KEY",
        )
        del body


def _tokens() -> None:
    fam = "auth_token"
    for i in range(2):
        at, rt = "ya29.a0" + rs(num(160, 200), B64U), "1//0" + rs(num(90, 105), B64U)
        body = json.dumps(
            {
                "access_token": at,
                "expires_in": 3599,
                "refresh_token": rt,
                "scope": "https://www.googleapis.com/auth/drive.readonly openid",
                "token_type": "Bearer",
                "id_token": "<omitted>",
            },
            indent=2,
        )
        S(
            fam,
            "oauth_google_access_token",
            "$ curl -s -X POST https://oauth2.googleapis.com/token -d @exchange.txt\n" + body,
            at,
            "expires_in",
        )
        S(
            fam,
            "oauth_google_refresh_token",
            "$ curl -s -X POST https://oauth2.googleapis.com/token -d @exchange.txt\n" + body,
            rt,
            "token_type",
        )
    for i in range(2):
        at, rt = rs(40, B64U), rs(64, B64U)
        body = json.dumps(
            {
                "token_type": "Bearer",
                "expires_in": 7200,
                "access_token": at,
                "refresh_token": rt,
                "scope": "read write",
                "created_at": epoch(),
            }
        )
        S(
            fam,
            "oauth_generic_token_response",
            f"< HTTP/2 200\n< content-type: application/json\n<\n{body}",
            rt,
            "content-type: application/json",
        )
    for i in range(2):
        t = epoch()
        k = jwt(
            {
                "sub": f"usr_{rs(24, LAL)}",
                "email": f"{pick(DEVS)}@{pick(ORGS)}.com",
                "roles": ["admin"],
                "iat": t,
                "exp": t + 900,
            }
        )
        S(
            fam,
            "jwt_in_app_log",
            f"{when()} DEBUG auth.middleware: verified bearer token={k} sub=usr_{rs(8, LAL)} latency_ms={num(1, 9)}",
            k,
            "auth.middleware",
        )
    for i in range(2):
        k = b64u(32)
        S(
            fam,
            "magic_link_email",
            f"Subject: Your sign-in link\nTo: {pick(DEVS)}@{pick(ORGS)}.com\n\nClick to sign in (expires in 15 minutes):\nhttps://app.{pick(ORGS)}.com/auth/magic?token={k}&redirect=%2Fdashboard",
            k,
            "Your sign-in link",
        )
    for i in range(2):
        tok = f"{rs(6, LAL)}-{hx(32)}"
        S(
            fam,
            "django_password_reset_url",
            f"[django.core.mail] Content-Type: text/plain\nYou're receiving this email because you requested a password reset.\nhttp://localhost:8000/accounts/reset/{b64s(str(num(1, 9999))).rstrip('=')}/{tok}/",
            tok,
            "requested a password reset",
        )
    for i in range(2):
        k = hx(64)
        S(
            fam,
            "rails_reset_token_log",
            f'Started GET "/users/password/edit?reset_password_token={k}" for 127.0.0.1 at 2026-02-0{num(1, 9)} 11:{num(10, 59)}:{num(10, 59)} +0000\nProcessing by Devise::PasswordsController#edit as HTML',
            k,
            "Devise::PasswordsController",
        )
    for i in range(2):
        payload = b64us(
            {"_fresh": True, "_id": hx(128), "_user_id": str(num(1, 9999)), "csrf_token": hx(40)}
        )
        k = f"{payload}.{rs(6, B64U)}.{rs(27, B64U)}"
        S(
            fam,
            "set_cookie_flask_session",
            f"< HTTP/1.1 302 FOUND\n< Location: /dashboard\n< Set-Cookie: session={k}; HttpOnly; Path=/; SameSite=Lax",
            k,
            "Location: /dashboard",
        )
    for i in range(2):
        k = q(f"{b64(96)}--{b64(12)}--{b64(16)}")
        S(
            fam,
            "set_cookie_rails_session",
            f"Set-Cookie: _{pick(REPOS).replace('-', '_')}_session={k}; path=/; secure; httponly; samesite=lax",
            k,
            "samesite=lax",
        )
    for i in range(2):
        k = f"s%3A{rs(32, B64U)}.{q(b64(32).rstrip('='))}"
        S(
            fam,
            "set_cookie_express_sid",
            f"set-cookie: connect.sid={k}; Path=/; Expires=Fri, 13 Mar 2026 10:00:00 GMT; HttpOnly",
            k,
            "connect.sid",
        )
    for i in range(2):
        p = pw()
        enc = b64s(f"{pick(USERS)}:{p}")
        S(
            fam,
            "basic_auth_header",
            f"> GET /metrics HTTP/1.1\n> Host: prometheus.{pick(ORGS)}.internal:9090\n> Authorization: Basic {enc}\n",
            enc,
            "/metrics",
        )
    for i in range(2):
        k = "00" + rs(40, AL + "-_")
        S(
            fam,
            "okta_ssws",
            f'$ curl -s -H "Authorization: SSWS {k}" "https://{pick(ORGS)}.okta.com/api/v1/users?limit=25"',
            k,
            "okta.com",
        )
    for i in range(2):
        k = rs(64, B64U)
        S(
            fam,
            "auth0_client_secret",
            f"AUTH0_DOMAIN={pick(ORGS)}.eu.auth0.com\nAUTH0_CLIENT_ID={rs(32)}\nAUTH0_CLIENT_SECRET={k}\nAUTH0_AUDIENCE=https://api.{pick(ORGS)}.com",
            k,
            "AUTH0_CLIENT_SECRET",
        )
    for i in range(2):
        k = "GOCSPX-" + rs(28, B64U)
        body = json.dumps(
            {
                "installed": {
                    "client_id": f"{num(10**11, 10**12)}-{rs(32, LAL)}.apps.googleusercontent.com",
                    "project_id": f"{pick(ORGS)}-tools",
                    "auth_uri": "https://accounts.google.com/o/oauth2/auth",
                    "client_secret": k,
                    "redirect_uris": ["http://localhost"],
                }
            }
        )
        S(
            fam,
            "google_client_secret_json",
            "$ cat client_secret.json\n" + body,
            k,
            "client_secret.json",
        )
    for i in range(2):
        k = "sdk-" + uid()
        S(
            fam,
            "launchdarkly_sdk_key",
            f"LD_SDK_KEY={k}\nLD_CLIENT_SIDE_ID={hx(24)}",
            k,
            "LD_SDK_KEY",
        )
    for i in range(2):
        k = uid()
        S(
            fam,
            "consul_http_token",
            f"$ CONSUL_HTTP_TOKEN={k} consul kv get -recurse config/{pick(REPOS)}/",
            k,
            "consul kv get",
        )


def _webhooks_messaging() -> None:
    fam = "webhook_messaging"
    for i in range(2):
        k = "whsec_" + rs(32)
        S(
            fam,
            "stripe_listen_whsec",
            f"$ stripe listen --forward-to localhost:4242/webhook\n> Ready! You are using Stripe API Version [2025-09-30]. Your webhook signing secret is {k} (^C to quit)",
            k,
            "stripe listen",
        )
    for i in range(2):
        k = hx(40)
        S(
            fam,
            "github_webhook_secret_env",
            f"GITHUB_APP_ID={num(100000, 999999)}\nGITHUB_WEBHOOK_SECRET={k}\nGITHUB_PRIVATE_KEY_PATH=./app.pem",
            k,
            "GITHUB_WEBHOOK_SECRET",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "slack_signing_secret",
            f'slack:\n  app_id: A0{rs(9, UAL)}\n  signing_secret: "{k}"\n  socket_mode: false',
            k,
            "signing_secret",
        )
    for i in range(2):
        k = f"xoxb-{num(10**10, 10**11)}-{num(10**12, 10**13)}-{rs(24)}"
        S(
            fam,
            "slack_bot_token",
            f"SLACK_BOT_TOKEN={k}\nSLACK_CHANNEL=#deploys",
            k,
            "SLACK_BOT_TOKEN",
        )
    for i in range(2):
        k = f"xapp-1-A0{rs(9, UAL)}-{num(10**12, 10**13)}-{hx(64)}"
        S(
            fam,
            "slack_app_token",
            f'app = App(token=os.environ["SLACK_BOT_TOKEN"])\nSocketModeHandler(app, "{k}").start()',
            k,
            "SocketModeHandler",
        )
    for i in range(2):
        tail = rs(24)
        S(
            fam,
            "slack_webhook_url",
            f"$ curl -X POST -H 'Content-type: application/json' --data '{{\"text\":\"deploy done\"}}' https://hooks.slack.com/services/T0{rs(8, UAL)}/B0{rs(9, UAL)}/{tail}",
            tail,
            "deploy done",
        )
    for i in range(2):
        k = b64s(snow()).rstrip("=") + "." + rs(6, B64U) + "." + rs(38, B64U)
        S(fam, "discord_bot_token", f"# bot.py\nclient.run('{k}')", k, "client.run")
    for i in range(2):
        k = rs(68, B64U)
        S(
            fam,
            "discord_webhook",
            f"DISCORD_WEBHOOK=https://discord.com/api/webhooks/{snow()}/{k}",
            k,
            "DISCORD_WEBHOOK",
        )
    for i in range(2):
        k = f"{num(10**9, 8 * 10**9)}:AA{rs(33, B64U)}"
        S(
            fam,
            "telegram_bot_crontab",
            f'0 8 * * 1-5 curl -s "https://api.telegram.org/bot{k}/sendMessage?chat_id=-100{num(10**9, 10**10)}&text=standup"',
            k,
            "sendMessage",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "twilio_auth_token",
            f"TWILIO_ACCOUNT_SID=AC{hx(32)}\nTWILIO_AUTH_TOKEN={k}\nTWILIO_FROM=+1415555{num(1000, 9999)}",
            k,
            "TWILIO_AUTH_TOKEN",
        )
    for i in range(2):
        k = "SG." + rs(22, B64U) + "." + rs(43, B64U)
        S(
            fam,
            "sendgrid_smtp",
            f"EMAIL_BACKEND=smtp\nEMAIL_HOST=smtp.sendgrid.net\nEMAIL_HOST_USER=apikey\nEMAIL_HOST_PASSWORD={k}\nEMAIL_PORT=587",
            k,
            "smtp.sendgrid.net",
        )
    for i in range(2):
        k = "key-" + hx(32)
        S(
            fam,
            "mailgun_curl",
            f"$ curl -s --user 'api:{k}' https://api.mailgun.net/v3/mg.{pick(ORGS)}.com/messages -F to=test@example.com -F subject=hi",
            k,
            "api.mailgun.net",
        )
    for i in range(2):
        k = uid()
        S(
            fam,
            "postmark_server_token",
            f"> POST /email HTTP/1.1\n> Host: api.postmarkapp.com\n> X-Postmark-Server-Token: {k}\n> Accept: application/json",
            k,
            "api.postmarkapp.com",
        )
    for i in range(2):
        k = "re_" + rs(8) + "_" + rs(24)
        S(
            fam,
            "resend_key",
            f"const resend = new Resend('{k}');\nawait resend.emails.send({{ from: 'noreply@{pick(ORGS)}.com', to, subject }});",
            k,
            "new Resend",
        )
    for i in range(2):
        k = "AAAA" + rs(7, B64U) + ":APA91b" + rs(134, B64U)
        S(
            fam,
            "fcm_legacy_server_key",
            f"> POST /fcm/send HTTP/1.1\n> Host: fcm.googleapis.com\n> Authorization: key={k}\n> Content-Type: application/json",
            k,
            "fcm.googleapis.com",
        )


def _payments_saas() -> None:
    fam = "payment"
    for i in range(2):
        k = "sk_live_" + rs(24)
        S(
            fam,
            "stripe_sk_live_ruby",
            f"# config/initializers/stripe.rb\nStripe.api_key = '{k}'\nStripe.api_version = '2025-09-30.clover'",
            k,
            "Stripe.api_version",
        )
    for i in range(2):
        k = "rk_live_51" + rs(97)
        S(
            fam,
            "stripe_rk_live_cli",
            f"$ stripe customers list --limit 3 --api-key {k}",
            k,
            "stripe customers list",
        )
    for i in range(2):
        k = "E" + rs(79, B64U)
        S(
            fam,
            "paypal_client_secret",
            f"PAYPAL_MODE=live\nPAYPAL_CLIENT_ID=A{rs(79, B64U)}\nPAYPAL_CLIENT_SECRET={k}",
            k,
            "PAYPAL_CLIENT_SECRET",
        )
    for i in range(2):
        k = "A21AA" + rs(num(90, 110), B64U)
        S(
            fam,
            "paypal_access_token",
            f'$ curl -v https://api-m.paypal.com/v2/checkout/orders -H "Authorization: Bearer {k}"',
            k,
            "checkout/orders",
        )
    for i in range(2):
        k = f"access_token$production${rs(16, LAL)}${hx(32)}"
        S(
            fam,
            "braintree_access_token",
            f"BRAINTREE_ACCESS_TOKEN='{k}'",
            k,
            "BRAINTREE_ACCESS_TOKEN",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "braintree_private_key",
            f'gateway = braintree.BraintreeGateway(braintree.Configuration(\n    braintree.Environment.Production,\n    merchant_id="{rs(16, LAL)}",\n    public_key="{rs(16, LAL)}",\n    private_key="{k}"))',
            k,
            "BraintreeGateway",
        )
    for i in range(2):
        k = "EAAA" + rs(60, B64U)
        S(
            fam,
            "square_access_token",
            f"square:\n  environment: production\n  access_token: {k}\n  location_id: L{rs(12, UAL)}",
            k,
            "location_id",
        )
    for i in range(2):
        k = "shpat_" + hx(32)
        S(
            fam,
            "shopify_admin_token",
            f'$ curl -H "X-Shopify-Access-Token: {k}" https://{pick(ORGS)}.myshopify.com/admin/api/2025-10/orders.json',
            k,
            "X-Shopify-Access-Token",
        )
    fam = "saas_token"
    for i in range(2):
        k = "sk." + b64us({"u": pick(DEVS), "a": rs(25, LAL)}) + "." + rs(22, B64U)
        S(fam, "mapbox_secret_token", f"MAPBOX_DOWNLOADS_TOKEN={k}", k, "MAPBOX_DOWNLOADS_TOKEN")
    for i in range(2):
        k = "lin_api_" + rs(40)
        S(
            fam,
            "linear_api_key",
            f"$ curl -s -H 'Authorization: {k}' -H 'Content-Type: application/json' https://api.linear.app/graphql -d '{{\"query\":\"{{ viewer {{ id }} }}\"}}'",
            k,
            "api.linear.app",
        )
    for i in range(2):
        k = "ntn_" + rs(46)
        S(
            fam,
            "notion_token",
            f'notion = Client(auth="{k}")\npages = notion.databases.query(database_id="{hx(32)}")',
            k,
            "notion.databases.query",
        )
    for i in range(2):
        k = "ATATT3xFfGF0" + rs(180, B64U) + "=" + rs(8, UHEX)
        S(
            fam,
            "atlassian_api_token",
            f"$ export JIRA_API_TOKEN={k}\n$ jira issue list -s 'In Progress'",
            k,
            "jira issue list",
        )
    for i in range(2):
        k = f"PMAK-{hx(24)}-{hx(34)}"
        S(
            fam,
            "postman_api_key",
            f"$ postman login --with-api-key {k}\nLogged in successfully.",
            k,
            "postman login",
        )
    for i in range(2):
        k = "11" + hx(32)
        S(
            fam,
            "jenkins_api_token",
            f"$ curl -X POST -u admin:{k} https://ci.{pick(ORGS)}.internal/job/{pick(REPOS)}/build?delay=0sec",
            k,
            "build?delay",
        )
    for i in range(2):
        k = "squ_" + hx(40)
        S(
            fam,
            "sonar_token",
            f"$ sonar-scanner -Dsonar.projectKey={pick(REPOS)} -Dsonar.host.url=https://sonar.{pick(ORGS)}.io -Dsonar.token={k}",
            k,
            "sonar-scanner",
        )
    for i in range(2):
        k = "figd_" + rs(40, B64U)
        S(
            fam,
            "figma_token",
            f'$ curl -H "X-Figma-Token: {k}" "https://api.figma.com/v1/files/{rs(22)}"',
            k,
            "api.figma.com",
        )
    for i in range(2):
        k = "pat" + rs(14) + "." + hx(64)
        S(
            fam,
            "airtable_pat",
            f"AIRTABLE_TOKEN={k}\nAIRTABLE_BASE=app{rs(14)}",
            k,
            "AIRTABLE_TOKEN",
        )
    for i in range(2):
        k = b64s(f"{rs(20, B64U)}:{rs(22, B64U)}")
        S(
            fam,
            "elastic_apikey_header",
            f'$ curl -H "Authorization: ApiKey {k}" https://{rs(8, LAL)}.es.eu-central-1.aws.elastic.cloud/_cat/indices?v',
            k,
            "_cat/indices",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "algolia_admin_key",
            f"ALGOLIA_APP_ID={rs(10, UAL)}\nALGOLIA_ADMIN_API_KEY={k}\nALGOLIA_INDEX=products_prod",
            k,
            "ALGOLIA_ADMIN_API_KEY",
        )
    for i in range(2):
        k = "CFPAT-" + rs(43, B64U)
        S(
            fam,
            "contentful_cma_token",
            f"$ contentful space export --space-id {rs(12, LAL)} --management-token {k}",
            k,
            "contentful space export",
        )
    for i in range(2):
        k = "pscale_pw_" + rs(43, B64U)
        S(
            fam,
            "planetscale_password",
            f"DATABASE_URL=mysql://{rs(12, LAL)}:{k}@aws.connect.psdb.cloud/{pick(REPOS)}?sslaccept=strict",
            k,
            "psdb.cloud",
        )
    for i in range(2):
        k = "A" + rs(1, "XYZ") + rs(70, B64U)
        S(
            fam,
            "upstash_rest_token",
            f"UPSTASH_REDIS_REST_URL=https://{pick(WORDS)}-{num(1000, 99999)}.upstash.io\nUPSTASH_REDIS_REST_TOKEN={k}",
            k,
            "UPSTASH_REDIS_REST_TOKEN",
        )
    for i in range(2):
        k = "rubygems_" + hx(48)
        S(
            fam,
            "rubygems_credentials",
            f"$ cat ~/.gem/credentials\n---\n:rubygems_api_key: {k}",
            k,
            ":rubygems_api_key:",
        )


def _databases() -> None:
    fam = "database"
    for i in range(3):
        p = pw()
        h = pick(HOSTS)
        S(
            fam,
            "postgres_url_env",
            f"DATABASE_URL=postgres://{pick(USERS)}:{q(p)}@{h}:5432/{pick(REPOS).replace('-', '_')}?sslmode=require",
            q(p),
            h,
        )
    for i in range(2):
        p = strong(22)
        S(
            fam,
            "asyncpg_sqlalchemy_url",
            f'engine = create_async_engine(\n    "postgresql+asyncpg://app:{p}@{pick(HOSTS)}:5432/app",\n    pool_size=10, echo=False,\n)',
            p,
            "create_async_engine",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mysql_pymysql_url",
            f"sqlalchemy.exc.OperationalError: (pymysql.err.OperationalError) (2003, \"Can't connect to MySQL server on '{pick(HOSTS)}'\")\n(Background on this error at: https://sqlalche.me/e/20/e3q8)\n  url='mysql+pymysql://etl:{q(p)}@{pick(HOSTS)}:3306/warehouse'",
            q(p),
            "sqlalche.me",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mongodb_srv_url",
            f'$ mongosh "mongodb+srv://{pick(USERS)}:{q(p)}@cluster0.{rs(5, LAL)}.mongodb.net/?retryWrites=true&w=majority&appName=Cluster0"\nCurrent Mongosh Log ID: {hx(24)}',
            q(p),
            "Mongosh Log ID",
        )
    for i in range(2):
        p = strong(32)
        S(
            fam,
            "redis_url_nopass_user",
            f"REDIS_URL=redis://:{p}@redis-master.cache.svc:6379/1",
            p,
            "redis-master",
        )
    for i in range(2):
        p = rs(32)
        S(
            fam,
            "rediss_default_user",
            f'CELERY_BROKER_URL = "rediss://default:{p}@{pick(WORDS)}-{num(10000, 99999)}.upstash.io:6379?ssl_cert_reqs=required"',
            p,
            "CELERY_BROKER_URL",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "amqps_url_yaml",
            f'messaging:\n  broker_url: "amqps://orders:{q(p)}@b-{uid()}.mq.eu-west-1.amazonaws.com:5671/%2F"\n  prefetch: 20',
            q(p),
            "prefetch",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mosquitto_pub_P",
            f"$ mosquitto_pub -h mqtt.{pick(ORGS)}.io -p 8883 --capath /etc/ssl/certs -u sensor-gw -P '{p}' -t 'site/1/temp' -m 21.5",
            p,
            "mosquitto_pub",
        )
    for i in range(2):
        p = strong(28)
        S(
            fam,
            "kafka_sasl_jaas",
            f"bootstrap.servers=pkc-{rs(5, LAL)}.eu-west-1.aws.confluent.cloud:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            f'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="{rs(16, UAL)}" password="{p}";',
            p,
            "sasl.mechanism=PLAIN",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "nats_url",
            f"$ nats --server nats://ingest:{q(p)}@nats.{pick(ORGS)}.internal:4222 stream ls",
            q(p),
            "stream ls",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "jdbc_sqlserver",
            f"spring.datasource.url=jdbc:sqlserver://sql{num(1, 9)}.{pick(ORGS)}.local:1433;databaseName=Sales;user=sa;password={p};encrypt=true;trustServerCertificate=true",
            p,
            "databaseName=Sales",
        )
    for i in range(2):
        p = pw(pick([1, 3, 7, 8]))
        S(
            fam,
            "oracle_sqlplus",
            f"$ sqlplus system/{p}@//ora-{num(1, 9)}.{pick(ORGS)}.local:1521/ORCLPDB1\nSQL*Plus: Release 23.0.0.0.0 - Production",
            p,
            "SQL*Plus",
        )
    for i in range(2):
        p = strong(20)
        S(
            fam,
            "clickhouse_client",
            f"$ clickhouse-client --host {rs(10, LAL)}.eu-central-1.aws.clickhouse.cloud --secure --user default --password {p} --query 'SELECT count() FROM events'",
            p,
            "clickhouse-client",
        )
    for i in range(2):
        p = rs(20)
        S(
            fam,
            "elastic_url_userinfo",
            f"ELASTICSEARCH_URL=https://elastic:{p}@es01.{pick(ORGS)}.internal:9200",
            p,
            "ELASTICSEARCH_URL",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "pgpass_line",
            f"$ cat ~/.pgpass\n{pick(HOSTS)}:5432:*:{pick(USERS)}:{p}\nlocalhost:5432:app_test:app:app",
            p,
            "~/.pgpass",
        )
    for i in range(2):
        p = "npg_" + rs(12)
        S(
            fam,
            "neon_url",
            f"postgresql://neondb_owner:{p}@ep-{pick(WORDS)}-{pick(WORDS)}-{rs(8, LAL)}-pooler.eu-central-1.aws.neon.tech/neondb?sslmode=require",
            p,
            "neondb_owner",
        )
    for i in range(2):
        p = strong(24)
        S(
            fam,
            "redis_cli_a",
            f"$ redis-cli -h {ip10()} -a {p} --no-auth-warning INFO replication\n# Replication\nrole:master\nconnected_slaves:2",
            p,
            "INFO replication",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "snowflake_url",
            f"SNOWFLAKE_URL=snowflake://{pick(DEVS).upper()}:{q(p)}@{rs(7, UAL)}-{rs(7, UAL)}/ANALYTICS/PUBLIC?warehouse=COMPUTE_WH&role=SYSADMIN",
            q(p),
            "COMPUTE_WH",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "cockroach_url",
            f"$ cockroach sql --url 'postgresql://root:{q(p)}@{pick(WORDS)}-{num(1000, 9999)}.j77.cockroachlabs.cloud:26257/defaultdb?sslmode=verify-full'",
            q(p),
            "cockroach sql",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mssql_pyodbc_connstr",
            f'conn = pyodbc.connect("DRIVER={{ODBC Driver 18 for SQL Server}};SERVER=tcp:{pick(ORGS)}.database.windows.net,1433;DATABASE=app;UID=appadmin;PWD={p};Encrypt=yes")',
            p,
            "ODBC Driver 18",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mysql_cli_p_nospace",
            f"$ mysqldump -h {pick(HOSTS)} -u backup -p{p} --single-transaction shop > shop.sql",
            p,
            "single-transaction",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "neo4j_driver",
            f'driver = GraphDatabase.driver("neo4j+s://{hx(8)}.databases.neo4j.io", auth=("neo4j", "{p}"))',
            p,
            "GraphDatabase.driver",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "rabbitmqctl_add_user",
            f"$ sudo rabbitmqctl add_user orders '{p}'\nAdding user \"orders\" ...",
            p,
            "rabbitmqctl add_user",
        )


def _network() -> None:
    fam = "network_creds"
    for i in range(2):
        p = pw()
        S(
            fam,
            "django_email_password",
            f"EMAIL_HOST = 'smtp.{pick(ORGS)}.com'\nEMAIL_PORT = 587\nEMAIL_HOST_USER = 'noreply@{pick(ORGS)}.com'\nEMAIL_HOST_PASSWORD = '{p}'\nEMAIL_USE_TLS = True",
            p,
            "EMAIL_USE_TLS",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "msmtprc_password",
            f"$ cat ~/.msmtprc\naccount default\nhost smtp.gmail.com\nport 587\nauth on\nuser {pick(DEVS)}@gmail.com\npassword {p}\ntls on",
            p,
            "auth on",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "smtp_url",
            f"MAILER_DSN=smtp://{pick(DEVS)}%40{pick(ORGS)}.com:{q(p)}@smtp.office365.com:587",
            q(p),
            "MAILER_DSN",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "ldapsearch_w",
            f'$ ldapsearch -x -H ldaps://ldap.{pick(ORGS)}.com -D "cn=admin,dc={pick(ORGS)},dc=com" -w \'{p}\' -b "ou=people,dc={pick(ORGS)},dc=com" "(uid={pick(DEVS)})"',
            p,
            "ldapsearch",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "sssd_authtok",
            f"[domain/{pick(ORGS)}.com]\nid_provider = ldap\nldap_uri = ldaps://ldap.{pick(ORGS)}.com\nldap_default_bind_dn = cn=sssd,ou=svc,dc={pick(ORGS)},dc=com\nldap_default_authtok = {p}",
            p,
            "ldap_default_bind_dn",
        )
    for i in range(2):
        c = f"{pick(['n0c', 'mon', 'netops', 'zbx'])}-{pick(WORDS)}-{num(100, 9999)}"
        S(
            fam,
            "snmpwalk_community",
            f"$ snmpwalk -v2c -c {c} {ip10()} 1.3.6.1.2.1.1\nSNMPv2-MIB::sysDescr.0 = STRING: Cisco IOS Software",
            c,
            "SNMPv2-MIB",
        )
    for i in range(2):
        c = rs(num(12, 16))
        S(
            fam,
            "snmpd_conf_rocommunity",
            f"# /etc/snmp/snmpd.conf\nagentaddress udp:161\nrocommunity {c} 10.0.0.0/8\nsyslocation rack-{num(1, 40)}",
            c,
            "agentaddress",
        )
    for i in range(2):
        p = pw(pick([0, 1, 5, 7, 8, 10]))
        S(
            fam,
            "wpa_supplicant_psk",
            f'network={{\n    ssid="{pick(WORDS).capitalize()}-{num(1, 9)}G"\n    psk="{p}"\n    key_mgmt=WPA-PSK\n}}',
            p,
            "key_mgmt=WPA-PSK",
        )
    for i in range(2):
        p = pw(pick([1, 3, 6, 8]))
        S(
            fam,
            "nmcli_wifi_connect",
            f"$ nmcli dev wifi connect \"{pick(COMPANIES)}-Guest\" password \"{p}\"\nDevice 'wlp2s0' successfully activated with '{uid()}'.",
            p,
            "successfully activated",
        )
    for i in range(2):
        p = strong(32)
        S(
            fam,
            "ipsec_secrets_psk",
            f'$ sudo cat /etc/ipsec.secrets\n# /etc/ipsec.secrets - strongSwan IPsec secrets file\n{ippub()} {ippub()} : PSK "{p}"',
            p,
            "strongSwan",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "proxy_userinfo",
            f"export HTTPS_PROXY=http://{pick(DEVS)}:{q(p)}@proxy.{pick(ORGS)}.corp:3128\nexport NO_PROXY=localhost,127.0.0.1,.svc",
            q(p),
            "NO_PROXY",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "openvpn_auth_txt",
            f"$ cat /etc/openvpn/client/auth.txt\n{pick(DEVS)}\n{p}\n$ sudo openvpn --config office.ovpn --auth-user-pass /etc/openvpn/client/auth.txt",
            p,
            "--auth-user-pass",
        )


def _chat() -> None:
    fam = "chat"
    templates = [
        (
            "chat_de",
            "Kannst du dich kurz auf dem Staging-Server einloggen? User ist deploy, mein Passwort ist {p}",
        ),
        (
            "chat_fr",
            "Pour la base de recette, l'utilisateur est admin et le mot de passe est {p} (je le changerai après).",
        ),
        (
            "chat_es",
            "El usuario del panel es soporte y la clave es {p}, pero no la subas al repo porfa.",
        ),
        ("chat_pt", "Tenta acessar o painel com o usuário ops, a senha é {p}"),
        ("chat_nl", "Het wachtwoord is {p}, de gebruikersnaam is beheer."),
        ("chat_pl", "Login: admin, hasło to {p} — tylko nie commituj tego."),
        ("chat_zh", "服务器的用户名是 root，密码是 {p}，用完记得改一下。"),
        ("chat_ja", "検証環境のユーザーは dev で、パスワードは {p} です。"),
        ("chat_it", "Per la VPN la password è {p}, l'utente è il tuo nome."),
        ("chat_ru", "Логин admin, пароль: {p} — потом поменяю."),
        ("chat_ko", "관리자 계정 비밀번호는 {p} 입니다."),
        ("chat_tr", "Sunucu şifresi {p}, kullanıcı adı ubuntu."),
        ("chat_en_pw", "ok the staging db password is {p} — can you run the migration for me?"),
        ("chat_en_forgot", "I keep forgetting, my jenkins login is {u} / {p}"),
    ]
    for fmt, t in templates:
        for i in range(2):
            p = pw()
            S(fam, fmt, t.format(p=p, u=pick(DEVS)), p)
    for i in range(2):
        p = passphrase(4)
        S(
            fam,
            "chat_passphrase_4word",
            f'the passphrase for the backup gpg key is "{p}" — it\'s in my notes too',
            p,
            "backup gpg key",
        )
    for i in range(2):
        k = "ghp_" + rs(36)
        S(
            fam,
            "chat_en_token",
            f"here's my token, can you check why the API says 403? {k}",
            k,
            "403",
        )
    for i in range(2):
        k = "sk-ant-api03-" + rs(93, B64U) + "AA"
        S(
            fam,
            "chat_paste_key_de",
            f"Hier ist mein Key zum Testen: {k} bitte danach nicht loggen",
            k,
        )
    for i in range(2):
        p = pw()
        S(fam, "chat_fr_wifi", f"le code wifi du bureau c'est {p}", p)


def _app_secrets() -> None:
    fam = "app_secret"
    for i in range(2):
        k = rs(50, LOW + DIG + "!@#$%^&*(-_=+)")
        S(
            fam,
            "django_secret_key",
            f"# settings/prod.py\nSECRET_KEY = '{k}'\nDEBUG = False",
            k,
            "DEBUG = False",
        )
    for i in range(2):
        k = hx(32)
        S(
            fam,
            "rails_master_key",
            f"$ cat config/master.key\n{k}\n$ EDITOR=vim bin/rails credentials:edit",
            k,
            "credentials:edit",
        )
    for i in range(2):
        k = "base64:" + b64(32)
        S(
            fam,
            "laravel_app_key",
            f"APP_NAME=Laravel\nAPP_ENV=production\nAPP_KEY={k}\nAPP_DEBUG=false",
            k[7:],
            "APP_DEBUG",
        )
    for i in range(2):
        k = b64(32)
        S(
            fam,
            "nextauth_secret",
            f"$ openssl rand -base64 32\n{k}\n$ vercel env add NEXTAUTH_SECRET production",
            k,
            "openssl rand",
        )
    for i in range(2):
        k = hx(64)
        S(
            fam,
            "encryption_key_env",
            f"FIELD_ENCRYPTION_KEY={k}\nENCRYPTION_KEY_ID=v3",
            k,
            "ENCRYPTION_KEY_ID",
        )
    for i in range(2):
        k = hx(64)
        S(
            fam,
            "flask_secret_key",
            f'app = Flask(__name__)\napp.config["SECRET_KEY"] = "{k}"\napp.config["SESSION_COOKIE_SECURE"] = True',
            k,
            "SESSION_COOKIE_SECURE",
        )
    for i in range(2):
        k = b64(48)
        S(
            fam,
            "jwt_signing_secret_yaml",
            f'auth:\n  jwt:\n    algorithm: HS512\n    secret: "{k}"\n    ttl: 3600',
            k,
            "algorithm: HS512",
        )


def _registries_cli() -> None:
    fam = "package_registry"
    for i in range(2):
        k = "npm_" + rs(36)
        S(
            fam,
            "npmrc_authtoken",
            f"$ cat ~/.npmrc\n@{pick(ORGS)}:registry=https://npm.pkg.github.com\n//registry.npmjs.org/:_authToken={k}",
            k,
            "_authToken",
        )
    for i in range(2):
        k = "pypi-AgEIcHlwaS5vcmc" + rs(num(140, 170), B64U)
        S(
            fam,
            "pypirc_token",
            f"$ cat ~/.pypirc\n[distutils]\nindex-servers = pypi\n\n[pypi]\nusername = __token__\npassword = {k}",
            k,
            "index-servers",
        )
    for i in range(2):
        p = pw()
        a = b64s(f"{pick(DEVS)}:{p}")
        S(
            fam,
            "docker_config_auth",
            json.dumps(
                {
                    "auths": {"https://index.docker.io/v1/": {"auth": a}, "ghcr.io": {}},
                    "credsStore": "desktop",
                },
                indent=2,
            ),
            a,
            "credsStore",
        )
    for i in range(2):
        k = "dckr_pat_" + rs(27, B64U)
        S(
            fam,
            "dockerhub_pat_login",
            f"$ echo {k} | docker login -u {pick(DEVS)} --password-stdin\nLogin Succeeded",
            k,
            "Login Succeeded",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "docker_login_p_history",
            f" {num(100, 999)}  docker login -u {pick(DEVS)} -p '{p}' registry.{pick(ORGS)}.io",
            p,
        )
    for i in range(2):
        k = "cio" + rs(32)
        S(
            fam,
            "cargo_credentials",
            f'$ cat ~/.cargo/credentials.toml\n[registry]\ntoken = "{k}"',
            k,
            "[registry]",
        )
    for i in range(2):
        k = "oy2" + rs(43, LAL)
        S(
            fam,
            "nuget_push_key",
            f"$ dotnet nuget push bin/Release/*.nupkg --api-key {k} --source https://api.nuget.org/v3/index.json",
            k,
            "dotnet nuget push",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "maven_settings_xml",
            f"<settings>\n  <servers>\n    <server>\n      <id>ossrh</id>\n      <username>{pick(DEVS)}</username>\n      <password>{xml_escape(p)}</password>\n    </server>\n  </servers>\n</settings>",
            xml_escape(p),
            "<id>ossrh</id>",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "gradle_properties",
            f"org.gradle.jvmargs=-Xmx4g\nsigning.keyId={hx(8).upper()}\nsigning.password={p}\nossrhUsername={pick(DEVS)}",
            p,
            "signing.keyId",
        )
    for i in range(2):
        p1 = pw()
        S(
            fam,
            "android_signing_config",
            f'signingConfigs {{\n    release {{\n        storeFile file("release.jks")\n        storePassword "{p1}"\n        keyAlias "upload"\n        keyPassword "{p1}"\n    }}\n}}',
            p1,
            "signingConfigs",
        )
    for i in range(2):
        k = "-".join(rs(4, LOW) for _ in range(4))
        S(
            fam,
            "apple_app_specific_password",
            f"$ xcrun notarytool submit build/App.zip --apple-id {pick(DEVS)}@{pick(ORGS)}.com --team-id {rs(10, UAL)} --password {k} --wait",
            k,
            "notarytool submit",
        )
    for i in range(2):
        u, p = pick(DEVS), pw()
        S(
            fam,
            "pip_extra_index_userinfo",
            f"$ pip install --extra-index-url https://{u}:{q(p)}@pypi.{pick(ORGS)}.internal/simple/ internal-sdk==2.4.1",
            q(p),
            "internal-sdk",
        )
    fam = "cli_secret"
    for i in range(2):
        p = pw()
        S(
            fam,
            "sudo_S_echo",
            f"$ echo '{p}' | sudo -S apt-get install -y postgresql-client-16\n[sudo] password for {pick(DEVS)}: Reading package lists... Done",
            p,
            "apt-get install",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "openssl_passout",
            f"$ openssl pkcs12 -export -in tls.crt -inkey tls.key -out bundle.p12 -passout pass:{p}",
            p,
            "pkcs12 -export",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "zip_P",
            f"$ zip -r -P '{p}' customer-export.zip exports/\n  adding: exports/ (stored 0%)",
            p,
            "adding: exports/",
        )
    for i in range(2):
        p = passphrase(4)
        S(
            fam,
            "gpg_batch_passphrase",
            f"$ gpg --batch --yes --pinentry-mode loopback --passphrase '{p}' -d secrets.tar.gpg | tar x",
            p,
            "pinentry-mode loopback",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "htpasswd_b",
            f"$ htpasswd -bc /etc/nginx/.htpasswd admin '{p}'\nAdding password for user admin",
            p,
            "Adding password for user",
        )
    for i in range(2):
        p = pw()
        S(fam, "7z_password", f"$ 7z a -p{p} -mhe=on backup-2026-02.7z ./db-dumps", p, "-mhe=on")
    for i in range(2):
        p = pw()
        S(
            fam,
            "psql_pgpassword_inline",
            f"$ PGPASSWORD='{p}' psql -h {pick(HOSTS)} -U postgres -c '\\l'",
            p,
            "psql -h",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "curl_u_userpass",
            f"$ curl -u {pick(DEVS)}:{p} https://nexus.{pick(ORGS)}.internal/service/rest/v1/repositories",
            p,
            "service/rest/v1",
        )
    for i in range(2):
        p = pw()
        S(
            fam,
            "mysql_config_editor_ps",
            f"  PID TTY          TIME CMD\n {num(1000, 9999)} pts/1    00:00:00 mysql --user=root --password={p} --host=127.0.0.1",
            p,
            "PID TTY",
        )


for _f in (
    _llm,
    _vcs,
    _cloud,
    _k8s_and_config,
    _keys,
    _tokens,
    _webhooks_messaging,
    _payments_saas,
    _databases,
    _network,
    _chat,
    _app_secrets,
    _registries_cli,
):
    _f()


# ==========================================================================
# HAM
# ==========================================================================
HAM: list[Ham] = []


def H(family: str, text: str) -> None:
    HAM.append(Ham(family, text))


NPM_PKGS = [
    "react",
    "lodash",
    "express",
    "zod",
    "typescript",
    "vite",
    "esbuild",
    "axios",
    "jsonwebtoken",
    "bcryptjs",
    "dotenv",
    "next",
    "@types/node",
    "@babel/core",
    "prettier",
    "eslint",
    "undici",
    "ws",
]
PY_PKGS = [
    "requests",
    "urllib3",
    "certifi",
    "idna",
    "charset-normalizer",
    "pydantic",
    "pydantic-core",
    "fastapi",
    "starlette",
    "anyio",
    "sniffio",
    "httpx",
    "cryptography",
    "cffi",
    "pyjwt",
    "bcrypt",
    "numpy",
]
GO_MODS = [
    "github.com/stretchr/testify",
    "golang.org/x/crypto",
    "golang.org/x/oauth2",
    "github.com/golang-jwt/jwt/v5",
    "google.golang.org/grpc",
    "github.com/spf13/cobra",
    "go.uber.org/zap",
    "github.com/google/uuid",
    "github.com/redis/go-redis/v9",
    "github.com/jackc/pgx/v5",
    "gopkg.in/yaml.v3",
    "github.com/aws/aws-sdk-go-v2",
]
CRATES = [
    "serde",
    "serde_json",
    "tokio",
    "ring",
    "rustls",
    "jsonwebtoken",
    "base64",
    "sha2",
    "hmac",
    "argon2",
    "reqwest",
    "hyper",
    "tracing",
    "clap",
    "uuid",
    "rand_core",
]
COMMIT_MSGS = [
    "fix(auth): rotate token before expiry",
    "chore(deps): bump cryptography from 43.0.1 to 44.0.0",
    "feat: add password strength meter to signup form",
    "refactor: move secret loading into config module",
    "test: cover expired reset-token path",
    "docs: explain how to set OPENAI_API_KEY locally",
    "ci: cache pip wheels between jobs",
    "fix: do not log Authorization header",
    "Merge pull request #%d from %s/feature/sso",
    'revert "feat: store api keys hashed"',
    "perf: reuse redis connection pool",
    "fix(webhook): verify signature with hmac.compare_digest",
]


def ver() -> str:
    return f"{num(0, 9)}.{num(0, 40)}.{num(0, 30)}"


def _ham_hashes() -> None:
    fam = "lockfile_hash"
    for i in range(8):
        p = pick(NPM_PKGS)
        v = ver()
        H(fam, f'      "integrity": "sha512-{b64(64)}",')
        H(fam, f'      "resolved": "https://registry.npmjs.org/{p}/-/{p.split("/")[-1]}-{v}.tgz",')
    for i in range(4):
        p = pick(NPM_PKGS)
        H(fam, f"  integrity sha1-{b64(20)}")
        H(fam, f"  resolution: {{integrity: sha512-{b64(64)}}}")
    for i in range(6):
        p = pick(PY_PKGS)
        v = ver()
        H(
            fam,
            f'    {{file = "{p.replace("-", "_")}-{v}-py3-none-any.whl", hash = "sha256:{hx(64)}"}},',
        )
    for i in range(3):
        H(fam, f'            "reference": "{hx(40)}",')
        H(fam, f'            "shasum": "{hx(40)}"')
    fam = "go_sum"
    for i in range(8):
        m, v = pick(GO_MODS), "v" + ver()
        H(fam, f"{m} {v} h1:{b64(32)}")
        H(fam, f"{m} {v}/go.mod h1:{b64(32)}")
    fam = "cargo_lock"
    for i in range(8):
        c = pick(CRATES)
        H(fam, f'checksum = "{hx(64)}"')
        H(
            fam,
            f'name = "{c}"\nversion = "{ver()}"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\nchecksum = "{hx(64)}"',
        )
    fam = "pip_hashes"
    for i in range(6):
        p = pick(PY_PKGS)
        H(fam, f"{p}=={ver()} \\")
        H(fam, f"    --hash=sha256:{hx(64)} \\")
        H(fam, f"    --hash=sha256:{hx(64)}")
    fam = "docker_digest"
    for i in range(4):
        H(fam, f"FROM python:3.12-slim@sha256:{hx(64)}")
        H(fam, f"Digest: sha256:{hx(64)}")
        H(
            fam,
            f"Status: Downloaded newer image for ghcr.io/{pick(ORGS)}/{pick(REPOS)}@sha256:{hx(64)}",
        )
        H(
            fam,
            f"{pick(['node', 'postgres', 'redis', 'nginx'])}        {pick(['22-alpine', '16', '7.4', '1.27'])}   sha256:{hx(64)}   {hx(12)}   {num(2, 9)} weeks ago   {num(40, 400)}MB",
        )
        H(
            fam,
            f" => [internal] load metadata for docker.io/library/node:22-alpine@sha256:{hx(64)}  0.{num(1, 9)}s",
        )
        H(fam, f"#{num(5, 15)} exporting manifest sha256:{hx(64)} done")


def _ham_git() -> None:
    fam = "git_log"
    for i in range(6):
        H(fam, f"commit {hx(40)}")
        H(
            fam,
            f"{hx(7)} {pick(COMMIT_MSGS).replace('%d', str(num(100, 999))).replace('%s', pick(DEVS))}",
        )
    for i in range(3):
        H(fam, f"Merge: {hx(7)} {hx(7)}")
        H(
            fam,
            f"{hx(7)} (HEAD -> main, origin/main) {pick(COMMIT_MSGS).replace('%d', '412').replace('%s', 'kchen')}",
        )
        H(fam, f"{hx(7)} HEAD@{{{num(0, 20)}}}: rebase (pick): {pick(COMMIT_MSGS[:8])}")
        H(fam, f"index {hx(7)}..{hx(7)} 100644")
        H(fam, f"Change-Id: I{hx(40)}")
    H(fam, f"   {hx(7)}..{hx(7)}  main -> main")
    H(fam, " * [new branch]      feature/token-refresh -> origin/feature/token-refresh")
    fam = "git_blame"
    blame_src = [
        "    token_ttl = 3600",
        "    password_min_length = settings.PASSWORD_MIN_LENGTH",
        "def verify_signature(payload: bytes, header: str, secret: str) -> bool:",
        '        api_key = request.headers.get("X-API-Key")',
        '    SECRET_NAME = "prod/app/db"',
        "    if not check_password(raw, user.password_hash):",
        "    return hmac.new(key, msg, hashlib.sha256).hexdigest()",
        'const TOKEN_HEADER = "authorization";',
        "  ssl_certificate_key /etc/nginx/tls/server.key;",
        "    max_tokens: int = 4096",
    ]
    for line in blame_src:
        H(
            fam,
            f"{hx(8)} (ana.{pick(['silva', 'ng', 'berg'])} 2025-{num(1, 12):02d}-{num(10, 28)} {num(10, 23)}:{num(10, 59)}:{num(10, 59)} +0100 {num(10, 400):>3}) {line}",
        )
    H(fam, f"^{hx(7)} (Initial Import 2023-04-01 09:00:00 +0000   1) # Authentication settings")
    fam = "git_bisect"
    for i in range(3):
        H(
            fam,
            f"Bisecting: {num(2, 60)} revisions left to test after this (roughly {num(1, 6)} steps)",
        )
        H(fam, f"[{hx(40)}] {pick(COMMIT_MSGS[:8])}")
    H(fam, f"{hx(40)} is the first bad commit")
    H(fam, f"git bisect start 'v2.{num(0, 9)}.0' '{hx(12)}'")
    H(fam, f"# good: [{hx(40)}] release: v2.3.0")
    H(fam, f"# bad: [{hx(40)}] feat: lazy-load session store")
    H(fam, "running  'pytest -x tests/test_auth.py'")


def _ham_ids() -> None:
    fam = "uuid"
    for i in range(3):
        H(fam, f"  uid: {uid()}")
        H(fam, f'{{"id": "{uid()}", "status": "completed", "created_at": "{when()}"}}')
        H(fam, f"INSERT INTO tenants (id, name) VALUES ('{uid()}', '{pick(COMPANIES)}');")
        H(fam, f"Deployment {uid()} promoted to production")
    H(fam, f"x-correlation-id: {uid()}")
    H(fam, f"volume-{uid()}  50Gi  RWO  gp3  Bound")
    fam = "ulid_ksuid"
    for i in range(4):
        H(fam, f"order_id={ulid()} state=paid amount_cents={num(100, 99999)}")
        H(fam, f'"event_id": "{ksuid()}",')
        H(fam, f"/api/v1/jobs/{ulid()}/logs?follow=true")
    H(fam, f"ksuid inspect {ksuid()}")
    H(fam, f"REPRESENTATION:\n  String: {ksuid()}\n     Raw: {hx(40).upper()}")
    fam = "snowflake"
    for i in range(4):
        H(fam, f"Received interaction {snow()} in guild {snow()} channel {snow()}")
        H(fam, f"https://x.com/{pick(DEVS)}/status/{snow()}")
    H(fam, f'{{"user_id": {snow()}, "message_id": {snow()}}}')
    H(fam, f"<@{snow()}> deployed build {num(1000, 9999)}")
    fam = "prefixed_id"
    stripe_ids = [
        lambda: "cus_" + rs(14),
        lambda: "pi_3" + rs(23),
        lambda: "ch_3" + rs(23),
        lambda: "evt_1" + rs(23),
        lambda: "in_1" + rs(23),
        lambda: "sub_1" + rs(23),
        lambda: "price_1" + rs(23),
        lambda: "prod_" + rs(14),
        lambda: "acct_1" + rs(15),
        lambda: "pm_1" + rs(23),
        lambda: "seti_1" + rs(23),
        lambda: "txn_3" + rs(23),
    ]
    for g in stripe_ids:
        H(fam, f"stripe: {g()} status=succeeded livemode=true")
    H(fam, f"  <-- [200] POST http://localhost:4242/webhook [{'evt_1' + rs(23)}]")
    H(fam, f"customer.subscription.updated [{'evt_1' + rs(23)}]")
    other = [
        ("usr_", 24),
        ("org_", 24),
        ("ses_", 22),
        ("msg_01", 22),
        ("req_011C", 20),
        ("toolu_01", 22),
        ("chatcmpl-", 29),
        ("call_", 24),
        ("file-", 22),
        ("asst_", 24),
        ("thread_", 24),
        ("run_", 24),
        ("batch_", 24),
        ("sess_2", 26),
        ("user_2", 26),
        ("dpl_", 26),
        ("wf_", 20),
        ("team_", 24),
    ]
    for pre, n in other:
        cs = B58 if pre.startswith(("msg_01", "toolu", "req_")) else AL
        H(fam, f'"id": "{pre}{rs(n, cs)}"')
    H(fam, f"anthropic request-id: req_011C{rs(20, B58)} (stop_reason=end_turn)")
    H(fam, f"openai x-request-id: req_{hx(32)}")
    H(fam, f"resp_{hx(48)} completed in 2.31s")
    fam = "trace_id"
    for i in range(4):
        H(fam, f"traceparent: 00-{hx(32)}-{hx(16)}-01")
        H(
            fam,
            f"{when()} INFO http.request trace_id={hx(32)} span_id={hx(16)} status=200 duration_ms={num(1, 900)}",
        )
    H(fam, f"X-Amzn-Trace-Id: Root=1-{hx(8)}-{hx(24)};Parent={hx(16)};Sampled=1")
    H(fam, f"cf-ray: {hx(16)}-{pick(['FRA', 'AMS', 'IAD', 'NRT'])}")
    H(fam, f"x-request-id: {uid()}")
    H(fam, f"Sentry event {hx(32)} captured for issue {pick(REPOS).upper()}-{num(10, 999)}")
    H(fam, f"dd.trace_id={num(10**18, 9 * 10**18)} dd.span_id={num(10**18, 9 * 10**18)}")
    H(fam, f"X-B3-TraceId: {hx(32)}")
    H(fam, f"x-goog-request-id: {hx(16)}")
    H(fam, f"jaeger: span {hx(16)} parent {hx(16)} op=db.query")


def _ham_b64_keys() -> None:
    fam = "base64_data"
    for i in range(3):
        png = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rb(num(40, 120))).decode()
        H(fam, f'<img alt="logo" src="data:image/png;base64,{png}">')
    for i in range(2):
        font = base64.b64encode(b"wOF2\x00\x01\x00\x00" + rb(num(60, 140))).decode()
        H(fam, f"  src: url(data:font/woff2;base64,{font}) format('woff2');")
    for s in [
        b"\n\x05hello\x12\x05world",
        b"\x08\x96\x01\x12\x07testing",
        b"\n\x03abc\x10\x01\x1a\x04\x08\x02\x10\x03",
    ]:
        H(fam, f'    payload := mustDecode("{base64.b64encode(s).decode()}") // protobuf fixture')
    sm = {
        "version": 3,
        "file": "app.js",
        "sources": ["../src/app.ts"],
        "names": [],
        "mappings": rs(60, "ACEGIKMOQSUWYgkmoqsuwy;,"),
    }
    H(fam, "//# sourceMappingURL=data:application/json;base64," + b64s(json.dumps(sm)))
    H(fam, f"$ echo '{b64s('hello world')}' | base64 -d")
    H(fam, "Content-Transfer-Encoding: base64")
    H(fam, b64s("Hi team, the quarterly report is attached. Regards, Ana")[:76])
    H(fam, f"    certificate-authority-data: {b64s(cert_pem())}")
    H(fam, f'  "thumbnail": "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQAAAQABAAD/{b64(60)}"')
    fam = "public_key"
    for i in range(3):
        H(fam, f"{ssh_ed25519_pub()} {pick(DEVS)}@{pick(['laptop', 'mbp', 'devbox'])}")
    H(fam, f"{ssh_rsa_pub()} deploy@ci")
    H(fam, f"github.com {ssh_ed25519_pub()}")
    H(fam, f"|1|{b64(20)}|{b64(20)} {ssh_ecdsa_pub()}")
    H(fam, f"PublicKey = {b64(32)}")
    H(fam, f"# public key: age1{rs(58, BECH)}")
    H(fam, f"age1{rs(58, BECH)}")
    H(fam, "-----BEGIN PUBLIC KEY-----")
    H(fam, "-----BEGIN CERTIFICATE-----")
    H(
        fam,
        f'{{"kty": "RSA", "use": "sig", "kid": "{hx(40)}", "alg": "RS256", "n": "{b64u(256)}", "e": "AQAB"}}',
    )
    H(
        fam,
        f"untrusted comment: minisign public key {hx(16).upper()}\n{base64.b64encode(b'Ed' + rb(40)).decode()}",
    )
    H(
        fam,
        f"pub   ed25519 2024-0{num(1, 9)}-1{num(0, 9)} [SC]\n      {hx(40).upper()}\nuid           [ultimate] {pick(DEVS).capitalize()} <{pick(DEVS)}@{pick(ORGS)}.com>",
    )
    H(fam, f'    "x5t#S256": "{b64u(32)}",')
    fam = "fingerprint"
    for i in range(3):
        H(fam, f"256 SHA256:{b64(32).rstrip('=')} {pick(DEVS)}@laptop (ED25519)")
    H(fam, f"The key fingerprint is:\nSHA256:{b64(32).rstrip('=')} {pick(DEVS)}@devbox")
    H(fam, f"ED25519 key fingerprint is SHA256:{b64(32).rstrip('=')}.")
    H(fam, f"SHA256 Fingerprint={':'.join(rs(2, UHEX) for _ in range(32))}")
    H(
        fam,
        f"      Key fingerprint = {' '.join(rs(4, UHEX) for _ in range(5))}  {' '.join(rs(4, UHEX) for _ in range(5))}",
    )
    H(fam, f"sha1 Fingerprint={':'.join(rs(2, UHEX) for _ in range(20))}")
    H(fam, f"MD5:{':'.join(hx(2) for _ in range(16))}")
    H(fam, "ssh-keygen -lf ~/.ssh/id_ed25519.pub")
    fam = "publishable_key"
    for i in range(2):
        H(fam, f"NEXT_PUBLIC_STRIPE_PUBLISHABLE_KEY=pk_live_51{rs(97)}")
        H(fam, f"const stripe = Stripe('pk_test_51{rs(97)}');")
    H(fam, f"POSTHOG_KEY=phc_{rs(43)}")
    H(
        fam,
        f"mapboxgl.accessToken = 'pk.{b64us({'u': pick(DEVS), 'a': rs(25, LAL)})}.{rs(22, B64U)}';",
    )
    H(
        fam,
        f"NEXT_PUBLIC_CLERK_PUBLISHABLE_KEY=pk_live_{b64s('clerk.' + pick(ORGS) + '-app.com$').rstrip('=')}",
    )
    H(fam, f'<div class="g-recaptcha" data-sitekey="6L{rs(38, B64U)}"></div>')
    H(fam, f'<div class="cf-turnstile" data-sitekey="0x4AAAAAAA{rs(12, B64U)}"></div>')
    H(fam, "VITE_PUBLIC_POSTHOG_HOST=https://eu.i.posthog.com")


def _ham_refs() -> None:
    fam = "env_ref"
    for line in [
        'export DATABASE_URL="$DATABASE_URL"',
        'api_key = os.environ["OPENAI_API_KEY"]',
        'const key = process.env.ANTHROPIC_API_KEY ?? "";',
        "token: ${{ secrets.NPM_TOKEN }}",
        "password: {{ .Values.postgresql.auth.password | quote }}",
        "SECRET_KEY_BASE = ENV.fetch('SECRET_KEY_BASE')",
        'let key = std::env::var("API_KEY").expect("API_KEY must be set");',
        'String pw = System.getenv("DB_PASSWORD");',
        'secret := os.Getenv("AWS_SECRET_ACCESS_KEY")',
        'PGPASSWORD="${PGPASSWORD:?PGPASSWORD must be set}" psql -h db -U app',
        "export GITHUB_TOKEN=$(gh auth token)",
        "export TOKEN=$(cat /run/secrets/api_token)",
        "$env:OPENAI_API_KEY = $null",
        "set API_KEY=%API_KEY%",
        'curl -H "Authorization: Bearer $(gcloud auth print-access-token)" https://run.googleapis.com/v2/projects',
        "      - POSTGRES_PASSWORD=${POSTGRES_PASSWORD}",
        "DATABASE_URL=postgresql://postgres:${POSTGRES_PASSWORD}@db:5432/app",
        "  password: ${env:DB_PASSWORD}",
        "Environment=API_TOKEN=%d/api_token",
        'echo "::add-mask::$DEPLOY_TOKEN"',
        "aws configure get aws_secret_access_key --profile prod",
        'token = "{{ vault_github_token }}"',
        "kubectl get secret db-creds -o jsonpath='{.data.password}' | base64 -d",
    ]:
        H(fam, line)
    fam = "secret_ref"
    for line in [
        f"$ vault kv get -field=password secret/{pick(REPOS)}/prod/db",
        f"arn:aws:secretsmanager:eu-west-1:{num(10**11, 10**12 - 1)}:secret:prod/{pick(REPOS)}/db-{rs(6)}",
        "        valueFrom:\n          secretKeyRef:\n            name: db-creds\n            key: password",
        'op read "op://Engineering/Stripe/secret key"',
        f"projects/{pick(ORGS)}-prod/secrets/openai-api-key/versions/latest",
        f"https://{pick(ORGS)}-kv.vault.azure.net/secrets/db-password/{hx(32)}",
        f"aws ssm get-parameter --name /prod/{pick(REPOS)}/db_password --with-decryption --query Parameter.Value",
        f"    password: ENC[AES256_GCM,data:{b64(18)},iv:{b64(32)},tag:{b64(16)},type:str]",
        "  envFrom:\n    - secretRef:\n        name: app-env",
        "DB_PASSWORD_FILE=/run/secrets/db_password",
        "secrets:\n  db_password:\n    file: ./secrets/db_password.txt",
        "gh secret set STRIPE_SECRET_KEY --env production < /dev/stdin",
        "doppler secrets get STRIPE_SECRET_KEY --plain --project api --config prd",
        "credential_process = aws-vault exec prod --json",
        f"ExternalSecret {pick(REPOS)}-env synced from ClusterSecretStore vault-backend (refreshInterval: 1h)",
        'sops --decrypt --extract \'["data"]["password"]\' secrets.enc.yaml',
    ]:
        H(fam, line)
    fam = "placeholder"
    for line in [
        "OPENAI_API_KEY=sk-...",
        "API_KEY=your-api-key-here",
        'password: "<PASSWORD>"',
        "token: ********",
        '"password": "[REDACTED]"',
        "Authorization: Bearer <token>",
        "AWS_SECRET_ACCESS_KEY=<your-secret-access-key>",
        "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "STRIPE_SECRET_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
        "postgres://USER:PASSWORD@HOST:5432/DBNAME",
        "DB_PASSWORD=changeme  # replace before deploying",
        'api_key: "${API_KEY}"  # set in .env',
        "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/XXX/YYY/ZZZ",
        'ANTHROPIC_API_KEY="your_key"',
        'client_secret = "<client-secret>"',
        "-----BEGIN PRIVATE KEY-----\\n...\\n-----END PRIVATE KEY-----\\n",
        "mysql -u root -p",
        "secret: REPLACE_ME",
        "HF_TOKEN=hf_***",
        "redis://:<password>@localhost:6379/0",
    ]:
        H(fam, line)
    fam = "masked"
    for line in [
        f"{whenms()} DATABASE_URL: ***",
        f"{whenms()}   OPENAI_API_KEY: ***",
        f"AWS Access Key ID [****************{rs(4, UAL)}]: ",
        f"AWS Secret Access Key [****************{rs(4, AL)}]: ",
        f"sk-proj-...{rs(4)} (created {when()[:10]})",
        f"Card: •••• {num(1000, 9999)}  exp 0{num(1, 9)}/2{num(7, 9)}",
        "DATABASE_URL=postgres://app:****@db:5432/app",
        "Using token ghp_****************************abcd from keyring",
        f"api_key=sk-ant-...{rs(4)} (masked)",
        "  password: '**********'",
        "Token: [hidden]",
        "SECRET_KEY  '********************'",
    ]:
        H(fam, line)


def _ham_text() -> None:
    fam = "password_ui"
    for line in [
        "Enter your password:",
        "Password must be at least 12 characters and include a number and a symbol.",
        "Forgot password?",
        "Your password has been changed successfully.",
        "Confirm new password",
        "Password strength: weak",
        "The password you entered is incorrect. 2 attempts remaining.",
        "We sent a password reset link to your email address.",
        "Show password",
        "Passwords do not match.",
        "Passwort vergessen?",
        "Mot de passe oublié ?",
        "¿Olvidaste tu contraseña?",
        "Esqueceu sua senha?",
        "Wachtwoord vergeten?",
        "Nie pamiętasz hasła?",
        "忘记密码？",
        "パスワードをお忘れですか？",
        "Bitte geben Sie Ihr Passwort ein.",
        "Le mot de passe doit contenir au moins 12 caractères.",
        "La contraseña debe tener al menos 8 caracteres.",
        "A senha expira em 90 dias.",
        "密码长度至少为 8 位。",
        "パスワードは8文字以上で入力してください。",
        "Your API key was revoked. Create a new key in Settings → API keys.",
        "Two-factor authentication is enabled for this account.",
    ]:
        H(fam, line)
    fam = "secret_code"
    for line in [
        'password = getpass.getpass("Password: ")',
        "hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12))",
        "if not hmac.compare_digest(signature, expected):",
        'const token = req.headers.authorization?.split(" ")[1];',
        'api_key = os.environ.get("API_KEY")',
        "def validate_password(pw: str) -> bool:",
        "    secret = secrets.token_urlsafe(32)",
        "password_hash = ph.hash(password)  # argon2id",
        'user.set_password(form.cleaned_data["password1"])',
        "if len(password) < settings.PASSWORD_MIN_LENGTH:",
        'token = jwt.encode(claims, signing_key, algorithm="RS256")',
        "expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()",
        "  const { password, ...safeUser } = user;",
        '@pytest.fixture\ndef api_key(monkeypatch):\n    monkeypatch.setenv("API_KEY", "test")',
        "func (s *Store) RotateToken(ctx context.Context, id string) error {",
        '    raise PermissionError("invalid or expired token")',
        "password: z.string().min(12).max(128),",
        "if err := bcrypt.CompareHashAndPassword(hash, []byte(pw)); err != nil {",
        'logger.info("token refreshed", extra={"expires_in": exp})',
        "key = Fernet.generate_key()",
        'SecretStr("")',
        'headers = {"Authorization": f"Bearer {token}"}',
        "private_key = serialization.load_pem_private_key(data, password=None)",
        'assert resp.json()["detail"] == "Invalid API key"',
    ]:
        H(fam, line)
    fam = "help_text"
    for line in [
        "  -p, --password[=name] Password to use when connecting to server. If password is not given it's asked from the tty.",
        "      --token string    GitHub authentication token (env: GH_TOKEN)",
        "  -W, --password           force password prompt (should happen automatically)",
        " -u, --user <user:password> Server user and password",
        "      --password-stdin   Take the password from stdin",
        "  -k, --api-key KEY     API key (default: read from $API_KEY)",
        "       --passphrase string\n              Use string as the passphrase. This can only be used if only one passphrase is supplied.",
        "  --ssh-key PATH        Path to the private key used for deploys",
        "  -P, --passout arg     Output file pass phrase source",
        "Usage: vault login [options] [AUTH K=V...]",
        "  --secret-file FILE    read the webhook secret from FILE",
        "  -a <password>      Password to use when connecting to the server.",
        "                     You can also use the REDISCLI_AUTH environment variable.",
        "OPTIONS\n       -N new_passphrase\n              Provides the new passphrase.",
        "  --auth-token TOKEN    Token for authenticating with the registry",
        "      --client-secret string   OAuth2 client secret (prefer --client-secret-file)",
    ]:
        H(fam, line)
    fam = "login_prompt"
    for line in [
        f"Password for 'https://{pick(DEVS)}@github.com':",
        f"[sudo] password for {pick(DEVS)}:",
        f"Enter passphrase for key '/home/{pick(DEVS)}/.ssh/id_ed25519':",
        f"$ psql -h {pick(HOSTS)} -U app -W",
        "Password: ",
        "Login Succeeded",
        "$ npm login --auth-type=web",
        f"Logged in as {pick(DEVS)} on https://registry.npmjs.org/.",
        "? What account do you want to log into? GitHub.com",
        "? How would you like to authenticate GitHub CLI? Login with a web browser",
        f"✓ Logged in as {pick(DEVS)}",
        f"$ docker login ghcr.io -u {pick(DEVS)} --password-stdin < ~/.ghcr_token",
        "Username for 'https://gitlab.com':",
        "Enter PEM pass phrase:",
        "Verifying - Enter PEM pass phrase:",
        f"$ ssh-add ~/.ssh/id_ed25519\nIdentity added: /home/{pick(DEVS)}/.ssh/id_ed25519 ({pick(DEVS)}@laptop)",
        "$ aws sso login --profile dev",
        "Successfully logged into Start URL: https://acme.awsapps.com/start",
    ]:
        H(fam, line)
    fam = "sql_schema"
    for line in [
        "CREATE TABLE users (\n  id bigserial PRIMARY KEY,\n  email citext NOT NULL UNIQUE,\n  password_hash text NOT NULL,\n  created_at timestamptz NOT NULL DEFAULT now()\n);",
        "ALTER TABLE api_tokens ADD COLUMN token_digest bytea NOT NULL;",
        "SELECT id, email FROM users WHERE reset_token_expires_at < now();",
        " password_hash      | character varying(255) |           | not null |",
        "CREATE UNIQUE INDEX api_keys_prefix_idx ON api_keys (key_prefix);",
        "UPDATE users SET password_changed_at = now() WHERE id = $1;",
        "    op.add_column('users', sa.Column('totp_secret_encrypted', sa.LargeBinary(), nullable=True))",
        "  encrypted_password character varying DEFAULT ''::character varying NOT NULL,",
        't.string "reset_password_token"',
        "DELETE FROM sessions WHERE expires_at < now() - interval '7 days';",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO readonly;",
        "CREATE ROLE app WITH LOGIN PASSWORD NULL;",
    ]:
        H(fam, line)
    fam = "config_benign"
    for line in [
        "token_ttl: 3600",
        "password_min_length: 12",
        "secret_name: db-creds",
        "key_file: /etc/ssl/private/server.key",
        "auth: required",
        "api_version: v2",
        "max_tokens: 4096",
        "password_reset_expiry_minutes = 30",
        "jwt_algorithm: RS256",
        "SESSION_COOKIE_SECURE = True",
        "AUTH_PROVIDER=oidc",
        "TOKEN_ENDPOINT=https://auth.example.com/oauth2/token",
        "KEY_ROTATION_DAYS=90",
        "secret_store: vault",
        'credentials_path = "~/.aws/credentials"',
        'PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]',
        "api_key_header: X-API-Key",
        "require_password_change: false",
        "ssl_key_password_file: /run/secrets/tls_pass",
        "tokenizer: cl100k_base",
        "refresh_token_rotation: enabled",
        "secretKeyRef: db-creds/password",
        "SECRET_KEY_FALLBACKS = []",
        "apiKeySecretName: datadog-secret",
        "authentication_method = scram-sha-256",
        "password_encryption = scram-sha-256",
        "PasswordAuthentication no",
        "IdentityFile ~/.ssh/id_ed25519_work",
        "IdentitiesOnly yes",
        "auth_type: api_key",
        'keyring_backend = "secretservice"',
    ]:
        H(fam, line)


def _ham_ops() -> None:
    fam = "llm_usage"
    for i in range(4):
        pt, ct = num(100, 90000), num(10, 4000)
        H(
            fam,
            f'"usage": {{"prompt_tokens": {pt}, "completion_tokens": {ct}, "total_tokens": {pt + ct}}}',
        )
        H(
            fam,
            f'"usage": {{"input_tokens": {pt}, "cache_creation_input_tokens": 0, "cache_read_input_tokens": {num(0, pt)}, "output_tokens": {ct}}}',
        )
    H(fam, "model: claude-sonnet-4-5  stop_reason: tool_use")
    H(fam, f"Context: {num(10, 190)},{num(100, 999)} / 200,000 tokens")
    H(fam, f"tokens/s: {num(20, 200)}.{num(0, 9)}  ttft: {num(100, 900)}ms")
    H(
        fam,
        f"cost: ${num(0, 9)}.{num(1000, 9999)} (in: {num(1000, 50000)} tok, out: {num(100, 5000)} tok)",
    )
    H(fam, f"x-ratelimit-remaining-tokens: {num(10000, 800000)}")
    H(fam, "anthropic-ratelimit-input-tokens-reset: 2026-03-01T12:00:31Z")
    fam = "feature_flag"
    for line in [
        "FEATURE_NEW_CHECKOUT=true",
        "flags:\n  enable_sso: false\n  passwordless_login: true",
        'ld: flag "new-billing-ui" evaluated to true for user usr_42',
        'unleash: toggle "payments.v2" enabled for 25% of sessions',
        "ENABLE_API_KEY_ROTATION=1",
        'if flags.is_enabled("token-exchange-v2", ctx):',
        "growthbook feature 'secret-scanning-banner' -> off",
        "FF_REDACT_LOGS=on",
        '"experiments": {"magic_link_login": {"rollout": 0.1}}',
        "feature_flags.password_breach_check = enabled",
    ]:
        H(fam, line)
    fam = "ci_cache"
    for i in range(3):
        H(fam, f"Cache restored from key: Linux-pip-{hx(64)}")
        H(fam, f"Cache saved with key: node-modules-{pick(['ubuntu-latest', 'macos-14'])}-{hx(64)}")
    H(fam, "key: ${{ runner.os }}-pip-${{ hashFiles('**/requirements.txt') }}")
    H(fam, "restore-keys: |\n  ${{ runner.os }}-go-")
    H(fam, f"#{num(4, 12)} CACHED")
    H(
        fam,
        f"Received {num(10, 500)} of {num(500, 900)} ({num(1, 99)}.0%), {num(1, 90)}.{num(0, 9)} MBs/sec",
    )
    H(fam, f"remote cache hit: {hx(64)}/ac/{hx(64)}")
    fam = "image_tag"
    for i in range(3):
        H(fam, f"ghcr.io/{pick(ORGS)}/{pick(REPOS)}:{ver()}-alpine")
        H(fam, f"registry.gitlab.com/{pick(ORGS)}/{pick(REPOS)}:sha-{hx(7)}")
    H(
        fam,
        f"{num(10**11, 10**12 - 1)}.dkr.ecr.eu-west-1.amazonaws.com/{pick(REPOS)}:build-{num(1000, 9999)}",
    )
    H(fam, "public.ecr.aws/docker/library/redis:7.4-alpine")
    H(fam, f"image: europe-docker.pkg.dev/{pick(ORGS)}-prod/apps/{pick(REPOS)}:{hx(40)}")
    H(fam, "quay.io/prometheus/node-exporter:v1.8.2")
    fam = "semver"
    for i in range(3):
        H(fam, f'  "version": "{ver()}",')
    H(fam, f"v2.0.0-rc.1+build.{hx(7)}")
    H(fam, 'requires-python = ">=3.11,<3.14"')
    H(fam, "go 1.23.4")
    H(fam, 'rust-version = "1.82"')
    H(fam, f"Successfully installed {pick(PY_PKGS)}-{ver()} {pick(PY_PKGS)}-{ver()}")
    H(fam, f"+ {pick(NPM_PKGS)}@{ver()}")
    H(fam, f"Bumped version to {ver()} ({hx(7)})")
    fam = "build_id"
    for i in range(2):
        H(fam, f"Build #{num(1000, 9999)} ({hx(7)}) succeeded in {num(1, 20)}m {num(1, 59)}s")
        H(
            fam,
            f"https://github.com/{pick(ORGS)}/{pick(REPOS)}/actions/runs/{num(10**10, 10**11)}/job/{num(10**10, 10**11)}",
        )
    H(fam, f"CODEBUILD_BUILD_ID={pick(REPOS)}-build:{uid()}")
    H(fam, f"INFO: Invocation ID: {uid()}")
    H(fam, f"Created build {uid()} in projects/{pick(ORGS)}-ci/locations/global/builds")
    H(fam, f"Deployment dpl_{rs(26)} is READY")
    H(fam, f"CI_PIPELINE_ID={num(10**8, 10**9)} CI_JOB_ID={num(10**9, 10**10)}")
    H(fam, f"buildkite build {num(1000, 99999)} ({uid()}) passed")
    fam = "url_path_id"
    for i in range(3):
        H(
            fam,
            f'{ip10()} - - [{num(10, 28)}/Feb/2026:10:{num(10, 59)}:{num(10, 59)} +0000] "GET /api/v1/orders/{ulid()}/items HTTP/1.1" 200 {num(100, 9000)} "-" "okhttp/4.12.0"',
        )
    H(fam, f"https://app.{pick(ORGS)}.com/invoices/in_1{rs(23)}/pdf")
    H(fam, f"DELETE /users/{uid()}/sessions/{uid()} 204 {num(1, 40)}ms")
    H(fam, f"https://docs.google.com/document/d/{rs(44, B64U)}/edit?usp=sharing")
    H(fam, f"https://www.youtube.com/watch?v={rs(11, B64U)}")
    H(fam, f"s3://{pick(ORGS)}-uploads/tenants/{uid()}/avatars/{hx(32)}.webp")
    H(fam, f"https://github.com/{pick(ORGS)}/{pick(REPOS)}/pull/{num(100, 4000)}/commits/{hx(40)}")
    H(
        fam,
        f"https://www.figma.com/design/{rs(22)}/Checkout-v3?node-id={num(1, 999)}-{num(1, 9999)}",
    )
    H(
        fam,
        f"https://{pick(ORGS)}.sentry.io/issues/{num(10**9, 10**10)}/?project={num(10**6, 10**7)}",
    )
    H(
        fam,
        f"https://console.cloud.google.com/logs/query;cursorTimestamp={when()};query=resource.type%3D%22cloud_run_revision%22?project={pick(ORGS)}-prod",
    )
    fam = "file_path"
    for line in [
        f"/home/{pick(DEVS)}/.ssh/id_ed25519",
        "~/.aws/credentials",
        "/etc/ssl/private/tls.key",
        "secrets/prod.env.enc",
        "src/auth/token_service.py:142: in refresh",
        "node_modules/.pnpm/jsonwebtoken@9.0.2/node_modules/jsonwebtoken/verify.js",
        "/var/lib/kubelet/pods/" + uid() + "/volumes/kubernetes.io~secret/db-creds",
        "C:\\Users\\dev\\AppData\\Roaming\\gcloud\\credentials.db",
        "app/Http/Middleware/VerifyCsrfToken.php",
        "internal/secrets/provider_test.go",
        "~/.config/gh/hosts.yml",
        "/run/secrets/kubernetes.io/serviceaccount/token",
        "certs/client.key.pem (mode 0600)",
        ".git/hooks/pre-commit: gitleaks protect --staged",
    ]:
        H(fam, line)


def _ham_prose_misc() -> None:
    fam = "prose"
    for line in [
        "Never commit your password or API key to the repository; load it from the environment instead.",
        "The token expires after one hour, so the client refreshes it in the background before making the next request.",
        "I rotated the staging database password this morning and updated the secret in Vault, so the pods should pick it up on restart.",
        "Could you check whether the webhook signature check uses a constant-time comparison?",
        "We store only a salted hash of each API key and show the full key to the user exactly once.",
        "If the private key is lost, you will need to generate a new key pair and re-register the public key.",
        "The reset link in the email contains a one-time token that becomes invalid after it is used.",
        "Set the OPENAI_API_KEY environment variable before running the evaluation script.",
        "The access token is short-lived, while the refresh token can be used to obtain a new one.",
        "Passwords shorter than twelve characters are rejected by the signup form.",
        "Let's move all secrets into the secret manager and reference them by name in the Helm values.",
        "The CI job failed because the deploy key was revoked; I'll ask the platform team to add a new one.",
        "Ich habe das Passwort im Passwortmanager gespeichert, nicht im Repository.",
        "Le jeton d'accès expire au bout d'une heure.",
        "La clave de la API se configura en el panel de administración.",
        "A senha deve ser trocada a cada noventa dias.",
        "Het wachtwoord staat in de kluis, vraag het aan beheer.",
        "Hasło zostało zmienione, sprawdź skrzynkę e-mail.",
        "请不要把密码写进代码里，使用环境变量。",
        "パスワードは環境変数から読み込んでください。",
        "Tokens are counted per request; the prompt used 1,234 tokens and the completion 567 tokens.",
        "The secret scanner flagged a test fixture, but it was a fake key made of zeros.",
        "Do not paste credentials into chat — use the shared vault entry instead.",
        "Remember that the key file needs permissions 0600 or ssh will refuse to use it.",
    ]:
        H(fam, line)
    fam = "k8s_output"
    for line in [
        "NAME                  TYPE                                  DATA   AGE",
        "db-creds              Opaque                                2      14d",
        "default-token-x7k2p   kubernetes.io/service-account-token   3      212d",
        f"tls-{pick(REPOS)}      kubernetes.io/tls                     2      30d",
        "Name:         db-creds\nNamespace:    prod\nType:  Opaque\n\nData\n====\npassword:  16 bytes\nusername:  3 bytes",
        "      DB_PASSWORD:  <set to the key 'password' in secret 'db-creds'>  Optional: false",
        f"pod/{pick(REPOS)}-{hx(10)}-{rs(5, LAL)}   1/1     Running   0          {num(1, 59)}m",
        "secret/db-creds configured",
        "serviceaccount/deployer created",
        'Warning  FailedMount  kubelet  MountVolume.SetUp failed for volume "creds" : secret "db-creds" not found',
        f"deployment.apps/{pick(REPOS)} image updated",
        "  Type     Reason     Age   From               Message",
    ]:
        H(fam, line)
    fam = "checksum_output"
    for i in range(3):
        H(fam, f"{hx(64)}  dist/{pick(REPOS)}-{ver()}-linux-amd64.tar.gz")
        H(fam, f"{hx(32)}  backup-2026-0{num(1, 4)}-{num(10, 28)}.sql.gz")
    H(fam, f'ETag: "{hx(40)}"')
    H(fam, f'If-None-Match: W/"{hx(16)}"')
    H(fam, f"sha384-{b64(48)}")
    H(
        fam,
        f'<script src="https://cdn.jsdelivr.net/npm/bootstrap@5.3.3/dist/js/bootstrap.bundle.min.js" integrity="sha384-{b64(48)}" crossorigin="anonymous"></script>',
    )
    H(fam, f"x-amz-checksum-sha256: {b64(32)}")
    H(fam, f"Content-MD5: {b64(16)}")
    H(fam, f"x-goog-hash: crc32c={b64(4)},md5={b64(16)}")
    fam = "log_line"
    for i in range(4):
        H(fam, f"{when()} INFO  [{pick(REPOS)}] GET /healthz 200 {num(1, 9)}ms ip={ip10()}")
        H(
            fam,
            f"{when()} WARN  auth: login failed for user={pick(DEVS)} reason=invalid_password attempts={num(1, 5)}",
        )
    H(fam, f"{when()} INFO token refreshed for client_id={pick(REPOS)}-web expires_in=3600")
    H(fam, f"{when()} DEBUG cache miss key=user:{num(1, 99999)}:profile ttl=300")
    H(fam, f"{when()} ERROR webhook signature mismatch (event=invoice.paid, attempt=3)")
    H(
        fam,
        f"Jan 12 10:{num(10, 59)}:{num(10, 59)} web{num(1, 9)} sshd[{num(1000, 99999)}]: Accepted publickey for deploy from {ip10()} port {num(30000, 65000)} ssh2: ED25519 SHA256:{b64(32).rstrip('=')}",
    )
    H(fam, f"{when()} INFO api_key_id=key_{rs(16, LAL)} scope=read rate_limit=600/min")
    H(fam, f"mac={':'.join(hx(2) for _ in range(6))} ip={ip10()} lease=86400")
    fam = "crypto_params"
    for line in [
        "ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256;",
        "KexAlgorithms curve25519-sha256,sntrup761x25519-sha512@openssh.com",
        "bcrypt rounds=12 argon2 time_cost=3 memory_cost=65536 parallelism=4",
        "PBKDF2-HMAC-SHA256 with 600000 iterations",
        "jwt: alg=RS256 kid=2026-01 jwks_uri=https://auth.example.com/.well-known/jwks.json",
        "Cipher Suite: TLS_AES_256_GCM_SHA384",
        "Server public key is 256 bit",
        "Signature Algorithm: ecdsa-with-SHA256",
        "key_size: 4096",
        "openssl genpkey -algorithm ed25519 -out key.pem",
    ]:
        H(fam, line)


for _f in (
    _ham_hashes,
    _ham_git,
    _ham_ids,
    _ham_b64_keys,
    _ham_refs,
    _ham_text,
    _ham_ops,
    _ham_prose_misc,
):
    _f()


# ==========================================================================
# checks
# ==========================================================================
def _check() -> None:
    assert len(SECRETS) >= 200, len(SECRETS)
    fmts = Counter(s.fmt for s in SECRETS)
    assert len(fmts) >= 80, len(fmts)
    assert len(HAM) >= 400, len(HAM)
    assert len({h.family for h in HAM}) >= 25
    for s in SECRETS:
        assert s.secret and s.secret in s.text, (s.fmt, s.secret)
        assert len(s.secret) >= 6, (s.fmt, s.secret)
        assert s.text.count("\n") <= 45, s.fmt
        if s.keep:
            assert s.keep in s.text, (s.fmt, s.keep)
            assert s.keep not in s.secret and s.secret not in s.keep, (s.fmt, s.keep)
    for s in SECRETS:
        for h in HAM:
            assert s.secret not in h.text, (s.fmt, s.secret, h.family, h.text)


_check()


if __name__ == "__main__":
    print(f"SECRETS: {len(SECRETS)} over {len({s.fmt for s in SECRETS})} fmt labels")
    for fam, n in sorted(Counter(s.family for s in SECRETS).items()):
        print(f"  {fam:20s} {n:4d}  ({len({s.fmt for s in SECRETS if s.family == fam})} fmts)")
    print(f"HAM: {len(HAM)} over {len({h.family for h in HAM})} families")
    for fam, n in sorted(Counter(h.family for h in HAM).items()):
        print(f"  {fam:20s} {n:4d}")
