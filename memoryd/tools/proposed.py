"""A model's note: kept when the user asked for it, otherwise held for the user to decide.

:func:`model_note` is the one path a model's note takes (the shim's ``memory_note`` and the MCP
server's ``memory_add_note``): a secret refuses it outright, as for every note; then
:mod:`memoryd.tools.provenance` reads the calling session, and a note the user asked for goes
into the memory folder like a user's note, its ``author:`` line naming the model and the
session. Any other note is *held*: one JSON file in ``<data>/proposed-notes/`` (0600, outside the
memory folder, so search, reads, consolidation and the block never see it) recording the text,
the project, who wrote it (the model, which session, which host) and why it was held. The model
is told that the note waits for the user, so it has no reason to retry or to try another way.

The user lists held notes with ``memoryd review`` or the web UI's Review page, and accepts one
(it becomes a note written by the model and accepted by the user, and phase 2 is enqueued) or
drops it. Past :data:`PROPOSED_NOTES_MAX` held notes a model's next one is not kept, so a page
that makes a model call the tool in a loop cannot fill the disk.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from memoryd.clock import Clock
from memoryd.errors import InvalidArgument, NotFound, PathError
from memoryd.fsutil import read_regular
from memoryd.host.ids import OPENCODE
from memoryd.host.live import LiveServer
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.tools.common import Result, iso
from memoryd.tools.notes import NoteResult, check_note, memory_add_note
from memoryd.tools.provenance import Verdict, check_session, find_calling_session
from memoryd.tuning import NOTE_MAX_CHARS, PROPOSED_NOTES_MAX

log = logging.getLogger(__name__)

ID_RE = re.compile(r"[0-9a-f]{8}")
SUFFIX = ".json"
TAKEN = ".taken"  # an accept in progress; one left by a crash is put back after a minute
STALE_TAKEN_S = 60
MCP = "mcp"


@dataclass(frozen=True)
class Proposal:
    """One held note, as its file records it."""

    id: str
    note: str
    title: str | None
    project: str | None
    session_id: str | None
    host: str
    reason: str
    created: int

    def author(self, how: str) -> str:
        where = f"{self.host} session {self.session_id}" if self.session_id else self.host
        return f"model ({where}), {how}"


@dataclass(frozen=True)
class HeldResult(Result):
    id: str | None
    reason: str
    held: bool = True

    def to_text(self) -> str:
        if self.id is None:
            return (
                "not kept: too many notes already wait for the user's review. Tell the user; "
                "do not retry or save it another way."
            )
        return (
            f"held for the user's review as proposed note {self.id}: it is not in memory until "
            "the user accepts it (`memoryd review`). Tell the user it waits there; nothing more is "
            "needed from you, so do not retry or save it another way."
        )


def _dir(paths: Paths) -> Path:
    return paths.proposed_notes


def _file(paths: Paths, note_id: str) -> Path:
    if not isinstance(note_id, str) or not ID_RE.fullmatch(note_id):
        raise InvalidArgument(f"{note_id!r} is not a proposed note id (8 hex digits)")
    return _dir(paths) / f"{note_id}{SUFFIX}"


def _load(path: Path) -> Proposal | None:
    try:
        raw = read_regular(path, limit=8 * NOTE_MAX_CHARS + 8192)  # escaped JSON
        data = json.loads(raw or b"")
        return Proposal(
            id=str(data["id"]),
            note=str(data["note"]),
            title=None if data.get("title") is None else str(data["title"]),
            project=None if data.get("project") is None else str(data["project"]),
            session_id=None if data.get("session_id") is None else str(data["session_id"]),
            host=str(data.get("host") or OPENCODE),
            reason=str(data.get("reason") or ""),
            created=int(data["created"]),
        )
    except (PathError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring proposed note %s: %s", path.name, exc)
        return None


def _names(paths: Paths) -> list[str]:
    try:
        return sorted(os.listdir(_dir(paths)))
    except (FileNotFoundError, NotADirectoryError):
        return []


def waiting(paths: Paths) -> list[Proposal]:
    """The held notes, oldest first (a crashed accept's claim is put back first)."""
    out = []
    for name in _names(paths):
        stem = name.removesuffix(TAKEN).removesuffix(SUFFIX)
        if not ID_RE.fullmatch(stem):
            continue
        path = _dir(paths) / name
        if name.endswith(TAKEN):
            if not _stale(path):
                continue
            try:
                os.replace(path, _dir(paths) / f"{stem}{SUFFIX}")
            except OSError:
                continue
        got = _load(_dir(paths) / f"{stem}{SUFFIX}")
        if got is not None and got.id == stem:
            out.append(got)
    return sorted(out, key=lambda p: (p.created, p.id))


def _stale(path: Path) -> bool:
    """A claim older than a minute by the file system's clock (its mtime is that clock's)."""
    try:
        return time.time() - os.lstat(path).st_mtime > STALE_TAKEN_S
    except OSError:
        return False


def count(paths: Paths) -> int:
    """How many notes wait for the user (a listing, no file is read)."""
    return sum(1 for n in _names(paths) if ID_RE.fullmatch(n.removesuffix(SUFFIX)))


def hold(
    paths: Paths,
    clock: Clock,
    note: str,
    title: str | None,
    *,
    session_id: str | None,
    project: str | None,
    host: str,
    reason: str,
) -> HeldResult:
    """Keep ``note`` outside memory for the user to decide on; the same note twice is held once."""
    for old in waiting(paths):
        if (old.note, old.title, old.project) == (note, title, project):
            return HeldResult(id=old.id, reason=old.reason)
    if count(paths) >= PROPOSED_NOTES_MAX:
        log.warning("a model's note was not kept: %d notes already wait", PROPOSED_NOTES_MAX)
        return HeldResult(id=None, reason=reason)
    folder = _dir(paths)
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True)
    paths.ensure_dir(folder)
    now = clock.now_ms()
    while True:
        note_id = secrets.token_hex(4)
        record = Proposal(note_id, note, title, project, session_id, host, reason, now)
        if _publish(folder, note_id, {"v": 1, "author": "model", **record.__dict__}):
            break
    log.info("held a model's note as %s for review: %s", note_id, reason)
    return HeldResult(id=note_id, reason=reason)


def _publish(folder: Path, note_id: str, data: dict[str, object]) -> bool:
    """Write the record whole under a hidden name, then link it to ``<id>.json`` (a reader never
    sees half a file; an id that exists already returns ``False``)."""
    tmp = folder / f".{note_id}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(tmp, flags, 0o600), "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False)
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, folder / f"{note_id}{SUFFIX}", follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError:  # no hard links here: a rename (an id clash is one in four billion)
        os.replace(tmp, folder / f"{note_id}{SUFFIX}")
        return True
    finally:
        tmp.unlink(missing_ok=True)
    return True


def accept(paths: Paths, store: Store, note_id: str, clock: Clock) -> NoteResult:
    """Write the held note into memory, marked as the model's and accepted by the user."""
    path = _file(paths, note_id)
    claim = path.with_name(path.name + TAKEN)
    try:
        os.rename(path, claim)  # a second accept or a drop racing this one finds nothing
    except FileNotFoundError:
        raise NotFound(f"no proposed note {note_id} waits (already accepted or dropped?)") from None
    held = _load(claim)
    if held is None:
        os.replace(claim, path)
        raise NotFound(f"proposed note {note_id} cannot be read")
    try:
        result = memory_add_note(
            paths.memories,
            held.note,
            held.title,
            held.session_id,
            clock=clock,
            store=store,
            project=held.project,  # an unknown key raises: the claim is put back
            author=held.author("accepted by the user"),
        )
    except BaseException:
        os.replace(claim, path)
        raise
    claim.unlink()
    return result


def drop(paths: Paths, note_id: str) -> str:
    path = _file(paths, note_id)
    try:
        path.unlink()
    except FileNotFoundError:
        raise NotFound(f"no proposed note {note_id} waits (already accepted or dropped?)") from None
    return note_id


def model_note(
    paths: Paths,
    clock: Clock,
    store: Store,
    note: str,
    title: str | None = None,
    *,
    session_id: str | None,
    project: str | None,
    server: LiveServer | None,
    host: str = OPENCODE,
    directory: str | None = None,
) -> NoteResult | HeldResult:
    """A model's note: into memory when the session shows the user asked for it, else held.

    ``directory`` (MCP only, whose calls carry no session) is the folder the host started the
    server in: the session is then the one busy there with this very call.
    """
    text, clean_title, sid = check_note(note, title, session_id)
    if sid is None and directory is not None:
        sid = find_calling_session(server, directory, text)
    said = text if clean_title is None else f"{clean_title}\n{text}"
    verdict: Verdict = check_session(server, sid, said)
    if verdict.asked:
        where = f"{host} session {sid}"
        return memory_add_note(
            paths.memories,
            text,
            clean_title,
            sid,
            clock=clock,
            store=store,
            project=project,
            author=f"model ({where}), asked by the user",
        )
    return hold(
        paths,
        clock,
        text,
        clean_title,
        session_id=sid,
        project=project,
        host=host,
        reason=verdict.reason,
    )


def describe(p: Proposal) -> dict[str, object]:
    """One held note as the CLI's ``--json`` and the web page show it."""
    return {**p.__dict__, "created": iso(p.created)}
