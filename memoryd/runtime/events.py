"""Following opencode's ``/global/event`` stream so idle and deleted sessions are handled in seconds.

The stream is a convenience, never a dependency: memoryd's passes also run on a timer, so when
the stream is down (server restarting, an old opencode, garbage on the wire) nothing is lost;
the follower reconnects with backoff and reports its state for ``memoryd status``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from memoryd.clock import Clock
from memoryd.host.transport import tls_verify
from memoryd.tuning import (
    EVENT_BACKOFF_MAX_S,
    EVENT_BACKOFF_START_S,
    EVENT_IDLE_TIMEOUT_S,
    EVENT_PROBE_TIMEOUT_S,
)

log = logging.getLogger(__name__)


@dataclass
class StreamState:
    state: str = "starting"  # starting | connected | down | unavailable
    since: int | None = None
    last_error: str | None = None
    events_seen: int = 0
    reconnects: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def session_event(payload: dict[str, Any]) -> tuple[str, str] | None:
    """("idle" | "deleted" | "compacted", session id) for the events memoryd acts on, else None."""
    kind = payload.get("type")
    raw = payload.get("properties")
    props: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if kind == "session.idle" or (
        kind == "session.status"
        and isinstance(props.get("status"), dict)
        and props["status"].get("type") == "idle"
    ):
        sid = props.get("sessionID")
        return ("idle", sid) if isinstance(sid, str) else None
    if kind == "session.compacted":
        sid = props.get("sessionID")
        return ("compacted", sid) if isinstance(sid, str) else None
    if kind == "session.deleted":
        raw_info = props.get("info")
        info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
        sid = info.get("id") or props.get("sessionID")
        return ("deleted", sid) if isinstance(sid, str) else None
    return None


class EventFollower:
    def __init__(
        self,
        url: str,
        *,
        username: str,
        password: str | None,
        on_event: Callable[[str, str], Awaitable[None]],
        clock: Clock,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.auth = httpx.BasicAuth(username, password) if password else None
        self.on_event = on_event
        self.clock = clock
        self.transport = transport
        self.state = StreamState()

    def _set(self, state: str, error: str | None = None) -> None:
        if state != self.state.state:
            self.state.since = self.clock.now_ms()
        self.state.state = state
        self.state.last_error = error

    async def run(self) -> None:
        backoff = EVENT_BACKOFF_START_S
        while True:
            try:
                await self._follow()
                backoff = EVENT_BACKOFF_START_S
                self._set("down", "stream ended")
            except asyncio.CancelledError:
                raise
            except (httpx.HTTPError, ValueError, OSError) as exc:
                self._set("down", f"{type(exc).__name__}: {exc}"[:300])
                log.info(
                    "event stream down (%s); retrying in %.0f s, polling meanwhile", exc, backoff
                )
            self.state.reconnects += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, EVENT_BACKOFF_MAX_S)

    async def _follow(self) -> None:
        timeout = httpx.Timeout(10.0, read=EVENT_IDLE_TIMEOUT_S)
        async with httpx.AsyncClient(
            auth=self.auth, timeout=timeout, transport=self.transport, verify=tls_verify(self.url)
        ) as client:
            # A server that is still starting accepts connections but never answers them; a short
            # health probe finds that out in seconds instead of a whole stream read timeout.
            probe = await client.get(f"{self.url}/global/health", timeout=EVENT_PROBE_TIMEOUT_S)
            if probe.status_code != 200:
                raise httpx.HTTPStatusError(
                    f"HTTP {probe.status_code}", request=probe.request, response=probe
                )
            async with client.stream("GET", f"{self.url}/global/event") as resp:
                if resp.status_code != 200:
                    raise httpx.HTTPStatusError(
                        f"HTTP {resp.status_code}", request=resp.request, response=resp
                    )
                self._set("connected")
                log.info("following opencode events at %s", self.url)
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    try:
                        envelope = json.loads(line[5:].strip())
                    except ValueError:
                        log.debug("ignoring a malformed event line")
                        continue
                    if not isinstance(envelope, dict):
                        continue
                    payload = envelope.get("payload", envelope)
                    if not isinstance(payload, dict):
                        continue
                    self.state.events_seen += 1
                    hit = session_event(payload)
                    if hit is not None:
                        try:
                            await self.on_event(*hit)
                        except Exception:  # e.g. the DB is busy: the timed pass catches up later
                            log.exception("handling %s for %s failed", *hit)
