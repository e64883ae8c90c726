"""A scripted OpenAI-compatible chat model for end-to-end tests.

opencode talks to it through its bundled ``@ai-sdk/openai-compatible`` provider, so the suite can
drive the real host with deterministic model behaviour and inspect every byte the model was sent
(prompts, tools offered, transcripts: the place to assert that no secret leaked).

Stdlib only: a ``ThreadingHTTPServer`` on 127.0.0.1 in a daemon thread. Each request is answered
by a *responder* (request JSON -> :data:`Reply`); the default one understands three situations:

* a ``StructuredOutput`` tool is offered (memoryd's extraction helper): call it with
  ``extraction_reply(request)``;
* the last user message holds ``[[tool:NAME key=value ...]]`` instructions and NAME is offered:
  call those tools; once a tool result comes back, answer with text;
* anything else: ``Text("ok: <echo of the last user message>")``.

Stream format (checked against the provider's chunk schema in the 1.18.33 binary): SSE lines
``data: <chat.completion.chunk>``; a tool call's first delta carries ``index``, ``id``, ``type``
and ``function.name``; usage arrives in a final chunk with ``choices: []`` (opencode sends
``stream_options.include_usage``); then ``data: [DONE]``. Errors are JSON
``{"error": {"message", "type", "code"}}`` with the given status; opencode retries 408/409/429/5xx
and honours ``retry-after-ms``.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)

STRUCTURED_OUTPUT_TOOL = "StructuredOutput"
TRANSCRIPT_RE = re.compile(
    r"=====\s*BEGIN SESSION TRANSCRIPT[^\n]*=====\n(?P<body>.*?)\n?=====\s*END SESSION TRANSCRIPT",
    re.S,
)
TOOL_INSTRUCTION_RE = re.compile(r"\[\[tool:(?P<name>[A-Za-z_][\w-]*)(?P<args>[^\]]*)\]\]")


# --------------------------------------------------------------------------------------------
# Replies


@dataclass(frozen=True)
class Text:
    """A plain assistant answer (optionally preceded by streamed reasoning)."""

    text: str
    reasoning: str | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class ToolCall:
    """One function call; return a list of them for parallel calls."""

    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class Error:
    """An HTTP error answer. ``body`` may be a dict (sent as JSON) or raw text."""

    status: int
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> bytes:
        body = self.body
        if body is None:
            kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(
                self.status, "server_error"
            )
            body = {
                "error": {
                    "message": f"mock error {self.status}",
                    "type": kind,
                    "code": str(self.status),
                }
            }
        return body.encode() if isinstance(body, str) else json.dumps(body).encode()


Reply = Text | ToolCall | Sequence[ToolCall] | Error
Responder = Callable[[dict[str, Any]], Reply]
ExtractionReply = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class RecordedRequest:
    """One call the model server received, with a parsed view for assertions."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    reply: Reply | None
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def tools(self) -> list[str]:
        return tools_offered(self.body)

    @property
    def session_id(self) -> str | None:
        """opencode sends the session id as ``x-session-id``."""
        return self.headers.get("x-session-id")

    @property
    def is_extraction(self) -> bool:
        return is_extraction(self.body)

    @property
    def text(self) -> str:
        return all_request_text(self.body)

    @property
    def last_user_text(self) -> str:
        return last_user_text(self.body)


# --------------------------------------------------------------------------------------------
# Request inspection helpers (accept a request dict or a RecordedRequest)


def _body(req: dict[str, Any] | RecordedRequest) -> dict[str, Any]:
    return req.body if isinstance(req, RecordedRequest) else req


def content_text(content: Any) -> str:
    """Flatten an OpenAI message ``content`` (string or list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(str(part.get("text") or part.get("content") or ""))
            else:
                out.append(str(part))
        return "\n".join(out)
    return json.dumps(content)


def tools_offered(req: dict[str, Any] | RecordedRequest) -> list[str]:
    """Names of the function tools the model was offered, in request order."""
    names = []
    for tool in _body(req).get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            names.append(fn["name"])
    return names


def is_extraction(req: dict[str, Any] | RecordedRequest) -> bool:
    """A memoryd extraction request is one that offers the structured-output tool."""
    return STRUCTURED_OUTPUT_TOOL in tools_offered(req)


def last_user_text(req: dict[str, Any] | RecordedRequest) -> str:
    for msg in reversed(_body(req).get("messages") or []):
        if msg.get("role") == "user":
            return content_text(msg.get("content"))
    return ""


def all_request_text(req: dict[str, Any] | RecordedRequest) -> str:
    """Everything the model received: message contents, replayed tool calls, tool schemas.

    Used for leak assertions, so it errs on the side of including too much.
    """
    body = _body(req)
    chunks: list[str] = []
    for msg in body.get("messages") or []:
        chunks.append(content_text(msg.get("content")))
        for key in ("reasoning_content", "reasoning"):
            if msg.get(key):
                chunks.append(str(msg[key]))
        for call in msg.get("tool_calls") or []:
            chunks.append(json.dumps(call, ensure_ascii=False))
    for tool in body.get("tools") or []:
        chunks.append(json.dumps(tool, ensure_ascii=False))
    return "\n".join(chunks)


def transcript_of(req: dict[str, Any] | RecordedRequest) -> str:
    """The transcript between memoryd's BEGIN/END markers, else the whole last user message."""
    text = last_user_text(req)
    m = TRANSCRIPT_RE.search(text)
    return (m.group("body") if m else text).strip()


# --------------------------------------------------------------------------------------------
# Default behaviour

_SMALL_TALK = frozenset(
    [
        "hi",
        "hello",
        "hey",
        "hiya",
        "yo",
        "thanks",
        "thank",
        "thx",
        "you",
        "your",
        "are",
        "how",
        "what's",
        "whats",
        "good",
        "morning",
        "evening",
        "afternoon",
        "night",
        "bye",
        "goodbye",
        "cheers",
        "ok",
        "okay",
        "fine",
        "great",
        "nice",
        "cool",
        "sure",
        "yes",
        "no",
        "yeah",
        "nope",
        "doing",
        "well",
        "i",
        "i'm",
        "im",
        "am",
        "me",
        "my",
        "is",
        "it",
        "was",
        "the",
        "a",
        "an",
        "and",
        "or",
        "to",
        "so",
        "just",
        "too",
        "very",
        "lol",
        "haha",
        "fine",
        "all",
        "user",
        "assistant",
        "tool",
        "system",
        "role",
    ]
)


def _content_words(text: str) -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z0-9_'./-]*", text)
    return [w for w in words if len(w) >= 3 and w.lower().strip("'.") not in _SMALL_TALK]


def _substantive_lines(transcript: str) -> list[str]:
    lines = []
    for raw in transcript.splitlines():
        line = raw.strip()
        # Role labels such as "[user]" or "## assistant" carry no content of their own.
        if not line or len(_content_words(line)) == 0:
            continue
        lines.append(line)
    return lines


def slugify(text: str, limit: int = 60) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    slug = ""
    for w in words[:8]:
        cand = f"{slug}-{w}" if slug else w
        if len(cand) > limit:
            break
        slug = cand
    return slug


def default_extraction_reply(req: dict[str, Any]) -> dict[str, Any]:
    """Deterministic memory derived from the transcript; all-empty for small talk.

    Small talk = fewer than four content words (words of 3+ letters outside a greeting/filler
    list). Otherwise the memory quotes the first substantive lines verbatim, so a test can see
    exactly which transcript text reached the model (and whether it was redacted).
    """
    transcript = transcript_of(req)
    if len(_content_words(transcript)) < 4:
        return {"raw_memory": "", "rollout_summary": "", "rollout_slug": ""}
    lines = _substantive_lines(transcript)
    first = lines[0] if lines else transcript.splitlines()[0]
    bullets = "\n".join(f"- {line[:200]}" for line in lines[:5])
    return {
        "raw_memory": f"Facts from the session:\n{bullets}",
        "rollout_summary": f"Session summary: {first[:120]}",
        "rollout_slug": slugify(" ".join(_content_words(transcript)[:8])),
    }


def _parse_tool_args(name: str, raw: str) -> dict[str, Any]:
    """``key=value`` pairs (shell quoting) mapped onto opencode's parameter names."""
    args: dict[str, Any] = {}
    for token in shlex.split(raw):
        key, sep, value = token.partition("=")
        if not sep:
            continue
        value = value.replace("\\n", "\n")
        try:
            parsed: Any = json.loads(value) if value[:1] in "[{" else value
        except json.JSONDecodeError:
            parsed = value
        args[key] = parsed
    aliases = {"path": "filePath", "file": "filePath", "cmd": "command"}
    args = {aliases.get(k, k): v for k, v in args.items()}
    if name == "bash":
        args.setdefault("description", "mock command")
    return args


def tool_instructions(text: str) -> list[ToolCall]:
    """Parse every ``[[tool:NAME key=value ...]]`` in ``text``."""
    return [
        ToolCall(m.group("name"), _parse_tool_args(m.group("name"), m.group("args")))
        for m in TOOL_INSTRUCTION_RE.finditer(text)
    ]


def _echo(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def make_default_responder(
    extraction_reply: ExtractionReply = default_extraction_reply,
) -> Responder:
    """Build the default responder; ``extraction_reply`` supplies StructuredOutput arguments."""

    def respond(req: dict[str, Any]) -> Reply:
        offered = tools_offered(req)
        if STRUCTURED_OUTPUT_TOOL in offered:
            return ToolCall(STRUCTURED_OUTPUT_TOOL, extraction_reply(req))
        messages = req.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return Text(
                f"done: tool result received ({_echo(content_text(last.get('content')), 60)})"
            )
        if last.get("role") == "user":
            calls = [
                c for c in tool_instructions(content_text(last.get("content"))) if c.name in offered
            ]
            if calls:
                return calls
        return Text("ok: " + _echo(last_user_text(req)))

    return respond


# --------------------------------------------------------------------------------------------
# Wire format


def estimate_tokens(data: Any) -> int:
    """Plausible token count: JSON length / 4, at least 1."""
    return max(1, len(json.dumps(data, ensure_ascii=False)) // 4)


def _normalise(reply: Text | ToolCall | Sequence[ToolCall]) -> tuple[Text | None, list[ToolCall]]:
    if isinstance(reply, Text):
        return reply, []
    if isinstance(reply, ToolCall):
        return None, [reply]
    return None, list(reply)


def _usage(req: dict[str, Any], completion: Any) -> dict[str, int]:
    prompt_tokens = estimate_tokens(req.get("messages") or [])
    completion_tokens = estimate_tokens(completion)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


def sse_chunks(
    req: dict[str, Any], reply: Text | ToolCall | Sequence[ToolCall]
) -> list[dict[str, Any]]:
    """The chat.completion.chunk objects for one streamed reply (without ``[DONE]``)."""
    cid = "chatcmpl-" + uuid.uuid4().hex[:24]
    base = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": req.get("model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    text, calls = _normalise(reply)
    out = [chunk({"role": "assistant", "content": ""})]
    if text is not None:
        if text.reasoning:
            out.append(chunk({"reasoning_content": text.reasoning}))
        # Two pieces, so the client really assembles deltas.
        half = len(text.text) // 2
        for piece in (text.text[:half], text.text[half:]):
            if piece:
                out.append(chunk({"content": piece}))
        out.append(chunk({}, "stop"))
        completion: Any = text.text
    else:
        for i, call in enumerate(calls):
            args = json.dumps(call.arguments, ensure_ascii=False)
            head = {
                "index": i,
                "id": call.id or _call_id(),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            out.append(chunk({"tool_calls": [head]}))
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]}))
        out.append(chunk({}, "tool_calls"))
        completion = [{"name": c.name, "arguments": c.arguments} for c in calls]
    out.append({**base, "choices": [], "usage": _usage(req, completion)})
    return out


def completion_body(
    req: dict[str, Any], reply: Text | ToolCall | Sequence[ToolCall]
) -> dict[str, Any]:
    """A non-streamed chat.completion for the same reply."""
    text, calls = _normalise(reply)
    message: dict[str, Any] = {"role": "assistant", "content": text.text if text else None}
    if text is not None and text.reasoning:
        message["reasoning_content"] = text.reasoning
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id or _call_id(),
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": json.dumps(c.arguments, ensure_ascii=False),
                },
            }
            for c in calls
        ]
    completion: Any = (
        text.text if text else [{"name": c.name, "arguments": c.arguments} for c in calls]
    )
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": _usage(req, completion),
    }


# --------------------------------------------------------------------------------------------
# Server


class MockLLM:
    """The model server. Use as a context manager, or call :meth:`start` / :meth:`stop`."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        extraction_reply: ExtractionReply = default_extraction_reply,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.default_responder: Responder = make_default_responder(extraction_reply)
        # Slow mode: every completion waits this long (a uniform draw when a (low, high) pair),
        # so a harness can catch memoryd mid-step.
        self.delay_s: float | tuple[float, float] = 0.0
        self.responder: Responder = responder or self.default_responder
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self.local = threading.local()  # ``headers`` of the request being answered in this thread
        self.failures: list[BaseException] = []
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``baseURL`` for opencode's provider options (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> MockLLM:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="mockllm", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> MockLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scripting
    def set_responder(self, responder: Responder | None) -> None:
        """Swap the responder (``None`` restores the default)."""
        self.responder = responder or self.default_responder

    def set_extraction_reply(self, extraction_reply: ExtractionReply | None) -> None:
        """Swap the StructuredOutput arguments of the default responder."""
        self.default_responder = make_default_responder(
            extraction_reply or default_extraction_reply
        )
        self.responder = self.default_responder

    # recordings
    @property
    def requests(self) -> list[RecordedRequest]:
        """Chat-completion requests received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self.failures.clear()

    def requests_matching(self, pred: Callable[[RecordedRequest], bool]) -> list[RecordedRequest]:
        return [r for r in self.requests if pred(r)]

    # The module-level inspectors, reachable from the fixture too (``mock_llm.tools_offered(r)``).
    is_extraction = staticmethod(is_extraction)
    tools_offered = staticmethod(tools_offered)
    all_request_text = staticmethod(all_request_text)
    transcript_of = staticmethod(transcript_of)

    @property
    def extraction_requests(self) -> list[RecordedRequest]:
        return self.requests_matching(lambda r: r.is_extraction)

    def wait_for(
        self, pred: Callable[[RecordedRequest], bool], timeout: float = 10.0
    ) -> RecordedRequest:
        """Block until a matching request has been recorded (for async flows)."""
        deadline = time.monotonic() + timeout
        while True:
            hits = self.requests_matching(pred)
            if hits:
                return hits[-1]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no matching model request within {timeout} s")
            time.sleep(0.05)

    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)


def _handler_for(mock: MockLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mockllm/1"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("mockllm: " + format, *args)

        def _send(
            self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                data = {
                    "object": "list",
                    "data": [{"id": m, "object": "model"} for m in ("mock-model", "mock-small")],
                }
                self._send(200, json.dumps(data).encode(), "application/json")
            else:
                self._send(
                    404, b'{"error":{"message":"not found","type":"not_found"}}', "application/json"
                )

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(
                    404, b'{"error":{"message":"not found","type":"not_found"}}', "application/json"
                )
                return
            try:
                req = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send(
                    400,
                    b'{"error":{"message":"bad json","type":"invalid_request_error"}}',
                    "application/json",
                )
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            mock.local.headers = headers
            mock.local.peer = self.client_address  # who called: (host, port)
            try:
                reply: Reply = mock.responder(req)
            except Exception as exc:  # a broken test responder must show up, not hang opencode
                log.exception("mockllm responder failed")
                mock.failures.append(exc)
                mock._record(RecordedRequest("POST", self.path, headers, req, None, time.time()))
                self._send(
                    500,
                    json.dumps(
                        {"error": {"message": f"responder failed: {exc}", "type": "server_error"}}
                    ).encode(),
                    "application/json",
                )
                return
            mock._record(RecordedRequest("POST", self.path, headers, req, reply, time.time()))
            if isinstance(reply, Error):
                self._send(reply.status, reply.payload(), "application/json", reply.headers)
                return
            if isinstance(reply, Text) and reply.delay_s:
                time.sleep(reply.delay_s)
            slow = mock.delay_s
            if isinstance(slow, tuple):
                slow = random.uniform(*slow)
            if slow:
                time.sleep(slow)
            if req.get("stream"):
                body = "".join(
                    f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in sse_chunks(req, reply)
                )
                body += "data: [DONE]\n\n"
                self._send(200, body.encode(), "text/event-stream", {"Cache-Control": "no-cache"})
            else:
                self._send(
                    200, json.dumps(completion_body(req, reply)).encode(), "application/json"
                )

    return Handler
