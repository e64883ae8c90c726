"""Other machines' memory as a phase-2 input: ``extensions/sync/`` in the memory folder.

Runs inside a claimed phase 2, before the diff, exactly like the Claude Code and Codex imports:
the last fetched head of the sync branch (no network here) is rendered, redacted, into
``extensions/sync/resources/<machine>/sessions/<key>.md`` and ``.../notes/<name>.md``. What
disappeared from a machine's folder disappears here, so the consolidator sees a deletion and
forgets it. Sessions named by any tombstone (this machine's or another's) and sessions this
machine has disabled are never rendered: a remote input cannot bring back what was forgotten.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from dulwich.objects import ObjectID

from memoryd.clock import iso_ms
from memoryd.errors import SyncError
from memoryd.extensions.shared import (
    RESOURCES,
    ensure_dirs,
    remove_entry,
    sync_instructions,
    write_if_changed,
)
from memoryd.folder.layout import EXTENSIONS_DIR
from memoryd.fsutil import real_dir
from memoryd.redact import redact
from memoryd.scopes import PROJECTS_DIR
from memoryd.sync.branch import (
    MACHINE_ID_RE,
    MAX_NOTE_BYTES,
    MAX_SESSION_BYTES,
    MAX_TOMBSTONES_BYTES,
    NOTE_NAME_RE,
    NOTES,
    SESSION_KEY_RE,
    SESSIONS,
    TOMBSTONES,
    PublishedSession,
    parse_session,
    parse_tombstones,
    session_key,
)
from memoryd.sync.checkouts import Checkout, local_checkouts, match_project
from memoryd.sync.git import SyncRepo
from memoryd.tuning import (
    SYNC_MAX_MACHINES,
    SYNC_MAX_NOTES_PER_MACHINE,
    SYNC_MAX_SESSIONS_PER_MACHINE,
)

log = logging.getLogger(__name__)

EXTENSION = "sync"
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


@dataclass
class RemoteMachine:
    machine_id: str
    sessions: list[PublishedSession] = field(default_factory=list)
    notes: dict[str, bytes] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)


def machine_files(repo: SyncRepo, tree: ObjectID) -> dict[str, ObjectID]:
    """A machine folder's files (relpath -> blob id), refusing one past the caps.

    Raises :class:`~memoryd.errors.SyncError` (too deep, too many entries, a tree missing from
    the cache, too many sessions or notes): the caller skips that machine, not the whole remote.
    """
    files = repo.flat(tree).entries
    sessions = sum(1 for rel in files if rel.startswith(f"{SESSIONS}/"))
    notes = sum(1 for rel in files if rel.startswith(f"{NOTES}/"))
    if sessions > SYNC_MAX_SESSIONS_PER_MACHINE:
        raise SyncError(
            str(repo.git_dir),
            f"{sessions} sessions (at most {SYNC_MAX_SESSIONS_PER_MACHINE} are read)",
        )
    if notes > SYNC_MAX_NOTES_PER_MACHINE:
        raise SyncError(
            str(repo.git_dir), f"{notes} notes (at most {SYNC_MAX_NOTES_PER_MACHINE} are read)"
        )
    return files


def other_machines(
    repo: SyncRepo, head: ObjectID | None, own_id: str | None
) -> tuple[dict[str, ObjectID], dict[str, str]]:
    """Other machines' folders worth reading at ``head``, and the skipped ones with why.

    A folder with a name memoryd never writes is ignored silently; one past the caps, or that
    cannot be walked, is skipped and reported, and never stops the others from being read.
    """
    usable: dict[str, ObjectID] = {}
    skipped: dict[str, str] = {}
    for mid, tree in sorted(repo.machines(head).items()):
        if mid == own_id or not MACHINE_ID_RE.fullmatch(mid):
            continue
        if len(usable) >= SYNC_MAX_MACHINES:
            skipped[mid] = f"more than {SYNC_MAX_MACHINES} machines on the remote"
            continue
        usable[mid] = tree
    return usable, skipped


def _skip(skipped: dict[str, str], mid: str, exc: BaseException) -> None:
    reason = getattr(exc, "detail", None) or str(exc) or type(exc).__name__
    skipped[mid] = redact(str(reason))[:300]
    log.warning("sync: skipping machine %s: %s", mid, skipped[mid])


def _read_machine(repo: SyncRepo, mid: str, tree: ObjectID) -> RemoteMachine:
    m = RemoteMachine(mid)
    for rel, sha in sorted(machine_files(repo, tree).items()):
        parts = rel.split("/")
        try:
            if len(parts) == 3 and parts[0] == SESSIONS:
                key = parts[2].removesuffix(".json")
                if not (
                    parts[2].endswith(".json")
                    and SESSION_KEY_RE.fullmatch(key)
                    and parts[1] == key[0]
                ):
                    continue
                raw = repo.blob(sha, MAX_SESSION_BYTES)
                if raw is not None:
                    m.sessions.append(parse_session(raw, key))
            elif len(parts) == 2 and parts[0] == NOTES and NOTE_NAME_RE.fullmatch(parts[1]):
                raw = repo.blob(sha, MAX_NOTE_BYTES)
                if raw is not None:
                    m.notes[parts[1]] = raw
            elif rel == TOMBSTONES:
                raw = repo.blob(sha, MAX_TOMBSTONES_BYTES)
                if raw is not None:
                    m.tombstones = parse_tombstones(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("sync: skipping %s/%s: %s", mid, rel, exc)
    return m


@dataclass
class RemoteRead:
    machines: dict[str, RemoteMachine] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # machine -> why it was not read


def read_remote(repo: SyncRepo, own_id: str | None) -> RemoteRead:
    """Every other machine's folder at the last fetched head, validated; bad files are skipped.

    Anything a machine folder can do wrong (any exception at all: a hostile tree, an object the
    cache lacks) skips that one machine; consolidation goes on with the others.
    """
    out = RemoteRead()
    usable, out.skipped = other_machines(repo, repo.tracking_head(), own_id)
    for mid, tree in usable.items():
        try:
            out.machines[mid] = _read_machine(repo, mid, tree)
        except Exception as exc:  # one machine's folder must not stop phase 2
            _skip(out.skipped, mid, exc)
    return out


def remote_tombstones(
    repo: SyncRepo, head: ObjectID | None, own_id: str
) -> tuple[set[str], dict[str, str]]:
    """Every session another machine forgot (their ``tombstones.json``), and skipped machines."""
    dead: set[str] = set()
    usable, skipped = other_machines(repo, head, own_id)
    for mid, tree in usable.items():
        try:
            machine_files(repo, tree)
            sha = repo.flat_entry(tree, TOMBSTONES)
            raw = repo.blob(sha, MAX_TOMBSTONES_BYTES) if sha else None
            if raw is not None:
                dead |= parse_tombstones(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            log.warning("sync: skipping %s/%s: %s", mid, TOMBSTONES, exc)
        except Exception as exc:  # see read_remote
            _skip(skipped, mid, exc)
    return dead, skipped


def _one_line(value: str | None) -> str:
    if value is None:
        return "(none)"
    return _CONTROL.sub(" ", value).strip() or "(none)"


def render_session(machine: str, s: PublishedSession, project: str | None = None) -> str:
    lines = [
        f"session_id: {_one_line(s.session_id)}",
        f"machine: {machine}",
        f"project: {_one_line(project or s.project)}" + ("" if project else " (no local checkout)"),
        f"repository: {_one_line(s.repo)}",
        f"updated_at: {iso_ms(s.updated_at)}",
        f"cwd: {_one_line(s.cwd)}",
        f"title: {_one_line(s.title)}",
        "",
        "## Raw memory",
        "",
        s.raw_memory.strip() or "(no raw memory)",
        "",
        "## Summary",
        "",
        s.rollout_summary.strip() or "(no summary)",
    ]
    return redact("\n".join(lines) + "\n")


@dataclass(frozen=True)
class ImportReport:
    machines: int = 0
    sessions: int = 0
    notes: int = 0
    written: int = 0
    removed: int = 0
    skipped_forgotten: int = 0
    skipped_machines: list[str] = field(default_factory=list)


def session_relpath(mid: str, session_id: str, project: str | None) -> str:
    """Where a remote session is rendered under ``resources/``: inside ``projects/<key>/`` when
    it matched a local checkout (so project scoping applies to it), else at the machine level."""
    name = f"{session_key(session_id)}.md"
    if project:
        return f"{mid}/{PROJECTS_DIR}/{project}/{SESSIONS}/{name}"
    return f"{mid}/{SESSIONS}/{name}"


def _desired(
    machines: dict[str, RemoteMachine],
    forgotten: set[str],
    limit: int,
    checkouts: list[Checkout] | None = None,
) -> tuple[dict[str, bytes], int, int]:
    dead = set(forgotten)
    for m in machines.values():
        dead |= m.tombstones
    candidates = [
        (s.updated_at, mid, s)
        for mid, m in machines.items()
        for s in m.sessions
        if s.session_id not in dead
    ]
    skipped = sum(len(m.sessions) for m in machines.values()) - len(candidates)
    candidates.sort(key=lambda t: (t[0], t[1], t[2].session_id), reverse=True)
    files: dict[str, bytes] = {}
    for _, mid, s in candidates[:limit]:
        project = match_project(s.repo, s.project, checkouts or [])
        files[session_relpath(mid, s.session_id, project)] = render_session(mid, s, project).encode(
            "utf-8"
        )
    for mid, m in machines.items():
        for name, data in m.notes.items():
            files[f"{mid}/{NOTES}/{name}"] = redact(data.decode("utf-8", "replace")).encode()
    return files, skipped, min(len(candidates), limit)


def import_sync(
    memory_root: Path,
    repo_dir: Path,
    *,
    enabled: bool,
    own_id: str | None,
    forgotten: set[str],
    limit: int,
    local_roots: list[str] | None = None,
) -> ImportReport:
    """Bring ``extensions/sync/`` in line with the last fetched head (see the module docstring)."""
    ext_dir = memory_root / EXTENSIONS_DIR / EXTENSION
    read = RemoteRead()
    if enabled and repo_dir.is_dir():
        repo = SyncRepo(repo_dir)
        try:
            read = read_remote(repo, own_id)
        except Exception as exc:  # a broken cache never stops phase 2
            log.warning("sync: cannot read the fetched remote memory: %s", exc)
            return ImportReport()  # leave the previous inputs as they are
        finally:
            repo.close()
    machines = read.machines
    checkouts = local_checkouts(local_roots or []) if machines else []
    files, skipped, sessions = _desired(machines, forgotten, limit, checkouts)
    # A machine that could not be read keeps what was rendered for it last time: a transient
    # or hostile fault must not read as "that machine forgot everything".
    held = set(read.skipped)
    if not files and not held:
        gone = remove_entry(ext_dir) if real_dir(memory_root) else False
        return ImportReport(removed=int(gone), skipped_forgotten=skipped)
    ensure_dirs(memory_root, EXTENSIONS_DIR, EXTENSION, RESOURCES)
    sync_instructions(ext_dir, EXTENSION)
    resources = ext_dir / RESOURCES
    written = 0
    for rel, data in sorted(files.items()):
        parent = ensure_dirs(resources, *rel.split("/")[:-1])
        written += int(write_if_changed(parent / rel.rsplit("/", 1)[1], data))
    removed = _remove_stale(resources, set(files), held)
    notes = sum(1 for rel in files if f"/{NOTES}/" in rel)
    if written or removed:
        log.info("sync: rendered %d, removed %d remote memory file(s)", written, removed)
    return ImportReport(
        len(machines), sessions, notes, written, removed, skipped, sorted(read.skipped)
    )


def _remove_stale(resources: Path, keep: set[str], held: set[str]) -> int:
    """Delete everything under ``resources`` not in ``keep`` (files) nor on a kept path.

    Top-level folders named in ``held`` (machines that could not be read) are left alone.
    """
    keep_dirs = {"/".join(rel.split("/")[:i]) for rel in keep for i in range(1, rel.count("/") + 1)}
    removed = 0

    def visit(folder: Path, prefix: str) -> None:
        nonlocal removed
        for entry in sorted(folder.iterdir()):
            rel = f"{prefix}{entry.name}"
            if not prefix and rel in held and real_dir(entry):
                continue
            if rel in keep_dirs and real_dir(entry):
                visit(entry, rel + "/")
            elif rel not in keep or entry.is_symlink() or entry.is_dir():
                removed += int(remove_entry(entry))

    visit(resources, "")
    return removed


def remote_session_present(memory_root: Path, session_id: str) -> bool:
    """Whether another machine's copy of ``session_id`` is among the rendered sync inputs."""
    resources = memory_root / EXTENSIONS_DIR / EXTENSION / RESOURCES
    if not real_dir(resources):
        return False
    name = f"{session_key(session_id)}.md"
    for mid in (p.name for p in resources.iterdir()):
        if not MACHINE_ID_RE.fullmatch(mid):
            continue
        if (resources / mid / SESSIONS / name).is_file():
            return True
        projects = resources / mid / PROJECTS_DIR
        if real_dir(projects) and any(
            (p / SESSIONS / name).is_file() for p in projects.iterdir() if real_dir(p)
        ):
            return True
    return False
