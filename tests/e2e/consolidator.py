"""A scripted consolidation model: it answers memoryd's consolidation session with real tool calls.

It works like a (very literal) consolidator would: read the diff file, ``raw_memories.md``,
``MEMORY.md`` and ``memory_summary.md`` through opencode's ``read`` tool, then write both
artifacts with the ``write`` tool. ``MEMORY.md`` gets every fact bullet of ``raw_memories.md``,
so content from the sessions — and its disappearance when a session is forgotten — is visible.
An optional ``extra_steps`` list lets a test insert misbehaviour (writes outside the folder,
overwriting a note) before the good writes.

Project layers: every ``projects/<key>/raw_memories.md`` the diff names is read too, and that
project's facts go into ``projects/<key>/memory_summary.md``. With ``scoped=True`` the global files
keep only facts marked ``(everywhere)`` (a literal consolidator's idea of "holds across
projects"); otherwise they get every fact, as before scopes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.e2e.mockllm import MockLLM, Reply, Responder, Text, ToolCall

CONSOLIDATOR_TOOLS = {"edit", "glob", "grep", "read", "write"}
Step = Callable[[dict[str, str]], ToolCall] | ToolCall
GLOBAL_MARK = "(everywhere)"


def diff_projects(seen: dict[str, str]) -> list[str]:
    diff = read_content(seen.get("phase2_workspace_diff.md", "")) or ""
    return sorted(set(re.findall(r"projects/([a-z0-9-]+)/raw_memories\.md", diff)))


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
        self,
        extra_steps: list[Step] | None = None,
        side_effect: Callable[[], None] | None = None,
        *,
        scoped: bool = False,
    ) -> None:
        self.scoped = scoped
        self.extra_steps = extra_steps or []
        self.side_effect = side_effect
        self.diffs: list[str] = []
        self.runs = 0

    def _plan(self, seen: dict[str, str]) -> list[Step]:
        keys = diff_projects(seen)
        files = ["phase2_workspace_diff.md", "raw_memories.md", "MEMORY.md", "memory_summary.md"]
        files += [f"projects/{k}/raw_memories.md" for k in keys]
        reads = [ToolCall("read", {"filePath": f}) for f in files]
        # a project whose folder is gone (all forgotten) gets no layer: its read found nothing
        layers = [
            self._project_writer(k)
            for k in keys
            if read_content(seen.get(f"projects/{k}/raw_memories.md", "")) is not None
        ]
        return [*reads, *self.extra_steps, self._write_memory, self._write_summary, *layers]

    def _bullets(self, seen: dict[str, str], *, global_only: bool) -> list[str]:
        out = []
        for path, text in seen.items():
            if path.endswith("raw_memories.md"):
                raw = read_content(text) or ""
                out += [line for line in raw.splitlines() if line.startswith("- ")]
        if global_only and self.scoped:
            out = [b for b in out if GLOBAL_MARK in b]
        return out

    def _project_writer(self, key: str) -> Callable[[dict[str, str]], ToolCall]:
        def write(seen: dict[str, str]) -> ToolCall:
            raw = read_content(seen.get(f"projects/{key}/raw_memories.md", "")) or ""
            bullets = [b for b in raw.splitlines() if b.startswith("- ")]
            if self.scoped:
                bullets = [b for b in bullets if GLOBAL_MARK not in b]
            body = "\n".join(bullets) or "- (nothing yet)"
            return ToolCall(
                "write",
                {
                    "filePath": f"projects/{key}/memory_summary.md",
                    "content": f"v1\n## This project\n{body}\n",
                },
            )

        return write

    def _write_memory(self, seen: dict[str, str]) -> ToolCall:
        bullets = self._bullets(seen, global_only=True)
        body = "\n".join(bullets) if bullets else "- (no durable facts yet)"
        return ToolCall(
            "write", {"filePath": "MEMORY.md", "content": f"# Memory\n\n## Facts\n{body}\n"}
        )

    def _write_summary(self, seen: dict[str, str]) -> ToolCall:
        bullets = self._bullets(seen, global_only=True)
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
        plan = self._plan(seen)
        if steps_done >= len(plan):
            return Text("Consolidated the new session notes.")
        step = plan[steps_done]
        return step(seen) if callable(step) and not isinstance(step, ToolCall) else step


def install(mock: MockLLM, consolidator: Responder) -> None:
    """Route consolidation requests to ``consolidator``; everything else keeps the default."""
    default = mock.default_responder
    mock.set_responder(lambda req: consolidator(req) if is_consolidation(req) else default(req))
