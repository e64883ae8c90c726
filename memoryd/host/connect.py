"""Finding the opencode server to talk to.

Order: a URL in the settings (``[host] url`` / ``MEMORYD_HOST_URL``) wins; then a live server
that memoryd's opencode shim recorded when it loaded (URL, pid and, when the server has one, its
password, in a 0600 file in memoryd's state folder); otherwise, when ``[host] start_server``
allows it, memoryd starts a private ``opencode serve`` on loopback with a random password for the
duration of the work and stops it afterwards. Either way the server is
asked for its version first, so an unreachable host or a wrong password fails fast with one
clear message instead of surfacing later as a failed job.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from memoryd.errors import HostError, HostUnreachable, PathError
from memoryd.fsutil import pid_alive, read_regular
from memoryd.host.opencode import OpencodeClient
from memoryd.host.server import PrivateServer, reap_orphaned_servers
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.tuning import PRIVATE_SERVER_STOP_TIMEOUT_S

log = logging.getLogger(__name__)


@dataclass
class HostConnection:
    client: OpencodeClient
    url: str
    version: str
    private: bool


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
        str(data.get("username") or "opencode"),
        password if isinstance(password, str) else None,
    )


async def _probe(url: str, username: str, password: str | None) -> bool:
    try:
        async with OpencodeClient(url, username=username, password=password, timeout=5.0) as client:
            await client.health(timeout=3.0)
        return True
    except HostError as exc:
        log.info("recorded opencode server at %s did not answer (%s); not using it", url, exc)
        return False


@asynccontextmanager
async def open_host(settings: Settings, paths: Paths) -> AsyncIterator[HostConnection]:
    host = settings.host
    server: PrivateServer | None = None
    # First stop any opencode a killed memoryd started: the shim inside it recorded it as "the
    # live server", and it would otherwise be used (and kept alive) forever.
    await asyncio.to_thread(reap_orphaned_servers, paths.private_servers)
    recorded = None if host.url else recorded_server(paths)
    if recorded is not None:
        password = recorded[2] or host.resolved_password()
        recorded = (
            (recorded[0], recorded[1], password)
            if await _probe(recorded[0], recorded[1], password)
            else None
        )
    if host.url:
        url, username, password = host.url, host.username, host.resolved_password()
    elif recorded is not None:
        url, username, password = recorded
    elif host.start_server:
        paths.ensure_dir(paths.helper_dir)
        paths.ensure_dir(paths.logs)
        server = PrivateServer(
            host.opencode_bin,
            cwd=paths.helper_dir,
            log_file=paths.logs / "opencode-serve.log",
            record_dir=paths.private_servers,
        )
        handle = await server.__aenter__()
        url, username, password = handle.url, handle.username, handle.password
    else:
        raise HostUnreachable(
            "",
            "no [host] url is configured, no running opencode was recorded, "
            "and [host] start_server is false",
        )
    try:
        async with OpencodeClient(
            url, username=username, password=password, timeout=host.request_timeout_s
        ) as client:
            version = await client.health()
            log.info("using opencode %s at %s%s", version, url, " (private)" if server else "")
            yield HostConnection(
                client=client, url=url, version=version, private=server is not None
            )
    finally:
        if server is not None:
            # bounded so a daemon shutdown stays within its budget (opencode stops in well under 1 s)
            await asyncio.to_thread(server.stop, PRIVATE_SERVER_STOP_TIMEOUT_S)
