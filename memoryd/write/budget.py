"""Spending limits and the rate-limit circuit breaker, checked before every helper prompt.

A daemon that runs for months must never surprise its user's quota. Two limits bound it
(``daily_token_budget`` per UTC day and ``max_model_calls_per_hour`` over a rolling hour, both
counted from the model-call ledger), and a rate-limit, quota or overload error from the host opens
a circuit for that model for an hour. Hitting either makes work *wait*: claims are released
without burning a retry, and status says why.
"""

from __future__ import annotations

import logging

from memoryd.clock import DAY, HOUR, Clock, iso_ms
from memoryd.errors import BudgetWait
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.keys import CIRCUIT
from memoryd.tuning import CIRCUIT_MS

log = logging.getLogger(__name__)


def model_key(model: str | None) -> str:
    return model or "(host default)"


class Budget:
    def __init__(self, store: Store, settings: Settings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock

    def circuits(self) -> dict[str, int]:
        raw = self.store.ledger.get_state(CIRCUIT)
        now = self.clock.now_ms()
        return (
            {k: v for k, v in (raw or {}).items() if isinstance(v, int) and v > now}
            if isinstance(raw, dict)
            else {}
        )

    def blocked(self, model: str | None) -> str | None:
        """Why a prompt to ``model`` must wait now, or ``None``."""
        now = self.clock.now_ms()
        until = self.circuits().get(model_key(model))
        if until:
            return f"circuit open for {model_key(model)} after rate-limit errors, until {iso_ms(until)}"
        limit = self.settings.daily_token_budget
        if limit:
            spent = sum(
                int(p["input"]) + int(p["output"]) + int(p["reasoning"])
                for p in self.store.ledger.token_totals(since_ms=now - now % DAY).values()
            )
            if spent >= limit:
                return f"daily token budget spent ({spent:,} of {limit:,}); resumes at {iso_ms(now - now % DAY + DAY)}"
        per_hour = self.settings.max_model_calls_per_hour
        if per_hour:
            calls = sum(
                int(p["calls"])
                for p in self.store.ledger.token_totals(since_ms=now - HOUR).values()
            )
            if calls >= per_hour:
                return f"{calls} model calls in the last hour (limit {per_hour})"
        return None

    def check(self, model: str | None) -> None:
        reason = self.blocked(model)
        if reason:
            raise BudgetWait(reason)

    def trip(self, model: str | None) -> None:
        circuits = self.circuits()
        circuits[model_key(model)] = self.clock.now_ms() + CIRCUIT_MS
        self.store.ledger.put_state(CIRCUIT, circuits)
        log.warning("rate limited by the model provider; pausing %s for an hour", model_key(model))

    def state(self) -> dict[str, object]:
        now = self.clock.now_ms()
        spent = sum(
            int(p["input"]) + int(p["output"]) + int(p["reasoning"])
            for p in self.store.ledger.token_totals(since_ms=now - now % DAY).values()
        )
        limit = self.settings.daily_token_budget
        return {
            "daily_token_budget": limit,
            "spent_today": spent,
            "left_today": max(limit - spent, 0) if limit else None,
            "calls_last_hour": sum(
                int(p["calls"])
                for p in self.store.ledger.token_totals(since_ms=now - HOUR).values()
            ),
            "max_model_calls_per_hour": self.settings.max_model_calls_per_hour,
            "circuits": {k: iso_ms(v) for k, v in self.circuits().items()},
            "waiting": self.blocked(self.settings.extract_model),
        }
