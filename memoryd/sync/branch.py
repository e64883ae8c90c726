"""The ``memoryd-sync`` branch layout and its file formats (format 1).

::

    machines/<machine id>/machine.json          {"format": 1, "machine": id, "name": hostname}
    machines/<machine id>/sessions/<k>/<key>.json   one published stage-1 output
    machines/<machine id>/notes/<name>.md       the machine's ad-hoc notes, verbatim
    machines/<machine id>/tombstones.json       {"format": 1, "sessions": {session id: ms}}

``<key>`` is a hash of the session id, so a hostile id can never name a path; ``<k>``, its first
hex digit, shards the folder so one new output rewrites a 1/16 tree (about 4 KB at 1,000
outputs, instead of one 60 KB tree: dulwich sends trees whole, without deltas). Everything read
back from the branch is treated as hostile: names are checked against narrow patterns, sizes
are capped, JSON is validated field by field, and text is redacted again before it is used.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import socket
from dataclasses import dataclass
from typing import Any

from dulwich.refs import Ref

from memoryd.tuning import (
    SYNC_MAX_NOTE_BYTES,
    SYNC_MAX_SESSION_BYTES,
    SYNC_MAX_TOMBSTONES_BYTES,
)

FORMAT = 1
BRANCH = Ref(b"refs/heads/memoryd-sync")
# The local cache keeps the last fetched remote head as its own branch: dulwich's fetch only
# offers refs/heads/* as "have", and a remote-tracking ref there would re-download everything.
TRACKING = Ref(b"refs/heads/memoryd-sync")
MACHINES = "machines"
MACHINE_FILE = "machine.json"
SESSIONS = "sessions"
NOTES = "notes"
TOMBSTONES = "tombstones.json"

MAX_SESSION_BYTES = SYNC_MAX_SESSION_BYTES
MAX_NOTE_BYTES = SYNC_MAX_NOTE_BYTES
MAX_TOMBSTONES_BYTES = SYNC_MAX_TOMBSTONES_BYTES
MAX_TEXT_CHARS = 60_000
MAX_FIELD_CHARS = 500

MACHINE_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
SESSION_KEY_RE = re.compile(r"[0-9a-f]{24}")
NOTE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}\.md")


def new_machine_id(hostname: str | None = None) -> str:
    """``<host slug>-<8 hex>``: readable in a remote's listing, unique even for equal hostnames."""
    host = hostname if hostname is not None else socket.gethostname()
    slug = re.sub(r"[^a-z0-9]+", "-", host.lower()).strip("-")[:40].strip("-") or "machine"
    return f"{slug}-{secrets.token_hex(4)}"


def session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:24]


def session_path(session_id: str) -> str:
    """Where a session is published, relative to its machine's folder."""
    key = session_key(session_id)
    return f"{SESSIONS}/{key[0]}/{key}.json"


@dataclass(frozen=True)
class PublishedSession:
    session_id: str
    updated_at: int
    raw_memory: str
    rollout_summary: str
    cwd: str | None = None
    title: str | None = None
    slug: str | None = None
    repo: str | None = None  # normalised origin URL of the checkout (sync.projects)
    project: str | None = None  # the checkout's folder name

    def to_bytes(self) -> bytes:
        data = {
            "format": FORMAT,
            "session_id": self.session_id,
            "updated_at": self.updated_at,
            "cwd": self.cwd,
            "title": self.title,
            "slug": self.slug,
            "repo": self.repo,
            "project": self.project,
            "raw_memory": self.raw_memory,
            "rollout_summary": self.rollout_summary,
        }
        return (json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _text(data: dict[str, Any], key: str, limit: int, *, optional: bool = False) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value[:limit]


def parse_session(raw: bytes, key: str) -> PublishedSession:
    """A published session file, validated; raises ``ValueError`` for anything off-format."""
    if len(raw) > MAX_SESSION_BYTES:
        raise ValueError(f"larger than {MAX_SESSION_BYTES} bytes")
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not a format-1 session")
    sid = _text(data, "session_id", MAX_FIELD_CHARS)
    assert sid is not None
    if not sid or session_key(sid) != key:
        raise ValueError("file name does not match its session id")
    updated = data.get("updated_at")
    if not isinstance(updated, int) or isinstance(updated, bool) or updated < 0:
        raise ValueError("updated_at must be a non-negative integer")
    return PublishedSession(
        session_id=sid,
        updated_at=updated,
        raw_memory=_text(data, "raw_memory", MAX_TEXT_CHARS) or "",
        rollout_summary=_text(data, "rollout_summary", MAX_TEXT_CHARS) or "",
        cwd=_text(data, "cwd", MAX_FIELD_CHARS, optional=True),
        title=_text(data, "title", MAX_FIELD_CHARS, optional=True),
        slug=_text(data, "slug", MAX_FIELD_CHARS, optional=True),
        repo=_text(data, "repo", MAX_FIELD_CHARS, optional=True),
        project=_text(data, "project", MAX_FIELD_CHARS, optional=True),
    )


def tombstones_bytes(tombstones: dict[str, int]) -> bytes:
    data = {"format": FORMAT, "sessions": dict(sorted(tombstones.items()))}
    return (json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode()


def parse_tombstones(raw: bytes) -> set[str]:
    if len(raw) > MAX_TOMBSTONES_BYTES:
        raise ValueError(f"larger than {MAX_TOMBSTONES_BYTES} bytes")
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not a format-1 tombstone list")
    sessions = data.get("sessions")
    if not isinstance(sessions, dict):
        raise ValueError("sessions must be an object")
    return {sid for sid in sessions if isinstance(sid, str) and 0 < len(sid) <= MAX_FIELD_CHARS}


def machine_bytes(machine_id: str, name: str) -> bytes:
    data = {"format": FORMAT, "machine": machine_id, "name": name[:MAX_FIELD_CHARS]}
    return (json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n").encode()
