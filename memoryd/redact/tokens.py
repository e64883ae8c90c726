"""Secrets recognisable by their shape alone: provider tokens, private-key blocks, URL userinfo.

Each rule is one regex with a literal prefix (so the regex engine jumps straight to candidates)
and a list of lower-case *hints*: substrings that must occur in the text for the rule to run at
all, which keeps the common case (no such token anywhere) at one ``in`` test per rule. A match
whose body is nearly one repeated character (``sk-xxxxxxxx...``) is a placeholder and stays.

The formats are public facts (prefixes, alphabets, lengths) that providers document so scanners
can find leaked credentials; the expressions here are written for this module.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

from memoryd.redact.lazy import lazy

REDACTED = "[REDACTED]"


def marker(name: str) -> str:
    return f"[REDACTED:{name}]"


class Rule(NamedTuple):
    name: str
    apply: Callable[[str], tuple[str, int]]
    hints: tuple[str, ...]  # lower-case substrings, one of which must occur; () means always run
    needle: str = ""  # a case-sensitive substring every match contains ("" means none known)
    in_run: bool = False  # every match is 16 or more TOKEN_CHARS: its needle stands in such a run


def literal_prefix(pattern: str) -> str:
    """The literal text every match of ``pattern`` starts with ("" if unknown or alternated)."""
    depth = 0
    for i, ch in enumerate(pattern):  # a top-level "|" makes any prefix unreliable
        if ch == "\\":
            continue
        if ch in "([" and (i == 0 or pattern[i - 1] != "\\"):
            depth += 1
        elif ch in ")]" and pattern[i - 1] != "\\":
            depth -= 1
        elif ch == "|" and depth == 0 and pattern[i - 1] != "\\":
            return ""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            out.append(pattern[i + 1])
            i += 2
        elif ch.isalnum() or ch in "-_:/~ =@#%!,'\"":
            out.append(ch)
            i += 1
        else:
            break
    if i < len(pattern) and pattern[i] in "?*{" and out:
        out.pop()  # the last literal is optional or repeated
    return "".join(out)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    if n == 0:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def is_placeholder(body: str) -> bool:
    """``sk-xxxxxxxxxxxx``, ``ghp_************``, ``00000000``: a filler where a token would go."""
    return _FILLER_RE.fullmatch(body) is not None or is_filler(body)


_MASK_CHARS = frozenset("*•●·∙x")
_ENV_NAME_RE = lazy(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_TODO_RE = lazy(
    r"(?i)(?:todo|fixme|tbd|xxx|n/?a)\b|(?:fill|put|paste|set)[ _-]?(?:in|me|it|here)\b"
)


def is_filler(value: str) -> bool:
    """Where a secret would go, but none is: ``sk-...``, ``ghp_xxxx…``, ``sk_test_XXXX``,
    ``xoxb-your-token``, ``T000/B000/XXXX``, ``****d4cb`` (masked), ``TODO: fill in``, an env
    name (``DB_PASSWORD``)."""
    v = value.strip("\"'` ")
    if not v:
        return True
    if _ENV_NAME_RE.fullmatch(v) or _TODO_RE.match(v):
        return True
    if re.search(r"(?i)replace[_-]?me|change[_-]?me|placeholder|dummy|your[_-]", v):
        return True
    first = v.split()[0]
    masked = sum(c in _MASK_CHARS for c in first)
    if masked >= 3 and masked * 5 >= len(first) * 2 and re.search(r"[*•●·∙]{3,}|x{4,}", first):
        return True
    if re.search(r"\.{3}|…", first) and len(re.split(r"\.{3}|…", first)[-1]) <= 6:
        return True  # sk-ant-...AS7M: shown with its head and tail only
    parts = [p for p in re.split(r"[-_.:/]", v) if p]
    if not parts:
        return True
    body = max(parts, key=len)
    if re.fullmatch(r"[xX*•0]{4,}|[xX]{3,}\d{0,2}", body):
        return True
    if v.endswith(("...", "…")) and len(body) <= 8:
        return True
    return any(p.lower() in ("your", "yours", "here", "placeholder", "redacted") for p in parts)


_FILLER_RE = lazy(r"[xX*.0_\-]+|(?:your|my)?[-_]?(?:api[-_]?)?(?:key|token|secret)[-_]?here", re.I)


# --- provider tokens ------------------------------------------------------------------------------

_W = r"[A-Za-z0-9_\-]"  # base64url
_AN = r"[A-Za-z0-9]"
_END = r"(?![A-Za-z0-9_\-])"


def _p(prefix: str, boundary: str = "A-Za-z0-9") -> str:
    """A literal prefix that must not continue a longer word: ``ghp_`` but not ``xghp_``.

    The prefix comes first and the check after it, so the regex engine can use its fast literal
    search; a leading ``\\b`` or lookbehind would make it try every position (20-50x slower).
    """
    lit = re.escape(prefix)
    return f"{lit}(?<![{boundary}]{lit})"


_B64 = r"[A-Za-z0-9+/]"
_HEX = r"[0-9a-f]"

# (family, hints, pattern). Every pattern opens with a literal prefix, or carries hints (lower-case
# substrings, one of which must occur) when it cannot. A named group ``s`` marks the part to
# replace; otherwise the whole match goes. Anthropic precedes OpenAI since both start ``sk-``.
_TOKENS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("anthropic-key", (), rf"{_p('sk-ant-')}{_W}{{20,}}"),
    ("xai-key", (), rf"{_p('xai-')}{_AN}{{40,}}"),
    (
        "openai-key",
        (),
        rf"{_p('sk-')}(?:(?:proj|svcacct|admin|None|or-v\d)-{_W}{{20,}}|[A-Za-z0-9]{{20,}}{_W}*)",
    ),
    *(
        ("aws-key", (), rf"{_p(p)}[A-Z0-9]{{{16 - len(p) + 4}}}(?![A-Za-z0-9])")
        for p in ("AKIA", "ASIA", "ABIA", "ACCA", "A3T")
    ),
    ("aws-bedrock-key", (), rf"{_p('ABSK')}{_B64}{{100,}}=*"),
    *(
        ("github-token", (), rf"{_p(p)}{_AN}{{30,}}")
        for p in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
    ),
    ("github-token", (), rf"{_p('github_pat_')}\w{{22,}}"),
    (
        "gitlab-token",
        (),
        rf"{_p('gl')}(?:pat|dt|ft|rt|ptt|cbt|imt|soat|oas|agent|ffct|wt)-{_W}{{20,}}(?:\.{_W}+)*",
    ),
    ("gitlab-token", (), rf"{_p('GR1348941')}{_W}{{20,}}"),
    ("slack-token", (), rf"{_p('xox')}[abposer]-[A-Za-z0-9\-]{{10,}}"),
    ("slack-token", (), rf"{_p('xapp-')}[A-Za-z0-9\-]{{10,}}"),
    (
        "slack-webhook",
        (),
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_\-]{16,})",
    ),
    ("discord-webhook", (), r"discord(?:app)?\.com/api/webhooks/\d+/(?P<s>[\w\-]{20,})"),
    # These four are found by a literal in their middle; _BEFORE gives what must precede it.
    ("discord-token", (), r"\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}(?![A-Za-z0-9_\-])"),
    ("telegram-bot-token", (), r":AA(?<=\d:AA)[A-Za-z0-9_\-]{30,}"),
    ("terraform-token", (), r"\.atlasv1\.[\w=\-]{60,}"),
    ("stripe-key", (), rf"{_p('sk_')}(?:live|test|prod)_{_AN}{{10,}}"),
    ("stripe-key", (), rf"{_p('rk_')}(?:live|test|prod)_{_AN}{{10,}}"),
    ("stripe-key", (), rf"{_p('whsec_')}[A-Za-z0-9+/=]{{20,}}"),
    ("twilio-key", (), rf"{_p('SK')}[0-9a-fA-F]{{32}}(?![A-Za-z0-9])"),
    ("sendgrid-key", (), rf"{_p('SG.')}{_W}{{16,32}}\.{_W}{{30,50}}"),
    ("mailgun-key", (), rf"{_p('key-')}{_HEX}{{32}}(?![A-Za-z0-9])"),
    ("npm-token", (), rf"{_p('npm_')}{_AN}{{36,}}"),
    ("pypi-token", (), rf"{_p('pypi-AgE')}{_W}{{40,}}"),
    ("rubygems-token", (), rf"{_p('rubygems_')}{_HEX}{{48}}(?![A-Za-z0-9])"),
    ("docker-token", (), rf"{_p('dckr_')}(?:pat|oat)_{_W}{{20,}}"),
    ("google-api-key", (), rf"{_p('AIza')}{_W}{{35}}"),
    ("google-oauth", (), rf"{_p('GOCSPX-')}{_W}{{20,}}"),
    ("google-oauth", (), rf"{_p('ya29.')}{_W}{{20,}}"),
    ("google-oauth", (), rf"{_p('1//0', 'A-Za-z0-9/')}{_W}{{30,}}"),
    ("azure-ad-secret", (), r"Q~(?<=\dQ~)[\w~.\-]{30,36}(?![\w~.\-])"),
    ("digitalocean-token", (), rf"{_p('do')}[opr]_v1_{_HEX}{{64}}(?![A-Za-z0-9])"),
    ("heroku-key", (), rf"{_p('HRKU-')}{_W}{{30,}}"),
    ("shopify-token", (), rf"{_p('shp')}(?:at|ca|pa|ss)_[0-9a-fA-F]{{32}}(?![A-Za-z0-9])"),
    ("vault-token", (), rf"{_p('hv')}[sbr]\.{_W}{{24,}}"),
    ("databricks-token", (), rf"{_p('dapi')}{_HEX}{{32}}(?:-\d)?(?![A-Za-z0-9])"),
    ("huggingface-token", (), rf"{_p('hf_')}{_AN}{{30,}}{_END}"),
    ("huggingface-token", (), rf"{_p('api_org_')}{_AN}{{30,}}{_END}"),
    ("linear-key", (), rf"{_p('lin_')}(?:api|oauth)_{_AN}{{32,}}"),
    ("notion-token", (), rf"{_p('secret_')}{_AN}{{43}}{_END}"),
    ("notion-token", (), rf"{_p('ntn_')}{_AN}{{40,}}{_END}"),
    ("atlassian-token", (), rf"{_p('AT')}[AC]TT[A-Za-z0-9_=+/\-]{{40,}}"),
    ("sentry-token", (), rf"{_p('sntry')}[su]_[A-Za-z0-9+/=_]{{40,}}"),
    ("age-secret-key", (), r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    (
        "launchdarkly-key",
        (),
        rf"{_p('sdk-')}{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}",
    ),
    ("grub-password-hash", (), r"grub\.pbkdf2\.sha512\.\d+\.[0-9A-F]{64,}\.[0-9A-F]{64,}"),
    ("bip32-private-key", (), rf"{_p('xprv')}[1-9A-HJ-NP-Za-km-z]{{100,}}"),
    ("bip32-private-key", (), rf"{_p('tprv')}[1-9A-HJ-NP-Za-km-z]{{100,}}"),
    ("docker-swarm-token", (), rf"{_p('SWMTKN-1-')}[a-z0-9]{{40,}}-[a-z0-9]{{20,}}"),
    ("tailscale-key", (), rf"{_p('tskey-')}(?:auth|api|client|scim|webhook)-{_W}{{16,}}"),
    ("grafana-token", (), rf"{_p('glc_')}{_B64}{{32,}}=*"),
    ("grafana-token", (), rf"{_p('glsa_')}{_AN}{{32}}_[0-9a-fA-F]{{8}}"),
    ("1password-token", (), rf"{_p('ops_eyJ')}[A-Za-z0-9+/=_\-]{{50,}}"),
    ("1password-token", (), rf"{_p('A3-')}[A-Z0-9]{{6}}-[A-Z0-9\-]{{20,}}"),
    ("postman-key", (), rf"{_p('PMAK-')}[0-9a-fA-F]{{24}}-[0-9a-fA-F]{{34}}"),
    ("newrelic-key", (), rf"{_p('NR')}(?:AK|II)-[A-Za-z0-9\-]{{27,32}}"),
    ("doppler-token", (), rf"{_p('dp.')}(?:pt|st|sa|ct|scim|audit)\.{_AN}{{40,}}"),
    ("dynatrace-token", (), rf"{_p('dt0c01.')}{_AN}{{24}}\.{_AN}{{64}}"),
    ("planetscale-token", (), rf"{_p('pscale_')}(?:tkn|oauth|pw)_[\w=.\-]{{32,}}"),
    ("pulumi-token", (), rf"{_p('pul-')}{_HEX}{{40}}(?![A-Za-z0-9])"),
    ("prefect-token", (), rf"{_p('pnu_')}{_AN}{{36}}(?![A-Za-z0-9])"),
    ("readme-token", (), rf"{_p('rdme_')}[a-z0-9]{{70}}(?![A-Za-z0-9])"),
    ("sendinblue-key", (), rf"{_p('xkeysib-')}{_HEX}{{64}}-{_AN}{{16}}"),
    ("shippo-token", (), rf"{_p('shippo_')}(?:live|test)_[0-9a-fA-F]{{40}}"),
    ("square-token", (), rf"{_p('sq0')}(?:atp|csp)-[\w\-]{{22,}}"),
    ("typeform-token", (), rf"{_p('tfp_')}[\w\-.=]{{40,}}"),
    ("perplexity-key", (), rf"{_p('pplx-')}{_AN}{{40,}}"),
    ("groq-key", (), rf"{_p('gsk_')}{_AN}{{40,}}"),
    ("replicate-token", (), rf"{_p('r8_')}{_AN}{{37}}(?![A-Za-z0-9])"),
    ("nvidia-key", (), rf"{_p('nvapi-')}[\w\-]{{60,}}"),
    ("mapbox-token", (), rf"{_p('sk.eyJ')}[\w\-]{{20,}}\.[\w\-]{{10,}}"),
    ("clojars-token", (), rf"{_p('CLOJARS_')}[a-z0-9]{{60}}(?![A-Za-z0-9])"),
    ("alibaba-key", (), rf"{_p('LTAI')}{_AN}{{20}}(?![A-Za-z0-9])"),
    ("artifactory-key", (), rf"{_p('AKCp')}{_AN}{{60,}}"),
    ("easypost-key", (), rf"{_p('EZ')}[AT]K{_AN}{{54}}(?![A-Za-z0-9])"),
    ("flutterwave-key", (), rf"{_p('FLWSECK')}(?:_TEST)?-[0-9a-hA-H]{{32}}-X"),
    ("flyio-token", (), rf"{_p('fo1_')}[\w\-]{{43}}"),
    ("flyio-token", (), rf"{_p('fm')}(?:1[ar]|2)_{_B64}{{100,}}=*"),
    ("openshift-token", (), rf"{_p('sha256~')}[\w\-]{{43}}"),
    ("sourcegraph-token", (), rf"{_p('sgp_')}(?:{_HEX}{{16}}_)?{_HEX}{{40}}(?![A-Za-z0-9])"),
    ("supabase-token", (), rf"{_p('sbp_')}{_HEX}{{40}}(?![A-Za-z0-9])"),
    ("airtable-token", (), rf"{_p('pat')}{_AN}{{14}}\.{_HEX}{{64}}(?![A-Za-z0-9])"),
    (
        "jwt",
        (),
        rf"eyJ(?<!{_W}eyJ){_W}{{10,}}\.{_W}{{10,}}\.{_W}{{8,}}(?:\.{_W}{{8,}}){{0,2}}",
    ),
)


_BEFORE = {
    "discord-token": r"(?<![A-Za-z0-9_\-.])[MNO][A-Za-z0-9_\-]{23,27}",
    "telegram-bot-token": r"(?<!\d)\d{6,12}",
    "terraform-token": r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}",
    "azure-ad-secret": r"(?<![\w~.])[\w~.]{3}\d",
}


# The characters of a provider token and what stands around it in a URL or a header. Every
# token rule's match but those of SHORT_TOKENS is a run of 16 or more of them (a test proves it
# from each pattern), so a rule's needle is looked for in a text's runs of them alone (a fifth of
# a file's text), not in all of it.
TOKEN_CHARS = r"[A-Za-z0-9_\-.+/=~:]"
SHORT_TOKENS = frozenset({"slack-token"})  # xoxb-/xapp- and ten characters: fifteen at least


def _token_rule(name: str, hints: tuple[str, ...], pattern: str) -> Rule:
    regex = lazy(pattern, re.ASCII)
    in_run = name not in SHORT_TOKENS
    mark = marker(name)
    partial_group = "(?P<s>" in pattern  # (asking the pattern would compile it now)
    before = _BEFORE.get(name)
    if before is not None:
        return Rule(
            name,
            partial(_apply_extended, regex, lazy(rf"(?:{before})\Z"), mark),
            hints,
            literal_prefix(pattern),
            in_run,
        )

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def repl(m: re.Match[str]) -> str:
            nonlocal count
            whole = m.group()
            if partial_group:
                if is_placeholder(m.group("s")):
                    return whole
                count += 1
                return whole[: m.start("s") - m.start()] + mark + whole[m.end("s") - m.start() :]
            if is_placeholder(whole[len(whole) // 3 :]) or is_filler(whole):
                return whole
            count += 1
            return mark

        return regex.sub(repl, text), count

    return Rule(name, apply, hints, literal_prefix(pattern), in_run)


def _apply_extended(
    regex: re.Pattern[str], before: re.Pattern[str], mark: str, text: str
) -> tuple[str, int]:
    """A token found by a literal in its middle: ``before`` must match right up to the match."""
    out: list[str] = []
    copied = 0
    for m in regex.finditer(text):
        head = before.search(text, max(copied, m.start() - 64), m.start())
        if head is None or is_placeholder(m.group()):
            continue
        out += [text[copied : head.start()], mark]
        copied = m.end()
    if not out:
        return text, 0
    return "".join(out) + text[copied:], len(out) // 2


# --- private keys ---------------------------------------------------------------------------------

_PEM_BEGIN_RE = lazy(r"-----BEGIN[ A-Z0-9_]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = lazy(r"-----END[ A-Z0-9_]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_FILLER_RE = lazy(r"(?:\s|\\+[nr]|[xX.*…]|\.\.\.)*")
_PEM_BODY_RE = lazy(r"[A-Za-z0-9+/=\s\\:,\-]*")
_PUTTY_RE = lazy(r"(Private-Lines:[ \t]*\d+)(\r?\n|\\n)(?:[A-Za-z0-9+/=]+(?:\r?\n|\\n))+")


def _redact_pem(text: str) -> tuple[str, int]:
    """Private-key blocks, BEGIN to END; a block cut off before its END loses its whole body."""
    out: list[str] = []
    copied = 0
    end: re.Match[str] | None = None
    exhausted = False
    for begin in _PEM_BEGIN_RE.finditer(text):
        if begin.start() < copied:
            continue
        if not exhausted and (end is None or end.start() < begin.end()):
            end = _PEM_END_RE.search(text, begin.end())
            exhausted = end is None
        if end is not None:
            copied_to = end.end()
        else:
            body = _PEM_BODY_RE.match(text, begin.end())
            copied_to = body.end() if body is not None else begin.end()
        if _PEM_FILLER_RE.fullmatch(
            text, begin.end(), end.start() if end is not None else copied_to
        ):
            continue  # -----BEGIN PRIVATE KEY-----\nXXXX\n-----END...: a documentation filler
        out += [text[copied : begin.start()], marker("private-key")]
        copied = copied_to
    if not out:
        return text, 0
    return "".join(out) + text[copied:], len(out) // 2


def _redact_putty(text: str) -> tuple[str, int]:
    """PuTTY ``.ppk`` files: the base64 lines under ``Private-Lines: N``."""
    return _PUTTY_RE.subn(lambda m: f"{m.group(1)} {marker('private-key')}{m.group(2)}", text)


# --- URL userinfo ---------------------------------------------------------------------------------

# Anchored on the literal "://" (fast); the scheme is checked behind it. A password may hold
# "@" ("p@ss"): the userinfo ends at the last "@" before the host.
_URL_PASSWORD_RE = lazy(
    r"(://(?<=[A-Za-z0-9]://)[^\s:/@?#\"'`<>\\\[\]{}]*:)"
    r"(?!\[REDACTED|(?:\$\{[^}\s@]*\}|\$[A-Za-z_]\w*|\{\{[^}]*\}\}|<[^>\s@]*>|(?i:pass|password|passwd"
    r"|pwd|secret|your[\w\-]*|x+)|\*+|\.+|%\(\w+\)s|%s|\{\w*\})@)"
    r"([^\s/\"'`<>\\]+)@(?=[^\s@/\"'`<>\\]*(?:[/?#\s\"'`<>\\]|$))",
    re.ASCII,
)
# ``https://<token>@host``: a user part that is a random string is a credential on its own
_URL_USER_TOKEN_RE = lazy(r"(://(?<=[A-Za-z0-9]://))([A-Za-z0-9_\-]{20,})@", re.ASCII)
_ORACLE_RES = tuple(
    lazy(rf"({re.escape(lit)}(?<![\w\-]{re.escape(lit)}){tail}[\w$#.\"]+/)([^@\s/\"']+)@")
    for lit, tail in (
        ("jdbc:oracle:", r"[a-z]+:"),
        *((cmd, r"[ \t]+(?:-\w+[ \t]+)*") for cmd in ("sqlplus", "rman", "expdp", "impdp")),
    )
)


def _redact_url_credentials(text: str) -> tuple[str, int]:
    count = 0

    def password(m: re.Match[str]) -> str:
        nonlocal count
        if m.group(2).startswith("[REDACTED"):
            return m.group()
        count += 1
        return f"{m.group(1)}{REDACTED}@"

    def user_token(m: re.Match[str]) -> str:
        nonlocal count
        if not looks_random(m.group(2)):
            return m.group()
        count += 1
        return f"{m.group(1)}{REDACTED}@"

    text = _URL_PASSWORD_RE.sub(password, text)
    return _URL_USER_TOKEN_RE.sub(user_token, text), count


def _redact_oracle(text: str) -> tuple[str, int]:
    """``sqlplus scott/tiger@db`` and ``jdbc:oracle:thin:scott/tiger@host``."""
    total = 0
    for regex in _ORACLE_RES:
        text, n = regex.subn(
            lambda m: m.group() if m.group(2).startswith("[") else f"{m.group(1)}{REDACTED}@", text
        )
        total += n
    return text, total


_SEPARATOR_RE = lazy(r"[\-_./:]")
_MIXED_RE = lazy(r"(?=.*\d)(?=.*[a-z])(?=.*[A-Z])")
_TOKEN_CHARS_RE = lazy(r"[A-Za-z0-9+/=_\-.~%:!@#$^&*]+")


def looks_random(value: str) -> bool:
    """A machine-made secret: long, no spaces, letters and digits mixed, high entropy.

    Identifiers (``primary_key_column``), words and file names fail; base64, hex keys and random
    alphanumerics pass. Used for keys whose name only suggests a secret (``*_key``, ``auth``).
    """
    v = value.strip()
    if len(v) < 16 or len(v) > 4096 or not _TOKEN_CHARS_RE.fullmatch(v):
        return False
    if re.fullmatch(r"[A-Za-z_.\-/:]+", v):
        return False  # words, identifiers
    if re.fullmatch(r"[\w.\-]*/[\w.\-/]*", v) and not any(
        len(part) >= 10 and _MIXED_RE.search(part) for part in v.split("/")
    ):
        return False  # a path; base64 with a "/" has random parts between the slashes
    digits = sum(c.isdigit() for c in v)
    letters = sum(c.isalpha() for c in v)
    if letters == 0:
        return False
    if digits == 0:
        # base64 without a digit still switches case all the time; camelCase names do not
        upper = sum(c.isupper() for c in v) / letters
        if len(v) < 20 or not 0.25 <= upper <= 0.8:
            return False
    words = sum(
        1
        for part in _SEPARATOR_RE.split(v)
        if len(part) >= 3
        and part.isalpha()
        and (part.islower() or part.istitle() or part.isupper())
    )
    if words >= 2:
        return False  # node-modules-<hash>, build-cache-v2-...: a name with a hash in it
    return entropy(v) >= (3.0 if re.fullmatch(r"[0-9a-fA-F\-]+", v) else 3.5)


LEADING_RULES: tuple[Rule, ...] = (
    Rule("private-key", _redact_pem, ("private key",)),
    Rule("private-key", _redact_putty, ("private-lines",)),
)
TOKEN_RULES: tuple[Rule, ...] = tuple(
    _token_rule(n, hints, pattern) for n, hints, pattern in _TOKENS
)
TRAILING_RULES: tuple[Rule, ...] = (
    Rule("url-credentials", _redact_url_credentials, ("://",)),
    Rule("url-credentials", _redact_oracle, ("sqlplus", "jdbc:oracle", "rman", "expdp", "impdp")),
)
RULES: tuple[Rule, ...] = (*LEADING_RULES, *TOKEN_RULES, *TRAILING_RULES)
