"""Phase-2 filesystem benchmark: workspace sync and baseline diff, beside the git binary.

For each size (default 256 = the default ``max_raw_memories_for_consolidation``, and 4,096 = its
maximum) realistic stage-1 outputs (~1–3 KB rollout summaries, ~0.4–1.5 KB raw memories, slugs,
titles, cwds) go through the same filesystem steps phase 2 takes, in a temp folder on the same
disk as the data:

(a) first ``Workspace.sync`` into an empty memory folder, then ``Baseline.ensure()`` (the first
    commit); a simulated first consolidation (``MEMORY.md``, ``memory_summary.md``, two skills)
    and ``reset()`` give the steady state;
(b) nothing changed: ``ensure()`` on the existing baseline, ``sync`` and ``diff`` (empty);
(c) ~1 % of the outputs re-extracted (new ``source_updated_at``, so their summary files are
    renamed, and edited text): ``sync``, ``diff`` and ``render()``;
(d) ``reset()``.

The git binary works on the very same folder through ``--git-dir``/``--work-tree`` with its own
repository outside it (excluding what memoryd excludes; rename detection off, as memoryd has
none): ``git add -A && git commit`` from scratch, ``git status --porcelain``, ``git diff HEAD
--stat``, ``git diff HEAD`` in the no-change and 1 % states, and, as the like-for-like diff,
``git add -N .`` (on a throwaway index copy, so new files show without writing blobs) followed by
``git diff HEAD``. memoryd's statuses are checked against git's.

Run from the repo root::

    .venv/bin/python bench/phase2.py [--sizes 256,4096] [--reps N] [--dir PATH] [--profile]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import memoryd.write.baseline as baseline_mod
from bench._common import (
    FILES,
    PROJECTS,
    TASKS,
    WORDS,
    fmt_s,
    machine,
    paragraph,
    profile_text,
    table,
)
from memoryd.clock import DAY, HOUR, MINUTE, SystemClock
from memoryd.store.outputs import Output
from memoryd.workspace import DIFF_FILE, RAW_MEMORIES_FILE, Workspace, is_tracked
from memoryd.write.baseline import Baseline

NOW_MS = 1_800_000_000_000
GIT = shutil.which("git")
GIT_CONFIG = [
    "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "gc.auto=0", "-c", "commit.gpgSign=false",
    "-c", "diff.renames=false", "-c", "status.renames=false", "-c", "core.quotePath=false", "-c", "color.ui=false",
    "-c", "core.pager=cat", "-c", "advice.statusHints=false", "-c", "init.defaultBranch=main",
]  # fmt: skip


# =============================================================================================
# Small helpers


def fmt_kb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} KB"


@dataclass
class Timing:
    """Wall and CPU seconds of one or more runs of an operation (median reported)."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float) -> None:
        self.walls.append(wall)
        self.cpus.append(cpu)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)

    def __add__(self, other: Timing) -> Timing:
        """Sum of two single-shot operations (or of their medians)."""
        t = Timing()
        t.add(self.wall + other.wall, self.cpu + other.cpu)
        return t

    def text(self) -> str:
        spread = ""
        if len(self.walls) > 1:
            spread = f" ({fmt_s(min(self.walls))}–{fmt_s(max(self.walls))}, n={len(self.walls)})"
        return f"{fmt_s(self.wall)}{spread}, CPU {fmt_s(self.cpu)}"


def timed(fn: Callable[[], Any], timing: Timing | None = None) -> tuple[Any, Timing]:
    """Run ``fn`` once in this process: wall (perf_counter) and process CPU time."""
    timing = timing or Timing()
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    result = fn()
    timing.add(time.perf_counter() - t0, time.process_time() - c0)
    return result, timing


REPEAT_BUDGET_S = 10.0


def repeat(
    fn: Callable[[], Any], reps: int, budget_s: float = REPEAT_BUDGET_S
) -> tuple[Any, Timing]:
    """Up to ``reps`` runs (fewer once ``budget_s`` is spent, so a slow step is not run five times)."""
    timing = Timing()
    result = None
    for _ in range(reps):
        result, _ = timed(fn, timing)
        if sum(timing.walls) > budget_s:
            break
    return result, timing


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Git:
    """The git binary on the memory folder, with its repository kept outside it."""

    def __init__(self, git_dir: Path, worktree: Path, home: Path) -> None:
        if GIT is None:
            raise RuntimeError("the git binary is not on PATH")
        self.git_dir = git_dir
        self.worktree = worktree
        self.env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(home), "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
        }  # fmt: skip

    def run(
        self, *args: str, index: Path | None = None, timing: Timing | None = None
    ) -> tuple[str, Timing]:
        """Run one git command (cwd = the worktree) and time it: wall, and the child's CPU."""
        env = dict(self.env)
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        argv = [
            GIT,
            f"--git-dir={self.git_dir}",
            f"--work-tree={self.worktree}",
            *GIT_CONFIG,
            *args,
        ]
        timing = timing or Timing()
        c0, t0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run(argv, cwd=self.worktree, env=env, capture_output=True, check=False)
        timing.add(time.perf_counter() - t0, _children_cpu() - c0)
        if proc.returncode != 0:
            raise RuntimeError(
                f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}"
            )
        return proc.stdout.decode("utf-8", "replace"), timing

    def runs(self, *cmds: tuple[str, ...], index: Path | None = None) -> tuple[str, Timing]:
        """Several commands back to back, timed as one operation; returns the last one's output."""
        total = Timing()
        wall = cpu = 0.0
        out = ""
        for cmd in cmds:
            out, t = self.run(*cmd, index=index)
            wall += t.wall
            cpu += t.cpu
        total.add(wall, cpu)
        return out, total

    def init(self) -> Timing:
        _, t = self.run("init", "-q")
        # The same exclusions as memoryd's baseline: the transient diff file and dot-prefixed names.
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "exclude").write_text(f"/{DIFF_FILE}\n.*\n")
        return t

    def commit_all(self) -> Timing:
        _, t = self.runs(("add", "-A"), ("commit", "-q", "--no-verify", "-m", "baseline"))
        return t


# =============================================================================================
# Realistic stage-1 outputs


COMMANDS = ["pytest -x tests/", "pnpm install --frozen-lockfile", "make build", "alembic upgrade head",
            "docker compose up -d db", "ruff format .", "go test ./...", "cargo clippy -- -D warnings",
            "npm run lint", "git rebase -i origin/main"]  # fmt: skip
B62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sentence(rng: random.Random, lo: int = 8, hi: int = 20) -> str:
    words = rng.choices(WORDS, k=rng.randint(lo, hi))
    if rng.random() < 0.35:
        words.insert(rng.randrange(len(words)), f"`{rng.choice(FILES)}`")
    return " ".join(words).capitalize() + "."


def _para(rng: random.Random, chars: int) -> str:
    return paragraph(rng, chars, _sentence)


def _bullets(rng: random.Random, chars: int) -> list[str]:
    out: list[str] = []
    n = 0
    while n < chars:
        b = "- " + _sentence(rng, 10, 24)
        out.append(b)
        n += len(b) + 1
    return out


GROUPS = ["testing", "build and CI", "database", "dependencies", "deployment", "frontend", "performance",
          "debugging", "code review", "tooling"]  # fmt: skip
OUTCOMES = ["success", "success", "success", "partial", "failed"]


def _section(rng: random.Random, name: str, chars: int) -> list[str]:
    return [name, *_bullets(rng, chars)]


def _raw_memory(rng: random.Random, proj: str, task: str) -> str:
    """The stage-1 ``raw_memory`` format (templates/stage_one_system.md): front matter, then tasks."""
    budget = rng.randint(300, 1200)
    lines = [
        "---", f"description: {_sentence(rng, 8, 14)}", f"task: {task}", f"task_group: {rng.choice(GROUPS)}",
        f"task_outcome: {rng.choice(OUTCOMES)}", f"cwd: /home/dev/src/{proj}",
        "keywords: " + ", ".join(rng.sample(WORDS, 6)), "---",
    ]  # fmt: skip
    tasks = rng.choice([1, 1, 2])
    for t in range(1, tasks + 1):
        each = budget // (tasks * 5)
        lines += [
            "",
            f"### Task {t}: {task if t == 1 else rng.choice(TASKS)}",
            f"outcome: {rng.choice(OUTCOMES)}",
        ]
        for name in ("preferences:", "steps:", "failures:", "knowledge:"):
            lines += _section(rng, name, each)
        lines += ["references:", *(f"- `{c}` ({rng.choice(FILES)}:{rng.randint(1, 400)})"
                                   for c in rng.sample(COMMANDS, rng.randint(1, 3)))]  # fmt: skip
    return "\n".join(lines)


def _summary(rng: random.Random, proj: str, task: str) -> str:
    """The stage-1 ``rollout_summary`` format: title, project lines, one section per task."""
    budget = rng.randint(500, 2000)
    lines = [
        f"# {task.capitalize()} in {proj}", "", f"Project: {proj}", f"Working directory: /home/dev/src/{proj}",
        f"Context: {_sentence(rng)}",
    ]  # fmt: skip
    tasks = rng.choice([1, 1, 2])
    for t in range(1, tasks + 1):
        each = budget // (tasks * 5)
        lines += ["", f"## Task {t}: {task if t == 1 else rng.choice(TASKS)}", "",
                  f"Outcome: {rng.choice(OUTCOMES)} - {_sentence(rng)}"]  # fmt: skip
        for name in (
            "Preference signals:",
            "Key steps:",
            "Failures and fixes:",
            "Reusable knowledge:",
        ):
            lines += ["", *_section(rng, name, each)]
        lines += ["", "References:", *(f"{i}. `{c}` ({rng.choice(FILES)}:{rng.randint(1, 400)})"
                                       for i, c in enumerate(rng.sample(COMMANDS, 3), 1))]  # fmt: skip
    return "\n".join(lines)


def make_outputs(n: int, seed: int = 1) -> list[Output]:
    rng = random.Random(seed)
    outs: list[Output] = []
    for _i in range(n):
        proj = rng.choice(PROJECTS)
        task = rng.choice(TASKS)
        title = f"{task} in {proj}"
        slug: str | None = None
        if rng.random() < 0.9:  # the model names most rollouts; some slugs are long and get cut
            slug = "-".join([*task.split(), proj, *rng.choices(WORDS, k=rng.randint(0, 6))])
        updated = NOW_MS - rng.randint(0, 30 * DAY)
        outs.append(Output(
            session_id="ses_" + "".join(rng.choices(B62, k=26)),
            source_updated_at=updated,
            raw_memory=_raw_memory(rng, proj, task),
            rollout_summary=_summary(rng, proj, task),
            rollout_slug=slug,
            cwd=f"/home/dev/src/{proj}",
            title=title,
            generated_at=updated + rng.randint(1, 60) * MINUTE,
            usage_count=rng.choice([0, 0, 0, 1, 2, 5]),
            last_usage=None,
            selected_for_phase2=True,
        ))  # fmt: skip
    return outs


def reextract(outs: list[Output], fraction: float, seed: int = 2) -> tuple[list[Output], int]:
    """~``fraction`` of the outputs re-extracted after a new turn: later update time, edited text."""
    rng = random.Random(seed)
    k = max(1, round(len(outs) * fraction))
    picked = set(rng.sample(range(len(outs)), k))
    new = list(outs)
    for i in picked:
        o = outs[i]
        summary = o.rollout_summary.splitlines()
        j = rng.randrange(len(summary))
        summary[j] = _sentence(rng)  # one line rewritten
        summary += ["", "## Follow-up", "", _para(rng, rng.randint(200, 600))]
        raw = o.raw_memory.splitlines()
        at = raw.index("knowledge:") + 1  # a new durable fact from the new turn
        raw.insert(at, "- Correction: " + _sentence(rng))
        new[i] = dataclasses.replace(
            o, source_updated_at=o.source_updated_at + rng.randint(1, 48) * HOUR,
            rollout_summary="\n".join(summary), raw_memory="\n".join(raw),
        )  # fmt: skip
    return new, k


def first_consolidation(root: Path, rng: random.Random) -> None:
    """What a consolidation leaves behind: MEMORY.md, memory_summary.md and a couple of skills."""
    memory = ["# Memory", ""]
    for proj in PROJECTS:
        memory += [f"## {proj}", "", *_bullets(rng, 2000), ""]
    (root / "MEMORY.md").write_text("\n".join(memory))
    (root / "memory_summary.md").write_text(
        "v1\n## What's in memory\n\n" + "\n".join(_bullets(rng, 3000)) + "\n"
    )
    for name in ("release-checklist", "db-migrations"):
        d = root / "skills" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "SKILL.md").write_text(
            f"---\nname: {name}\n---\n\n" + "\n".join(_bullets(rng, 1500)) + "\n"
        )


# =============================================================================================
# One size


@dataclass
class SizeResult:
    n: int
    files: int = 0
    tree_bytes: int = 0
    changed: int = 0
    m: dict[str, Timing] = field(default_factory=dict)  # memoryd operations
    g: dict[str, Timing] = field(default_factory=dict)  # git operations
    notes: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    raw_lines: int = 0
    patch_split: tuple[float, float] = (
        0.0,
        0.0,
    )  # seconds per diff in file_patch: raw_memories.md, the rest


def _tree_size(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in names:
            if not name.startswith("."):
                files += 1
                size += os.lstat(os.path.join(dirpath, name)).st_size
    return files, size


def _git_status_set(porcelain: str) -> set[tuple[str, str]]:
    """(A|M|D, path) from ``git diff --name-status`` output."""
    out = set()
    for line in porcelain.splitlines():
        if line.strip():
            st, path = line.split("\t", 1)
            out.add((st[0], path))
    return out


def _patch_numstat(patch: str) -> dict[str, tuple[int, int]]:
    """Per-file added/deleted line counts of a git-style patch."""
    stats: dict[str, list[int]] = {}
    cur: list[int] | None = None
    for line in patch.splitlines():
        if line.startswith("diff --git a/"):
            path = line.split(" b/", 1)[1]
            cur = stats.setdefault(path, [0, 0])
        elif cur is not None and line.startswith("+") and not line.startswith("+++ "):
            cur[0] += 1
        elif cur is not None and line.startswith("-") and not line.startswith("--- "):
            cur[1] += 1
    return {p: (a, d) for p, (a, d) in stats.items()}


def _git_numstat(text: str) -> dict[str, tuple[int, int]]:
    out = {}
    for line in text.splitlines():
        a, d, path = line.split("\t", 2)
        out[path] = (int(a), int(d))
    return out


def bench_size(n: int, base: Path, reps: int, profile: bool) -> SizeResult:
    res = SizeResult(n)
    tmp = Path(tempfile.mkdtemp(prefix=f"memoryd-bench-p2-{n}-", dir=base))
    try:
        root = tmp / "data" / "memories"
        ws = Workspace(root, clock=SystemClock())
        bl = Baseline(tmp / "data" / "baseline.git", root, exclude=lambda p: not is_tracked(p))
        git = Git(tmp / "git-baseline.git", root, tmp)
        outs = make_outputs(n, seed=n)
        m, g = res.m, res.g

        # (a) first sync into an empty folder, then the first commit
        _, m["layout"] = timed(ws.ensure_layout)
        fsync_time = Timing()
        with _timing_fsync(fsync_time):
            first, m["sync first"] = timed(lambda: ws.sync(outs))
        m["fsync first"] = fsync_time
        assert len(first.written) == n + 1, len(first.written)
        rebuilt, m["ensure first"] = timed(bl.ensure)
        assert rebuilt
        res.files, res.tree_bytes = _tree_size(root)
        for r in range(reps):  # git from scratch on the same tree, in fresh repositories
            scratch = Git(tmp / f"git-scratch-{r}.git", root, tmp)
            t = scratch.init() + scratch.commit_all()
            g.setdefault("commit scratch first", Timing()).add(t.wall, t.cpu)
            shutil.rmtree(scratch.git_dir)
        git.init()
        git.commit_all()

        # steady state: a consolidation wrote the agent's files and moved both baselines
        first_consolidation(root, random.Random(n + 7))
        _, m["reset after consolidation"] = timed(bl.reset)
        git.commit_all()

        # (b) nothing changed
        _, m["layout idle"] = repeat(ws.ensure_layout, reps)
        _, m["ensure idle"] = repeat(bl.ensure, reps)
        idle_sync, m["sync idle"] = repeat(lambda: ws.sync(outs), reps)
        assert not idle_sync.changed
        idle_diff, m["diff idle"] = repeat(bl.diff, reps)
        assert idle_diff.empty, idle_diff.changes[:5]
        _, m["validate idle"] = repeat(ws.validate, reps)
        for _ in range(reps):
            for key, cmd in (("status idle", ("status", "--porcelain")), ("stat idle", ("diff", "HEAD", "--stat")),
                             ("diff idle", ("diff", "HEAD"))):  # fmt: skip
                out, _ = git.run(*cmd, timing=g.setdefault(key, Timing()))
                assert out == "", out[:300]
        if profile:
            res.profiles.append(
                _profile(
                    "no-change ensure + sync + diff",
                    lambda: (bl.ensure(), ws.sync(outs), bl.diff()),
                )
            )

        # (c) ~1 % re-extracted
        changed_outs, res.changed = reextract(outs, 0.01, seed=n + 1)
        synced, m["sync 1%"] = timed(lambda: ws.sync(changed_outs))
        assert len(synced.removed) == res.changed and len(synced.written) == res.changed + 1
        per_path: dict[str, float] = defaultdict(float)
        with _timing_patches(per_path):
            diff, m["diff 1%"] = repeat(bl.diff, reps)
        runs = len(m["diff 1%"].walls)
        res.patch_split = (per_path[RAW_MEMORIES_FILE] / runs,
                           sum(v for k, v in per_path.items() if k != RAW_MEMORIES_FILE) / runs)  # fmt: skip
        res.raw_lines = (root / RAW_MEMORIES_FILE).read_bytes().count(b"\n")
        rendered, m["render 1%"] = repeat(diff.render, reps)
        if profile:
            res.profiles.append(_profile("1 % diff", bl.diff))
        for _ in range(reps):
            for key, cmd in (("status 1%", ("status", "--porcelain")), ("stat 1%", ("diff", "HEAD", "--stat")),
                             ("diff 1%", ("diff", "HEAD"))):  # fmt: skip
                git.run(*cmd, timing=g.setdefault(key, Timing()))
            ita = tmp / "index-ita"  # a throwaway index: the real one stays at the baseline
            shutil.copyfile(git.git_dir / "index", ita)
            full, t = git.runs(("add", "-N", "."), ("diff", "HEAD"), index=ita)
            g.setdefault("full diff 1%", Timing()).add(t.wall, t.cpu)
        names, _ = git.run("diff", "HEAD", "--name-status", index=ita)
        numstat, _ = git.run("diff", "HEAD", "--numstat", index=ita)
        ours = {(c.status, c.path) for c in diff.changes}
        theirs = _git_status_set(names)
        if ours != theirs:
            raise AssertionError(f"statuses differ from git: only memoryd {sorted(ours - theirs)[:5]}, "
                                 f"only git {sorted(theirs - ours)[:5]}")  # fmt: skip
        ours_num, git_num = _patch_numstat(diff.patch), _git_numstat(numstat)
        same = sum(1 for p in ours_num if ours_num[p] == git_num.get(p))
        res.notes.append(
            f"1 % state: {len(diff.changes)} changes ({sum(c.status == 'A' for c in diff.changes)} A, "
            f"{sum(c.status == 'D' for c in diff.changes)} D, {sum(c.status == 'M' for c in diff.changes)} M), "
            f"statuses identical to git's; +/- line counts equal to git's for {same}/{len(ours_num)} files; "
            f"patch {fmt_kb(len(diff.patch.encode()))} (git {fmt_kb(len(full.encode()))}), rendered file "
            f"{fmt_kb(len(rendered.encode()))}"
        )

        # (d) reset: memoryd rebuilds a one-commit repository; git commits incrementally or from scratch
        _, m["reset"] = repeat(bl.reset, reps)
        assert bl.diff().empty
        g["commit incremental"] = git.commit_all()
        for r in range(reps):
            scratch = Git(tmp / f"git-scratch-{r}.git", root, tmp)
            t = scratch.init() + scratch.commit_all()
            g.setdefault("commit scratch", Timing()).add(t.wall, t.cpu)
            shutil.rmtree(scratch.git_dir)
        out, _ = git.run("status", "--porcelain")
        assert out == "", out[:300]
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _timing_fsync(acc: Timing) -> Iterator[None]:
    """Accumulate the wall time spent inside os.fsync (memoryd's atomic_write syncs every file)."""
    real = os.fsync
    spent = [0.0, 0]

    def fsync(fd: int) -> None:
        t0 = time.perf_counter()
        try:
            real(fd)
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1

    os.fsync = fsync  # type: ignore[assignment]
    try:
        yield
    finally:
        os.fsync = real
        acc.add(spent[0], float(spent[1]))  # "cpu" holds the call count here


@contextlib.contextmanager
def _timing_patches(acc: dict[str, float]) -> Iterator[None]:
    """Accumulate the time memoryd.write.baseline spends rendering each file's patch (difflib), by path."""
    real = baseline_mod.file_patch

    def file_patch(path: str, *args: Any) -> str:
        t0 = time.perf_counter()
        try:
            return real(path, *args)
        finally:
            acc[path] += time.perf_counter() - t0

    baseline_mod.file_patch = file_patch  # type: ignore[assignment]
    try:
        yield
    finally:
        baseline_mod.file_patch = real


def _profile(label: str, fn: Callable[[], Any]) -> str:
    return re.sub(r"\n\s*\n+", "\n", profile_text(fn, label, top=18)).strip()


# =============================================================================================
# Report


def report_size(r: SizeResult) -> None:
    m, g = r.m, r.g
    print(f"\n== {r.n} outputs: {r.files} tracked files, {fmt_kb(r.tree_bytes)} after the first consolidation; "
          f"1 % = {r.changed} re-extracted ==")  # fmt: skip
    print("(a) first sync into an empty folder + first commit")
    print(f"  {'ensure_layout':<38} {m['layout'].text()}")
    print(f"  {f'sync (writes {r.n + 1} files)':<38} {m['sync first'].text()}")
    print(
        f"  {'  of which inside fsync':<38} {fmt_s(m['fsync first'].wall)} ({int(m['fsync first'].cpu)} calls, "
        f"{fmt_s(m['fsync first'].wall / max(1, m['fsync first'].cpu))} each)"
    )
    print(f"  {'Baseline.ensure (first commit)':<38} {m['ensure first'].text()}")
    print(f"  {'git init + add -A + commit (fresh)':<38} {g['commit scratch first'].text()}")
    print(f"  -> memoryd/git {ratio(m['ensure first'].wall, g['commit scratch first'].wall)}")
    print(
        f"  {'reset after a simulated consolidation':<38} {m['reset after consolidation'].text()}"
    )
    idle_total = (
        m["layout idle"].wall + m["ensure idle"].wall + m["sync idle"].wall + m["diff idle"].wall
    )
    idle_total += m["validate idle"].wall
    print("(b) nothing changed")
    for key, label in (("layout idle", "ensure_layout"), ("ensure idle", "Baseline.ensure (existing)"),
                       ("sync idle", "sync (reads and compares every file)"), ("diff idle", "diff (empty)"),
                       ("validate idle", "validate")):  # fmt: skip
        print(f"  {label:<38} {m[key].text()}")
    print(f"  phase 2's whole no-change file work (sum): {fmt_s(idle_total)}")
    for key, label in (("status idle", "git status --porcelain"), ("stat idle", "git diff HEAD --stat"),
                       ("diff idle", "git diff HEAD")):  # fmt: skip
        print(f"  {label:<38} {g[key].text()}")
    print(
        f"  -> memoryd diff / git diff HEAD {ratio(m['diff idle'].wall, g['diff idle'].wall)}; "
        f"memoryd sync + diff / git status {ratio(m['sync idle'].wall + m['diff idle'].wall, g['status idle'].wall)}"
    )
    print("(c) ~1 % changed")
    print(f"  sync                                   {m['sync 1%'].text()}")
    print(f"  diff                                   {m['diff 1%'].text()}")
    raw_s, rest_s = r.patch_split
    print(
        f"    of which patch text: raw_memories.md {fmt_s(raw_s)} ({r.raw_lines} lines), "
        f"the other {2 * r.changed} files {fmt_s(rest_s)}; walk + read + hash the rest"
    )
    print(f"  render                                 {m['render 1%'].text()}")
    for key, label in (("status 1%", "git status --porcelain"), ("stat 1%", "git diff HEAD --stat"),
                       ("diff 1%", "git diff HEAD (tracked files only)"),
                       ("full diff 1%", "git add -N . && git diff HEAD")):  # fmt: skip
        print(f"  {label:<38} {g[key].text()}")
    print(
        f"  -> memoryd diff / (git add -N + diff HEAD) {ratio(m['diff 1%'].wall, g['full diff 1%'].wall)}; "
        f"memoryd diff + render / same {ratio(m['diff 1%'].wall + m['render 1%'].wall, g['full diff 1%'].wall)}"
    )
    for note in r.notes:
        print(f"  {note}")
    print("(d) reset")
    print(f"  Baseline.reset (new one-commit repo)   {m['reset'].text()}")
    print(f"  git add -A && git commit (incremental) {g['commit incremental'].text()}")
    print(f"  git init + add -A + commit (scratch)   {g['commit scratch'].text()}")
    print(
        f"  -> reset / git from scratch {ratio(m['reset'].wall, g['commit scratch'].wall)}; "
        f"reset / git incremental {ratio(m['reset'].wall, g['commit incremental'].wall)}"
    )
    for text in r.profiles:
        print(f"\n{text}")


def summary_table(results: list[SizeResult]) -> None:
    rows: list[tuple[str, str, str, str]] = []
    for r in results:
        m, g = r.m, r.g
        rows += [
            (f"{r.n}: first sync ({r.n + 1} files)", fmt_s(m["sync first"].wall), "", ""),
            (f"{r.n}: first commit (ensure)", fmt_s(m["ensure first"].wall), f"{fmt_s(g['commit scratch first'].wall)} init+add+commit",
             ratio(m["ensure first"].wall, g["commit scratch first"].wall)),
            (f"{r.n}: no change: ensure (existing)", fmt_s(m["ensure idle"].wall), "", ""),
            (f"{r.n}: no change: sync", fmt_s(m["sync idle"].wall), "", ""),
            (f"{r.n}: no change: diff", fmt_s(m["diff idle"].wall), f"{fmt_s(g['diff idle'].wall)} diff HEAD",
             ratio(m["diff idle"].wall, g["diff idle"].wall)),
            (f"{r.n}: no change: sync + diff", fmt_s(m["sync idle"].wall + m["diff idle"].wall),
             f"{fmt_s(g['status idle'].wall)} status", ratio(m["sync idle"].wall + m["diff idle"].wall, g["status idle"].wall)),
            (f"{r.n}: 1 %: sync", fmt_s(m["sync 1%"].wall), "", ""),
            (f"{r.n}: 1 %: diff", fmt_s(m["diff 1%"].wall), f"{fmt_s(g['full diff 1%'].wall)} add -N + diff HEAD",
             ratio(m["diff 1%"].wall, g["full diff 1%"].wall)),
            (f"{r.n}: 1 %: render", fmt_s(m["render 1%"].wall), "", ""),
            (f"{r.n}: 1 %: sync + diff + render", fmt_s(m["sync 1%"].wall + m["diff 1%"].wall + m["render 1%"].wall), "", ""),
            (f"{r.n}: reset", fmt_s(m["reset"].wall), f"{fmt_s(g['commit scratch'].wall)} init+add+commit",
             ratio(m["reset"].wall, g["commit scratch"].wall)),
            (f"{r.n}: reset vs incremental commit", fmt_s(m["reset"].wall), f"{fmt_s(g['commit incremental'].wall)} add+commit",
             ratio(m["reset"].wall, g["commit incremental"].wall)),
        ]  # fmt: skip
    header = ("measure (wall, median)", "memoryd", "git binary", "memoryd/git")
    print("\n== Summary ==")
    table(rows, header)
    print(
        "git rows include fork+exec of the binary (~1–2 ms per command); memoryd rows run in this process"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", default="256,4096", help="comma-separated output counts (default 256,4096)"
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=5,
        help="repeats of each repeatable measurement (median; default 5)",
    )
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="parent of the temp folders (default: the system temp dir)",
    )
    ap.add_argument(
        "--profile", action="store_true", help="also print cProfile of the no-change and 1 %% diffs"
    )
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on kill, too
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    base = args.dir or Path(tempfile.gettempdir())
    git_version = subprocess.run(
        [GIT or "git", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    fs = (
        subprocess.run(["df", "-T", str(base)], capture_output=True, text=True, check=False)
        .stdout.splitlines()[-1]
        .split()
    )
    print(f"memoryd phase-2 bench, {time.strftime('%Y-%m-%d %H:%M')}, {machine()}, {git_version}, "
          f"temp dir {base} ({fs[1] if len(fs) > 1 else '?'})")  # fmt: skip
    results = []
    for n in sizes:
        t = time.perf_counter()
        results.append(bench_size(n, base, max(1, args.reps), args.profile))
        report_size(results[-1])
        print(f"  (size done in {fmt_s(time.perf_counter() - t)})")
    summary_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
