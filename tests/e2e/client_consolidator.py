"""memoryd's model calls as the real ``claude -p`` runner makes them, answered by a script.

Requests reach :class:`~tests.e2e.client_models.ClientModels` in the Anthropic Messages form. An
extraction offers the ``StructuredOutput`` tool (``--json-schema``); a consolidation offers
memoryd's own file tools (``mcp__memoryd-folder__*``). :class:`ClientConsolidator` works like the
opencode one in ``consolidator.py``: read the diff and the raw memories it names, then write the
global files and each named project's layer, with ``extra_steps`` first for a test that wants
misbehaviour. Anything else (the user's own sessions) goes to the default responder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.e2e.client_models import ClientReply, ClientRequest, default_responder
from tests.e2e.mockllm import Text, ToolCall

FILES = "mcp__memoryd-folder__"
STRUCTURED = "StructuredOutput"
DIFF = "phase2_workspace_diff.md"
Step = ToolCall | Callable[[dict[str, str]], ToolCall]


def tool(name: str, **arguments: Any) -> ToolCall:
    """A call of one of memoryd's file tools (``read``, ``write``, …) as Claude Code names it."""
    return ToolCall(FILES + name, arguments)


def exchanges(req: ClientRequest) -> list[tuple[str, dict[str, Any], str]]:
    """(tool, input, result text) of every tool call in the request, oldest first."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    out: list[tuple[str, dict[str, Any], str]] = []
    for msg in req.body.get("messages") or []:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls[block["id"]] = (block["name"], block.get("input") or {})
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in calls:
                name, args = calls[block["tool_use_id"]]
                out.append((name, args, _text(block.get("content"))))
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c) for c in content)
    if isinstance(content, dict):
        return str(content.get("text", ""))
    return ""


def is_extraction(req: ClientRequest) -> bool:
    return STRUCTURED in req.tools


def is_consolidation(req: ClientRequest) -> bool:
    return any(t.startswith(FILES) for t in req.tools)


def fact_extraction(marker: str) -> Callable[[ClientRequest], dict[str, Any]]:
    """Extraction answers keeping every transcript line that carries ``marker``."""

    def reply(req: ClientRequest) -> dict[str, Any]:
        lines = [ln.strip() for ln in req.last_user_text().splitlines() if marker in ln]
        facts = sorted({ln[ln.index(marker) :][:200] for ln in lines})
        if not facts:
            return {"raw_memory": "", "rollout_summary": "", "rollout_slug": None}
        return {
            "raw_memory": "Facts from the session:\n" + "\n".join(f"- {f}" for f in facts),
            "rollout_summary": f"Session summary: {facts[0]}",
            "rollout_slug": "facts",
        }

    return reply


class ClientConsolidator:
    def __init__(self, extra_steps: list[Step] | None = None) -> None:
        self.extra_steps = extra_steps or []
        self.runs = 0
        self.results: list[tuple[str, dict[str, Any], str]] = []

    def _plan(self, seen: dict[str, str]) -> list[Step]:
        keys = sorted(
            set(re.findall(r"projects/([a-z0-9-]+)/raw_memories\.md", seen.get(DIFF, "")))
        )
        reads: list[Step] = [tool("read", path=DIFF), tool("read", path="raw_memories.md")]
        reads += [tool("read", path=f"projects/{k}/raw_memories.md") for k in keys]
        layers: list[Step] = [self._layer(k) for k in keys]
        return [*reads, *self.extra_steps, self._memory, self._summary, *layers]

    @staticmethod
    def _bullets(seen: dict[str, str], path: str | None = None) -> list[str]:
        out = []
        for p, text in seen.items():
            if p.endswith("raw_memories.md") and (path is None or p == path):
                out += [ln for ln in text.splitlines() if ln.startswith("- ")]
        return out

    def _layer(self, key: str) -> Callable[[dict[str, str]], ToolCall]:
        def write(seen: dict[str, str]) -> ToolCall:
            body = "\n".join(self._bullets(seen, f"projects/{key}/raw_memories.md")) or "- none"
            return tool(
                "write",
                path=f"projects/{key}/memory_summary.md",
                content=f"v1\n## This project\n{body}\n",
            )

        return write

    def _memory(self, seen: dict[str, str]) -> ToolCall:
        body = "\n".join(self._bullets(seen)) or "- (no durable facts yet)"
        return tool("write", path="MEMORY.md", content=f"# Memory\n\n## Facts\n{body}\n")

    def _summary(self, seen: dict[str, str]) -> ToolCall:
        bullets = self._bullets(seen)
        top = "\n".join(bullets[:5])
        return tool(
            "write",
            path="memory_summary.md",
            content=f"v1\n## What's in memory\n- {len(bullets)} facts in MEMORY.md\n{top}\n",
        )

    def __call__(self, req: ClientRequest) -> ClientReply:
        done = exchanges(req)
        if not done:
            self.runs += 1
        else:
            self.results.append(done[-1])
        seen = {
            str(args.get("path", "")).lstrip("./"): result
            for name, args, result in done
            if name == FILES + "read"
        }
        plan = self._plan(seen)
        if len(done) >= len(plan):
            return Text("Consolidated the new session notes.")
        step = plan[len(done)]
        return step if isinstance(step, ToolCall) else step(seen)


def responder(
    consolidator: Callable[[ClientRequest], ClientReply],
    extraction: Callable[[ClientRequest], dict[str, Any]],
    user: Callable[[ClientRequest], ClientReply] = default_responder,
) -> Callable[[ClientRequest], ClientReply]:
    """One responder for a world of memoryd runs and the user's own sessions."""

    def answer(req: ClientRequest) -> ClientReply:
        if is_extraction(req):
            if req.has_tool_result_after_last_user_text():
                return Text(json.dumps({"done": True}))
            return ToolCall(STRUCTURED, extraction(req))
        if is_consolidation(req):
            return consolidator(req)
        return user(req)

    return answer
