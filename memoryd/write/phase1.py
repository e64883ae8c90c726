"""Phase 1: discovery → eligibility → claim → extract → finalize, one job per session.

A pass lists every root session of the host, keeps the ones that have been idle long enough and
are young enough, claims at most ``max_rollouts_per_startup`` of them under leases, and runs each
claim through a tool-less helper session that returns structured JSON. Cheap work happens first
and no model is called unless a session actually moved since it was last extracted: the
up-to-date filter is one read query before any claim, and the claim re-checks it inside its
transaction.

Failure policy: anything the host or the model gets wrong fails the job (one retry burned, 1 h
backoff) and never the pass; cancellation (shutdown) releases the claim without burning a retry;
a session deleted in the host is forgotten.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from memoryd import prompts
from memoryd.clock import DAY, HOUR, Clock
from memoryd.errors import (
    ExtractionInvalid,
    HostError,
    HostNotFound,
    ModelCallError,
)
from memoryd.host.agents import EXTRACT_AGENT
from memoryd.host.client_sources import FileSource, Sources, outside_tools
from memoryd.host.ids import OPENCODE, host_of
from memoryd.host.models import Message, PromptResult, Session
from memoryd.host.opencode import OpencodeClient, is_helper_session
from memoryd.host.server import reap_orphaned_servers
from memoryd.paths import Paths
from memoryd.redact import redact
from memoryd.runner.base import Answer, Runner
from memoryd.scopes import checkout_root
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.jobs import STAGE1, Claim, SavePoint
from memoryd.store.ledger import CallUsage
from memoryd.store.outputs import MemoryMode
from memoryd.tuning import (
    EXTRACTION_CONCURRENCY,
    ROLLOUT_SUMMARY_MAX_BYTES,
    SLUG_MAX_CHARS,
    STALE_HELPER_MS,
)
from memoryd.write.helpers import (
    ensure_agent,
    remove_orphaned_helpers,
    remove_stale_helpers,
)
from memoryd.write.phase_base import PhaseBase
from memoryd.write.transcript import Transcript, build_transcript, external_tools

log = logging.getLogger(__name__)


class ExtractionOutput(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    raw_memory: str
    rollout_summary: str
    rollout_slug: str | None = None


@dataclass
class Extracted:
    raw_memory: str
    rollout_summary: str
    rollout_slug: str | None


@dataclass
class Phase1Report:
    discovered: int = 0
    helpers_seen: int = 0
    eligible: int = 0
    up_to_date: int = 0
    claimed: int = 0
    succeeded: int = 0
    no_output: int = 0
    polluted: int = 0
    failed: int = 0
    released: int = 0
    waiting: str | None = None
    next_eligible_at: int | None = None  # when the next not-yet-idle session becomes eligible
    forgotten: int = 0
    stale_helpers: int = 0
    orphans_released: int = 0  # claims of a killed memoryd taken back at once
    pruned: int = 0
    backfilled: int = 0
    save_points: int = 0
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # per host: seen, problems
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "skipped"}
        d["skipped"] = dict(self.skipped)
        return d


def normalize_slug(slug: str | None) -> str | None:
    if not slug:
        return None
    s = re.sub(r"[^a-z0-9_-]+", "_", slug.strip().lower())[:SLUG_MAX_CHARS].strip("_-")
    return s or None


def validate_extraction(result: PromptResult | Answer) -> Extracted | None:
    """Check the helper's answer against the schema; ``None`` means "nothing worth keeping"."""
    data = result.structured
    if data is None:
        data = _json_from_text(result.text)
    if data is None:
        raise ExtractionInvalid("the model did not return structured output")
    try:
        out = ExtractionOutput.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "output"
        raise ExtractionInvalid(
            f"model output breaks the schema at {where}: {first['msg']}"
        ) from exc
    for text in (out.raw_memory, out.rollout_summary):
        echoed = [m for m in prompts.SKELETON_MARKERS if m in text]
        if echoed:
            raise ExtractionInvalid(f"model output echoes the template skeleton ({echoed[0]!r})")
    if not out.raw_memory.strip() or not out.rollout_summary.strip():
        return None
    return Extracted(
        out.raw_memory.strip(), out.rollout_summary.strip(), normalize_slug(out.rollout_slug)
    )


def cap_rollout_summary(text: str, limit: int = ROLLOUT_SUMMARY_MAX_BYTES) -> str:
    """``text`` within ``limit`` UTF-8 bytes: its head and its tail, a marker between them.

    Apply after redaction (a cut must never split a secret). The tail is kept too because a
    summary joined across compactions has its newest tasks at the end.
    """
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = f"\n\n[… {len(data) - limit} bytes of this summary omitted …]\n\n"
    keep = max(limit - len(marker.encode("utf-8")) - 16, 0)  # room for the count's own digits
    head = data[: keep * 2 // 3].decode("utf-8", "ignore")
    tail = data[len(data) - (keep - keep * 2 // 3) :].decode("utf-8", "ignore")
    return head.rstrip() + marker + tail.lstrip()


def _json_from_text(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.S)
    candidate = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    try:
        return json.loads(candidate) if candidate else None
    except ValueError:
        return None


def is_compaction(message: Message) -> bool:
    """The user message opencode adds when it compacts a session (what precedes it is summarised)."""
    return message.info.is_user and any(p.type == "compaction" for p in message.parts)


def is_compaction_summary(message: Message) -> bool:
    """opencode's own summary of what a compaction folded away: the messages it restates are
    read themselves (before the save point, or in this very transcript), so it is left out."""
    return message.info.is_assistant and getattr(message.info, "summary", None) is True


def since_save_point(
    messages: list[Message], earlier: SavePoint | None, *, compacted: bool
) -> tuple[list[Message], SavePoint | None]:
    """What this extraction reads, and the new save point when it was started by a compaction.

    Messages after the last save point are read. When a compaction started this extraction and
    they hold one, only what precedes the newest compaction is read now; it becomes the new save
    point, and what follows it (opencode's summary, the turns after) waits for the next
    extraction. Otherwise (an idle session) everything after the save point is read and the save
    point stays, so nothing is read twice and nothing is left out.
    """
    messages = [m for m in messages if not is_compaction_summary(m)]
    start = 0
    if earlier is not None:
        ids = [m.info.id for m in messages]
        if earlier.message_id in ids:
            start = ids.index(earlier.message_id) + 1
    rest = messages[start:]
    cuts = [i for i, m in enumerate(rest) if is_compaction(m)] if compacted else []
    if not cuts:
        return rest, None
    n = (earlier.compactions if earlier else 0) + len(cuts)
    cut = cuts[-1]
    return rest[:cut], SavePoint(rest[cut].info.id, "", "", n)


def _joined(earlier: SavePoint | None, extracted: Extracted | None) -> Extracted:
    """The memory saved before the last compaction followed by what was extracted after it."""
    raws = [
        t
        for t in (
            (earlier.raw_memory if earlier else ""),
            extracted.raw_memory if extracted else "",
        )
        if t.strip()
    ]
    sums = [
        t
        for t in (
            (earlier.rollout_summary if earlier else ""),
            extracted.rollout_summary if extracted else "",
        )
        if t.strip()
    ]
    return Extracted("\n\n".join(raws), "\n\n".join(sums), None)


async def _outside(
    client: OpencodeClient | None, session_id: str, tool_names: list[str]
) -> list[str]:
    """The tools of a session that brought outside content in (web, MCP servers not memoryd's)."""
    if host_of(session_id) != OPENCODE or client is None:
        return outside_tools(tool_names)
    return external_tools(tool_names, (await client.mcp_status()).keys())


class _OpencodeOnDemand:
    """opencode for the sources, asked for only when an opencode session is read."""

    def __init__(self, phase: PhaseBase) -> None:
        self._phase = phase

    async def get_session(self, session_id: str) -> Session:
        return await self._phase.host.get_session(session_id)

    async def messages(self, session_id: str) -> list[Message]:
        return await self._phase.host.messages(session_id)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Phase1(PhaseBase):
    def __init__(
        self,
        *,
        store: Store,
        client: OpencodeClient | None,
        settings: Settings,
        paths: Paths,
        clock: Clock,
        worker_id: str | None = None,
        runner: Runner | None = None,
        file_sources: list[FileSource] | None = None,
    ) -> None:
        super().__init__(
            store=store,
            client=client,
            settings=settings,
            paths=paths,
            clock=clock,
            worker_id=worker_id or default_worker_id(),
            runner=runner,
        )
        self._agent_checked = False
        self._compacted: set[str] = set()
        self._system_prompt = prompts.render("stage_one_system.md")
        # opencode is always a source; Claude Code's and Codex's files when the caller passes them
        self._sources = Sources(_OpencodeOnDemand(self), file_sources or [])

    # -- the pass -------------------------------------------------------------------------

    async def run_pass(self) -> Phase1Report:
        report = Phase1Report()
        # A killed memoryd's own opencode serve still drives the helpers it was given: stop it
        # first, or its claims and helpers stay held (memoryd.owner) until the next start does.
        await asyncio.to_thread(reap_orphaned_servers, self.paths.private_servers)
        report.orphans_released = len(self.store.owners.release_orphaned_claims())
        report.pruned = self.store.outputs.prune_outputs(self.settings.max_unused_days)
        # Archived sessions are listed too (and then skipped) so they are not mistaken for deleted ones.
        log.debug("phase 1: listing sessions")
        sessions: list[Session] = []
        if self.client is not None:  # without opencode (another runner) only the clients' files
            sessions = await self.client.list_sessions(roots=True, archived=True)
        report.discovered = len(sessions)
        report.backfilled = self.store.outputs.backfill_projects(
            {s.id: (s.projectID, checkout_root(s.worktree, s.directory)) for s in sessions}
        )
        roots = [
            s for s in sessions if s.is_root and not is_helper_session(s) and not s.is_archived
        ]
        report.helpers_seen = len(sessions) - len(roots)
        report.hosts[OPENCODE] = {"seen": len(roots)}
        files, per_host = self._sources.list_files(
            read_since_ms=self.clock.now_ms() - self.settings.max_rollout_age_days * DAY
        )
        report.hosts.update(per_host)
        roots += [s for s in files if s.is_root and not s.is_archived]
        report.forgotten = await self._forget_deleted({s.id for s in [*sessions, *files]})
        if self.client is not None:
            report.stale_helpers = await remove_orphaned_helpers(self.client, self.store, sessions)
            report.stale_helpers += await remove_stale_helpers(
                self.client, sessions, self.clock.now_ms() - STALE_HELPER_MS
            )
        eligible = self._eligible(roots, report)
        report.eligible = len(eligible)
        if not eligible or not self.settings.generate_memories:
            return report
        report.waiting = self.budget.blocked(self.settings.extract_model)
        if report.waiting:
            log.info("phase 1 waits: %s", report.waiting)
            return report
        await self._ensure_agent()
        log.debug("phase 1: claiming among %d eligible sessions", len(eligible))
        claims: list[tuple[Session, Claim]] = []
        for session in eligible:
            if len(claims) >= self.settings.max_rollouts_per_startup:
                break
            claim = self.store.stage1.claim_stage1(
                session.id,
                session.time.updated,
                max_running=self.settings.max_rollouts_per_startup,
                worker_id=self.worker_id,
            )
            if claim.claimed:
                claims.append((session, claim))
            else:
                report.skipped[claim.status] += 1
                if claim.status == "skipped_cap":
                    break
        report.claimed = len(claims)
        if claims:
            gate = asyncio.Semaphore(EXTRACTION_CONCURRENCY)

            await asyncio.gather(*(self._run_job(s, c, report, gate) for s, c in claims))
        return report

    def _eligible(self, roots: list[Session], report: Phase1Report) -> list[Session]:
        now = self.clock.now_ms()
        idle_cutoff = now - int(self.settings.min_rollout_idle_hours * HOUR)
        age_cutoff = now - self.settings.max_rollout_age_days * DAY
        default_mode: MemoryMode = "enabled" if self.settings.generate_memories else "disabled"
        modes = self.store.outputs.memory_modes()
        new = [s.id for s in roots if s.id not in modes]
        if new:
            self.store.outputs.stamp_modes_if_absent(new, default_mode)
            modes.update(dict.fromkeys(new, default_mode))
        done = self.store.outputs.extracted_watermarks()
        compacted = self.store.stage1.pending_compactions()
        self._compacted = compacted
        eligible = []
        for s in sorted(roots, key=lambda s: (s.time.updated, s.id), reverse=True):
            updated = s.time.updated
            enabled = modes.get(s.id, default_mode) == "enabled"
            if s.id in compacted and enabled and done.get(s.id, -1) < updated:
                report.save_points += 1  # a save point: extracted now, idle or not
                eligible.append(s)
            elif updated > idle_cutoff:
                report.skipped["not_idle"] += 1
                due = updated + int(self.settings.min_rollout_idle_hours * HOUR)
                if modes.get(s.id, default_mode) == "enabled" and done.get(s.id, -1) < updated:
                    report.next_eligible_at = min(report.next_eligible_at or due, due)
            elif updated < age_cutoff:
                report.skipped["too_old"] += 1
            elif modes.get(s.id, default_mode) != "enabled":
                report.skipped[f"mode_{modes.get(s.id)}"] += 1
            elif done.get(s.id, -1) >= updated:
                report.up_to_date += 1
            else:
                eligible.append(s)
        return eligible

    async def _forget_deleted(self, listed: set[str]) -> int:
        """Sessions we hold memory for that their host no longer has are forgotten."""
        forgotten = 0
        for sid in sorted(self.store.outputs.known_session_ids() - listed):
            gone = self._sources.gone(sid)
            if gone is not None:  # a client session: its file is gone, or we cannot tell
                if gone:
                    self.store.outputs.delete_session_memory(sid)
                    forgotten += 1
                    log.info("the session file of %s is gone; its memory is forgotten", sid)
                continue
            if self.client is None:
                continue  # an opencode session, and no opencode to ask in this pass
            try:
                await self.host.get_session(sid)
            except HostNotFound:
                self.store.outputs.delete_session_memory(sid)
                forgotten += 1
                log.info("session %s was deleted in the host; its memory is forgotten", sid)
            except HostError as exc:
                log.warning("could not check whether session %s still exists: %s", sid, exc)
        return forgotten

    async def _ensure_agent(self) -> None:
        if not self._agent_checked and self.runner.name == OPENCODE:
            await ensure_agent(self.host, self.paths, EXTRACT_AGENT)
            self._agent_checked = True

    # -- one job --------------------------------------------------------------------------

    async def _run_job(
        self, session: Session, claim: Claim, report: Phase1Report, gate: asyncio.Semaphore
    ) -> None:
        sid = session.id
        assert claim.token is not None
        try:
            async with gate:  # inside the try: a claim still waiting here is released on cancel too
                await self._extract_job(session, claim, report)
        except asyncio.CancelledError:
            self.store.stage1.release_stage1(sid, claim.token)
            report.released += 1
            raise

    async def _extract_job(self, session: Session, claim: Claim, report: Phase1Report) -> None:
        sid = session.id
        assert claim.token is not None
        try:
            try:
                # The listing may be a moment old. Read the session first and the transcript
                # after: the transcript holds at least that version, so the output claims it
                # (else a turn landing in between is read now and extracted again next pass).
                log.debug("phase 1: reading %s", sid)
                fresh, messages = await self._sources.read(sid)
                if fresh.time.updated > (claim.watermark or 0):
                    self.store.stage1.advance_stage1_claim(sid, claim.token, fresh.time.updated)
            except HostNotFound:
                # the session itself is gone (a 404 from a helper session must not forget anything)
                self.store.outputs.delete_session_memory(sid)
                report.forgotten += 1
                return
            transcript = build_transcript(messages)
            if transcript.citations:
                # Fallback for hosts without the shim: count blocks left in stored replies, once per part.
                self.store.outputs.record_citations(
                    [(f"{sid}:{pid}", ids) for pid, ids in transcript.citations]
                )
            if self.settings.disable_on_external_context and transcript.tool_names:
                outside = await _outside(self.client, sid, transcript.tool_names)
                if outside:
                    self.store.outputs.set_mode(
                        sid, "polluted", f"external context: {', '.join(outside[:5])}"
                    )
                    self.store.stage1.mark_stage1_no_output(sid, claim.token)
                    report.polluted += 1
                    return
            earlier = self.store.stage1.save_point(sid)
            part, save = since_save_point(messages, earlier, compacted=sid in self._compacted)
            if len(part) != len(messages):
                transcript = build_transcript(part)
            if transcript.empty and earlier is None:
                if self.store.outputs.output(sid) is not None:
                    raise ExtractionInvalid(
                        "the host returned an empty transcript for a session we hold memory for"
                    )
                self.store.stage1.mark_stage1_no_output(sid, claim.token)
                report.no_output += 1
                return
            log.debug("phase 1: extracting %s", sid)
            extracted = None if transcript.empty else await self._extract(session, transcript)
            log.debug("phase 1: storing the output of %s", sid)
            base = _joined(earlier, extracted)
            if save is not None:  # the memory up to this compaction is what later passes build on
                save = replace(
                    save, raw_memory=base.raw_memory, rollout_summary=base.rollout_summary
                )
            if not base.raw_memory.strip():
                self.store.stage1.mark_stage1_no_output(sid, claim.token, save_point=save)
                report.no_output += 1
                return
            slug = extracted.rollout_slug if extracted else None
            ok = self.store.stage1.mark_stage1_succeeded(
                sid,
                claim.token,
                raw_memory=redact(base.raw_memory),
                rollout_summary=cap_rollout_summary(redact(base.rollout_summary)),
                rollout_slug=normalize_slug(redact(slug)) if slug else None,
                cwd=session.directory,
                title=redact(session.title),
                project_id=session.projectID,
                worktree=checkout_root(session.worktree, session.directory),
                save_point=save,
            )
            if ok:
                report.succeeded += 1
            else:
                log.warning("lost ownership of session %s before finalizing; result dropped", sid)
        except Exception as exc:  # one policy for both phases: PhaseBase.judge
            failure = self.judge(exc, self.settings.extract_model)
            if failure.released:
                self.store.stage1.release_stage1(sid, claim.token, f"waiting: {failure.reason}")
                report.released += 1
                report.waiting = failure.reason
            else:
                self.store.stage1.mark_stage1_failed(sid, claim.token, failure.reason)
                report.failed += 1
                report.errors.append(f"{sid}: {failure.reason}")
                log.warning("extraction of %s failed: %s", sid, failure.reason)

    async def _extract(self, session: Session, transcript: Transcript) -> Extracted | None:
        text = prompts.render(
            "stage_one_input.md",
            session_id=session.id,
            session_cwd=session.directory,
            session_title=redact(session.title),
            transcript=transcript.text,
        )
        model = self.settings.extract_model
        self.budget.check(model)
        try:
            answer = await self.runner.answer(
                key=session.id,
                system=self._system_prompt,
                text=text,
                schema=prompts.EXTRACTION_SCHEMA,
                model=model,
                timeout=self.settings.host.prompt_timeout_s,
            )
        except ModelCallError:
            self._record_call(session.id, model, "error", CallUsage())
            raise
        used, usage = answer.model or model, answer.usage
        try:
            extracted = validate_extraction(answer)
        except ExtractionInvalid:
            self._record_call(session.id, used, "invalid", usage, answer.estimated)
            raise
        self._record_call(session.id, used, "ok" if extracted else "empty", usage, answer.estimated)
        return extracted

    def _record_call(
        self, key: str, model: str | None, outcome: str, usage: CallUsage, estimated: bool = False
    ) -> None:
        record_extraction(self.store, self.runner.name, key, model, outcome, usage, estimated)


def record_extraction(
    store: Store,
    runner: str,
    key: str,
    model: str | None,
    outcome: str,
    usage: CallUsage,
    estimated: bool,
) -> None:
    """One extraction call in the ledger, with the runner that made it."""
    store.ledger.record_model_call(
        phase="phase1",
        job_kind=STAGE1,
        job_key=key,
        model=model,
        outcome=outcome,
        usage=usage,
        runner=runner,
        estimated=estimated,
    )
