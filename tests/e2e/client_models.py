"""Scripted model servers for the real Claude Code and Codex CLIs.

Claude Code speaks the Anthropic **Messages** API (``POST /v1/messages``, streamed as SSE events
``message_start`` … ``message_stop``); Codex speaks the OpenAI **Responses** API
(``POST /v1/responses``, streamed as ``response.*`` events). One stdlib server on 127.0.0.1
answers both, records every request body (the place to assert what memoryd added to a client's
request, and that no secret leaked), and lets a test script each answer with a *responder*
(:class:`ClientRequest` -> ``Text`` | ``ToolCall`` | list of ``ToolCall``), the same reply types
the opencode mock uses.

The default responder mirrors the opencode mock's: when the newest user text carries
``[[tool:NAME key=value …]]`` and a tool whose name ends with ``NAME`` is offered, call it (once:
when a tool result already follows that user text, answer with text); otherwise answer
``ok: <echo of the newest user text>``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.e2e.mockllm import Text, ToolCall, tool_instructions

ClientReply = Text | ToolCall | Sequence[ToolCall]
# ToolCall("mcp__memoryd/memory_search", …): tool ``memory_search`` of namespace ``mcp__memoryd``
NAMESPACE_SEP = "/"


@dataclass
class ClientRequest:
    """One request as the model server received it."""

    api: str  # "messages" (Claude Code) or "responses" (Codex)
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""

    @property
    def tools(self) -> list[str]:
        names = []
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict):
                name = tool.get("name") or (tool.get("function") or {}).get("name")
                if isinstance(name, str):
                    names.append(name)
        return names

    def text(self) -> str:
        """Every byte of the request as text: system/instructions, messages, tool results."""
        return self.raw.decode("utf-8", "replace")

    def user_texts(self) -> list[str]:
        """Text of each user turn, oldest first (tool results excluded)."""
        out: list[str] = []
        if self.api == "messages":
            for msg in self.body.get("messages") or []:
                if msg.get("role") != "user":
                    continue
                content = msg.get("content")
                if isinstance(content, str):
                    out.append(content)
                    continue
                parts = [
                    b.get("text", "")
                    for b in content or []
                    if isinstance(b, dict)
                    and b.get("type") == "text"
                    and not _harness_text(b.get("text"))
                ]
                if parts:
                    out.append("\n".join(parts))
        else:
            for item in self.body.get("input") or []:
                if item.get("type", "message") != "message" or item.get("role") != "user":
                    continue
                content = item.get("content")
                if isinstance(content, str):
                    out.append(content)
                    continue
                parts = [
                    b.get("text", "")
                    for b in content or []
                    if isinstance(b, dict)
                    and b.get("type") in ("input_text", "text")
                    and not _harness_text(b.get("text"))
                ]
                if parts:
                    out.append("\n".join(parts))
        return out

    def last_user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def tool_results(self) -> list[str]:
        """Text of every tool result in the request, oldest first."""
        out: list[str] = []
        if self.api == "messages":
            for msg in self.body.get("messages") or []:
                for block in (
                    msg.get("content") or [] if isinstance(msg.get("content"), list) else []
                ):
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(_flatten(block.get("content")))
        else:
            for item in self.body.get("input") or []:
                if item.get("type") in ("function_call_output", "custom_tool_call_output"):
                    out.append(_flatten(item.get("output")))
        return out

    def has_tool_result_after_last_user_text(self) -> bool:
        if self.api == "messages":
            messages = self.body.get("messages") or []
            for msg in reversed(messages):
                content = msg.get("content")
                if not isinstance(content, list):
                    return False
                kinds = {b.get("type") for b in content if isinstance(b, dict)}
                if "tool_result" in kinds:
                    return True
                if msg.get("role") == "user" and "text" in kinds:
                    return False
            return False
        for item in reversed(self.body.get("input") or []):
            kind = item.get("type", "message")
            if kind in ("function_call_output", "custom_tool_call_output"):
                return True
            if kind == "message" and item.get("role") == "user":
                return False
        return False


# What the clients themselves put into a user turn: Claude Code's reminders, Codex's environment
# and instruction files. Not the user's words.
HARNESS_PREFIXES = (
    "<system-reminder>",
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
)


def _harness_text(text: Any) -> bool:
    return isinstance(text, str) and text.lstrip().startswith(HARNESS_PREFIXES)


def _flatten(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_flatten(c) for c in content)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return str(content["text"])
        if "content" in content:
            return _flatten(content["content"])
    return "" if content is None else json.dumps(content)


Responder = Callable[[ClientRequest], ClientReply]


def default_responder(req: ClientRequest) -> ClientReply:
    offered = req.tools
    if not req.has_tool_result_after_last_user_text():
        calls = []
        for call in tool_instructions(req.last_user_text()):
            match = next((t for t in offered if t == call.name or t.endswith(call.name)), None)
            if match:
                calls.append(ToolCall(match, call.arguments))
        if calls:
            return calls
    echo = " ".join(req.last_user_text().split())[:80]
    return Text(f"ok: {echo}")


def _estimate_tokens(raw: bytes) -> int:
    return max(1, len(raw) // 4)


def _normalise(reply: ClientReply) -> tuple[Text | None, list[ToolCall]]:
    if isinstance(reply, Text):
        return reply, []
    if isinstance(reply, ToolCall):
        return None, [reply]
    return None, list(reply)


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def messages_stream(req: ClientRequest, reply: ClientReply) -> bytes:
    """The Anthropic Messages SSE stream for one reply."""
    text, calls = _normalise(reply)
    model = str(req.body.get("model") or "scripted")
    input_tokens = _estimate_tokens(req.raw)
    out = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:20]}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
        )
    ]
    index = 0
    output_chars = 0
    if text is not None:
        out.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": text.text},
                },
            )
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        output_chars += len(text.text)
        index += 1
    for call in calls:
        args = json.dumps(call.arguments)
        out.append(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call.id or f"toolu_{uuid.uuid4().hex[:20]}",
                        "name": call.name,
                        "input": {},
                    },
                },
            )
        )
        out.append(
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": args},
                },
            )
        )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        output_chars += len(args)
        index += 1
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": max(1, output_chars // 4)},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def messages_body(req: ClientRequest, reply: ClientReply) -> dict[str, Any]:
    """The non-streamed Messages answer for one reply."""
    text, calls = _normalise(reply)
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text.text})
    for call in calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{uuid.uuid4().hex[:20]}",
                "name": call.name,
                "input": call.arguments,
            }
        )
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": str(req.body.get("model") or "scripted"),
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _estimate_tokens(req.raw), "output_tokens": 8},
    }


def responses_stream(req: ClientRequest, reply: ClientReply) -> bytes:
    """The OpenAI Responses SSE stream for one reply."""
    text, calls = _normalise(reply)
    response_id = f"resp_{uuid.uuid4().hex[:20]}"
    out = [
        _sse(
            "response.created",
            {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}},
        )
    ]
    items: list[dict[str, Any]] = []
    if text is not None:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{uuid.uuid4().hex[:20]}",
                "status": "completed",
                "content": [{"type": "output_text", "text": text.text, "annotations": []}],
            }
        )
    for call in calls:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:20]}",
            "call_id": call.id or f"call_{uuid.uuid4().hex[:20]}",
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        namespace, sep, name = call.name.partition(NAMESPACE_SEP)
        if sep:  # a tool inside a namespace tool (Codex offers each MCP server as one)
            item.update(namespace=namespace, name=name)
        items.append(item)
    output_chars = 0
    for index, item in enumerate(items):
        out.append(
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        if item["type"] == "message":
            delta = str(item["content"][0]["text"])
            out.append(
                _sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": delta,
                    },
                )
            )
            output_chars += len(delta)
        else:
            output_chars += len(item["arguments"])
        out.append(
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    input_tokens = _estimate_tokens(req.raw)
    output_tokens = max(1, output_chars // 4)
    out.append(
        _sse(
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": response_id,
                    "status": "completed",
                    "output": items,
                    "usage": {
                        "input_tokens": input_tokens,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": output_tokens,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": input_tokens + output_tokens,
                    },
                },
            },
        )
    )
    return b"".join(out)


class ClientModels:
    """The scripted model server; ``base_url`` for Claude Code, ``base_url + '/v1'`` for Codex."""

    def __init__(self, responder: Responder | None = None) -> None:
        self._responder = responder or default_responder
        self._lock = threading.Lock()
        self._requests: list[ClientRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ClientModels:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ClientModels:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def set_responder(self, responder: Responder | None) -> None:
        with self._lock:
            self._responder = responder or default_responder

    @property
    def requests(self) -> list[ClientRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def _answer(self, req: ClientRequest) -> ClientReply:
        with self._lock:
            self._requests.append(req)
            responder = self._responder
        return responder(req)


def _handler_for(models: ClientModels) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, data: dict[str, Any]) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [], "models": []})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_HEAD(self) -> None:
            self._send(200, b"", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "request body is not JSON"}})
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            headers = {k.lower(): v for k, v in self.headers.items()}
            if path.endswith("/messages/count_tokens"):
                self._json(200, {"input_tokens": _estimate_tokens(raw)})
                return
            if path.endswith("/messages"):
                req = ClientRequest("messages", path, body, headers, raw)
                reply = models._answer(req)
                if body.get("stream"):
                    self._send(200, messages_stream(req, reply), "text/event-stream")
                else:
                    self._json(200, messages_body(req, reply))
                return
            if path.endswith("/responses"):
                req = ClientRequest("responses", path, body, headers, raw)
                reply = models._answer(req)
                self._send(200, responses_stream(req, reply), "text/event-stream")
                return
            self._json(404, {"error": {"message": f"no route {path}"}})

    return Handler
