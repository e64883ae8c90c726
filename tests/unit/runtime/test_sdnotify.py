from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest

from memoryd.runtime.sdnotify import notify


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket bound in tmp_path, like the one systemd hands over in NOTIFY_SOCKET."""
    path = str(tmp_path / "notify.sock")
    if len(path.encode()) >= 104:  # sun_path limit (108 on Linux, 104 on macOS)
        pytest.skip(f"tmp_path too long for a unix socket: {path}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2)
    yield sock, path
    sock.close()


def test_sends_the_exact_bytes_to_a_path_socket(receiver: tuple[socket.socket, str]) -> None:
    sock, path = receiver
    assert notify("READY=1", environ={"NOTIFY_SOCKET": path}) is True
    assert sock.recv(4096) == b"READY=1"
    assert notify("STATUS=pass 3: 2 extracted\nWATCHDOG=1", environ={"NOTIFY_SOCKET": path}) is True
    assert sock.recv(4096) == b"STATUS=pass 3: 2 extracted\nWATCHDOG=1"


def test_reads_notify_socket_from_the_process_environment(
    receiver: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, path = receiver
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    assert notify("STOPPING=1") is True
    assert sock.recv(4096) == b"STOPPING=1"


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="abstract unix sockets are Linux-only"
)
def test_abstract_socket_from_at_prefix() -> None:
    name = f"memoryd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        assert notify("READY=1", environ={"NOTIFY_SOCKET": "@" + name}) is True
        assert sock.recv(4096) == b"READY=1"


def test_unset_or_empty_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False
    assert notify("READY=1", environ={}) is False
    assert notify("READY=1", environ={"NOTIFY_SOCKET": ""}) is False


@pytest.mark.parametrize(
    "address",
    [
        "/nonexistent/memoryd/notify.sock",  # no such socket
        "relative/notify.sock",  # not a form systemd uses
        "@",  # abstract with no name
        "vsock:2:1234",  # a form we do not support
        "/tmp/with\0nul",  # embedded NUL: ValueError inside socket code
        "/" + "x" * 200,  # longer than sun_path
    ],
)
def test_bad_address_returns_false_without_raising(address: str) -> None:
    assert notify("READY=1", environ={"NOTIFY_SOCKET": address}) is False


def test_nothing_to_send_returns_false(receiver: tuple[socket.socket, str]) -> None:
    _, path = receiver
    assert notify("", environ={"NOTIFY_SOCKET": path}) is False


def test_a_failing_socket_call_is_contained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """gunicorn's bug: socket() raising must not lead to touching an unbound name."""

    def boom(*args: object, **kwargs: object) -> socket.socket:
        raise OSError(97, "Address family not supported")

    monkeypatch.setattr(socket, "socket", boom)
    assert notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "s")}) is False


def test_socket_is_closed_when_sending_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[FakeSocket] = []

    class FakeSocket:
        def __init__(self, *args: object) -> None:
            self.closed = False
            made.append(self)

        def __enter__(self) -> Self:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

        def settimeout(self, value: float) -> None:
            pass

        def sendto(self, data: bytes, address: str) -> int:
            raise ConnectionRefusedError(111, "Connection refused")

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(socket, "socket", FakeSocket)
    assert notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "s")}) is False
    assert len(made) == 1 and made[0].closed


def test_socket_is_closed_after_a_successful_send(
    receiver: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.socket
    made: list[socket.socket] = []

    def tracking(*args: object) -> socket.socket:
        s = real(*args)  # type: ignore[arg-type]
        made.append(s)
        return s

    monkeypatch.setattr(socket, "socket", tracking)
    sock, path = receiver
    assert notify("READY=1", environ={"NOTIFY_SOCKET": path}) is True
    assert made and made[0].fileno() == -1  # closed
    assert sock.recv(64) == b"READY=1"
