"""Phase 2: claim → sync → diff → consolidate → audit → validate → reset baseline.

One machine-wide run at a time (a DB lease with an ownership token, heartbeat every 90 s). The
memory folder is brought in line with the DB (selected rollout summaries, ``raw_memories.md``),
then compared with the last good baseline. Only a non-empty diff (or invalid artifacts) costs a
model call: a consolidation agent whose opencode session is rooted in the memory folder, and
whose permissions deny everything but file tools there.

What the agent may change is narrow (``MEMORY.md``, ``memory_summary.md``, ``skills/``, project
summary layers), and it is confined twice. In opencode: the session carries permission rules
built for the folder (:mod:`memoryd.host.permissions`), the instance is booted afresh from a
folder swept of everything outside memoryd's layout, and a run is refused when opencode would
load config from the folder's parents (:mod:`memoryd.folder.confine`). After it: every other
tracked file is put back from a snapshot, every entry outside the layout is removed, and a run
that needed either, or left invalid artifacts, fails. A run that fails, is aborted or is killed
leaves the agent-owned files rolled back to the last validated copy (:mod:`memoryd.folder.rollback`),
which is also all the read path ever injects. The baseline stays where it was so the next run
sees the same diff. Only a validated run replaces the baseline (with a fresh single commit:
redacted or forgotten text must not linger in git history) and marks which outputs were consumed.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd import prompts
from memoryd.errors import (
    ConfinementError,
    InvalidMemory,
    OwnershipLost,
    PathError,
)
from memoryd.extensions.claude_code import sync_claude_import
from memoryd.extensions.codex import export_codex, import_codex
from memoryd.folder import rollback
from memoryd.folder.audit import read_memory_file, with_user_writes
from memoryd.folder.baseline_proc import open_baseline
from memoryd.folder.confine import sweep
from memoryd.folder.layout import DIFF_FILE, EXTENSIONS_DIR
from memoryd.folder.workspace import Workspace
from memoryd.fsutil import atomic_write
from memoryd.host.client_sources import client_sources
from memoryd.paths import Paths, bump_change_mark
from memoryd.read.block import summary_token_budget
from memoryd.redact import contains_secret, redact
from memoryd.runner.base import AgentRun
from memoryd.scopes import PROJECTS_DIR
from memoryd.store import Store
from memoryd.store.jobs import GLOBAL, GLOBAL_KEY
from memoryd.store.keys import FOLDER_SWEPT
from memoryd.store.outputs import Output
from memoryd.tuning import PHASE2_HEARTBEAT_S, RESOURCE_RETENTION_DAYS
from memoryd.write import agent_edits, review
from memoryd.write.phase_base import PhaseBase, Verdict

if TYPE_CHECKING:
    from memoryd.folder.baseline_proc import BaselineLike
    from memoryd.folder.linediff import WorkspaceDiff

log = logging.getLogger(__name__)


class Phase2Status(enum.StrEnum):
    """How a phase-2 run ended (a string enum: it is also what ``status --json`` prints)."""

    SUCCEEDED = "succeeded"
    STAGED = "staged"  # review mode: validated, waiting outside the folder for a person
    SKIPPED_REVIEW = "skipped_review"  # a staged consolidation is still waiting
    NO_CHANGES = "no_changes"  # the folder matches the baseline: no model call
    NO_INPUTS = "no_inputs"  # nothing selected, no notes, no earlier memory: no model call
    SKIPPED_COOLDOWN = "skipped_cooldown"
    SKIPPED_RUNNING = "skipped_running"
    SKIPPED_BACKOFF = "skipped_backoff"
    SKIPPED_DISABLED = "skipped_disabled"
    SKIPPED_BUDGET = "skipped_budget"
    SKIPPED_HOST = "skipped_host"
    SKIPPED_DISK = "skipped_disk"  # the memory folder or state refused a write; nothing changed
    FAILED = "failed"
    HEARTBEAT_LOST = "heartbeat_lost"


@dataclass
class Phase2Result:
    status: Phase2Status
    detail: str = ""
    consumed: int = 0
    changes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status not in (Phase2Status.FAILED, Phase2Status.HEARTBEAT_LOST)


def extensions_block(root: Path) -> str:
    ext = root / "extensions"
    if not ext.is_dir():
        return ""
    names = sorted(
        p.parent.name for p in ext.glob("*/instructions.md") if not p.parent.is_symlink()
    )
    if not names:
        return ""
    lines = [
        "## Extensions",
        "",
        "Other sources feed this folder under `extensions/`. Each source has an `instructions.md` that says how",
        "to use its files. Read every one of these before you edit anything:",
        "",
        *[f"- `extensions/{n}/instructions.md`" for n in names],
        "",
        "Everything under `extensions/` is input: never edit, move or delete it. When the diff shows an",
        "extension file as deleted (D), remove the memory that only that file supported.",
    ]
    return "\n".join(lines)


def projects_block(keys: list[str], diff: WorkspaceDiff, budget: int) -> str:
    """The prompt's account of the project layers: the layout, and which projects need work."""
    touched: dict[str, set[str]] = {}
    for c in diff.changes:
        parts = c.path.split("/")
        if len(parts) > 2 and parts[0] == PROJECTS_DIR:
            touched.setdefault(parts[1], set()).add(c.status)
    if not keys and not touched:
        return ""
    lines = [
        "## Projects",
        "",
        "Memory has layers. The files at the top of this folder are the global layer: what holds in",
        "every project (the user, their preferences, general tips). Each project (one checkout,",
        "named by a key) has a folder `projects/<key>/` with its own inputs, written by memoryd:",
        "`project.md` (which checkout it is), `raw_memories.md`, `rollout_summaries/`, `notes/`. Its",
        "layer is yours to write:",
        "",
        "- `projects/<key>/memory_summary.md` (first line exactly `v1`): what every session in that",
        "  project should see. It is shown together with the global `memory_summary.md`, and never in",
        "  another project.",
        "- `projects/<key>/MEMORY.md` (optional): that project's handbook, same format as `MEMORY.md`.",
        "",
        "A fact about one project's code, setup or conventions goes into that project's layer. Only",
        "what holds across projects goes into the global files. Never copy a project's facts into",
        "another project's layer. The global summary and one project summary share one budget:",
        f"together at most {budget} tokens, so keep each short.",
        "",
    ]
    changed = sorted(k for k in touched if k in keys)
    gone = sorted(k for k in touched if k not in keys)
    if changed:
        lines.append("Projects whose inputs changed (work on these; leave the others as they are):")
        for key in changed:
            what = "new" if touched[key] == {"A"} else "changed"
            lines.append(f"- `projects/{key}/` ({what}; read its `project.md` first)")
    else:
        lines.append("No project's inputs changed: leave the `projects/` layers as they are.")
    if gone:
        lines.append("")
        lines.append(
            "Projects removed (all their memories were forgotten): remove from the global files "
            "whatever only they supported:"
        )
        lines += [f"- `projects/{key}/`" for key in gone]
    return "\n".join(lines)


def consolidation_prompt(paths: Paths, project_keys: list[str], diff: WorkspaceDiff) -> str:
    budget = summary_token_budget(paths)
    return prompts.render(
        "consolidation.md",
        memory_root=str(paths.memories),
        diff_file=DIFF_FILE,
        extensions_block=extensions_block(paths.memories),
        summary_token_budget=str(budget),
        projects_block=projects_block(project_keys, diff, budget),
    )


def redact_agent_files(root: Path) -> list[str]:
    """Last line of defence: scrub secrets from what the consolidator wrote before it is committed.

    Its inputs are already redacted, but a model can still copy or invent a credential; nothing
    that looks like one may reach the summary every session sees, or the baseline history.
    """
    touched = []
    candidates = [root / "MEMORY.md", root / "memory_summary.md"]
    projects = root / PROJECTS_DIR
    if projects.is_dir() and not projects.is_symlink():
        for folder in sorted(projects.iterdir()):
            candidates += [folder / "MEMORY.md", folder / "memory_summary.md"]
    skills = root / "skills"
    if skills.is_dir() and not skills.is_symlink():
        candidates += sorted(p for p in skills.rglob("*") if p.is_file() and not p.is_symlink())
    for path in candidates:
        try:  # over its cap it is never read here: validation refuses the run instead
            raw = read_memory_file(root, path.relative_to(root).as_posix())
        except PathError:
            continue
        if raw is None:
            continue
        text = raw.decode("utf-8", errors="replace")
        if contains_secret(text):
            atomic_write(path, redact(text))
            touched.append(str(path.relative_to(root)))
    if touched:
        log.warning("redacted secrets the consolidator wrote into: %s", ", ".join(touched))
    return touched


def _held(baseline: BaselineLike, writes: dict[str, bytes | None]) -> dict[str, Any] | None:
    """The user's note writes during a run stay changes for the next one: the new baseline keeps
    those paths as the old one had them (absent, or its bytes)."""
    if not writes:
        return None
    old = baseline.head_files()
    return {rel: (False, old[rel]) if rel in old else None for rel in writes}


def _note_swept(p: PhaseBase, when: str, entries: list[str]) -> None:
    p.store.ledger.put_state(
        FOLDER_SWEPT, {"at": p.clock.now_ms(), "when": when, "removed": entries}
    )


async def _judge_edits(p: PhaseBase) -> Phase2Result | None:
    """A change of the agent-owned files is judged before a run may read or record it."""
    files = client_sources(p.settings)
    if await agent_edits.reconcile(p.paths, p.store, p.clock, p.client, files) != agent_edits.HELD:
        return None
    return Phase2Result(
        Phase2Status.SKIPPED_HOST, "a change of the memory folder waits for opencode"
    )


class Phase2(PhaseBase):
    _claimed_input: int | None = None

    def workspace(self) -> Workspace:
        return Workspace(self.paths.memories, clock=self.clock)

    def baseline(self) -> BaselineLike:
        return open_baseline(self.paths.baseline_git, self.paths.memories)

    async def run(self, *, force: bool = False) -> Phase2Result:
        if not self.settings.generate_memories:
            return Phase2Result(Phase2Status.SKIPPED_DISABLED)
        # A stage built from memory forgotten since can never be accepted: drop it and run again.
        review.drop_if_forgotten(self.store, self.paths)
        if review.pending(self.paths) is not None:
            return Phase2Result(
                Phase2Status.SKIPPED_REVIEW, "a consolidation is waiting for review"
            )
        if (held := await _judge_edits(self)) is not None:
            return held
        log.debug("phase 2: claiming the consolidation")
        claim = self.store.phase2.claim_phase2(worker_id=self.worker_id, ignore_cooldown=force)
        if not claim.claimed:
            return Phase2Result(Phase2Status(claim.status))
        assert claim.token is not None
        token = claim.token
        self._claimed_input = claim.watermark
        try:
            result = await self._run_claimed(token)
        except asyncio.CancelledError:
            self.store.phase2.release_phase2(token)
            raise
        except OwnershipLost as exc:
            return Phase2Result(Phase2Status.HEARTBEAT_LOST, str(exc))
        except Exception as exc:  # one policy for both phases: PhaseBase.judge
            failure = self.judge(exc, self.settings.consolidation_model)
            if failure.released:  # the baseline is untouched: simply try again next pass
                self.store.phase2.release_phase2(token, f"waiting: {failure.reason}")
                status = {
                    Verdict.WAIT_BUDGET: Phase2Status.SKIPPED_BUDGET,
                    Verdict.WAIT_HOST: Phase2Status.SKIPPED_HOST,
                    Verdict.WAIT_DISK: Phase2Status.SKIPPED_DISK,
                }[failure.verdict]
                log.warning("phase 2 waits: %s", failure.reason)
                return Phase2Result(status, failure.reason)
            self.store.phase2.mark_phase2_failed(token, failure.reason)
            log.warning("phase 2 failed: %s", failure.reason)
            return Phase2Result(Phase2Status.FAILED, failure.reason)
        return result

    def _sync_inputs(self) -> dict[str, Any]:
        """What the sync import needs from the DB, read here (on the store's thread)."""
        enabled = bool(self.settings.sync_remote)
        forgotten = set(self.store.tombstones.tombstones())
        forgotten |= {
            sid for sid, mode in self.store.outputs.memory_modes().items() if mode != "enabled"
        }
        return {
            "enabled": enabled,
            "own_id": _machine_id(self.store) if enabled else None,
            "forgotten": forgotten,
            "limit": self.settings.max_raw_memories_for_consolidation,
            "local_roots": self.store.tombstones.output_roots() if enabled else [],
        }

    def _prepare(
        self,
        ws: Workspace,
        baseline: BaselineLike,
        selected: list[Output],
        sync_inputs: dict[str, Any],
    ) -> tuple[WorkspaceDiff, list[str], list[str]]:
        """Bring the folder in line with the DB and diff it (file work only: runs in a worker thread).

        Also returns what was removed because it had no place in memoryd's layout: whoever put it
        there, opencode must not find it when it boots in the folder.
        """
        if rollback.interrupted(self.paths):
            rollback.restore(self.paths, self.clock)  # a run was killed: finish its rollback
            rollback.clear_running(self.paths)
        rollback.migrate(self.paths)  # an old signature in the folder is not a foreign entry
        log.debug("phase 2: syncing the memory folder")
        removed = ws.ensure_layout()
        ws.remove_diff_file()
        removed += sweep(self.paths.memories)
        if removed:
            log.warning(
                "removed entries outside memoryd's layout before phase 2: %s", ", ".join(removed)
            )
        baseline.ensure()
        ws.sync(selected)
        ws.prune_extension_resources(RESOURCE_RETENTION_DAYS)
        # Imports land before the diff so the consolidator sees them as changes (and removals as D).
        imported = sync_claude_import(self.settings, self.paths.memories, self.clock)
        if imported.skipped:
            log.info("Claude memory import skipped: %s", imported.skipped)
        import_codex(self.settings, self.paths.memories)
        _import_sync(self.paths, sync_inputs)  # other machines' memory, from the last fetch
        problems = ws.validate()
        if not problems:
            # Valid as it stands (a judged hand edit included): what a failed run returns to. A
            # change nobody judged yet (made since the check above) is never recorded.
            rollback.record_judged(self.paths, source="the memory folder before a run")
        log.debug("phase 2: diffing the memory folder against its baseline")
        return baseline.diff(), problems, removed

    async def _run_claimed(self, token: str) -> Phase2Result:
        self.paths.ensure_dir(self.paths.data_dir)
        ws = self.workspace()
        baseline = self.baseline()
        selected = self.store.outputs.phase2_selection(
            self.settings.max_raw_memories_for_consolidation, self.settings.max_unused_days
        )
        consumed = [(o.session_id, o.source_updated_at) for o in selected]
        watermark = max((wm for _, wm in consumed), default=0)
        since = (
            self.clock.now_ms()
        )  # before the diff: a note the user writes from here on is theirs
        self.store.ledger.prune_note_writes(since)
        # Large folders take a while to sync and diff; keep the event loop (signals, events) free.
        diff, problems, swept = await asyncio.to_thread(
            self._prepare, ws, baseline, selected, self._sync_inputs()
        )
        if swept:
            _note_swept(self, "before a consolidation", swept)
        changes = [f"{c.status} {c.path}" for c in diff.changes]
        if diff.empty and not problems:
            self._finish(token, consumed, consolidated=False, watermark=watermark)
            export_codex(self.settings, self.paths.memories)
            return Phase2Result(Phase2Status.NO_CHANGES, consumed=len(consumed))
        if not selected and not ws.has_user_content():
            # Nothing to consolidate (fresh install, or everything forgotten and no notes): no model call.
            self._finish(token, consumed, consolidated=False, watermark=watermark)
            return Phase2Result(Phase2Status.NO_INPUTS, "no memories selected yet", changes=changes)
        self.budget.check(self.settings.consolidation_model)
        ws.write_diff_file(diff.render())
        snapshot = ws.snapshot_protected()
        rollback.mark_running(self.paths)
        try:
            try:
                log.debug("phase 2: consolidating %d change(s)", len(diff.changes))
                await self._consolidate_with_heartbeat(token, diff)
            finally:
                log.debug("phase 2: auditing what the consolidator left")
                writes = self.store.ledger.note_writes_since(since)
                restored = ws.restore_protected(with_user_writes(ws.folder, snapshot, writes))
                ws.remove_diff_file()
                foreign = sweep(self.paths.memories)
                redact_agent_files(self.paths.memories)
            undone = [*foreign, *(r for r in restored if r not in foreign)]
            if undone:
                _note_swept(self, "after a consolidation", undone)
            problems = ws.validate()
            if undone:
                raise ConfinementError(
                    "the consolidator went outside its own files; undone (removed or restored)",
                    undone,
                )
            if problems:
                raise InvalidMemory(problems)
            if not self.store.phase2.heartbeat_phase2(token):
                raise OwnershipLost()
            if self.settings.review:
                result = await self._stage_for_review(token, baseline, consumed, watermark, changes)
                # staging put the baseline's files back; the validated copy may be newer
                rollback.restore(self.paths, self.clock)
                rollback.clear_running(self.paths)
                return result
            log.debug("phase 2: resetting the baseline")
            await asyncio.to_thread(baseline.reset, _held(baseline, writes))
            log.debug("phase 2: recording the validated memory")
            rollback.record(self.paths, source="a validated consolidation")
        except OwnershipLost:
            raise  # another worker owns the folder now; its run decides what stays
        except BaseException:
            # Failed, aborted or cancelled: only validated memory may stay in the folder.
            rollback.restore(self.paths, self.clock)
            rollback.clear_running(self.paths)
            raise
        rollback.clear_running(self.paths)
        self._finish(token, consumed, consolidated=True, watermark=watermark)
        export_codex(self.settings, self.paths.memories)
        return Phase2Result(Phase2Status.SUCCEEDED, consumed=len(consumed), changes=changes)

    async def _stage_for_review(
        self,
        token: str,
        baseline: BaselineLike,
        consumed: list[tuple[str, int]],
        watermark: int,
        changes: list[str],
    ) -> Phase2Result:
        """Review mode: park the validated result outside the folder; the live memory stays."""
        staged = review.Staged(
            staged_at=self.clock.now_ms(),
            consumed=consumed,
            watermark=watermark,
            claimed_input=self._claimed_input,
            changes=changes,
        )
        await asyncio.to_thread(review.stage, self.paths, baseline, staged)
        self.store.phase2.release_phase2(token, "waiting: a consolidation is staged for review")
        return Phase2Result(Phase2Status.STAGED, consumed=len(consumed), changes=changes)

    def _finish(
        self, token: str, consumed: list[tuple[str, int]], *, consolidated: bool, watermark: int
    ) -> None:
        if not self.store.phase2.mark_phase2_succeeded(
            token,
            consumed,
            consolidated=consolidated,
            watermark=watermark,
            claimed_input=self._claimed_input,
        ):
            raise OwnershipLost()

    async def _consolidate_with_heartbeat(self, token: str, diff: WorkspaceDiff) -> None:
        if not self.store.phase2.heartbeat_phase2(token):
            raise OwnershipLost()
        agent = asyncio.create_task(self._consolidate(diff))
        try:
            while True:
                done, _ = await asyncio.wait({agent}, timeout=PHASE2_HEARTBEAT_S)
                if done:
                    agent.result()
                    return
                if not self.store.phase2.heartbeat_phase2(token):
                    agent.cancel()
                    await asyncio.gather(agent, return_exceptions=True)
                    raise OwnershipLost()
        finally:
            if not agent.done():
                agent.cancel()
                await asyncio.gather(agent, return_exceptions=True)

    async def _consolidate(self, diff: WorkspaceDiff) -> None:
        text = consolidation_prompt(self.paths, self.workspace().project_keys(), diff)
        model = self.settings.consolidation_model

        def record(run: AgentRun) -> None:
            self.store.ledger.record_model_call(
                phase="phase2",
                job_kind=GLOBAL,
                job_key=GLOBAL_KEY,
                model=run.model or model,
                outcome=run.outcome,
                usage=run.usage,
                runner=self.runner.name,
                estimated=run.estimated,
            )

        try:
            await self.runner.consolidate(
                text=text, model=model, timeout=self.settings.host.prompt_timeout_s, record=record
            )
        finally:
            bump_change_mark(self.paths.memories)  # the tools write in place: tell the index


def _machine_id(store: Store) -> str:
    from memoryd.sync.publish import machine_id  # the sync package loads for a home that syncs

    return machine_id(store)


def _import_sync(paths: Paths, sync_inputs: dict[str, Any]) -> None:
    """Bring ``extensions/sync/`` in line with the last fetched sync head (no network here).

    Without a remote there is at most a stale folder to remove, so a home that never synced does
    not load the sync package and dulwich's client (~1 MB the daemon would keep for good).
    """
    if sync_inputs["enabled"] or os.path.lexists(paths.memories / EXTENSIONS_DIR / "sync"):
        from memoryd.sync.inputs import import_sync

        import_sync(paths.memories, paths.sync_git, **sync_inputs)
