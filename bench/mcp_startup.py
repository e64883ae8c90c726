"""How fast ``memoryd mcp`` answers a client's ``initialize`` (and then ``tools/list``).

Codex waits about a second for an MCP server at start (``reference/real-clients.md``). Two ways
to start the same server are timed in one run, alternating so machine load hits both alike:

* **sdk**: the SDK's own stdio server answers the handshake (``memoryd.cli.mcp_server.serve``, what
  ``memoryd mcp`` ran before the early answer), so ``initialize`` waits for the SDK import;
* **early**: ``python -m memoryd mcp`` as shipped: :mod:`memoryd.mcp_handshake` answers
  ``initialize`` from the standard library, and ``tools/list`` from the list the SDK server gave
  on the previous start, while the SDK imports in a thread.

Each run spawns a fresh interpreter on one temp ``MEMORYD_HOME`` per way (so, as for a user,
only the first start finds no tool-list cache), writes ``initialize`` at once (as clients do),
then ``notifications/initialized`` and ``tools/list`` as soon as ``initialize`` is answered, and
times spawn → each response. Printed: median and p95 of each, and the sdk/early ratios.

    .venv/bin/python bench/mcp_startup.py [--runs 15]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK_ONLY = (
    "from memoryd.store.home import App\nfrom memoryd.cli.mcp_server import serve\nserve(App())\n"
)
COMMANDS = {
    "sdk": [sys.executable, "-c", SDK_ONLY],
    "early": [sys.executable, "-m", "memoryd", "mcp"],
}


def _msg(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


INIT = _msg(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
)
INITIALIZED = _msg({"jsonrpc": "2.0", "method": "notifications/initialized"})
LIST = _msg({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})


def one(command: list[str], home: Path) -> tuple[float, float]:
    env = {**os.environ, "MEMORYD_HOME": str(home)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(INIT)
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        t_init = time.perf_counter() - t0
        assert first.get("id") == 0 and "result" in first, first
        proc.stdin.write(INITIALIZED + LIST)
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("server closed before tools/list")
            msg = json.loads(line)
            if msg.get("id") == 1:
                break
        t_list = time.perf_counter() - t0
        assert len(msg["result"]["tools"]) == 5, msg
        return t_init, t_list
    finally:
        proc.kill()
        proc.wait()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="memoryd-mcp-bench-") as tmp:
        for name in COMMANDS:
            (Path(tmp) / name).mkdir()
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                # one home per way, as a user has: the first start fills the tool-list cache
                results[name].append(one(command, Path(tmp) / name))
    print(f"{args.runs} runs each, spawn -> response, seconds")
    print(f"{'':6} {'init median':>12} {'init p95':>9} {'list median':>12} {'list p95':>9}")
    med: dict[str, float] = {}
    for name, rows in results.items():
        inits = [r[0] for r in rows]
        lists = [r[1] for r in rows]
        med[name] = statistics.median(inits)
        print(
            f"{name:6} {med[name]:12.3f} {p95(inits):9.3f} "
            f"{statistics.median(lists):12.3f} {p95(lists):9.3f}"
        )
    print(f"initialize median, sdk / early: {med['sdk'] / med['early']:.1f}x")
    list_med = {k: statistics.median(r[1] for r in rows) for k, rows in results.items()}
    print(f"tools/list median, sdk / early: {list_med['sdk'] / list_med['early']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
