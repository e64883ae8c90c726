"""What memoryd reads from Claude Code's and Codex's session files, and what it skips, in one place.

Both clients append one JSON object per line to a file per session. The parsers
(``claude_transcript.py``, ``codex_rollout.py``) turn the records that carry what the user or the
agent said and did into the host model (``host/models.py``: messages with text and tool parts),
so phase 1 reads them exactly like an opencode session. The tables below are the contract:
``*_READ`` names the record kinds that reach memory, ``*_SKIPPED`` every kind seen in the real
binaries that does not, with the reason. Anything else is counted as unknown and tolerated (a
newer client version adds kinds all the time); a line that is not a JSON object is a
:class:`LineProblem` naming the file and line, and the rest of the session still counts.

Text the client itself puts into a user turn (Claude Code's ``<system-reminder>`` blocks, Codex's
``<environment_context>``, ``AGENTS.md`` and skill instructions) is not the user's words: it is
kept as a *synthetic* text part, which the transcript drops as it drops opencode's injected text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memoryd.host.models import Message, MessageInfo, MessageTime, Part, ToolState

CLAUDE_READ: dict[str, str] = {
    "user": "the user's prompt (a string or text blocks), attached images, and `tool_result` "
    "blocks, joined to the tool call they answer",
    "assistant": "the agent's `text` and `tool_use` blocks (name and input); an API error "
    "record becomes an assistant error",
    "summary / custom-title / ai-title": "the session's title",
    "attachment queued_command": "a prompt the user typed while the agent was busy",
}
CLAUDE_SKIPPED: dict[str, str] = {
    "thinking / redacted_thinking blocks": "reasoning, dropped as for opencode",
    "records with isSidechain": "a sub-agent's own turns (written by the agent, not the user); "
    "its answer reaches the session as the tool's result",
    "attachment (all other kinds)": "context the harness adds itself (environment, model identity, tool, agent "
    "and skill listings, git status, date, loaded memory files); sent as <system-reminder>, "
    "never the user's words",
    "system": "harness notices (compaction boundaries, local command output, API retries)",
    "queue-operation": "a copy of a prompt that is also its own `user` record",
    "last-prompt": "a copy of the newest prompt",
    "api-request / api-request-shape / api-request-blob": "copies of the request payloads "
    "(system prompt, tool schemas, the same messages again)",
    "cost-state / tools-used / atis-latch / file-history-snapshot / progress / mode": "bookkeeping: "
    "cost, tool names, latches, file backups, progress ticks, the permission mode",
    "user records with isMeta or isCompactSummary": "harness text, and a compaction summary "
    "that restates records still in the same file",
}
CODEX_READ: dict[str, str] = {
    "session_meta": "the session id, the folder it ran in, and whether it is a sub-agent",
    "response_item message (user)": "the user's words (`input_text`) and attached images",
    "response_item message (assistant)": "the agent's answers (`output_text`)",
    "response_item function_call / custom_tool_call / local_shell_call / web_search_call": "each "
    "tool call with its input",
    "response_item function_call_output / custom_tool_call_output": "each tool's result, joined "
    "to its call",
    "event_msg error / stream_error": "a failed turn, as an assistant error",
}
CODEX_SKIPPED: dict[str, str] = {
    "response_item message (developer / system)": "instructions the harness sends (permissions, "
    "skills, base instructions), never the user's words",
    "response_item reasoning": "reasoning, dropped as for opencode",
    "event_msg (all other kinds)": "mirrors of the response items (user_message, agent_message, "
    "item_completed, exec_command_end) and progress (task_started, token_count, …)",
    "turn_context / world_state / thread settings": "per-turn settings and the harness's "
    "state snapshot",
    "token_usage_record": "token accounting",
    "compacted / compaction": "a summary restating items still in the same file",
}

# Whole text blocks the clients inject into a user turn.
_HARNESS = re.compile(
    r"\A\s*(?:<(?P<tag>system-reminder|environment_context|user_instructions|"
    r"skills_instructions|permissions instructions|collaboration_mode|turn_aborted|"
    r"local-command-caveat|local-command-stdout|local-command-stderr)\b"
    r"|#\s*AGENTS\.md instructions)",
    re.I,
)


def is_harness_text(text: str) -> bool:
    """Text a client adds to a user turn itself (reminders, environment, instruction files)."""
    return bool(_HARNESS.match(text))


@dataclass(frozen=True)
class LineProblem:
    """A line of a session file that could not be read; the rest of the file still counts."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def parse_lines(
    path: Path, data: bytes
) -> tuple[list[tuple[int, dict[str, Any]]], list[LineProblem]]:
    """Every JSON object line of ``data`` with its 1-based line number, and the lines that were not."""
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[LineProblem] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            reason = "not valid JSON" if isinstance(exc, ValueError) else "not UTF-8"
            problems.append(LineProblem(str(path), number, f"{reason} ({str(exc)[:80]})"))
            continue
        if not isinstance(value, dict):
            problems.append(LineProblem(str(path), number, "not a JSON object"))
            continue
        records.append((number, value))
    return records, problems


def epoch_ms(value: Any) -> int | None:
    """An ISO-8601 timestamp (``…Z``) or epoch seconds/milliseconds, as epoch milliseconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value if value > 10**11 else value * 1000)
    if isinstance(value, str) and value:
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            return None
    return None


def as_text(value: Any) -> str:
    """Tool output in any of the shapes the clients write (string, blocks, objects) as text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (as_text(v) for v in value) if t)
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        if "content" in value:
            return as_text(value["content"])
        if value.get("type") == "image":
            return "[image]"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass
class MessageBuilder:
    """Messages in the host model, built record by record.

    A user text opens a new user message; agent text and tool calls go into the current assistant
    message (opened when needed); a tool result finds its call by id wherever it sits.
    """

    session_id: str
    messages: list[Message] = field(default_factory=list)
    _calls: dict[str, Part] = field(default_factory=dict)
    _serial: int = 0

    def _open(self, role: str, at: int, key: str | None) -> Message:
        last = self.messages[-1] if self.messages else None
        if role == "assistant" and last is not None and last.info.role == "assistant":
            return last
        self._serial += 1
        info = MessageInfo(
            id=key or f"{self.session_id}#{self._serial}",
            sessionID=self.session_id,
            role=role,
            time=MessageTime(created=at),
        )
        message = Message(info=info, parts=[])
        self.messages.append(message)
        return message

    def user_text(self, text: str, at: int, key: str | None = None) -> bool:
        """Add a user text; ``True`` when it is the user's own words (not harness text)."""
        if not text.strip():
            return False
        harness = is_harness_text(text)
        part = Part(type="text", text=text, synthetic=harness or None)
        last = self.messages[-1] if self.messages else None
        if last is not None and last.info.role == "user":
            last.parts.append(part)  # several text blocks of one turn
        else:
            self._open("user", at, key).parts.append(part)
        return not harness

    def user_file(self, name: str, at: int) -> None:
        self._open("user", at, None).parts.append(
            Part.model_validate({"type": "file", "filename": name})
        )

    def agent_text(self, text: str, at: int) -> None:
        if text.strip():
            self._open("assistant", at, None).parts.append(Part(type="text", text=text))

    def agent_error(self, name: str, message: str, at: int) -> None:
        msg = self._open("assistant", at, None)
        msg.info.error = {"name": name, "data": {"message": message}}

    def tool_call(self, call_id: str | None, name: str, args: Any, at: int) -> None:
        part = Part(
            type="tool",
            tool=name or "unknown",
            callID=call_id,
            state=ToolState(status="pending", input=args),
        )
        self._open("assistant", at, None).parts.append(part)
        if call_id:
            self._calls[call_id] = part

    def tool_result(self, call_id: str | None, output: Any, *, error: bool = False) -> bool:
        """Join a result to its call; ``False`` when no call with that id was seen."""
        part = self._calls.get(call_id or "")
        if part is None or part.state is None:
            return False
        text = as_text(output)
        if error:
            part.state.status, part.state.error = "error", text
        else:
            part.state.status, part.state.output = "completed", text
        return True


@dataclass
class ParsedSession:
    """One client session file read whole: what the listing needs and the messages."""

    session_id: str
    path: str
    directory: str
    title: str
    created: int
    updated: int
    parent: str | None = None  # a sub-agent's session (not a root, so never extracted itself)
    messages: list[Message] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)
    unknown: dict[str, int] = field(default_factory=dict)  # record kinds neither read nor skipped
