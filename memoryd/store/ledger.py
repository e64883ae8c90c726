"""The model-call ledger and small named state (``model_calls`` and ``kv``): memoryd's own tables.

Kept apart from the outputs because neither concerns a session's memory: the ledger records
what each model call cost (status, web UI, budgets), and ``kv`` holds a few named values such as
when the last pass ran.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from memoryd.clock import DAY, Clock
from memoryd.store.db import write_tx
from memoryd.store.keys import NOTE_WRITE

NOTE_WRITE_END = "note_write;"  # the first key past that prefix (';' follows ':')


@dataclass(frozen=True)
class CallUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.reasoning_tokens


class Ledger:
    """The model-call ledger, small named state and note writes: one part of :class:`memoryd.store.Store`, sharing its connection."""

    def __init__(self, conn: sqlite3.Connection, clock: Clock) -> None:
        self._conn = conn
        self._clock = clock

    # -- small named state (last pass, host seen) ------------------------------------------

    def put_state(self, key: str, value: object) -> None:
        with write_tx(self._conn) as c:
            c.execute(
                """INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at""",
                (key, json.dumps(value, sort_keys=True), self._clock.now_ms()),
            )

    def get_state(self, key: str) -> object | None:
        r = self._conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else None

    # -- the user's note writes (phase 2 must not undo them) -------------------------------

    def record_note_write(self, relpath: str, data: bytes | None) -> None:
        """memoryd wrote (``data``) or deleted (``None``) the user's note at ``relpath``.

        A consolidation running meanwhile restores protected files to its snapshot and commits
        its baseline afterwards: without this record it would delete the new note, bring back a
        forgotten one, and hide the change from the next consolidation's diff.
        """
        text = None if data is None else data.decode("utf-8", errors="replace")
        self.put_state(NOTE_WRITE + relpath, {"data": text})

    def note_writes_since(self, since_ms: int) -> dict[str, bytes | None]:
        """Note writes recorded at or after ``since_ms``: relpath -> content (``None``: deleted)."""
        rows = self._conn.execute(
            "SELECT key, value FROM kv WHERE key >= ? AND key < ? AND updated_at >= ?",
            (NOTE_WRITE, NOTE_WRITE_END, since_ms),
        )
        out: dict[str, bytes | None] = {}
        for r in rows:
            text = json.loads(r["value"]).get("data")
            out[r["key"][len(NOTE_WRITE) :]] = None if text is None else text.encode("utf-8")
        return out

    def prune_note_writes(self, before_ms: int) -> None:
        with write_tx(self._conn) as c:
            c.execute(
                "DELETE FROM kv WHERE key >= ? AND key < ? AND updated_at < ?",
                (NOTE_WRITE, NOTE_WRITE_END, before_ms),
            )

    # -- model-call ledger ----------------------------------------------------------------

    def record_model_call(
        self,
        *,
        phase: str,
        job_kind: str,
        job_key: str,
        model: str | None,
        outcome: str,
        usage: CallUsage,
        runner: str | None = None,
        estimated: bool = False,
    ) -> None:
        with write_tx(self._conn) as c:
            c.execute(
                """INSERT INTO model_calls (at, phase, job_kind, job_key, model, outcome, input_tokens,
                   output_tokens, reasoning_tokens, cache_read_tokens, cache_write_tokens, cost,
                   runner, estimated)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    self._clock.now_ms(),
                    phase,
                    job_kind,
                    job_key,
                    model,
                    outcome,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.reasoning_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    usage.cost,
                    runner,
                    int(estimated),
                ),
            )

    def tokens_per_runner(self) -> dict[str, dict[str, int | float]]:
        """Calls and tokens per runner; rows from before runners were recorded count as opencode's."""
        rows = self._conn.execute(
            """SELECT COALESCE(runner, 'opencode') AS runner, COUNT(*) AS calls,
                      SUM(input_tokens + output_tokens + reasoning_tokens) AS total,
                      SUM(CASE WHEN estimated THEN input_tokens + output_tokens ELSE 0 END) AS est,
                      SUM(cost) AS cost
               FROM model_calls GROUP BY 1 ORDER BY 1"""
        )
        return {
            r["runner"]: {
                "calls": r["calls"],
                "tokens": r["total"] or 0,
                "estimated_tokens": r["est"] or 0,
                "cost": round(r["cost"] or 0.0, 6),
            }
            for r in rows
        }

    def token_totals(self, since_ms: int | None = None) -> dict[str, dict[str, int | float]]:
        """Calls and tokens per phase (optionally since a time)."""
        rows = self._conn.execute(
            """SELECT phase, COUNT(*) AS calls, SUM(input_tokens) AS input, SUM(output_tokens) AS output,
                      SUM(reasoning_tokens) AS reasoning, SUM(cache_read_tokens) AS cache_read,
                      SUM(cache_write_tokens) AS cache_write, SUM(cost) AS cost
               FROM model_calls WHERE at >= ? GROUP BY phase ORDER BY phase""",
            (since_ms or 0,),
        )
        out: dict[str, dict[str, int | float]] = {}
        for r in rows:
            out[r["phase"]] = {
                "calls": r["calls"],
                "input": r["input"] or 0,
                "output": r["output"] or 0,
                "reasoning": r["reasoning"] or 0,
                "cache_read": r["cache_read"] or 0,
                "cache_write": r["cache_write"] or 0,
                "cost": round(r["cost"] or 0.0, 6),
            }
        return out

    def tokens_per_day(self, since_ms: int) -> dict[int, int]:
        """Tokens (input + output + reasoning) per UTC day since ``since_ms``, keyed by day start."""
        rows = self._conn.execute(
            """SELECT (at / ?) * ? AS day,
                      SUM(input_tokens + output_tokens + reasoning_tokens) AS tokens
               FROM model_calls WHERE at >= ? GROUP BY day ORDER BY day""",
            (DAY, DAY, since_ms),
        )
        return {int(r["day"]): int(r["tokens"] or 0) for r in rows}

    def job_tokens(self, job_kind: str, job_key: str) -> CallUsage:
        r = self._conn.execute(
            """SELECT SUM(input_tokens), SUM(output_tokens), SUM(reasoning_tokens), SUM(cache_read_tokens),
                      SUM(cache_write_tokens), SUM(cost) FROM model_calls WHERE job_kind = ? AND job_key = ?""",
            (job_kind, job_key),
        ).fetchone()
        return CallUsage(*(v or 0 for v in r))
