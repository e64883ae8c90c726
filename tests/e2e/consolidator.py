"""A scripted consolidation model: it answers memoryd's consolidation session with real tool calls.

It works like a (very literal) consolidator would: read the diff file, ``raw_memories.md``,
``MEMORY.md`` and ``memory_summary.md`` through opencode's ``read`` tool, then write both
artifacts with the ``write`` tool. ``MEMORY.md`` gets every fact bullet of ``raw_memories.md``,
so content from the sessions — and its disappearance when a session is forgotten — is visible.
An optional ``extra_steps`` list lets a test insert misbehaviour (writes outside the folder,
overwriting a note) before the good writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.e2e.mockllm import MockLLM, Reply, Text, ToolCall

CONSOLIDATOR_TOOLS = {"edit", "glob", "grep", "read", "write"}
Step = Callable[[dict[str, str]], ToolCall] | ToolCall


def is_consolidation(req: dict[str, Any]) -> bool:
    names = {t.get("function", {}).get("name") for t in req.get("tools") or []}
    return names == CONSOLIDATOR_TOOLS


def read_content(tool_output: str) -> str | None:
    """The file text from opencode's read-tool output (None when the file was missing)."""
    m = re.search(r"<content>\n(.*?)\n\n\(End of file", tool_output, re.S)
    if not m:
        return None
    return "\n".join(re.sub(r"^\d+: ?", "", line) for line in m.group(1).splitlines())


class ScriptedConsolidator:
    def __init__(
        self, extra_steps: list[Step] | None = None, side_effect: Callable[[], None] | None = None
    ) -> None:
        self.extra_steps = extra_steps or []
        self.side_effect = side_effect
        self.diffs: list[str] = []
        self.runs = 0

    def _plan(self) -> list[Step]:
        reads = [
            ToolCall("read", {"filePath": f})
            for f in (
                "phase2_workspace_diff.md",
                "raw_memories.md",
                "MEMORY.md",
                "memory_summary.md",
            )
        ]
        return [*reads, *self.extra_steps, self._write_memory, self._write_summary]

    def _write_memory(self, seen: dict[str, str]) -> ToolCall:
        raw = read_content(seen.get("raw_memories.md", "")) or ""
        bullets = [line for line in raw.splitlines() if line.startswith("- ")]
        body = "\n".join(bullets) if bullets else "- (no durable facts yet)"
        return ToolCall(
            "write", {"filePath": "MEMORY.md", "content": f"# Memory\n\n## Facts\n{body}\n"}
        )

    def _write_summary(self, seen: dict[str, str]) -> ToolCall:
        raw = read_content(seen.get("raw_memories.md", "")) or ""
        bullets = [line for line in raw.splitlines() if line.startswith("- ")]
        top = "\n".join(bullets[:5])
        return ToolCall(
            "write",
            {
                "filePath": "memory_summary.md",
                "content": f"v1\n## What's in memory\n- {len(bullets)} facts in MEMORY.md\n{top}\n",
            },
        )

    def __call__(self, req: dict[str, Any]) -> Reply:
        calls: dict[str, dict[str, Any]] = {}
        seen: dict[str, str] = {}
        steps_done = 0
        for msg in req.get("messages", []):
            if msg.get("role") == "assistant":
                for tc in msg.get("tool_calls") or []:
                    steps_done += 1
                    calls[tc["id"]] = tc
            elif msg.get("role") == "tool":
                tc = calls.get(msg.get("tool_call_id"), {})
                fn = tc.get("function", {})
                if fn.get("name") == "read":
                    path = json.loads(fn.get("arguments") or "{}").get("filePath", "")
                    content = msg.get("content")
                    seen[path] = content if isinstance(content, str) else str(content)
        if steps_done == 0:
            self.runs += 1
            if self.side_effect:
                self.side_effect()
        if steps_done == 1 and "phase2_workspace_diff.md" in seen:
            self.diffs.append(read_content(seen["phase2_workspace_diff.md"]) or "")
        plan = self._plan()
        if steps_done >= len(plan):
            return Text("Consolidated the new session notes.")
        step = plan[steps_done]
        return step(seen) if callable(step) and not isinstance(step, ToolCall) else step


def install(mock: MockLLM, consolidator: ScriptedConsolidator) -> None:
    """Route consolidation requests to ``consolidator``; everything else keeps the default."""
    default = mock.default_responder
    mock.set_responder(lambda req: consolidator(req) if is_consolidation(req) else default(req))
