"""Phase-1 benchmark: memoryd's own overhead, and its share of a real run.

Part 1 (in-process): N sessions (default 1,000) with realistic transcripts go through phase 1
against ``tests.fakehost.FakeOpencode`` (instant scripted structured replies, served through
``httpx.MockTransport``). Passes claim 128 each until every session is extracted; then a pass with
nothing changed and a pass with one session changed. The baseline is the same HTTP round trips
sent by a bare ``httpx.AsyncClient`` through the same fake host with no memoryd logic, so
``memoryd / bare`` is memoryd's own overhead.

Part 2 (real host): N sessions (default 20) are created in a real ``opencode serve`` (isolated XDG
sandbox, scripted instant OpenAI-compatible model from ``tests/e2e``), ``memoryd install
opencode`` runs, then phase 1 runs in-process with every HTTP call to opencode timed by route and
every model request timed and weighed inside the mock: a cold pass (the first after install), a
nothing-changed pass, a one-changed pass, and warm repeats (fresh store, same warm server).

Run from the repo root::

    .venv/bin/python bench/phase1.py [--sessions N] [--real N] [--skip-real] [--reps N]
                                     [--concurrency N] [--profile]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import gc
import io
import json
import logging
import pstats
import random
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import httpx

import memoryd.prompts as prompts_mod
import memoryd.tokenizer as tokens_mod
import memoryd.write.phase1 as phase1_mod
import memoryd.write.transcript as transcript_mod
from bench._common import FILES, PROJECTS, TASKS, WORDS, fmt_s, machine, paragraph, table
from memoryd.clock import HOUR, ManualClock
from memoryd.host.agents import EXTRACT_AGENT
from memoryd.host.opencode import OpencodeClient
from memoryd.host.transport import HostTransport
from memoryd.paths import Paths
from memoryd.redact import redact
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.tuning import EXTRACTION_CONCURRENCY
from memoryd.write.phase1 import Phase1, Phase1Report
from memoryd.write.transcript import build_transcript
from tests.fakehost import FakeOpencode

T0 = 1_800_000_000_000  # the fake "now" (same as the unit tests)
FAKE_URL = "http://opencode.test"
PAGE_SIZE = 500  # OpencodeClient.list_sessions default
MSG_PAGE = 200  # OpencodeClient.messages default

# The plugin's figures (shared reference notes ts-plugin-measured.md, 20 sessions, 74 turns).
PLUGIN_BYTES_PER_EXTRACTION = 34.6e3
PLUGIN_TOKENS_PER_EXTRACTION = 8.6e3
PLUGIN_TRIGGER_TO_OUTPUTS = (14.1, 14.6)
PLUGIN_TRIGGER_TO_FIRST = (8.0, 8.3)

log = logging.getLogger("bench.phase1")


# =============================================================================================
# Small helpers


def fmt_kb(n: float) -> str:
    return f"{n / 1000:.1f} KB"


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (time with at least one call in flight)."""
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


class Acc:
    """Accumulated seconds and call counts per named bucket."""

    def __init__(self) -> None:
        self.t: dict[str, float] = defaultdict(float)
        self.n: Counter[str] = Counter()

    def add(self, name: str, dt: float) -> None:
        self.t[name] += dt
        self.n[name] += 1

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.add(name, time.perf_counter() - t0)

        return timed

    def snapshot(self) -> tuple[dict[str, float], Counter[str]]:
        return dict(self.t), Counter(self.n)


@contextlib.contextmanager
def patched(patches: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set attributes for the duration of the block, restoring the originals afterwards."""
    saved = []
    for obj, name, new in patches:
        saved.append((obj, name, vars(obj).get(name, _MISSING)))
        setattr(obj, name, new)
    try:
        yield
    finally:
        for obj, name, old in reversed(saved):
            if old is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, old)


_MISSING = object()

STORE_METHODS = (
    "prune_outputs", "known_session_ids", "memory_modes", "stamp_modes_if_absent", "extracted_watermarks",
    "claim_stage1", "mark_stage1_succeeded", "mark_stage1_no_output", "mark_stage1_failed", "record_model_call",
    "output", "delete_session_memory", "set_mode", "release_stage1",
)  # fmt: skip


@contextlib.contextmanager
def instrument(acc: Acc, store: Store) -> Iterator[None]:
    """Time memoryd's synchronous building blocks (exact: none of them awaits)."""
    parse_orig = HostTransport.__dict__["_parse"].__func__
    patches: list[tuple[Any, str, Any]] = [
        (
            phase1_mod,
            "build_transcript",
            acc.wrap("transcript build (total)", build_transcript),
        ),
        (transcript_mod, "redact", acc.wrap("  of which: redaction", redact)),
        (
            tokens_mod,
            "truncate_middle",
            acc.wrap("  of which: tokenizing", tokens_mod.truncate_middle),
        ),
        (prompts_mod, "render", acc.wrap("prompt render", prompts_mod.render)),
        (phase1_mod, "redact", acc.wrap("output/title redaction", redact)),
        (
            phase1_mod,
            "validate_extraction",
            acc.wrap("answer validation", phase1_mod.validate_extraction),
        ),
        (
            OpencodeClient,
            "_parse",
            classmethod(acc.wrap("response parsing (json + pydantic)", parse_orig)),
        ),
        (Paths, "ensure_dir", acc.wrap("helper dir checks (ensure_dir)", Paths.ensure_dir)),
    ]
    owners = (store.stage1, store.phase2, store.outputs, store.ledger, store.owners)
    for m in STORE_METHODS:  # each lives on one of the store's parts
        owner = next(o for o in owners if hasattr(o, m))
        patches.append((owner, m, acc.wrap(f"store.{m}", getattr(owner, m))))
    with patched(patches):
        yield


# =============================================================================================
# Realistic synthetic transcripts


def _sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 20))
    return " ".join(words).capitalize() + "."


def _para(rng: random.Random, chars: int) -> str:
    return paragraph(rng, chars, _sentence)


def _code(rng: random.Random, lines: int) -> str:
    out = []
    for _i in range(lines):
        name = "_".join(rng.choices(WORDS, k=2))
        kind = rng.random()
        if kind < 0.2:
            out.append(f"def {name}(value, *, retries=3):")
        elif kind < 0.5:
            out.append(f"    {name} = compute_{rng.choice(WORDS)}(value, {rng.randint(0, 999)})")
        elif kind < 0.7:
            out.append(f"    if {name} is None:  # {rng.choice(WORDS)} {rng.choice(WORDS)}")
        else:
            out.append(f"    return {name}.{rng.choice(WORDS)}()")
    return "\n".join(out)


def _rand(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choices(alphabet, k=n))


def _secret(rng: random.Random) -> tuple[str, str]:
    """A (text containing a secret, the secret) pair, in one of the shapes transcripts really hold."""
    kind = rng.randrange(5)
    if kind == 0:
        s = "sk-proj-" + _rand(rng, 40)
        return f"OPENAI_API_KEY={s}\nDEBUG=false\nPORT=8080", s
    if kind == 1:
        s = "AKIA" + _rand(rng, 16, string.ascii_uppercase + string.digits)
        return f"aws_access_key_id = {s}\nregion = eu-west-1", s
    if kind == 2:
        s = "ghp_" + _rand(rng, 36)
        return f"git remote set-url origin https://x-access-token:{s}@github.com/acme/repo.git", s
    if kind == 3:
        s = _rand(rng, 24)
        return f"DATABASE_PASSWORD={s}\nDATABASE_HOST=db.internal", s
    s = _rand(rng, 32)
    return f'curl -H "Authorization: Bearer {s}" https://api.example.com/v1/jobs', s


@dataclass
class SessionData:
    sid: str
    title: str
    directory: str
    updated: int
    messages: list[tuple[str, list[dict[str, Any]], int]]  # (role, parts, created)
    secrets: list[str]
    visible_chars: int
    raw_text: str  # what a zero-logic daemon would send: all visible text, joined


def _tool_part(rng: random.Random, i: int, turn: int, secret: str | None) -> dict[str, Any]:
    call = f"call_{i:05d}_{turn:02d}_{rng.randrange(10**6):06d}"
    kind = rng.random()
    path = rng.choice(FILES)
    if kind < 0.35:
        cmd = rng.choice(
            ["pytest -q", "npm test", "make build", "cargo check", "go test ./...", "ruff check ."]
        )
        if secret is not None:
            cmd = "cat .env"
            out = secret
        elif rng.random() < 0.25:
            err = f"{rng.choice(['AssertionError', 'TypeError', 'ModuleNotFoundError'])}: {_sentence(rng)}"
            return {"type": "tool", "tool": "bash", "callID": call,
                    "state": {"status": "error", "input": {"command": cmd, "description": "run the tests"},
                              "error": f"Command failed with exit code 1\n{_code(rng, 6)}\n{err}",
                              "time": {"start": 1, "end": 2}}}  # fmt: skip
        else:
            out = "\n".join(
                f"{rng.choice(FILES)}::{'_'.join(rng.choices(WORDS, k=3))} "
                f"{rng.choice(['PASSED', 'PASSED', 'PASSED', 'FAILED', 'SKIPPED'])}"
                for _ in range(rng.randint(5, 40))
            )
        return {"type": "tool", "tool": "bash", "callID": call,
                "state": {"status": "completed", "input": {"command": cmd, "description": "run a command"},
                          "output": out, "title": cmd, "metadata": {"exit": 0}, "time": {"start": 1, "end": 2}}}  # fmt: skip
    if kind < 0.6:
        body = _code(rng, rng.randint(10, 100))  # sometimes past the 4,000-char tool-output bound
        numbered = "\n".join(f"{n + 1:05d}| {line}" for n, line in enumerate(body.splitlines()))
        return {"type": "tool", "tool": "read", "callID": call,
                "state": {"status": "completed", "input": {"filePath": f"/home/dev/{path}"},
                          "output": f"<file>\n{numbered}\n</file>", "title": path, "metadata": {},
                          "time": {"start": 1, "end": 2}}}  # fmt: skip
    if kind < 0.85:
        return {"type": "tool", "tool": "edit", "callID": call,
                "state": {"status": "completed",
                          "input": {"filePath": f"/home/dev/{path}", "oldString": _code(rng, 3),
                                    "newString": _code(rng, 5)},
                          "output": "Edit applied successfully.", "title": path,
                          "metadata": {"diff": "@@ -1,3 +1,5 @@\n" + _code(rng, 8)},
                          "time": {"start": 1, "end": 2}}}  # fmt: skip
    return {"type": "tool", "tool": "grep", "callID": call,
            "state": {"status": "completed", "input": {"pattern": rng.choice(WORDS), "path": "src"},
                      "output": "\n".join(f"{rng.choice(FILES)}:{rng.randint(1, 400)}: {_sentence(rng)}"
                                          for _ in range(rng.randint(3, 15))),
                      "title": "grep", "metadata": {}, "time": {"start": 1, "end": 2}}}  # fmt: skip


def make_session(i: int, rng: random.Random, updated: int) -> SessionData:
    """One realistic session: 10–20 turns, a few tool calls per assistant turn, sometimes a secret."""
    sid = f"ses_bench{i:06d}{_rand(rng, 8)}"
    project = rng.choice(PROJECTS)
    title = f"{rng.choice(TASKS)} in {project}"
    turns = rng.randint(10, 20)
    secret_turn = rng.randrange(turns) if rng.random() < 0.15 else -1
    secrets: list[str] = []
    msgs: list[tuple[str, list[dict[str, Any]], int]] = []
    created = updated - turns * 60_000
    for t in range(turns):
        user = _para(rng, rng.randint(30, 240))
        if rng.random() < 0.1:
            user += "\n\nHere is the log:\n" + _code(rng, rng.randint(10, 30))
        tool_secret = None
        if t == secret_turn:
            text, s = _secret(rng)
            secrets.append(s)
            if rng.random() < 0.5:
                user += "\n\nFor reference, my settings:\n" + text
            else:
                tool_secret = text
        msgs.append(("user", [{"type": "text", "text": user}], created))
        created += 20_000
        parts: list[dict[str, Any]] = [{"type": "step-start"}]
        if rng.random() < 0.7:
            parts.append({"type": "reasoning", "text": _para(rng, rng.randint(100, 400))})
        for _ in range(rng.choices([0, 1, 2], weights=[7, 3, 1])[0]):
            parts.append(_tool_part(rng, i, t, tool_secret))
            tool_secret = None
        if tool_secret is not None:
            parts.append(_tool_part(rng, i, t, tool_secret))
        parts.append({"type": "text", "text": _para(rng, rng.randint(50, 280))})
        parts.append(
            {"type": "step-finish", "reason": "stop", "tokens": {"input": 100, "output": 50}}
        )
        msgs.append(("assistant", parts, created))
        created += 40_000
    visible: list[str] = []
    for role, parts, _ in msgs:
        for p in parts:
            if p["type"] == "text":
                visible.append(f"[{role}] {p['text']}")
            elif p["type"] == "tool":
                st = p["state"]
                visible.append(
                    f"[tool {p['tool']}] {json.dumps(st['input'])}\n{st.get('output') or st.get('error')}"
                )
    raw = "\n\n".join(visible)
    return SessionData(sid, title, f"/home/dev/{project}", updated, msgs, secrets, len(raw), raw)


def make_dataset(n: int, seed: int = 1) -> list[SessionData]:
    rng = random.Random(seed)
    # Distinct timestamps, all idle past the default 6 h threshold and younger than 10 days.
    return [make_session(i, rng, T0 - 7 * HOUR - i * 30_000) for i in range(n)]


def build_fake(data: list[SessionData]) -> FakeOpencode:
    host = FakeOpencode()
    for s in data:
        host.add_session(s.sid, updated=s.updated, title=s.title, directory=s.directory, turns=[])
        host.messages[s.sid] = [
            host.message(s.sid, role, parts, created=c) for role, parts, c in s.messages
        ]
    return host


def settle_heap() -> None:
    """Move the generated data and the fake host's state out of the GC's reach.

    The fake host keeps every session's messages (tens of MB of dicts) in this process; without
    this, each full collection triggered by memoryd's allocations would scan all of it and charge
    the fake host's heap to memoryd. A real daemon's heap holds none of it.
    """
    gc.collect()
    gc.freeze()


def timed_handler(
    handle: Callable[[httpx.Request], Awaitable[httpx.Response]], acc: Acc
) -> Callable[[httpx.Request], Coroutine[None, None, httpx.Response]]:
    async def timed(request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        try:
            return await handle(request)
        finally:
            acc.add("fake host (route handling, JSON in/out)", time.perf_counter() - t0)

    return timed


# =============================================================================================
# Part 1: memoryd against the in-process fake host


@dataclass
class PassFigures:
    seconds: float
    http_calls: int
    prompts: int
    report: Phase1Report
    buckets: dict[str, float] = field(default_factory=dict)


@dataclass
class FakeResult:
    sessions: int
    extract_passes: list[PassFigures]
    extract_seconds: float
    idle_pass: PassFigures
    one_changed_pass: PassFigures
    buckets: dict[str, float]
    counts: Counter[str]
    tiktoken_load_s: float
    prompt_chars: list[int]
    leaked: int
    outputs: int
    profile: str | None = None


async def run_memoryd_fake(data: list[SessionData], *, profile: bool = False) -> FakeResult:
    tmp = Path(tempfile.mkdtemp(prefix="memoryd-bench-"))
    try:
        paths = Paths.from_env({"MEMORYD_HOME": str(tmp)})
        paths.ensure_dir(paths.data_dir)
        clock = ManualClock(T0)
        store = Store(paths.db, clock=clock)
        host = build_fake(data)
        acc = Acc()
        client = OpencodeClient(
            FAKE_URL, transport=httpx.MockTransport(timed_handler(host.handle, acc))
        )
        settings = Settings(
            max_rollouts_per_startup=128
        )  # the max; default idle 6 h, sessions are 7 h+ old
        p1 = Phase1(
            store=store,
            client=client,
            settings=settings,
            paths=paths,
            clock=clock,
            worker_id="bench",
        )
        settle_heap()

        t = time.perf_counter()
        tokens_mod.release()  # the first count starts the helper, which loads the table once
        tokens_mod.count("warm")  # per daemon lifetime; reported apart
        tiktoken_load = time.perf_counter() - t

        async def one_pass() -> PassFigures:
            calls0, prompts0 = len(host.calls), len(host.prompts)
            before = dict(acc.t)
            t0 = time.perf_counter()
            report = await p1.run_pass()
            dt = time.perf_counter() - t0
            spent = {
                k: v - before.get(k, 0.0) for k, v in acc.t.items() if v - before.get(k, 0.0) > 0
            }
            return PassFigures(
                dt, len(host.calls) - calls0, len(host.prompts) - prompts0, report, spent
            )

        prof = cProfile.Profile() if profile else None
        passes: list[PassFigures] = []
        with instrument(acc, store):
            done = 0
            t0 = time.perf_counter()
            if prof:
                prof.enable()
            while done < len(data) and len(passes) < len(data) // 8 + 10:
                fig = await one_pass()
                passes.append(fig)
                r = fig.report
                done += r.succeeded + r.no_output + r.failed
                if r.claimed == 0:
                    break
            if prof:
                prof.disable()
            extract_seconds = time.perf_counter() - t0
            buckets, counts = acc.snapshot()

            idle = await one_pass()  # nothing changed

            victim = data[len(data) // 2].sid
            clock.advance(7 * HOUR)  # the new turn is idle long enough too
            host.touch(victim, T0 - 1, ("user", "Correction: we use bun, not pnpm, from now on."))
            changed = await one_pass()

        prompt_chars = [
            len(b["parts"][0]["text"]) + len(b.get("system") or "") for b in host.prompts
        ]
        everything = "\n".join(json.dumps(b) for b in host.prompts)
        leaked = sum(1 for s in data for secret in s.secrets if secret in everything)
        outputs = len(store.outputs.newest_first())
        await client.aclose()
        store.close()
        prof_text = None
        if prof:
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
            prof_text = buf.getvalue()
        return FakeResult(len(data), passes, extract_seconds, idle, changed, buckets, counts, tiktoken_load,
                          prompt_chars, leaked, outputs, prof_text)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class BareResult:
    extract_seconds: float
    http_calls: int
    idle_seconds: float
    one_changed_seconds: float
    host_seconds: float  # of extract_seconds, inside the fake host's handler


async def run_bare(data: list[SessionData], passes: int, per_pass: int = 128) -> BareResult:
    """The same round trips without memoryd: no parsing, no transcript, no store, no checks."""
    host = build_fake(data)
    system = prompts_mod.render("stage_one_system.md")
    bodies = {
        s.sid: {
            "parts": [{"type": "text", "text": s.raw_text}], "agent": EXTRACT_AGENT, "system": system,
            "format": {"type": "json_schema", "schema": prompts_mod.EXTRACTION_SCHEMA},
        }
        for s in data
    }  # fmt: skip
    helper_dir = "/tmp/memoryd-bench-helper"
    settle_heap()
    order = [s.sid for s in sorted(data, key=lambda s: (s.updated, s.sid), reverse=True)]
    acc = Acc()
    async with httpx.AsyncClient(
        base_url=FAKE_URL, transport=httpx.MockTransport(timed_handler(host.handle, acc))
    ) as http:

        async def listing() -> None:
            params: dict[str, Any] = {"roots": "true", "limit": PAGE_SIZE}
            while True:
                r = await http.get("/experimental/session", params=params)
                cursor = r.headers.get("x-next-cursor")
                if not cursor:
                    return
                params["cursor"] = cursor

        async def job(sid: str) -> None:
            await http.get(f"/session/{sid}/message", params={"limit": MSG_PAGE})
            r = await http.post(
                "/session",
                params={"directory": helper_dir},
                json={"title": f"memoryd-extract-{sid}"},
            )
            hid = r.json()["id"]
            await http.post(
                f"/session/{hid}/message", params={"directory": helper_dir}, json=bodies[sid]
            )
            await http.delete(f"/session/{hid}")
            await http.get(f"/session/{hid}")  # memoryd confirms the delete (404)

        async def batch(sids: list[str]) -> None:
            gate = asyncio.Semaphore(EXTRACTION_CONCURRENCY)

            async def run(sid: str) -> None:
                async with gate:
                    await job(sid)

            await asyncio.gather(*(run(s) for s in sids))

        t0 = time.perf_counter()
        await http.get("/agent", params={"directory": helper_dir})
        for p in range(passes):
            await listing()
            await batch(order[p * per_pass : (p + 1) * per_pass])
        extract = time.perf_counter() - t0
        calls = len(host.calls)
        host_s = sum(acc.t.values())

        t0 = time.perf_counter()
        await listing()
        idle = time.perf_counter() - t0

        t0 = time.perf_counter()
        await listing()
        await batch([order[len(order) // 2]])
        one = time.perf_counter() - t0
    return BareResult(extract, calls, idle, one, host_s)


def report_fake(res: FakeResult, bare: BareResult, data: list[SessionData]) -> dict[str, Any]:
    n = res.sessions
    avg_vis = sum(s.visible_chars for s in data) / n
    avg_json = sum(len(json.dumps(s.messages)) for s in data[:200]) / min(200, n)
    turns = sum(len(s.messages) // 2 for s in data) / n
    tools = (
        sum(sum(1 for _, ps, _ in s.messages for p in ps if p["type"] == "tool") for s in data) / n
    )
    with_secret = sum(1 for s in data if s.secrets)
    ok = sum(p.report.succeeded for p in res.extract_passes)
    calls = sum(p.http_calls for p in res.extract_passes)
    print(f"\n== Part 1: {n} sessions through phase 1, in-process fake host ==")
    print(
        f"workload: {turns:.1f} turns and {tools:.1f} tool calls per session, {fmt_kb(avg_vis)} visible text "
        f"({fmt_kb(avg_json)} of message JSON), {with_secret} sessions hold a secret"
    )
    print(
        f"passes: {len(res.extract_passes)} (claims {[p.report.claimed for p in res.extract_passes]}), "
        f"{ok} extracted, {res.outputs} outputs stored, {sum(p.report.failed for p in res.extract_passes)} failed, "
        f"secrets reaching the prompts: {res.leaked}"
    )
    print(
        f"prompt sent per session: {fmt_kb(sum(res.prompt_chars) / max(1, len(res.prompt_chars)))} "
        f"(transcript + stage_one_system.md)"
    )
    print(
        f"tiktoken table load (once per daemon lifetime, not counted): {fmt_s(res.tiktoken_load_s)}"
    )
    print(
        f"memoryd: {fmt_s(res.extract_seconds)} wall, {n / res.extract_seconds:.0f} sessions/s, "
        f"{fmt_s(res.extract_seconds / n)} per session, {calls} HTTP calls"
    )
    print(
        f"bare transport baseline: {fmt_s(bare.extract_seconds)}, {bare.http_calls} HTTP calls "
        f"-> memoryd / bare = {res.extract_seconds / bare.extract_seconds:.1f}x"
    )
    host_s = res.buckets.get("fake host (route handling, JSON in/out)", 0.0)
    floor = bare.extract_seconds - bare.host_seconds
    own = res.extract_seconds - host_s - floor
    print(
        f"  split: fake host {fmt_s(host_s / n)}/session (bare run: {fmt_s(bare.host_seconds / n)}), bare httpx client "
        f"floor {fmt_s(floor / n)}/session, so memoryd's own work is {fmt_s(own / n)}/session "
        f"({100 * own / res.extract_seconds:.0f} % of its wall)"
    )

    print(
        "\nwhere the time goes (synchronous pieces timed exactly; the rest is httpx, asyncio, glue):"
    )
    top = {k: v for k, v in res.buckets.items() if not k.startswith("  ")}
    accounted = sum(top.values())
    # "of which" rows go right under their parent
    ordered: list[tuple[str, float]] = []
    for k, v in sorted(top.items(), key=lambda kv: -kv[1]):
        ordered.append((k, v))
        if k == "transcript build (total)":
            ordered += [
                (c, res.buckets[c])
                for c in ("  of which: redaction", "  of which: tokenizing")
                if c in res.buckets
            ]
    ordered.append(
        ("httpx client + asyncio + phase-1 glue (rest)", res.extract_seconds - accounted)
    )
    print(f"  {'bucket':<46} {'total':>9} {'/session':>9} {'share':>6} {'calls':>7}")
    for k, v in ordered:
        print(
            f"  {k:<46} {fmt_s(v):>9} {fmt_s(v / n):>9} {100 * v / res.extract_seconds:5.1f}% "
            f"{res.counts.get(k, ''):>7}"
        )

    idle, one = res.idle_pass, res.one_changed_pass

    def top3(p: PassFigures) -> str:
        items = sorted(
            ((k.strip(), v) for k, v in p.buckets.items() if not k.startswith("  ")),
            key=lambda kv: -kv[1],
        )
        return ", ".join(f"{k} {fmt_s(v)}" for k, v in items[:3])

    print(
        f"\nnothing-changed pass: {fmt_s(idle.seconds)}, {idle.report.up_to_date} up to date, "
        f"{idle.prompts} prompts, {idle.http_calls} HTTP calls (bare listing: {fmt_s(bare.idle_seconds)}, "
        f"{idle.seconds / bare.idle_seconds:.1f}x)"
    )
    print(f"  biggest: {top3(idle)}")
    print(
        f"one-changed pass: {fmt_s(one.seconds)}, {one.report.claimed} claimed, {one.prompts} prompt, "
        f"{one.http_calls} HTTP calls (bare: {fmt_s(bare.one_changed_seconds)}, "
        f"{one.seconds / bare.one_changed_seconds:.1f}x)"
    )
    print(f"  biggest: {top3(one)}")
    return {
        "sessions": n,
        "wall": res.extract_seconds,
        "rate": n / res.extract_seconds,
        "bare": bare.extract_seconds,
        "idle": idle.seconds,
        "idle_prompts": idle.prompts,
        "idle_bare": bare.idle_seconds,
        "one": one.seconds,
        "one_bare": bare.one_changed_seconds,
        "one_prompts": one.prompts,
    }


# =============================================================================================
# Part 2: the real opencode with an instant scripted model


class TimingTransport(httpx.AsyncHTTPTransport):
    """Times every request to opencode, body included, by route kind."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.intervals: list[tuple[float, float, str]] = []

    @staticmethod
    def kind(request: httpx.Request) -> str:
        path, method = request.url.path, request.method
        parts = [p for p in path.split("/") if p]
        if path == "/experimental/session":
            return "list"
        if path in ("/agent", "/instance/dispose"):
            return "agent"
        if parts[:1] == ["session"]:
            if len(parts) == 1 and method == "POST":
                return "create"
            if parts[2:] == ["message"]:
                return "prompt" if method == "POST" else "messages"
            if len(parts) == 2:
                return "delete" if method == "DELETE" else "confirm"
        return "other"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        try:
            resp = await super().handle_async_request(request)
            await resp.aread()  # opencode may send headers before the body: wait for all of it
            return resp
        finally:
            self.intervals.append((t0, time.perf_counter(), self.kind(request)))


@dataclass
class LLMCall:
    start: float
    end: float
    nbytes: int
    extraction: bool


class LLMTap:
    """Counts, weighs and times every request inside the MockLLM (handler threads)."""

    def __init__(self, mock: Any) -> None:
        from tests.e2e.mockllm import STRUCTURED_OUTPUT_TOOL, tools_offered

        self.calls: list[LLMCall] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        handler = mock._httpd.RequestHandlerClass
        orig_post = handler.do_POST
        orig_responder = mock.responder
        tap = self

        def responder(req: dict[str, Any]) -> Any:
            tap._local.extraction = STRUCTURED_OUTPUT_TOOL in tools_offered(req)
            return orig_responder(req)

        def do_post(h: Any) -> None:
            nbytes = int(h.headers.get("Content-Length") or 0)
            tap._local.extraction = False
            t0 = time.perf_counter()
            try:
                orig_post(h)
            finally:
                call = LLMCall(t0, time.perf_counter(), nbytes, bool(tap._local.extraction))
                with tap._lock:
                    tap.calls.append(call)

        handler.do_POST = do_post
        mock.responder = responder

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()


def real_scenarios(i: int) -> tuple[str, list[str]]:
    """Title and 3–4 user turns for session ``i``: decisions, preferences, failing runs, file writes."""
    k = i % 10
    proj = PROJECTS[i % len(PROJECTS)]
    title, turns = _real_turns(i, k, proj)
    if k != 7:  # context a user typically gives up front (~0.5–1 KB)
        turns[0] += " Some context: " + _para(random.Random(i), 400 + 40 * (i % 10))
    return title, turns


def _real_turns(i: int, k: int, proj: str) -> tuple[str, list[str]]:
    if k == 0:
        return f"record the {proj} colour decision", [
            f"For {proj} we decided the primary brand colour is teal #0f766e; please note it for the design system.",
            f'[[tool:write path=notes/colour-{i}.md content="primary: teal #0f766e (decided for {proj})\\n"]]',
            "Thanks. Keep design decisions in notes/ from now on, one file per decision.",
        ]
    if k == 1:
        return f"package manager for {proj}", [
            f"In {proj} we use pnpm instead of npm; npm install breaks the workspace links.",
            "Also pin Node 20 in .nvmrc, CI runs 20.11.",
            f'[[tool:write path=notes/tooling-{i}.md content="pnpm only; node 20.11 pinned in .nvmrc\\n"]]',
            "Great, that is the convention for every package in the monorepo.",
        ]
    if k == 2:
        return f"failing test run in {proj}", [
            f"The tests of {proj} fail with ModuleNotFoundError: No module named 'app' when I run pytest from the root.",
            f'[[tool:bash cmd="ls missing-dir-{i}"]]',
            "That directory is missing; installing in editable mode with pip install -e . fixed the import error.",
        ]
    if k == 3:
        return f"deploy credentials for {proj}", [
            f"The deploy of {proj} needs OPENAI_API_KEY=sk-proj-{_rand(random.Random(i), 40)} in the environment.",
            "Never commit it; the CI reads it from the secret store named deploy-prod.",
            "Deploys go out on Tuesdays only, after the staging smoke test passes.",
        ]
    if k == 4:
        return f"database choice for {proj}", [
            f"We settled on PostgreSQL 16 for {proj}; SQLite was too slow for concurrent writers.",
            "Migrations live in db/migrations and run with alembic upgrade head before the app starts.",
            f'[[tool:write path=notes/db-{i}.md content="postgres 16; alembic migrations in db/migrations\\n"]]',
        ]
    if k == 5:
        return f"formatting rules in {proj}", [
            "Run ruff format before every commit; the CI rejects unformatted code.",
            "Line length is 120, not 88; the team agreed on it last sprint.",
            '[[tool:bash cmd="echo line-length=120"]]',
            "Good. Use that for all Python files in this repository.",
        ]
    if k == 6:
        return f"flaky timeout in {proj}", [
            f"The integration test test_sync_orders in {proj} times out about one run in five on CI.",
            f'[[tool:bash cmd="ls tests-{i}/integration"]]',
            "It waits on the message queue; the consumer starts 3 s late on the small runners.",
            "We raised the wait to 10 s and added a readiness probe; it has been green for 40 runs.",
        ]
    if k == 7:
        return "hello", ["hi!", "thanks, bye"]  # small talk: nothing worth keeping
    if k == 8:
        return f"API pagination for {proj}", [
            f"The list endpoints of {proj} must use cursor pagination, not offsets; offsets skip rows under writes.",
            f'[[tool:write path=notes/api-{i}.md content="cursor pagination; page size 100 max\\n"]]',
            "The cursor is the last id, base64-encoded; page size is capped at 100.",
            "Document that in the API guidelines too.",
        ]
    return f"release process of {proj}", [
        f"Releases of {proj} are cut from main with a signed tag vX.Y.Z; changelog entries come from PR titles.",
        f'[[tool:bash cmd="cat missing-changelog-{i}.md"]]',
        "Right, the changelog is generated at release time, it does not exist in the tree.",
    ]


@dataclass
class RealResult:
    sessions: int
    turns: int
    create_seconds: float
    server_start_s: float | None
    install_seconds: float
    cold: RealPass  # the first pass after install: boots the helper instance, loads the agent
    idle: RealPass
    one: RealPass
    warm: list[RealPass]  # full re-extractions against the warm server (fresh store each)
    extraction_bodies: list[dict[str, Any]]
    helpers_left: int
    concurrency: int | None = None


@dataclass
class RealPass:
    """One timed full-extraction pass against the real server."""

    wall: float
    cpu: float  # event-loop thread CPU (memoryd; the MockLLM runs in other threads)
    union: float  # time with at least one HTTP call to opencode in flight
    by_kind: dict[str, tuple[int, float]]
    llm: list[LLMCall]
    first: float | None  # pass start -> first extraction request reaches the model
    last: float | None  # pass start -> last job finalized in the store
    report: Phase1Report

    @property
    def share(self) -> float:
        return 100 * (self.wall - self.union) / self.wall


def _stamp_finals(store: Store, finals: list[float]) -> None:
    for m in ("mark_stage1_succeeded", "mark_stage1_no_output", "mark_stage1_failed"):
        orig = getattr(store.stage1, m)

        def stamped(*a: Any, _orig: Callable[..., Any] = orig, **k: Any) -> Any:
            try:
                return _orig(*a, **k)
            finally:
                finals.append(time.perf_counter())

        setattr(store.stage1, m, stamped)


async def _timed_pass(
    p1: Phase1, transport: TimingTransport, tap: LLMTap, finals: list[float]
) -> RealPass:
    tap.clear()
    finals.clear()
    transport.intervals.clear()
    cpu0 = time.thread_time()
    t0 = time.perf_counter()
    report = await p1.run_pass()
    wall = time.perf_counter() - t0
    cpu = time.thread_time() - cpu0
    by_kind: dict[str, tuple[int, float]] = {}
    for s, e, k in transport.intervals:
        c, tot = by_kind.get(k, (0, 0.0))
        by_kind[k] = (c + 1, tot + e - s)
    llm = list(tap.calls)
    first = min((c.start for c in llm if c.extraction), default=None)
    return RealPass(
        wall, cpu, union_seconds([(s, e) for s, e, _ in transport.intervals]), by_kind, llm,
        None if first is None else first - t0, (max(finals) - t0) if finals else None, report,
    )  # fmt: skip


async def real_phase1(
    box: Any, n: int, tap: LLMTap, mock: Any, one_sid: str, reps: int
) -> dict[str, Any]:
    """Cold pass (first after install), no-change pass, one-change pass, then warm repeats.

    Each warm repeat uses a fresh, empty store so all sessions are extracted again by the
    already-warm server (helper instance booted, agent known).
    """
    paths = Paths.from_env({"MEMORYD_HOME": str(box.memoryd_home)})
    settings = Settings(min_rollout_idle_hours=0, max_rollouts_per_startup=min(max(n, 1), 128))
    transport = TimingTransport()
    client = OpencodeClient(box.url, username=box.username, password=box.password, transport=transport,
                            timeout=settings.host.request_timeout_s)  # fmt: skip
    finals: list[float] = []
    stores: list[Store] = []
    tokens_mod.count("warm")  # start the tokenizer helper before the timed passes
    try:
        store = Store(paths.db)
        stores.append(store)
        _stamp_finals(store, finals)
        p1 = Phase1(
            store=store,
            client=client,
            settings=settings,
            paths=paths,
            clock=store.clock,
            worker_id="bench",
        )
        mock.clear()
        cold = await _timed_pass(p1, transport, tap, finals)
        bodies = [r.body for r in mock.extraction_requests]

        idle = await _timed_pass(
            p1, transport, tap, finals
        )  # nothing changed: no model call at all

        # one new turn in one session: exactly one re-extraction
        await asyncio.to_thread(box.driver.say, one_sid, "Correction: use bun, not pnpm, from now on.",
                                directory=box.project_dir)  # fmt: skip
        one = await _timed_pass(p1, transport, tap, finals)

        warm: list[RealPass] = []
        for r in range(reps - 1):
            fresh = Store(
                Path(tempfile.mkdtemp(prefix="memoryd-bench-rep-", dir=box.root)) / "memory.db"
            )
            stores.append(fresh)
            _stamp_finals(fresh, finals)
            again = Phase1(store=fresh, client=client, settings=settings, paths=paths, clock=fresh.clock,
                           worker_id=f"bench-rep{r}")  # fmt: skip
            warm.append(await _timed_pass(again, transport, tap, finals))

        titles = [s["title"] for s in box.driver.list_all_sessions(roots=False, archived=True)]
        return {
            "cold": cold, "idle": idle, "one": one, "warm": warm, "bodies": bodies,
            "helpers_left": sum(1 for t in titles if t.startswith("memoryd-")),
        }  # fmt: skip
    finally:
        await client.aclose()
        for st in stores:
            st.close()


def run_real(n: int, concurrency: int | None = None, reps: int = 3) -> RealResult:
    from tests.e2e.mockllm import MockLLM
    from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode

    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-real-"))
    mock = box = None
    try:
        binary = ensure_opencode()
        mock = MockLLM()
        tap = LLMTap(mock)
        mock.start()
        box = OpencodeSandbox(root / "sandbox", binary, mock.base_url)
        t0 = time.perf_counter()
        ids: list[str] = []
        turns = 0
        for i in range(n):
            title, texts = real_scenarios(i)
            sid = box.driver.create_session(title, directory=box.project_dir)["id"]
            for text in texts:
                box.driver.say(sid, text, directory=box.project_dir)
                turns += 1
            ids.append(sid)
        create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        inst = subprocess.run(
            [sys.executable, "-m", "memoryd", "install", "opencode", "--config-dir", str(box.config_dir)],
            env=box.env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        install_s = time.perf_counter() - t0
        if inst.returncode != 0:
            raise RuntimeError(f"memoryd install opencode failed: {inst.stderr}")
        one_sid = ids[1 % len(ids)]
        override = [(phase1_mod, "EXTRACTION_CONCURRENCY", concurrency)] if concurrency else []
        with patched(override):
            out = asyncio.run(real_phase1(box, n, tap, mock, one_sid, reps))
        return RealResult(
            n, turns, create_s, box.startup_seconds, install_s, out["cold"], out["idle"], out["one"], out["warm"],
            out["bodies"], out["helpers_left"], concurrency,
        )  # fmt: skip
    finally:
        if box is not None:
            box.stop()
        if mock is not None:
            mock.stop()
        shutil.rmtree(root, ignore_errors=True)


def _body_breakdown(bodies: list[dict[str, Any]]) -> dict[str, float]:
    """Average bytes per extraction request: system messages, user message, tool definitions."""
    sys_b = user_b = tools_b = total = 0
    for b in bodies:
        total += len(json.dumps(b, ensure_ascii=False).encode())
        for m in b.get("messages") or []:
            size = len(json.dumps(m.get("content"), ensure_ascii=False).encode())
            if m.get("role") == "system":
                sys_b += size
            else:
                user_b += size
        tools_b += len(json.dumps(b.get("tools") or [], ensure_ascii=False).encode())
    k = max(1, len(bodies))
    return {"total": total / k, "system": sys_b / k, "user": user_b / k, "tools": tools_b / k}


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _describe_pass(label: str, p: RealPass, *, routes: bool = True) -> None:
    r = p.report
    first = "n/a" if p.first is None else fmt_s(p.first)
    last = "n/a" if p.last is None else fmt_s(p.last)
    print(f"{label}: wall {fmt_s(p.wall)}, first extraction request at {first}, last output at {last}; "
          f"{r.claimed} claimed, {r.succeeded} extracted, {r.no_output} empty, {r.failed} failed"
          f"{' ' + str(r.errors[:2]) if r.errors else ''}")  # fmt: skip
    print(
        f"  waiting on opencode {fmt_s(p.union)} -> memoryd share of wall time: {p.share:.1f} % "
        f"(event-loop thread CPU {fmt_s(p.cpu)} = {100 * p.cpu / p.wall:.1f} % of wall)"
    )
    if routes:
        means = ", ".join(
            f"{k} {fmt_s(p.by_kind[k][1] / p.by_kind[k][0])}" for k in ROUTE_KINDS if k in p.by_kind
        )
        print(f"  mean time per call: {means}")


ROUTE_KINDS = ("list", "agent", "messages", "create", "prompt", "delete", "confirm", "other")


def report_real(res: RealResult) -> dict[str, Any]:
    from tests.e2e.mockllm import transcript_of

    conc = EXTRACTION_CONCURRENCY if res.concurrency is None else res.concurrency
    print(
        f"\n== Part 2: {res.sessions} sessions, real opencode serve + instant scripted model, "
        f"{conc} extractions at once =="
    )
    print(
        f"setup (not timed below): server start {fmt_s(res.server_start_s or 0)}, {res.turns} user turns created "
        f"in {fmt_s(res.create_seconds)}, memoryd install {fmt_s(res.install_seconds)}"
    )
    cold = res.cold
    _describe_pass("cold pass (first after install)", cold, routes=False)
    print("  HTTP to opencode by route (request-seconds; concurrent calls overlap):")
    for k in ROUTE_KINDS:
        if k in cold.by_kind:
            c, tot = cold.by_kind[k]
            print(f"    {k:<9} {c:4d} calls  {fmt_s(tot):>9} total  {fmt_s(tot / c):>9} each")
    ext = [c for c in cold.llm if c.extraction]
    model_s = sum(c.end - c.start for c in cold.llm)
    print(
        f"  model (MockLLM): {len(cold.llm)} requests, {len(ext)} extraction, {fmt_s(model_s)} inside the mock"
    )
    avg_bytes = sum(c.nbytes for c in ext) / max(1, len(ext))
    bd = _body_breakdown(res.extraction_bodies)
    tok = [tokens_mod.count(json.dumps(b, ensure_ascii=False)) for b in res.extraction_bodies]
    avg_tok = sum(tok) / max(1, len(tok))
    transcripts = [len(transcript_of(b).encode()) for b in res.extraction_bodies]
    print(f"  bytes per extraction request: {fmt_kb(avg_bytes)} (min {fmt_kb(min((c.nbytes for c in ext), default=0))}, "
          f"max {fmt_kb(max((c.nbytes for c in ext), default=0))}) ≈ {avg_bytes / 4 / 1000:.1f} K tokens at 4 B/token, "
          f"{avg_tok / 1000:.1f} K cl100k tokens; plugin: {fmt_kb(PLUGIN_BYTES_PER_EXTRACTION)} ≈ "
          f"{PLUGIN_TOKENS_PER_EXTRACTION / 1000:.1f} K tokens")  # fmt: skip
    print(
        f"    of which: system messages {fmt_kb(bd['system'])}, user message {fmt_kb(bd['user'])} "
        f"(transcript {fmt_kb(sum(transcripts) / max(1, len(transcripts)))}), tool definitions {fmt_kb(bd['tools'])}"
    )
    for i, w in enumerate(res.warm):
        _describe_pass(f"warm repeat {i + 1} (fresh store)", w)
    print(
        f"nothing-changed pass: {fmt_s(res.idle.wall)}, {len(res.idle.llm)} model requests; "
        f"one-changed pass: {fmt_s(res.one.wall)}, {len(res.one.llm)} model request(s), "
        f"{res.one.report.claimed} claimed; helper sessions left behind: {res.helpers_left}"
    )
    print(
        f"plugin: trigger -> first extraction {PLUGIN_TRIGGER_TO_FIRST[0]}–{PLUGIN_TRIGGER_TO_FIRST[1]} s, "
        f"-> all outputs {PLUGIN_TRIGGER_TO_OUTPUTS[0]}–{PLUGIN_TRIGGER_TO_OUTPUTS[1]} s (its 20-session, 74-turn "
        f"workload and a new turn as trigger; ours is a pass start, see bench/README.md)"
    )
    warm_last = [w.last for w in res.warm if w.last is not None]
    return {
        "share": cold.share, "cpu_pct": 100 * cold.cpu / cold.wall, "llm": len(cold.llm), "ext": len(ext),
        "bytes": avg_bytes, "tok4": avg_bytes / 4, "tok": avg_tok, "first": cold.first, "last": cold.last,
        "warm_last": _median(warm_last) if warm_last else None,
        "warm_range": (min(warm_last), max(warm_last)) if warm_last else None,
        "warm_share": _median([w.share for w in res.warm]) if res.warm else None,
        "idle": res.idle.wall, "idle_llm": len(res.idle.llm), "one": res.one.wall, "one_llm": len(res.one.llm),
    }  # fmt: skip


# =============================================================================================
# Summary


def summary_table(fake: dict[str, Any] | None, real: dict[str, Any] | None) -> None:
    rows: list[tuple[str, str, str, str]] = []
    if fake:
        n = fake["sessions"]
        rows += [
            (f"fake host: {n} sessions extracted", fmt_s(fake["wall"]), fmt_s(fake["bare"]),
             f"{fake['wall'] / fake['bare']:.1f}x bare"),
            ("fake host: sessions/s", f"{fake['rate']:.0f}", f"{n / fake['bare']:.0f}", ""),
            ("fake host: nothing-changed pass", f"{fmt_s(fake['idle'])}, {fake['idle_prompts']} prompts",
             fmt_s(fake["idle_bare"]), f"{fake['idle'] / fake['idle_bare']:.1f}x bare"),
            ("fake host: one-changed pass", f"{fmt_s(fake['one'])}, {fake['one_prompts']} prompt",
             fmt_s(fake["one_bare"]), f"{fake['one'] / fake['one_bare']:.1f}x bare"),
        ]  # fmt: skip
    if real:
        first = "n/a" if real["first"] is None else fmt_s(real["first"])
        last = "n/a" if real["last"] is None else fmt_s(real["last"])
        rows += [
            ("real: memoryd share of wall (cold)", f"{real['share']:.1f} % (CPU {real['cpu_pct']:.1f} %)", "", ""),
            ("real: model requests (extraction)", f"{real['llm']} ({real['ext']})", "20 (20)", ""),
            ("real: bytes / extraction request", fmt_kb(real["bytes"]), fmt_kb(PLUGIN_BYTES_PER_EXTRACTION),
             f"{real['bytes'] / PLUGIN_BYTES_PER_EXTRACTION:.2f}x plugin"),
            ("real: tokens / extraction (B/4)", f"{real['tok4'] / 1000:.1f} K", f"{PLUGIN_TOKENS_PER_EXTRACTION / 1000:.1f} K",
             f"{real['tok4'] / PLUGIN_TOKENS_PER_EXTRACTION:.2f}x plugin"),
            ("real: trigger -> first extraction", first, f"{PLUGIN_TRIGGER_TO_FIRST[0]}–{PLUGIN_TRIGGER_TO_FIRST[1]} s", ""),
            ("real: trigger -> all outputs (cold)", last, f"{PLUGIN_TRIGGER_TO_OUTPUTS[0]}–{PLUGIN_TRIGGER_TO_OUTPUTS[1]} s",
             "" if real["last"] is None else f"{real['last'] / PLUGIN_TRIGGER_TO_OUTPUTS[0]:.2f}x plugin"),
        ]  # fmt: skip
        if real["warm_last"] is not None:
            lo, hi = real["warm_range"]
            rows.append(("real: trigger -> all outputs (warm)", f"{fmt_s(real['warm_last'])} (median; {fmt_s(lo)}–{fmt_s(hi)})",
                         f"{PLUGIN_TRIGGER_TO_OUTPUTS[0]}–{PLUGIN_TRIGGER_TO_OUTPUTS[1]} s",
                         f"{real['warm_last'] / PLUGIN_TRIGGER_TO_OUTPUTS[0]:.2f}x plugin"))  # fmt: skip
            rows.append(
                (
                    "real: memoryd share of wall (warm)",
                    f"{real['warm_share']:.1f} % (median)",
                    "",
                    "",
                )
            )
        rows += [
            ("real: nothing-changed pass", f"{fmt_s(real['idle'])}, {real['idle_llm']} model calls", "0 model calls", ""),
            ("real: one-changed pass", f"{fmt_s(real['one'])}, {real['one_llm']} model call", "", ""),
        ]  # fmt: skip
    header = ("measure", "memoryd", "baseline", "ratio")
    print("\n== Summary ==")
    table(rows, header)
    print(
        "baseline: fake-host rows = the same HTTP round trips with no memoryd logic; real rows = the TS plugin"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sessions",
        type=int,
        default=1000,
        help="sessions for the fake-host part (default 1000; 0 skips it)",
    )
    ap.add_argument(
        "--real", type=int, default=20, help="sessions for the real-server part (default 20)"
    )
    ap.add_argument("--skip-real", action="store_true", help="only the in-process part")
    ap.add_argument(
        "--reps",
        type=int,
        default=3,
        help="real part: full passes (1 cold + warm repeats; default 3)",
    )
    ap.add_argument(
        "--concurrency",
        type=int,
        help="override memoryd.write.phase1.EXTRACTION_CONCURRENCY (real part)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also print cProfile's top entries of the extraction passes",
    )
    ap.add_argument("--seed", type=int, default=1, help="seed of the synthetic transcripts")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print(f"memoryd phase-1 bench, {time.strftime('%Y-%m-%d %H:%M')}, {machine()}")

    fake_fig = real_fig = None
    if args.sessions > 0:
        t = time.perf_counter()
        data = make_dataset(args.sessions, args.seed)
        print(f"generated {len(data)} sessions in {fmt_s(time.perf_counter() - t)}")
        res = asyncio.run(run_memoryd_fake(data))
        bare = asyncio.run(run_bare(data, passes=len(res.extract_passes)))
        fake_fig = report_fake(res, bare, data)
        if args.profile:
            prof = asyncio.run(run_memoryd_fake(data, profile=True))
            print(
                "\ncProfile of the extraction passes (a second run; profiling inflates everything):"
            )
            print(prof.profile)
        del data, res, bare
    if not args.skip_real and args.real > 0:
        real_fig = report_real(run_real(args.real, args.concurrency, max(1, args.reps)))
    summary_table(fake_fig, real_fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
