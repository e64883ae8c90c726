"""Agent edits are not silent: a change of the agent-owned files is judged with opencode's help.

Outside a consolidation memoryd notices, by stat data, that ``MEMORY.md``, a summary, ``skills/``
or a project layer changed (:func:`memoryd.folder.rollback.seen_change`). Adopting every such
change as the user's hand edit let the user's own opencode agent, told by a web page, write what
every later turn is shown (``bash``, ``write``, ``edit``, ``patch`` all reach the folder). So,
only when a change was seen, memoryd reads the host sessions updated since shortly before it
(:func:`find_writers`) and looks for a tool call whose input names the folder
(:mod:`memoryd.write.edit_trace`):

* one is found: the change is staged for the user (:mod:`memoryd.write.edit_review`, naming the
  session, its title, the tool, its input and the files) and the folder is rolled back to the
  validated copy, so nothing reaches a turn;
* none is: it is a hand edit made outside any session, adopted once it validates, as before;
* opencode cannot be asked: the change is *held* — neither adopted nor discarded (turns keep the
  validated copy) — and asked about again at the next tick; ``memoryd status`` says so.

During a consolidation the folder is the consolidator's, and what is in it afterwards becomes
the validated copy; so after each run the host sessions are read the same way
(:func:`refuse_host_writes`), and a host tool call that named the folder while the run worked
fails the run, which rolls the folder back.

While an agent edit waits, a further change of a file it holds joins it even without a new tool
call: a process the session started (``nohup``, ``&``) may still be writing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memoryd.clock import Clock
from memoryd.errors import ConfinementError, HostError, HostNotFound
from memoryd.folder import rollback
from memoryd.host.client_sources import FileSource
from memoryd.host.models import Message, Part, Session
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.redact import redact
from memoryd.store import Store
from memoryd.store.keys import AGENT_EDIT_HELD
from memoryd.tuning import (
    EDIT_INPUT_EXCERPT_CHARS,
    EDIT_LOOKBACK_MAX_MS,
    EDIT_MARGIN_MS,
    EDIT_MESSAGES_PAGE,
    EDIT_SCAN_MAX_CHARS,
)
from memoryd.write import edit_review
from memoryd.write.edit_trace import Folder, names_folder, patch_names_folder
from memoryd.write.helpers import is_own_helper

log = logging.getLogger(__name__)

STAGED = "staged"
ADOPTED = "adopted"
HELD = "held"
_RUNNING = frozenset({"pending", "running"})


@dataclass(frozen=True)
class Writer:
    """One host tool call whose input named the memory folder: what the user is shown."""

    session_id: str
    title: str
    directory: str
    tool: str
    call_id: str | None
    part_id: str | None
    at: int | None  # when it ran (its end, else its start), epoch ms
    why: str  # which rule matched, and on what
    input: str  # the tool's input, redacted and cut
    session_updated: int | None = None  # the session's time.updated when it was read

    @property
    def key(self) -> str:
        return edit_review.call_key(asdict(self))


def window_start(change: rollback.FolderChange, now_ms: int) -> int:
    """How far back a tool call may have made ``change``: before the earliest of the folder's
    last check and the changed files' times, by a margin, and never beyond the lookback cap."""
    marks = [t for t in (change.judged_at_ms, *change.mtimes_ms.values()) if t is not None]
    oldest = now_ms - EDIT_LOOKBACK_MAX_MS
    return max(min(marks) - EDIT_MARGIN_MS, oldest) if marks else oldest


async def find_writers(
    client: OpencodeClient | None,
    folder: Folder,
    since_ms: int,
    files: Sequence[FileSource] = (),
) -> list[Writer]:
    """Tool calls of host sessions updated since ``since_ms`` whose input names ``folder``.

    Subagent sessions are read too (their tools run in child sessions); memoryd's own helper
    sessions are not host sessions. Only the recent end of each transcript is fetched. Without
    opencode (another runner) there are no opencode sessions to have written it; Claude Code's
    and Codex's sessions (``files``) are read whole from their files either way.
    """
    found = await _client_writers(files, folder, since_ms)
    if client is None:
        return found
    sessions = await client.list_sessions(roots=False, archived=True, start_ms=since_ms)
    for s in sessions:
        if s.time.updated < since_ms or is_own_helper(s):
            continue
        try:
            messages = await client.messages(s.id, since_ms=since_ms, page_size=EDIT_MESSAGES_PAGE)
        except HostNotFound:
            continue  # deleted since the listing: nothing of it can reach memory
        found += writers_in(s, messages, folder, since_ms)
    return found


async def _client_writers(
    files: Sequence[FileSource], folder: Folder, since_ms: int
) -> list[Writer]:
    """Tool calls of the clients' sessions (their transcript files) that name ``folder``."""
    found: list[Writer] = []
    for src in files:
        for s in src.list_sessions(read_since_ms=since_ms).sessions:
            if s.time.updated < since_ms:
                continue
            try:
                session, messages = await src.read(s.id)
            except HostNotFound:
                continue  # its file went away since the listing
            found += writers_in(session, messages, folder, since_ms)
    return found


def writers_in(
    session: Session, messages: list[Message], folder: Folder, since_ms: int
) -> list[Writer]:
    out: list[Writer] = []
    for m in messages:
        where = (m.info.model_extra or {}).get("path")
        cwds = [session.directory]
        if isinstance(where, dict):
            cwds += [v for k in ("cwd", "root") if isinstance(v := where.get(k), str)]
        for part in m.parts:
            w = _writer(session, m, part, folder, cwds, since_ms)
            if w is not None:
                out.append(w)
    return out


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _when(message: Message, part: Part) -> tuple[int | None, bool]:
    """(when the part last did something, whether it may still be running)."""
    running = False
    if part.state is not None:
        t = (part.state.model_extra or {}).get("time")
        running = part.state.status in _RUNNING
        if isinstance(t, dict):
            at = _ms(t.get("end")) or _ms(t.get("start"))
            if at is not None:
                return at, running
    return message.info.time.completed or message.info.time.created, running


def _writer(
    session: Session,
    message: Message,
    part: Part,
    folder: Folder,
    cwds: list[str],
    since_ms: int,
) -> Writer | None:
    at, running = _when(message, part)
    if not running and at is not None and at < since_ms:
        return None  # it finished before the change could have happened
    if part.type == "tool" and part.tool and part.state is not None:
        tool, given = part.tool, part.state.input
        why = names_folder(tool, given, cwds, folder)
    elif part.type == "patch":
        tool, given = "patch", (part.model_extra or {}).get("files")
        why = patch_names_folder(given, folder)
    else:
        return None
    if why is None:
        return None
    text = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False, default=str)
    excerpt = redact(text[:EDIT_SCAN_MAX_CHARS])[:EDIT_INPUT_EXCERPT_CHARS]
    return Writer(
        session.id,
        session.title,
        session.directory,
        tool,
        part.callID,
        part.id,
        at,
        why,
        excerpt,
        session.time.updated,
    )


async def reconcile(
    paths: Paths,
    store: Store,
    clock: Clock,
    client: OpencodeClient | None,
    files: Sequence[FileSource] = (),
) -> str | None:
    """Judge a change of the agent-owned files, if one is waiting; what happened, or ``None``.

    ``"staged"`` (a host session made it), ``"adopted"`` (a valid hand edit), ``"held"``
    (opencode could not be asked), ``"rolled back"`` (a killed run's leftovers), ``None``.
    The host is asked only when the files really differ from the validated copy.
    """
    outcome, change = rollback.look(paths, store, clock)
    if change is None:
        return outcome
    now = rollback.wall_ms()
    since = window_start(change, now)
    folder = Folder.of(paths.memories, change.changed)
    try:
        writers = await find_writers(client, folder, since, files)
    except HostError as exc:
        hold(store, clock, sorted(change.changed), exc)
        return HELD
    if rollback.lease_live(store, clock):
        return None  # a consolidation took the folder while we asked; its run decides
    waiting = edit_review.pending(paths)
    # A call already staged or decided on explains only the change it was shown with.
    used = edit_review.used_calls(store, waiting)
    writers = [w for w in writers if w.key not in used]
    joins = waiting is not None and bool(set(change.changed) & set(waiting.files))
    if writers or joins:
        return _stage(paths, store, clock, change, writers, since, now, joined=not writers)
    _clear_hold(store)
    if rollback.adopt(paths, clock, change):
        log.info("memory folder: a hand edit of %s adopted", ", ".join(sorted(change.changed)))
        return ADOPTED
    return None


def _stage(
    paths: Paths,
    store: Store,
    clock: Clock,
    change: rollback.FolderChange,
    writers: list[Writer],
    since: int,
    now: int,
    *,
    joined: bool,
) -> str | None:
    current = rollback.seen_change(paths) or change  # the folder may have moved on meanwhile
    seen = {
        "at": now,
        "since": since,
        "files": sorted(current.changed),
        "mtimes": current.mtimes_ms,
        "judged_at": change.judged_at_ms,
        "joined_waiting_edit": joined,
    }
    edit = edit_review.stage(
        paths, clock.now_ms(), current.changed, current.base, [asdict(w) for w in writers], seen
    )
    rollback.restore(paths, clock)
    rollback.judged(paths)
    _clear_hold(store)
    log.warning(
        "memory folder: %s changed by a host session's tool call (%s); staged for review "
        "(`memoryd review`), rolled back to the validated copy",
        ", ".join(sorted(current.changed)),
        ", ".join(edit.sessions) or "joined the agent edit already waiting",
    )
    return STAGED


def hold(store: Store, clock: Clock, files: list[str], error: Exception | str) -> None:
    """Keep a change waiting: opencode could not say whether a session made it."""
    prev = store.ledger.get_state(AGENT_EDIT_HELD)
    same = isinstance(prev, dict) and prev.get("files") == files
    first = prev.get("since") if same and isinstance(prev, dict) else None
    now = clock.now_ms()
    store.ledger.put_state(
        AGENT_EDIT_HELD, {"files": files, "since": first or now, "at": now, "error": str(error)}
    )
    (log.warning if first is None else log.debug)(
        "memory folder: a change of %s is held (neither adopted nor discarded) until opencode "
        "can say whether a session made it: %s",
        ", ".join(files),
        error,
    )


async def refuse_host_writes(
    client: OpencodeClient, store: Store, paths: Paths, started_ms: int
) -> None:
    """Fail a consolidation during which a host session's tool call named the memory folder:
    whatever that call wrote would become validated memory as the consolidator's own work."""
    folder = Folder.of(paths.memories, rollback.agent_files(paths.memories))
    used = edit_review.used_calls(store, edit_review.pending(paths))
    writers = [w for w in await find_writers(client, folder, started_ms) if w.key not in used]
    if writers:
        raise ConfinementError(
            "a host session's tool call named the memory folder during the consolidation",
            [f"session {w.session_id} ({w.tool}: {w.why})" for w in writers],
        )


def _clear_hold(store: Store) -> None:
    if store.ledger.get_state(AGENT_EDIT_HELD) is not None:
        store.ledger.put_state(AGENT_EDIT_HELD, None)


def held(store: Store, paths: Paths) -> dict[str, Any] | None:
    """The held change, while the folder still holds one (a stale record says nothing)."""
    got = store.ledger.get_state(AGENT_EDIT_HELD)
    if not isinstance(got, dict) or rollback.is_judged(paths):
        return None
    return got
