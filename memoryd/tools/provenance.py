"""Did the user ask for this note? The rule, and the look at the session transcript it needs.

A model's note is memory only when the user asked for it. Text the model read (a web page, a
file, a tool's output) can make it call the note tool, so the call proves nothing; the session's
transcript, read from the host, does. The rule looks at the newest :data:`USER_TURNS` user
messages of the calling session (what preceded the call):

* **Only the user's own text counts**: ``text`` parts of ``role: user`` messages that are neither
  ``synthetic`` (opencode's wrapping of attached files, resources and auto-continue prompts) nor
  ``ignored``. File, tool, agent and subtask parts never count, nor a compaction request. A
  child session (``parentID``: a subagent the ``task`` tool started) has no user at all: a model
  wrote its prompt.
* **The ask.** One of those messages asks to keep something: an intent phrase (English
  "remember", "don't forget", "keep in mind", "make a note", "save this for later", ... and the
  commonest phrasings in German, French, Spanish, Italian, Portuguese, Dutch, Russian, Chinese,
  Japanese and Korean) that is not a question or a remark about memory ("do you remember", "I
  can't remember", "remember when"). It must stand in the user's *request*: outside fenced code
  and quoted (``>``) lines and, when the rest is longer than :data:`REQUEST_MAX_CHARS` (a paste),
  within its first or last :data:`REQUEST_EDGE_CHARS`. A phrase deep inside pasted text is the
  paste's, not the user's.
* **The content.** The note says what the user said, in those messages:
  - anything command-like in it (a URL or host path, a shell operator with its neighbours such
    as ``x | sh`` or ``a && b``, a command that fetches, runs or deletes such as curl, sh, sudo,
    rm, eval) appears in the user's request itself, not only in pasted text, and in a sentence
    that is negated exactly when the note's is ("never run X" does not ground "always run X");
  - every identifier, number, path, version and inline code span appears in the messages;
  - at least :data:`GROUNDED_SHARE` of its other words do (stop words and framing words such as
    "user" or "prefers" aside; a shared 5-letter stem counts, so "deploys" matches "deploy").

Anything else (no session, a host that does not answer, an unknown session, no ask, an ask about
something else) makes the note a *proposal* for the user to decide on, never an error. The weak
spots: pasted text (a user who pastes a page and asks to remember its gist lends the page their
voice for its words, never for its commands or links), and a note that rearranges only the
user's own words into another meaning. An MCP call names no session; it is the busy session of
the server's folder whose running tool call is this very note (:func:`find_calling_session`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from memoryd.errors import HostError, HostNotFound
from memoryd.host.live import LiveServer, get_json
from memoryd.tuning import NOTE_ASK_USER_TURNS as USER_TURNS
from memoryd.tuning import NOTE_GROUNDED_SHARE as GROUNDED_SHARE
from memoryd.tuning import NOTE_HOST_TIMEOUT_S as TIMEOUT_S
from memoryd.tuning import NOTE_MCP_BUSY_SESSIONS as MCP_BUSY_SESSIONS
from memoryd.tuning import NOTE_REQUEST_EDGE_CHARS as REQUEST_EDGE_CHARS
from memoryd.tuning import NOTE_REQUEST_MAX_CHARS as REQUEST_MAX_CHARS
from memoryd.tuning import NOTE_TRANSCRIPT_MAX_BYTES as MAX_BYTES
from memoryd.tuning import NOTE_TRANSCRIPT_PAGE as PAGE

STEM = 5  # letters two words share to count as one ("deploys" and "deploy")
SESSION_ID_RE = re.compile(r"ses_[A-Za-z0-9]{4,100}")


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Asking to keep something, by language (English first); matched on case-folded NFKC text.
_ASKS = {
    "en": r"\bremember\b|\bmemori[sz]e\b|\b(?:don't|dont|do not|never) forget\b"
    r"|\bkeep (?:this |that |it )?in mind\b|\b(?:make|take) a note\b|\bnote (?:this|it) down\b"
    r"|\bnote down\b|\bnote this\b|\bjot (?:this |that |it )?down\b|\bwrite (?:this|that|it) down\b"
    r"|\bmemory_(?:add_)?note\b|\bfor future (?:sessions|reference)\b"
    r"|\b(?:save|store|keep|add|put|record)\b[^.!?\n]{0,40}?"
    r"\b(?:memory|memories|for later|next time|for the future|for future|for good|as a note)\b",
    "de": r"\bmerke? (?:dir|euch)\b|\bmerken sie sich\b|\bvergiss (?:das |es )?nicht\b"
    r"|\bnicht vergessen\b|\bnotier(?:e|en)? (?:dir|das|dies|es)\b|\bspeicher(?:e|n)? (?:das|dies|es)\b",
    "fr": r"\bsouviens-toi\b|\bsouvenez-vous\b|\brappelle-toi\b|\bretiens\b|\bretenez\b"
    r"|\bm[ée]morise[zr]?\b|\bn'oubliez? pas\b|\bgardez? (?:[çc]a |cela |ceci )?en m[ée]moire\b"
    r"|\bprends note\b",
    "es": r"\brecu[ée]rda(?:lo|te)?\b|\bacu[ée]rdate\b|\bno (?:te )?olvides\b|\bmemoriza(?:lo)?\b"
    r"|\bap[uú]nta(?:lo)?\b|\banota(?:lo)?\b|\bten en cuenta\b|\bguarda (?:esto|eso)\b",
    "it": r"\bricorda(?:ti|telo)?\b|\bmemorizza\b|\bnon dimenticare\b|\bannota\b|\btieni a mente\b",
    "pt": r"\blembr[ae](?:-se)?\b|\bn[ãa]o (?:se )?esque[çc]a\b|\banote\b|\bguarde (?:isso|isto)\b",
    "nl": r"\bonthoud\b|\bvergeet (?:dit |dat |het )?niet\b|\bnoteer\b",
    "ru": r"\bзапомни(?:те)?\b|\bне забудь(?:те)?\b|\bсохрани(?:те)?\b",
    "zh/ja/ko": r"记住|记下|别忘|不要忘|覚えて|忘れないで|メモして|기억해|잊지\s*마",
}
_ASK = re.compile("|".join(_ASKS.values()))
_NOT_AN_ASK = re.compile(
    r"\b(?:do|did|does|can|could|would|will) (?:you|u|we|i) (?:still |even )?remember\b"
    r"|\b(?:i|we) (?:don'?t |do not |can'?t |cannot |couldn'?t |could not |didn'?t |did not |)remember\b"
    r"|\bremember when\b|\bif (?:i|you) remember\b|\bas (?:far as )?(?:i|you) remember\b"
)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_QUOTE = re.compile(r"^[ \t]*>.*$", re.M)
_CODE = re.compile(r"`([^`\n]+)`")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+|\bwww\.\S+|\b(?:[a-z0-9-]+\.)+[a-z]{2,}/\S*", re.I)
_OPERATOR = re.compile(r"\|\|?|&&|\$\(|<\(|(?<![-=])>>?")
_COMMANDS = _set(
    "curl wget sh bash zsh dash ksh sudo doas rm chmod chown eval exec nc ncat netcat socat telnet "
    "powershell pwsh iex invoke-expression invoke-webrequest iwr base64 mkfs crontab ssh scp sftp "
    "rsync npx bunx pipx uvx xargs"
)
_INTERPRETER_FLAG = re.compile(r"\b(?:python[0-9.]*|node|perl|ruby|php|deno|bun|osascript) -[ce]\b")
# Sentence ends (a full stop needs a space after it, so URLs and versions stay whole).
_SENTENCE = re.compile(r"[.!?;。！？](?:\s|$)|\n")
_NEGATION = re.compile(
    r"\b(?:never|not|no|don't|dont|doesn't|do not|avoid|without|stop|nie|nicht|kein|keine"
    r"|jamais|pas|ne|nunca|sin|mai|non|não|nao|nooit|niet|никогда|не)\b|n't\b|不|别|没|ない|하지\s*마"
)
_WORD = re.compile(r"[^\W\d_]+", re.U)
_TOKEN = re.compile(r"\S+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>*"
_STRONG_INNER = re.compile(r"[0-9_./\\@:=#~$%+-]")
_STOP = _set(
    """a an and are as at be been but by can could did do does for from had has have he her his how
    i if in into is it its just may me my no not of on or our ours out she so some such than that
    the their them then there these they this those to too was we were what when where which who
    why will with would you your yours also only very all any each every more most other about
    after before over under again once here both same own few via per
    und der die das ein eine ist mit für wir les des une est avec pour que qui nous una uno con
    para por los las del che per non sono"""
)
_FRAMING = _set(
    """user users project projects team prefers prefer preferred preference preferences remember
    remembers note notes noted always should must want wants wanted asked asks says said likes like
    uses use using used please keep kept thing things fact"""
)


@dataclass(frozen=True)
class Verdict:
    """``asked`` when the user asked for the note; ``reason`` says why not (kept for the user)."""

    asked: bool
    reason: str
    message_id: str | None = None


@dataclass(frozen=True)
class UserText:
    message_id: str
    request: str  # the user's own words
    text: str  # everything they sent, pasted material included


def _norm(text: str) -> str:
    """NFKC, case-folded, format characters (zero-width and the like) dropped."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


def split_request(text: str) -> str:
    """The user's own request inside one message: no fenced code, no quoted lines, and of a long
    rest only its first and last :data:`REQUEST_EDGE_CHARS` characters."""
    prose = _QUOTE.sub("", _FENCE.sub("", text)).strip()
    if len(prose) <= REQUEST_MAX_CHARS:
        return prose
    return prose[:REQUEST_EDGE_CHARS] + "\n" + prose[-REQUEST_EDGE_CHARS:]


def asks_to_remember(request: str) -> bool:
    text = " ".join(_norm(request).split())
    denied = [m.span() for m in _NOT_AN_ASK.finditer(text)]
    for m in _ASK.finditer(text):
        if not any(a <= m.start() and m.end() <= b for a, b in denied):
            return True
    return False


def _counted_text(parts: Iterable[Any]) -> str | None:
    """The user's own text of one message, or ``None`` when it has none (or is a compaction)."""
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "compaction":
            return None
        text = part.get("text")
        if part.get("type") != "text" or not isinstance(text, str) or not text.strip():
            continue
        if part.get("synthetic") or part.get("ignored"):
            continue
        texts.append(text)
    return "\n".join(texts) if texts else None


def user_texts(messages: list[Any]) -> list[UserText]:
    """The newest :data:`USER_TURNS` user messages with text of the user's own, newest first."""
    out: list[UserText] = []
    for message in reversed(messages):
        info = message.get("info") if isinstance(message, dict) else None
        if not isinstance(info, dict) or info.get("role") != "user":
            continue
        text = _counted_text(message.get("parts") or [])
        if text is None:
            continue
        out.append(UserText(str(info.get("id") or ""), split_request(text), text))
        if len(out) == USER_TURNS:
            break
    return out


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _risky(note: str) -> list[str]:
    """The command-like pieces of ``note`` (normalised): URLs, operators with their neighbours,
    commands that fetch, run or delete, interpreter one-liners."""
    found = [m.group(0).rstrip(_EDGE_PUNCT) for m in _URL.finditer(note)]
    for m in _OPERATOR.finditer(note):
        before = note[: m.start()].split()
        after = note[m.end() :].split()
        found.append(
            (before[-1] if before else "") + m.group(0).strip() + (after[0] if after else "")
        )
    for token in _TOKEN.findall(note):
        word = token.strip(_EDGE_PUNCT)
        if word in _COMMANDS:
            found.append(word)
    found += [m.group(0) for m in _INTERPRETER_FLAG.finditer(note)]
    return [f for f in found if f]


def _strong(note: str, original: str) -> list[str]:
    """Identifiers, numbers, paths, versions and code spans: each must be found as it is."""
    found = [" ".join(m.group(1).split()) for m in _CODE.finditer(note)]
    camel = {t.strip(_EDGE_PUNCT).casefold() for t in _TOKEN.findall(original)
             if re.search(r"[a-z][A-Z]", t)}  # fmt: skip
    for token in _TOKEN.findall(note):
        word = token.strip(_EDGE_PUNCT)
        if word and (_STRONG_INNER.search(word) or word in camel):
            found.append(word)
    return found


def _words(note: str) -> list[str]:
    words = []
    for w in _WORD.findall(_CJK.sub(" ", note)):
        if len(w) >= 3 and w not in _STOP and w not in _FRAMING:
            words.append(w)
    for run in _CJK.findall(note):
        words += [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]
    return words


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text) if s.strip()]


def _negated(sentence: str) -> bool:
    return bool(_NEGATION.search(" ".join(sentence.split())))


def _said_alike(item: str, note: str, asked: list[UserText]) -> bool:
    """``item`` (a command-like piece of the note) stands in a sentence of the user's request
    that is negated exactly when the note's sentence holding it is: "never run curl … | sh"
    does not ground "always run curl … | sh"."""
    key = _squash(item)
    mine = [s for s in _sentences(note) if key in _squash(s)] or [note]
    theirs = [s for u in asked for s in _sentences(_norm(u.request)) if key in _squash(s)]
    return any(_negated(a) == _negated(b) for a in mine for b in theirs)


def ungrounded(note: str, asked: list[UserText]) -> list[str]:
    """What in ``note`` the user did not say in ``asked`` (empty: the note is grounded)."""
    text = _norm(note)
    said = _norm("\n".join(u.text for u in asked))
    missing = [r for r in _risky(text) if not _said_alike(r, text, asked)]
    said_flat = " ".join(said.split())
    missing += [s for s in _strong(text, note) if " ".join(s.split()) not in said_flat]
    words = _words(text)
    vocabulary = set(_WORD.findall(said))
    stems = {w[:STEM] for w in vocabulary if len(w) >= STEM}
    loose = [
        w
        for w in words
        if not (w in said if _CJK.fullmatch(w) else w in vocabulary or w[:STEM] in stems)
    ]
    if words and len(words) - len(loose) < GROUNDED_SHARE * len(words):
        missing += loose
    if not words and not _strong(text, note):
        missing.append("(the note has no words to match)")
    return list(dict.fromkeys(missing))


def judge(messages: list[Any], note: str) -> Verdict:
    """Apply the rule to one session's newest messages (oldest first, as opencode sends them)."""
    recent = user_texts(messages)
    if not recent:
        return Verdict(False, "no message from the user precedes the call")
    asking = [u for u in recent if asks_to_remember(u.request)]
    if not asking:
        return Verdict(False, "the user's recent messages do not ask to remember anything")
    missing = ungrounded(note, recent)
    if missing:
        shown = ", ".join(repr(m[:60]) for m in missing[:3])
        return Verdict(False, f"the note says what the user did not ({shown})")
    return Verdict(True, "asked by the user", asking[0].message_id)


def check_session(server: LiveServer | None, session_id: str | None, note: str) -> Verdict:
    """Read the calling session from the host and :func:`judge` the note; fails closed."""
    if not session_id or not SESSION_ID_RE.fullmatch(session_id):
        return Verdict(False, "the call named no session")
    if server is None:
        return Verdict(False, "no live opencode server to read the session from")
    path = f"/session/{quote(session_id)}"
    try:
        info = get_json(server, path, timeout=TIMEOUT_S, max_bytes=MAX_BYTES)
        if not isinstance(info, dict):
            return Verdict(False, "opencode answered the session lookup with something else")
        if info.get("parentID"):
            return Verdict(False, "it came from a subagent, whose prompt a model wrote")
        messages = get_json(
            server,
            f"{path}/message",
            {"limit": PAGE},
            timeout=TIMEOUT_S,
            max_bytes=MAX_BYTES,
        )
    except HostNotFound:
        return Verdict(False, f"opencode does not know session {session_id}")
    except HostError as exc:
        return Verdict(False, f"the session could not be read ({exc})")
    if not isinstance(messages, list):
        return Verdict(False, "opencode answered the transcript request with something else")
    return judge(messages, note)


def _calls_note(message: Any, note: str) -> bool:
    for part in message.get("parts") or [] if isinstance(message, dict) else []:
        state = part.get("state") if isinstance(part, dict) else None
        tool = part.get("tool") if isinstance(part, dict) else None
        if not isinstance(state, dict) or not isinstance(tool, str):
            continue
        args = state.get("input")
        if (
            tool.endswith("memory_add_note")
            and state.get("status") == "running"
            and isinstance(args, dict)
            and args.get("note") == note
        ):
            return True
    return False


def find_calling_session(server: LiveServer | None, directory: str, note: str) -> str | None:
    """For an MCP call, which carries no session: the one busy session of ``directory`` whose
    running tool call is this very note (two or more, or none: ``None``)."""
    if server is None:
        return None
    try:
        status = get_json(
            server,
            "/session/status",
            {"directory": directory},
            timeout=TIMEOUT_S,
            max_bytes=MAX_BYTES,
        )
        busy = [
            sid
            for sid, st in (status.items() if isinstance(status, dict) else [])
            if isinstance(st, dict) and st.get("type") != "idle" and SESSION_ID_RE.fullmatch(sid)
        ]
        found = []
        for sid in busy[:MCP_BUSY_SESSIONS]:
            page = get_json(
                server,
                f"/session/{quote(sid)}/message",
                {"limit": 2, "directory": directory},
                timeout=TIMEOUT_S,
                max_bytes=MAX_BYTES,
            )
            if isinstance(page, list) and any(_calls_note(m, note) for m in page):
                found.append(sid)
    except HostError:
        return None
    return found[0] if len(found) == 1 else None
