"""Mirror Claude Code's per-project memory into ``extensions/external_agent_import/``.

What the user and Claude said reaches memory through the session transcripts, a phase-1 source
(``host/claude_transcript.py``). This import adds what Claude curated itself: its auto-memory
Markdown, which can outlive the transcripts it came from (older than the age window, or deleted).

Claude Code keeps one folder per project under ``<claude home>/projects/<key>/``: session logs
(``*.jsonl``) directly inside it, and the project's memory files under ``memory/``. For every
project that has memory, this module keeps a copy in the memory folder::

    extensions/external_agent_import/instructions.md
    extensions/external_agent_import/resources/<key>/scope.json     {"cwd": "<project directory>"}
    extensions/external_agent_import/resources/<key>/<the memory/ tree, *.md only>

Rules, in the order they are applied:

* **Nothing is followed through a link.** Project folders, ``memory/`` folders, memory files and
  session logs that are symlinks are ignored; so are dot-prefixed names (the baseline would not
  track them anyway). Files are read with ``O_NOFOLLOW | O_NONBLOCK``.
* **An unreachable home changes nothing.** If ``<claude home>/projects`` cannot be listed, no
  copy is touched: a missing disk must not read as "the user deleted everything".
* **A project needs a reliable cwd.** The newest session log whose first record carrying a
  ``"cwd"`` names an existing absolute directory decides it; a project with no session log of its
  own (Claude keeps a repository's memory under the root's key while sessions started in a
  subfolder are filed under the subfolder's) takes the repository root those sessions name.
  Without one the project is skipped
  and an existing copy is left exactly as it is.
* **Copies are whole-project.** When any byte, the file set or ``scope.json`` differs, the
  project's folder is built aside (a dot-prefixed staging folder) and swapped in, so the
  consolidator never sees half a project. Content is redacted before it lands.
* **Removal is the forgetting signal.** A copy that has a ``scope.json`` (so memoryd made it) is
  deleted when its source project, its ``memory/`` folder or its last memory file is gone, or
  when the project is no longer in a non-empty ``claude_projects`` allowlist. The next diff then
  shows the files as deleted.
* **Idempotent.** Nothing is written when the copy already matches; a second run reports
  ``changed=False`` and leaves every mtime alone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.clock import HOUR, Clock
from memoryd.errors import MemorydError, PathError, SourceUnreadable
from memoryd.extensions.common import (
    EXTENSIONS_DIR,
    INSTRUCTIONS,
    RESOURCES,
    current_bytes,
    ensure_dirs,
    read_source,
    real_chain,
    redacted,
    remove_entry,
    sync_instructions,
)
from memoryd.fsutil import atomic_write, lstat_or_none, real_dir
from memoryd.paths import claude_config_dir
from memoryd.scopes import find_worktree
from memoryd.settings import Settings
from memoryd.tuning import EXTENSION_SOURCE_MAX_BYTES

log = logging.getLogger(__name__)

EXTENSION = "external_agent_import"
SCOPE_FILE = "scope.json"
NO_CWD = "no reliable cwd"
HOME_KEY = "*"  # the key of ImportResult.skipped for problems that concern the whole import

_STAGING = ".staging-"
_OLD = ".old-"
_STALE_MS = HOUR  # leftovers of an interrupted swap older than this are swept

# Reading session logs for a cwd: the record sits near the top; these bound a pathological file.
_SESSION_MAX_LINES = 2_000
_SESSION_MAX_LINE = 4 * 1024 * 1024
_SESSION_MAX_BYTES = 32 * 1024 * 1024


@dataclass
class ImportResult:
    changed: bool = False
    imported: list[str] = field(default_factory=list)  # project keys whose copy was (re)written
    removed: list[str] = field(default_factory=list)  # project keys whose copy was deleted
    skipped: dict[str, str] = field(
        default_factory=dict
    )  # project key (or "*", or "key/file") -> why


def claude_home_dir(settings: Settings, environ: dict[str, str] | None = None) -> Path:
    """``[extensions] claude_home``, else ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    return claude_config_dir(settings.extensions.claude_home, environ)


def extension_dir(memory_root: Path) -> Path:
    return memory_root / EXTENSIONS_DIR / EXTENSION


# -- reading the source -------------------------------------------------------------------------


def _project_dirs(projects: Path) -> list[tuple[str, Path]]:
    """Real, non-hidden project folders, sorted by key; raises OSError when the folder cannot be listed."""
    with os.scandir(projects) as it:
        entries = sorted(it, key=lambda e: e.name)
    return [
        (e.name, Path(e.path))
        for e in entries
        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
    ]


def _walk_markdown(base: Path, rel: str = "") -> Iterator[tuple[str, os.DirEntry[str]]]:
    """``(relpath, entry)`` for every regular ``*.md`` (any case) under ``base``; links and dot names skipped."""
    with os.scandir(base / rel if rel else base) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.name.startswith("."):
            continue
        relpath = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            yield from _walk_markdown(base, relpath)
        elif entry.is_file(follow_symlinks=False) and entry.name.lower().endswith(".md"):
            yield relpath, entry


def _memory_files(key: str, memory_dir: Path, skipped: dict[str, str]) -> dict[str, bytes]:
    """Raw bytes of the project's memory files by relpath; oversized files are reported and left out."""
    files: dict[str, bytes] = {}
    try:
        for relpath, entry in _walk_markdown(memory_dir):
            if entry.stat(follow_symlinks=False).st_size > EXTENSION_SOURCE_MAX_BYTES:
                skipped[f"{key}/{relpath}"] = (
                    f"larger than {EXTENSION_SOURCE_MAX_BYTES} bytes; not imported"
                )
                continue
            data = read_source(memory_dir / relpath)
            if data is not None:
                files[relpath] = data
    except (OSError, PathError) as exc:
        raise SourceUnreadable(str(exc)) from exc
    return files


def _usable_dir(raw: str) -> str | None:
    if "\x00" in raw or not os.path.isabs(raw):
        return None
    try:
        resolved = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        return None
    return str(resolved) if resolved.is_dir() else None


def _session_cwd(path: Path) -> str | None:
    """The cwd of one session log: its first record with a string ``"cwd"``, if that is usable."""
    try:
        fd = os.open(
            path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        )
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        budget = _SESSION_MAX_BYTES
        for _ in range(_SESSION_MAX_LINES):
            try:
                line = fh.readline(_SESSION_MAX_LINE)
            except OSError:
                return None
            budget -= len(line)
            if not line or budget < 0:
                return None
            if b'"cwd"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:  # garbage, a cut-off line, bad UTF-8: keep looking
                continue
            if isinstance(record, dict) and isinstance(record.get("cwd"), str):
                return _usable_dir(record["cwd"])
    return None


def claude_key(directory: str) -> str:
    """The project folder name Claude Code files a directory under (every other character ``-``)."""
    return re.sub(r"[^A-Za-z0-9]", "-", directory)


def project_cwd(project_dir: Path) -> str | None:
    """The project's working directory: from its own newest session log that names a usable one,
    else the repository root that sessions started in its subfolders name.

    Claude Code files a session under the folder it started in, but keeps the memory of a
    repository under the repository root's key, so a project whose sessions all ran in
    subfolders has memory and no session log of its own.
    """
    own = _own_cwd(project_dir)
    if own is not None:
        return own
    key = project_dir.name
    try:
        siblings = _project_dirs(project_dir.parent)
    except OSError:
        return None
    for name, other in siblings:
        if not name.startswith(key + "-"):
            continue  # a subfolder's key always extends its root's key
        cwd = _own_cwd(other)
        if cwd is None:
            continue
        root = find_worktree(Path(cwd))
        if claude_key(root) == key:
            return root
    return None


def _own_cwd(project_dir: Path) -> str | None:
    sessions: list[tuple[int, str]] = []
    try:
        with os.scandir(project_dir) as it:
            for entry in it:
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    try:
                        sessions.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
                    except OSError:
                        continue
    except OSError:
        return None
    for _, name in sorted(sessions, key=lambda s: (-s[0], s[1])):
        cwd = _session_cwd(project_dir / name)
        if cwd is not None:
            return cwd
    return None


def scope_bytes(cwd: str) -> bytes:
    return (json.dumps({"cwd": cwd}, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


# -- the copies ---------------------------------------------------------------------------------


def _copy_state(target: Path) -> dict[str, bytes] | None:
    """An existing copy as relpath -> bytes; ``None`` if it holds anything memoryd would not write."""
    out: dict[str, bytes] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        try:
            with os.scandir(target / rel if rel else target) as it:
                entries = list(it)
        except OSError:
            return None
        for entry in entries:
            relpath = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                pending.append(relpath)
                continue
            if not entry.is_file(follow_symlinks=False):
                return None
            data = current_bytes(target / relpath)
            if data is None:
                return None
            out[relpath] = data
    return out


def _matches(target: Path, wanted: dict[str, bytes]) -> bool:
    st = lstat_or_none(target)
    if st is None or not stat.S_ISDIR(st.st_mode):
        return False
    return _copy_state(target) == wanted


def _replace_copy(resources: Path, key: str, files: dict[str, bytes]) -> None:
    """Build the project's copy in a staging folder beside it, then swap it in."""
    staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=resources))
    old: Path | None = None
    try:
        os.chmod(staging, 0o755)
        for relpath, data in sorted(files.items()):
            *folders, name = relpath.split("/")
            atomic_write(ensure_dirs(staging, *folders) / name, data)
        target = resources / key
        if lstat_or_none(target) is not None:
            old = resources / f"{_OLD}{uuid.uuid4().hex}"
            os.rename(target, old)
        try:
            os.rename(staging, target)
        except OSError:
            if old is not None:
                os.rename(old, target)
                old = None
            raise
    except BaseException:
        remove_entry(staging)
        raise
    finally:
        if old is not None:
            remove_entry(old)


def _owned_copies(memory_root: Path) -> set[str]:
    """Keys of the copies memoryd made: real folders holding a regular ``scope.json``."""
    resources = extension_dir(memory_root) / RESOURCES
    if not real_chain(memory_root, EXTENSIONS_DIR, EXTENSION, RESOURCES):
        return set()
    owned = set()
    with os.scandir(resources) as it:
        for entry in it:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            scope = lstat_or_none(Path(entry.path) / SCOPE_FILE)
            if scope is not None and stat.S_ISREG(scope.st_mode):
                owned.add(entry.name)
    return owned


def _sweep_staging(memory_root: Path, clock: Clock) -> None:
    """Remove what an interrupted swap left behind (dot-prefixed, so never in the baseline)."""
    resources = extension_dir(memory_root) / RESOURCES
    if not real_chain(memory_root, EXTENSIONS_DIR, EXTENSION, RESOURCES):
        return
    now = clock.now_ms()
    with os.scandir(resources) as it:
        leftovers = [e for e in it if e.name.startswith((_STAGING, _OLD))]
    for entry in leftovers:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000
        except OSError:
            continue
        if age >= _STALE_MS:
            remove_entry(Path(entry.path))
            log.info("claude import: removed leftover %s", entry.path)


# -- the sync -----------------------------------------------------------------------------------


def _sync_project(
    key: str, project_dir: Path, memory_root: Path, resources: Path, result: ImportResult
) -> bool:
    """Bring one project's copy in line; returns whether the project still has a source (keep its copy)."""
    memory_dir = project_dir / "memory"
    if not real_dir(memory_dir):
        return False
    try:
        files = _memory_files(key, memory_dir, result.skipped)
    except SourceUnreadable as exc:
        result.skipped[key] = f"memory not readable ({exc}); copy left as is"
        return True
    if not files:
        return False
    cwd = project_cwd(project_dir)
    if cwd is None:
        result.skipped[key] = NO_CWD
        return True
    wanted = {SCOPE_FILE: scope_bytes(cwd)}
    wanted.update((relpath, redacted(data)) for relpath, data in files.items())
    if _matches(resources / key, wanted):
        return True
    ensure_dirs(memory_root, EXTENSIONS_DIR, EXTENSION, RESOURCES)
    _replace_copy(resources, key, wanted)
    result.imported.append(key)
    log.info("claude import: copied %d memory file(s) of %s (cwd %s)", len(files), key, cwd)
    return True


def sync_claude_import(settings: Settings, memory_root: Path, clock: Clock) -> ImportResult:
    """Mirror Claude Code's project memories into the memory folder (see the module docstring).

    Never raises for I/O problems: they end up in ``skipped`` (key ``"*"`` for the whole import)
    and leave the affected copies untouched. Does nothing unless ``[extensions] claude_import``.
    """
    result = ImportResult()
    ext = settings.extensions
    if not ext.claude_import:
        return result
    home = claude_home_dir(settings)
    try:
        projects = _project_dirs(home / "projects")
    except OSError as exc:
        result.skipped[HOME_KEY] = (
            f"Claude home {home} is unreachable ({exc.strerror or exc}); nothing changed"
        )
        log.warning("claude import: %s", result.skipped[HOME_KEY])
        return result
    ext_dir = extension_dir(memory_root)
    resources = ext_dir / RESOURCES
    wrote_instructions = False
    try:
        if not real_dir(memory_root):
            raise PathError(memory_root, "is not a real directory")
        _sweep_staging(memory_root, clock)
        owned = _owned_copies(memory_root)
        allow = set(ext.claude_projects)
        keep: set[str] = set()
        for key, project_dir in projects:
            if allow and key not in allow:
                continue
            try:
                if _sync_project(key, project_dir, memory_root, resources, result):
                    keep.add(key)
            except (OSError, MemorydError) as exc:
                result.skipped[key] = f"not imported ({exc}); copy left as is"
                log.warning("claude import: %s: %s", key, exc)
                keep.add(key)
        seen = {key for key, _ in projects}
        for key in sorted(allow - seen - owned):
            result.skipped[key] = "not found"
        for key in sorted(owned - keep):
            remove_entry(resources / key)
            result.removed.append(key)
            log.info(
                "claude import: removed the copy of %s (source gone or no longer allowed)", key
            )
        if _owned_copies(memory_root) or lstat_or_none(ext_dir / INSTRUCTIONS) is not None:
            ensure_dirs(memory_root, EXTENSIONS_DIR, EXTENSION)
            wrote_instructions = sync_instructions(ext_dir, EXTENSION)
    except (OSError, MemorydError) as exc:
        result.skipped[HOME_KEY] = f"import stopped: {exc}"
        log.warning("claude import stopped: %s", exc)
    result.imported.sort()
    result.removed.sort()
    result.changed = bool(result.imported or result.removed or wrote_instructions)
    return result
