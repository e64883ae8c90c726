"""Finding the opencode server to talk to.

Order: a URL in the settings (``[host] url`` / ``MEMORYD_HOST_URL``) wins; then a live server
that memoryd's opencode shim recorded when it loaded (URL, pid and, when the server has one, its
password, in a 0600 file in memoryd's state folder); otherwise, when ``[host] start_server``
allows it, memoryd starts a private ``opencode serve`` on loopback with a random password for the
duration of the work and stops it afterwards; the caller works locally while it boots
(:class:`HostOpening`). Either way the server is
asked for its version first, so an unreachable host or a wrong password fails fast with one
clear message instead of surfacing later as a failed job.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from memoryd.errors import HostError, HostUnreachable
from memoryd.host.live import recorded_server
from memoryd.host.opencode import OpencodeClient
from memoryd.host.server import PrivateServer, ServerHandle, reap_orphaned_servers
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


async def _probe(url: str, username: str, password: str | None) -> bool:
    try:
        async with OpencodeClient(url, username=username, password=password, timeout=5.0) as client:
            await client.health(timeout=3.0)
        return True
    except HostError as exc:
        log.info("recorded opencode server at %s did not answer (%s); not using it", url, exc)
        return False


class HostOpening:
    """A host being opened: a private server may still be booting while the caller works.

    A pass has local work (citations, the memory folder's state, the read-path block) that needs
    nothing from opencode; doing it while a private ``opencode serve`` boots (1-3 s) takes it off
    the pass's wall time. :meth:`ready` waits for the server and checks it once.
    """

    def __init__(
        self,
        coords: tuple[str, str, str | None] | None,
        starting: asyncio.Future[ServerHandle] | None,
        request_timeout: float,
        stack: AsyncExitStack,
    ) -> None:
        self._coords = coords
        self._starting = starting
        self._timeout = request_timeout
        self._stack = stack
        self._conn: HostConnection | None = None

    async def ready(self) -> HostConnection:
        if self._conn is not None:
            return self._conn
        coords = self._coords
        if self._starting is not None:
            handle = await self._starting
            coords = (handle.url, handle.username, handle.password)
        assert coords is not None
        url, username, password = coords
        client = await self._stack.enter_async_context(
            OpencodeClient(url, username=username, password=password, timeout=self._timeout)
        )
        version = await client.health()
        private = self._starting is not None
        log.info("using opencode %s at %s%s", version, url, " (private)" if private else "")
        self._conn = HostConnection(client=client, url=url, version=version, private=private)
        return self._conn


@asynccontextmanager
async def open_host(settings: Settings, paths: Paths) -> AsyncIterator[HostOpening]:
    """Decide which opencode to use and, for a private one, start spawning it at once."""
    host = settings.host
    server: PrivateServer | None = None
    starting: asyncio.Future[ServerHandle] | None = None
    coords: tuple[str, str, str | None] | None = None
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
        coords = (host.url, host.username, host.resolved_password())
    elif recorded is not None:
        coords = recorded
    elif host.start_server:
        paths.ensure_dir(paths.helper_dir)
        paths.ensure_dir(paths.logs)
        server = PrivateServer(
            host.opencode_bin,
            cwd=paths.helper_dir,
            log_file=paths.logs / "opencode-serve.log",
            record_dir=paths.private_servers,
        )
        # Submitted to a worker thread now (a task would not run before the caller's local work),
        # and waited for until the process exists, so that work overlaps the whole boot.
        starting = asyncio.get_running_loop().run_in_executor(None, server.start)
    else:
        raise HostUnreachable(
            "",
            "no [host] url is configured, no running opencode was recorded, "
            "and [host] start_server is false",
        )
    try:
        if server is not None:  # inside the try: a pass cancelled while it spawns stops it too
            await asyncio.to_thread(server.spawned.wait)
        async with AsyncExitStack() as stack:
            yield HostOpening(coords, starting, host.request_timeout_s, stack)
    finally:
        if server is not None:
            # bounded so a daemon shutdown stays within its budget (opencode stops in well under
            # 1 s); a start still waiting in its thread sees the stop and gives up at once
            await asyncio.to_thread(server.stop, PRIVATE_SERVER_STOP_TIMEOUT_S)
        if starting is not None:
            await asyncio.gather(starting, return_exceptions=True)  # nobody else awaits a failure
