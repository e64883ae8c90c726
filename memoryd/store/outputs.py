"""Stage-1 outputs, per-session memory modes and usage counters: what phase 2 selects from."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from memoryd.clock import DAY, Clock
from memoryd.scopes import scope_key, scope_root
from memoryd.store.db import write_tx
from memoryd.store.jobs import STAGE1, enqueue_global
from memoryd.tuning import PHASE2_FRESH_SHARE

MemoryMode = Literal["enabled", "disabled", "polluted"]
MODES: tuple[MemoryMode, ...] = ("enabled", "disabled", "polluted")
PRUNE_BATCH = 200


@dataclass(frozen=True)
class Output:
    session_id: str
    source_updated_at: int
    raw_memory: str
    rollout_summary: str
    rollout_slug: str | None
    cwd: str | None
    title: str | None
    generated_at: int
    usage_count: int
    last_usage: int | None
    selected_for_phase2: bool
    project_id: str | None = None
    worktree: str | None = None

    @property
    def scope_root(self) -> str | None:
        """The folder bounding this output's project scope (``None`` until the host told us)."""
        return scope_root(self.worktree, self.cwd)

    @property
    def scope(self) -> str | None:
        """The project key this output belongs to, ``None`` for the global layer."""
        root = self.scope_root
        return scope_key(root) if root else None

    @classmethod
    def from_row(cls, r: sqlite3.Row) -> Output:
        return cls(
            session_id=r["session_id"],
            source_updated_at=r["source_updated_at"],
            raw_memory=r["raw_memory"],
            rollout_summary=r["rollout_summary"],
            rollout_slug=r["rollout_slug"],
            cwd=r["cwd"],
            title=r["title"],
            generated_at=r["generated_at"],
            usage_count=r["usage_count"],
            last_usage=r["last_usage"],
            selected_for_phase2=bool(r["selected_for_phase2"]),
            project_id=r["project_id"],
            worktree=r["worktree"],
        )


# The search index's view of the outputs; both read only the covering index
# ``idx_stage1_outputs_version`` (tests/unit/tools/test_index_window.py checks the plans).
_ENABLED = """FROM stage1_outputs o LEFT JOIN session_meta m ON m.session_id = o.session_id
    WHERE COALESCE(m.memory_mode, 'enabled') = 'enabled'"""
SIGNATURES_SQL = (
    "SELECT o.session_id, o.source_updated_at, o.generated_at, o.worktree, o.cwd " + _ENABLED
)
MARK_SQL = (
    "SELECT COUNT(*), TOTAL(o.source_updated_at), TOTAL(o.generated_at), COUNT(o.worktree) "
    + _ENABLED
)


class Outputs:
    """Stage-1 outputs, memory modes and usage: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    # -- outputs --------------------------------------------------------------------------

    def output(self, session_id: str) -> Output | None:
        r = self._conn.execute(
            "SELECT * FROM stage1_outputs WHERE session_id = ?", (session_id,)
        ).fetchone()
        return Output.from_row(r) if r else None

    def newest_first(self) -> list[Output]:
        rows = self._conn.execute(
            "SELECT * FROM stage1_outputs ORDER BY source_updated_at DESC, session_id DESC"
        )
        return [Output.from_row(r) for r in rows]

    def enabled_signatures(self) -> list[tuple[str, int, int, str | None, str | None]]:
        """Each enabled session's output version: id, source update, generation, worktree, cwd.

        Reads only the covering index ``idx_stage1_outputs_version``, not the outputs' (large,
        overflowing) rows; the search index compares it with what it indexed."""
        return [tuple(r) for r in self._conn.execute(SIGNATURES_SQL)]

    def enabled_mark(self) -> str:
        """One line that changes whenever an enabled output's version does (the search index's
        watermark): count, summed times and how many worktrees are known (the backfill fills
        those in without a new version of the text)."""
        row = self._conn.execute(MARK_SQL).fetchone()
        return f"outputs:{row[0]}:{row[1]:.0f}:{row[2]:.0f}:{row[3]}"

    def phase2_selection(self, limit: int, max_unused_days: int) -> list[Output]:
        """What phase 2 consolidates: enabled sessions with content, used or updated recently enough.

        Ranked by usage, then last use (or update), then update time, so citations decide what
        stays in memory; but a share of the places (``PHASE2_FRESH_SHARE``) goes to the newest
        sessions not ranked in, so a heavily cited history never keeps a new session out. The
        caller renders the result in a stable order of its own.
        """
        cutoff = self._clock.now_ms() - max_unused_days * DAY
        eligible = """
            FROM stage1_outputs o LEFT JOIN session_meta m ON m.session_id = o.session_id
            WHERE COALESCE(m.memory_mode, 'enabled') = 'enabled'
              AND (TRIM(o.raw_memory) != '' OR TRIM(o.rollout_summary) != '')
              AND COALESCE(o.last_usage, o.source_updated_at) >= ?
        """
        fresh = int(limit * PHASE2_FRESH_SHARE)
        ranked = [
            Output.from_row(r)
            for r in self._conn.execute(
                f"""SELECT o.* {eligible}
                ORDER BY o.usage_count DESC, COALESCE(o.last_usage, o.source_updated_at) DESC,
                         o.source_updated_at DESC, o.session_id DESC
                LIMIT ?""",
                (cutoff, limit),
            )
        ]
        if fresh == 0 or len(ranked) < limit:
            return ranked  # everything eligible fits, or no place is kept for new sessions
        kept = ranked[: limit - fresh]
        taken = {o.session_id for o in kept}
        newest = self._conn.execute(
            f"""SELECT o.* {eligible}
            ORDER BY o.source_updated_at DESC, o.session_id DESC LIMIT ?""",
            (cutoff, limit),
        )
        for r in newest:
            if len(kept) == limit:
                break
            if r["session_id"] not in taken:
                kept.append(Output.from_row(r))
                taken.add(r["session_id"])
        return kept

    def consumed_count(self) -> int:
        count: int = self._conn.execute(
            "SELECT COUNT(*) FROM stage1_outputs WHERE selected_for_phase2 = 1"
        ).fetchone()[0]
        return count

    def output_count(self) -> int:
        count: int = self._conn.execute("SELECT COUNT(*) FROM stage1_outputs").fetchone()[0]
        return count

    def extracted_watermarks(self) -> dict[str, int]:
        """For each session, the newest ``time.updated`` already extracted (with or without output)."""
        marks: dict[str, int] = {}
        for sid, wm in self._conn.execute(
            "SELECT session_id, source_updated_at FROM stage1_outputs"
        ):
            marks[sid] = wm
        for sid, wm in self._conn.execute(
            "SELECT job_key, last_success_watermark FROM jobs WHERE kind = ? AND status = 'done'",
            (STAGE1,),
        ):
            if wm is not None and wm > marks.get(sid, -1):
                marks[sid] = wm
        return marks

    def backfill_projects(self, projects: dict[str, tuple[str | None, str | None]]) -> int:
        """Fill in project id and worktree for outputs extracted before scopes existed.

        ``projects`` maps session ids to (project id, worktree) as the host lists them now; only
        rows still missing a worktree are touched, so the pass after the migration does the work
        once and later passes write nothing. Returns the rows updated.
        """
        missing = {
            r[0]
            for r in self._conn.execute(
                "SELECT session_id FROM stage1_outputs WHERE worktree IS NULL"
            )
        }
        todo = [(pid, wt, sid) for sid, (pid, wt) in projects.items() if sid in missing and wt]
        if not todo:
            return 0
        with write_tx(self._conn) as c:
            return sum(
                c.execute(
                    "UPDATE stage1_outputs SET project_id = ?, worktree = ? "
                    "WHERE session_id = ? AND worktree IS NULL",
                    row,
                ).rowcount
                for row in todo
            )

    def scopes_of_outputs(self) -> dict[str, str]:
        """Project key → scope root for every output that has a project."""
        found: dict[str, str] = {}
        for wt, cwd in self._conn.execute(
            "SELECT DISTINCT worktree, cwd FROM stage1_outputs WHERE worktree IS NOT NULL"
        ):
            root = scope_root(wt, cwd)
            if root:
                found[scope_key(root)] = root
        return found

    def forget_project(self, key: str) -> list[str]:
        """Forget every output of one project: like forgetting each of its sessions. Returns their ids."""
        ids = [o.session_id for o in self.newest_first() if o.scope == key]
        for sid in ids:
            self.delete_session_memory(sid)
            self.set_mode(sid, "disabled", f"forgotten with project {key}")
        return ids

    def known_session_ids(self) -> set[str]:
        """Sessions memoryd holds anything about (outputs or stage-1 jobs)."""
        ids = {r[0] for r in self._conn.execute("SELECT session_id FROM stage1_outputs")}
        ids |= {
            r[0] for r in self._conn.execute("SELECT job_key FROM jobs WHERE kind = ?", (STAGE1,))
        }
        return ids

    def delete_session_memory(self, session_id: str) -> bool:
        """Forget a session: its output and stage-1 job go; phase 2 is enqueued if it had consumed the row.

        Returns True when phase 2 was enqueued.
        """
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            row = c.execute(
                "SELECT selected_for_phase2 FROM stage1_outputs WHERE session_id = ?", (session_id,)
            ).fetchone()
            c.execute("DELETE FROM stage1_outputs WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM jobs WHERE kind = ? AND job_key = ?", (STAGE1, session_id))
            c.execute("DELETE FROM save_points WHERE session_id = ?", (session_id,))
            c.execute("DELETE FROM compactions WHERE session_id = ?", (session_id,))
            if row is not None and row["selected_for_phase2"]:
                enqueue_global(c, now, urgent=True)
                return True
            return False

    def record_usage(self, session_ids: list[str]) -> int:
        """Count one citation for each known id; unknown ids change nothing. Returns rows updated."""
        if not session_ids:
            return 0
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            n = 0
            for sid in dict.fromkeys(session_ids):
                n += c.execute(
                    "UPDATE stage1_outputs SET usage_count = usage_count + 1, last_usage = ? WHERE session_id = ?",
                    (now, sid),
                ).rowcount
            return n

    def record_citations(self, cited: list[tuple[str, list[str]]]) -> tuple[int, int]:
        """Count citations once per citing reply part.

        ``cited`` holds (key, session ids) pairs where the key names the reply part that cited
        (``<session>:<part>``); a key already seen is ignored, so replaying a spool or seeing the
        same block again in a transcript never counts twice. Returns (new parts, rows updated).
        """
        now = self._clock.now_ms()
        new = updated = 0
        with write_tx(self._conn) as c:
            for key, ids in cited:
                if not c.execute(
                    "INSERT OR IGNORE INTO citation_seen (key, at) VALUES (?, ?)", (key, now)
                ).rowcount:
                    continue
                new += 1
                for sid in dict.fromkeys(ids):
                    updated += c.execute(
                        "UPDATE stage1_outputs SET usage_count = usage_count + 1, last_usage = ? WHERE session_id = ?",
                        (now, sid),
                    ).rowcount
            c.execute("DELETE FROM citation_seen WHERE at < ?", (now - 90 * DAY,))
        return new, updated

    def prune_outputs(self, max_unused_days: int) -> int:
        """Retention: drop up to a batch of stale rows that the last consolidation did not use."""
        cutoff = self._clock.now_ms() - max_unused_days * DAY
        with write_tx(self._conn) as c:
            return c.execute(
                """
                DELETE FROM stage1_outputs WHERE session_id IN (
                    SELECT session_id FROM stage1_outputs
                    WHERE selected_for_phase2 = 0 AND COALESCE(last_usage, source_updated_at) < ?
                    ORDER BY COALESCE(last_usage, source_updated_at) ASC, source_updated_at ASC, session_id ASC
                    LIMIT ?)
                """,
                (cutoff, PRUNE_BATCH),
            ).rowcount

    # -- memory modes ---------------------------------------------------------------------

    def memory_mode(self, session_id: str) -> MemoryMode | None:
        r = self._conn.execute(
            "SELECT memory_mode FROM session_meta WHERE session_id = ?", (session_id,)
        ).fetchone()
        return r[0] if r else None

    def memory_modes(self) -> dict[str, MemoryMode]:
        return {
            r[0]: r[1]
            for r in self._conn.execute("SELECT session_id, memory_mode FROM session_meta")
        }

    def stamp_mode_if_absent(self, session_id: str, mode: MemoryMode) -> MemoryMode:
        with write_tx(self._conn) as c:
            c.execute(
                "INSERT OR IGNORE INTO session_meta (session_id, memory_mode, updated_at) VALUES (?, ?, ?)",
                (session_id, mode, self._clock.now_ms()),
            )
            mode_now: MemoryMode = c.execute(
                "SELECT memory_mode FROM session_meta WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
            return mode_now

    def stamp_modes_if_absent(self, session_ids: list[str], mode: MemoryMode) -> None:
        """Batch form of :meth:`stamp_mode_if_absent` for discovery (one transaction)."""
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            c.executemany(
                "INSERT OR IGNORE INTO session_meta (session_id, memory_mode, updated_at) VALUES (?, ?, ?)",
                [(sid, mode, now) for sid in session_ids],
            )

    def set_mode(self, session_id: str, mode: MemoryMode, reason: str | None = None) -> None:
        """Set a session's mode; leaving ``enabled`` on a consumed row enqueues phase 2 (forgetting)."""
        if mode not in MODES:
            raise ValueError(f"unknown memory mode {mode!r}")
        now = self._clock.now_ms()
        with write_tx(self._conn) as c:
            c.execute(
                """INSERT INTO session_meta (session_id, memory_mode, reason, updated_at) VALUES (?, ?, ?, ?)
                   ON CONFLICT (session_id) DO UPDATE SET memory_mode = excluded.memory_mode,
                   reason = excluded.reason, updated_at = excluded.updated_at""",
                (session_id, mode, reason, now),
            )
            if mode != "enabled":
                row = c.execute(
                    "SELECT selected_for_phase2 FROM stage1_outputs WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                if row is not None and row["selected_for_phase2"]:
                    enqueue_global(c, now, urgent=True)
