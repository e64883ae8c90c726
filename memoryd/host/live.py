"""The opencode server a user's session runs on, and one small GET against it.

Two processes need to read a live session without the full host client: ``memoryd tool``, which
the shim starts once per model tool call (its start-up is the call's latency, and httpx with
pydantic would add ~60 ms to every call), and the MCP server's note tool. Both only ever ask for
a little JSON, so this is the standard library's ``http.client`` (~9 ms to import) with a short
timeout, a size cap, and the same error tree as :mod:`memoryd.host` (:class:`HostError`).

Where the server is: the shim passes the URL its own instance reported (``--server``), whose
credentials are in the environment opencode gave the tool process; otherwise the server the shim
recorded when it loaded (URL, pid, credentials in a 0600 file) while its process lives.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from memoryd.errors import (
    HostAuthError,
    HostHTTPError,
    HostNotFound,
    HostProtocolError,
    HostTimeout,
    HostUnreachable,
    PathError,
)
from memoryd.fsutil import pid_alive, read_regular
from memoryd.paths import Paths

log = logging.getLogger(__name__)

DEFAULT_USERNAME = "opencode"
PASSWORD_ENV = "OPENCODE_SERVER_PASSWORD"
USERNAME_ENV = "OPENCODE_SERVER_USERNAME"


@dataclass(frozen=True)
class LiveServer:
    url: str
    username: str = DEFAULT_USERNAME
    password: str | None = None


def recorded_server(paths: Paths) -> tuple[str, str, str | None] | None:
    """The server the shim recorded, if its process is still alive: (url, username, password)."""
    try:
        raw = read_regular(paths.server_state)
    except PathError as exc:  # a planted link or FIFO is ignored, not followed
        log.warning("ignoring %s: %s", paths.server_state, exc.problem)
        return None
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        url, pid = str(data["url"]).rstrip("/"), int(data["pid"])
    except (ValueError, KeyError, TypeError):
        log.warning("%s is not readable; ignoring it", paths.server_state)
        return None
    if not url.startswith(("http://", "https://")) or not pid_alive(pid):
        return None
    password = data.get("password")
    return (
        url,
        str(data.get("username") or DEFAULT_USERNAME),
        password if isinstance(password, str) else None,
    )


def find_server(paths: Paths, url: str | None = None) -> LiveServer | None:
    """The server to ask: ``url`` (the shim's own instance) with the environment's credentials,
    else the recorded one; ``None`` when there is neither."""
    if url and url.startswith(("http://", "https://")):
        return LiveServer(
            url.rstrip("/"),
            os.environ.get(USERNAME_ENV) or DEFAULT_USERNAME,
            os.environ.get(PASSWORD_ENV) or None,
        )
    recorded = recorded_server(paths)
    return None if recorded is None else LiveServer(*recorded)


def get_json(
    server: LiveServer,
    path: str,
    params: dict[str, str | int] | None = None,
    *,
    timeout: float,
    max_bytes: int,
) -> Any:
    """``GET path`` and its JSON body; every failure is a :class:`HostError`."""
    import base64
    import http.client
    from urllib.parse import urlencode, urlsplit

    what = f"GET {path}"
    parts = urlsplit(server.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HostUnreachable(server.url, "not an http(s) URL")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    target = parts.path.rstrip("/") + path + (f"?{urlencode(params)}" if params else "")
    headers = {"Accept": "application/json"}
    if server.password is not None:
        pair = f"{server.username}:{server.password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", target, headers=headers)
        resp = conn.getresponse()
        body = resp.read(max_bytes + 1)
    except TimeoutError as exc:
        raise HostTimeout(what, timeout) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise HostUnreachable(server.url, str(exc) or type(exc).__name__) from exc
    finally:
        conn.close()
    if resp.status in (401, 403):
        raise HostAuthError(server.url, resp.status)
    if resp.status == 404:
        raise HostNotFound(what, 404, None, None)
    if resp.status != 200:
        raise HostHTTPError(what, resp.status, None, None)
    if len(body) > max_bytes:
        raise HostProtocolError(what, f"answer over {max_bytes} bytes")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise HostProtocolError(what, "not JSON") from exc
