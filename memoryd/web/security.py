"""The UI's gatekeeper: one ASGI middleware every request passes through before any page.

Why each check exists (the UI can change and delete memory, and any web page the user visits can
make their browser send requests to 127.0.0.1):

* **Host allow-list** — a DNS-rebinding page reaches us under its own host name; only
  ``127.0.0.1:<port>`` and ``localhost:<port>`` are served.
* **Access token** — random per start, printed once with the URL. The first visit brings it as
  ``?token=``; it is swapped for an ``HttpOnly; SameSite=Strict`` cookie and the token is dropped
  from the address bar by a redirect. Without the token (or cookie) nothing is served.
* **CSRF token** — every state-changing request (any method but GET/HEAD) must carry it as the
  ``csrf`` form field or the ``X-CSRF-Token`` header; a present ``Origin`` must be ours (or
  ``null``, which our own no-referrer pages send) and a present ``Sec-Fetch-Site`` must be
  ``same-origin``.
  The form body is read here, checked, and replayed to the app unchanged.
* **Headers** — a strict Content-Security-Policy (scripts and styles only from our own
  ``/static``, no inline script, no framing), ``nosniff``, ``no-referrer``, ``no-store``.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

from memoryd.tuning import UI_MAX_FORM_BYTES

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD"})
CSRF_FIELD = "csrf"
CSRF_HEADER = b"x-csrf-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


@dataclass(frozen=True)
class Secrets:
    """The per-start secrets of one UI server."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def cookie(self) -> str:
        # Cookies ignore ports; two UIs on one machine must not overwrite each other's.
        return f"memoryd_ui_{self.port}"

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"127.0.0.1:{self.port}", f"localhost:{self.port}"})

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{h}" for h in self.hosts)

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}?token={self.token}"


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _cookies(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in scope.get("headers") or []:
        if key == b"cookie":
            for part in bytes(value).decode("latin-1").split(";"):
                name, sep, val = part.strip().partition("=")
                if sep:
                    out.setdefault(name, val)
    return out


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Wraps the UI app; see the module docstring for what it refuses and why."""

    def __init__(self, app: ASGIApp, keys: Secrets) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # websockets are not part of the UI

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        keys = self.keys
        if _header(scope, b"host") not in keys.hosts:
            await _plain(send, 421, "memoryd ui: unknown Host header (refused)", [])
            return
        query = parse_qs(bytes(scope.get("query_string") or b"").decode("latin-1"))
        given = query.get("token", [None])[-1]
        if scope["method"] in SAFE_METHODS and _same(given, keys.token):
            rest = {k: v for k, v in query.items() if k != "token"}
            location = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
            cookie = f"{keys.cookie}={keys.token}; HttpOnly; SameSite=Strict; Path=/"
            await _plain(
                send,
                303,
                "signed in",
                [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
            )
            return
        if not _same(_cookies(scope).get(keys.cookie), keys.token):
            await _plain(
                send, 403, "memoryd ui: open the URL `memoryd ui` printed (with its token)", []
            )
            return
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send_secured)
            return
        # With no-referrer, browsers send "Origin: null" on our own form posts; Sec-Fetch-Site
        # still tells a cross-site request apart. The CSRF token below is the real check.
        origin = _header(scope, b"origin")
        site = _header(scope, b"sec-fetch-site")
        if (origin not in (None, "null") and origin not in keys.origins) or site not in (
            None,
            "same-origin",
        ):
            await _plain(send, 403, "memoryd ui: cross-origin request refused", [])
            return
        body = await _read_body(receive)
        if body is None:
            await _plain(send, 413, "memoryd ui: request body too large", [])
            return
        token = _header(scope, CSRF_HEADER)
        ctype = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if token is None and ctype == "application/x-www-form-urlencoded":
            token = parse_qs(body.decode("latin-1")).get(CSRF_FIELD, [None])[-1]
        if not _same(token, keys.csrf):
            await _plain(send, 403, "memoryd ui: missing or wrong CSRF token (refused)", [])
            return
        await self.app(scope, _replay(body, receive), send_secured)


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = bytes(message.get("body") or b"")
        size += len(chunk)
        if size > UI_MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes, upstream: Receive) -> Receive:
    """The body we already read, then whatever the server says next (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await upstream()

    return receive
