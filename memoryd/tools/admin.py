"""``memory_inspect``, ``memory_mode`` and ``memory_reset``: looking at and steering the pipeline.

Inspect is read-only and reuses :func:`memoryd.write.snapshot.snapshot` (the same numbers ``memoryd
status`` prints), adding what a tool user wants next: the folder's files, how big the injected
summary is, and how many sessions sit in each memory mode. Reset is the one destructive tool, so
it demands ``confirm=True`` (exactly ``True``, not a truthy string) and refuses while a
consolidation agent holds the phase-2 lease and is writing the folder.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memoryd import tokenizer as tokens
from memoryd.errors import InvalidArgument, LeaseHeld, NotFound, Refused
from memoryd.folder.guard import open_root, read_file, walk_all
from memoryd.folder.layout import SUMMARY_FILE
from memoryd.paths import Paths
from memoryd.settings import CODEX_ONLY_KEYS, UNKNOWN_CODEX_KEY, Settings
from memoryd.store import Store
from memoryd.store.outputs import MODES
from memoryd.sync.urls import mask_remote
from memoryd.tools.common import Result, iso
from memoryd.tools.files import decode
from memoryd.tools.scope import ALL, Scope
from memoryd.tuning import INSPECT_MAX_ENTRIES
from memoryd.write.reset import reset_memory
from memoryd.write.snapshot import snapshot

if TYPE_CHECKING:
    from memoryd.tools.index import SearchIndex


@dataclass(frozen=True)
class TreeEntry:
    path: str
    kind: Literal["d", "f", "l", "?"]
    size: int | None = None

    def line(self) -> str:
        if self.kind == "d":
            return f"d {self.path}/"
        if self.kind == "l":
            return f"l {self.path} (symlink, not followed)"
        if self.kind == "?":
            return f"? {self.path} (not a file or folder)"
        return f"f {self.path} ({self.size} bytes)"


@dataclass(frozen=True)
class InspectReport(Result):
    status: dict[str, Any]
    memory_root: str
    folder_exists: bool
    files: list[TreeEntry] = field(default_factory=list)
    files_truncated: int = 0
    summary_chars: int | None = None
    summary_tokens: int | None = None
    modes: dict[str, int] = field(default_factory=dict)
    selection: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    codex_only: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_text(self) -> str:
        s1, p2 = self.status["stage1"], self.status["phase2"]
        jobs = ", ".join(f"{k} {v}" for k, v in sorted(s1["jobs"].items())) or "none"
        out = [f"stage 1: {s1['outputs']} outputs; jobs: {jobs}"]
        for err in s1["last_errors"]:
            out.append(
                f"  error {err.get('session_id', '?')} at {err.get('at')}: {err.get('error')}"
            )
        out.append(
            f"phase 2: {p2['status']}; last success {p2.get('last_success') or 'never'}; "
            f"next eligible {p2.get('next_eligible')}; consumed outputs {p2.get('consumed_outputs')}"
        )
        if p2.get("last_error"):
            out.append(f"  last error: {p2['last_error']}")
        spent = self.status["tokens"]["spent"]
        out.append(f"tokens spent: {spent['total']} in {spent['calls']} calls")
        runner = self.status.get("runner") or {}
        per_runner = self.status["tokens"].get("per_runner") or {}
        out.append(
            f"runner: {runner.get('name') or 'not chosen yet'} (setting {runner.get('setting')}"
            + (f"; {runner['why']}" if runner.get("why") else "")
            + ")"
            + "".join(
                f"; {name} {v['tokens']} tokens in {v['calls']} calls"
                + (f" ({v['estimated_tokens']} estimated)" if v["estimated_tokens"] else "")
                for name, v in per_runner.items()
            )
        )
        out.append(
            "sessions by mode: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.modes.items())) or "none")
        )
        if self.summary_chars is None:
            out.append(f"summary: {SUMMARY_FILE} does not exist yet")
        else:
            out.append(
                f"summary: {SUMMARY_FILE} {self.summary_chars} chars, {self.summary_tokens} tokens"
            )
        b = self.status.get("budget") or {}
        if b:
            left = (
                "unlimited"
                if b.get("left_today") is None
                else f"{b['left_today']} tokens left today"
            )
            out.append(f"budget: {left}; {b.get('calls_last_hour')} calls in the last hour")
            if b.get("waiting"):
                out.append(f"  waiting: {b['waiting']}")
        out.append(f"next consolidation would select {len(self.selection)} session memories:")
        for sel in self.selection[:20]:
            out.append(
                f"  {sel['session_id']}  used {sel['usage_count']}x  updated {sel['updated_at']}  {sel['title'] or ''}"
            )
        if len(self.selection) > 20:
            out.append(f"  [{len(self.selection) - 20} more]")
        out.append("effective settings (value, source):")
        for key, v in self.settings.items():
            out.append(f"  {key} = {v['value']!r}  ({v['source']})")
        if self.codex_only:
            out.append("accepted from Codex's [memories] table, no effect here:")
            for key, v in self.codex_only.items():
                out.append(f"  {key} = {v['value']!r}  ({v['why']})")
        if not self.folder_exists:
            out.append(f"memory folder {self.memory_root}: does not exist yet")
        else:
            out.append(f"memory folder {self.memory_root}:")
            out += [f"  {e.line()}" for e in self.files] or ["  (empty)"]
            if self.files_truncated:
                out.append(f"  [{self.files_truncated} more entries not shown]")
        return "\n".join(out)


def _kind(mode: int) -> Literal["d", "f", "l", "?"]:
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISREG(mode):
        return "f"
    return "?"


def memory_inspect(store: Store, settings: Settings, paths: Paths) -> InspectReport:
    """A read-only report on the pipeline and the memory folder (refused if the folder is a link)."""
    root = paths.memories
    fd = open_root(root)  # raises Refused for a symlinked root
    exists = fd is not None
    if fd is not None:
        os.close(fd)
    files: list[TreeEntry] = []
    seen = 0
    for entry in walk_all(root):
        seen += 1
        if len(files) < INSPECT_MAX_ENTRIES:
            kind = _kind(entry.st.st_mode)
            files.append(TreeEntry(entry.rel, kind, entry.st.st_size if kind == "f" else None))
    chars = count = None
    if exists:
        try:
            data, _ = read_file(root, SUMMARY_FILE)
        except (NotFound, Refused, InvalidArgument):
            pass
        else:
            text = decode(data)
            try:
                chars, count = len(text), tokens.count(text)
            finally:
                tokens.release()  # a long-lived server (MCP, web UI) must not keep the helper
    modes: dict[str, int] = dict(Counter(store.outputs.memory_modes().values()))
    selection = [
        {
            "session_id": o.session_id,
            "usage_count": o.usage_count,
            "updated_at": iso(o.source_updated_at),
            "last_usage": iso(o.last_usage),
            "title": o.title,
        }
        for o in store.outputs.phase2_selection(
            settings.max_raw_memories_for_consolidation, settings.max_unused_days
        )
    ]
    sources = settings.sources
    effective: dict[str, dict[str, Any]] = {}
    for key in sources or [k for k in type(settings).model_fields if k != "host"]:
        obj: Any = settings
        for part in key.split("."):
            obj = getattr(obj, part)
        if hasattr(obj, "model_dump"):
            obj = obj.model_dump()
        if "password" in key and isinstance(obj, str) and obj and key != "host.password_env":
            obj = "********"
        elif key == "sync_remote" and isinstance(obj, str):
            obj = mask_remote(obj)  # an https URL may carry a token as its user name
        effective[key] = {"value": obj, "source": sources.get(key, "default")}
    codex_only = {
        key: {"value": value, "why": CODEX_ONLY_KEYS.get(key, UNKNOWN_CODEX_KEY)}
        for key, value in settings.codex_only.items()
    }
    return InspectReport(
        selection=selection,
        settings=effective,
        codex_only=codex_only,
        status=snapshot(store, settings, paths),
        memory_root=str(root),
        folder_exists=exists,
        files=files,
        files_truncated=seen - len(files),
        summary_chars=chars,
        summary_tokens=count,
        modes=modes,
    )


@dataclass(frozen=True)
class ModeResult(Result):
    session_id: str
    mode: str
    previous: str | None

    def to_text(self) -> str:
        was = f" (was {self.previous})" if self.previous and self.previous != self.mode else ""
        return f"session {self.session_id}: memory {self.mode}{was}"


def memory_mode(
    store: Store, mode: str, session_id: str | None, *, scope: Scope = ALL
) -> ModeResult:
    """Set one session's memory mode: ``enabled``, ``disabled`` or ``polluted``.

    Leaving ``enabled`` on a session already consolidated enqueues phase 2 (the store does this),
    so its memories are forgotten; ``polluted`` marks a session that saw untrusted context.
    """
    if mode not in MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidArgument("session_id is required")
    output = store.outputs.output(session_id)
    if output is not None and not scope.writable.allows_key(output.scope):
        raise Refused(f"session {session_id} belongs to another project; it cannot be changed here")
    previous = store.outputs.memory_mode(session_id)
    store.outputs.set_mode(session_id, mode)
    return ModeResult(session_id=session_id, mode=mode, previous=previous)


@dataclass(frozen=True)
class ResetResult(Result):
    memory_root: str
    index_cleared: bool

    def to_text(self) -> str:
        return (
            f"memory reset: stage-1 outputs and jobs deleted, {self.memory_root} emptied; "
            "session modes are kept and consolidation waits out its cooldown"
        )


def memory_reset(
    store: Store,
    paths: Paths,
    confirm: object,
    *,
    index: SearchIndex | None = None,
    scope: Scope = ALL,
) -> ResetResult:
    """Forget everything (see :func:`memoryd.write.reset.reset_memory`); needs ``confirm is True``.

    A caller bound to one project (an MCP tool call) is refused while other projects have memory:
    wiping them is not its to decide.
    """
    others = sorted(
        {
            o.scope
            for o in store.outputs.newest_first()
            if o.scope and not scope.writable.allows_key(o.scope)
        }
    )
    if others:
        raise Refused(
            f"memory also holds {len(others)} other project(s) ({', '.join(others[:3])}); "
            "reset them from a shell with `memoryd reset --yes`, or forget this project's memory "
            "with memory_forget"
        )
    if confirm is not True:
        raise Refused(
            "memory_reset deletes every memory (extracted sessions, the memory folder, notes); "
            "call it again with confirm=true if that is really intended"
        )
    try:
        reset_memory(store, paths)
    except LeaseHeld as exc:
        raise Refused(str(exc)) from exc
    if index is not None:
        index.clear()
    return ResetResult(memory_root=str(paths.memories), index_cleared=index is not None)
