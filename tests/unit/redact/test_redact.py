"""Redaction corpus: what must go, what must stay, and that structured text still parses."""

from __future__ import annotations

import json
import random
import re
import string
import textwrap
import time

import pytest

from memoryd.redact import contains_secret, find_secrets, redact
from memoryd.redact.tokens import REDACTED

# Secret-shaped strings are built at import time so no literal token sits in the repository.
_ALNUM = string.ascii_letters + string.digits


def fake(prefix: str, n: int, alphabet: str = _ALNUM) -> str:
    return prefix + "".join(alphabet[(i * 7 + 3) % len(alphabet)] for i in range(n))


OPENAI = fake("sk-", 48)
OPENAI_PROJ = fake("sk-" + "proj-", 20) + "_" + fake("", 20) + "-" + fake("", 12)
ANTHROPIC = fake("sk-" + "ant-api03-", 40) + "-" + fake("", 10)
AWS = "AKIA" + fake("", 16, string.ascii_uppercase + string.digits)
AWS_STS = "ASIA" + fake("", 16, string.ascii_uppercase + string.digits)
GITHUB = fake("gh" + "p_", 36)
GITHUB_PAT = fake("github" + "_pat_", 22) + "_" + fake("", 59)
SLACK = "xox" + "b-" + "123456789012-" + fake("", 24)
GOOGLE = fake("AI" + "za", 35)
STRIPE = fake("sk" + "_live_", 24)
STRIPE_RESTRICTED = fake("rk" + "_test_", 24)
NPM = fake("npm" + "_", 36)
JWT = ".".join(
    [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ",
        fake("", 43, _ALNUM + "-_"),
    ]
)
PEM_BODY = "\n".join(fake("", 64, _ALNUM + "+/") for _ in range(5))
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"


# --- true positives -----------------------------------------------------------------------------

TRUE_POSITIVES = [
    ("bearer", f"Authorization: Bearer {fake('', 32)}", fake("", 32), "Bearer [REDACTED]"),
    ("bearer", f"authorization: bearer {fake('', 20)}==", fake("", 20), "bearer [REDACTED]"),
    (
        "bearer",
        f"Bearer\t{fake('', 24, _ALNUM + '._-')}",
        fake("", 24, _ALNUM + "._-"),
        "Bearer\t[REDACTED]",
    ),
    (
        "basic-auth",
        "Authorization: Basic dXNlcjpodW50ZXIyMg==",
        "dXNlcjpodW50ZXIyMg",
        "Basic [REDACTED]",
    ),
    ("anthropic-key", f"key is {ANTHROPIC}.", ANTHROPIC, "[REDACTED:anthropic-key]"),
    ("openai-key", f"use {OPENAI} now", OPENAI, "[REDACTED:openai-key]"),
    ("openai-key", f"OPENAI={OPENAI_PROJ}", OPENAI_PROJ, "[REDACTED:openai-key]"),
    (
        "openai-key",
        f"({fake('sk-' + 'svcacct-', 30, _ALNUM + '_-')})",
        fake("svcacct-", 30, _ALNUM + "_-"),
        "[REDACTED:openai-key]",
    ),
    ("aws-key", f"aws id {AWS}", AWS, "[REDACTED:aws-key]"),
    ("aws-key", f"sts {AWS_STS} ok", AWS_STS, "[REDACTED:aws-key]"),
    (
        "github-token",
        f"git clone https://{GITHUB}@github.com/o/r",
        GITHUB,
        "[REDACTED:github-token]",
    ),
    ("github-token", f"token {GITHUB_PAT}", GITHUB_PAT, "[REDACTED:github-token]"),
    ("slack-token", f"slack {SLACK}", SLACK, "[REDACTED:slack-token]"),
    ("private-key", f"key:\n{PEM}\nafter", PEM_BODY.splitlines()[2], "[REDACTED:private-key]"),
    ("jwt", f"cookie session={JWT}; Path=/", JWT.split(".")[2], "[REDACTED:jwt]"),
    (
        "url-credentials",
        "postgres://admin:hunter22@db.internal:5432/app",
        "hunter22",
        "admin:[REDACTED]@db.internal",
    ),
    ("google-api-key", f"maps key {GOOGLE}", GOOGLE, "[REDACTED:google-api-key]"),
    ("stripe-key", f"stripe {STRIPE}", STRIPE, "[REDACTED:stripe-key]"),
    ("stripe-key", f"stripe {STRIPE_RESTRICTED}", STRIPE_RESTRICTED, "[REDACTED:stripe-key]"),
    ("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM, "[REDACTED:npm-token]"),
]


@pytest.mark.parametrize(
    ("family", "text", "secret", "marker"),
    TRUE_POSITIVES,
    ids=[f"{t[0]}-{i}" for i, t in enumerate(TRUE_POSITIVES)],
)
def test_each_family_is_redacted_and_named(
    family: str, text: str, secret: str, marker: str
) -> None:
    out = redact(text)
    assert secret not in out
    assert marker in out
    assert family in find_secrets(text)
    assert contains_secret(text)


def test_bearer_runs_first_so_a_bearer_openai_key_is_redacted_once() -> None:
    out = redact(f"Authorization: Bearer {OPENAI}")
    assert out == "Authorization: Bearer [REDACTED]"
    assert find_secrets(f"Authorization: Bearer {OPENAI}") == ["bearer"]


def test_pem_variants_and_a_truncated_block() -> None:
    for kind in ("", "EC ", "OPENSSH ", "ENCRYPTED "):
        text = (
            f"-----BEGIN {kind}PRIVATE KEY-----\n{PEM_BODY}\n-----END {kind}PRIVATE KEY-----\ntail"
        )
        assert redact(text) == "[REDACTED:private-key]\ntail"
    cut = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}"
    assert redact(cut) == "[REDACTED:private-key]"


def test_pem_inside_a_json_string_keeps_the_json_valid() -> None:
    payload = json.dumps({"output": PEM + "\n", "ok": True})
    out = json.loads(redact(payload))
    assert out == {"output": "[REDACTED:private-key]\n", "ok": True}


def test_url_credentials_keep_scheme_user_and_host() -> None:
    assert (
        redact("redis://default:s3cr3tpw@cache:6379/0") == "redis://default:[REDACTED]@cache:6379/0"
    )
    assert redact("https://user:p%40ss@example.com/x") == "https://user:[REDACTED]@example.com/x"


# --- false positives ----------------------------------------------------------------------------

CLEAN = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
    "see 3f78685 and 3f786850e387",
    "request 550e8400-e29b-41d4-a716-446655440000 done",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "payload aGVsbG8gd29ybGQsIHRoaXMgaXMgbm90IGEgc2VjcmV0 in prose",
    "the tokenizer splits text; we discussed the password reset flow and secret management",
    "max_tokens: 4096",
    '"tokens": {"input": 1, "output": 20, "reasoning": 0, "cache": {"read": 0, "write": 0}}',
    '{"input_tokens": 12, "output_tokens": 40, "max_tokens": 4096, "token_count": 7}',
    "ses_dd8985de3ffevWgvaQlvqBQx4t msg_dd8985de4001Xz prt_dd8985de5002abCD",
    "/home/user/projects/secret-sauce/src/tokens/password_reset.py",
    "https://example.com/docs/api-keys?page=2#auth",
    "task-list desk-top risk-assessment ask-me",
    "Bearer token auth is described below",
    "secrets: inherit",
    "token_type: bearer",
    "password:",
    "password: ''",
    'password: ""',
    "token: true",
    "secret: null",
    "api_key: abc",
    "password: ***",
    "TOKEN=${GITHUB_TOKEN}",
    "export API_KEY=$OPENAI_API_KEY",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "password: {{ vault_password }}",
    "password: <your-password-here>",
    'password = os.environ["DB_PASSWORD"]',
    "const apiKey = process.env.API_KEY;",
    "token = get_token()",
    "f(token=token, password=self.password)",
    "def login(password: str, token: Optional[str] = None) -> None:",
    "interface Creds { password: string; token?: string }",
    "PWD=/srv/app",
    "private_key: ~/.ssh/id_ed25519",
    "if token == expected:",
    "for token in tokens:",
    "The secretary said the keyboard key: Enter",
    "postgres://user:${PGPASSWORD}@db/app",
    "[REDACTED] [REDACTED:openai-key] password: [REDACTED]",
    # code and docs that merely mention secrets
    "token = uuid.uuid4().hex",
    "password = self.password or secrets.token_urlsafe(32)",
    "return BasicAuth(username=auth[0], password=auth[1])",
    "url, username, password = handle.url, handle.username, handle.password",
    "self.access_token = auth_info",
    'load(signing_key=private_key_pem, alg="RS256")',
    "token = Name.Builtin.Pseudo",
    "UPDATE jobs SET status = 'done' WHERE ownership_token = ?",
    "    refresh_token: The refresh token to exchange.",
    "    client_secret: str | None = None,",
    "def verify(token: AccessToken) -> bool:",
    "    Token: '#d0d0d0',",
    "access_token:  # pragma: no branch",
    "e.g. `pass` in `https://user:pass@host:port/path`",
]


@pytest.mark.parametrize("text", CLEAN)
def test_non_secrets_are_left_untouched(text: str) -> None:
    assert redact(text) == text
    assert find_secrets(text) == []
    assert not contains_secret(text)


# --- secret assignments -------------------------------------------------------------------------

ASSIGNMENTS = [
    ("DB_PASSWORD=hunter22", "DB_PASSWORD=[REDACTED]"),
    ("export GITHUB_TOKEN=abcdef123456", "export GITHUB_TOKEN=[REDACTED]"),
    ("export FOO_TOKEN='it is s3cret'", "export FOO_TOKEN='[REDACTED]'"),
    ('CLIENT_SECRET="a b c d e"', 'CLIENT_SECRET="[REDACTED]"'),
    ("SECRET_KEY=django-insecure-xyz && run", "SECRET_KEY=[REDACTED] && run"),
    ("MY_TOKEN=abcd1234 npm test", "MY_TOKEN=[REDACTED] npm test"),
    ("password: hunter22", 'password: "[REDACTED]"'),
    ("password: hunter22   # prod only", 'password: "[REDACTED]"   # prod only'),
    ("password = correct horse battery", 'password = "[REDACTED]"'),
    ("x-api-key: 0123abcd4567", 'x-api-key: "[REDACTED]"'),
    ("X-Api-Key: 0123abcd4567", 'X-Api-Key: "[REDACTED]"'),
    ("accessToken: ya29.a0AfH6SMBx-9q", 'accessToken: "[REDACTED]"'),
    ("PGPASSWORD=pg-pass-1", "PGPASSWORD=[REDACTED]"),
    ("aws_secret_access_key = not/a+real/Secret/Value0", 'aws_secret_access_key = "[REDACTED]"'),
    ("aws_access_key_id=ABCDEFGHIJ", "aws_access_key_id=[REDACTED]"),
    ("db_pwd: p4ssw0rd", 'db_pwd: "[REDACTED]"'),
    ("passphrase => 'open sesame'", "passphrase => '[REDACTED]'"),
    ('token := "abcd1234"', 'token := "[REDACTED]"'),
    (
        "curl 'https://x.io/api?token=abc123def&page=2'",
        "curl 'https://x.io/api?token=[REDACTED]&page=2'",
    ),
    ("mysql --password=s3cr3tpw db", "mysql --password=[REDACTED] db"),
    ("login --password Hunter22 --user bob", "login --password [REDACTED] --user bob"),
    ('api_key: str = "live-key-1234"', 'api_key: str = "[REDACTED]"'),
    ("password: 12345678", 'password: "[REDACTED]"'),
    ("the db password: swordfish for the staging box", 'the db password: "[REDACTED]"'),
    ("echo 'password: hunter22' | tee f", "echo 'password: \"[REDACTED]\"' | tee f"),
]


@pytest.mark.parametrize(("text", "expected"), ASSIGNMENTS)
def test_secret_assignments(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert "secret-assignment" in find_secrets(text)


def test_escaped_quotes_inside_values() -> None:
    assert redact(r'password: "ab\"cd\\"ef" rest') == r'password: "[REDACTED]"ef" rest'
    assert redact(r'{"token": "x\"y\"z1234"}') == r'{"token": "[REDACTED]"}'
    assert redact("password: 'it''s a secret'") == "password: '[REDACTED]'"
    assert redact(r"config.password = 'it\'s hunter'") == "config.password = '[REDACTED]'"


def test_env_file() -> None:
    env = textwrap.dedent(
        """\
        # database
        DB_HOST=localhost
        DB_PASSWORD=hunter22
        DB_PORT=5432
        STRIPE_SECRET=whsec_abcdef123
        EMPTY_TOKEN=
        REF_TOKEN=${OTHER}
        """
    )
    out = redact(env).splitlines()
    assert out == [
        "# database",
        "DB_HOST=localhost",
        "DB_PASSWORD=[REDACTED]",
        "DB_PORT=5432",
        "STRIPE_SECRET=[REDACTED]",
        "EMPTY_TOKEN=",
        "REF_TOKEN=${OTHER}",
    ]


# --- structure survives -------------------------------------------------------------------------


def test_json_payload_stays_parseable() -> None:
    doc = {
        "password": "hunter22",
        "client_secret": {"value": "x}y]z", "n": [1, 2, {"deep": 'a"b'}]},
        "api_key": ["abcd1234", "efgh5678"],
        "access_token": "ya29.a0AfH6SMBx",
        "db_password": 12345678,
        "tokens": {"input": 203, "output": 20},
        "max_tokens": 4096,
        "token": 12,
        "auth": {"githubToken": "abcdef-123456"},
        "user": "bob",
        "enabled": True,
    }
    for text in (
        json.dumps(doc),
        json.dumps(doc, indent=2),
        json.dumps(doc, separators=(",", ":")),
    ):
        out = json.loads(redact(text))
        assert out == {
            "password": REDACTED,
            "client_secret": REDACTED,
            "api_key": REDACTED,
            "access_token": REDACTED,
            "db_password": REDACTED,
            "tokens": {"input": 203, "output": 20},
            "max_tokens": 4096,
            "token": 12,
            "auth": {"githubToken": REDACTED},
            "user": "bob",
            "enabled": True,
        }


def test_json_inside_a_json_string_stays_parseable_at_both_levels() -> None:
    inner = json.dumps({"password": "hunter22", "secret": {"a": "b}"}, "n": 1})
    outer = json.dumps(
        {"tool": "read", "output": inner, "note": "DB_PASSWORD=hunter22\nDB_HOST=h\n"}
    )
    out = json.loads(redact(outer))
    assert json.loads(out["output"]) == {"password": REDACTED, "secret": REDACTED, "n": 1}
    assert out["note"] == "DB_PASSWORD=[REDACTED]\nDB_HOST=h\n"
    assert "hunter22" not in redact(outer)


def test_json_string_holding_shell_keeps_the_outer_string_closed() -> None:
    text = json.dumps({"command": "GITHUB_TOKEN=abcd1234efgh git push", "cwd": "/w"})
    out = json.loads(redact(text))
    assert out == {"command": "GITHUB_TOKEN=[REDACTED] git push", "cwd": "/w"}


def test_yaml_block_keeps_its_shape() -> None:
    yaml_text = textwrap.dedent(
        """\
        db:
          user: bob
          password: hunter22   # prod
          token: 'it''s-secret'
          api_key: "abc\\"def"
          private_key: |
            line one
            line two
          tokens: 5
          flow: {user: bob, password: hunter22, host: x}
          list: [a, b]
        """
    )
    lines = redact(yaml_text).splitlines()
    assert lines == [
        "db:",
        "  user: bob",
        '  password: "[REDACTED]"   # prod',
        "  token: '[REDACTED]'",
        '  api_key: "[REDACTED]"',
        '  private_key: "[REDACTED]"',
        "  tokens: 5",
        '  flow: {user: bob, password: "[REDACTED]", host: x}',
        "  list: [a, b]",
    ]
    assert "hunter22" not in "\n".join(lines)


def test_python_dict_and_kwargs() -> None:
    assert (
        redact("{'password': 'hunter22', 'user': 'bob'}")
        == "{'password': '[REDACTED]', 'user': 'bob'}"
    )
    assert (
        redact("connect(host='h', password='hunter22')")
        == "connect(host='h', password='[REDACTED]')"
    )
    assert redact("connect(token=abcd1234, retries=3)") == "connect(token=[REDACTED], retries=3)"


def test_yaml_block_scalar_with_crlf_line_endings() -> None:
    text = "secret: |\r\n  line one\r\n  line two\r\nuser: bob\r\n"
    assert redact(text) == 'secret: "[REDACTED]"\r\nuser: bob\r\n'


def test_command_line_flags() -> None:
    assert (
        redact("gh auth --token ghx9Abc123def --verbose") == "gh auth --token [REDACTED] --verbose"
    )
    assert redact("pass it with the --token flag") == "pass it with the --token flag"
    assert redact("run --password --user bob") == "run --password --user bob"


def test_references_inside_quotes_are_kept_but_literals_are_not() -> None:
    assert redact('"authorization": "Bearer ${TOKEN}"') == '"authorization": "Bearer ${TOKEN}"'
    assert (
        redact('{"token": "${{ secrets.NPM_TOKEN }}"}') == '{"token": "${{ secrets.NPM_TOKEN }}"}'
    )
    assert redact('password="auth_info"') == 'password="[REDACTED]"'
    assert redact("DB_PASSWORD=super_secret_pw") == "DB_PASSWORD=[REDACTED]"


def test_a_value_that_swallows_a_marker_is_still_redacted() -> None:
    text = f"password: hunter22 and {AWS}"
    assert redact(text) == 'password: "[REDACTED]"'
    assert find_secrets(text) == ["aws-key", "secret-assignment"]


# --- find_secrets, idempotence, performance -----------------------------------------------------


def test_find_secrets_names_every_family_in_rule_order() -> None:
    text = f"{JWT} and {OPENAI} and password: hunter22 and {AWS}"
    assert find_secrets(text) == ["openai-key", "aws-key", "jwt", "secret-assignment"]
    assert find_secrets("nothing to see here") == []


CORPUS = [t[1] for t in TRUE_POSITIVES] + [t[0] for t in ASSIGNMENTS] + CLEAN


@pytest.mark.parametrize("text", CORPUS)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    if once != text:
        assert find_secrets(once) == []


@pytest.mark.slow  # 1 MB through the redactor
def test_one_megabyte_of_mixed_text_is_fast() -> None:
    lines = [
        json.dumps(
            {"type": "step-finish", "tokens": {"input": 203, "output": 20}, "max_tokens": 4096}
        ),
        "The tokenizer splits the password reset flow into key steps; see src/keys/token_store.py",
        f"export GITHUB_TOKEN={GITHUB} && git push",
        json.dumps(
            {"tool": "bash", "output": "DB_PASSWORD=hunter22\nAPI_KEY=abc123\n", "key": "value"}
        ),
        "commit 3f786850e387550fdab836ed7e6dc881de23001b uuid 550e8400-e29b-41d4-a716-446655440000",
        f"Authorization: Bearer {fake('', 40)}",
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 6,
        "password: hunter22\ntoken: 'abcd1234'",
    ]
    text = "\n".join(lines[i % len(lines)] for i in range(12_000))[:1_000_000]

    def cpu(part: str) -> tuple[float, str]:
        start = time.process_time()  # CPU time: a loaded machine delays us but does not inflate it
        out = redact(part)
        return time.process_time() - start, out

    cpu(text[:20_000])  # the patterns compiled first, outside both figures
    small, _ = cpu(text[:250_000])
    large, out = cpu(text)
    # Four times the text, about four times the CPU (two passes each: the text is full of
    # secrets); a quadratic matcher would take sixteen. A ratio: load slows both sizes alike.
    assert large < 8 * small, f"{small:.2f} s for 0.25 MB, {large:.2f} s for 1 MB"
    assert GITHUB not in out and "hunter22" not in out


@pytest.mark.slow  # 300 KB of hostile text each
@pytest.mark.parametrize(
    "text",
    [
        "eyJ" * 100_000,
        "-----BEGIN PRIVATE KEY-----." * 10_000,
        "key" * 100_000,
        '{"password": {"a": ' * 15_000,
        "x://y:" * 50_000,
        "password: " + "{" * 300_000,
        "password: '" * 30_000,
        'token: "${A} ' * 30_000,
    ],
    ids=[
        "jwt-prefix",
        "pem-no-end",
        "keyword-run",
        "unclosed-objects",
        "url-prefix",
        "deep-brace",
        "quotes",
        "refs",
    ],
)
def test_pathological_inputs_stay_linear(text: str) -> None:
    start = time.process_time()
    redact(text)
    # Linear is well under 1 s of CPU; a quadratic matcher would take minutes.
    assert time.process_time() - start < 2.5


def test_the_hint_index_picks_the_steps_the_hints_allow() -> None:
    """Each group's index chooses exactly the steps a rule-by-rule test of its hints would: a
    step with a needle or no hints always, any other one when the text holds one of its hints."""
    import random

    from memoryd import redact as r

    rng = random.Random(5)
    p = r._DEFAULT
    for group in (p.head, p.tokens, p.tail, p.context):
        for _ in range(300):
            present = frozenset(rng.sample(p.hints, rng.randrange(0, 12)))
            expected = [
                i
                for i, (needle, hints, _, _) in enumerate(group.steps)
                if needle or not hints or not present.isdisjoint(hints)
            ]
            assert list(r._chosen(group, present)) == expected


def test_a_value_running_past_a_rules_window_is_redacted_whole() -> None:
    """Rules that look only near their words read a line at most 400 characters past the word;
    a value that ran on past that was redacted only up to it and kept its tail (an ASP.NET
    identity cookie of ~430 characters did, and so did a ~400-character value after ``pin:``
    behind an ``İ``, whose lower case is two characters). The window now ends where the value
    does."""
    cookie = (
        "CfDJ8jsQkMiuZhzhv4QukKszVNXxs_EmB1M3HOgpJA0HyfAV98kUznMOsll_LpgSeiah9gVMI6JECfvrfL_7gu_"
        "RIgOm2LmOHHoFcax1KljXiEojWBEtHEX7R83EWFhoS5qlA3v6s_GYScCoMufjJejyT-0rED4m6DSahwezUgcVtjE"
        "-wpl3U356Q_w8K2gV76jIp2vx6XvfzrygYXMRD8Ha2R66P6OjxtOJ_9HwmbVtCfLhSjM0uABL5tAecT3jceJitS6"
        "JfLJn6DD2pw6POcl3UgVrlvjsT-_I_iC4DIitJuxYcBo-vkCPGgM601_NFNArFbzN40B8gdLP9qE3KTAs7cad9x2x"
        "WdGQ2UIZg_SaAkc6MmEwJQUHK-MkZ-DfYdA6ye3sEQ5kN7VD19_ftqxs40_jeH_-EkWwtwJqU"
    )
    rng = random.Random(3)
    pin = "".join(
        rng.choice("abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(405)
    )
    cases = [
        (f".AspNetCore.Identity.Application={cookie}", cookie),
        (
            f".AspNetCore.Identity.Application={cookie}\napiVersion: v1\nkind: ServiceAccount",
            cookie,
        ),
        (f"İ\npin: {pin}", pin),
        (f"İİİ\npin: {pin}", pin),
        (f"x\npin: {pin}", pin),
    ]
    for text, secret in cases:
        out = redact(text)
        assert REDACTED in out, text
        leaked = [secret[k : k + 8] for k in range(len(secret) - 8) if secret[k : k + 8] in out]
        assert not leaked, (text[:60], leaked[:3])


@pytest.mark.parametrize(
    "text",
    [
        "paſſword=unter2",  # ſ (long s): re's case-insensitive matching takes it for s
        "PAſſ:nter22",
        'ſecret="abcd"',
        "IDENtıFIED BY er22",  # ı (dotless i) for i
        "IDENTİFIED BY -4HZ",  # İ (dotted capital I) for I
        "PıN: AgpAR5mZ",
    ],
)
def test_keywords_spelled_with_letters_re_folds_are_found(text: str) -> None:
    """The rules' patterns match case-insensitively, and ``re`` then takes ``ſ`` for ``s`` and
    ``ı``/``İ`` for ``i``; the hint words that pick the rules were looked for in ``str.lower``'s
    copy, where they are not, so ``paſſword=…`` went through. Hint words are now looked for in
    the same fold the patterns' prefilter uses."""
    out = redact(text)
    assert out != text and REDACTED in out
    assert find_secrets(text)


# --- provider tokens: needles looked for in the token runs alone ------------------------------------


def _consumed(items: object, flags: int) -> set[str] | None:
    """The characters a parsed pattern's matches can hold (lookarounds hold none), or None when
    that is not a small known set (any character, a negated set, a backreference)."""
    from re import _constants as c  # type: ignore[attr-defined]

    out: set[str] = set()

    def chars(code: int) -> set[str]:
        ch = chr(code)
        return {ch, ch.lower(), ch.upper()} if flags & re.IGNORECASE else {ch}

    for op, av in items:  # type: ignore[attr-defined]
        if op is c.LITERAL:
            out |= chars(av)
        elif op is c.IN:
            for o, a in av:
                if o is c.LITERAL:
                    out |= chars(a)
                elif o is c.RANGE:
                    out |= {x for code in range(a[0], a[1] + 1) for x in chars(code)}
                elif o is c.CATEGORY and a is c.CATEGORY_DIGIT:
                    out |= set(string.digits)
                elif o is c.CATEGORY and a is c.CATEGORY_WORD:
                    out |= set(string.ascii_letters + string.digits + "_")  # re.ASCII
                else:
                    return None
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            sub = _consumed(av[2], flags)
            if sub is None:
                return None
            out |= sub
        elif op is c.SUBPATTERN:
            sub = _consumed(av[3], flags | (av[1] or 0))
            if sub is None:
                return None
            out |= sub
        elif op is c.ATOMIC_GROUP or op is c.BRANCH:
            for alt in [av] if op is c.ATOMIC_GROUP else av[1]:
                sub = _consumed(alt, flags)
                if sub is None:
                    return None
                out |= sub
        elif op not in (c.AT, c.ASSERT, c.ASSERT_NOT):
            return None
    return out


def test_every_token_rule_said_to_stand_in_a_run_does() -> None:
    """A token rule's needle is looked for in the text's runs of 16 or more token characters
    alone. That holds only if every match of the rule is such a run: proved here from each
    pattern's parse tree (the characters it can consume, and at least 16 of them)."""
    from re import _parser as parser  # type: ignore[attr-defined]

    from memoryd.redact import tokens

    run_chars = set(string.ascii_letters + string.digits + "_-.+/=~:")
    assert len(tokens.TOKEN_RULES) == len(tokens._TOKENS)
    claimed = 0
    for rule, (name, _hints, pattern) in zip(tokens.TOKEN_RULES, tokens._TOKENS, strict=True):
        assert rule.name == name and rule.needle, name
        parsed = parser.parse(pattern, re.ASCII)
        held = _consumed(list(parsed), parsed.state.flags)
        proved = held is not None and held <= run_chars and parsed.getwidth()[0] >= 16
        assert not rule.in_run or proved, (name, pattern, held and held - run_chars)
        claimed += rule.in_run
    assert claimed >= 85  # all but the short Slack tokens


def test_a_needle_outside_every_token_run_wakes_no_token_rule() -> None:
    """``ghp_`` in a sentence, a long identifier elsewhere: the GitHub rule is not even tried
    (its needle was looked for in the whole text before); in a run it still is, and redacts."""
    from memoryd import redact as redaction

    group = redaction._DEFAULT.tokens
    text = "tokens start with ghp_ or gho_; see dependency_injection_container_registry"
    live = {group.steps[i][3] for i in redaction._live(group, group.fixed_order, text)}
    assert "github-token" not in live
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert "github-token" in {
        group.steps[i][3] for i in redaction._live(group, group.fixed_order, f"{text} {token}")
    }
    assert redact(f"{text} {token}") == f"{text} [REDACTED:github-token]"
