"""Shared pieces of the benchmarks: the vocabulary for generated memory and time formatting."""

from __future__ import annotations

import os
import platform
import random
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

WORDS = """the a to of and in for with on that this it is was we should use run test build config file
function module import error fails passes fix refactor cache database query index schema migration api
endpoint request response handler client server async await timeout retry logger level debug trace
release version package dependency lockfile install script command flag option default value type check
lint format commit branch merge rebase diff patch review deploy staging production container image
volume network port host token session user auth permission role admin dashboard metric alert queue
worker job scheduler cron batch stream buffer parser serializer json yaml toml env variable path folder
directory repository monorepo workspace service component hook state store reducer selector router page
template render style layout css theme color font icon button form input validation field model""".split()  # noqa: SIM905
PROJECTS = ["billing-api", "web-console", "ingest-pipeline", "mobile-app", "infra", "docs-site",
            "search-svc", "auth-gateway", "ml-training", "cli-tools", "data-warehouse", "chat-bot"]  # fmt: skip
FILES = ["src/app.py", "src/db/models.py", "src/api/routes.py", "tests/test_api.py", "package.json",
         "src/components/Table.tsx", "src/hooks/useSession.ts", "Makefile", "docker-compose.yml",
         "pyproject.toml", "src/worker/queue.go", "README.md", "src/lib/cache.rs", ".github/workflows/ci.yml"]  # fmt: skip
TASKS = ["fix the flaky test", "add pagination", "migrate to the new schema", "speed up the build",
         "upgrade dependencies", "debug the timeout", "refactor the handler", "add retry logic",
         "wire up the dashboard", "set up CI caching", "write the migration", "review the PR"]  # fmt: skip


def fmt_s(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def table(
    rows: Sequence[Sequence[str]], header: Sequence[str], *, right_align: bool = False
) -> None:
    """A plain-text table: first column left-aligned, the others too unless ``right_align``."""
    w = [max(len(r[i]) for r in [*rows, header]) for i in range(len(header))]
    print(" " + " | ".join(h.ljust(w[i]) for i, h in enumerate(header)).rstrip())
    print("-" + "-+-".join("-" * x for x in w) + "-")
    for r in rows:
        cells = (
            c.ljust(w[i]) if i == 0 or not right_align else c.rjust(w[i]) for i, c in enumerate(r)
        )
        print(" " + " | ".join(cells).rstrip())


def paragraph(rng: random.Random, chars: int, sentence: Callable[[random.Random], str]) -> str:
    """Sentences from ``sentence`` until about ``chars`` characters."""
    out: list[str] = []
    n = 0
    while n < chars:
        s = sentence(rng)
        out.append(s)
        n += len(s) + 1
    return " ".join(out)


def checkout(rev: str, root: Path) -> Path:
    """``.`` is the working tree; any other revision a detached worktree under ``root``
    (``rev-<rev>``), for the benches that set versions side by side."""
    repo = Path(__file__).resolve().parents[1]
    if rev == ".":
        return repo
    where = root / f"rev-{rev.replace('/', '_')}"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", "-q", str(where), rev],
                   check=True)  # fmt: skip
    return where
