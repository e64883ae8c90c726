"""What one model call costs through the Claude Code runner (``claude -p``), against a scripted
model on 127.0.0.1, so what is timed is the client and memoryd around it, not a model.

Per kind of call: wall time (median and max of ``--runs``), and the bytes of the first request
the client sent. **extract** is a structured answer for a transcript of ``--kb`` KiB (stdin, no
tools); **consolidate** is an agent run that reads the diff and writes two files through
memoryd's file tools (``memoryd runner-files`` started by the client over MCP). The ratio
consolidate/extract is the price of the MCP server start and the extra turns.

    .venv/bin/python bench/runner_claude.py [--runs 5] [--kb 64]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd import prompts
from memoryd.folder.layout import DIFF_FILE
from memoryd.runner.base import AgentRun
from memoryd.runner.claude_cli import ClaudeCodeRunner
from tests.e2e.client_consolidator import ClientConsolidator, fact_extraction, responder
from tests.e2e.client_models import ClientModels
from tests.e2e.clients import ClientSandbox, client_binary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kb", type=int, default=64)
    args = ap.parse_args()
    exe = str(client_binary("claude"))
    root = Path(tempfile.mkdtemp(prefix="bench-runner-"))
    memories = root / "memories"
    memories.mkdir()
    (memories / DIFF_FILE).write_text("A raw_memories.md\n")
    (memories / "raw_memories.md").write_text("# Raw memories\n- FACT-B: builds use tabs\n")
    transcript = ("[user] FACT-B: builds use tabs\n" + "x" * 1000 + "\n") * args.kb
    times: dict[str, list[float]] = {"extract": [], "consolidate": []}
    first_bytes: dict[str, int] = {}
    with ClientModels(responder(ClientConsolidator(), fact_extraction("FACT-B"))) as models:
        box = ClientSandbox(root / "world", models)
        os.environ.update(box.env)
        runner = ClaudeCodeRunner(exe, workdir=root / "wd", memories=memories)
        for _ in range(args.runs):
            for kind in times:
                models.clear()
                start = time.perf_counter()
                if kind == "extract":
                    asyncio.run(
                        runner.answer(
                            key="bench",
                            system=prompts.render("stage_one_system.md"),
                            text=transcript,
                            schema=prompts.EXTRACTION_SCHEMA,
                            model=None,
                            timeout=300,
                        )
                    )
                else:
                    runs: list[AgentRun] = []
                    asyncio.run(
                        runner.consolidate(
                            text="consolidate", model=None, timeout=300, record=runs.append
                        )
                    )
                times[kind].append(time.perf_counter() - start)
                first_bytes[kind] = len(models.requests[0].raw)
    load = os.getloadavg()[0]
    print(f"claude -p through memoryd's runner, {args.runs} runs each, load average {load:.1f}")
    for kind, ts in times.items():
        print(
            f"  {kind:<12} median {statistics.median(ts):6.2f} s  max {max(ts):6.2f} s  "
            f"first request {first_bytes[kind]:,} B"
        )
    ratio = statistics.median(times["consolidate"]) / statistics.median(times["extract"])
    print(f"  consolidate / extract: {ratio:.2f}x")


if __name__ == "__main__":
    main()
