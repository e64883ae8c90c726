"""The detector by kind: the blind corpora (written without the detector's code), JSON-escaped
tool payloads, and the leave-one-family-out switch bench/redact.py reports."""

from __future__ import annotations

import json

import pytest

from memoryd.redact import RULE_FAMILIES, find_secrets, redact, redactor
from tests.unit.redact_corpora import Labelled, Ordinary, corpora

CORPORA = corpora()
TUNED = ("blind-a", "blind-b")  # every sample of these; blind-c and blind-d as wholes, below
BLIND = [s for name in TUNED for s in CORPORA[name][0]]
BLIND_HAM = [h for name in TUNED for h in CORPORA[name][1]]


def test_the_blind_corpora_are_big_enough() -> None:
    for name in (*TUNED, "blind-d"):
        secrets, ham = CORPORA[name]
        assert len(secrets) >= 150 and len({s.fmt for s in secrets}) >= 60
        assert len(ham) >= 150
        assert all(s.secret in s.text for s in secrets)


@pytest.mark.parametrize("sample", BLIND, ids=[f"{s.corpus}-{s.fmt}" for s in BLIND])
def test_blind_secret_is_redacted(sample: Labelled) -> None:
    out = redact(sample.text)
    assert sample.secret not in out
    assert find_secrets(sample.text), "note refusal and the push scan use find_secrets"
    assert redact(out) == out


@pytest.mark.parametrize("sample", BLIND, ids=[f"{s.corpus}-{s.fmt}" for s in BLIND])
def test_blind_secret_inside_a_tool_payload_is_redacted(sample: Labelled) -> None:
    """Tool input reaches the redactor as JSON (a bash command, a file the agent wrote)."""
    wrapped = json.dumps({"command": sample.text, "description": "run it"})
    out = redact(wrapped)
    assert json.loads(out)["description"] == "run it"
    assert json.dumps(sample.secret)[1:-1] not in out


@pytest.mark.parametrize(
    "line", BLIND_HAM, ids=[f"{h.corpus}-{h.family}-{i}" for i, h in enumerate(BLIND_HAM)]
)
def test_blind_ordinary_line_is_unchanged(line: Ordinary) -> None:
    assert redact(line.text) == line.text
    assert find_secrets(line.text) == []


def test_blind_ordinary_lines_inside_tool_payloads_stay_within_one_percent() -> None:
    wrapped = [json.dumps({"output": h.text}) for h in BLIND_HAM]
    altered = [w for w in wrapped if redact(w) != w]
    assert len(altered) * 100 <= len(wrapped), altered


@pytest.mark.parametrize(
    ("name", "recall", "altered"),
    [
        # tuned on after it was scored held out (92.5 %, 4.6 %); not every sample is caught yet
        ("blind-c", 0.975, 0.008),
        # recall never tuned on (95.7 %); its 8 altered lines (1.2 %) were looked at and mended
        ("blind-d", 0.955, 0.003),
    ],
)
def test_corpora_scored_as_wholes_stay_at_their_level(
    name: str, recall: float, altered: float
) -> None:
    """A change that generalises worse shows here first."""
    secrets, ham = CORPORA[name]
    caught = sum(s.secret not in redact(s.text) for s in secrets)
    changed = sum(redact(h.text) != h.text for h in ham)
    assert caught >= recall * len(secrets), f"{caught}/{len(secrets)}"
    assert changed <= altered * len(ham), f"{changed}/{len(ham)}"


def test_a_secret_two_json_levels_deep_is_redacted() -> None:
    command = "psql -c \"ALTER USER app PASSWORD 'Kx9!mPq2zzQ'\""
    event = json.dumps({"part": json.dumps({"tool": "bash", "input": {"command": command}})})
    out = redact(event)
    assert "Kx9!mPq2zzQ" not in out
    inner = json.loads(json.loads(out)["part"])
    assert inner["input"]["command"] == "psql -c \"ALTER USER app PASSWORD '[REDACTED]'\""


def test_leaving_a_family_out_switches_off_only_its_own_rules() -> None:
    sql = [s for s in BLIND if s.family == "sql"]
    without_sql = redactor(frozenset({"sql"}))
    caught = sum(s.secret not in redact(s.text) for s in sql)
    caught_without = sum(s.secret not in without_sql(s.text) for s in sql)
    assert caught == len(sql)
    assert caught_without < caught  # the SQL rules are what catches most of them
    tokens = [s for s in BLIND if s.family == "provider_tokens"]
    assert all(s.secret not in without_sql(s.text) for s in tokens)  # other families untouched


def test_every_rule_is_written_for_a_family() -> None:
    from memoryd.redact import POSITION_RULES, commands, shapes, tokens

    names = {r.name for r in (*POSITION_RULES, *shapes.RULES, *tokens.RULES, *commands.RULES)}
    assert names <= set(RULE_FAMILIES) | {"secret-assignment"}


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # kinds, each in a shape none of the corpora uses
        ("CREATE LOGIN svc_etl WITH PASSWORD = N'Qv7#mLp2xZ'", "Qv7#mLp2xZ"),
        (
            'Environment.SetEnvironmentVariable("STRIPE_API_KEY", "rk9Lm2Qx7Vb4Nz8Wc1Ty")',
            "rk9Lm2Qx7Vb4Nz8Wc1Ty",
        ),
        ("printf 'Hq4!vLz9Rt' | podman login quay.io -u bot --password-stdin", "Hq4!vLz9Rt"),
        ("ldap.simple_bind_s('cn=admin,dc=acme,dc=io', 'Tr33house!42')", "Tr33house!42"),
        ("Enter the new vault password: Zk8#pQ2mWx", "Zk8#pQ2mWx"),
        (
            "https://quokka_9fK2LmQx7Vb4Nz8Wc1TyRt6Hs3Jd5Ge0Ap@git.acme.io/x.git",
            "quokka_9fK2LmQx7Vb4Nz8Wc1TyRt6Hs3Jd5Ge0Ap",
        ),
        ("unknownvendor_live_9fK2LmQx7Vb4Nz8Wc1TyRt6Hs3Jd5Ge0", "9fK2LmQx7Vb4Nz8Wc1TyRt6Hs3Jd5Ge0"),
    ],
)
def test_kinds_in_shapes_no_corpus_has(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "line",
    [
        "SELECT password_hash FROM users WHERE id = $1",
        "echo $REGISTRY_TOKEN | docker login ghcr.io -u bot --password-stdin",
        "gcloud secrets versions access latest --secret=smtp-password",
        "Cache restored from key: Linux-pip-95adcadbd52143546b70410f63f2c6f99267c1b4837cfc6483c386f08c74dc01",
        "Idempotency-Key: 35c1753a-ba2e-4f0a-9aad-ece162d90bbb",
        "NEXT_PUBLIC_STRIPE_KEY=pk_live_51Hx9fK2LmQx7Vb4Nz8Wc1TyRt6Hs3Jd5Ge0ApQz",
        "password: '%env(DATABASE_PASSWORD)%'",
        "Token: ****d4cb (created 2024-06-01)",
    ],
)
def test_ordinary_lines_in_secret_positions_stay(line: str) -> None:
    assert redact(line) == line


@pytest.mark.slow  # 1.25 MB of hostile text: ~3-6 s of CPU
def test_nested_calls_full_of_literals_stay_linear() -> None:
    """Hostile text: every "(" opens a call whose arguments run past the window. Four times the
    text costs about four times the CPU (a quadratic scan would cost sixteen); a ratio, so a
    loaded machine slows both sizes alike."""
    import time

    def cpu(reps: int) -> float:
        text = 'f("a", ' * reps
        start = time.process_time()
        redact(text)
        return time.process_time() - start

    cpu(2_000)  # the patterns compiled first, outside both figures
    small, large = cpu(35_000), cpu(140_000)  # ~0.25 MB and ~1 MB
    assert large < 8 * small, f"{small:.2f} s for 0.25 MB, {large:.2f} s for 1 MB"


def test_a_redaction_keeps_no_text_alive_after_it() -> None:
    from memoryd.redact import spans

    redact("password = 'Kx9!mPq2zzQ'\n" * 100)
    assert getattr(spans._CALL, "windows", None) is None


@pytest.mark.slow  # 3,000 redactions of joined samples
def test_redaction_is_a_fixed_point_on_joined_samples() -> None:
    """A value one rule hides can be what kept another rule from the next secret (a cookie pair
    ahead of an ``Authorization: ApiKey`` header): redact() repeats its passes until nothing
    changes, so a second call finds nothing more (found by a blind review: one pass left the key)."""
    import random

    said = (
        "Cookie: csrftoken=G8zFqW623HMCHrilBF1yNHPTDEY5p2Pz; django_language=en | curl -H "
        "'Authorization: ApiKey dEVHdkIzUHJwTXJmeE1hUV9tZHY6WkxLRlhVdlNsYkJ5bDBnVHp6aDRYcw==' x"
    )
    assert "dEVHdkIzUHJw" not in redact(said)
    rng = random.Random(28)
    samples = [s.text for secrets, _ham in CORPORA.values() for s in secrets]
    for _ in range(1500):  # separators a transcript joins by ("x, Set-Cookie: …" below)
        text = rng.choice([" | ", "\n", "; ", " ", ", ", "\t", " && "]).join(rng.sample(samples, 2))
        once = redact(text)
        assert redact(once) == once, text


def test_a_marker_cut_at_its_bracket_is_not_redacted_again() -> None:
    """Found on re-reading the change: after ``x, `` a Set-Cookie value was read up to the
    marker's closing bracket, so ``[REDACTED`` looked like a cookie value and each pass added a
    ``]`` (the fixed point then ran out its passes). A marker stays a marker, cut or not."""
    said = "x, Set-Cookie: _billing_service_session=Zq8vN2rT5wK1mX7pL4sH9dF3; path=/; secure"
    once = redact(said)
    assert "Zq8vN2rT5wK1" not in once and "[REDACTED]]" not in once
    assert redact(once) == once


def test_a_marker_inside_a_header_value_does_not_end_it() -> None:
    """Found by a review: after ``x, `` or ``(`` a header value ended at a marker's own ``]``,
    so the cookies after the marker were never read and a session cookie stayed."""
    for said in (
        "x, Cookie: a=ghp_abcdefghijklmnopqrstuvwxyz0123456789; zz=Zq8vN2rT5wK1mX7pL4sH9dF3",
        "(Cookie: a=[REDACTED]; zz=Zq8vN2rT5wK1mX7pL4sH9dF3)",
    ):
        once = redact(said)
        assert "Zq8vN2rT5wK1" not in once, once
        assert redact(once) == once


def test_a_text_of_escaped_quotes_stays_linear() -> None:
    """Found by a blind review: every quote of ``\\"\\"\\"…`` started a scan to the end of the text
    for a JSON literal that never closes (40,000 pairs took 26 s). Each quote inside a failed
    literal's body fails the same way, so none is tried again. Same literals as the pattern finds."""
    import random
    import re
    import time

    from memoryd.redact import _json_literals

    literal = re.compile(r'"((?:[^"\\\n]|\\.){8,})"')
    rng = random.Random(6)
    pieces = ['"', "\\", "n", "\n", "a", '\\"', '": "', "xyz"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        assert list(_json_literals(text)) == [m.span() for m in literal.finditer(text)], text

    def cpu(pairs: int) -> float:
        start = time.process_time()
        redact('\\"' * pairs + " token=x9Kq2mVb7Rt5")
        return time.process_time() - start

    cpu(100)
    small, large = cpu(10_000), cpu(40_000)
    assert large < 8 * small + 0.05, f"{small:.3f} s for 10,000 pairs, {large:.3f} s for 40,000"
