"""Scale benchmark: a year of sessions (1,000 / 3,000 / 10,000 over 50 projects), no model.

Each size gets its own home in a temp dir, built through memoryd's own code: the sessions live in
``tests.fakehost.FakeOpencode`` (served in process through ``httpx.MockTransport``), their
stage-1 outputs (realistic ~0.4–1.5 KB raw memories and ~1–3 KB rollout summaries, the
generators of ``bench/phase2.py``) go in through ``Store.claim_stage1`` /
``mark_stage1_succeeded``, and one full pass (``memoryd.write.passes.run_pass`` with the host
opening replaced by the fake) consolidates them, so the memory folder, baseline, block and
validated copy are what a real home holds. Retention is widened to a year
(``max_unused_days = 365``) so every session stays held: the worst case.

Then, per size:

- a pass with nothing new (``run_pass``: tick, edit check, phase 1 listing every session,
  phase 2 claim, tick), wall and CPU (process + reaped children);
- a pass with 20 new sessions (realistic 10–20 turn transcripts from ``bench/phase1.py``; the
  consolidator is scripted): memoryd's own CPU is the pass's CPU minus the fake host's route
  handling, timed inside the handler; it is the first to extract, so it also compiles what a
  fresh process compiles on first use;
- memoryd's CPU per new session, warm (as in the daemon): whole passes with 20 and with 80 new
  sessions (extraction, consolidation, the tokenizer helper's CPU included), run back to back
  five times: the median of the five differences over 60, and the lowest and highest (three
  differences over 30 swung by ±10 ms with this machine's speed); and phase 1 alone in this
  process, less its CPU with nothing new (the listing), per session;
- ``memoryd run --once`` in its own process against the fake host over HTTP on 127.0.0.1 (nothing
  new, then 20 new): its CPU with its children's (``wait4``) and its own and its tokenizer
  helper's peak RSS (``VmHWM``), with nothing of the bench's in them;
- workspace sync with nothing changed, baseline diff with nothing changed, block render;
- consolidation input bytes (the consolidation prompt plus the files it points at that changed)
  beside the selection size;
- ranked search: the first query on a fresh index, p95 of steady queries, the first query
  after an edit of ``MEMORY.md``, and the first after a pass that extracted 20 new sessions;
- peak RSS of each step (``VmHWM``, reset through ``/proc/self/clear_refs`` before each), DB and
  folder bytes.

The sizes run in one child process each, so one size's heap never inflates the next one's RSS.

Run from the repo root::

    .venv/bin/python bench/scale.py [--sizes 1000,3000,10000] [--profile] [--no-once]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import contextlib
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import httpx

from bench._common import PROJECTS, TASKS, WORDS, machine, table
from bench.idle import memoryd_peak
from bench.phase1 import make_session, patched
from bench.phase2 import _raw_memory, _summary
from memoryd import tokenizer
from memoryd.clock import DAY, HOUR, ManualClock
from memoryd.folder import baseline_proc
from memoryd.folder.workspace import Workspace
from memoryd.host.connect import HostConnection
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths, bump_change_mark
from memoryd.read.block import render_block, sync_block
from memoryd.scopes import scope_key
from memoryd.settings import Settings
from memoryd.store.home import App
from memoryd.tools import SearchIndex, default_index_path, memory_search
from memoryd.tools.hits import SearchQuery
from memoryd.write import passes
from memoryd.write.phase1 import Phase1, Phase1Report
from tests.fakehost import FakeOpencode

# The store's clock is a ManualClock two weeks behind the wall clock (the bench moves it a day
# forward for each batch of new sessions, twelve at most): the consolidation's check for host
# tool calls that named the folder lists sessions updated since the wall-clock start of the run,
# so every session of the home must lie in the wall clock's past, as it does for real. (At six
# days, the last warm try's sessions lay in the future and that check read them all, a cost no
# daemon has: that try's figure came out high.)
T0 = (int(time.time()) // 3600 - 14 * 24) * 3600 * 1000
FAKE_URL = "http://opencode.test"
N_PROJECTS = 50
NEW_SESSIONS = 20
# The larger warm pass: 60 sessions more than a 20-new one. (Its sessions are dated before the
# one-shot runs' new ones, which the consolidation selects first.)
MANY_NEW = 80  # (a difference over 30 swung by ±5 ms with what a pass does besides: GC, phase 2)
WARM_TRIES = 5  # pairs of warm passes (20 and 80 new) for the per-session figure
SEARCH_RUNS = 20
QUERIES = ["deploy", "flaky test", "migration schema", "retry timeout", "cache index"]
GOALS = {
    "nothing-new pass CPU": "<= 0.5 s",
    "memoryd CPU per new session": "<= 20 ms",
    "ranked search, first after a change": "<= 200 ms",
    "peak RSS of run --once": "<= 70 MB",
}


def project_names() -> list[str]:
    names = list(PROJECTS)
    i = 0
    while len(names) < N_PROJECTS:
        names.append(f"{PROJECTS[i % len(PROJECTS)]}-{i // len(PROJECTS) + 2}")
        i += 1
    return names[:N_PROJECTS]


# =============================================================================================
# Measuring


def cpu_now() -> float:
    """CPU seconds of this process and its reaped children."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_mb(field: str) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return None


def peak_rss_mb() -> float:
    got = _status_mb("VmHWM:")
    return got if got is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Step:
    wall: float = 0.0
    cpu: float = 0.0
    rss: float = 0.0


def measure(fn: Callable[[], Any]) -> tuple[Any, Step]:
    gc.collect()
    reset_peak_rss()
    w, c = time.perf_counter(), cpu_now()
    out = fn()
    return out, Step(time.perf_counter() - w, cpu_now() - c, peak_rss_mb())


class HostClock:
    """CPU spent inside the fake host's handler (it never awaits with ``prompt_delay = 0``)."""

    def __init__(self, host: FakeOpencode) -> None:
        self.cpu = 0.0
        self.calls = 0
        inner = host.handle

        async def timed(request: httpx.Request) -> httpx.Response:
            t = time.process_time()
            try:
                return await inner(request)
            finally:
                self.cpu += time.process_time() - t
                self.calls += 1

        self.handler = timed


def dir_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


# =============================================================================================
# Building a home


def consolidate(root: Path) -> None:
    """What the scripted consolidator leaves: a global memory plus a few project summaries."""
    raw = (root / "raw_memories.md").read_text()
    (root / "MEMORY.md").write_text("# Memory\n\n" + raw[:20_000])
    (root / "memory_summary.md").write_text("v1\n## User profile\n- prefers small diffs\n")
    projects = root / "projects"
    if projects.is_dir():
        for folder in sorted(projects.iterdir())[:N_PROJECTS]:
            if folder.is_dir():
                (folder / "memory_summary.md").write_text(
                    f"v1\n## {folder.name}\n- run the tests before committing\n"
                )


def reply(body: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(len(body["parts"][0]["text"]))
    proj, task = rng.choice(PROJECTS), rng.choice(TASKS)
    return {
        "structured": {
            "raw_memory": _raw_memory(rng, proj, task),
            "rollout_summary": _summary(rng, proj, task),
            "rollout_slug": "-".join(task.split()),
        }
    }


@dataclass
class Home:
    base: Path
    paths: Paths
    clock: ManualClock
    settings: Settings
    host: FakeOpencode
    hclock: HostClock
    app: App
    names: list[str]


def settings_for_year() -> Settings:
    # no hourly cap on model calls: the bench extracts a few hundred sessions in minutes
    return Settings(
        max_unused_days=365,
        max_rollouts_per_startup=MANY_NEW,
        max_model_calls_per_hour=0,
        runner="opencode",
    )


def make_app(paths: Paths, clock: ManualClock, settings: Settings) -> App:
    app = App(paths, clock)
    app.__dict__["settings"] = settings  # no config file: the cached property is pre-filled
    return app


def build_home(n: int, base: Path, seed: int = 1) -> Home:
    rng = random.Random(seed)
    os.environ["MEMORYD_HOME"] = str(base)  # the tokenizer's copies live in this home, too
    paths = Paths.from_env()
    tokenizer.prepare()  # as `memoryd install` does: the copies the passes count from
    clock = ManualClock(T0)
    settings = settings_for_year()
    names = project_names()
    host = FakeOpencode(reply=reply, consolidate=consolidate)
    app = make_app(paths, clock, settings)
    store = app.store
    span = 347 * DAY  # all of it within the year the retention keeps, by the wall clock too
    for i in range(n):
        proj = names[i % N_PROJECTS]
        task = rng.choice(TASKS)
        sid = f"ses_year{i:06d}" + "".join(rng.choices("abcdefghjkmnpqrstuvwxyz", k=10))
        updated = T0 - 8 * HOUR - int(span * i / n)
        cwd = f"/home/dev/src/{proj}"
        host.add_session(
            sid, updated=updated, title=f"{task} in {proj}", directory=cwd, turns=[], worktree=cwd
        )
        claim = store.stage1.claim_stage1(sid, updated, max_running=1, worker_id="bench")
        assert claim.claimed and claim.token
        slug = "-".join([*task.split(), *rng.choices(WORDS, k=rng.randint(0, 4))])
        store.stage1.mark_stage1_succeeded(
            sid,
            claim.token,
            raw_memory=_raw_memory(rng, proj, task),
            rollout_summary=_summary(rng, proj, task),
            rollout_slug=slug,
            cwd=cwd,
            title=f"{task} in {proj}",
            project_id=f"p-{cwd}",
            worktree=cwd,
        )
        if i % 7 == 0 and i * 360 < 60 * n:  # the last two months' memories were cited
            store.outputs.record_usage([sid])
    hclock = HostClock(host)
    return Home(base, paths, clock, settings, host, hclock, app, names)


@contextlib.contextmanager
def fake_opening(home: Home) -> Iterator[None]:
    """``run_pass`` opens the fake host instead of spawning ``opencode serve``."""

    class Opening:
        async def ready(self) -> HostConnection:
            client = OpencodeClient(FAKE_URL, transport=httpx.MockTransport(home.hclock.handler))
            return HostConnection(client=client, url=FAKE_URL, version="1.18.33", private=False)

    @contextlib.asynccontextmanager
    async def opener(_settings: Settings, _paths: Paths) -> AsyncIterator[Opening]:
        yield Opening()

    with patched([(passes, "open_host", opener)]):
        yield


class Phase1Clock:
    """Process CPU spent in phase 1 (the pass runs it alone, before phase 2) and the host's share."""

    def __init__(self, home: Home) -> None:
        self.cpu = 0.0
        self.host_cpu = 0.0
        clock = self

        class Timed(Phase1):
            async def run_pass(self) -> Phase1Report:
                t, h = time.process_time(), home.hclock.cpu
                try:
                    return await super().run_pass()
                finally:
                    clock.cpu += time.process_time() - t
                    clock.host_cpu += home.hclock.cpu - h

        self.timed = Timed


def one_pass(
    home: Home, force: bool = False, phase1: Phase1Clock | None = None
) -> passes.PassResult:
    timed = [(passes, "Phase1", phase1.timed)] if phase1 is not None else []
    with patched(timed), fake_opening(home):
        result = asyncio.run(passes.run_pass(home.app, force_consolidation=force))
    baseline_proc.release(wait=True)
    return result


def add_new_sessions(home: Home, k: int, seed: int) -> None:
    rng = random.Random(seed)
    home.clock.advance(DAY)
    now = home.clock.now_ms()
    assert now - 7 * HOUR < time.time() * 1000, "new sessions would lie in the wall clock's future"
    for i in range(k):
        s = make_session(900_000 + seed * 100 + i, rng, now - 7 * HOUR - i * 30_000)
        proj = home.names[rng.randrange(N_PROJECTS)]
        cwd = f"/home/dev/src/{proj}"
        home.host.add_session(
            s.sid, updated=s.updated, title=s.title, directory=cwd, turns=[], worktree=cwd
        )
        home.host.messages[s.sid] = [
            home.host.message(s.sid, role, parts, created=c) for role, parts, c in s.messages
        ]


# =============================================================================================
# One size


def profile_text(fn: Callable[[], Any], label: str) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(45)
    return f"--- profile: {label} ---\n{out.getvalue()}"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def one_shot_runs(home: Home) -> dict[str, Any]:
    """``memoryd run --once`` as a user runs it, in its own process against the fake host served
    over HTTP on 127.0.0.1: its CPU and its children's (``wait4``) and its own peak RSS and its
    tokenizer helper's (``VmHWM``), none of the bench's. A pass with nothing new, then one with
    20 new sessions (which consolidates)."""
    out: dict[str, Any] = {}
    with home.host.serve() as url:
        home.paths.config_file.write_text(
            f"max_unused_days = 365\nmax_rollouts_per_startup = {NEW_SESSIONS}\n"
            "max_model_calls_per_hour = 0\n"
            f'runner = "opencode"\n[host]\nurl = "{url}"\n'
        )
        env = {**os.environ, "MEMORYD_HOME": str(home.base)}
        for label, new in (("once_idle", 0), ("once_new", NEW_SESSIONS)):
            if new:  # the new sessions idle for a day by the wall clock, which this process reads
                home.clock.set(int(time.time() * 1000) - 2 * DAY)  # (and a day left for the next)
                add_new_sessions(home, new, seed=4)
            # the new ones consolidated, whatever the bench's own passes left of the cooldown
            force = ["--force-consolidation"] if new else []
            done, peak = memoryd_peak(env, "run", "--once", *force)
            if done.returncode != 0:
                raise RuntimeError(f"run --once failed ({done.returncode}): {done.stderr[-2000:]}")
            said = re.search(r"(\d+) extracted", done.stdout)
            got = int(said.group(1)) if said else -1
            assert got == new, f"run --once extracted {got} of {new}: {done.stdout[-2000:]}"
            assert not new or "consolidated" in done.stdout, done.stdout[-2000:]
            out[f"{label}_said"] = done.stdout.strip()
            out[f"{label}_cpu"] = peak.cpu_s
            out[f"{label}_rss"] = peak.own_kb / 1024
            out[f"{label}_helper_rss"] = peak.helper_kb / 1024
    home.paths.config_file.unlink()
    return out


def run_size(n: int, profile: bool, one_shots: bool = True) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"memoryd-bench-scale-{n}-"))
    try:
        return _run_size(n, base, profile, one_shots)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_size(n: int, base: Path, profile: bool, one_shots: bool) -> dict[str, Any]:
    r: dict[str, Any] = {"n": n}
    t = time.perf_counter()
    home = build_home(n, base)
    first = one_pass(home, force=True)
    assert first.phase2.ok, first.phase2.detail
    r["build_s"] = time.perf_counter() - t
    gc.collect()
    gc.freeze()  # the fake host's sessions and the generators' leftovers: out of the GC's way
    one_pass(home)  # a settling pass (the first after a consolidation re-renders the block)
    gc.collect()
    r["rss_base"] = _status_mb("VmRSS:") or 0.0  # imports, the fake host's sessions, the data

    passes_out: list[Step] = []
    for _ in range(3):
        c0 = home.hclock.cpu
        _res, st = measure(lambda: one_pass(home))
        st.cpu -= home.hclock.cpu - c0
        passes_out.append(st)
    best = min(passes_out, key=lambda s: s.cpu)
    r["idle_wall"], r["idle_cpu"], r["idle_rss"] = (
        best.wall,
        best.cpu,
        max(s.rss for s in passes_out),
    )
    if profile:
        r["profile_idle"] = profile_text(lambda: one_pass(home), f"nothing-new pass at {n}")

    add_new_sessions(home, NEW_SESSIONS, seed=1)
    prompts_before = len(home.host.prompts)
    c0 = home.hclock.cpu
    p1 = Phase1Clock(home)
    res, st = measure(lambda: one_pass(home, phase1=p1))
    host_cpu = home.hclock.cpu - c0
    r["new_phase1_cpu"] = p1.cpu - p1.host_cpu
    assert res.phase1.succeeded == NEW_SESSIONS, res.phase1.as_dict()
    assert res.phase2.ok, res.phase2.detail
    r["new_wall"], r["new_cpu_total"], r["new_rss"] = st.wall, st.cpu, st.rss
    r["new_cpu"] = st.cpu - host_cpu
    r["new_host_cpu"] = host_cpu
    cons = [
        p for p in home.host.prompts[prompts_before:] if p.get("agent") == "memoryd-consolidate"
    ]
    r["cons_prompt_bytes"] = sum(len(p["parts"][0]["text"].encode()) for p in cons)
    diff_file = sorted(home.paths.memories.glob("**/*.diff"))
    r["cons_prompts"] = len(cons)
    del diff_file
    if profile:
        add_new_sessions(home, NEW_SESSIONS, seed=2)
        r["profile_new"] = profile_text(lambda: one_pass(home), f"20-new-session pass at {n}")

    # Per new session, warm (as in the daemon: patterns compiled, caches filled): whole passes
    # that extract 20 and 80 new sessions and consolidate them, CPU with the tokenizer helper's;
    # the difference over 60 is what one more session costs. Each try runs the two passes back to
    # back and the median of the five tries' differences is reported, with their range: CPU time
    # on a shared machine swings by a third from minute to minute, and a difference of two best
    # figures taken minutes apart swung with it. Phase 1 alone (this process only) less its cost
    # with nothing new (the listing) besides.
    idle_phase1 = []
    for _ in range(3):
        idle_p1 = Phase1Clock(home)
        one_pass(home, phase1=idle_p1)
        idle_phase1.append(idle_p1.cpu - idle_p1.host_cpu)
    r["idle_phase1_cpu"] = min(idle_phase1)
    warm: dict[int, list[float]] = {NEW_SESSIONS: [], MANY_NEW: []}
    phase1_each: list[float] = []
    for i in range(WARM_TRIES):
        for k in warm:
            add_new_sessions(home, k, seed=10 + 2 * i + k)
            warm_p1 = Phase1Clock(home)
            c0 = home.hclock.cpu
            res, st = measure(lambda: one_pass(home, phase1=warm_p1))  # noqa: B023 - run at once
            assert res.phase1.succeeded == k and res.phase2.ok, res.phase1.as_dict()
            warm[k].append(st.cpu - (home.hclock.cpu - c0))
            phase1_each.append((warm_p1.cpu - warm_p1.host_cpu - r["idle_phase1_cpu"]) / k)
    r["warm_cpu"], r["warm2_cpu"] = min(warm[NEW_SESSIONS]), min(warm[MANY_NEW])
    extra = MANY_NEW - NEW_SESSIONS
    each = sorted((b - a) / extra for a, b in zip(warm[NEW_SESSIONS], warm[MANY_NEW], strict=True))
    r["per_session"], r["per_session_range"] = statistics.median(each), (each[0], each[-1])
    r["warm_phase1_per_session"] = min(phase1_each)
    if one_shots:
        r.update(one_shot_runs(home))

    store, settings = home.app.store, home.settings
    limit = settings.max_raw_memories_for_consolidation
    selected = store.outputs.phase2_selection(limit, settings.max_unused_days)
    r["selected"] = len(selected)
    r["inputs_bytes"] = sum(
        len(o.raw_memory.encode()) + len(o.rollout_summary.encode()) for o in selected
    )
    ws = Workspace(home.paths.memories, clock=home.clock)
    _, st = measure(lambda: ws.sync(selected))
    r["sync_cpu"], r["sync_rss"] = st.cpu, st.rss
    bl = baseline_proc.open_baseline(home.paths.baseline_git, home.paths.memories)
    bl.ensure()
    diff, st = measure(bl.diff)
    r["diff_cpu"], r["diff_changes"] = st.cpu, len(diff.changes)
    key = scope_key(f"/home/dev/src/{home.names[0]}")
    _, st = measure(lambda: render_block(home.paths, key))
    r["block_cpu"] = st.cpu
    _, st = measure(lambda: sync_block(home.paths, settings))
    r["block_sync_cpu"] = st.cpu

    idx = SearchIndex(default_index_path(home.paths.data_dir), home.paths.memories, store)
    try:
        _, st = measure(
            lambda: memory_search(
                home.paths.memories, SearchQuery("deploy", ranked=True), index=idx
            )
        )
        r["search_build_wall"], r["search_rss"] = st.wall, st.rss
        steady = []
        for i in range(SEARCH_RUNS):
            q = QUERIES[i % len(QUERIES)]
            _, st = measure(
                functools.partial(
                    memory_search, home.paths.memories, SearchQuery(q, ranked=True), index=idx
                )
            )
            steady.append(st.wall)
        r["search_p95"] = pct(steady, 95)
        firsts, first_cpus = [], []
        for i in range(3):
            with (home.paths.memories / "MEMORY.md").open("a") as fh:
                fh.write(f"\n- Appended by the benchmark ({i}): the staging deploy needs a flag.\n")
            bump_change_mark(home.paths.memories)
            _, st = measure(
                lambda: memory_search(
                    home.paths.memories, SearchQuery("deploy", ranked=True), index=idx
                )
            )
            firsts.append(st.wall)
            first_cpus.append(st.cpu)
        r["search_first"], r["search_first_cpu"] = max(firsts), max(first_cpus)
        # ... and after a pass: new outputs in memory.db and a consolidated folder
        add_new_sessions(home, NEW_SESSIONS, seed=90)
        one_pass(home, force=True)
        _, st = measure(
            lambda: memory_search(
                home.paths.memories, SearchQuery("deploy", ranked=True), index=idx
            )
        )
        r["search_after_pass"] = st.wall
    finally:
        idx.close()
    r["db_bytes"] = sum(
        p.stat().st_size for p in home.paths.data_dir.glob("memory.db*") if p.is_file()
    )
    r["index_bytes"] = sum(
        p.stat().st_size for p in home.paths.data_dir.glob("search.db*") if p.is_file()
    )
    r["folder_bytes"] = dir_bytes(home.paths.memories)
    r["folder_files"] = sum(len(f) for _d, _s, f in os.walk(home.paths.memories))
    r["peak_rss"] = max(r["idle_rss"], r["new_rss"], r["sync_rss"], r["search_rss"])
    r["once_rss"] = max(r.get("once_idle_rss", 0.0), r.get("once_new_rss", 0.0))
    home.app.close()
    return r


# =============================================================================================
# Report


def ms(s: float) -> str:
    return f"{s * 1e3:,.0f} ms" if s >= 0.01 else f"{s * 1e3:.1f} ms"


def mb(b: float) -> str:
    return f"{b / 1e6:,.1f} MB"


ROWS: list[tuple[str, Callable[[dict[str, Any]], float], Callable[[float], str]]] = [
    ("nothing-new pass, wall", lambda r: r["idle_wall"], ms),
    ("nothing-new pass CPU", lambda r: r["idle_cpu"], ms),
    ("20-new pass, wall", lambda r: r["new_wall"], ms),
    ("20-new pass, memoryd CPU", lambda r: r["new_cpu"], ms),
    ("20-new pass / 20 (first, cold)", lambda r: r["new_cpu"] / NEW_SESSIONS, ms),
    ("  of which phase 1 (extraction)", lambda r: r["new_phase1_cpu"] / NEW_SESSIONS, ms),
    (
        "  per pass: the rest (phase 2, blocks, ticks)",
        lambda r: r["new_cpu"] - r["new_phase1_cpu"],
        ms,
    ),
    ("20-new pass, warm, memoryd CPU", lambda r: r["warm_cpu"], ms),
    (f"{MANY_NEW}-new pass, warm, memoryd CPU", lambda r: r["warm2_cpu"], ms),
    ("memoryd CPU per new session", lambda r: r["per_session"], ms),
    ("  lowest of the five tries", lambda r: r["per_session_range"][0], ms),
    ("  highest of the five tries", lambda r: r["per_session_range"][1], ms),
    (
        "  phase 1 alone, this process, less the listing",
        lambda r: r["warm_phase1_per_session"],
        ms,
    ),
    (
        "  per pass, warm (20-new pass less 20 sessions)",
        lambda r: r["warm_cpu"] - NEW_SESSIONS * r["per_session"],
        ms,
    ),
    ("workspace sync, nothing changed", lambda r: r["sync_cpu"], ms),
    ("baseline diff, nothing changed", lambda r: r["diff_cpu"], ms),
    ("block render (one project)", lambda r: r["block_cpu"], ms),
    ("block sync, nothing changed", lambda r: r["block_sync_cpu"], ms),
    ("selection (outputs)", lambda r: r["selected"], lambda v: f"{v:,.0f}"),
    ("selection text", lambda r: r["inputs_bytes"], mb),
    ("consolidation prompt", lambda r: r["cons_prompt_bytes"], lambda v: f"{v / 1e3:,.1f} KB"),
    ("ranked search, first build", lambda r: r["search_build_wall"], ms),
    ("ranked search p95, steady", lambda r: r["search_p95"], ms),
    ("ranked search, first after a change", lambda r: r["search_first"], ms),
    ("  its CPU", lambda r: r["search_first_cpu"], ms),
    ("ranked search, first after a 20-new pass", lambda r: r["search_after_pass"], ms),
    ("run --once, nothing new: CPU", lambda r: r.get("once_idle_cpu", 0.0), ms),
    ("run --once, 20 new: CPU", lambda r: r.get("once_new_cpu", 0.0), ms),
    ("peak RSS of run --once", lambda r: r.get("once_rss", 0.0), lambda v: f"{v:.1f} MB"),
    ("  nothing new", lambda r: r.get("once_idle_rss", 0.0), lambda v: f"{v:.1f} MB"),
    ("  20 new", lambda r: r.get("once_new_rss", 0.0), lambda v: f"{v:.1f} MB"),
    (
        "  its tokenizer helper",
        lambda r: max(r.get("once_idle_helper_rss", 0.0), r.get("once_new_helper_rss", 0.0)),
        lambda v: f"{v:.1f} MB",
    ),
    ("peak RSS of the bench process", lambda r: r["peak_rss"], lambda v: f"{v:.1f} MB"),
    ("  of which held before the passes", lambda r: r["rss_base"], lambda v: f"{v:.1f} MB"),
    ("  peak: nothing-new pass", lambda r: r["idle_rss"], lambda v: f"{v:.1f} MB"),
    ("  peak: 20-new pass", lambda r: r["new_rss"], lambda v: f"{v:.1f} MB"),
    ("  peak: first ranked query", lambda r: r["search_rss"], lambda v: f"{v:.1f} MB"),
    ("memory.db", lambda r: r["db_bytes"], mb),
    ("search.db", lambda r: r["index_bytes"], mb),
    ("memory folder", lambda r: r["folder_bytes"], mb),
    ("memory folder files", lambda r: r["folder_files"], lambda v: f"{v:,.0f}"),
]


def report(results: list[dict[str, Any]]) -> None:
    results = sorted(results, key=lambda r: r["n"])
    header = ("", *(f"{r['n']:,}" for r in results))
    growth = len(results) > 1
    if growth:
        header += (f"{results[0]['n']:,}→{results[-1]['n']:,}",)
    header += ("goal",)
    rows = []
    for label, get, fmt in ROWS:
        vals = [get(r) for r in results]
        row = (label, *(fmt(v) for v in vals))
        if growth:
            row += (f"{vals[-1] / vals[0]:.2f}×" if vals[0] else "-",)
        rows.append((*row, GOALS.get(label, "")))
    table(rows, header, right_align=True)
    ratio = results[-1]["n"] / results[0]["n"] if growth else 1
    if growth:
        g = results[-1]["idle_cpu"] / results[0]["idle_cpu"]
        print(
            f"\nnothing-new pass CPU grows {g:.2f}× for {ratio:.0f}× the sessions "
            f"({'sublinear' if g < ratio else 'NOT sublinear'})"
        )


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,3000,10000")
    ap.add_argument("--profile", action="store_true", help="cProfile both passes (largest size)")
    ap.add_argument(
        "--no-once", action="store_true", help="skip the `memoryd run --once` processes"
    )
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: run one size, print JSON
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(run_size(args.one, args.profile, not args.no_once)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    # An installed memoryd has its bytecode (pip compiles it); a checkout under
    # PYTHONDONTWRITEBYTECODE would charge every `run --once` the compiling of each edited module.
    compileall.compile_dir(str(REPO / "memoryd"), quiet=1)
    print(f"scale benchmark ({machine()}; load average {loadavg()} at start)")
    results = []
    for n in sizes:
        cmd = [sys.executable, __file__, "--one", str(n), *(["--no-once"] if args.no_once else [])]
        if args.profile and n == max(sizes):
            cmd.append("--profile")
        t = time.perf_counter()
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"  {n:,} sessions: built + measured in {time.perf_counter() - t:.0f} s "
            f"(build {r['build_s']:.0f} s); load average {loadavg()}"
        )
        for k in ("profile_idle", "profile_new"):
            if k in r:
                print(r.pop(k))
        for k in ("once_idle_said", "once_new_said"):
            if k in r:
                print(f"    {k[:-5].replace('_', ' ')}: " + r.pop(k).replace("\n", "; "))
        results.append(r)
    print()
    report(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
