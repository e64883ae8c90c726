"""``memoryd run``: the long-running daemon, with a lifecycle in the manner of uvicorn.

Signal handlers only set flags (a second signal forces); the main coroutine waits on an event,
so an idle daemon does not wake up to poll. APScheduler (3.x) drives the pumps — one pass
(discovery, phase 1, phase 2) on an interval and a light tick (citation spool, read-path block) —
with at most one instance of each at a time; DB leases keep several processes correct. The
``/global/event`` follower brings a pass forward when a session goes idle and forgets deleted
sessions at once. A pass requested while one runs is not dropped (APScheduler would skip it as
"maximum number of running instances reached"): it is remembered and runs right after, once.

Shutdown: stop scheduling, cancel the running pass (its claims are released without burning a
retry and its helper sessions are deleted), stop the event follower and any opencode we started,
and exit within the graceful timeout.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler  # type: ignore[import-untyped]

from memoryd.clock import iso_ms
from memoryd.errors import HostError, MemorydError, StartupFailure
from memoryd.folder import baseline_proc
from memoryd.host.live import recorded_server
from memoryd.runtime import sdnotify
from memoryd.runtime.events import EventFollower
from memoryd.runtime.lock import HomeLock
from memoryd.store.home import App
from memoryd.store.keys import DAEMON
from memoryd.tuning import (
    BACKLOG_RETRY_S,
    COALESCED_DELAY_S,
    DAEMON_GRACE_S,
    DAEMON_INTERVAL_S,
    EVENT_DEBOUNCE_S,
    SYNC_CHECK_S,
    TICK_S,
)
from memoryd.write.passes import PassResult, daemon_tick, run_pass
from memoryd.write.phase2 import Phase2Status

log = logging.getLogger(__name__)

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _publishes(result: PassResult) -> bool:
    """Whether a pass changed what this machine publishes: new outputs, or a consolidation."""
    return result.phase1.succeeded > 0 or result.phase2.status == Phase2Status.SUCCEEDED


def _stoppable(
    stopping: Callable[[], bool], job: Callable[[], Awaitable[None]]
) -> Callable[[], Awaitable[None]]:
    """A scheduled job whose cancellation by the shutdown (``stopping()``) is the stop it asked
    for, not an error: the scheduler would log it with a ``CancelledError`` traceback."""

    @functools.wraps(job)
    async def run() -> None:
        try:
            await job()
        except asyncio.CancelledError:
            if not stopping():
                raise
            log.debug("%s stopped by the shutdown", job.__name__)

    return run


class Daemon:
    def __init__(
        self,
        app: App,
        *,
        interval_s: float = DAEMON_INTERVAL_S,
        graceful_timeout_s: float = DAEMON_GRACE_S,
    ) -> None:
        self.app = app
        self.interval_s = interval_s
        self.graceful_timeout_s = graceful_timeout_s
        self.should_exit = False
        self.force_exit = False
        self._exit = asyncio.Event()
        self._lock = HomeLock(app.paths)
        self._active: set[asyncio.Task[Any]] = set()
        self._follower: EventFollower | None = None
        self._follower_task: asyncio.Task[None] | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self._recorded: dict[str, Any] | None = None
        self._ui: Any = None
        self._ui_task: asyncio.Task[None] | None = None
        self._pass_running = False
        self._requested_at: datetime | None = None  # a pass asked for while one was running

    def handle_exit(self, sig: int, frame: FrameType | None = None) -> None:
        """Signals only set flags (a second SIGINT or SIGTERM forces)."""
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True
        self._exit.set()

    # -- lifecycle --------------------------------------------------------------------------

    async def serve(self) -> None:
        """Run until a signal asks to stop; :class:`StartupFailure` when it cannot start at all."""
        loop = asyncio.get_running_loop()
        try:
            self._lock.acquire()
            _ = self.app.settings  # a bad config fails startup, not the first pass
            _ = self.app.store
        except StartupFailure:
            raise
        except MemorydError as exc:
            raise StartupFailure(str(exc)) from exc
        for sig in HANDLED_SIGNALS:
            loop.add_signal_handler(sig, self.handle_exit, sig)
        baseline_proc.keep_out_of_process()  # a long-lived process: dulwich stays in a child
        try:
            self._start_scheduler()
            self._start_follower()
            self._start_ui()
            self._record()
            sdnotify.notify("READY=1")
            log.info(
                "memoryd daemon started (pid %d, pass every %.0f s)", os.getpid(), self.interval_s
            )
            await self._exit.wait()
            sdnotify.notify("STOPPING=1")
            await self.shutdown()
        finally:
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)
            baseline_proc.release(wait=False)  # a call still in flight ends with us (EOF)
            baseline_proc.keep_out_of_process(False)
            self._lock.release()

    def _start_scheduler(self) -> None:
        sched = AsyncIOScheduler(timezone=UTC)
        now = datetime.now(UTC)
        sched.add_job(
            _stoppable(lambda: self.should_exit, self._pass_job),
            "interval",
            seconds=self.interval_s,
            id="pass",
            next_run_time=now,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        sched.add_job(
            _stoppable(lambda: self.should_exit, self._tick_job),
            "interval",
            seconds=TICK_S,
            id="tick",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        if self.app.settings.sync_remote:
            sched.add_job(
                _stoppable(lambda: self.should_exit, self._sync_job),
                "interval",
                seconds=SYNC_CHECK_S,
                id="sync",
                next_run_time=now,
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
            )
        sched.start()
        self.scheduler = sched

    def _start_follower(self) -> None:
        host = self.app.settings.host
        target = (
            (host.url, host.username, host.resolved_password())
            if host.url
            else recorded_server(self.app.paths)
        )
        if target is None:
            log.info("no persistent opencode server to follow; relying on timed passes")
            return
        url, username, password = target
        self._follower = EventFollower(
            url, username=username, password=password, on_event=self._on_event, clock=self.app.clock
        )
        self._follower_task = asyncio.create_task(self._follower.run(), name="memoryd-events")

    def _start_ui(self) -> None:
        """With ``ui = true``, serve the web UI on the daemon's loop (same store, same process)."""
        if not self.app.settings.ui:
            return
        from memoryd.web.listen import make_server, write_url_file

        try:
            self._ui = make_server(self.app, self.app.settings.ui_port)
        except MemorydError as exc:
            log.error("web UI not started: %s", exc)
            return
        where = write_url_file(self.app.paths, self._ui.url)
        log.info(
            "web UI on http://127.0.0.1:%d/ (the URL with its access token is in %s)",
            self._ui.keys.port,
            where,
        )
        self._ui_task = asyncio.create_task(self._ui.serve(), name="memoryd-ui")

    async def shutdown(self) -> None:
        log.info(
            "shutting down (waiting up to %.0f s; press Ctrl+C again to force)",
            self.graceful_timeout_s,
        )
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        if self._follower_task is not None:
            self._follower_task.cancel()
            await asyncio.gather(self._follower_task, return_exceptions=True)
        if self._ui_task is not None:
            self._ui.stop()
            await asyncio.wait({self._ui_task}, timeout=2.0)
            self._ui_task.cancel()
            await asyncio.gather(self._ui_task, return_exceptions=True)
            self._ui.sock.close()
        for task in list(self._active):
            task.cancel()
        if self._active:
            done = asyncio.gather(*self._active, return_exceptions=True)
            waiter = asyncio.create_task(self._exit_forced())
            await asyncio.wait(
                {asyncio.ensure_future(done), waiter},
                timeout=self.graceful_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            waiter.cancel()
            if any(not t.done() for t in self._active):
                log.warning("some work did not stop in time; leases will expire on their own")
        self._record(stopped=True)
        log.info("memoryd daemon stopped")

    async def _exit_forced(self) -> None:
        while not self.force_exit:
            self._exit.clear()
            await self._exit.wait()

    # -- pumps --------------------------------------------------------------------------------

    async def _tracked(self, coro: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        self._active.add(task)
        try:
            return await coro
        finally:
            self._active.discard(task)

    async def _pass_job(self) -> None:
        if self.should_exit:
            return
        self._pass_running = True
        try:
            await self._pass_body()
        finally:
            self._pass_running = False
            requested, self._requested_at = self._requested_at, None
            if requested is not None:
                # coalesced: however many requests came in during the pass, one more pass
                delay = (requested - datetime.now(UTC)).total_seconds()
                self._bring_forward(max(delay, COALESCED_DELAY_S), coalesced=True)

    async def _pass_body(self) -> None:
        try:
            result = await self._tracked(run_pass(self.app))
        except HostError as exc:  # run_pass recorded it for `status`
            log.warning("pass skipped: %s", exc)
            return
        except (MemorydError, OSError) as exc:
            log.error("pass failed: %s", exc)
            return
        if self.app.settings.sync_remote and _publishes(result):
            from memoryd.sync.engine import request_sync  # a home that syncs loads the engine

            request_sync(self.app.store, self.app.clock)  # unless a backoff holds it
            self._bring_sync_forward()
        p1 = result.phase1
        backlog = (
            p1.eligible
            - p1.claimed
            - p1.skipped.get("skipped_backoff", 0)
            - p1.skipped.get("skipped_exhausted", 0)
        )
        if backlog > 0 and not p1.waiting and p1.claimed:
            log.info(
                "backlog: %d more sessions to extract; next pass in %.0f s",
                backlog,
                BACKLOG_RETRY_S,
            )
            self._bring_forward(BACKLOG_RETRY_S)
        elif p1.next_eligible_at is not None:
            delay = max(
                (p1.next_eligible_at - self.app.clock.now_ms()) / 1000 + 1, EVENT_DEBOUNCE_S
            )
            if delay < self.interval_s:
                self._bring_forward(delay)
        self._record()

    async def _tick_job(self) -> None:
        # On the loop thread on purpose: the store connection is shared with the pass, and a tick
        # is a few stats unless the summary (or another agent-owned file) changed.
        if not self.should_exit:
            await self._tracked(daemon_tick(self.app, judge_edits=not self._pass_running))
            self._record()

    async def _sync_job(self) -> None:
        from memoryd.sync.engine import run_sync, sync_due  # scheduled only when sync_remote is set

        app = self.app
        if self.should_exit or not sync_due(app.store, app.settings, app.clock):
            return
        try:
            outcome = await self._tracked(run_sync(app.store, app.settings, app.paths, app.clock))
        except MemorydError as exc:  # the DB or the data folder, not the remote (that is recorded)
            log.error("sync failed: %s", exc)
            return
        if outcome.honoured or outcome.inputs_changed:
            self._bring_forward(EVENT_DEBOUNCE_S)  # fold other machines' changes in soon

    def _bring_sync_forward(self) -> None:
        job = self.scheduler.get_job("sync") if self.scheduler and not self.should_exit else None
        if job is not None:
            job.modify(next_run_time=datetime.now(UTC))

    def _bring_forward(self, delay_s: float, *, coalesced: bool = False) -> None:
        if self.scheduler is None or self.should_exit:
            return
        job = self.scheduler.get_job("pass")
        when = datetime.now(UTC) + timedelta(seconds=delay_s)
        if self._pass_running and not coalesced:
            # The running pass may already have listed sessions; firing the job now would be
            # skipped by the scheduler, so remember the request for when the pass ends.
            if self._requested_at is None or when < self._requested_at:
                self._requested_at = when
            return
        if job is not None and (job.next_run_time is None or when < job.next_run_time):
            job.modify(next_run_time=when)

    async def _on_event(self, kind: str, session_id: str) -> None:
        if kind == "deleted":
            store, sid = self.app.store, session_id
            if store.outputs.output(sid) is None and store.stage1.stage1_job(sid) is None:
                return  # not ours to forget (memoryd's own helper sessions end up here too)
            if store.outputs.delete_session_memory(session_id):
                log.info("session %s deleted in opencode; consolidation will forget it", session_id)
            self._bring_forward(EVENT_DEBOUNCE_S)
        elif kind == "compacted":
            # A save point: what the session held before this compaction is extracted now,
            # without waiting for it to go idle (once; see Phase1 and since_save_point).
            self.app.store.stage1.record_compaction(session_id)
            self._bring_forward(EVENT_DEBOUNCE_S)
        elif kind == "idle" and self.app.settings.min_rollout_idle_hours == 0:
            self._bring_forward(EVENT_DEBOUNCE_S)

    def _record(self, *, stopped: bool = False) -> None:
        job = self.scheduler.get_job("pass") if self.scheduler and not stopped else None
        next_pass = job.next_run_time.isoformat() if job and job.next_run_time else None
        state = daemon_state(self._follower, next_pass, stopped=stopped)
        if (key := _without_heartbeats(state)) == self._recorded:
            return
        self._recorded = key
        self.app.store.ledger.put_state(DAEMON, {**state, "at": self.app.clock.now_ms()})


def _without_heartbeats(state: dict[str, Any]) -> dict[str, Any]:
    """Heartbeats bump ``events_seen`` every 10 s; that alone is not worth a disk write."""
    return {**state, "events": {k: v for k, v in state["events"].items() if k != "events_seen"}}


def daemon_state(
    follower: EventFollower | None, next_pass: str | None, *, stopped: bool
) -> dict[str, Any]:
    """What ``status`` shows of the daemon: alive, next pass, and the event stream's health."""
    f = follower.state if follower else None
    return {
        "pid": os.getpid(),
        "running": not stopped,
        "next_pass": next_pass,
        "events": {
            "state": f.state if f else "unavailable",
            "since": iso_ms(f.since) if f else None,
            "last_error": f.last_error if f else "no persistent opencode server to follow; polling",
            "events_seen": f.events_seen if f else 0,
            "reconnects": f.reconnects if f else 0,
        },
    }
