"""An in-process stand-in for ``opencode serve``, served through ``httpx.MockTransport``.

It speaks the routes and JSON shapes documented in ``opencode-host.md`` (sessions, paged
messages, helper sessions, structured-output prompts, agents, health) and keeps just enough
state to let phase 1 run end to end in a unit test or a benchmark. Replies to helper prompts
come from a scripted function so tests can return good output, schema breakage, model errors
or hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def write_memory(root: Path) -> None:
    """What a well-behaved consolidator leaves behind (the fake host has no file tools)."""
    raw = (root / "raw_memories.md").read_text()
    (root / "MEMORY.md").write_text("# Memory\n\n" + raw[:500])
    (root / "memory_summary.md").write_text("v1\n- consolidated\n")


def good_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A structured answer derived from the prompt text (deterministic)."""
    text = body["parts"][0]["text"]
    return {
        "structured": {
            "raw_memory": f"---\ndescription: remembered\n---\nfacts from prompt of {len(text)} chars",
            "rollout_summary": "# Session summary\nThe user fixed the build.",
            "rollout_slug": "Fixed The Build!",
        }
    }


@dataclass
class FakeOpencode:
    version: str = "1.18.33"
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    agents: list[str] = field(
        default_factory=lambda: ["build", "plan", "memoryd-extract", "memoryd-consolidate"]
    )
    reply: Reply = good_reply
    consolidate: Callable[[Path], None] | None = None
    password: str | None = None
    prompt_delay: float = 0.0
    page_size_seen: list[int] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    worktree: str = "/"
    permissions: dict[str, Any] = field(default_factory=dict)
    status: dict[str, dict[str, Any]] = field(default_factory=dict)  # GET /session/status
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- building state ---------------------------------------------------------------------

    def add_session(
        self,
        sid: str,
        *,
        updated: int,
        title: str = "a session",
        directory: str = "/srv/proj",
        parent: str | None = None,
        turns: list[tuple[str, str]] | None = None,
        metadata: dict[str, Any] | None = None,
        worktree: str | None = None,
    ) -> dict[str, Any]:
        s = {
            "id": sid,
            "slug": "x",
            "projectID": "p1",
            "directory": directory,
            "path": "",
            "title": title,
            "version": self.version,
            "cost": 0,
            "tokens": {"input": 0, "output": 0},
            "time": {"created": updated - 1000, "updated": updated},
        }
        if parent:
            s["parentID"] = parent
        if worktree is not None:  # only listings carry it (as /experimental/session does)
            s["projectID"] = f"p-{worktree}"
            s["project"] = {"id": f"p-{worktree}", "worktree": worktree}
        if metadata:
            s["metadata"] = metadata
        self.sessions[sid] = s
        msgs = []
        for i, (role, text) in enumerate(
            turns if turns is not None else [("user", "hello"), ("assistant", "hi")]
        ):
            msgs.append(
                self.message(sid, role, [{"type": "text", "text": text}], created=updated - 900 + i)
            )
        self.messages[sid] = msgs
        return s

    def message(
        self, sid: str, role: str, parts: list[dict[str, Any]], *, created: int
    ) -> dict[str, Any]:
        mid = f"msg_{next(self._ids):06d}"
        info: dict[str, Any] = {
            "id": mid,
            "sessionID": sid,
            "role": role,
            "time": {"created": created},
        }
        if role == "assistant":
            info.update({"modelID": "mock-model", "providerID": "mock", "finish": "stop"})
        return {"info": info, "parts": [{"id": f"prt_{next(self._ids):06d}", **p} for p in parts]}

    def touch(
        self, sid: str, updated: int, turn: tuple[str, str] = ("user", "one more thing")
    ) -> None:
        self.sessions[sid]["time"]["updated"] = updated
        self.messages[sid].append(
            self.message(sid, turn[0], [{"type": "text", "text": turn[1]}], created=updated)
        )

    def add_tool_call(
        self,
        sid: str,
        tool: str,
        tool_input: Any,
        *,
        at: int,
        directory: str = "/srv/proj",
        title: str = "a user session",
        status: str = "completed",
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A session whose model ran one tool at ``at`` (the tool part as opencode 1.18 shows it)."""
        if sid not in self.sessions:
            self.add_session(
                sid,
                updated=at,
                title=title,
                directory=directory,
                turns=[("user", "please tidy up")],
                metadata=metadata,
            )
        self.sessions[sid]["time"]["updated"] = max(self.sessions[sid]["time"]["updated"], at)
        state: dict[str, Any] = {"status": status, "input": tool_input, "time": {"start": at - 50}}
        if status == "completed":
            state.update(output="done", title=tool, metadata={})
            state["time"]["end"] = at
        part = {"type": "tool", "callID": f"call_{next(self._ids)}", "tool": tool, "state": state}
        msg = self.message(sid, "assistant", [{"type": "step-start"}, part], created=at - 100)
        msg["info"]["path"] = {"cwd": directory, "root": directory}
        self.messages[sid].append(msg)
        return msg

    @property
    def helper_sessions(self) -> list[str]:
        return [s for s, v in self.sessions.items() if v["title"].startswith("memoryd-")]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    @contextlib.contextmanager
    def serve(self) -> Iterator[str]:
        """The same routes over real HTTP on 127.0.0.1 (for clients that are not httpx, or a
        memoryd in another process); yields the base URL."""
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                req = httpx.Request(
                    self.command,
                    f"http://fake{self.path}",
                    headers=dict(self.headers.items()),
                    content=self.rfile.read(size) if size else None,
                )
                resp = asyncio.run(host.handle(req))
                body = resp.content
                self.send_response(resp.status_code)
                for name, value in resp.headers.items():  # a listing's next cursor, for one
                    if name.lower() not in ("content-type", "content-length", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_DELETE = do_PATCH = do_PUT = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()

    # -- routes -----------------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = unquote(request.url.path)
        method = request.method
        self.calls.append(f"{method} {path}")
        if self.password is not None:
            import base64

            want = "Basic " + base64.b64encode(f"opencode:{self.password}".encode()).decode()
            if request.headers.get("authorization") != want:
                return httpx.Response(
                    401, headers={"www-authenticate": 'Basic realm="Secure Area"'}
                )
        parts = [p for p in path.split("/") if p]
        if path == "/global/health":
            return httpx.Response(200, json={"healthy": True, "version": self.version})
        if path == "/experimental/session":
            return self._list(request)
        if path == "/agent":
            return httpx.Response(200, json=[{"name": n, "mode": "subagent"} for n in self.agents])
        if path == "/path":
            directory = request.url.params.get("directory", "/")
            return httpx.Response(200, json={"worktree": self.worktree, "directory": directory})
        if path == "/instance/dispose":
            return httpx.Response(200, json=True)
        if path == "/mcp":
            return httpx.Response(200, json={})
        if path == "/session/status":
            return httpx.Response(200, json=self.status)
        if parts[:1] == ["session"]:
            if len(parts) == 1 and method == "POST":
                return self._create(request)
            sid = parts[1]
            if sid not in self.sessions:
                return httpx.Response(
                    404,
                    json={
                        "name": "NotFoundError",
                        "data": {"message": f"Session not found: {sid}"},
                    },
                )
            if len(parts) == 2 and method == "GET":
                return httpx.Response(200, json=self.sessions[sid])
            if len(parts) == 2 and method == "DELETE":
                del self.sessions[sid]
                self.messages.pop(sid, None)
                self.deleted.append(sid)
                return httpx.Response(200, json=True)
            if parts[2:] == ["message"] and method == "GET":
                return self._messages(request, sid)
            if parts[2:] == ["message"] and method == "POST":
                return await self._prompt(request, sid)
            if parts[2:] == ["abort"]:
                return httpx.Response(200, json=True)
        return httpx.Response(
            404, json={"name": "NotFoundError", "data": {"message": f"no route {path}"}}
        )

    def _list(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params
        limit = int(q.get("limit", "100"))
        self.page_size_seen.append(limit)
        items = sorted(
            self.sessions.values(), key=lambda s: (s["time"]["updated"], s["id"]), reverse=True
        )
        if q.get("roots") == "true":
            items = [s for s in items if "parentID" not in s]
        if "start" in q:
            items = [s for s in items if s["time"]["updated"] >= int(q["start"])]
        if "cursor" in q:
            items = [s for s in items if s["time"]["updated"] < int(q["cursor"])]
        page, more = items[:limit], len(items) > limit
        headers = {"x-next-cursor": str(page[-1]["time"]["updated"])} if more else {}
        return httpx.Response(200, json=page, headers=headers)

    def _messages(self, request: httpx.Request, sid: str) -> httpx.Response:
        msgs = self.messages.get(sid, [])
        q = request.url.params
        if "limit" not in q:
            return httpx.Response(200, json=msgs)
        limit = int(q["limit"])
        end = len(msgs)
        if "before" in q:
            end = next(i for i, m in enumerate(msgs) if m["info"]["id"] == q["before"])
        start = max(0, end - limit)
        headers = {"x-next-cursor": msgs[start]["info"]["id"]} if start > 0 else {}
        return httpx.Response(200, json=msgs[start:end], headers=headers)

    def _create(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        sid = f"ses_helper{next(self._ids):06d}"
        s = self.add_session(
            sid,
            updated=2_000_000_000_000,
            title=body.get("title", "untitled"),
            directory=request.url.params.get("directory", "/"),
            turns=[],
            metadata=body.get("metadata"),
        )
        self.permissions[sid] = body.get("permission")
        return httpx.Response(200, json=s)

    async def _prompt(self, request: httpx.Request, sid: str) -> httpx.Response:
        body = json.loads(request.content)
        self.prompts.append(body)
        if body.get("agent") == "memoryd-consolidate" and self.consolidate is not None:
            self.consolidate(Path(request.url.params["directory"]))
        if self.prompt_delay:
            await asyncio.sleep(self.prompt_delay)
        out = self.reply(body)
        if "http_status" in out:
            return httpx.Response(
                out["http_status"], json=out.get("json", {}), content=out.get("content")
            )
        info: dict[str, Any] = {
            "id": f"msg_{next(self._ids):06d}",
            "sessionID": sid,
            "role": "assistant",
            "time": {"created": 1, "completed": 2},
            "modelID": "mock-small",
            "providerID": "mock",
            "finish": "tool-calls",
            "cost": 0.0,
            "tokens": {
                "input": 1200,
                "output": 150,
                "reasoning": 0,
                "cache": {"read": 100, "write": 0},
            },
        }
        if "structured" in out:
            info["structured"] = out["structured"]
        if "error" in out:
            info["error"] = out["error"]
        parts = [{"type": "text", "text": out["text"]}] if "text" in out else []
        return httpx.Response(200, json={"info": info, "parts": parts})
