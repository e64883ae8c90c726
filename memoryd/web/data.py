"""What the pages show, gathered from the store, the status snapshot and the memory folder.

Nothing here computes pipeline state of its own: the numbers come from
:func:`memoryd.write.snapshot.snapshot` (the same ones ``memoryd status`` prints), files are read through
:mod:`memoryd.folder.guard` (no link is followed), and sessions are what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryd.clock import DAY, iso_ms
from memoryd.errors import ToolError
from memoryd.folder.guard import read_file, walk_files
from memoryd.folder.layout import AD_HOC_NOTES, MEMORY_FILE, SUMMARIES_DIR, SUMMARY_FILE
from memoryd.paths import Paths
from memoryd.scopes import PROJECTS_DIR
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.tools.files import decode
from memoryd.tuning import UI_CHART_DAYS as CHART_DAYS
from memoryd.tuning import UI_MAX_LISTED as MAX_LISTED
from memoryd.write.snapshot import snapshot

CHART_W, CHART_H, CHART_PAD = 600, 160, 20


def dashboard(store: Store, settings: Settings, paths: Paths) -> dict[str, Any]:
    """The status snapshot plus the few figures the dashboard puts first."""
    snap = snapshot(store, settings, paths)
    jobs = snap["stage1"]["jobs"]
    last = snap.get("last_pass") or {}
    p1 = last.get("phase1") or {}
    snap["pipeline"] = {
        "seen": p1.get("discovered"),
        "extracted": snap["stage1"]["outputs"],
        "pending": jobs.get("pending", 0) + jobs.get("running", 0),
        "failed": jobs.get("failed", 0),
        "last_pass": iso_ms(last.get("at")) if last else None,
    }
    return snap


@dataclass(frozen=True)
class Bar:
    day: str
    tokens: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int
    total: int
    width: int = CHART_W
    height: int = CHART_H
    pad: int = CHART_PAD


def token_chart(store: Store) -> Chart:
    """Tokens per UTC day for the last 30 days, laid out as SVG bars (oldest on the left)."""
    now = store.clock.now_ms()
    first = now - now % DAY - (CHART_DAYS - 1) * DAY
    per_day = store.ledger.tokens_per_day(first)
    peak = max(per_day.values(), default=0)
    slot = (CHART_W - 2 * CHART_PAD) / CHART_DAYS
    inner = CHART_H - 2 * CHART_PAD
    bars = []
    for i in range(CHART_DAYS):
        day = first + i * DAY
        tokens = per_day.get(day, 0)
        h = inner * tokens / peak if peak else 0.0
        if tokens and h < 1:
            h = 1.0
        bars.append(
            Bar(
                day=(iso_ms(day) or "")[:10],
                tokens=tokens,
                x=round(CHART_PAD + i * slot + 1, 1),
                y=round(CHART_PAD + inner - h, 1),
                width=round(slot - 2, 1),
                height=round(h, 1),
            )
        )
    return Chart(bars=bars, peak=peak, total=sum(per_day.values()))


@dataclass
class MemoryFile:
    path: str
    text: str | None
    error: str | None = None


def read_memory_file(paths: Paths, rel: str) -> MemoryFile:
    try:
        data, _ = read_file(paths.memories, rel)
    except ToolError as exc:
        return MemoryFile(rel, None, str(exc))
    return MemoryFile(rel, decode(data))


def list_files(paths: Paths, rel: str) -> list[str]:
    """Visible regular files under ``rel`` (empty when it does not exist), newest name first."""
    try:
        found = [e.rel for e in walk_files(paths.memories, rel)]
    except ToolError:
        return []
    return sorted(found, reverse=True)[:MAX_LISTED]


@dataclass
class MemoryView:
    memory: MemoryFile
    summary: MemoryFile
    projects: list[MemoryFile] = field(default_factory=list)
    rollouts: list[str] = field(default_factory=list)
    notes: list[MemoryFile] = field(default_factory=list)


def memory_view(paths: Paths) -> MemoryView:
    projects = [
        read_memory_file(paths, rel)
        for rel in sorted(list_files(paths, PROJECTS_DIR))
        if rel.endswith(".md")
    ]
    return MemoryView(
        memory=read_memory_file(paths, MEMORY_FILE),
        summary=read_memory_file(paths, SUMMARY_FILE),
        projects=projects,
        rollouts=list_files(paths, SUMMARIES_DIR),
        notes=[read_memory_file(paths, rel) for rel in list_files(paths, AD_HOC_NOTES)],
    )


def note_name(rel: str) -> str:
    return rel.rsplit("/", 1)[-1]


@dataclass
class SessionRow:
    session_id: str
    title: str | None
    cwd: str | None
    updated: str | None
    mode: str
    job_status: str | None
    job_error: str | None
    raw_memory: str | None
    rollout_summary: str | None
    usage_count: int
    consolidated: bool
    sort_key: int


def sessions(store: Store) -> list[SessionRow]:
    """Every session memoryd knows (extracted, with a job, or with a mode), newest first."""
    outputs = {o.session_id: o for o in store.outputs.newest_first()}
    modes = store.outputs.memory_modes()
    jobs = store.stage1.stage1_jobs()
    rows = []
    for sid in set(outputs) | set(modes) | set(jobs):
        o, job = outputs.get(sid), jobs.get(sid)
        when = (
            o.source_updated_at
            if o
            else (job["finished_at"] or job["started_at"] or 0)
            if job
            else 0
        )
        rows.append(
            SessionRow(
                session_id=sid,
                title=o.title if o else None,
                cwd=o.cwd if o else None,
                updated=iso_ms(when) if when else None,
                mode=modes.get(sid, "enabled"),
                job_status=job["status"] if job else None,
                job_error=job["last_error"] if job else None,
                raw_memory=o.raw_memory if o else None,
                rollout_summary=o.rollout_summary if o else None,
                usage_count=o.usage_count if o else 0,
                consolidated=o.selected_for_phase2 if o else False,
                sort_key=when or 0,
            )
        )
    rows.sort(key=lambda r: (r.sort_key, r.session_id), reverse=True)
    return rows
