"""Bytes and tokens per model request: the scoped block against a global-only block.

The same memory is laid out twice: once as memoryd keeps it (a short global summary plus one
summary per project) and once as a single global summary holding everything (how it was before
scopes). For 1, 3, 10 projects it prints what one request in a project carries with each layout,
and the ratio. Run: ``.venv/bin/python bench/scopes.py``.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from bench._common import PROJECTS, TASKS, WORDS, machine, table
from memoryd import tokenizer as tokens
from memoryd.paths import Paths
from memoryd.read.block import render_block
from memoryd.scopes import scope_key

FACTS_PER_PROJECT = 25
COMMON = "\n".join(
    [
        "## User profile",
        "- prefers short answers and small diffs",
        "- edits in vim; runs tests before every commit",
        "## General tips",
        "- pin tool versions in lock files",
    ]
)


def project_summary(rng: random.Random, name: str) -> str:
    lines = [f"## {name}"]
    for _ in range(FACTS_PER_PROJECT):
        words = " ".join(rng.choice(WORDS) for _ in range(10))
        lines.append(f"- {rng.choice(TASKS)}: {words}")
    return "\n".join(lines)


def paths_in(folder: Path) -> Paths:
    return Paths(config_file=folder / "c.toml", data_dir=folder / "d", state_dir=folder / "s")


def main() -> None:
    print(f"scoped vs global-only block per request ({machine()})\n")
    rows = []
    for n in (1, 3, 10):
        rng = random.Random(n)
        names = PROJECTS[:n]
        summaries = {name: project_summary(rng, name) for name in names}
        with tempfile.TemporaryDirectory() as tmp:
            scoped, flat = paths_in(Path(tmp) / "scoped"), paths_in(Path(tmp) / "flat")
            for p in (scoped, flat):
                p.memories.mkdir(parents=True)
            (scoped.memories / "memory_summary.md").write_text(f"v1\n{COMMON}\n")
            keys = []
            for name, text in summaries.items():
                key = scope_key(f"/home/dev/src/{name}")
                keys.append(key)
                folder = scoped.memories / "projects" / key
                folder.mkdir(parents=True)
                (folder / "project.md").write_text(f"# Project {key}\n")
                (folder / "memory_summary.md").write_text(f"v1\n{text}\n")
            everything = "\n".join([COMMON, *summaries.values()])
            (flat.memories / "memory_summary.md").write_text(f"v1\n{everything}\n")
            flat_block = (render_block(flat) or "").replace(
                str(flat.memories), str(scoped.memories)
            )
            blocks = [render_block(scoped, k) or "" for k in keys]
            s_bytes = sum(len(b.encode()) for b in blocks) / len(blocks)
            s_tokens = sum(tokens.count(b) for b in blocks) / len(blocks)
            f_bytes, f_tokens = len(flat_block.encode()), tokens.count(flat_block)
            rows.append(
                (
                    str(n),
                    f"{s_bytes:,.0f}",
                    f"{f_bytes:,}",
                    f"{s_bytes / f_bytes:.2f}",
                    f"{s_tokens:,.0f}",
                    f"{f_tokens:,}",
                )
            )
    table(
        rows,
        ("projects", "scoped B", "global-only B", "ratio", "scoped tok", "global-only tok"),
        right_align=True,
    )
    print(
        "\nglobal-only = one summary holding every project's facts (cut to the same 2,500-token "
        "block); scoped = the global layer plus the session's own project."
    )


if __name__ == "__main__":
    main()
