"""Finding the opencode server to talk to.

Order: a URL in the settings (``[host] url`` / ``MEMORYD_HOST_URL``) wins; otherwise, when
``[host] start_server`` allows it, memoryd starts a private ``opencode serve`` on loopback with a
random password for the duration of the work and stops it afterwards. Either way the server is
asked for its version first, so an unreachable host or a wrong password fails fast with one
clear message instead of surfacing later as a failed job.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from memoryd.errors import HostUnreachable
from memoryd.host.opencode import OpencodeClient
from memoryd.host.server import PrivateServer
from memoryd.paths import Paths
from memoryd.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class HostConnection:
    client: OpencodeClient
    url: str
    version: str
    private: bool


@asynccontextmanager
async def open_host(settings: Settings, paths: Paths) -> AsyncIterator[HostConnection]:
    host = settings.host
    server: PrivateServer | None = None
    if host.url:
        url, username, password = host.url, host.username, host.resolved_password()
    elif host.start_server:
        paths.ensure_dir(paths.helper_dir)
        paths.ensure_dir(paths.logs)
        server = PrivateServer(host.opencode_bin, cwd=paths.helper_dir, log_file=paths.logs / "opencode-serve.log")
        handle = await server.__aenter__()
        url, username, password = handle.url, handle.username, handle.password
    else:
        raise HostUnreachable("(none)", "no [host] url is configured and start_server is false")
    try:
        async with OpencodeClient(url, username=username, password=password, timeout=host.request_timeout_s) as client:
            version = await client.health()
            log.info("using opencode %s at %s%s", version, url, " (private)" if server else "")
            yield HostConnection(client=client, url=url, version=version, private=server is not None)
    finally:
        if server is not None:
            await server.__aexit__(None, None, None)
