"""OpencodeClient against a fake opencode made of an ``httpx.MockTransport`` handler.

Only the transport is faked: the handler routes on method + path and answers with the payload
shapes recorded in ``opencode-host.md`` (1.18.33), so the client's paging, error mapping and body
building run for real.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from memoryd.errors import (
    ConfigError,
    HostAuthError,
    HostHTTPError,
    HostNotFound,
    HostProtocolError,
    HostTimeout,
    HostUnreachable,
    ModelCallError,
)
from memoryd.host.models import Session, TokenUsage
from memoryd.host.opencode import HELPER_METADATA_KEY, OpencodeClient, is_helper_session

BASE = "http://127.0.0.1:4096"
Handler = Callable[[httpx.Request], Any]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ------------------------------------------------------------------------------------ fake host


def session_json(sid: str, updated: int, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": sid,
        "slug": "swift-nebula",
        "projectID": "5463ae76",
        "directory": "/path/to/project",
        "path": "",
        "title": f"title of {sid}",
        "agent": "build",
        "model": {"id": "mock-model", "providerID": "mock", "variant": "default"},
        "version": "1.18.33",
        "summary": {"additions": 0, "deletions": 0, "files": 0},
        "cost": 0,
        "tokens": {"input": 203, "output": 20, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        "time": {"created": updated - 1000, "updated": updated},
        "project": {"id": "5463ae76", "worktree": "/path/to/project"},
    }
    data.update(extra)
    return data


def message_json(mid: str, role: str = "user", text: str = "hi", **info: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": mid, "sessionID": "ses_a", "role": role, "time": {"created": 1}}
    base.update(info)
    return {"info": base, "parts": [{"id": f"prt_{mid}", "type": "text", "text": text}]}


def not_found(sid: str) -> httpx.Response:
    return httpx.Response(
        404, json={"name": "NotFoundError", "data": {"message": f"Session not found: {sid}"}}
    )


class FakeHost:
    """Route table keyed by (method, path); records every request it sees."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return httpx.Response(
                404, json={"name": "NotFoundError", "data": {"message": "no route"}}
            )
        result = handler(request)
        if hasattr(result, "__await__"):
            result = await result
        if isinstance(result, httpx.Response):
            return result
        return httpx.Response(200, json=result)

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]

    def client(self, **kwargs: Any) -> OpencodeClient:
        return OpencodeClient(BASE, transport=httpx.MockTransport(self), **kwargs)


@pytest.fixture
def host() -> FakeHost:
    return FakeHost()


# ------------------------------------------------------------------------------------ health / auth


@pytest.mark.anyio
async def test_health_returns_version(host: FakeHost) -> None:
    host.on("GET", "/global/health", lambda r: {"healthy": True, "version": "1.18.33"})
    async with host.client() as client:
        assert await client.health() == "1.18.33"


@pytest.mark.anyio
async def test_health_401_is_auth_error(host: FakeHost) -> None:
    host.on(
        "GET",
        "/global/health",
        lambda r: httpx.Response(
            401, text="Unauthorized", headers={"www-authenticate": 'Basic realm="Secure Area"'}
        ),
    )
    async with host.client() as client:
        with pytest.raises(HostAuthError) as exc_info:
            await client.health()
    assert exc_info.value.status == 401


@pytest.mark.anyio
async def test_connection_refused_is_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    async with OpencodeClient(BASE, transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(HostUnreachable) as exc_info:
            await client.health()
    assert exc_info.value.url == BASE
    assert "Connection refused" in str(exc_info.value)


@pytest.mark.anyio
async def test_read_timeout_is_host_timeout() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    async with OpencodeClient(BASE, transport=httpx.MockTransport(hang)) as client:
        with pytest.raises(HostTimeout) as exc_info:
            await client.health(timeout=2.0)
    assert exc_info.value.seconds == 2.0


@pytest.mark.anyio
async def test_silent_server_hits_the_overall_deadline(host: FakeHost) -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(30)
        return httpx.Response(200, json={})

    host.on("GET", "/session/status", never)
    async with host.client(timeout=0.05) as client:
        with anyio.fail_after(5):
            with pytest.raises(HostTimeout):
                await client.session_status()


@pytest.mark.anyio
async def test_basic_auth_header_when_password_set(host: FakeHost) -> None:
    host.on("GET", "/global/health", lambda r: {"healthy": True, "version": "1.18.33"})
    async with host.client(password="s3cret") as client:
        await client.health()
    async with host.client(username="me", password="pw") as client:
        await client.health()
    async with host.client() as client:
        await client.health()
    first, second, third = host.requests
    assert (
        first.headers["authorization"] == "Basic " + base64.b64encode(b"opencode:s3cret").decode()
    )
    assert second.headers["authorization"] == "Basic " + base64.b64encode(b"me:pw").decode()
    assert "authorization" not in third.headers


# ------------------------------------------------------------------------------------ sessions


@pytest.mark.anyio
async def test_list_sessions_follows_cursor_across_three_pages(host: FakeHost) -> None:
    pages = {
        None: ([session_json("ses_3", 3000), session_json("ses_2", 2000)], "2000"),
        "2000": ([session_json("ses_1", 1500), session_json("ses_0", 1000)], "1000"),
        "1000": ([session_json("ses_z", 500)], None),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        items, nxt = pages[request.url.params.get("cursor")]
        headers = {"x-next-cursor": nxt} if nxt else {}
        return httpx.Response(200, json=items, headers=headers)

    host.on("GET", "/experimental/session", handler)
    async with host.client() as client:
        sessions = await client.list_sessions(page_size=2)
    assert [s.id for s in sessions] == ["ses_3", "ses_2", "ses_1", "ses_0", "ses_z"]
    assert sessions[0].project is not None and sessions[0].project.worktree == "/path/to/project"
    sent = host.calls("GET", "/experimental/session")
    assert [r.url.params.get("cursor") for r in sent] == [None, "2000", "1000"]
    for r in sent:
        assert r.url.params["roots"] == "true"
        assert r.url.params["limit"] == "2"
        assert "archived" not in r.url.params


@pytest.mark.anyio
async def test_a_listing_keeps_what_memoryd_reads_and_little_else(host: FakeHost) -> None:
    """A pass holds every listed session (10,000 in a year): token counts, costs, models and
    summaries stay out, and the sessions of a project share its description and folder name."""
    helper = session_json("ses_h", 900, metadata={HELPER_METADATA_KEY: "extract", "nonce": "n1"})
    items = [session_json("ses_2", 2000), session_json("ses_1", 1000, parentID="ses_2"), helper]
    items += [session_json("ses_a", 800), session_json("ses_b", 700)]
    items[0]["time"]["archived"] = 1999
    items[0]["time"]["compacting"] = 5
    host.on("GET", "/experimental/session", lambda r: items)
    async with host.client() as client:
        s2, s1, sh, sa, sb = await client.list_sessions()
    assert (s2.id, s2.title, s2.directory, s2.projectID) == (
        "ses_2",
        "title of ses_2",
        "/path/to/project",
        "5463ae76",
    )
    assert (s2.time.created, s2.time.updated, s2.is_archived) == (1000, 2000, True)
    assert s1.parentID == "ses_2" and not s1.is_root and s2.is_root
    assert s2.worktree == "/path/to/project"
    assert is_helper_session(sh) and sh.metadata == helper["metadata"]
    for s in (s2, s1, sh):
        assert not s.model_extra and not s.time.model_extra, s.model_extra
    assert s1.project is s2.project and s1.directory is s2.directory
    assert sa.model_fields_set is sb.model_fields_set  # one record of the given fields
    assert sa.time.model_fields_set is sb.time.model_fields_set


@pytest.mark.anyio
async def test_list_sessions_archived_and_start_params(host: FakeHost) -> None:
    host.on("GET", "/experimental/session", lambda r: [])
    async with host.client() as client:
        assert await client.list_sessions(roots=False, archived=True, start_ms=1234) == []
    (req,) = host.requests
    assert req.url.params["roots"] == "false"
    assert req.url.params["archived"] == "true"
    assert req.url.params["start"] == "1234"
    assert req.url.params["limit"] == "500"


@pytest.mark.anyio
async def test_list_sessions_stops_on_a_cursor_that_does_not_move(host: FakeHost) -> None:
    def stuck(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json=[session_json("ses_1", 1000)], headers={"x-next-cursor": "1000"}
        )

    host.on("GET", "/experimental/session", stuck)
    async with host.client() as client:
        with anyio.fail_after(5):
            sessions = await client.list_sessions()
    assert [s.id for s in sessions] == ["ses_1"]
    assert len(host.requests) == 2


@pytest.mark.anyio
async def test_malformed_json_is_protocol_error(host: FakeHost) -> None:
    host.on("GET", "/experimental/session", lambda r: httpx.Response(200, text="<html>oops</html>"))
    async with host.client() as client:
        with pytest.raises(HostProtocolError) as exc_info:
            await client.list_sessions()
    assert "not JSON" in str(exc_info.value)


@pytest.mark.anyio
async def test_wrong_shape_is_protocol_error_with_short_detail(host: FakeHost) -> None:
    host.on("GET", "/experimental/session", lambda r: {"sessions": ["x" * 10_000]})
    async with host.client() as client:
        with pytest.raises(HostProtocolError) as exc_info:
            await client.list_sessions()
    assert len(str(exc_info.value)) < 400


@pytest.mark.anyio
async def test_session_missing_a_relied_on_field_is_protocol_error(host: FakeHost) -> None:
    broken = session_json("ses_1", 1000)
    del broken["directory"]
    host.on("GET", "/session/ses_1", lambda r: broken)
    async with host.client() as client:
        with pytest.raises(HostProtocolError) as exc_info:
            await client.get_session("ses_1")
    assert "directory" in str(exc_info.value)


@pytest.mark.anyio
async def test_one_odd_session_in_a_listing_is_skipped_not_fatal(host: FakeHost) -> None:
    broken = session_json("ses_bad", 2000)
    del broken["directory"]
    host.on(
        "GET",
        "/experimental/session",
        lambda r: [session_json("ses_ok1", 3000), broken, "junk", session_json("ses_ok2", 1000)],
    )
    async with host.client() as client:
        sessions = await client.list_sessions()
    assert [s.id for s in sessions] == ["ses_ok1", "ses_ok2"]


@pytest.mark.anyio
async def test_500_unknown_error_is_http_error_with_name(host: FakeHost) -> None:
    body = {
        "name": "UnknownError",
        "data": {
            "message": "Unexpected server error. Check server logs for details.",
            "ref": "err_1",
        },
    }
    host.on("GET", "/experimental/session", lambda r: httpx.Response(500, json=body))
    async with host.client() as client:
        with pytest.raises(HostHTTPError) as exc_info:
            await client.list_sessions()
    err = exc_info.value
    assert not isinstance(err, HostNotFound)
    assert err.status == 500
    assert err.name == "UnknownError"
    assert err.detail is not None and err.detail.startswith("Unexpected server error")


@pytest.mark.anyio
async def test_get_session_404_is_not_found(host: FakeHost) -> None:
    host.on("GET", "/session/ses_gone", lambda r: not_found("ses_gone"))
    async with host.client() as client:
        with pytest.raises(HostNotFound) as exc_info:
            await client.get_session("ses_gone")
    assert exc_info.value.name == "NotFoundError"
    assert exc_info.value.detail == "Session not found: ses_gone"


@pytest.mark.anyio
async def test_get_session_parses_optional_fields(host: FakeHost) -> None:
    payload = session_json(
        "ses_1",
        1000,
        parentID="ses_0",
        metadata={"memoryd": {"kind": "extract"}},
        extra_thing=[1, 2],
    )
    payload["time"]["archived"] = 999
    payload.pop("project")
    host.on("GET", "/session/ses_1", lambda r: payload)
    async with host.client() as client:
        s = await client.get_session("ses_1")
    assert s.parentID == "ses_0" and not s.is_root
    assert s.is_archived and s.time.archived == 999
    assert s.project is None and s.version == "1.18.33"
    assert is_helper_session(s)


@pytest.mark.anyio
async def test_create_session_sends_directory_and_body(host: FakeHost) -> None:
    host.on(
        "POST", "/session", lambda r: session_json("ses_new", 5000, title="memoryd-extract-ses_1")
    )
    perm = [{"permission": "*", "pattern": "*", "action": "deny"}]
    async with host.client() as client:
        s = await client.create_session(
            directory="/tmp/mem root",
            title="memoryd-extract-ses_1",
            metadata={"memoryd": True},
            permission=perm,
        )
    assert s.id == "ses_new"
    (req,) = host.requests
    assert req.url.params["directory"] == "/tmp/mem root"
    assert json.loads(req.content) == {
        "title": "memoryd-extract-ses_1",
        "metadata": {"memoryd": True},
        "permission": perm,
    }


# ------------------------------------------------------------------------------------ messages


@pytest.mark.anyio
async def test_messages_pages_backwards_and_returns_oldest_first(host: FakeHost) -> None:
    # Six messages m1..m6, page size 2: the server answers newest page first.
    pages = {
        None: ([message_json("m5"), message_json("m6", "assistant")], "cur-b"),
        "cur-b": ([message_json("m3"), message_json("m4", "assistant")], "cur-a"),
        # overlapping page (m3 again) must not produce a duplicate
        "cur-a": ([message_json("m1"), message_json("m2", "assistant"), message_json("m3")], None),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        items, nxt = pages[request.url.params.get("before")]
        return httpx.Response(200, json=items, headers={"x-next-cursor": nxt} if nxt else {})

    host.on("GET", "/session/ses_a/message", handler)
    async with host.client() as client:
        msgs = await client.messages("ses_a", page_size=2)
    assert [m.info.id for m in msgs] == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert msgs[1].info.is_assistant and msgs[0].parts[0].is_visible_text
    sent = host.calls("GET", "/session/ses_a/message")
    assert [r.url.params.get("before") for r in sent] == [None, "cur-b", "cur-a"]
    assert all(r.url.params["limit"] == "2" for r in sent)


@pytest.mark.anyio
async def test_messages_parse_tool_parts_and_tokens(host: FakeHost) -> None:
    assistant = {
        "info": {
            "id": "msg_2",
            "sessionID": "ses_a",
            "role": "assistant",
            "parentID": "msg_1",
            "agent": "build",
            "modelID": "mock-model",
            "providerID": "mock",
            "finish": "tool-calls",
            "cost": 0,
            "tokens": {
                "total": 230,
                "input": 200,
                "output": 20,
                "reasoning": 5,
                "cache": {"read": 3, "write": 2},
            },
            "time": {"created": 10, "completed": 20},
        },
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Need to write."},
            {"type": "text", "text": "ctx", "synthetic": True},
            {
                "type": "tool",
                "callID": "call_1",
                "tool": "write",
                "state": {
                    "status": "completed",
                    "input": {"filePath": "/p/notes.md", "content": "teal\n"},
                    "output": "Wrote file successfully.",
                    "title": "notes.md",
                    "metadata": {},
                    "time": {"start": 1, "end": 2},
                },
            },
            {"type": "step-finish", "reason": "tool-calls"},
        ],
    }
    host.on("GET", "/session/ses_a/message", lambda r: [assistant])
    async with host.client() as client:
        (msg,) = await client.messages("ses_a")
    tool = msg.parts[3]
    assert tool.tool == "write" and tool.state is not None and tool.state.status == "completed"
    assert tool.state.input == {"filePath": "/p/notes.md", "content": "teal\n"}
    assert not msg.parts[2].is_visible_text
    usage = TokenUsage.from_info(msg.info)
    assert usage == TokenUsage(input=200, output=20, reasoning=5, cache_read=3, cache_write=2)
    assert (usage + usage).total == 2 * 230


@pytest.mark.anyio
async def test_messages_stop_on_a_cursor_that_does_not_move(host: FakeHost) -> None:
    host.on(
        "GET",
        "/session/ses_a/message",
        lambda r: httpx.Response(200, json=[message_json("m1")], headers={"x-next-cursor": "same"}),
    )
    async with host.client() as client:
        with anyio.fail_after(5):
            msgs = await client.messages("ses_a")
    assert [m.info.id for m in msgs] == ["m1"]
    assert len(host.requests) == 2


# ------------------------------------------------------------------------------------ prompt


def assistant_reply(**info: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "msg_out",
        "sessionID": "ses_h",
        "role": "assistant",
        "agent": "memoryd-extract",
        "modelID": "mock-small",
        "providerID": "mock",
        "finish": "stop",
        "cost": 0,
        "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
        "time": {"created": 1, "completed": 2},
    }
    base.update(info)
    return {"info": base, "parts": [{"type": "step-start"}, {"type": "text", "text": "done"}]}


@pytest.mark.anyio
async def test_prompt_body_shape(host: FakeHost) -> None:
    host.on("POST", "/session/ses_h/message", lambda r: assistant_reply())
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    async with host.client() as client:
        result = await client.prompt(
            "ses_h",
            directory="/mem",
            text="extract this",
            agent="memoryd-extract",
            model="openrouter/anthropic/claude-x",
            system="be terse",
            json_schema=schema,
        )
    assert result.text == "done"
    assert result.usage.input == 10
    (req,) = host.requests
    assert req.url.params["directory"] == "/mem"
    assert json.loads(req.content) == {
        "parts": [{"type": "text", "text": "extract this"}],
        "agent": "memoryd-extract",
        "model": {"providerID": "openrouter", "modelID": "anthropic/claude-x"},
        "system": "be terse",
        "format": {"type": "json_schema", "schema": schema},
    }


@pytest.mark.anyio
async def test_prompt_minimal_body_omits_optional_fields(host: FakeHost) -> None:
    host.on("POST", "/session/ses_h/message", lambda r: assistant_reply())
    async with host.client() as client:
        await client.prompt("ses_h", directory="/mem", text="go", agent="memorize")
    body = json.loads(host.requests[0].content)
    assert body == {"parts": [{"type": "text", "text": "go"}], "agent": "memorize"}


@pytest.mark.anyio
async def test_prompt_rejects_model_without_provider(host: FakeHost) -> None:
    async with host.client() as client:
        with pytest.raises(ConfigError):
            await client.prompt("ses_h", directory="/mem", text="go", agent="a", model="mock-small")
    assert host.requests == []


@pytest.mark.anyio
async def test_prompt_returns_structured_output(host: FakeHost) -> None:
    structured = {"raw_memory": "x", "rollout_summary": "y", "rollout_slug": "z"}
    reply = assistant_reply(finish="tool-calls", structured=structured)
    reply["parts"] = [
        {
            "type": "tool",
            "tool": "StructuredOutput",
            "callID": "c1",
            "state": {"status": "completed", "output": "Structured output captured successfully."},
        }
    ]
    host.on("POST", "/session/ses_h/message", lambda r: reply)
    async with host.client() as client:
        result = await client.prompt(
            "ses_h", directory="/mem", text="t", agent="a", json_schema={"type": "object"}
        )
    assert result.structured == structured
    assert result.text == ""


@pytest.mark.anyio
async def test_prompt_api_error_429_is_rate_limited_model_call_error(host: FakeHost) -> None:
    error = {
        "name": "APIError",
        "data": {
            "message": "Too Many Requests",
            "statusCode": 429,
            "isRetryable": True,
            "responseBody": '{"error":"rate"}',
        },
    }
    reply = assistant_reply(error=error, finish=None)
    reply["parts"] = []
    host.on("POST", "/session/ses_h/message", lambda r: reply)
    async with host.client() as client:
        with pytest.raises(ModelCallError) as exc_info:
            await client.prompt("ses_h", directory="/mem", text="t", agent="a")
    err = exc_info.value
    assert err.name == "APIError"
    assert err.status == 429
    assert err.retryable is True
    assert err.is_rate_limit


@pytest.mark.anyio
async def test_prompt_structured_output_error(host: FakeHost) -> None:
    error = {
        "name": "StructuredOutputError",
        "data": {"message": "Model did not produce structured output", "retries": 0},
    }
    host.on("POST", "/session/ses_h/message", lambda r: assistant_reply(error=error))
    async with host.client() as client:
        with pytest.raises(ModelCallError) as exc_info:
            await client.prompt(
                "ses_h", directory="/mem", text="t", agent="a", json_schema={"type": "object"}
            )
    err = exc_info.value
    assert err.name == "StructuredOutputError"
    assert err.status is None and err.retryable is None
    assert not err.is_rate_limit
    assert "did not produce structured output" in str(err)


@pytest.mark.anyio
async def test_prompt_timeout_aborts_then_raises(host: FakeHost) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    host.on("POST", "/session/ses_h/message", slow)
    host.on("POST", "/session/ses_h/abort", lambda r: True)
    async with host.client() as client:
        with pytest.raises(HostTimeout) as exc_info:
            await client.prompt("ses_h", directory="/mem", text="t", agent="a", timeout=7.0)
    assert exc_info.value.seconds == 7.0
    assert len(host.calls("POST", "/session/ses_h/abort")) == 1


@pytest.mark.anyio
async def test_prompt_deadline_aborts_even_when_abort_fails(host: FakeHost) -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(30)
        return httpx.Response(200, json={})

    host.on("POST", "/session/ses_h/message", never)
    host.on(
        "POST", "/session/ses_h/abort", lambda r: httpx.Response(500, json={"name": "UnknownError"})
    )
    async with host.client() as client:
        with anyio.fail_after(5):
            with pytest.raises(HostTimeout):
                await client.prompt("ses_h", directory="/mem", text="t", agent="a", timeout=0.05)
    assert len(host.calls("POST", "/session/ses_h/abort")) == 1


@pytest.mark.anyio
async def test_prompt_cancelled_by_caller_still_aborts(host: FakeHost) -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(30)
        return httpx.Response(200, json={})

    host.on("POST", "/session/ses_h/message", never)
    host.on("POST", "/session/ses_h/abort", lambda r: True)
    async with host.client() as client:
        with anyio.move_on_after(0.05) as scope:
            await client.prompt("ses_h", directory="/mem", text="t", agent="a")
    assert scope.cancelled_caught
    assert len(host.calls("POST", "/session/ses_h/abort")) == 1


@pytest.mark.anyio
async def test_prompt_http_500_is_http_error_without_abort(host: FakeHost) -> None:
    host.on(
        "POST",
        "/session/ses_h/message",
        lambda r: httpx.Response(
            500, json={"name": "UnknownError", "data": {"message": "unknown agent"}}
        ),
    )
    async with host.client() as client:
        with pytest.raises(HostHTTPError) as exc_info:
            await client.prompt("ses_h", directory="/mem", text="t", agent="nope")
    assert exc_info.value.status == 500
    assert host.calls("POST", "/session/ses_h/abort") == []


@pytest.mark.anyio
async def test_abort_never_raises() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with OpencodeClient(BASE, transport=httpx.MockTransport(refuse)) as client:
        await client.abort("ses_h")


# ------------------------------------------------------------------------------------ delete


@pytest.mark.anyio
async def test_delete_session_confirms_with_404(host: FakeHost) -> None:
    state = {"deleted": False}

    def delete(request: httpx.Request) -> Any:
        state["deleted"] = True
        return True

    def get(request: httpx.Request) -> Any:
        return not_found("ses_h") if state["deleted"] else session_json("ses_h", 1000)

    host.on("DELETE", "/session/ses_h", delete)
    host.on("GET", "/session/ses_h", get)
    async with host.client() as client:
        assert await client.delete_session("ses_h") is True
    assert [r.method for r in host.requests] == ["DELETE", "GET"]


@pytest.mark.anyio
async def test_delete_session_still_present_is_false(host: FakeHost) -> None:
    host.on("DELETE", "/session/ses_h", lambda r: True)
    host.on("GET", "/session/ses_h", lambda r: session_json("ses_h", 1000))
    async with host.client() as client:
        assert await client.delete_session("ses_h") is False


@pytest.mark.anyio
async def test_delete_session_404_on_delete_counts_as_gone(host: FakeHost) -> None:
    host.on("DELETE", "/session/ses_h", lambda r: not_found("ses_h"))
    async with host.client() as client:
        assert await client.delete_session("ses_h") is True
    assert len(host.requests) == 1


# ------------------------------------------------------------------------------------ misc endpoints


@pytest.mark.anyio
async def test_agents_status_dispose_and_mcp(host: FakeHost) -> None:
    host.on(
        "GET",
        "/agent",
        lambda r: [{"name": "build", "mode": "primary"}, {"name": "memorize", "hidden": True}],
    )
    host.on("GET", "/session/status", lambda r: {"ses_1": {"type": "busy"}})
    host.on("POST", "/instance/dispose", lambda r: True)
    host.on("GET", "/mcp", lambda r: {"memoryd": {"status": "connected"}})
    async with host.client() as client:
        agents = await client.agents(directory="/p")
        status = await client.session_status()
        await client.dispose_instance("/p q")
        mcp = await client.mcp_status()
    assert [a["name"] for a in agents] == ["build", "memorize"]
    assert status == {"ses_1": {"type": "busy"}}
    assert mcp == {"memoryd": {"status": "connected"}}
    assert host.calls("GET", "/agent")[0].url.params["directory"] == "/p"
    assert host.calls("POST", "/instance/dispose")[0].url.params["directory"] == "/p q"


@pytest.mark.anyio
async def test_mcp_status_missing_route_is_empty(host: FakeHost) -> None:
    async with host.client() as client:
        assert await client.mcp_status() == {}


@pytest.mark.anyio
async def test_session_ids_are_quoted_as_one_path_segment(host: FakeHost) -> None:
    async with host.client() as client:
        with pytest.raises(HostNotFound):
            await client.get_session("../global/health")
    assert host.requests[0].url.raw_path.startswith(b"/session/..%2Fglobal%2Fhealth")


# ------------------------------------------------------------------------------------ helper sessions


def _session(title: str, metadata: dict[str, Any] | None = None) -> Session:
    return Session.model_validate(session_json("ses_x", 1000, title=title, metadata=metadata))


def test_is_helper_session() -> None:
    assert is_helper_session(_session("memoryd-extract-ses_1"))
    assert is_helper_session(
        _session("fix the bug", {HELPER_METADATA_KEY: {"kind": "consolidate"}})
    )
    assert not is_helper_session(_session("fix the bug"))
    assert not is_helper_session(_session("fix the bug", {"other": 1}))
    assert not is_helper_session(_session("about memoryd-things"))


@pytest.mark.anyio
async def test_idempotent_requests_ride_out_transient_faults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 11: a reset or a 503 on a GET is retried with a short, bounded backoff; a POST is not
    (it may have happened), and a fault that persists still surfaces."""
    from memoryd import tuning

    monkeypatch.setattr(tuning, "HOST_RETRY_DELAYS_S", (0.0, 0.0))
    calls: list[str] = []
    faults: list[Callable[[httpx.Request], httpx.Response]] = [
        lambda r: (_ for _ in ()).throw(httpx.ReadError("reset", request=r)),
        lambda r: httpx.Response(503, json={"name": "Busy", "data": {"message": "later"}}),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if faults:
            return faults.pop(0)(request)
        if request.method == "POST":
            return httpx.Response(500, json={})
        return httpx.Response(200, json={"healthy": True, "version": "1.18.33"})

    async with OpencodeClient(BASE, transport=httpx.MockTransport(handler)) as client:
        assert await client.health() == "1.18.33"
        assert calls == ["GET", "GET", "GET"]
        calls.clear()
        with pytest.raises(HostHTTPError):
            await client.create_session(directory="/tmp", title="t", metadata={})
        assert calls == ["POST"]
        faults.extend([lambda r: httpx.Response(502, json={})] * 3)
        calls.clear()
        with pytest.raises(HostHTTPError):
            await client.health()
        assert calls == ["GET", "GET", "GET"]


def test_host_errors_name_what_was_tried() -> None:
    from memoryd.errors import HostNotStarted

    assert str(HostUnreachable("http://127.0.0.1:9", "refused")) == (
        "opencode at http://127.0.0.1:9 is unreachable: refused"
    )
    assert str(HostUnreachable("", "nothing configured")).startswith("no opencode server")
    err = HostNotStarted("/opt/oc/bin/opencode", "exited", "http://127.0.0.1:5")
    assert isinstance(err, HostUnreachable) and err.url == "http://127.0.0.1:5"
    assert (
        str(err)
        == "could not start opencode (/opt/oc/bin/opencode, serving on http://127.0.0.1:5): exited"
    )
    assert "opencode at opencode" not in str(HostNotStarted("opencode", "not found on PATH"))
