"""Where phase 1 finds sessions: opencode's HTTP listing, and each client's session files.

A *source* answers three questions about the sessions of one host: which exist
(:meth:`FileSource.list_sessions`), what one of them is now (``get_session``) and what was said in
it (``messages``), in the host model of ``host/models.py``. opencode's source is its HTTP API
(:class:`OpencodeSource`); Claude Code's transcripts and Codex's rollouts are
:class:`FileSource`\\ s over their homes. Sources know nothing of the model runner that extracts
(opencode serve today), so replacing the runner leaves them alone.

Listing is cheap on purpose. A file older than the age window is listed from its name and
``stat`` alone (so its memory is kept, not forgotten, and no byte is read); a younger one is read
once per change of its ``(mtime, size, inode)`` and its summary cached for the life of the
process. A session's ``updated`` time is its newest record, not the file's mtime, so a touched but
unchanged file stays up to date against the stored watermark and costs no model call.

An unreadable home lists nothing and reports ``available=False``: phase 1 then forgets nothing of
that host (a missing disk is not "the user deleted every session").
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from memoryd.errors import FileTooLarge, HostNotFound, PathError, TranscriptUnreadable
from memoryd.fsutil import lstat_or_none, read_regular, real_dir
from memoryd.host import claude_transcript, codex_rollout
from memoryd.host.client_records import LineProblem, ParsedSession
from memoryd.host.models import Message, ProjectRef, Session, SessionTime
from memoryd.hosts import CLAUDE_CODE, CODEX, OPENCODE, host_of
from memoryd.paths import claude_config_dir, codex_home
from memoryd.scopes import find_worktree
from memoryd.settings import Settings
from memoryd.tuning import (
    CLIENT_LINE_PROBLEMS_KEPT,
    CLIENT_TRANSCRIPT_MAX_BYTES,
    CLIENT_TRANSCRIPT_MAX_FILES,
)

log = logging.getLogger(__name__)

OWN_MCP_SERVER = "memoryd"
_CLIENT_WEB_TOOLS = frozenset({"webfetch", "websearch", "web_search", "web_fetch"})

Parser = Callable[..., ParsedSession]


class SessionSource(Protocol):
    host: str

    async def get_session(self, session_id: str) -> Session: ...

    async def messages(self, session_id: str) -> list[Message]: ...


class _OpencodeClient(Protocol):
    async def get_session(self, session_id: str) -> Session: ...

    async def messages(self, session_id: str) -> list[Message]: ...


@dataclass
class OpencodeSource:
    """opencode's sessions over its HTTP API (phase 1 lists them itself: helpers, archives)."""

    client: _OpencodeClient
    host: str = OPENCODE

    async def get_session(self, session_id: str) -> Session:
        return await self.client.get_session(session_id)

    async def messages(self, session_id: str) -> list[Message]:
        return await self.client.messages(session_id)


@dataclass(frozen=True)
class Fingerprint:
    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> Fingerprint:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass
class Listing:
    sessions: list[Session] = field(default_factory=list)
    available: bool = True
    error: str | None = None  # why the home could not be listed
    problems: list[LineProblem] = field(default_factory=list)  # malformed lines, unreadable files


# (host, path) -> (fingerprint, summary without messages): one read per change of a file.
_SUMMARIES: dict[tuple[str, str], tuple[Fingerprint, ParsedSession]] = {}
_REPORTED: set[tuple[str, Fingerprint]] = set()  # problems already logged, per file version


def outside_tools(tool_names: list[str]) -> list[str]:
    """Tools of a Claude Code or Codex session that brought outside content in (web, other MCP)."""
    found = []
    for name in tool_names:
        low = name.lower()
        if low.startswith("mcp__"):
            server = low[5:].split("__", 1)[0]
            if server != OWN_MCP_SERVER:
                found.append(name)
        elif low in _CLIENT_WEB_TOOLS:
            found.append(name)
    return found


class FileSource:
    """One client's session files under its home."""

    def __init__(
        self,
        host: str,
        home: Path,
        files: Callable[[Path], Iterator[tuple[Path, bool]]],
        parse: Parser,
        id_of: Callable[[Path], str],
    ) -> None:
        self.host = host
        self.home = home
        self._files = files
        self._parse = parse
        self._id_of = id_of
        self._paths: dict[str, tuple[Path, bool]] = {}  # session id -> (file, archived)

    # -- listing ------------------------------------------------------------------------------

    def list_sessions(self, *, read_since_ms: int) -> Listing:
        """Every session file; those changed before ``read_since_ms`` are not read."""
        listing = Listing()
        if not real_dir(self.home):
            listing.available = False
            listing.error = f"{self.home} is not a folder"
            return listing
        try:
            found = []
            for path, archived in self._files(self.home):
                st = lstat_or_none(path)
                if st is not None and stat.S_ISREG(st.st_mode):
                    found.append((st.st_mtime_ns, path, archived, st))
        except OSError as exc:
            listing.available = False
            listing.error = f"cannot list {self.home}: {exc.strerror or exc}"
            return listing
        found.sort(key=lambda f: (-f[0], str(f[1])))
        self._paths = {}
        for _mtime, path, archived, st in found[:CLIENT_TRANSCRIPT_MAX_FILES]:
            sid = self._id_of(path)
            if sid in self._paths:
                continue
            self._paths[sid] = (path, archived)
            mtime_ms = st.st_mtime_ns // 1_000_000
            if mtime_ms < read_since_ms:
                listing.sessions.append(self._session(self._stub(path, sid, mtime_ms), archived))
                continue
            summary = self._summary(path, sid, st, listing.problems)
            listing.sessions.append(self._session(summary, archived))
        return listing

    def _stub(self, path: Path, sid: str, mtime_ms: int) -> ParsedSession:
        return ParsedSession(sid, str(path), "", "", mtime_ms, mtime_ms)

    def _summary(
        self, path: Path, sid: str, st: os.stat_result, problems: list[LineProblem]
    ) -> ParsedSession:
        fp = Fingerprint.of(st)
        cached = _SUMMARIES.get((self.host, str(path)))
        if cached is not None and cached[0] == fp:
            problems.extend(cached[1].problems)
            return cached[1]
        try:
            parsed = self._read(path, st.st_mtime_ns // 1_000_000)
        except (TranscriptUnreadable, HostNotFound) as exc:
            problem = LineProblem(str(path), 0, str(exc))
            problems.append(problem)
            self._report(fp, [problem])
            return self._stub(path, sid, st.st_mtime_ns // 1_000_000)
        summary = replace(parsed, messages=[])
        if len(_SUMMARIES) >= CLIENT_TRANSCRIPT_MAX_FILES * 2:
            _SUMMARIES.clear()
        _SUMMARIES[(self.host, str(path))] = (fp, summary)
        problems.extend(parsed.problems)
        self._report(fp, parsed.problems)
        return summary

    def _report(self, fp: Fingerprint, problems: list[LineProblem]) -> None:
        for problem in problems:
            if (problem.path + str(problem.line), fp) not in _REPORTED:
                _REPORTED.add((problem.path + str(problem.line), fp))
                log.warning("%s session file: %s", self.host, problem)

    def _session(self, parsed: ParsedSession, archived: bool) -> Session:
        worktree = find_worktree(Path(parsed.directory)) if parsed.directory else None
        return Session.model_validate(
            dict(
                id=parsed.session_id,
                title=parsed.title,
                directory=parsed.directory,
                time=SessionTime(
                    created=parsed.created,
                    updated=parsed.updated,
                    archived=parsed.updated if archived else None,
                ),
                parentID=parsed.parent,
                project=ProjectRef(id=self.host, worktree=worktree) if worktree else None,
                path=parsed.path,  # extra field: where the session's file is, for the UI and logs
            )
        )

    # -- one session --------------------------------------------------------------------------

    def _read(self, path: Path, mtime_ms: int) -> ParsedSession:
        try:
            data = read_regular(path, limit=CLIENT_TRANSCRIPT_MAX_BYTES)
        except FileTooLarge as exc:
            raise TranscriptUnreadable(path, f"too large ({exc.size} bytes)") from exc
        except PathError as exc:  # a link, not a regular file, unreadable: the job fails, named
            raise TranscriptUnreadable(path, str(exc)) from exc
        if data is None:
            raise HostNotFound(f"{self.host} session file {path}", 404, "NotFound", "gone")
        return self._parse(path, data, fallback_ms=mtime_ms)

    def _locate(self, session_id: str) -> tuple[Path, bool]:
        found = self._paths.get(session_id)
        if found is None:
            raise HostNotFound(f"{self.host} session {session_id}", 404, "NotFound", "not listed")
        return found

    async def read(self, session_id: str) -> tuple[Session, list[Message]]:
        """The session as its file says now, and its messages (one read of the file)."""
        path, archived = self._locate(session_id)
        st = await asyncio.to_thread(lstat_or_none, path)
        if st is None:
            raise HostNotFound(f"{self.host} session file {path}", 404, "NotFound", "gone")
        parsed = await asyncio.to_thread(self._read, path, st.st_mtime_ns // 1_000_000)
        self._report(Fingerprint.of(st), parsed.problems)
        return self._session(parsed, archived), parsed.messages

    async def get_session(self, session_id: str) -> Session:
        return (await self.read(session_id))[0]

    async def messages(self, session_id: str) -> list[Message]:
        return (await self.read(session_id))[1]


class Sources:
    """Every source phase 1 reads: opencode's, and the enabled clients' files."""

    def __init__(self, client: _OpencodeClient, files: list[FileSource]) -> None:
        self.opencode = OpencodeSource(client)
        self.files = {src.host: src for src in files}
        self._unavailable: set[str] = set()  # client homes that could not be listed this pass

    def list_files(self, *, read_since_ms: int) -> tuple[list[Session], dict[str, dict[str, Any]]]:
        """Every client's sessions, and per client what status shows (seen, home, problems)."""
        found: list[Session] = []
        report: dict[str, dict[str, Any]] = {}
        self._unavailable = set()
        for host, src in self.files.items():
            listing = src.list_sessions(read_since_ms=read_since_ms)
            if not listing.available:
                self._unavailable.add(host)
            found += listing.sessions
            report[host] = {
                "seen": sum(1 for s in listing.sessions if s.is_root),
                "home": str(src.home),
                "error": listing.error,
                "problems": [str(p) for p in listing.problems[-CLIENT_LINE_PROBLEMS_KEPT:]],
            }
        return found, report

    def source(self, session_id: str) -> SessionSource:
        host = host_of(session_id)
        if host == OPENCODE:
            return self.opencode
        src = self.files.get(host)
        if src is None:
            raise HostNotFound(f"{host} session {session_id}", 404, "NotFound", "source is off")
        return src

    def gone(self, session_id: str) -> bool | None:
        """Whether a session missing from the listing is gone: ``None`` means ask opencode.

        A client session is gone when its file is; a client whose home could not be listed, or
        whose source is switched off, cannot tell (so nothing of it is forgotten).
        """
        host = host_of(session_id)
        if host == OPENCODE:
            return None
        return host in self.files and host not in self._unavailable

    async def read(self, session_id: str) -> tuple[Session, list[Message]]:
        """The session as its host says now, then its messages (they hold at least that version)."""
        src = self.source(session_id)
        if isinstance(src, FileSource):
            return await src.read(session_id)  # one read of the file
        session = await src.get_session(session_id)
        return session, await src.messages(session_id)


# -- the clients' file layouts ------------------------------------------------------------------


def _regular_children(folder: Path) -> Iterator[os.DirEntry[str]]:
    with os.scandir(folder) as it:
        entries = list(it)
    for entry in entries:
        if not entry.name.startswith(".") and not entry.is_symlink():
            yield entry


def claude_files(home: Path) -> Iterator[tuple[Path, bool]]:
    """``projects/<key>/<session>.jsonl`` (sub-agent transcripts in deeper folders are not roots)."""
    projects = home / "projects"
    if not real_dir(projects):
        return
    for project in _regular_children(projects):
        if project.is_dir(follow_symlinks=False):
            for entry in _regular_children(Path(project.path)):
                if entry.name.endswith(".jsonl") and entry.is_file(follow_symlinks=False):
                    yield Path(entry.path), False


def codex_files(home: Path) -> Iterator[tuple[Path, bool]]:
    """``sessions/YYYY/MM/DD/rollout-*.jsonl``, and ``archived_sessions/`` (listed, not read)."""
    for sub, archived in (("sessions", False), ("archived_sessions", True)):
        top = home / sub
        if not real_dir(top):
            continue
        for folder, dirs, names in os.walk(top):  # os.walk does not follow links by default
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if name.startswith("rollout-") and name.endswith(".jsonl"):
                    yield Path(folder) / name, archived


def client_sources(settings: Settings, environ: dict[str, str] | None = None) -> list[FileSource]:
    """The enabled client sources: each one on by default when its home exists."""
    ext = settings.extensions
    out: list[FileSource] = []
    claude = claude_config_dir(ext.claude_home, environ)
    if ext.claude_sessions if ext.claude_sessions is not None else real_dir(claude):
        out.append(
            FileSource(
                CLAUDE_CODE,
                claude,
                claude_files,
                claude_transcript.parse,
                claude_transcript.session_id_of,
            )
        )
    codex = codex_home(ext.codex_home, environ)
    if ext.codex_sessions if ext.codex_sessions is not None else real_dir(codex):
        out.append(
            FileSource(CODEX, codex, codex_files, codex_rollout.parse, codex_rollout.session_id_of)
        )
    return out
