"""Turn an opencode session (``GET /session/{id}/message``) into the text the extractor reads.

What a future agent can learn from is what the user asked, what the assistant said, and what
the tools actually did, so those are kept: user and assistant text, and each tool call with its
input and its output or error (bounded, keeping head and tail because errors sit at the end).
Everything else is noise or cost: reasoning, step markers, snapshots and patches, text the host
marks synthetic or ignored, injected instruction/skill fragments, and our own citation blocks.

Every entry is redacted before it is joined. A transcript over the token budget is not cut in
the middle: ``write/selection.py`` keeps the user's words first, then the agent's final answers,
then the rest, newest first, and marks the gaps, so a correction in the middle of a long session
still reaches the extractor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memoryd.host.models import Message, Part
from memoryd.read.citations import parse_citations, strip_citations
from memoryd.redact import redact
from memoryd.tuning import (
    ERROR_CHARS,
    TEXT_ENTRY_CHARS,
    TOOL_INPUT_CHARS,
    TOOL_OUTPUT_CHARS,
    TRANSCRIPT_TOKEN_BUDGET,
)
from memoryd.write.selection import (
    RANK_AGENT,
    RANK_FINAL,
    RANK_TASK,
    RANK_TOOL,
    RANK_USER,
    Entry,
    select,
)

WEB_TOOLS = frozenset({"webfetch", "websearch", "codesearch"})
DROPPED_PARTS = frozenset(
    {"reasoning", "step-start", "step-finish", "snapshot", "patch", "compaction", "retry", "agent"}
)
_FRAGMENTS = (
    re.compile(r"\A\s*#\s*AGENTS\.md instructions.*</INSTRUCTIONS>\s*\Z", re.S | re.I),
    re.compile(r"\A\s*<skill>.*</skill>\s*\Z", re.S | re.I),
    re.compile(r"\A\s*<system-reminder>.*</system-reminder>\s*\Z", re.S | re.I),
)


@dataclass
class Transcript:
    text: str
    entries: int
    tool_names: list[str] = field(default_factory=list)
    citations: list[tuple[str, list[str]]] = field(
        default_factory=list
    )  # (part id, cited session ids)
    truncated: bool = False
    omitted: int = 0  # entries the ranked selection left out (see ``write/selection.py``)

    @property
    def empty(self) -> bool:
        return self.entries == 0


def _bounded(text: str, limit: int) -> str:
    """Redact, then keep head and tail within ``limit`` (redacting first: a cut must never split a secret)."""
    return _cut(redact(text), limit)


def _cut(text: str, limit: int) -> str:
    """Head and tail of an already redacted ``text`` within ``limit``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - limit} characters omitted …]\n{text[-half:]}"


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def is_instruction_fragment(text: str) -> bool:
    return any(p.match(text) for p in _FRAGMENTS)


def _tool_entry(part: Part) -> str | None:
    state = part.state
    name = part.tool or "unknown"
    name = redact(name)
    if state is None:
        return f"[tool call: {name}]"
    lines = [f"[tool call: {name}] {_bounded(_as_text(state.input), TOOL_INPUT_CHARS)}".rstrip()]
    if state.status == "error" or state.error:
        lines.append(f"[tool error: {name}] {_bounded(_as_text(state.error), ERROR_CHARS)}")
    elif state.status == "completed":
        lines.append(f"[tool result: {name}] {_bounded(_as_text(state.output), TOOL_OUTPUT_CHARS)}")
    else:
        lines.append(f"[tool {redact(state.status or 'pending')}: {name}]")
    return "\n".join(lines)


def _part_entry(role: str, part: Part, cited: list[tuple[str, list[str]]]) -> str | None:
    if part.type in DROPPED_PARTS:
        return None
    if part.type == "text":
        if not part.is_visible_text or not part.text or not part.text.strip():
            return None
        text = part.text
        if role == "user" and is_instruction_fragment(text):
            return None
        if role == "assistant" and "<memory-citation" in text.lower():
            ids = parse_citations(text).session_ids
            if ids and part.id:
                cited.append((part.id, ids))
            text = strip_citations(text)
        return redact(text).strip() or None
    if part.type == "tool":
        return _tool_entry(part)
    if part.type == "file":
        extra = part.model_extra or {}
        name = extra.get("filename") or extra.get("url") or "attachment"
        return redact(f"[file attached: {name}]")
    if part.type == "subtask":
        extra = part.model_extra or {}
        return f"[subtask for agent {extra.get('agent', '?')}] {_bounded(_as_text(extra.get('prompt')), TOOL_INPUT_CHARS)}"
    return None


def _rank(role: str, part: Part) -> int:
    if role == "user":
        return RANK_USER
    return RANK_TOOL if part.type == "tool" else RANK_AGENT


def _mark_final_answers(entries: list[Entry], text_at: dict[int, int]) -> list[Entry]:
    """Promote the last text of the last assistant message before each user turn to a final answer."""
    finals: set[int] = set()
    texts = set(text_at.values())
    last: int | None = None  # the entry of the newest assistant text in the current turn
    for i, entry in enumerate(entries):
        if entry.role == "user":
            if last is not None:
                finals.add(last)
            last = None
        elif i in texts:
            last = i
    if last is not None:
        finals.add(last)
    return [
        Entry(e.message, e.role, RANK_FINAL, e.text) if i in finals else e
        for i, e in enumerate(entries)
    ]


def build_transcript(
    messages: Iterable[Message], *, max_tokens: int = TRANSCRIPT_TOKEN_BUDGET
) -> Transcript:
    entries: list[Entry] = []
    text_at: dict[int, int] = {}  # message index -> its last assistant text entry
    tool_names: list[str] = []
    cited: list[tuple[str, list[str]]] = []
    blocks = 0
    for index, message in enumerate(messages):
        role = message.info.role
        if role not in ("user", "assistant"):
            continue
        before = len(entries)
        for part in message.parts:
            if part.type == "tool" and part.tool:
                tool_names.append(part.tool)
            entry = _part_entry(role, part, cited)
            if entry:
                # every entry is redacted where it is built (once: redaction is most of the
                # extraction's CPU); a huge pasted text is cut to its bound afterwards
                if part.type == "text":
                    entry = _cut(entry, TEXT_ENTRY_CHARS)
                    if role == "assistant":
                        text_at[index] = len(entries)
                entries.append(Entry(index, role, _rank(role, part), entry))
        error = message.info.error
        if role == "assistant" and error:
            raw = error.get("data")
            data: dict[str, Any] = raw if isinstance(raw, dict) else {}
            detail = _bounded(_as_text(data.get("message") or ""), ERROR_CHARS)
            text = f"[assistant error: {redact(str(error.get('name', 'Error')))}] {detail}"
            entries.append(Entry(index, role, RANK_AGENT, text.rstrip()))
        blocks += len(entries) > before
    entries = _mark_final_answers(entries, text_at)
    if entries and entries[0].role == "user":
        entries[0] = Entry(entries[0].message, "user", RANK_TASK, entries[0].text)
    text, omitted = select(entries, max_tokens)
    return Transcript(
        text=text,
        entries=blocks,
        tool_names=list(dict.fromkeys(tool_names)),
        citations=cited,
        truncated=omitted > 0 or "omitted from the middle" in text,
        omitted=omitted,
    )


def external_tools(
    tool_names: Iterable[str], mcp_servers: Iterable[str], own_servers: Iterable[str] = ("memoryd",)
) -> list[str]:
    """Tools that brought outside content into a session: web tools, and MCP tools other than memoryd's own.

    opencode names MCP tools ``<server>_<tool>`` (server names sanitised to ``[A-Za-z0-9_-]``).
    """

    def sanitize(name: str) -> str:
        return re.sub(r"[^A-Za-z0-9_-]", "_", name)

    own = {sanitize(s) + "_" for s in own_servers}
    prefixes = [sanitize(s) + "_" for s in mcp_servers if sanitize(s) + "_" not in own]
    found = []
    for name in tool_names:
        if any(name.startswith(p) for p in own):
            continue
        if name in WEB_TOOLS or any(name.startswith(p) for p in prefixes):
            found.append(name)
    return found
