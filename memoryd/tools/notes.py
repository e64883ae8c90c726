"""``memory_add_note`` and ``memory_forget``: the only ways a model or user changes memory directly.

A note is something the user chose to keep, kept verbatim in ``extensions/ad_hoc/notes/`` (or a
project's ``notes/``) and consolidated into ``MEMORY.md`` by the next phase 2 (the ad-hoc
extension's instructions say how). Its ``author:`` header says who wrote it: ``user`` (the CLI,
the web UI), or a model whose note the user asked for or accepted (:mod:`memoryd.tools.proposed`
decides which, and holds the rest outside the folder). Notes are append-only: each one is a new
file, created exclusively, never overwritten. A note carrying a secret is refused outright rather
than redacted: the user asked for *these words* to be kept, so silently changing them would be
worse than saying no.

Forgetting is the other direction. A session's stage-1 output and job are deleted, the session
is switched to ``disabled`` so discovery does not extract it again, and phase 2 is enqueued so the
consolidation removes what it had learned from it. A note file is deleted and phase 2 enqueued;
the deletion shows up in the workspace diff, which is the consolidator's signal to forget.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memoryd.clock import Clock, SystemClock
from memoryd.errors import InvalidArgument, NotFound, Refused
from memoryd.folder.guard import ensure_dirs, entries, open_path, remove_file, split_path
from memoryd.folder.layout import AD_HOC_NOTES, PROJECT_NOTES
from memoryd.scopes import PROJECTS_DIR, is_scope_key
from memoryd.store import Store
from memoryd.tools.common import Result, iso, stamp_text
from memoryd.tools.scope import ALL, Scope
from memoryd.tuning import NOTE_MAX_CHARS, NOTE_TITLE_MAX_CHARS, SLUG_MAX_CHARS

SESSION_ID_MAX_CHARS = 200
USER = "user"  # the author of a note typed at the CLI or in the web UI
MAX_SUFFIX = 20
NOTES_PARTS: tuple[str, ...] = tuple(AD_HOC_NOTES.split("/"))
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_NO_HARDLINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}


@dataclass(frozen=True)
class NoteResult(Result):
    path: str
    created: str
    title: str | None
    session_id: str | None
    bytes: int

    def to_text(self) -> str:
        return f"saved note {self.path}; the next consolidation folds it into memory"


@dataclass(frozen=True)
class ForgetResult(Result):
    target: Literal["session", "note", "project"]
    session_id: str | None = None
    note: str | None = None
    project: str | None = None
    sessions: int = 0
    notes: int = 0
    removed_output: bool = False
    removed_job: bool = False
    disabled: bool = False
    phase2_enqueued: bool = False

    def to_text(self) -> str:
        tail = (
            "; the next consolidation removes what memory learned from it"
            if self.phase2_enqueued
            else ""
        )
        if self.target == "note":
            return f"deleted note {self.note}{tail}"
        if self.target == "project":
            return (
                f"forgot project {self.project}: {self.sessions} session(s) and {self.notes} "
                f"note(s){tail}"
            )
        if not (self.removed_output or self.removed_job):
            return (
                f"forgot session {self.session_id} (from another machine): every synced machine "
                f"will drop it{tail}"
            )
        what = "its extracted memory" if self.removed_output else "its pending extraction"
        return f"forgot session {self.session_id}: deleted {what} and disabled memory for it{tail}"


def slugify(text: str) -> str:
    """Lowercase ASCII words joined by ``-``, at most 60 characters, cut at a word boundary."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = ""
    for word in re.findall(r"[a-z0-9]+", folded):
        candidate = f"{slug}-{word}" if slug else word
        if len(candidate) > SLUG_MAX_CHARS:
            slug = slug or word[:SLUG_MAX_CHARS]
            break
        slug = candidate
    return slug


def _one_line(value: str) -> str:
    """Header values stay on one line, so a title cannot forge header lines or headings."""
    return _CONTROL_RE.sub(" ", value).strip()


def check_note(
    note: object, title: object, session_id: object
) -> tuple[str, str | None, str | None]:
    """The note, its one-line title and session id, or the reason it cannot be kept at all."""
    if not isinstance(note, str) or not note.strip():
        raise InvalidArgument("note must be a non-empty string")
    if len(note) > NOTE_MAX_CHARS:
        raise InvalidArgument(f"note has {len(note)} characters; the limit is {NOTE_MAX_CHARS}")
    clean_title = None
    if title is not None:
        if not isinstance(title, str):
            raise InvalidArgument("title must be a string")
        if len(title) > NOTE_TITLE_MAX_CHARS:
            raise InvalidArgument(
                f"title has {len(title)} characters; the limit is {NOTE_TITLE_MAX_CHARS}"
            )
        clean_title = _one_line(title) or None
    sid = None
    if session_id is not None:
        if not isinstance(session_id, str) or len(session_id) > SESSION_ID_MAX_CHARS:
            raise InvalidArgument("session_id must be a string of at most 200 characters")
        sid = _one_line(session_id) or None
    from memoryd.redact import find_secrets  # here: a search-only tool process never loads it

    kinds = list(
        dict.fromkeys(find_secrets(note) + (find_secrets(title) if isinstance(title, str) else []))
    )
    if kinds:
        raise Refused(
            f"refused: the note looks like it contains a secret ({', '.join(kinds)}); nothing was written. "
            "Notes are kept verbatim and shown to later sessions, so remove the secret and try again.",
            reasons=kinds,
        )
    return note, clean_title, sid


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def _sync_dir(dir_fd: int) -> None:
    """Make the new name durable; some file systems cannot fsync a directory, which is fine."""
    try:
        os.fsync(dir_fd)
    except OSError:
        pass


def _create_exclusive(dir_fd: int, base: str, data: bytes) -> str:
    """Create ``base.md`` (or ``base-2.md`` … ``base-20.md``) holding ``data``; returns the name.

    The bytes go to a hidden temp file first, which is then hard-linked to the final name: the
    link fails if the name exists (exclusive) and readers never see a partial note (atomic). On a
    file system without hard links the note is written in place with ``O_EXCL`` instead.
    """
    names = [f"{base}.md"] + [f"{base}-{n}.md" for n in range(2, MAX_SUFFIX + 1)]
    tmp = f".{base}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    try:
        for name in names:
            try:
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                _sync_dir(dir_fd)
                return name
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno not in _NO_HARDLINKS:
                    raise
                return _create_in_place(dir_fd, names[names.index(name) :], data, flags)
    finally:
        os.unlink(tmp, dir_fd=dir_fd)
    raise Refused(
        f"{MAX_SUFFIX} notes named {base} already exist for this second; try again in a moment"
    )


def _create_in_place(dir_fd: int, names: list[str], data: bytes, flags: int) -> str:
    for name in names:
        try:
            fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            continue
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return name
    raise Refused(
        f"{MAX_SUFFIX} notes with this name already exist for this second; try again in a moment"
    )


def memory_add_note(
    root: Path,
    note: str,
    title: str | None = None,
    session_id: str | None = None,
    *,
    clock: Clock | None = None,
    store: Store | None = None,
    project: str | None = None,
    author: str = USER,
) -> NoteResult:
    """Save ``note`` verbatim as a new file under ``extensions/ad_hoc/notes/``, or under
    ``projects/<project>/notes/`` when it is about one project only.

    The name is ``<UTC %Y-%m-%dT%H-%M-%S>-<slug>.md``, the slug coming from the title, else the
    note's first words. The file starts with ``title:``/``created:``/``session_id:`` lines (each
    only when known), ``author:``, and a blank line. With a ``store``, phase 2 is enqueued so the
    note is consolidated without waiting for new sessions.
    """
    text, clean_title, sid = check_note(note, title, session_id)
    now = (clock or SystemClock()).now_ms()
    slug = slugify(clean_title or "") or slugify(" ".join(text.split()[:8])) or "note"
    header = [f"title: {clean_title}"] if clean_title else []
    header.append(f"created: {iso(now)}")
    if sid:
        header.append(f"session_id: {sid}")
    header.append(f"author: {_one_line(author) or USER}")
    body = text if text.endswith("\n") else text + "\n"
    data = ("\n".join(header) + "\n\n" + body).encode("utf-8")
    if project is not None and not is_scope_key(project):
        raise InvalidArgument(f"{project!r} is not a project key")
    folder = f"{PROJECTS_DIR}/{project}/{PROJECT_NOTES}" if project else AD_HOC_NOTES
    ensure_dirs(root, tuple(folder.split("/")))
    with open_path(root, folder) as notes_dir:
        if notes_dir.kind != "dir":
            raise Refused(f"{folder} is not a directory")
        name = _create_exclusive(notes_dir.fd, f"{stamp_text(now)}-{slug}", data)
    if store is not None:
        store.ledger.record_note_write(f"{folder}/{name}", data)  # a running consolidation keeps it
        store.phase2.enqueue_phase2()
    return NoteResult(
        path=f"{folder}/{name}",
        created=iso(now) or "",
        title=clean_title,
        session_id=sid,
        bytes=len(data),
    )


def _forget_session(store: Store, root: Path, session_id: str, scope: Scope) -> ForgetResult:
    output = store.outputs.output(session_id)
    had_output = output is not None
    had_job = store.stage1.stage1_job(session_id) is not None
    if not (had_output or had_job):
        # Imported here: the shim's `memoryd tool` path must not load settings (pydantic) or dulwich.
        from memoryd.sync.inputs import remote_session_present

        if not remote_session_present(root, session_id):
            raise NotFound(f"memoryd holds no memory for session {session_id}")
        # Another machine's session: the tombstone makes every machine (its own included) forget it.
        store.tombstones.add_tombstone(session_id)
        store.outputs.set_mode(session_id, "disabled", reason="forgotten on request")
        store.phase2.enqueue_phase2(urgent=True)
        return ForgetResult(
            target="session", session_id=session_id, disabled=True, phase2_enqueued=True
        )
    if output is not None and not scope.writable.allows_key(output.scope):
        raise Refused(
            f"session {session_id} belongs to project {output.scope}, not to this one; forget it "
            "from a session in that project or with `memoryd forget --session` in a shell"
        )
    store.outputs.delete_session_memory(session_id)
    store.outputs.set_mode(session_id, "disabled", reason="forgotten on request")
    store.tombstones.add_tombstone(session_id)  # published by sync, so other machines forget it too
    if had_output:
        store.phase2.enqueue_phase2(urgent=True)
    return ForgetResult(
        target="session",
        session_id=session_id,
        removed_output=had_output,
        removed_job=had_job,
        disabled=True,
        phase2_enqueued=had_output,
    )


def _forget_note(store: Store, root: Path, note: str, scope: Scope) -> ForgetResult:
    whole = split_path(note)
    if len(whole) > 3 and whole[0] == PROJECTS_DIR and whole[2] == PROJECT_NOTES:
        full = "/".join(whole)  # a project's note, named by the path memory_add_note returned
        if not scope.writable.allows(full):
            raise Refused(f"{full} belongs to another project; it cannot be changed from here")
        return _delete_note(store, root, full)
    rel = note[len(AD_HOC_NOTES) + 1 :] if note.startswith(AD_HOC_NOTES + "/") else note
    parts = split_path(rel)
    if not parts:
        raise InvalidArgument("note must name a note file (e.g. 2027-01-15T08-00-00-deploy.md)")
    return _delete_note(store, root, "/".join((*NOTES_PARTS, *parts)))


def _delete_note(store: Store, root: Path, full: str) -> ForgetResult:
    with open_path(root, full) as node:
        if node.kind != "file":
            raise InvalidArgument(f"{full}: is a directory, not a note")
        remove_file(node)
    store.ledger.record_note_write(full, None)  # a running consolidation does not bring it back
    store.phase2.enqueue_phase2(urgent=True)
    return ForgetResult(target="note", note=full, phase2_enqueued=True)


def _forget_project(store: Store, root: Path, key: str) -> ForgetResult:
    """Every session of the project forgotten (and disabled), its notes deleted; phase 2 enqueued."""
    if not is_scope_key(key):
        raise InvalidArgument(f"{key!r} is not a project key (see `memoryd list projects --all`)")
    sessions = store.outputs.forget_project(key)
    for sid in sessions:
        store.tombstones.add_tombstone(sid)  # published by sync, so other machines forget them too
    notes = 0
    folder = f"{PROJECTS_DIR}/{key}/{PROJECT_NOTES}"
    try:
        with open_path(root, folder) as node:
            names = [n for n, _ in entries(node.fd, at_root=False)] if node.kind == "dir" else []
    except NotFound:
        names = []
    for name in names:
        with open_path(root, f"{folder}/{name}") as node:
            if node.kind == "file":
                remove_file(node)
                store.ledger.record_note_write(f"{folder}/{name}", None)
                notes += 1
    if not sessions and not notes:
        raise NotFound(f"memoryd holds no memory for project {key}")
    store.phase2.enqueue_phase2(urgent=True)
    return ForgetResult(
        target="project", project=key, sessions=len(sessions), notes=notes, phase2_enqueued=True
    )


def memory_forget(
    store: Store,
    root: Path,
    *,
    session_id: str | None = None,
    note: str | None = None,
    project: str | None = None,
    scope: Scope = ALL,
) -> ForgetResult:
    """Forget one session's memory, delete one note, or forget a whole project (exactly one).

    ``note`` is a path relative to ``extensions/ad_hoc/notes/`` (a bare file name) or the full
    path :func:`memory_add_note` returned. An unknown session or note raises :class:`NotFound`.
    With a ``scope`` (the MCP tools pass the caller's), nothing outside the caller's project and
    the global layer can be forgotten.
    """
    given = [x for x in (session_id, note, project) if x not in (None, "")]
    if len(given) != 1:
        raise InvalidArgument("give exactly one of session_id, note or project")
    if session_id not in (None, ""):
        if not isinstance(session_id, str):
            raise InvalidArgument("session_id must be a string")
        return _forget_session(store, root, session_id, scope)
    if project not in (None, ""):
        if not isinstance(project, str) or not scope.writable.allows_key(project):
            raise Refused("a project can only be forgotten from a shell or from inside itself")
        return _forget_project(store, root, project)
    if not isinstance(note, str):
        raise InvalidArgument("note must be a string")
    return _forget_note(store, root, note, scope)
