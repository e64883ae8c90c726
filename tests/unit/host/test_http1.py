"""The plain HTTP/1.1 transport under the host client, against a scripted server on 127.0.0.1.

Each test scripts what the server answers, byte for byte, and checks what httpx hands back and
how connections are used (opened, reused, dropped)."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from memoryd.errors import HostError, HostProtocolError, HostUnreachable
from memoryd.host.http1 import PlainHTTP1, _buffered, _head
from memoryd.host.transport import HostTransport

pytestmark = pytest.mark.anyio

Reply = bytes | Callable[[bytes], bytes | None] | None  # None: close without answering


def ok(body: bytes = b'{"ok": true}', *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head + list(extra)) + "\r\n\r\n").encode() + body


class Server:
    """Answers each request it reads with the next scripted reply; counts connections."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.connections = 0
        self.requests: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + (await reader.readexactly(length) if length else b"")
                self.requests.append(request)
                reply = self.replies.pop(0)
                if callable(reply):
                    reply = reply(request)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    def drop_idle(self) -> None:
        for w in self.writers:
            w.close()


@asynccontextmanager
async def serving(replies: list[Reply]) -> AsyncIterator[Server]:
    server = Server(replies)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        srv.close()
        server.drop_idle()


async def until(cond: Callable[[], bool]) -> None:
    """Wait for ``cond`` (ten seconds at most): no fixed sleep that a loaded machine outruns.
    It polls: what it waits for is socket state, which no event announces."""
    for _ in range(5000):
        if cond():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the condition did not come true within 10 s")


def idle_connections(c: httpx.AsyncClient) -> list[Any]:
    pool: Any = c._transport
    return [conn for conns in pool._idle.values() for conn in conns]


@asynccontextmanager
async def client(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, transport=PlainHTTP1()) as c:
        yield c


async def test_keep_alive_reuses_one_connection() -> None:
    async with serving([ok(b'{"n": 1}'), ok(b'{"n": 2}')]) as server, client(server) as c:
        first = await c.get("/a", params={"directory": "/tmp/x y"})
        second = await c.post("/b", json={"k": "v"})
    assert (first.json(), second.json()) == ({"n": 1}, {"n": 2})
    assert server.connections == 1
    get, post = server.requests
    assert get.startswith(b"GET /a?directory=%2Ftmp%2Fx+y HTTP/1.1\r\n")
    assert post.startswith(b"POST /b HTTP/1.1\r\n")
    head, body = post.split(b"\r\n\r\n", 1)
    assert json.loads(body) == {"k": "v"}
    assert f"\r\nContent-Length: {len(body)}".encode() in head


async def test_chunked_body_with_extensions_and_trailers() -> None:
    body = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    async with serving([body, ok(b"again")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"hello, world"
        assert (await c.get("/")).content == b"again"
    assert server.connections == 1


async def test_body_delimited_by_close_is_read_whole_and_not_reused() -> None:
    raw = b"HTTP/1.1 200 OK\r\n\r\nall of it"
    async with serving([raw, ok(b"next")]) as server, client(server) as c:
        task = asyncio.ensure_future(c.get("/"))
        await until(lambda: len(server.requests) == 1)  # answered (the head and the body so far)
        server.drop_idle()  # the server ends the body by closing
        assert (await task).content == b"all of it"
        assert (await c.get("/")).content == b"next"
    assert server.connections == 2


async def test_connection_close_and_http10_are_not_reused() -> None:
    replies: list[Reply] = [
        ok(b"1", "Connection: close"),
        b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n2",
        ok(b"3"),
    ]
    async with serving(replies) as server, client(server) as c:
        assert [(await c.get("/")).content for _ in range(3)] == [b"1", b"2", b"3"]
    assert server.connections == 3


async def test_an_idle_connection_the_server_closed_is_not_used() -> None:
    async with serving([ok(b"1"), ok(b"2")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"1"
        server.drop_idle()
        await until(lambda: not any(conn.usable() for conn in idle_connections(c)))
        assert (await c.post("/", json={})).content == b"2"
    assert server.connections == 2


async def test_dropped_before_answering_get_is_sent_again_post_is_not() -> None:
    async with serving([ok(b"1"), None, ok(b"2")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"1"
        assert (await c.get("/")).content == b"2"  # the reused one was dropped: a new one
    assert server.connections == 2
    async with serving([ok(b"1"), None, ok(b"never")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"1"
        with pytest.raises(httpx.RemoteProtocolError):
            await c.post("/", json={})
    assert len(server.requests) == 2  # the prompt was not sent twice


async def test_interim_answers_bodyless_statuses_and_head() -> None:
    replies: list[Reply] = [
        b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after"),
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",  # HEAD: the length, no body
        ok(b"last"),
    ]
    async with serving(replies) as server, client(server) as c:
        assert (await c.get("/")).content == b"after"
        assert (await c.delete("/")).status_code == 204
        assert (await c.head("/")).content == b""
        assert (await c.get("/")).content == b"last"
    assert server.connections == 1


async def test_compressed_body_is_decoded() -> None:
    packed = gzip.compress(b'{"zipped": 1}')
    async with serving([ok(packed, "Content-Encoding: gzip")]) as server, client(server) as c:
        assert (await c.get("/")).json() == {"zipped": 1}


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 200 OK\r\n\r\n",
        b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: x\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    ],
)
async def test_malformed_answers_are_protocol_errors(raw: bytes) -> None:
    async with serving([lambda r: raw, None]) as server, client(server) as c:
        task = asyncio.ensure_future(c.get("/"))
        await until(lambda: len(server.requests) == 1)
        server.drop_idle()  # a body cut short ends with the close
        with pytest.raises(httpx.RemoteProtocolError):
            await task


async def test_cancelled_exchange_drops_its_connection() -> None:
    half = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal"
    async with serving([half, ok(b"fresh")]) as server:
        async with client(server) as c:
            task = asyncio.ensure_future(c.get("/"))  # the body never completes
            await until(lambda: len(server.requests) == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await c.get("/")).content == b"fresh"
        assert server.connections == 2  # the half-read one was not put back


async def test_refused_connection_is_host_unreachable() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    async with httpx.AsyncClient(transport=PlainHTTP1()) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(f"http://127.0.0.1:{port}/")
    async with HostTransport(f"http://127.0.0.1:{port}", timeout=5) as t:
        with pytest.raises(HostUnreachable):
            await t._send("POST", "/x")


async def test_host_transport_speaks_it_for_http_only() -> None:
    plain = HostTransport("http://127.0.0.1:1")
    secure = HostTransport("https://example.invalid")
    try:
        assert isinstance(plain.transport, PlainHTTP1)
        assert secure.transport is None and secure._http is not None  # httpx's own (TLS, proxies)
    finally:
        await plain.aclose()
        await secure.aclose()


async def test_a_transport_asked_directly_gets_what_the_httpx_client_sent() -> None:
    """A transport of memoryd's choosing is asked without httpx's client on top (its URL merging,
    cookies and auth flow cost twice the transport's CPU): the request it gets must be the one
    the client made, header for header (auth, JSON body, query, deadline)."""
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        await request.aread()
        seen.append(request)
        return httpx.Response(201, json={"ok": True})

    def head(r: httpx.Request) -> tuple[object, ...]:
        return (r.method, str(r.url), sorted(r.headers.multi_items()), r.content, r.extensions)

    for base in ("http://127.0.0.1:4096", "http://opencode.example:80/prefix/"):
        direct = HostTransport(base, password="pw", transport=httpx.MockTransport(answer))
        resp = await direct._send("POST", "/session/x", params={"directory": "/a b"}, body=[1])
        assert resp.status_code == 201 and resp.json() == {"ok": True}
        await direct.aclose()
        headers = {"accept": "application/json"}
        if base.startswith("http://127."):
            headers["accept-encoding"] = "identity"
        async with httpx.AsyncClient(
            base_url=base,
            auth=httpx.BasicAuth("opencode", "pw"),
            headers=headers,
            transport=httpx.MockTransport(answer),
            timeout=direct._timeout_for(60.0),
        ) as client:
            await client.request("POST", "/session/x", params={"directory": "/a b"}, json=[1])
        assert head(seen[0]) == head(seen[1])
        seen.clear()


async def test_basic_auth_and_closing_the_pool() -> None:
    async with serving([ok(b"1")]) as server:
        t = HostTransport(server.url, password="pw", timeout=5)
        resp = await t._send("GET", "/global/health")
        assert resp.content == b"1"
        lines = server.requests[0].split(b"\r\n")
        assert [
            v for k, _, v in (x.partition(b": ") for x in lines) if k.lower() == b"authorization"
        ] == [
            b"Basic b3BlbmNvZGU6cHc="  # opencode:pw
        ]
        pool: Any = t.transport
        idle = [conn for conns in pool._idle.values() for conn in conns]
        assert len(idle) == 1
        await t.aclose()
        assert idle[0].writer.is_closing()
        assert pool._idle == {}


def test_request_head_refuses_what_would_split_it() -> None:
    good = httpx.Request("POST", "http://h/p?q=1", content=b"abc", headers={"X-A": "1"})
    head = _head(good, b"abc")
    assert head.startswith(b"POST /p?q=1 HTTP/1.1\r\n")
    assert head.endswith(b"\r\nContent-Length: 3\r\n\r\n")
    assert head.count(b"Content-Length") == 1
    bad = httpx.Request("GET", "http://h/p")
    bad.headers["X-B"] = "ok"
    bad.headers._list.append((b"x-c", b"x-c", b"v\r\nInjected: 1"))  # past httpx's own checks
    with pytest.raises(httpx.LocalProtocolError):
        _head(bad, b"")


# -- what an independent review found: answers that could be read two ways -------------------


async def test_bytes_sent_on_an_idle_connection_are_not_taken_for_the_next_answer() -> None:
    """A server that answers, then (idle) sends a 408 and closes: the next request must not get
    that 408, it goes out on a new connection and gets its own answer."""
    late = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    async with serving([ok(b"1"), ok(b"2")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"1"
        server.writers[0].write(late)
        await until(lambda: any(_buffered(conn.reader) for conn in idle_connections(c)))
        resp = await c.post("/", json={})
        assert (resp.status_code, resp.content) == (200, b"2")
    assert server.connections == 2 and len(server.requests) == 2


async def test_bytes_past_the_framed_answer_keep_the_connection_out_of_the_pool() -> None:
    async with (
        serving([ok(b"1") + b"HTTP/1.1 200 OK\r\n", ok(b"2")]) as server,
        client(server) as c,
    ):
        assert (await c.get("/")).content == b"1"
        assert (await c.get("/")).content == b"2"
    assert server.connections == 2


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",  # past int()'s limit
        b"HTTP/1.1 099 OK\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\nContent-Length: 2\r\n\r\nabcde",
        b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nab\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n"
        + b"a" * 16
        + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 17 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"X: y\r\n" * 20_000,
    ],
)
async def test_answers_that_could_be_read_two_ways_are_refused(raw: bytes) -> None:
    async with serving([raw]) as server, client(server) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            async with asyncio.timeout(5):
                await c.get("/")


async def test_both_framings_are_read_by_chunks_and_not_reused() -> None:
    both = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    async with serving([both, ok(b"next")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"ok"
        assert (await c.get("/")).content == b"next"
    assert server.connections == 2


async def test_a_reset_after_part_of_an_answer_is_not_retried() -> None:
    """The docstring's promise: a request is sent again only when not a byte came back."""

    def reset_mid_status(request: bytes) -> bytes | None:
        w = server.writers[-1]
        w.write(b"HTTP/1.1 2")
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()  # an RST, after those bytes
        return None

    async with serving([ok(b"1"), reset_mid_status, ok(b"never")]) as server, client(server) as c:
        assert (await c.get("/")).content == b"1"
        with pytest.raises(httpx.TransportError):
            await c.get("/")
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("method", "header"),
    [
        ("GET / HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET", None),
        ("GËT", None),
        ("GET", (b"X Bad", b"v")),
        ("GET", (b"x-ok", b"a\x00b")),
        ("GET", (b"x-ok", b" padded")),
    ],
)
def test_what_would_not_go_on_the_wire_as_written_is_refused(
    method: str, header: tuple[bytes, bytes] | None
) -> None:
    request = httpx.Request("GET", "http://h/p")
    request.method = method
    if header is not None:
        request.headers._list.append((header[0], header[0].lower(), header[1]))
    with pytest.raises(httpx.LocalProtocolError):
        _head(request, b"")


async def test_an_undecodable_body_is_a_protocol_error_at_the_host_edge() -> None:
    gz = ok(b"not gzip", "Content-Encoding: gzip")
    async with serving([gz]) as server, HostTransport(server.url, timeout=5) as t:
        with pytest.raises(HostProtocolError):
            await t._send("GET", "/x")


async def test_a_loopback_host_is_asked_for_answers_as_they_are() -> None:
    """opencode gzips its larger answers; on loopback compressing costs both sides CPU for
    nothing, so memoryd asks for ``identity`` there (and leaves a remote host's default)."""
    async with serving([ok(b"1")]) as server, HostTransport(server.url, timeout=5) as t:
        await t._send("GET", "/x")
    head = server.requests[0].lower()
    assert b"\r\naccept-encoding: identity\r\n" in head
    remote = HostTransport("http://opencode.example:4096")
    try:
        assert remote.headers["accept-encoding"] != "identity"
    finally:
        await remote.aclose()


# --- what a process posing as opencode could use to exhaust memory (a second review) -----------


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 10,  # refused before reading
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"200\r\n"
        + b"x" * 512
        + b"\r\n"
        + b"200\r\n"
        + b"x" * 512
        + b"\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 3000,
    ],
)
async def test_an_answer_past_the_body_cap_is_refused_and_not_retried(
    raw: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memoryd.host.http1.HOST_MAX_ANSWER_BYTES", 1000)
    async with (
        serving([raw, ok(), ok(), None]) as server,
        HostTransport(server.url, timeout=5) as t,
    ):
        with pytest.raises(HostProtocolError, match="larger than 1000 bytes"):
            await t._send("GET", "/x")
    assert len(server.requests) == 1  # a protocol error, not a fault a retry mends


async def test_an_encoded_answer_to_a_request_for_none_is_refused() -> None:
    """A small gzip can inflate to gigabytes after every limit of the transport (httpx inflates
    the whole body at once): when memoryd asked for ``identity``, an encoded answer is refused."""
    bomb = ok(gzip.compress(b'{"a": 1}'), "Content-Encoding: gzip")
    async with serving([bomb]) as server, HostTransport(server.url, timeout=5) as t:
        with pytest.raises(HostProtocolError, match="asked for none"):
            await t._send("GET", "/x")


async def test_interim_answers_without_end_are_refused() -> None:
    endless = b"HTTP/1.1 100 Continue\r\n\r\n" * 40 + ok()
    async with serving([endless]) as server, client(server) as c:
        with pytest.raises(httpx.RemoteProtocolError, match="interim"):
            await c.get("/")


async def test_a_discarded_connection_does_not_wait_to_send_what_is_buffered() -> None:
    """A connection with bytes still unsent (a server that stopped reading) is not usable, and
    closing it aborts: a close would wait for a flush that never comes."""
    accepted: list[asyncio.StreamWriter] = []

    async def never_reads(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(w)
        await asyncio.sleep(3600)

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    srv = await asyncio.start_server(never_reads, sock=listener)
    try:
        conn = await PlainHTTP1._connect(listener.getsockname(), 5)
        conn.writer.write(b"x" * 8_000_000)  # more than the kernel buffers take
        assert conn.writer.transport.get_write_buffer_size() > 0
        assert not conn.usable()
        conn.close()
        await asyncio.wait_for(conn.writer.wait_closed(), 5)
    finally:
        for w in accepted:
            w.transport.abort()
        srv.close()


async def test_a_body_nested_past_the_parser_depth_is_a_protocol_error() -> None:
    deep = b"[" * 200_000
    replies: list[Reply] = [ok(deep), ok(deep).replace(b"200 OK", b"500 Oops")]
    async with serving(replies) as server, HostTransport(server.url, timeout=5) as t:
        resp = await t._send("GET", "/x")
        with pytest.raises(HostProtocolError, match="not JSON"):
            t._json(resp, "GET /x")
        with pytest.raises(HostError):  # the error body is read as no body, not a crash
            await t._send("POST", "/y")


def test_a_short_detail_reads_only_the_first_words_of_a_body() -> None:
    import tracemalloc

    from memoryd.host.transport import short_text

    body = "word " * 1_000_000  # 5 MB of short words: split whole, ~60 MB of strings
    tracemalloc.start()
    try:
        text = short_text(body, 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == "word word word word…"
    assert peak < 1_000_000, peak
    assert short_text("  a \n b  ") == "a b"
