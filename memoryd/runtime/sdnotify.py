"""Tell systemd how the daemon is doing (``READY=1``, ``STOPPING=1``, ``STATUS=...``).

The unit memoryd installs is ``Type=notify``: systemd holds the start job open until the daemon
sends ``READY=1`` over the datagram socket named in ``NOTIFY_SOCKET``. Outside systemd that
variable is unset and :func:`notify` does nothing, so the daemon can call it unconditionally.

Stdlib only, and it never raises: a lost status message must not take the daemon down. The
socket is created inside the ``try`` and closed by its own ``with`` block, so a failing
``socket()`` call cannot lead to closing a socket that never existed (gunicorn's bug).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

ENV = "NOTIFY_SOCKET"
SEND_TIMEOUT = 2.0  # seconds; a full receive queue must not stall the daemon


def notify(state: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``state`` (newline-separated ``KEY=VALUE`` pairs) to the service manager.

    :returns: ``True`` if the datagram was sent; ``False`` when not running under a manager that
        asked for notifications, or when sending failed for any reason.
    """
    address = _address((os.environ if environ is None else environ).get(ENV, ""))
    if address is None or not state:
        return False
    family = getattr(socket, "AF_UNIX", None)
    if family is None:  # no unix sockets on this platform
        return False
    try:
        data = state.encode("utf-8")
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(SEND_TIMEOUT)
            sock.sendto(data, address)
        return True
    except (OSError, ValueError, TypeError):
        return False


def _address(raw: str) -> str | None:
    """Map ``NOTIFY_SOCKET`` to a socket address: ``@name`` is Linux's abstract namespace.

    Other forms systemd knows (``vsock:``) are not supported and yield ``None``.
    """
    if raw.startswith("@") and len(raw) > 1:
        return "\0" + raw[1:]
    if raw.startswith("/"):
        return raw
    return None
