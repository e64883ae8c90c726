"""Serving the UI with uvicorn on 127.0.0.1 only, for ``memoryd ui`` and for the daemon.

The socket is bound here before uvicorn starts, so a port of 0 (tests) is resolved first and the
Host allow-list and printed URL name the real port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import webbrowser
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from memoryd.errors import UIError
from memoryd.fsutil import atomic_write
from memoryd.paths import Paths
from memoryd.store.home import App
from memoryd.web.app import create_app
from memoryd.web.security import Secrets

log = logging.getLogger(__name__)

BIND = "127.0.0.1"


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the command or the daemon owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class UIServer:
    server: uvicorn.Server
    sock: socket.socket
    keys: Secrets

    @property
    def url(self) -> str:
        """The address to open, with the access token (printed once, never logged)."""
        return self.keys.url()

    async def serve(self) -> None:
        await self.server.serve(sockets=[self.sock])

    def stop(self) -> None:
        self.server.should_exit = True


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((BIND, port))
    except OSError as exc:
        sock.close()
        raise UIError(f"cannot listen on {BIND}:{port} ({exc.strerror or exc})") from exc
    sock.listen(64)
    sock.setblocking(False)
    return sock


def make_server(app: App, port: int) -> UIServer:
    sock = bind(port)
    keys = Secrets(port=sock.getsockname()[1])
    config = uvicorn.Config(
        create_app(app, keys),
        lifespan="off",
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        ws="none",
    )
    server = _Server(config)
    return UIServer(server, sock, keys)


def write_url_file(paths: Paths, url: str) -> Path:
    """Where the daemon leaves its UI's URL: the token is a secret, so the file is mode 0600."""
    target = paths.ui_url_file
    paths.ensure_dir(target.parent)
    atomic_write(target, url + "\n", mode=0o600)
    return target


async def run_ui(app: App, port: int, *, open_browser: bool) -> None:
    """``memoryd ui``: print the URL, open it, serve until interrupted."""
    ui = make_server(app, port)
    print(ui.url, flush=True)
    task = asyncio.create_task(ui.serve())
    if open_browser:
        await asyncio.sleep(0.3)
        await asyncio.to_thread(webbrowser.open, ui.url)
    try:
        await task
    finally:
        ui.sock.close()
