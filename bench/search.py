"""Search benchmark: ``memory_search`` plain and ranked beside ``grep -rn`` on the same folder.

For each size (default 5 and 50 MB) a realistic memory folder is generated in a temp dir:
``MEMORY.md`` (per-project sections), ``memory_summary.md``, ``raw_memories.md`` and many
``rollout_summaries/<timestamp>-<hash>-<slug>.md`` rendered with memoryd's own renderers from
stage-1 outputs, ``skills/<name>/SKILL.md`` and ad-hoc notes. The same outputs (plus ~25 % that
were never selected for consolidation, so they exist only in the store) go into a temp
:class:`memoryd.store.Store`, which the ranked index covers instead of their renders.

Then, per size: the ranked index's first build (the first ranked query on an empty index), a
no-op refresh, about ten queries of varied frequency each run ``--runs`` times in plain mode,
ranked mode (warm: index already built) and through ``grep -rnF`` (``grep -rniF`` for the
case-insensitive query) as a subprocess, interleaved so drift hits all three alike; then
incremental refreshes after touching / editing / deleting one file. The baseline (grep) is
measured in the same process on the same folder, so the ratios are what to compare.

Run from the repo root::

    .venv/bin/python bench/search.py [--sizes 5,50] [--runs N] [--seed N] [--keep]

The defaults (5 and 50 MB, 20 runs) take ~5 minutes on 2 CPUs, nearly all of it plain search
at 50 MB (~9 s per round of ten queries); ``--runs 8`` takes ~2¼ minutes.

Not a test: nothing here is collected by pytest. (It replaces the opt-in
``tests/unit/test_tools_bench.py``.)
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import PROJECTS, table
from memoryd.clock import DAY, HOUR, ManualClock
from memoryd.folder.layout import (
    AD_HOC_NOTES,
    MEMORY_FILE,
    RAW_MEMORIES_FILE,
    SKILLS_DIR,
    SUMMARIES_DIR,
    SUMMARY_FILE,
    assign_stems,
    render_raw_memories,
    render_rollout_summary,
    sanitize_slug,
)
from memoryd.paths import bump_change_mark
from memoryd.store import Store
from memoryd.store.outputs import Output
from memoryd.tools import SearchIndex, default_index_path, memory_search
from memoryd.tools.common import stamp_text
from memoryd.tools.hits import SearchQuery, SearchResult

T0 = 1_800_000_000_000  # the fake "now" (same as the unit tests and bench/phase1.py)
MB = 1_000_000
GREP_ENV = {**os.environ, "LC_ALL": "C.UTF-8"}
TOUCHES = 5  # incremental refreshes measured after touching one note


# =============================================================================================
# Small helpers


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    if ms >= 1000:
        return f"{seconds:.2f} s"
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); p95 of 20 runs is the 19th fastest."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, -(-len(s) * p // 100) - 1))
    return s[int(k)]


def folder_bytes(root: Path) -> tuple[int, int]:
    size = files = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            size += os.lstat(os.path.join(dirpath, n)).st_size
            files += 1
    return size, files


# =============================================================================================
# Realistic synthetic memory


# Ranked by frequency: English glue first, then domain words; a long tail of generated
# identifiers follows (every project has its own names), all drawn with Zipf-like weights.
GLUE = """the to a and of in for is we it that on with this was not be when as use run should from
by so if after but are at or before then instead only all one which also because now can still
""".split()  # noqa: SIM905
DOMAIN = """test build error config file fix tests function module import fails passes cache database
query index schema api endpoint request response handler client server async timeout retry logger
debug release version package dependency lockfile install script command flag option default value
type lint format commit branch merge rebase diff patch review deploy staging production container
image volume network port host token session user auth permission role admin dashboard metric alert
queue worker job scheduler cron batch stream buffer parser serializer json yaml env variable path
folder directory repository monorepo workspace service component hook state store reducer router
page template render style layout theme button form input validation field model migration migrate
migrations postgres redis kafka docker compose kubernetes helm terraform nginx webhook payload
upload download bucket region cluster node pod replica shard lock mutex thread pool connection
socket latency throughput benchmark profile flamegraph memory leak crash panic stacktrace traceback
exception assertion fixture mock snapshot coverage ci pipeline workflow artifact cache key secret
vault rotate certificate tls proxy gateway ratelimit pagination cursor offset sort filter search
ranking embedding vector tokenizer prompt model inference gpu batchsize checkpoint dataset loader
""".split()  # noqa: SIM905
DOMAIN = list(dict.fromkeys(DOMAIN))
FILES = ["src/app.py", "src/db/models.py", "src/api/routes.py", "tests/test_api.py", "package.json",
         "src/components/Table.tsx", "src/hooks/useSession.ts", "Makefile", "docker-compose.yml",
         "pyproject.toml", "src/worker/queue.go", "README.md", "src/lib/cache.rs", ".github/workflows/ci.yml",
         "migrations/0042_add_index.sql", "src/api/handlers/users.py", "web/src/pages/Settings.tsx"]  # fmt: skip
TASKS = ["fix the flaky test", "add pagination", "migrate to the new schema", "speed up the build",
         "upgrade dependencies", "debug the timeout", "refactor the handler", "add retry logic",
         "wire up the dashboard", "set up CI caching", "write the migration", "review the PR",
         "rotate the staging secrets", "profile the slow endpoint", "port the worker to Go"]  # fmt: skip
# Recurring multi-word phrases real sessions repeat (sprinkled into sentences).
PHRASES = ["connection refused", "run the tests", "the build", "pnpm install", "pytest -x", "make ship",
           "merge conflict", "Postgres 16", "PostgreSQL", "POSTGRES_URL", "out of memory", "exit code 1",
           "feature flag", "race condition", "the staging deploy", "cold start", "on-call runbook"]  # fmt: skip
COMMANDS = ["pytest -x -q", "pnpm install --frozen-lockfile", "make ship", "docker compose up -d db",
            "git rebase -i origin/main", "kubectl rollout restart deploy/api", "cargo test --workspace",
            "go test ./...", "ruff check --fix .", "alembic upgrade head", "terraform plan -out tf.plan",
            "psql $POSTGRES_URL -c 'select 1'", "redis-cli FLUSHALL", "npm run build"]  # fmt: skip
ERRORS = ["ECONNREFUSED 127.0.0.1:5432", "ModuleNotFoundError: No module named 'httpx'",
          "TypeError: cannot read properties of undefined (reading 'id')", "OOMKilled",
          "deadlock detected", "SSL: CERTIFICATE_VERIFY_FAILED", "exit code 137", "429 Too Many Requests"]  # fmt: skip
SYLLABLES = ["ka", "lo", "mi", "ren", "tor", "vel", "zan", "qui", "dro", "fen", "sha", "pix", "mor", "tal",
             "bri", "gon", "xe", "lum", "cor", "nid", "sep", "hul", "wex", "yar", "ost", "ein"]  # fmt: skip

# Planted so the rare queries have a known, size-independent number of hits.
RARE_WORD = "quasarfrost"
RARE_PHRASE = "flux capacitor"
ABSENT = "xylophonequark"


class Vocab:
    def __init__(self, rng: random.Random, tail: int = 12_000) -> None:
        seen = set(GLUE) | set(DOMAIN)
        idents: list[str] = []
        while len(idents) < tail:
            w = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 4)))
            if rng.random() < 0.3:
                w += rng.choice(["_id", "Handler", "_cfg", "Service", "_v2", "Client"])
            if w not in seen and "migrat" not in w:
                seen.add(w)
                idents.append(w)
        self.words = GLUE + DOMAIN + idents
        head = len(GLUE) + len(DOMAIN)  # identifiers: ~10 % of the words, as in notes about code
        weights = [(1.0 if r < head else 0.12) / (r + 2) for r in range(len(self.words))]
        self.cum = list(_accumulate(weights))
        self.rng = rng

    def sentence(self, lo: int = 7, hi: int = 18) -> str:
        rng = self.rng
        words = rng.choices(self.words, cum_weights=self.cum, k=rng.randint(lo, hi))
        r = rng.random()
        if r < 0.18:
            words.insert(rng.randrange(len(words)), rng.choice(PHRASES))
        elif r < 0.25:
            words.insert(rng.randrange(len(words)), f"`{rng.choice(FILES)}`")
        elif r < 0.28:
            words.append(f"({rng.choice(ERRORS)})")
        text = " ".join(words)
        return text[0].upper() + text[1:] + "."

    def para(self, chars: int) -> str:
        out: list[str] = []
        n = 0
        while n < chars:
            s = self.sentence()
            out.append(s)
            n += len(s) + 1
        return " ".join(out)

    def bullets(self, n: int) -> str:
        return "\n".join(f"- {self.sentence(5, 14)}" for _ in range(n))

    def code(self, lines: int) -> str:
        rng = self.rng
        body = [
            f"$ {rng.choice(COMMANDS)}" if rng.random() < 0.5 else rng.choice(ERRORS)
            for _ in range(lines)
        ]
        return "```bash\n" + "\n".join(body) + "\n```"


def _accumulate(xs: list[float]) -> list[float]:
    out, t = [], 0.0
    for x in xs:
        t += x
        out.append(t)
    return out


def _sid(rng: random.Random) -> str:
    return "ses_" + "".join(
        rng.choices("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=26)
    )


def make_output(v: Vocab, i: int, rng: random.Random) -> Output:
    project = rng.choice(PROJECTS)
    task = rng.choice(TASKS)
    sections = [f"# {task[0].upper()}{task[1:]} ({project})", "", "## Task", "", v.para(rng.randint(150, 500)), "",
                "## What happened", ""]  # fmt: skip
    for _ in range(rng.randint(1, 4)):
        sections += [v.para(rng.randint(250, 900)), ""]
    sections += ["## Decisions", "", v.bullets(rng.randint(2, 7)), ""]
    if rng.random() < 0.7:
        sections += ["## Commands", "", v.code(rng.randint(2, 9)), ""]
    files = rng.sample(FILES, rng.randint(1, 4))
    sections += [
        "## Files touched",
        "",
        "\n".join(f"- `{f}`: {v.sentence(4, 10)}" for f in files),
        "",
    ]
    if rng.random() < 0.5:
        sections += ["## Follow-ups", "", v.bullets(rng.randint(1, 4)), ""]
    raw = "\n".join(
        [f"- [{project}] {v.sentence(6, 16)}" for _ in range(rng.randint(3, 12))]
        + ([f"- Preference: {v.sentence(5, 12)}"] if rng.random() < 0.4 else [])
    )
    updated = T0 - rng.randrange(365 * DAY) - i  # distinct per session
    return Output(
        session_id=_sid(rng), source_updated_at=updated, raw_memory=raw, rollout_summary="\n".join(sections),
        rollout_slug=task, cwd=f"/home/dev/src/{project}", title=f"{task} in {project}",
        generated_at=updated + HOUR, usage_count=0, last_usage=None, selected_for_phase2=True,
    )  # fmt: skip


def _plant(text: str, rng: random.Random, phrase: str) -> str:
    """Put ``phrase`` into one line of ``text`` that is plain prose (not header, heading or code)."""
    lines = text.split("\n")
    ok = [
        i
        for i, line in enumerate(lines)
        if len(line) > 40 and line[0].isalpha() and ":" not in line[:20]
    ]
    i = rng.choice(ok)
    lines[i] = f"{lines[i]} Note: the {phrase} matters here."
    return "\n".join(lines)


@dataclass
class Corpus:
    root: Path
    data_dir: Path
    bytes: int
    files: int
    outputs_selected: int
    outputs_extra: int
    store_text_bytes: int
    gen_seconds: float
    store_seconds: float
    skills: int
    note_paths: list[str] = field(default_factory=list)


def generate(base: Path, target_mb: float, seed: int) -> Corpus:
    """Write the memory folder under ``base/memories`` and fill a store under ``base/data``."""
    t_start = time.perf_counter()
    rng = random.Random(seed)
    v = Vocab(rng)
    root, data = base / "memories", base / "data"
    for d in (root / SUMMARIES_DIR, root / SKILLS_DIR, root / AD_HOC_NOTES, data):
        d.mkdir(parents=True, exist_ok=True)
    target = int(target_mb * MB)
    written = 0

    def write(rel: str, text: str) -> None:
        nonlocal written
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data_b = text.encode()
        p.write_bytes(data_b)
        written += len(data_b)

    # Agent-owned files: MEMORY.md (~3 %), memory_summary.md, skills (~3 %); user notes (~5 %).
    mem = ["# Memory", "", "What the consolidation agent keeps across sessions, per project.", ""]
    size = 0
    while size < target * 0.03:
        for project in PROJECTS:
            block = [f"## {project}", "", "### Conventions", "", v.bullets(rng.randint(3, 8)), "",
                     "### Gotchas", "", v.bullets(rng.randint(2, 6)), "", "### Commands", "", v.code(3), ""]  # fmt: skip
            mem += block
            size += sum(len(b) + 1 for b in block)
    memory_md = _plant("\n".join(mem), rng, RARE_PHRASE)
    write(MEMORY_FILE, memory_md + "\n")
    write(SUMMARY_FILE, "v1\n\n# Summary\n\n" + v.bullets(30) + "\n")
    write("extensions/ad_hoc/instructions.md", "# Ad-hoc notes\n\n" + v.para(600) + "\n")
    skill_bytes = 0
    k = 0
    while skill_bytes < target * 0.03:
        name = sanitize_slug(f"{rng.choice(TASKS)} {k}")
        head = f"---\nname: {name}\ndescription: {v.sentence(6, 12)}\n---\n\n# {name}\n\n"
        parts = [f"{head}## When to use\n\n{v.para(400)}\n"]
        for step in range(rng.randint(2, 6)):
            parts.append(f"\n## Step {step + 1}: {v.sentence(3, 6)[:-1]}\n\n{v.para(rng.randint(200, 800))}\n\n"
                         f"{v.bullets(rng.randint(2, 6))}\n\n{v.code(rng.randint(2, 6))}\n")  # fmt: skip
        parts.append(f"\n## Pitfalls\n\n{v.bullets(rng.randint(2, 8))}\n")
        text = "".join(parts)
        if k == 3:
            text = _plant(text, rng, RARE_PHRASE)
        write(f"{SKILLS_DIR}/{name}/SKILL.md", text)
        skill_bytes += len(text)
        k += 1
    note_bytes = 0
    notes: list[str] = []
    while note_bytes < target * 0.05:
        ms = T0 - rng.randrange(365 * DAY)
        title = " ".join(rng.choices(DOMAIN, k=3))
        body = v.para(rng.randint(150, 1500))
        if len(notes) == 7:
            body += f" Remember the {RARE_WORD} switch in the staging deploy."
        text = f"title: {title}\ncreated: {stamp_text(ms)}\n\n{body}\n"
        rel = f"{AD_HOC_NOTES}/{stamp_text(ms)}-{sanitize_slug(title)[:40]}-{len(notes)}.md"
        write(rel, text)
        notes.append(rel)
        note_bytes += len(text)

    # Stage-1 outputs: their renders (summaries + raw_memories.md) fill the rest of the folder.
    selected: list[Output] = []
    rest = target - written
    used = 0
    i = 0
    while used < rest:
        out = make_output(v, i, rng)
        if i in (5, 11):
            out = replace(
                out,
                rollout_summary=_plant(
                    out.rollout_summary, rng, RARE_WORD if i == 5 else RARE_PHRASE
                ),
            )
        if i == 17:
            out = replace(
                out, raw_memory=out.raw_memory + f"\n- Calibrate the {RARE_PHRASE} before release."
            )
        selected.append(out)
        used += len(render_rollout_summary(out)) + len(out.raw_memory) + 200
        i += 1
    extra = [make_output(v, i + j, rng) for j in range(len(selected) // 4)]
    stems = assign_stems(selected)
    for out in selected:
        write(f"{SUMMARIES_DIR}/{stems[out.session_id]}.md", render_rollout_summary(out))
    write(RAW_MEMORIES_FILE, render_raw_memories(selected, stems))
    gen_s = time.perf_counter() - t_start

    t = time.perf_counter()
    clock = ManualClock(T0)
    store = Store(data / "memory.db", clock=clock)
    try:
        for out in selected + extra:
            clock.set(out.generated_at)
            claim = store.stage1.claim_stage1(
                out.session_id, out.source_updated_at, max_running=10**9, worker_id="bench"
            )
            assert claim.claimed and claim.token
            assert store.stage1.mark_stage1_succeeded(
                out.session_id, claim.token, raw_memory=out.raw_memory, rollout_summary=out.rollout_summary,
                rollout_slug=out.rollout_slug, cwd=out.cwd, title=out.title,
            )  # fmt: skip
    finally:
        store.close()
    store_s = time.perf_counter() - t
    total, files = folder_bytes(root)
    text_bytes = sum(
        len(o.raw_memory.encode()) + len(o.rollout_summary.encode()) for o in selected + extra
    )
    return Corpus(
        root, data, total, files, len(selected), len(extra), text_bytes, gen_s, store_s, k, notes
    )


# =============================================================================================
# Queries


@dataclass(frozen=True)
class Query:
    kind: str
    queries: tuple[str, ...]
    case_sensitive: bool = True

    def grep_argv(self) -> list[str]:
        flags = "-rnF" if self.case_sensitive else "-rniF"
        argv = ["grep", flags]
        for q in self.queries:
            argv += ["-e", q]
        return [*argv, "."]

    @property
    def label(self) -> str:
        shown = " | ".join(self.queries)
        return f"{self.kind}: {shown}" + ("" if self.case_sensitive else " (-i)")


QUERIES = [
    Query("rare word", (RARE_WORD,)),
    Query("rare phrase", (RARE_PHRASE,)),
    Query("common word", ("error",)),
    Query("stopword", ("the",)),
    Query("phrase", ("connection refused",)),
    Query("prefix only", ("migrat",)),
    Query("path", ("src/api/routes.py",)),
    Query("two queries", ("redis", "kafka")),
    Query("ignore case", ("postgres",), case_sensitive=False),
    Query("absent", (ABSENT,)),
]


# =============================================================================================
# Measuring


@dataclass
class Row:
    q: Query
    plain: list[float] = field(default_factory=list)
    ranked: list[float] = field(default_factory=list)
    grep: list[float] = field(default_factory=list)
    plain_total: int = 0
    ranked_total: str = "0"  # "4000+" when the count stopped at the scored window
    ranked_stage: str | None = None
    grep_lines: int = 0


@dataclass
class IndexFigures:
    open_s: float = 0.0
    build_s: float = 0.0  # open + the first ranked query (a full refresh) on an empty index
    build: dict[str, float] = field(default_factory=dict)
    index_bytes: int = 0
    noop: list[float] = field(default_factory=list)
    touch: list[float] = field(default_factory=list)  # next ranked query after `touch` of one note
    touch_refresh: list[float] = field(default_factory=list)
    edit_s: float = 0.0  # next ranked query after appending a line to MEMORY.md
    edit: dict[str, float] = field(default_factory=dict)
    delete_s: float = 0.0  # next ranked query after deleting one note
    delete: dict[str, float] = field(default_factory=dict)


@dataclass
class SizeResult:
    corpus: Corpus
    rows: list[Row]
    index: IndexFigures
    grep_floor: list[float]
    warnings: list[str]


def run_grep(q: Query, root: Path) -> tuple[float, int]:
    """Wall time of ``grep`` writing into a pipe (not /dev/null: GNU grep stops at the first hit there)."""
    t = time.perf_counter()
    p = subprocess.run(q.grep_argv(), cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=GREP_ENV,
                       check=False)  # fmt: skip
    dt = time.perf_counter() - t
    if p.returncode > 1:
        raise RuntimeError(f"{q.grep_argv()} exited {p.returncode}")
    return dt, p.stdout.count(b"\n")


def timed(fn: Callable[[], SearchResult]) -> tuple[float, SearchResult]:
    t = time.perf_counter()
    res = fn()
    return time.perf_counter() - t, res


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def measure_query(q: Query, root: Path, idx: SearchIndex, runs: int) -> Row:
    """``runs`` rounds of plain, ranked and grep, the order rotating each round so drift hits all three."""
    row = Row(q)
    qs = list(q.queries)

    def plain() -> None:
        dt, res = timed(
            lambda: memory_search(root, SearchQuery(qs, case_sensitive=q.case_sensitive))
        )
        row.plain.append(dt)
        row.plain_total = res.total

    def ranked() -> None:
        dt, res = timed(lambda: memory_search(root, SearchQuery(qs, ranked=True), index=idx))
        row.ranked.append(dt)
        row.ranked_total = f"{res.total}{'+' if res.total_capped else ''}"
        row.ranked_stage = res.strategy

    def grep() -> None:
        dt, n = run_grep(q, root)
        row.grep.append(dt)
        row.grep_lines = n

    steps = [plain, ranked, grep]
    for r in range(runs):
        for step in steps[r % 3 :] + steps[: r % 3]:
            step()
    return row


def measure_index_changes(
    c: Corpus, idx: SearchIndex, fig: IndexFigures, warnings: list[str]
) -> None:
    """What the first ranked query after a change pays: refresh of that file (+ FTS optimize) + query."""
    root = c.root

    def next_query() -> tuple[float, dict[str, float]]:
        dt, res = timed(lambda: memory_search(root, SearchQuery("deploy", ranked=True), index=idx))
        return dt, dict(res.refresh or {})

    for k in range(TOUCHES):
        bump_mtime(root / c.note_paths[(k * 7919) % len(c.note_paths)])  # same bytes, new mtime
        bump_change_mark(root)  # an in-place write is announced, as memoryd's writers do
        dt, st = next_query()
        if st.get("files_indexed") != 1:
            warnings.append(
                f"touch: the refresh indexed {st.get('files_indexed')} files, expected 1"
            )
        fig.touch.append(dt)
        fig.touch_refresh.append(st.get("elapsed_ms", 0) / 1e3)
    with (root / MEMORY_FILE).open("a") as fh:
        fh.write("\n- Appended by the benchmark: the staging deploy needs a feature flag.\n")
    bump_change_mark(root)
    fig.edit_s, fig.edit = next_query()
    (root / c.note_paths[1]).unlink()
    fig.delete_s, fig.delete = next_query()
    if fig.delete.get("files_removed") != 1:
        warnings.append(
            f"delete: the refresh removed {fig.delete.get('files_removed')} files, expected 1"
        )


def run_size(target_mb: float, runs: int, seed: int, keep: bool) -> SizeResult:
    base = Path(tempfile.mkdtemp(prefix=f"memoryd-bench-search-{target_mb:g}mb-"))
    try:
        return _run_size(base, target_mb, runs, seed)
    finally:
        if keep:
            print(f"(kept {base})")
        else:
            shutil.rmtree(base, ignore_errors=True)


def _run_size(base: Path, target_mb: float, runs: int, seed: int) -> SizeResult:
    print(f"\n== {target_mb:g} MB memory folder ==")
    c = generate(base, target_mb, seed)
    root = c.root
    print(
        f"generated {c.bytes / MB:.1f} MB in {c.files} files ({c.outputs_selected} rollout summaries, "
        f"{len(c.note_paths)} notes, {c.skills} skills) in {c.gen_seconds:.1f} s; store: {c.outputs_selected} "
        f"outputs + {c.outputs_extra} unselected ({c.store_text_bytes / MB:.1f} MB of text) in {c.store_seconds:.1f} s"
    )
    warnings: list[str] = []
    run_grep(Query("warm", (ABSENT,)), root)  # every file into the page cache, for everyone
    empty = base / "empty"
    empty.mkdir()
    grep_floor = [run_grep(Query("floor", (ABSENT,)), empty)[0] for _ in range(10)]

    fig = IndexFigures()
    store = Store(c.data_dir / "memory.db", clock=ManualClock(T0))
    idx = None
    try:
        gc.collect()
        t = time.perf_counter()
        idx = SearchIndex(default_index_path(c.data_dir), root, store)
        fig.open_s = time.perf_counter() - t
        dt, first = timed(
            lambda: memory_search(root, SearchQuery("deploy", ranked=True), index=idx)
        )
        fig.build_s, fig.build = fig.open_s + dt, dict(first.refresh or {})
        db = default_index_path(c.data_dir)
        wal = db.with_name(db.name + "-wal")
        b = fig.build
        print(
            f"ranked index, first build: {fmt_ms(fig.build_s)} (open {fmt_ms(fig.open_s)}, refresh "
            f"{fmt_ms(b['elapsed_ms'] / 1e3)}: {b['files_indexed']} files + {b['outputs_indexed']} outputs -> "
            f"{b['chunks_added']} chunks; search.db {db.stat().st_size / MB:.0f} MB + WAL "
            f"{(wal.stat().st_size if wal.exists() else 0) / MB:.0f} MB)"
        )
        fig.noop = [idx.refresh().elapsed_ms / 1e3 for _ in range(runs)]
        print(f"no-op refresh (every ranked query pays it): p50 {fmt_ms(pct(fig.noop, 50))}, "
              f"p95 {fmt_ms(pct(fig.noop, 95))}")  # fmt: skip
        # One discarded round of each mode so that no query pays the others' first-use costs.
        memory_search(root, SearchQuery("warm", case_sensitive=False))
        memory_search(root, SearchQuery("warm up", ranked=True), index=idx)
        run_grep(Query("warm", ("warm",), case_sensitive=False), root)

        rows = []
        for q in QUERIES:
            row = measure_query(q, root, idx, runs)
            if row.plain_total != row.grep_lines:
                warnings.append(
                    f"{q.label}: plain counted {row.plain_total} lines, grep printed {row.grep_lines}"
                )
            rows.append(row)
            print(
                f"  {q.label:<36} plain {fmt_ms(pct(row.plain, 50)):>8}  ranked {fmt_ms(pct(row.ranked, 50)):>8}  "
                f"grep {fmt_ms(pct(row.grep, 50)):>8}  ({row.plain_total} lines, {row.ranked_total} chunks "
                f"{row.ranked_stage})"
            )

        measure_index_changes(c, idx, fig, warnings)
        print(
            f"touch one note -> next ranked query: p50 {fmt_ms(pct(fig.touch, 50))}, max {fmt_ms(max(fig.touch))} "
            f"over {TOUCHES} (its refresh incl. FTS optimize: p50 {fmt_ms(pct(fig.touch_refresh, 50))})"
        )
        e, d = fig.edit, fig.delete
        print(f"append to MEMORY.md -> next ranked query: {fmt_ms(fig.edit_s)} (refresh {fmt_ms(e['elapsed_ms'] / 1e3)},"
              f" {e['chunks_removed']} chunks out, {e['chunks_added']} in)")  # fmt: skip
        print(
            f"delete one note -> next ranked query: {fmt_ms(fig.delete_s)} (refresh {fmt_ms(d['elapsed_ms'] / 1e3)})"
        )
    finally:
        if idx is not None:
            idx.close()
        store.close()
    fig.index_bytes = default_index_path(c.data_dir).stat().st_size  # checkpointed on close
    return SizeResult(c, rows, fig, grep_floor, warnings)


# =============================================================================================
# Report


def pair(xs: list[float]) -> str:
    return f"{fmt_ms(pct(xs, 50))} / {fmt_ms(pct(xs, 95))}"


def ratio(a: list[float], b: list[float]) -> str:
    return f"{pct(a, 50) / pct(b, 50):.1f}x"


def summary(results: list[SizeResult], runs: int) -> None:
    print(
        f"\n== Summary: p50 / p95 of {runs} runs each; ratios = p50 / grep p50 on the same folder in this run =="
    )
    for r in results:
        c, f = r.corpus, r.index
        print(f"\n{c.bytes / MB:.1f} MB folder, {c.files} files; store {c.outputs_selected} + {c.outputs_extra} outputs; "
              f"grep = `grep -rnF` (-rniF for -i) into a pipe, its spawn floor {fmt_ms(pct(r.grep_floor, 50))}")  # fmt: skip
        rows = [
            (row.q.label, pair(row.plain), pair(row.ranked), pair(row.grep), ratio(row.plain, row.grep),
             ratio(row.ranked, row.grep), f"{row.plain_total}/{row.ranked_total}")
            for row in r.rows
        ]  # fmt: skip
        rows += [
            ("ranked: first build (1st query)", "", fmt_ms(f.build_s), "", "", "", f"{f.build['chunks_added']:.0f} ch"),
            ("ranked: no-op refresh alone", "", pair(f.noop), "", "", "", ""),
            ("ranked: query after touching 1 note", "", pair(f.touch), "", "", "", ""),
            ("ranked: query after editing MEMORY.md", "", fmt_ms(f.edit_s), "", "", "", ""),
            ("ranked: query after deleting 1 note", "", fmt_ms(f.delete_s), "", "", "", ""),
        ]  # fmt: skip
        table(rows, ("query", "plain p50/p95", "ranked p50/p95", "grep p50/p95", "plain/grep", "ranked/grep",
                     "lines/chunks"), right_align=True)  # fmt: skip
        faster = sum(pct(row.ranked, 50) < pct(row.plain, 50) for row in r.rows)
        print(f" ranked p50 below plain p50 on {faster} of {len(r.rows)} queries; search.db after close "
              f"{f.index_bytes / MB:.0f} MB")  # fmt: skip
    for w in (w for r in results for w in r.warnings):
        print(f"WARNING: {w}")


def machine() -> str:
    grep = subprocess.run(
        ["grep", "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n")[0]
    import sqlite3

    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"SQLite {sqlite3.sqlite_version}, {grep}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", default="5,50", help="folder sizes in MB, comma-separated (default 5,50)"
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=20,
        help="timed runs per query and mode (default 20; 8 halves the time)",
    )
    ap.add_argument("--seed", type=int, default=7, help="seed of the generated folder")
    ap.add_argument(
        "--keep", action="store_true", help="keep the temp folders (their paths are printed)"
    )
    args = ap.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",") if s.strip()]
    runs = max(1, args.runs)
    t0 = time.perf_counter()
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"memoryd search bench, {time.strftime('%Y-%m-%d %H:%M')}, {machine()}; load average {load}"
    )
    results = [run_size(mb, runs, args.seed, args.keep) for mb in sizes]
    summary(results, runs)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\ntotal {time.perf_counter() - t0:.0f} s; load average now {load} (1/5/15 min; this bench adds ~1)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
