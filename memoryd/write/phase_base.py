"""What both phases are built on: their shared state and how a claimed job's failure is judged.

Kept apart from :mod:`memoryd.write.helpers` (opencode's helper sessions) because the default
runner, opencode's, is built on those helpers: this module picks it, that one must not.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from memoryd.clock import Clock
from memoryd.errors import (
    BudgetWait,
    HostUnreachable,
    MemorydError,
    ModelCallError,
    PathError,
    is_host_fault,
)
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.runner.base import Runner
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.write.budget import Budget
from memoryd.write.opencode_runner import OpencodeRunner

log = logging.getLogger(__name__)


class Verdict(enum.Enum):
    """What a claimed job becomes after an exception (the one failure policy of both phases)."""

    WAIT_BUDGET = "wait_budget"  # budget spent or rate-limited: release, burn no retry
    WAIT_HOST = (
        "wait_host"  # opencode failed (gone, refusing, 5xx, hung, garbled): release, burn no retry
    )
    WAIT_DISK = "wait_disk"  # our own disk refused a write (read-only, full): release, no retry
    FAIL = "fail"  # the job itself failed: burn a retry and back off


@dataclass(frozen=True)
class Failure:
    verdict: Verdict
    reason: str

    @property
    def released(self) -> bool:
        return self.verdict is not Verdict.FAIL


class PhaseBase:
    """What both phases work with: the store, the host, settings, paths, the clock and the budget."""

    def __init__(
        self,
        *,
        store: Store,
        client: OpencodeClient | None,
        settings: Settings,
        paths: Paths,
        clock: Clock,
        worker_id: str,
        runner: Runner | None = None,
    ) -> None:
        self.store = store
        self.client = client  # None: no opencode in this pass (another runner, other sources)
        self.settings = settings
        self.paths = paths
        self.clock = clock
        self.worker_id = worker_id
        self.budget = Budget(store, settings, clock)
        if runner is None:
            runner = OpencodeRunner(self.host, store=store, paths=paths, settings=settings)
        self.runner: Runner = runner

    @property
    def host(self) -> OpencodeClient:
        """The opencode this pass talks to; only code that needs opencode asks for it."""
        if self.client is None:
            raise HostUnreachable("", "this pass runs without opencode")
        return self.client

    def judge(self, exc: Exception, model: str | None) -> Failure:
        """Decide release / fail / trip the circuit for an exception a claimed job raised.

        Waiting is never the job's fault, so it releases the claim without burning a retry; a
        rate limit also opens the model's circuit so no other job hits it for an hour.
        """
        if isinstance(exc, BudgetWait):
            return Failure(Verdict.WAIT_BUDGET, str(exc))
        if isinstance(exc, ModelCallError) and exc.is_rate_limit:
            self.budget.trip(model)
            return Failure(Verdict.WAIT_BUDGET, str(exc))
        if is_host_fault(exc):
            return Failure(Verdict.WAIT_HOST, str(exc))
        if isinstance(exc, (OSError, PathError)):
            return Failure(Verdict.WAIT_DISK, f"cannot write memoryd's files: {exc}")
        if isinstance(exc, MemorydError):
            return Failure(Verdict.FAIL, str(exc))
        log.exception("unexpected error in %s", type(self).__name__)  # a bug fails the job
        return Failure(Verdict.FAIL, f"internal error: {exc!r}")
