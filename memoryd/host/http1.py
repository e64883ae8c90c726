"""Plain HTTP/1.1 under the httpx client, for the opencode server on a loopback ``http://`` URL.

Why it exists: httpx's own transport (httpcore over anyio) costs about 1 ms of CPU per request
(1.4 ms with eight in flight) and about 40 ms of imports at start, and a pass makes about six
requests per extracted session. opencode answers plain HTTP/1.1 on 127.0.0.1; spoken directly over asyncio streams, a
whole request through the httpx client costs about 0.35 ms. The httpx client on top (requests,
responses, auth, the error types :mod:`memoryd.host.transport` maps) is unchanged, and
``https://`` URLs keep httpx's transport (TLS, proxies).

What it does: one keep-alive pool per host and port; bodies framed by ``Content-Length``, by
chunks or by the connection's close (RFC 9112 section 6); interim 1xx answers skipped. A reused
connection the server had closed while idle (or sent anything on) is noticed before use, and when
the server drops one before answering a byte, an idempotent request is sent once more on a new
connection. What could be read two ways (a bare LF or NUL in the head, both framings, bytes past
the answer) is refused or not reused. What a process posing as opencode could use to exhaust
memory is bounded: an answer's body (:data:`~memoryd.tuning.HOST_MAX_ANSWER_BYTES`), its head,
its trailers and its interim answers; and an answer encoded when the request asked for none (a
small gzip that inflates to gigabytes) is refused. Deadlines are the caller's: the connect timeout the request
carries is kept, the read and write ones are not (:class:`~memoryd.host.transport.HostTransport`,
its only user, bounds each whole exchange).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import httpx

from memoryd.errors import HostProtocolError
from memoryd.tuning import HOST_MAX_ANSWER_BYTES

IDEMPOTENT = frozenset({"GET", "HEAD", "DELETE", "OPTIONS", "PUT"})
HEAD_LIMIT = 64 * 1024  # status line and headers; a longer head is refused
TRAILER_LIMIT = 64 * 1024  # trailer fields after the last chunk, all together
INTERIM_LIMIT = 16  # 1xx answers before the final one
_PIECE = 64 * 1024  # a close-delimited body is read this much at a time
_BODYLESS = frozenset({204, 304})
_CRLF = b"\r\n"
_TOKEN_RE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # a method or a field name (RFC 9110)
_CHUNK_SIZE_RE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;.*)?")
_LENGTH_RE = re.compile(rb"[0-9]{1,15}")


def _buffered(reader: asyncio.StreamReader) -> int:
    """Bytes received and not read yet. The stream API cannot say; its buffer can (CPython
    3.11 to 3.13 keep it as ``_buffer``). Where it is not, nothing is taken as waiting."""
    return len(getattr(reader, "_buffer", b""))


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        """Idle, still open and silent: the server closes idle connections after a while, and
        bytes it sent meanwhile (a 408 before closing) would be read as the next answer."""
        return not (
            self.reader.at_eof()
            or self.writer.is_closing()
            or _buffered(self.reader)
            or self.writer.transport.get_write_buffer_size()  # part of a request still unsent
        )

    def close(self) -> None:
        # abort, not close: close waits to send what is still buffered, forever if the server
        # stopped reading (a discarded connection must not hold its socket and request)
        self.writer.transport.abort()


def _head(request: httpx.Request, body: bytes) -> bytes:
    """Request line and headers; the body's length is always stated (never chunked)."""
    target = request.url.raw_path
    method = request.method.encode("ascii", "replace")
    if not _TOKEN_RE.fullmatch(method):
        raise httpx.LocalProtocolError(f"cannot send method {request.method!r}")
    if not target.startswith(b"/") or any(c in target for c in b" \r\n\t\x00"):
        raise httpx.LocalProtocolError(f"cannot send request target {target!r}")
    lines = [method + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            continue
        if (
            not _TOKEN_RE.fullmatch(name)
            or any(c in value for c in b"\r\n\x00")
            or value != value.strip(b" \t")
        ):
            raise httpx.LocalProtocolError(f"header {name!r} cannot be sent")
        lines.append(name + b": " + value)
    if body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: " + str(len(body)).encode("ascii"))
    return _CRLF.join(lines) + _CRLF + _CRLF


def _status_line(line: bytes) -> tuple[bytes, int, bytes]:
    parts = line.split(b" ", 2)
    version = parts[0]
    code = parts[1] if len(parts) > 1 else b""
    if (
        version not in (b"HTTP/1.0", b"HTTP/1.1")
        or len(code) != 3
        or not code.isdigit()
        or code < b"100"
        or any(c in line for c in b"\n\x00")
    ):
        raise httpx.RemoteProtocolError(f"malformed status line {line[:80]!r}")
    return version, int(code), parts[2] if len(parts) > 2 else b""


def _header_lines(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    headers = []
    for line in lines:
        name, sep, value = line.partition(b":")
        # a bare LF or a NUL inside a line could hide a field from this reading: refused
        if not sep or not _TOKEN_RE.fullmatch(name) or any(c in value for c in b"\r\n\x00"):
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name, value.strip(b" \t")))
    return headers


def _field(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [v for k, v in headers if k.lower() == name]


def _content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    values = {
        v.strip() for joined in _field(headers, b"content-length") for v in joined.split(b",")
    }
    if not values:
        return None
    if len(values) != 1 or not _LENGTH_RE.fullmatch(next(iter(values))):
        raise httpx.RemoteProtocolError(f"bad Content-Length {sorted(values)[:3]!r:.80}")
    return int(next(iter(values)))


def _tokens(headers: list[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [t.strip().lower() for v in _field(headers, name) for t in v.split(b",") if t.strip()]


async def _read_head(reader: asyncio.StreamReader, *, first: bool) -> bytes | None:
    """The next answer's head; None when the server closed before a byte of the first one."""
    try:
        return await reader.readuntil(_CRLF + _CRLF)
    except asyncio.IncompleteReadError as exc:
        if first and not exc.partial:
            return None
        raise httpx.RemoteProtocolError("the server closed the connection mid-answer") from exc
    except asyncio.LimitOverrunError as exc:
        raise httpx.RemoteProtocolError(f"answer head longer than {HEAD_LIMIT} bytes") from exc


def _room(held: int, more: int, what: str) -> None:
    """Refuse a body past :data:`~memoryd.tuning.HOST_MAX_ANSWER_BYTES` as the host's protocol
    error itself (an httpx error would be taken for a fault of the moment, and the answer
    downloaded again)."""
    if held + more > HOST_MAX_ANSWER_BYTES:
        raise HostProtocolError(what, f"answer body larger than {HOST_MAX_ANSWER_BYTES} bytes")


async def _chunked(reader: asyncio.StreamReader, what: str) -> bytes:
    body = bytearray()  # one buffer: a million tiny chunks must not be a million objects
    while True:
        line = await reader.readuntil(_CRLF)
        size = _CHUNK_SIZE_RE.fullmatch(line[:-2])
        if size is None:
            raise httpx.RemoteProtocolError(f"bad chunk size line {line[:40]!r}")
        if int(size.group(1), 16) == 0:
            held = 0  # trailer fields: not used, and not read without end
            while (trailer := await reader.readuntil(_CRLF)) != _CRLF:
                held += len(trailer)
                if held > TRAILER_LIMIT:
                    raise httpx.RemoteProtocolError(f"trailer longer than {TRAILER_LIMIT} bytes")
            return bytes(body)
        n = int(size.group(1), 16)
        _room(len(body), n, what)
        body += await reader.readexactly(n)
        if await reader.readexactly(2) != _CRLF:
            raise httpx.RemoteProtocolError("chunk not followed by CRLF")


async def _until_close(reader: asyncio.StreamReader, what: str) -> bytes:
    body = bytearray()
    while piece := await reader.read(_PIECE):
        _room(len(body), len(piece), what)
        body += piece
    return bytes(body)


def _refused_coding(headers: list[tuple[bytes, bytes]], identity_only: bool) -> bool:
    """Whether the answer is encoded though the request asked for it plain (httpx would
    inflate it whole, after any limit here)."""
    return identity_only and any(t != b"identity" for t in _tokens(headers, b"content-encoding"))


async def _exchange(
    conn: _Connection, data: bytes, method: str, what: str, identity_only: bool = False
) -> tuple[httpx.Response, bool] | None:
    """Send one request and read its whole answer; also whether the connection may be reused.
    None when the server closed or reset the connection before a byte of the answer."""
    reader = conn.reader
    try:
        conn.writer.write(data)
        await conn.writer.drain()
    except OSError:  # a reset or a broken pipe: nothing came back
        return None
    first = True
    for _ in range(INTERIM_LIMIT + 1):
        try:
            head = await _read_head(reader, first=first)
        except ConnectionError:
            if first and not _buffered(reader):  # reset before a byte of the answer
                return None
            raise
        if head is None:
            return None
        first = False
        lines = head[:-4].split(_CRLF)
        version, status, reason = _status_line(lines[0])
        headers = _header_lines(lines[1:])
        if not (100 <= status < 200) or status == 101:
            break
    else:
        raise httpx.RemoteProtocolError(f"more than {INTERIM_LIMIT} interim answers")
    keep = (
        version == b"HTTP/1.1" and status != 101 and b"close" not in _tokens(headers, b"connection")
    )
    if _refused_coding(headers, identity_only):
        raise httpx.DecodingError("an encoded answer to a request that asked for none")
    codings = _tokens(headers, b"transfer-encoding")
    if codings and _field(headers, b"content-length"):
        keep = False  # both framings named: an error in the making (RFC 9112 6.3), not reused
    try:
        if method == "HEAD" or status in _BODYLESS or status < 200:
            body = b""
        elif codings and codings[-1] == b"chunked":
            body = await _chunked(reader, what)
        elif codings or (length := _content_length(headers)) is None:
            body, keep = await _until_close(reader, what), False  # delimited by the close
        else:
            _room(0, length, what)
            body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise httpx.RemoteProtocolError("the server closed the connection mid-body") from exc
    except asyncio.LimitOverrunError as exc:
        raise httpx.RemoteProtocolError("a chunk or trailer line longer than the limit") from exc
    if _buffered(reader):
        keep = False  # bytes past the framed answer: the connection's state is unknown
    extensions: dict[str, Any] = {"http_version": version, "reason_phrase": reason}
    response = httpx.Response(
        status, headers=headers, stream=httpx.ByteStream(body), extensions=extensions
    )
    return response, keep


class PlainHTTP1(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams with a keep-alive pool; plain ``http://`` only."""

    def __init__(self, *, max_idle: int = 16) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._max_idle = max_idle
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"plain HTTP/1.1 only, not {url.scheme}://")
        key = (url.host, url.port or 80)
        body = await request.aread()
        data = _head(request, body) + body
        timeouts = request.extensions.get("timeout") or {}
        what = f"{request.method} {url.path}"
        identity_only = request.headers.get("accept-encoding", "").strip().lower() == "identity"
        conn = self._take(key)
        reused = conn is not None
        if conn is None:
            conn = await self._connect(key, timeouts.get("connect"))
        try:
            while (
                answer := await _exchange(conn, data, request.method, what, identity_only)
            ) is None:
                conn.close()
                if not (reused and request.method in IDEMPOTENT):
                    raise httpx.RemoteProtocolError(
                        "the server closed the connection without answering"
                    )
                # it had closed the idle connection as we sent: once more on a new one
                reused = False
                conn = await self._connect(key, timeouts.get("connect"))
            response, keep = answer
        except OSError as exc:
            conn.close()
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
        except BaseException:  # cancelled or failed mid-exchange: the stream's state is unknown
            conn.close()
            raise
        if keep and not self._closed and conn.usable():
            self._give(key, conn)
        else:
            conn.close()
        return response

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def _give(self, key: tuple[str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if len(idle) >= self._max_idle:
            conn.close()
        else:
            idle.append(conn)

    @staticmethod
    async def _connect(key: tuple[str, int], timeout: float | None) -> _Connection:
        host, port = key
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, limit=HEAD_LIMIT)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        self._closed = True
        idle = [c for conns in self._idle.values() for c in conns]
        self._idle.clear()
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()
