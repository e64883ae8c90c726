"""bench/chaos.py: crash, fault and concurrency figures for memoryd against the real opencode.

Seeded (``--seed``): the kill moments, the fault order and the fault hits all come from one
``random.Random``, so a run can be replayed and another seed gives another schedule. Scenarios:

1. kill -9 storm over real sessions with a slow scripted model, then one clean pass and the checks
2. nothing waits after a crash (kill ``run --once`` mid-extraction, start another)
3. host faults through a fault-injecting proxy, and opencode killed and restarted mid-pass
4. concurrency: two daemons and a stream of CLI commands on one home
5. disk trouble: read-only memory folder, read-only state folder, ENOSPC (tmpfs)
6. load: both cores saturated; idle-to-extracted latency; a 500-session backlog (fake host)

``--quick`` is the small slice the test suite runs. Full run: ``.venv/bin/python bench/chaos.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, table
from bench.chaos_world import (
    FAULTS,
    PY,
    STEP_LINES,
    Extraction,
    FaultProxy,
    Figures,
    Run,
    WarmStart,
    World,
    alive,
    cpu_hog,
    kill9,
    last_step,
    memoryd_servers,
)
from tests.e2e.consolidator import is_consolidation
from tests.e2e.mockllm import RecordedRequest

VERBOSE = os.environ.get("CHAOS_VERBOSE") == "1"
T0 = time.monotonic()


def log(msg: str) -> None:
    if VERBOSE:
        print(f"  [{time.monotonic() - T0:6.1f}] {msg}", file=sys.stderr, flush=True)


def clean_pass(w: World, fig: Figures, env: dict[str, str] | None = None) -> float:
    """Drain: ``run --once --force-consolidation`` until a pass claims nothing; the first pass's
    wall time. One pass extracts at most ``max_rollouts_per_startup`` sessions (4 here), so
    after a storm that moved more sessions one pass leaves some for the next: not a loss. A real
    loss (a job left in a state every pass skips, a watermark past an unextracted version)
    still shows after the drain, as a session whose output is not its current version."""
    took = 0.0
    for n in range(1, 11):
        t0 = time.monotonic()
        out = w.cli("run", "--once", "--force-consolidation", env=env)
        took = took or time.monotonic() - t0
        if out.returncode != 0 or "phase 2: failed" in out.stdout or "waiting:" in out.stdout:
            fig.fail(f"clean pass: exit {out.returncode}: {out.stdout[-300:]} {out.stderr[-500:]}")
            return took
        if n == 1:
            behind = len(w.stale_sessions())
        m = re.search(r"(\d+) claimed", out.stdout)
        if m is None or m.group(1) == "0":
            if behind:
                fig.notes.append(f"drained in {n} clean passes; the first left {behind} behind")
            return took
    fig.fail("clean passes: still claiming after 10 passes")
    return took


# -- 1. kill -9 storm ---------------------------------------------------------------------------


@dataclass
class _Storm:
    """What the lanes of one storm share; every update under ``lock``."""

    fig: Figures
    span: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: Counter[str] = field(default_factory=Counter)  # where kills landed (last step line)
    aims: Counter[str] = field(default_factory=Counter)  # what each kill was aimed at
    missed: Counter[str] = field(default_factory=Counter)  # step aims the run never reached
    spent: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    done: int = 0


def storm(
    w: World, rng: random.Random, kills: int, span_s: float | None = None, lanes: int = 4
) -> Figures:
    """``kills`` SIGKILLs over ``lanes`` memoryd processes at a time on the one home (moments
    drawn over ``span_s``, default: a measured typical pass). Each lane starts one memoryd
    with work to do, kills it at its own seeded moment and checks integrity, again and again;
    every 20th kill all lanes stop for an undisturbed recovery run. Lanes 0 and 1 consolidate
    and only lane 2 runs the daemon (a second daemon would only exit 4); see ``_lane_run``."""
    fig = Figures("1 kill -9 storm")
    w.slow = (0.02, 0.2)
    first = len(w.extractions)
    warm = [WarmStart(w) for _ in range(lanes)]  # restarts skip the interpreter's imports
    try:
        _storm(w, rng, kills, span_s, fig, warm)
    finally:
        for x in warm:
            x.close()
    fig.calls = w.extractions[first:]
    _judge_extractions(fig, fig.calls)
    return fig


def sweep(seeds: list[int], kills: int, n_sessions: int) -> int:
    """The storm alone over ``seeds``, each in a fresh world: one line per seed, then totals."""
    rows, totals, failed = [], Counter[str](), []
    for seed in seeds:
        t0 = time.monotonic()
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory(prefix="memoryd-chaos-") as tmp:
            w = World(Path(tmp), rng)
            try:
                w.add_sessions(n_sessions, "chaos")
                fig = storm(w, rng, kills)
            finally:
                w.close()
                for pid in memoryd_servers(w.home):
                    if alive(pid):
                        os.kill(pid, 9)
        calls = len(fig.calls)
        row = (seed, fig.runs, fig.injected, calls, fig.lost, fig.duplicated, fig.corrupt, fig.left)
        keys = ("runs", "kills", "calls", "lost", "dup", "corrupt", "left")
        totals.update(dict(zip(keys, row[1:], strict=True)))
        verdict = "ok" if not fig.failures else f"{len(fig.failures)} FAILED"
        rows.append((*map(str, row), f"{time.monotonic() - t0:.0f} s", verdict))
        print(f"seed {seed}: {' '.join(rows[-1][1:])}", flush=True)
        for x in fig.failures:
            print(f"  FAILED: {x}", flush=True)
        if fig.failures:
            failed.append(seed)
    print(f"\nmemoryd chaos storm sweep ({len(seeds)} seeds) — {machine()}")
    header = ("seed", "runs", "kills", "extractions", "lost", "dup", "corrupt", "left")
    ok = f"{len(seeds) - len(failed)} of {len(seeds)} ok"
    total = ("total", *(str(totals[k]) for k in keys))
    table([*rows, (*total, "", ok)], (*header, "time", "checks"))
    if failed:
        print(f"failed seeds: {', '.join(map(str, failed))}")
    return 1 if failed else 0


def _storm(
    w: World,
    rng: random.Random,
    kills: int,
    span_s: float | None,
    fig: Figures,
    warm: list[WarmStart],
) -> None:
    if span_s is None:
        w.cli("run", "--once", "--force-consolidation")
        # a typical pass: 2 extractions + phase 2, started as the storm's runs are
        for sid in w.sessions[:2]:
            w.touch(sid)
        t0 = time.monotonic()
        warm[0].start(("run", "--once", "--force-consolidation"), private=False).finish()
        span_s = time.monotonic() - t0
    st = _Storm(fig, min(max(span_s, 2.0), 15.0))
    log(f"first pass took {st.span:.1f} s; {len(warm)} lanes")
    lane_rngs = [random.Random(rng.randrange(1 << 30)) for _ in warm]
    while fig.injected < kills:
        # Lanes run on their own until the next 20th kill; then all stop for the recovery run.
        target = min(kills, (fig.injected // 20 + 1) * 20)
        t_lanes = time.monotonic()
        threads = [
            threading.Thread(target=_lane, args=(w, st, k, lane_rngs[k], warm[k], target))
            for k in range(len(warm))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st.spent["lanes"] += time.monotonic() - t_lanes
        t1 = time.monotonic()  # recovery: the next undisturbed run, start to clean finish
        out = w.cli("run", "--once")
        fig.recovery_s.append(time.monotonic() - t1)
        running = [k for k, j in w.jobs().items() if j["status"] == "running"]
        if out.returncode != 0 or running:
            fig.fail(f"recovery run: exit {out.returncode}, still running {running}")
        st.spent["recovery runs"] += time.monotonic() - t1
    w.slow = (0.0, 0.0)
    clean_pass(w, fig)
    w.check(fig)
    fig.notes.append(f"{len(warm)} lanes; {st.done} runs finished before their kill moment")
    fig.notes.append("time: " + ", ".join(f"{k} {v:.0f} s" for k, v in st.spent.items()))
    fig.notes.append("kills aimed: " + ", ".join(f"{k} {v}" for k, v in st.aims.most_common()))
    fig.notes.append("kills by step: " + ", ".join(f"{k} {v}" for k, v in st.steps.most_common()))
    if st.missed:
        fig.notes.append(
            "step aims whose run ended first: "
            + ", ".join(f"{k} {v}" for k, v in st.missed.most_common())
        )


def _lane(
    w: World, st: _Storm, lane: int, rng: random.Random, warm: WarmStart, target: int
) -> None:
    """One lane: runs killed at their moments until the storm has ``target`` kills."""
    w.touch(rng.choice(w.sessions), rng)
    while True:
        with st.lock:
            if st.fig.injected >= target:
                return
        _lane_run(w, st, lane, rng, warm)


PHASE2_STEPS = {"phase 2 claim", "workspace sync", "diff", "consolidation", "audit"}
PHASE2_STEPS |= {"baseline reset", "phase 2 finalize"}


def _lane_run(w: World, st: _Storm, lane: int, rng: random.Random, warm: WarmStart) -> None:
    """A memoryd with work to do, a kill at the drawn moment, the check; meanwhile the user
    turn that gives the lane's next run its work (it lands during this run, as turns do).

    Kills are aimed four ways: at a uniform moment of the pass; just after this run's
    extraction call starts (plus up to 1.5 s: the finalizer, the next claim); just after one of
    its ~9 consolidation calls starts (tool steps; past the last call, the audit and the
    baseline reset); and at a named step, 0-10 ms after memoryd logs that it begins it (the
    steps that last milliseconds, such as the audit or the baseline reset, are hit only so; the
    thread reading its stderr sends that kill).
    Lanes 0 and 1 run ``run --once --force-consolidation`` and aim at phase 2 (one of them holds
    the lease at a time; a kill hands it over at once); the others run ``run --once`` (lane 2
    now and then the daemon), whose phase 2 mostly waits for its cooldown, and aim at phase 1
    and the ticks."""
    if lane < 2:  # the consolidating lanes (when one holds the lease, the other's run skips)
        aim = rng.choice(["consolidate", "step", "step", "step"])
        steps = [x for x in STEP_LINES if x[1] in PHASE2_STEPS]
        args: tuple[str, ...] = ("run", "--once", "--force-consolidation")
    else:
        aim = rng.choice(["uniform", "extract", "step", "step"])
        steps = [x for x in STEP_LINES if x[1] not in PHASE2_STEPS]
        args = ("run",) if lane == 2 and rng.random() < 0.25 else ("run", "--once")
    target = rng.choice(steps) if aim == "step" else None
    private = rng.random() < 0.08
    # within the pass (a moment past its end only lets the run finish: a pass with no kill)
    at = rng.uniform(0.1, 0.9 * st.span + (3.0 if private else 0.0))
    nth = rng.randint(1, 9) if aim == "consolidate" else 1
    extra = rng.uniform(0.0, {"consolidate": 0.6, "step": 0.01}.get(aim, 1.5))
    with st.lock:
        st.fig.runs += 1
    run = warm.start(args, private=private)
    started = time.monotonic()
    turn = threading.Thread(target=w.touch, args=(rng.choice(w.sessions), random.Random(at)))
    turn.start()
    # a step aim waits as long as a pass may take to get there
    deadline = st.span * 2 + 3.0 if aim == "step" else at + extra + 0.3 * nth
    later = tuple(m for m, _ in STEP_LINES[STEP_LINES.index(target) :]) if target else ()
    moment = Moment(aim, at, extra, deadline, nth, later)
    if aim == "step":
        run.arm(later, extra)
    if not _wait_for_moment(w, run, moment):
        run.finish(timeout=300)
        turn.join()
        with st.lock:
            st.done += 1
            if target is not None:
                st.missed[target[1]] += 1  # the run ended between the step and the kill
        return
    inflight = {kind for (kind, pid), n in w.inflight_by.items() if pid == run.pid and n > 0}
    step = last_step(kill9(run))
    if inflight:  # the model was answering this run's call at that moment
        step += " (model answering)"
    turn.join()
    integrity = w.integrity()
    with st.lock:
        st.fig.injected += 1
        st.steps[step] += 1
        st.aims[aim + (" [daemon]" if args == ("run",) else "")] += 1
        took = time.monotonic() - started
        own = ", own opencode" if private else ""
        log(
            f"kill {st.fig.injected} (lane {lane}, aim {aim}, pid {run.pid}{own}) {took:.1f} s in: {step}"
        )
        if integrity != "ok":
            st.fig.corrupt += 1
            st.fig.fail(f"integrity_check failed after kill {st.fig.injected}: {integrity}")


@dataclass(frozen=True)
class Moment:
    """When to kill: ``uniform`` at ``at`` seconds; ``extract`` / ``consolidate`` ``extra``
    seconds after this run's ``nth`` call of that kind starts; ``step`` ``extra`` seconds
    after the run logs the first of ``markers`` (the step's line, or a later step's when the
    run skips it); at ``deadline`` if that never comes."""

    aim: str
    at: float
    extra: float
    deadline: float
    nth: int = 1
    markers: tuple[str, ...] = ()


def _wait_for_moment(w: World, run: Run, m: Moment) -> bool:
    """Wait for the chosen kill moment; False when the process finished first."""
    t0 = time.monotonic()
    hit: float | None = None
    kind = "extract" if m.aim == "extract" else "consolidate"
    seen = len(w.calls)  # this run's own calls: a killed run's helper may still be calling
    while run.proc.poll() is None:
        now = time.monotonic() - t0
        if m.aim == "uniform" and now >= m.at:
            return True
        if m.aim == "step" and run.fired.is_set():  # killed by the reading thread (``arm``)
            return True
        if hit is None and m.aim != "step":
            reached = w.calls[seen:].count((kind, run.pid)) >= m.nth
            hit = now if reached else None
        if hit is not None and now >= hit + m.extra:
            return True
        if now >= m.deadline:
            return True
        time.sleep(0.02)
    return m.aim == "step" and run.fired.is_set()


# -- 2. nothing waits after a crash -------------------------------------------------------------


def after_crash(w: World, rng: random.Random, runs: int) -> Figures:
    fig = Figures("2 nothing waits after a crash")
    env = w.env(private=True)
    for _ in range(runs):
        fig.runs += 1
        touched = rng.sample(w.sessions, k=min(3, len(w.sessions)))
        for sid in touched:
            w.touch(sid)
        w.slow = (60.0, 60.0)
        # Count this run's own extraction calls: ``inflight`` still holds the hanging calls of
        # the previous round's killed run (the model answers nobody for 60 s), and waiting on it
        # killed a run before its own extractions were in flight.
        seen = len(w.calls)
        proc = w.spawn("run", "--once", env=w.env(private=True))

        def reached(seen: int = seen, pid: int = proc.pid) -> int:
            return w.calls[seen:].count(("extract", pid))

        deadline = time.monotonic() + 120
        while reached() < len(touched) and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        reached_n = reached()
        if reached_n < len(touched):
            fig.fail(f"only {reached_n} of {len(touched)} extractions reached the model in 120 s")
        time.sleep(rng.uniform(0.0, 1.0))
        kill9(proc)
        fig.injected += 1
        w.slow = (0.0, 0.0)
        held = [k for k, j in w.jobs().items() if j["status"] == "running"]
        helpers = len(w.helper_sessions())
        orphans = memoryd_servers(w.home)
        if not held or not helpers or not orphans:
            fig.fail(f"the kill left nothing to recover: {held=} {helpers=} {orphans=}")
        t0 = time.monotonic()
        out = w.cli("run", "--once", env=env)
        fig.recovery_s.append(time.monotonic() - t0)
        jobs = w.jobs()
        burned = [k for k in held if jobs[k]["retry_remaining"] != 3]
        if out.returncode != 0 or burned:
            fig.fail(f"after crash: exit {out.returncode}, retries burned {burned}")
        if w.helper_sessions():
            fig.fail("helper sessions of the killed run are still there")
        if memoryd_servers(w.home):
            fig.fail("the killed run's opencode serve is still running")
        fig.notes.append(
            f"the kill left {len(held)} claims, {helpers} helpers, {len(orphans)} opencode serve"
        )
    clean_pass(w, fig, env)
    w.check(fig)
    return fig


# -- 3. host faults -----------------------------------------------------------------------------


def host_faults(
    w: World,
    rng: random.Random,
    hang_s: float,
    passes: int,
    kinds: int | None = None,
    restart: bool = True,
) -> Figures:
    """Every fault kind (or ``kinds`` of them, drawn by the seed), then opencode restarted."""
    fig = Figures("3 host faults")
    proxy = FaultProxy(w.box.url, rng, hang_s=hang_s)
    env = w.env(url=proxy.url, MEMORYD_HOST_REQUEST_TIMEOUT_S=str(max(5.0, hang_s / 3)))
    said_why = 0
    order = list(FAULTS)
    rng.shuffle(order)
    order = order[:kinds] if kinds is not None else order
    try:
        for mode in [*order, "opencode_restart"] if restart else order:
            for sid in rng.sample(w.sessions, k=min(2, len(w.sessions))):
                w.touch(sid)
            before = proxy.injected
            t_fault = time.monotonic()
            if mode == "opencode_restart":
                w.slow = (1.5, 2.5)
                proc = w.spawn("run", "--once", env=env)
                deadline = time.monotonic() + 60
                while w.inflight["extract"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
                w.box.restart()
                fig.injected += 1
                out_text, err = proc.communicate(timeout=300)
                w.slow = (0.0, 0.0)
                _judge_run(fig, mode, proc.returncode, err)
            elif mode == "sse_cut":
                proxy.set(mode, 1.0)
                daemon = w.spawn("run", "--interval", "3600", env=env)
                # until the follower says it reconnected (8 s fixed was too short for a daemon
                # starting on a machine at load 24: the slice failed with nothing wrong)
                reconnects, deadline = 0, time.monotonic() + 120
                while daemon.poll() is None and time.monotonic() < deadline:
                    time.sleep(2)
                    st = _status(w, env)
                    events = (st.get("daemon") or {}).get("events") or {}
                    reconnects = events.get("reconnects", 0)
                    if reconnects >= 1:
                        break
                if daemon.poll() is not None:
                    fig.fail(f"daemon died on a cut event stream: {daemon.communicate()[1][-800:]}")
                elif reconnects < 1:
                    fig.fail("the event follower did not notice the cut stream (120 s)")
                daemon.terminate()
                daemon.communicate(timeout=30)
                fig.injected += proxy.injected - before
            else:
                rate = 1.0 if mode in ("refused", "hang") else 0.35
                proxy.set(mode, rate)
                if mode == "hang":
                    proxy.rate = 1.0
                for _ in range(1 if mode == "hang" else passes):
                    fig.runs += 1
                    proc = w.spawn("run", "--once", env=env)
                    if mode == "hang":
                        time.sleep(3)
                        proxy.set("pass", 0.0)  # one hang is enough: later requests pass
                    out_text, err = proc.communicate(timeout=hang_s * 4 + 300)
                    _judge_run(fig, mode, proc.returncode, err)
                    surfaced = proc.returncode != 0 or "waiting:" in out_text
                    if surfaced and _explained(w, env):
                        said_why += 1
                    elif surfaced:
                        fig.fail(f"status does not say why ({mode})")
                fig.injected += (proxy.injected - before) if mode != "refused" else passes
            proxy.set("pass", 0.0)
            t0 = time.monotonic()
            out = w.cli("run", "--once", env=env)
            fig.recovery_s.append(time.monotonic() - t0)
            if out.returncode != 0:
                fig.fail(f"recovery after {mode}: exit {out.returncode} {out.stderr[-300:]}")
            jobs = w.jobs()
            burned = sorted(k for k, j in jobs.items() if j["retry_remaining"] != 3)
            if burned:
                fig.fail(f"{mode}: a host fault burned retries of {len(burned)} jobs")
            fig.notes.append(f"{mode}: {time.monotonic() - t_fault:.1f} s")
    finally:
        proxy.close()
    clean_pass(w, fig)
    w.check(fig)
    fig.notes.append(f"status explained {said_why} fault kinds")
    return fig


def _judge_run(fig: Figures, mode: str, code: int | None, err: str) -> None:
    if code not in (0, 3) or "Traceback" in err:
        fig.fail(f"{mode}: memoryd exited {code}: {err[-600:]}")


def _status(w: World, env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    out = w.cli("status", "--json", env=env)
    try:
        return json.loads(out.stdout)  # type: ignore[no-any-return]
    except ValueError:
        return {}


def _explained(w: World, env: dict[str, str]) -> bool:
    st = _status(w, env)
    last = st.get("last_pass") or {}
    return bool(
        st.get("last_pass_error")
        or (st.get("stage1") or {}).get("last_errors")
        or (last.get("phase1") or {}).get("waiting")
        or (st.get("phase2") or {}).get("last_error")
        or (st.get("host") or {}).get("last_error")
    )


# -- 4. concurrency -----------------------------------------------------------------------------


def concurrency(w: World, rng: random.Random, seconds: float) -> Figures:
    fig = Figures("4 concurrency")
    env = w.env(MEMORYD_MAX_ROLLOUTS_PER_STARTUP="2")
    w.mock.clear()
    w.extractions.clear()
    w.slow = (0.05, 0.4)
    first = w.spawn("run", "--interval", "5", env=env)
    time.sleep(2)
    second = w.spawn("run", "--interval", "5", env=env)
    try:
        second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill9(second)
    fig.runs += 2
    if second.returncode != 4:
        fig.fail(f"the second daemon exited {second.returncode}, not 4")
    codes: Counter[str] = Counter()
    locked: list[str] = []
    said: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    seed = rng.randrange(1 << 30)

    def worker(k: int) -> None:
        r = random.Random(seed + k)
        notes: list[str] = []
        while time.monotonic() < stop:
            pick = r.choice(["note", "forget", "search", "once", "status"])
            if pick == "note":
                args = ["note", "add", f"chaos note {r.randrange(1 << 20)}: prefer small commits"]
            elif pick == "forget" and notes:
                args = ["forget", "--note", notes.pop()]
            elif pick == "search":
                args = ["search", "--ranked", "runbook"]
            elif pick == "once":
                args = ["run", "--once"]
            else:
                args = ["status"]
            out = w.cli(*args, env=env, timeout=300)
            text = out.stdout + out.stderr
            if pick == "note":
                m = re.search(r"saved note (\S+\.md)", text)
                if m:
                    notes.append(m.group(1))
            with lock:
                codes[f"{args[0]} {out.returncode}"] += 1
                if out.returncode != 0:
                    said.append(f"{' '.join(args)} -> {out.returncode}: {text.strip()[-300:]}")
                if "database is locked" in text or "Traceback" in text:
                    locked.append(f"{' '.join(args)} -> {text[-300:]}")

    def toucher() -> None:
        r = random.Random(seed - 1)
        while time.monotonic() < stop:
            w.touch(r.choice(w.sessions))
            time.sleep(r.uniform(1, 4))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    threads.append(threading.Thread(target=toucher))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.slow = (0.0, 0.0)
    first.terminate()
    first.communicate(timeout=30)
    fig.runs += sum(codes.values())
    fig.injected = sum(codes.values())
    bad = {k: v for k, v in codes.items() if not k.endswith(" 0")}
    if bad:
        fig.fail(f"CLI exit codes: {bad}: {said[:3]}")
    if locked:
        fig.fail(f"{len(locked)} commands showed a lock error or traceback: {locked[:2]}")
    overlap = _overlapping_consolidations(w.mock.requests)
    if overlap:
        fig.fail(f"{overlap} overlapping consolidations")
    _judge_extractions(fig, w.extractions)
    clean_pass(w, fig)
    w.check(fig)
    fig.notes.append("CLI: " + ", ".join(f"{k}×{v}" for k, v in sorted(codes.items())))
    return fig


def _overlapping_consolidations(reqs: list[RecordedRequest]) -> int:
    spans: dict[str, list[float]] = {}
    for r in reqs:
        if r.session_id and is_consolidation(r.body):
            s = spans.setdefault(r.session_id, [r.at, r.at])
            s[0], s[1] = min(s[0], r.at), max(s[1], r.at)
    ordered = sorted(spans.values())
    return sum(1 for a, b in zip(ordered, ordered[1:], strict=False) if b[0] < a[1])


def _judge_extractions(fig: Figures, calls: list[Extraction]) -> None:
    dup, retried, again, moved = _duplicate_extractions(calls)
    fig.duplicated += len(dup)
    if dup:
        fig.fail(
            f"{len(dup)} extraction calls repeated a stored or concurrently claimed version: "
            + "; ".join(
                f"{x.session} v{x.watermark} (caller pid {x.caller}"
                f"{'' if x.caller_alive else ', dead'} by {x.via}, claim pid {x.claim_pid}, "
                f"{'stored before' if x.done_before else 'another claim live'})"
                for x in dup[:3]
            )
        )
    unknown = [x for x in calls if x.caller is None]
    if unknown:  # every call must be tied to the memoryd that made it
        fig.fail(
            f"{len(unknown)} extraction calls tied to no memoryd: "
            + "; ".join(f"{x.session} v{x.watermark} ({x.via})" for x in unknown[:3])
        )
    by_server = sum(1 for x in calls if x.via.startswith("private opencode"))
    fig.notes.append(
        f"{len(calls)} extraction calls ({by_server} tied to their memoryd by its private "
        f"opencode, the helper's record gone): {retried} retried by opencode, {again} after a claim "
        f"that stored nothing, {moved} of a new version with an unchanged transcript"
    )


def _duplicate_extractions(calls: list[Extraction]) -> tuple[list[Extraction], int, int, int]:
    """(duplicates, opencode's retries of a call, re-extractions after a claim that stored
    nothing, versions re-extracted with an unchanged transcript).

    A duplicate is an extraction of a session version that was already stored when the call
    was made, or while another claim of that version was being answered. A second call of one
    claim is opencode retrying the model call; a new claim of a version after one that failed or
    was released stored nothing, so it is the retry the job state machine promises; a newer
    version (``time.updated`` moved) with the same transcript is a new version to memoryd."""
    dup: list[Extraction] = []
    retried = again = moved = 0
    claims: dict[tuple[str, int | None], set[str | None]] = {}
    digests: dict[tuple[str, str], set[int | None]] = {}
    for x in calls:
        if x.done_before or x.alongside:
            dup.append(x)
        else:
            tokens = claims.setdefault((x.session, x.watermark), set())
            if x.token in tokens:
                retried += 1
            elif tokens:
                again += 1
            tokens.add(x.token)
        versions = digests.setdefault((x.session, x.digest), set())
        if versions and x.watermark not in versions:
            moved += 1
        versions.add(x.watermark)
    return dup, retried, again, moved


# -- 5. disk trouble ----------------------------------------------------------------------------


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


def disk(w: World, rng: random.Random) -> Figures:
    fig = Figures("5 disk trouble")
    mem, state = w.paths.memories, w.paths.state_dir
    if not mem.is_dir():  # run alone (--scenarios 5): nothing has made the folder to mount yet
        clean_pass(w, fig)
    cases: list[tuple[str, Callable[[], bool], Callable[[], None]]] = []

    def ro(path: Path) -> Callable[[], bool]:
        return lambda: (
            _mount("--bind", str(path), str(path)) and _mount("-o", "remount,bind,ro", str(path))
        )

    def unmount(path: Path) -> Callable[[], None]:
        return lambda: None if subprocess.run(["umount", str(path)]).returncode == 0 else None

    cases.append(("read-only memory folder", ro(mem), unmount(mem)))
    cases.append(("read-only state folder", ro(state), unmount(state)))
    stash = Path(tempfile.mkdtemp(prefix="chaos-enospc-"))
    disk = stash / "tmpfs"

    def enospc_on() -> bool:
        # The filler sits beside the folder on the same tmpfs, which is bind-mounted as the
        # memory folder: inside it, memoryd rightly sweeps it away as not part of its layout
        # (and the disk was no longer full).
        shutil.copytree(mem, stash / "mem")
        disk.mkdir()
        if not _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)):
            return False
        shutil.copytree(stash / "mem", disk / "mem")
        if not _mount("--bind", str(disk / "mem"), str(mem)):
            return False
        with contextlib.suppress(OSError), (disk / ".fill").open("wb") as f:
            while True:
                f.write(b"\0" * 4096)
        return True

    def enospc_off() -> None:
        (disk / ".fill").unlink(missing_ok=True)

    cases.append(("ENOSPC (256 KB tmpfs)", enospc_on, enospc_off))
    try:
        for name, on, off in cases:
            for sid in rng.sample(w.sessions, k=min(2, len(w.sessions))):
                w.touch(sid)
            if not on():
                fig.notes.append(f"{name}: could not set up here")
                continue
            fig.injected += 1
            fig.runs += 1
            out = w.cli("run", "--once", "--force-consolidation")
            lines = out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or [""]
            msg = lines[-1]
            if "Traceback" in out.stderr:
                fig.fail(f"{name}: traceback: {out.stderr[-500:]}")
            if w.integrity() != "ok":
                fig.corrupt += 1
            fig.notes.append(f"{name}: exit {out.returncode}, said {msg.strip()[:140]!r}")
            off()
            t0 = time.monotonic()
            clean_pass(w, fig)
            fig.recovery_s.append(time.monotonic() - t0)
            w.check(fig)
    finally:
        if subprocess.run(["mountpoint", "-q", str(mem)]).returncode == 0:
            keep = stash / "after"
            shutil.copytree(mem, keep)
            subprocess.run(["umount", str(mem)])
            shutil.rmtree(mem)
            shutil.copytree(keep, mem)
        for p in (mem, state, disk):
            while subprocess.run(["mountpoint", "-q", str(p)]).returncode == 0:
                subprocess.run(["umount", str(p)])
        shutil.rmtree(stash, ignore_errors=True)
    clean_pass(w, fig)
    w.check(fig)
    return fig


# -- 6. load ------------------------------------------------------------------------------------


def load(w: World, rng: random.Random, idle_runs: int, backlog: int) -> Figures:
    fig = Figures("6 load")
    env = w.env()
    with cpu_hog(os.cpu_count() or 2):
        daemon = w.spawn("run", "--interval", "3600", env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ev = ((_status(w, env).get("daemon") or {}).get("events") or {}).get("state")
                if ev == "connected":
                    break
                time.sleep(0.5)
            for _ in range(idle_runs):
                fig.runs += 1
                sid = w.add_sessions(1, "load")[0]
                t0 = time.monotonic()
                while time.monotonic() - t0 < 60:
                    if w.jobs().get(sid) is not None and w.jobs()[sid]["status"] == "done":
                        break
                    time.sleep(0.2)
                took = time.monotonic() - t0
                fig.recovery_s.append(took)
                if took > 30:
                    fig.fail(f"idle session extracted after {took:.1f} s (> 30 s) under load")
        finally:
            daemon.terminate()
            daemon.communicate(timeout=30)
        if backlog:
            out = subprocess.run(
                [PY, __file__, "--_backlog", str(backlog)], capture_output=True, text=True
            )
            try:
                b = json.loads(out.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                fig.fail(f"backlog run failed: {out.stderr[-800:]}")
            else:
                fig.runs += b["passes"]
                if b["outputs"] != backlog:
                    fig.lost += backlog - b["outputs"]
                    fig.fail(f"backlog: {b['outputs']} of {backlog} extracted")
                # Two checks: the drain as a whole (memory.db and the folder grow with 500
                # outputs: a few MB of page cache and heap) and, after it, passes that find
                # nothing new must not grow at all (a leak would grow every pass).
                growth = b["rss_drained_kb"] / max(b["rss_steady_kb"], 1)
                after = b["rss_end_kb"] - b["rss_drained_kb"]
                if growth > 1.10:
                    fig.fail(f"RSS grew {growth:.2f}× past its steady state")
                if after > 256:
                    fig.fail(f"RSS grew {after} KB over 6 passes after the drain")
                fig.notes.append(
                    f"backlog {backlog} sessions (in-process fake host) drained in {b['passes']} "
                    f"passes, {b['seconds']:.1f} s; RSS steady {b['rss_steady_kb'] / 1024:.1f} MB "
                    f"(passes 3-6), drained {b['rss_drained_kb'] / 1024:.1f} MB ({growth:.2f}×), "
                    f"{after:+d} KB over 6 more passes, peak {b['rss_peak_kb'] / 1024:.1f} MB"
                )
    clean_pass(w, fig)
    w.check(fig)
    return fig


def backlog_child(n: int) -> None:
    """Drain ``n`` sessions with the daemon's pass loop against the in-process fake host."""
    import asyncio

    from memoryd.clock import HOUR, ManualClock
    from memoryd.host.opencode import OpencodeClient
    from memoryd.paths import Paths
    from memoryd.settings import Settings
    from memoryd.store import Store
    from memoryd.tokenizer import trim_heap
    from memoryd.write.phase1 import Phase1
    from memoryd.write.phase2 import Phase2
    from tests.fakehost import FakeOpencode, write_memory

    def rss() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    async def main() -> dict[str, float]:
        with tempfile.TemporaryDirectory() as tmp:
            paths = Paths.from_env({"MEMORYD_HOME": tmp})
            paths.ensure_dir(paths.data_dir)
            clock = ManualClock(1_800_000_000_000)
            store = Store(paths.db, clock=clock)
            host = FakeOpencode(consolidate=write_memory)
            for i in range(n):
                host.add_session(
                    f"ses_backlog{i:06d}",
                    updated=clock.now_ms() - 7 * HOUR - i,
                    turns=[("user", f"decision {i}: use tool {i % 7}"), ("assistant", "ok")],
                )
            settings = Settings(max_rollouts_per_startup=16, max_raw_memories_for_consolidation=512)
            common = dict(
                store=store,
                client=OpencodeClient("http://opencode.test", transport=host.transport()),
                settings=settings,
                paths=paths,
                clock=clock,
                worker_id="backlog",
            )
            t0 = time.monotonic()
            samples, passes = [], 0

            async def one_pass(consolidate: bool) -> None:
                await Phase1(**common).run_pass()  # type: ignore[arg-type]
                if consolidate:
                    await Phase2(**common).run(force=True)  # type: ignore[arg-type]
                clock.advance(60_000)
                # The fake host lives in this process and keeps every request for tests to
                # inspect (prompt bodies with whole transcripts: 12.6 MiB by the end of the
                # backlog, the whole "growth" of the first measurement). They are the harness's,
                # not memoryd's: drop them before measuring.
                for kept in (host.prompts, host.calls, host.page_size_seen, host.deleted):
                    kept.clear()
                host.permissions.clear()
                trim_heap()  # as the daemon does after every pass
                samples.append(rss())

            while store.outputs.output_count() < n and passes < n:
                passes += 1
                # The daemon consolidates at most once per cooldown (6 h, 360 of these passes);
                # every 8th pass keeps a growing folder in the measurement at a bench's cost.
                await one_pass(passes % 8 == 0 or store.outputs.output_count() >= n - 16)
            drained = len(samples)
            seconds = time.monotonic() - t0
            for _ in range(6):  # the daemon after the backlog: nothing left to do
                await one_pass(True)
            steady = max(samples[2:6] or samples)
            return {
                "passes": passes,
                "outputs": store.outputs.output_count(),
                "seconds": seconds,
                "rss_steady_kb": steady,
                "rss_drained_kb": samples[drained - 1],
                "rss_end_kb": samples[-1],
                "rss_peak_kb": max(samples),
            }

    print(json.dumps(asyncio.run(main())))


# -- main ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument(
        "--seeds",
        default=None,
        help="sweep: the storm alone over N seeds from --seed on, or over a comma list\n"
        "(one seed: --seeds 104, with the comma; --seeds 104 alone is 104 seeds)",
    )
    ap.add_argument("--quick", action="store_true", help="the small slice the test suite runs")
    ap.add_argument("--scenarios", default="1,2,3,4,5,6")
    ap.add_argument("--kills", type=int, default=None)
    ap.add_argument("--hang-s", type=float, default=None)
    ap.add_argument("--sessions", type=int, default=None)
    ap.add_argument("--_backlog", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._backlog:
        backlog_child(args._backlog)
        return 0
    q = args.quick
    kills = args.kills if args.kills is not None else (12 if q else 200)
    hang_s = args.hang_s if args.hang_s is not None else (6.0 if q else 60.0)
    n_sessions = args.sessions if args.sessions is not None else (3 if q else 8)
    if args.seeds:
        seeds = (
            [int(x) for x in args.seeds.split(",") if x]
            if "," in args.seeds
            else list(range(args.seed, args.seed + int(args.seeds)))
        )
        shown = ", ".join(map(str, seeds[:12])) + (", ..." if len(seeds) > 12 else "")
        print(f"storm sweep over {len(seeds)} seeds: {shown}", flush=True)
        return sweep(seeds, kills, n_sessions)
    wanted = {int(s) for s in args.scenarios.split(",") if s}
    rng = random.Random(args.seed)
    started = time.monotonic()
    figs: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="memoryd-chaos-") as tmp:
        w = World(Path(tmp), rng)
        try:
            w.add_sessions(n_sessions, "chaos")
            plan: list[tuple[int, Callable[[], Figures]]] = [
                (1, lambda: storm(w, rng, kills)),
                (2, lambda: after_crash(w, rng, 1 if q else 3)),
                (3, lambda: host_faults(w, rng, hang_s, 1 if q else 2)),
                (4, lambda: concurrency(w, rng, 15 if q else 90)),
                (5, lambda: disk(w, rng)),
                (6, lambda: load(w, rng, 1 if q else 3, 100 if q else 500)),
            ]
            for k, fn in plan:
                if k in wanted:
                    t0 = time.monotonic()
                    fig = fn()
                    fig.notes.insert(0, f"{time.monotonic() - t0:.0f} s")
                    figs.append(fig)
                    print(f"[{fig.name}] done in {time.monotonic() - t0:.0f} s", flush=True)
        finally:
            w.close()
            for pid in memoryd_servers(w.home):
                if alive(pid):
                    os.kill(pid, 9)
    print(f"\nmemoryd chaos (seed {args.seed}{', quick' if q else ''}) — {machine()}")
    rows = [
        (
            f.name,
            str(f.runs),
            str(f.injected),
            str(f.lost),
            str(f.duplicated),
            str(f.corrupt),
            f.pct(50),
            f.pct(95),
            "ok" if not f.failures else f"{len(f.failures)} FAILED",
        )
        for f in figs
    ]
    header = (
        "scenario",
        "runs",
        "kills/faults",
        "lost",
        "dup",
        "corrupt",
        "recovery p50",
        "p95",
        "checks",
    )
    table(rows, header)
    for f in figs:
        print(f"\n{f.name}: " + "; ".join(f.notes))
        for x in f.failures:
            print(f"  FAILED: {x}")
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    return 1 if any(f.failures for f in figs) else 0


if __name__ == "__main__":
    sys.exit(main())
