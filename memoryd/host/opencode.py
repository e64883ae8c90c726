"""Async client for the ``opencode serve`` HTTP API (observed against 1.18.33).

memoryd reads transcripts and runs its helper agents through this one class, so every
host-specific fact lives here: routes, paging headers, the error body shape, and the quirk that a
failed model call still answers HTTP 200 with ``info.error``. All failures come out as the
:class:`~memoryd.errors.HostError` tree, mapped in a single place (:meth:`OpencodeClient._request`),
so callers never see an ``httpx`` exception.

Every call has a deadline: a connection opened before opencode prints "listening" is accepted but
never answered (pitfall 1 in ``opencode-host.md``), so an unbounded request could hang forever.
Tests inject an ``httpx.MockTransport``; nothing else is faked.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from memoryd.errors import (
    ConfigError,
    HostError,
    HostNotFound,
    HostProtocolError,
    HostTimeout,
    HostUnreachable,
    ModelCallError,
)
from memoryd.host.models import Message, ProjectRef, PromptResult, Session
from memoryd.host.transport import (
    DETAIL_CHARS,
    HostTransport,
    short_text,
    validation_detail,
)
from memoryd.tuning import (
    HOST_ABORT_TIMEOUT_S,
    HOST_CONFIRM_TIMEOUT_S,
    HOST_DELETE_TIMEOUT_S,
    HOST_HEALTH_TIMEOUT_S,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

HELPER_TITLE_PREFIX = "memoryd-"
HELPER_METADATA_KEY = "memoryd"

NEXT_CURSOR_HEADER = "x-next-cursor"
_MAX_PAGES = 10_000

_MESSAGES = TypeAdapter(list[Message])
_SESSION = TypeAdapter(Session)
_PROMPT = TypeAdapter(PromptResult)
_DICT_LIST = TypeAdapter(list[dict[str, Any]])
_ANY_LIST = TypeAdapter(list[Any])
_STATUS = TypeAdapter(dict[str, dict[str, Any]])
_DICT = TypeAdapter(dict[str, Any])


def is_helper_session(s: Session) -> bool:
    """True for sessions memoryd created for its own helper agents (never mined for memories)."""
    if s.title.startswith(HELPER_TITLE_PREFIX):
        return True
    return bool(s.metadata) and HELPER_METADATA_KEY in (s.metadata or {})


def split_model(model: str) -> tuple[str, str]:
    """``"provider/model"`` -> ``(providerID, modelID)``; the model part may itself contain ``/``."""
    provider, sep, model_id = model.partition("/")
    if not sep or not provider.strip() or not model_id.strip():
        raise ConfigError(f"model must look like 'provider/model', got {model!r}", key="model")
    return provider.strip(), model_id.strip()


def _sid(session_id: str) -> str:
    """Quote an id for use as one path segment (ids are ``ses_…`` but never trust them)."""
    return quote(session_id, safe="")


# What phase 1 and the edit check read of a listed session; the rest of what opencode sends
# (tokens, cost, paths, summaries) stays out of memory.
_LISTED_KEYS = ("id", "title", "directory", "time", "parentID", "projectID", "metadata", "project")
_LISTED_TIME = ("created", "updated", "archived")
_LISTED_PROJECT = ("id", "name", "worktree")


def _listed_keys(item: Any) -> Any:
    if not isinstance(item, dict):
        return item  # validation says what is wrong with it
    out = {k: item[k] for k in _LISTED_KEYS if k in item}
    for key, keep in (("time", _LISTED_TIME), ("project", _LISTED_PROJECT)):
        value = out.get(key)
        if isinstance(value, dict):
            out[key] = {k: value[k] for k in keep if k in value}
    return out


class _Shared:
    """One copy of what the sessions of a listing repeat: a project's description, a folder,
    and pydantic's record of which fields were given (a set per model, ~0.7 KB for a session's;
    the same few sets serve every listed session, and adding a name already in one is nothing)."""

    def __init__(self) -> None:
        self.projects: dict[tuple[str, str | None, str | None], ProjectRef] = {}
        self.strings: dict[str, str] = {}
        self.given: dict[frozenset[str], set[str]] = {}

    def session(self, s: Session) -> Session:
        fields = s.__dict__  # the validated values, set in place (no validation to repeat)
        if s.project is not None:
            p = s.project
            fields["project"] = self.projects.setdefault((p.id, p.name, p.worktree), p)
        fields["directory"] = self.strings.setdefault(s.directory, s.directory)
        if s.projectID is not None:
            fields["projectID"] = self.strings.setdefault(s.projectID, s.projectID)
        for model in (s, s.time):
            given = model.__pydantic_fields_set__
            shared = self.given.setdefault(frozenset(given), given)
            object.__setattr__(model, "__pydantic_fields_set__", shared)
        return s


class OpencodeClient(HostTransport):
    """The routes memoryd uses, over one :class:`HostTransport`; cheap to keep for the daemon's
    lifetime."""

    # ---------------------------------------------------------------------------------- endpoints

    async def health(self, *, timeout: float = HOST_HEALTH_TIMEOUT_S) -> str:
        """``GET /global/health``; returns opencode's version string."""
        what = "GET /global/health"
        resp = await self._request("GET", "/global/health", timeout=timeout, what=what)
        data = self._json(resp, what)
        if not isinstance(data, dict) or not isinstance(data.get("version"), str):
            raise HostProtocolError(
                what, f"expected {{healthy, version}}, got {short_text(repr(data), 80)}"
            )
        if data.get("healthy") is False:
            raise HostUnreachable(self.base_url, "server reports healthy=false")
        return str(data["version"])

    async def list_sessions(
        self,
        *,
        roots: bool = True,
        archived: bool = False,
        page_size: int = 500,
        start_ms: int | None = None,
    ) -> list[Session]:
        """Every session of every project (``GET /experimental/session``), newest update first.

        Follows ``x-next-cursor`` until the server stops sending it. A cursor that repeats is a
        server bug; we stop there (logged) instead of looping forever.

        A pass holds every listed session at once (10,000 in a heavy user's year), so each keeps
        only the keys memoryd reads from a listing (not the token counts, costs, paths and diff
        summaries opencode adds), and the sessions of one project share its description and
        their folder's name: ~1 KB a session instead of ~3.
        """
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        path = "/experimental/session"
        base: dict[str, str | int] = {"roots": "true" if roots else "false", "limit": page_size}
        if archived:
            base["archived"] = "true"
        if start_ms is not None:
            base["start"] = start_ms

        out: list[Session] = []
        seen_ids: set[str] = set()
        seen_cursors: set[str] = set()
        shared = _Shared()
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = dict(base)
            if cursor is not None:
                params["cursor"] = cursor
            what = f"GET {path}"
            resp = await self._request("GET", path, params=params, what=what)
            for item in self._parse(resp, _ANY_LIST, what):
                # One odd session must not hide every other one from discovery: skip it, say so.
                try:
                    s = shared.session(_SESSION.validate_python(_listed_keys(item)))
                except ValidationError as exc:
                    log.warning(
                        "%s: skipping a session opencode described oddly (%s)",
                        what,
                        validation_detail(exc),
                    )
                    continue
                if s.id not in seen_ids:
                    seen_ids.add(s.id)
                    out.append(s)
            cursor = self._next_cursor(resp, seen_cursors, what)
            if cursor is None:
                return out
        log.warning("%s: gave up after %d pages; returning %d sessions", path, _MAX_PAGES, len(out))
        return out

    @staticmethod
    def _next_cursor(resp: httpx.Response, seen: set[str], what: str) -> str | None:
        cursor: str | None = resp.headers.get(NEXT_CURSOR_HEADER)
        if cursor is None or not cursor.strip():
            return None
        if cursor in seen:
            log.warning("%s: paging cursor %r did not move; stopping", what, short_text(cursor, 80))
            return None
        seen.add(cursor)
        return cursor

    async def get_session(self, session_id: str) -> Session:
        """``GET /session/{id}``; :class:`HostNotFound` when it does not exist."""
        return await self._get_json(f"/session/{_sid(session_id)}", _SESSION)

    async def messages(
        self,
        session_id: str,
        *,
        page_size: int = 200,
        directory: str | None = None,
        since_ms: int | None = None,
    ) -> list[Message]:
        """The whole transcript of a session, oldest message first.

        opencode pages backwards: the first page holds the newest ``limit`` messages (oldest-first
        inside the page) and ``x-next-cursor`` is passed back as ``before`` for older ones. With
        ``since_ms`` paging stops at the first page that reaches back before it (that page is
        kept whole), so reading the recent end of a long session costs one or two requests.
        """
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        path = f"/session/{_sid(session_id)}/message"
        what = f"GET {path}"
        base: dict[str, str | int] = {"limit": page_size}
        if directory is not None:
            base["directory"] = directory

        pages: list[list[Message]] = []
        seen_cursors: set[str] = set()
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = dict(base)
            if cursor is not None:
                params["before"] = cursor
            resp = await self._request("GET", path, params=params, what=what)
            page = self._parse(resp, _MESSAGES, what)
            pages.append(page)
            if since_ms is not None and any(m.info.time.created < since_ms for m in page):
                break
            cursor = self._next_cursor(resp, seen_cursors, what)
            if cursor is None:
                break
        else:
            log.warning("%s: gave up after %d pages; transcript is truncated", what, _MAX_PAGES)

        out: list[Message] = []
        seen_ids: set[str] = set()
        for page in reversed(pages):
            for m in page:
                if m.info.id not in seen_ids:
                    seen_ids.add(m.info.id)
                    out.append(m)
        return out

    async def create_session(
        self,
        *,
        directory: str,
        title: str,
        metadata: dict[str, Any] | None = None,
        permission: list[dict[str, Any]] | None = None,
    ) -> Session:
        """``POST /session?directory=…``. Always pass a title: without one opencode spends an
        extra model call naming the session (pitfall 9)."""
        body: dict[str, Any] = {"title": title}
        if metadata is not None:
            body["metadata"] = metadata
        if permission is not None:
            body["permission"] = permission
        what = "POST /session"
        resp = await self._request(
            "POST", "/session", params={"directory": directory}, body=body, what=what
        )
        return self._parse(resp, _SESSION, what)

    async def prompt(
        self,
        session_id: str,
        *,
        directory: str,
        text: str,
        agent: str,
        model: str | None = None,
        system: str | None = None,
        json_schema: dict[str, Any] | None = None,
        disable_tools: Sequence[str] = (),
        timeout: float = 900.0,
    ) -> PromptResult:
        """Run one synchronous turn (``POST /session/{id}/message``) and return its last message.

        Always names ``agent`` (not sticky, pitfall 5). On timeout or cancellation the turn is
        aborted on the server (best effort, short bound) so it stops spending tokens. A model
        failure reported as HTTP 200 with ``info.error`` raises :class:`ModelCallError`.
        """
        body: dict[str, Any] = {"parts": [{"type": "text", "text": text}], "agent": agent}
        if model is not None:
            provider_id, model_id = split_model(model)
            body["model"] = {"providerID": provider_id, "modelID": model_id}
        if system is not None:
            body["system"] = system
        if json_schema is not None:
            body["format"] = {"type": "json_schema", "schema": json_schema}
        if disable_tools:
            # Some tools (MCP resource browsing) are not governed by agent permissions in
            # opencode 1.18; the per-prompt tools map still removes them.
            body["tools"] = dict.fromkeys(disable_tools, False)
        path = f"/session/{_sid(session_id)}/message"
        what = f"prompt in session {session_id}"
        try:
            resp = await self._request(
                "POST", path, params={"directory": directory}, body=body, timeout=timeout, what=what
            )
        except HostTimeout:
            log.warning("%s timed out after %gs; aborting the turn", what, timeout)
            await self.abort(session_id)
            raise
        except asyncio.CancelledError:  # memoryd runs on asyncio (anyio's tasks too)
            import anyio  # here: a pass that is not cancelled never loads anyio's backend

            with anyio.CancelScope(shield=True):
                await self.abort(session_id)
            raise

        result = self._parse(resp, _PROMPT, what)
        if result.info.error is not None:
            raise _model_call_error(result.info.error)
        return result

    async def abort(self, session_id: str, *, timeout: float = HOST_ABORT_TIMEOUT_S) -> None:
        """``POST /session/{id}/abort``; best effort, never raises."""
        try:
            await self._request("POST", f"/session/{_sid(session_id)}/abort", timeout=timeout)
        except HostNotFound:
            pass  # no such session: nothing runs in it
        except HostError as exc:
            log.warning("abort of session %s failed: %s", session_id, exc)

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session (and its children), then confirm it is gone.

        True only when a follow-up ``GET`` answers 404 (or the delete itself said 404). Errors
        of the ``DELETE`` propagate; a confirmation that fails or still finds the session
        returns False.
        """
        path = f"/session/{_sid(session_id)}"
        try:
            await self._request("DELETE", path, timeout=HOST_DELETE_TIMEOUT_S)
        except HostNotFound:
            return True
        try:
            await self._request("GET", path, timeout=HOST_CONFIRM_TIMEOUT_S)
        except HostNotFound:
            return True
        except HostError as exc:
            log.warning("could not confirm deletion of session %s: %s", session_id, exc)
            return False
        log.warning("session %s still exists after DELETE", session_id)
        return False

    async def agents(self, *, directory: str | None = None) -> list[dict[str, Any]]:
        """``GET /agent``: the resolved agents of the instance (name, mode, permission, ...)."""
        params: dict[str, str | int] | None = (
            {"directory": directory} if directory is not None else None
        )
        return await self._get_json("/agent", _DICT_LIST, params=params)

    async def dispose_instance(self, directory: str) -> None:
        """``POST /instance/dispose``: re-read agents and plugins for one directory (pitfall 17)."""
        await self._request("POST", "/instance/dispose", params={"directory": directory})

    async def worktree(self, directory: str) -> str:
        """The worktree opencode uses for ``directory`` (``GET /path``): its git root, or ``/``.

        File permission patterns are matched against paths relative to it.
        """
        info = await self._get_json("/path", _DICT, params={"directory": directory})
        value = info.get("worktree")
        if not isinstance(value, str) or not value:
            raise HostProtocolError("GET /path", f"no worktree for {directory}")
        return value

    async def session_status(self, *, directory: str | None = None) -> dict[str, dict[str, Any]]:
        """``GET /session/status``: busy/retry sessions by id; idle sessions are absent."""
        params: dict[str, str | int] | None = (
            {"directory": directory} if directory is not None else None
        )
        return await self._get_json("/session/status", _STATUS, params=params)

    async def mcp_status(self, *, directory: str | None = None) -> dict[str, Any]:
        """``GET /mcp`` (server name -> status). Not exercised against 1.18.33: 404 gives ``{}``."""
        params: dict[str, str | int] | None = (
            {"directory": directory} if directory is not None else None
        )
        try:
            return await self._get_json("/mcp", _DICT, params=params)
        except HostNotFound:
            log.debug("GET /mcp is not available on this opencode; treating as no MCP servers")
            return {}


def _model_call_error(error: dict[str, Any]) -> ModelCallError:
    """Build the exception for ``info.error`` (APIError, StructuredOutputError, MessageAbortedError…)."""
    raw_name = error.get("name")
    name = raw_name if isinstance(raw_name, str) else "UnknownError"
    raw_data = error.get("data")
    data: dict[str, Any] = raw_data if isinstance(raw_data, dict) else {}
    message: Any = data.get("message", error.get("message"))
    if message is None:
        message = json.dumps(data)[:DETAIL_CHARS] if data else "no message"
    status_raw = data.get("statusCode")
    status = (
        status_raw if isinstance(status_raw, int) and not isinstance(status_raw, bool) else None
    )
    retry_raw = data.get("isRetryable")
    retryable = retry_raw if isinstance(retry_raw, bool) else None
    return ModelCallError(name, short_text(str(message)), status=status, retryable=retryable)
