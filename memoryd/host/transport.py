"""The HTTP layer under :class:`~memoryd.host.opencode.OpencodeClient`: one pool, deadlines, and
every ``httpx`` failure mapped once to the :class:`~memoryd.errors.HostError` tree.

Split from the client so the routes read apart from the transport rules: a connection opened
before opencode prints "listening" is accepted but never answered (pitfall 1 in
``opencode-host.md``), so every call has a deadline; only idempotent requests (GET, DELETE) are
retried after a transient fault, with the bounded delays of :data:`memoryd.tuning.HOST_RETRY_DELAYS_S`.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import re
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from memoryd import tuning
from memoryd.errors import (
    HostAuthError,
    HostError,
    HostHTTPError,
    HostNotFound,
    HostProtocolError,
    HostTimeout,
    HostUnreachable,
    is_transient,
)
from memoryd.host.http1 import PlainHTTP1

log = logging.getLogger(__name__)

T = TypeVar("T")

DETAIL_CHARS = 200
_WORD_RE = re.compile(r"\S+")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def short_text(text: str, limit: int = DETAIL_CHARS) -> str:
    # its first words only: splitting a whole body of megabytes into words took gigabytes
    text = " ".join(m.group() for m in itertools.islice(_WORD_RE.finditer(text), limit))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """Pull ``name`` and ``data.message`` out of opencode's ``{"name", "data": {...}}`` shape."""
    if not isinstance(body, dict):
        return None, None
    raw_name = body.get("name")
    name = raw_name if isinstance(raw_name, str) else None
    data = body.get("data")
    message: Any = data.get("message") if isinstance(data, dict) else None
    if message is None:
        message = body.get("message")
    return name, (short_text(str(message)) if message is not None else None)


def validation_detail(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return short_text(str(exc))
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<root>"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return short_text(f"{loc}: {first['msg']}{more}")


def tls_verify(url: str) -> bool:
    """Certificate checks only where there is TLS: for plain ``http://`` (opencode's loopback
    default) httpx would still load the CA bundle, ~1 MB per client for nothing."""
    return url.startswith("https://")


class HostTransport:
    """One connection pool to one opencode server, and the single place its failures are mapped
    to the :class:`~memoryd.errors.HostError` tree (deadlines, retries of idempotent requests)."""

    def __init__(
        self,
        base_url: str,
        *,
        username: str = "opencode",
        password: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 60.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        if transport is None and self.base_url.startswith("http://"):
            transport = PlainHTTP1()  # opencode on loopback: a third of httpx's CPU per request
        headers = {"accept": "application/json"}
        if httpx.URL(self.base_url).host in LOOPBACK_HOSTS:
            # opencode gzips its larger answers (message lists): on loopback that is CPU spent
            # on both sides to save nothing
            headers["accept-encoding"] = "identity"
        # A transport of our choosing (plain HTTP/1.1, a test's) is asked directly: the client's
        # URL merging, cookie jar, auth and redirect flows cost twice what the transport does,
        # for nothing opencode uses. https:// keeps the whole client (TLS, proxies).
        self.transport = transport
        self._http: httpx.AsyncClient | None = None
        if transport is None:
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                auth=httpx.BasicAuth(username, password) if password is not None else None,
                timeout=self._timeout_for(timeout),
                headers=headers,
                follow_redirects=False,
                verify=tls_verify(self.base_url),
            )
            self.headers = self._http.headers
        else:
            self.headers = httpx.Headers(
                {
                    "accept-encoding": "gzip, deflate",
                    "connection": "keep-alive",
                    "user-agent": f"python-httpx/{httpx.__version__}",
                    **headers,
                }
            )
            if password is not None:
                pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
                self.headers["authorization"] = f"Basic {pair}"

    # ---------------------------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        elif self.transport is not None:
            await self.transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---------------------------------------------------------------------------------- transport

    @staticmethod
    def _timeout_for(seconds: float) -> httpx.Timeout:
        return httpx.Timeout(seconds, connect=min(seconds, 10.0))

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | int] | None = None,
        body: Any = None,
        timeout: float | None = None,
        what: str | None = None,
    ) -> httpx.Response:
        """:meth:`_send`, retried with a short bounded backoff when an idempotent request
        (``GET``, ``DELETE``) meets a transient host fault (refused, reset, 5xx, 429)."""
        delays = tuning.HOST_RETRY_DELAYS_S if method in ("GET", "DELETE") else ()
        for delay in delays:
            try:
                return await self._send(
                    method, path, params=params, body=body, timeout=timeout, what=what
                )
            except HostError as exc:
                if not is_transient(exc):
                    raise
                log.info("%s %s: %s; retrying in %.1f s", method, path, exc, delay)
                await asyncio.sleep(delay)
        return await self._send(method, path, params=params, body=body, timeout=timeout, what=what)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | int] | None = None,
        body: Any = None,
        timeout: float | None = None,
        what: str | None = None,
    ) -> httpx.Response:
        """Send one request and map every failure onto the HostError tree.

        Returns the response only when it is 2xx. ``timeout`` bounds the whole exchange (not
        just each socket read), so a slowly trickling answer cannot outlive it either.
        """
        seconds = self.timeout if timeout is None else timeout
        what = what or f"{method} {path}"
        try:
            async with asyncio.timeout(seconds):
                resp = await self._exchange(method, path, params, body, seconds)
        except (httpx.TimeoutException, TimeoutError) as exc:
            raise HostTimeout(what, seconds) from exc
        except httpx.DecodingError as exc:  # a body its Content-Encoding does not describe
            raise HostProtocolError(what, short_text(str(exc) or "undecodable body")) from exc
        except httpx.TransportError as exc:
            detail = short_text(str(exc) or type(exc).__name__)
            raise HostUnreachable(self.base_url, detail) from exc

        if resp.is_success:
            return resp
        status = resp.status_code
        if status in (401, 403):
            raise HostAuthError(self.base_url, status)
        try:
            err_body: Any = resp.json()
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            err_body = None
        name, message = _error_fields(err_body)
        if message is None and err_body is None and resp.text.strip():
            message = short_text(resp.text)
        if status == 404:
            raise HostNotFound(what, status, name, message)
        raise HostHTTPError(what, status, name, message)

    async def _exchange(
        self,
        method: str,
        path: str,
        params: dict[str, str | int] | None,
        body: Any,
        seconds: float,
    ) -> httpx.Response:
        timeout = self._timeout_for(seconds)
        if self._http is not None:
            return await self._http.request(method, path, params=params, json=body, timeout=timeout)
        assert self.transport is not None
        request = httpx.Request(
            method,
            self.base_url + path,
            params=params,
            json=body,
            headers=self.headers,
            extensions={"timeout": timeout.as_dict()},
        )
        resp = await self.transport.handle_async_request(request)
        resp.request = request
        try:
            await resp.aread()
        finally:
            await resp.aclose()
        return resp

    @staticmethod
    def _json(resp: httpx.Response, what: str) -> Any:
        try:
            return resp.json()
        except (ValueError, RecursionError) as exc:  # not JSON, or nested past the parser's depth
            head = short_text(resp.text, 80) if resp.text else "empty body"
            raise HostProtocolError(what, f"body is not JSON: {head!r}") from exc

    @classmethod
    def _parse(cls, resp: httpx.Response, adapter: TypeAdapter[T], what: str) -> T:
        data = cls._json(resp, what)
        try:
            return adapter.validate_python(data)
        except ValidationError as exc:
            raise HostProtocolError(what, validation_detail(exc)) from exc

    async def _get_json(
        self,
        path: str,
        adapter: TypeAdapter[T],
        *,
        params: dict[str, str | int] | None = None,
        timeout: float | None = None,
    ) -> T:
        what = f"GET {path}"
        resp = await self._request("GET", path, params=params, timeout=timeout, what=what)
        return self._parse(resp, adapter, what)
