"""Codex's rollouts (``<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl``) → messages.

Each line is ``{"timestamp", "type", "payload"}``. The conversation itself is the
``response_item`` records (what went to and came from the model); ``event_msg`` records mostly
mirror them for UIs. Which kinds are read and which skipped, and why, is written down once in
``client_records.py``. Ids are ``codex:<thread id>``; the file name ends with the same id, so a
file can be listed (and its memory kept or forgotten) without reading it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from memoryd.host.client_records import (
    MessageBuilder,
    ParsedSession,
    epoch_ms,
    parse_lines,
)
from memoryd.hosts import CODEX
from memoryd.tuning import CLIENT_TITLE_CHARS

HOST = CODEX
_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\Z", re.I)
_SKIPPED_KINDS = frozenset(
    {"turn_context", "world_state", "token_usage_record", "compacted", "compaction"}
)
_SKIPPED_ITEMS = frozenset({"reasoning", "compaction", "compaction_summary", "ghost_snapshot"})
_ERROR_EVENTS = frozenset({"error", "stream_error"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def session_id_of(path: Path) -> str:
    """``codex:<thread id>`` from the file name (``rollout-<time>-<uuid>.jsonl``)."""
    found = _ID.search(path.stem)
    return f"{HOST}:{found.group(1).lower() if found else path.stem}"


def parse(path: Path, data: bytes, *, fallback_ms: int) -> ParsedSession:
    """Read one rollout; ``fallback_ms`` (the file's mtime) dates a file without timestamps."""
    records, problems = parse_lines(path, data)
    sid = session_id_of(path)
    out = MessageBuilder(sid)
    unknown: Counter[str] = Counter()
    cwd = ""
    parent: str | None = None
    first_prompt = ""
    stamps: list[int] = []
    for _number, rec in records:
        kind = rec.get("type")
        payload = rec.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        at = epoch_ms(rec.get("timestamp"))
        if at is not None:
            stamps.append(at)
        at = at if at is not None else (stamps[-1] if stamps else fallback_ms)
        if kind == "session_meta":
            if not cwd and isinstance(payload.get("cwd"), str):
                cwd = str(payload["cwd"])
            parent = parent or _parent(payload)
        elif kind == "response_item":
            prompt = _item(out, payload, at, unknown)
            if prompt and not first_prompt:
                first_prompt = prompt
        elif kind == "event_msg":
            if payload.get("type") in _ERROR_EVENTS:
                message = payload.get("message")
                out.agent_error(str(payload["type"]), str(message or ""), at)
        elif kind not in _SKIPPED_KINDS:
            unknown[str(kind)] += 1
    return ParsedSession(
        session_id=sid,
        path=str(path),
        directory=cwd,
        title=" ".join(first_prompt.split())[:CLIENT_TITLE_CHARS],
        created=min(stamps) if stamps else fallback_ms,
        updated=max(stamps) if stamps else fallback_ms,
        parent=parent,
        messages=out.messages,
        problems=problems,
        unknown=dict(unknown),
    )


def _parent(meta: dict[str, Any]) -> str | None:
    """The thread a sub-agent (review, compaction, a spawned agent) works for, if this is one."""
    source = meta.get("source")
    if isinstance(source, dict) and source:
        return str(meta.get("parent_thread_id") or meta.get("forked_from_id") or "sub-agent")
    if meta.get("thread_source") not in (None, "user"):
        return str(meta.get("parent_thread_id") or meta.get("thread_source"))
    return None


def _item(out: MessageBuilder, item: dict[str, Any], at: int, unknown: Counter[str]) -> str:
    """One response item into ``out``; returns the user's own words when it carried some."""
    kind = item.get("type")
    if kind == "message":
        return _message(out, item, at)
    if kind in _CALLS:
        out.tool_call(
            str(item.get("call_id") or "") or None, _call_name(item), _call_input(item), at
        )
        if kind == "web_search_call" or (kind == "local_shell_call" and item.get("status")):
            # these carry no output item of their own: their status is the result
            out.tool_result(item.get("call_id"), item.get("status") or "", error=False)
    elif kind in _OUTPUTS:
        output = item.get("output")
        failed = isinstance(output, dict) and output.get("success") is False
        if isinstance(output, dict) and "content" in output:
            output = output["content"]
        out.tool_result(item.get("call_id"), output, error=failed)
    elif kind not in _SKIPPED_ITEMS:
        unknown[f"response_item {kind}"] += 1
    return ""


def _message(out: MessageBuilder, item: dict[str, Any], at: int) -> str:
    role = item.get("role")
    content = item.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if isinstance(content, str):
        blocks = [{"type": "input_text" if role == "user" else "output_text", "text": content}]
    prompt = ""
    for block in blocks:
        text = block.get("text")
        if role == "user":
            if block.get("type") in ("input_text", "text") and isinstance(text, str):
                if out.user_text(text, at):
                    prompt = prompt or text
            elif block.get("type") in ("input_image", "image"):
                out.user_file("image", at)
        elif role == "assistant" and isinstance(text, str):
            out.agent_text(text, at)
        # developer / system: harness instructions (client_records.CODEX_SKIPPED)
    return prompt


def _call_name(item: dict[str, Any]) -> str:
    if item.get("type") == "local_shell_call":
        return "local_shell"
    if item.get("type") == "web_search_call":
        return "web_search"
    return str(item.get("name") or "")


def _call_input(item: dict[str, Any]) -> Any:
    if item.get("type") in ("local_shell_call", "web_search_call"):
        return item.get("action")
    raw = item.get("arguments", item.get("input"))
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw
