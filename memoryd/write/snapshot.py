"""One snapshot of memoryd's state, shared by ``memoryd status`` and ``memory_inspect``."""

from __future__ import annotations

from typing import Any

from memoryd.clock import DAY, iso_ms
from memoryd.host import ids as hosts
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.keys import (
    DAEMON,
    FOLDER_SWEPT,
    HOST_SEEN,
    LAST_PASS,
    LAST_PASS_ERROR,
    RUNNER_SEEN,
)
from memoryd.tuning import PHASE2_COOLDOWN_MS
from memoryd.write.budget import Budget


def sync_snapshot(store: Store, settings: Settings) -> dict[str, Any]:
    """``sync.*`` for status: last success and error, what waits to be pushed, the backoff."""
    if not settings.sync_remote:
        return {"configured": False}
    # dulwich and the sync engine load only for a home that syncs (daemon RSS)
    from memoryd.sync.engine import sync_state
    from memoryd.sync.git import display_remote

    st = sync_state(store)
    now = store.clock.now_ms()
    retry_at = st.get("retry_at")
    if st.get("blocked"):
        state = "blocked"
    elif retry_at and retry_at > now:
        state = "retrying"
    elif not st.get("last_attempt"):
        state = "never_run"
    else:
        state = "ok" if not st.get("last_error") else "error"
    return {
        "configured": True,
        "state": state,
        "remote": display_remote(settings.sync_remote),
        "machine": st.get("machine"),
        "last_attempt": iso_ms(st.get("last_attempt")),
        "last_success": iso_ms(st.get("last_success")),
        "last_error": st.get("last_error"),
        "last_error_at": iso_ms(st.get("last_error_at")),
        "failures": st.get("failures", 0),
        "retry_at": iso_ms(retry_at),
        "next_due": iso_ms(st.get("next_due")),
        "pending": st.get("pending") or {},
        "blocked": st.get("blocked") or [],
        "machines": st.get("machines") or [],
        "skipped_machines": st.get("skipped_machines") or {},
        "sent": st.get("sent") or {},  # files the last successful sync pushed
        "received": st.get("received") or {},  # other machines' memory rendered after it
        "rerooted_at": iso_ms(st.get("rerooted_at")),  # last forget-rewrite of the branch
        "interval_s": settings.sync_interval_s,
    }


def _runner(store: Store, settings: Settings) -> dict[str, Any]:
    """The runner setting, and what the last pass actually used."""
    seen = store.ledger.get_state(RUNNER_SEEN)
    last: dict[str, Any] = seen if isinstance(seen, dict) else {}
    return {
        "setting": settings.runner,
        "name": last.get("name"),
        "why": last.get("why"),
        "executable": last.get("executable"),
        "last_used": iso_ms(last.get("at")),
    }


def snapshot(store: Store, settings: Settings, paths: Paths) -> dict[str, Any]:
    now = store.clock.now_ms()
    per_phase = store.ledger.token_totals()
    today = store.ledger.token_totals(since_ms=now - now % DAY)

    def total(rows: dict[str, dict[str, int | float]]) -> dict[str, int | float]:
        keys = ("calls", "input", "output", "reasoning", "cache_read", "cache_write", "cost")
        out = {k: sum(r[k] for r in rows.values()) for k in keys}
        out["total"] = out["input"] + out["output"] + out["reasoning"]
        return out

    seen = store.ledger.get_state(HOST_SEEN)
    host_seen: dict[str, Any] = seen if isinstance(seen, dict) else {}
    job = store.phase2.phase2_job()
    phase2: dict[str, Any] = {
        "status": "never_run",
        "last_success": None,
        "next_eligible": iso_ms(now),
        "last_error": None,
        "consumed_outputs": store.outputs.consumed_count(),
    }
    if job is not None:
        gates = [job["retry_at"] or 0, job["cooldown_until"] or 0]
        if job["status"] == "running":
            gates.append(job["lease_until"] or 0)
        phase2.update(
            status=job["status"],
            last_success=iso_ms(job["finished_at"]) if job["status"] == "done" else None,
            last_consolidation=iso_ms(job["cooldown_until"] - PHASE2_COOLDOWN_MS)
            if job["cooldown_until"]
            else None,
            next_eligible=iso_ms(max([now, *gates])),
            last_error=job["last_error"],
            pending_input=(job["input_watermark"] or 0) > (job["last_success_watermark"] or 0),
        )
    last_pass = store.ledger.get_state(LAST_PASS)
    swept = store.ledger.get_state(FOLDER_SWEPT)
    memory_folder: dict[str, Any] = {"removed": [], "when": None, "at": None}
    if isinstance(swept, dict):
        memory_folder = {
            "removed": list(swept.get("removed") or []),
            "when": swept.get("when"),
            "at": iso_ms(swept.get("at")),
        }
    return {
        "stage1": {
            "outputs": store.outputs.output_count(),
            "jobs": store.stage1.stage1_counts(),
            "last_errors": [
                {**e, "at": iso_ms(e["at"]), "retry_at": iso_ms(e["retry_at"])}
                for e in store.stage1.stage1_last_errors()
            ],
        },
        "phase2": phase2,
        "memory_folder": memory_folder,
        "budget": Budget(store, settings, store.clock).state(),
        "daemon": store.ledger.get_state(DAEMON),
        "last_pass_error": store.ledger.get_state(LAST_PASS_ERROR),
        "host": {
            "url": settings.host.url or host_seen.get("url"),
            "version": host_seen.get("version"),
            "private": host_seen.get("private", settings.host.url is None),
            "last_seen": iso_ms(host_seen.get("at")),
        },
        "runner": _runner(store, settings),
        "tokens": {
            "spent": total(per_phase),
            "per_phase": per_phase,
            "per_runner": store.ledger.tokens_per_runner(),
            "today": total(today),
        },
        "hosts": hosts.snapshot(store, last_pass),  # opencode, claude-code, codex
        "last_pass": last_pass,
        "sync": sync_snapshot(store, settings),
        "settings": {
            "generate_memories": settings.generate_memories,
            "min_rollout_idle_hours": settings.min_rollout_idle_hours,
            "max_rollouts_per_startup": settings.max_rollouts_per_startup,
        },
        "paths": {k: str(v) for k, v in paths.named().items()},
    }
