"""Claude Code's session transcripts (``<config dir>/projects/<key>/<session>.jsonl``) → messages.

One file per session, one record per line; which record kinds are read and which are skipped, and
why, is written down once in ``client_records.py``. The folder a session ran in is the first
string ``cwd`` a record carries (the project key in the path is lossy: ``/`` and ``.`` both become
``-``). Ids are ``claude-code:<session uuid>`` so nothing collides with opencode's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from memoryd.host.client_records import (
    MessageBuilder,
    ParsedSession,
    epoch_ms,
    parse_lines,
)
from memoryd.hosts import CLAUDE_CODE
from memoryd.tuning import CLIENT_TITLE_CHARS

HOST = CLAUDE_CODE
_TITLE_KINDS = ("custom-title", "ai-title", "summary")
_SKIPPED_KINDS = frozenset(
    {
        "attachment",
        "system",
        "queue-operation",
        "last-prompt",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "cost-state",
        "tools-used",
        "atis-latch",
        "file-history-snapshot",
        "progress",
        "mode",
    }
)


def session_id_of(path: Path) -> str:
    """The namespaced id a transcript file stands for (its name is the session's uuid)."""
    return f"{HOST}:{path.stem}"


def parse(path: Path, data: bytes, *, fallback_ms: int) -> ParsedSession:
    """Read one transcript; ``fallback_ms`` (the file's mtime) dates a file without timestamps."""
    records, problems = parse_lines(path, data)
    sid = session_id_of(path)
    out = MessageBuilder(sid)
    unknown: Counter[str] = Counter()
    cwd = ""
    titles: dict[str, str] = {}
    first_prompt = ""
    stamps: list[int] = []
    for _number, rec in records:
        kind = rec.get("type")
        at = epoch_ms(rec.get("timestamp"))
        if at is not None:
            stamps.append(at)
        at = at if at is not None else (stamps[-1] if stamps else fallback_ms)
        if not cwd and isinstance(rec.get("cwd"), str):
            cwd = rec["cwd"]
        if rec.get("isSidechain") is True:
            continue  # a sub-agent's own turns; its answer comes back as the tool's result
        if kind == "user":
            prompt = _user(out, rec, at)
            if prompt and not first_prompt:
                first_prompt = prompt
        elif kind == "assistant":
            _assistant(out, rec, at)
        elif kind == "attachment" and _queued_prompt(rec):
            # a prompt typed while the agent was busy: the user's words, delivered late
            out.user_text(_queued_prompt(rec), at)
        elif kind in _TITLE_KINDS:
            value = rec.get("customTitle") or rec.get("aiTitle") or rec.get("summary")
            if isinstance(value, str) and value.strip():
                titles.setdefault(str(kind), value.strip())
        elif kind not in _SKIPPED_KINDS:
            unknown[str(kind)] += 1
    title = next((titles[k] for k in _TITLE_KINDS if k in titles), "")
    if not title:
        title = " ".join(first_prompt.split())[:CLIENT_TITLE_CHARS]
    return ParsedSession(
        session_id=sid,
        path=str(path),
        directory=cwd,
        title=title,
        created=min(stamps) if stamps else fallback_ms,
        updated=max(stamps) if stamps else fallback_ms,
        messages=out.messages,
        problems=problems,
        unknown=dict(unknown),
    )


def _queued_prompt(rec: dict[str, Any]) -> str:
    att = rec.get("attachment")
    if isinstance(att, dict) and att.get("type") == "queued_command":
        prompt = att.get("prompt")
        return prompt if isinstance(prompt, str) else ""
    return ""


def _user(out: MessageBuilder, rec: dict[str, Any], at: int) -> str:
    """One user record into ``out``; returns the user's own prompt text, if it had any."""
    if rec.get("isMeta") or rec.get("isCompactSummary"):
        return ""
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    key = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
    if isinstance(content, str):
        return content if out.user_text(content, at, key) else ""
    prompt = ""
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if out.user_text(block["text"], at, key):
                prompt = prompt or block["text"]
        elif kind == "tool_result":
            result = block.get("content")
            if result is None:
                result = rec.get("toolUseResult")
            out.tool_result(block.get("tool_use_id"), result, error=block.get("is_error") is True)
        elif kind in ("image", "document"):
            out.user_file(str(kind), at)
    return prompt


def _assistant(out: MessageBuilder, rec: dict[str, Any], at: int) -> None:
    message = rec.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if rec.get("isApiErrorMessage"):
        text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        out.agent_error("APIError", text.strip() or str(rec.get("error") or ""), at)
        return
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.agent_text(block["text"], at)
        elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
            out.tool_call(block.get("id"), str(block.get("name") or ""), block.get("input"), at)
        elif kind in ("web_search_tool_result", "mcp_tool_result"):
            out.tool_result(block.get("tool_use_id"), block.get("content"))
        # thinking / redacted_thinking: reasoning, skipped (client_records.CLAUDE_SKIPPED)
