"""What memoryd adds to the real opencode: bytes per user request, processes and RSS per instance.

A 20-session workload (``bench.phase1.real_scenarios``: decisions, preferences, file writes,
failing runs) is replayed through the real ``opencode serve`` and the scripted mock model three
times, each in a fresh sandbox whose paths have the same length, so requests are byte-comparable:

* ``bare``: opencode alone (the baseline);
* ``v0.1``: what memoryd installed before issue 16, rebuilt from today's templates: both helper
  agents in the global config, ``memoryd mcp`` registered in ``opencode.json``, and the same shim
  without tools;
* ``lean``: ``memoryd install opencode`` as it is now (the shim with three tools, helper agents
  defined only in memoryd's own folders).

Per variant: every model request of the user's sessions is weighed (JSON body bytes); requests
are paired with the bare run's by position, so "added" is exact per request. Then one pass
(``memoryd run --once``: 20 extractions and a scripted consolidation) runs against the same
server, and every process below opencode is counted with its RSS, before and after the pass.
Finally a new user turn shows the bytes with memory (the block) and, for ``lean``, one
``memory_search`` call is timed end to end.

Last, ``memoryd -vv run --once`` with no server configured (memoryd starts and stops its own)
on two fresh homes: a truly empty one (no sessions, no notes: no model call allowed) and one
holding one note (a consolidation runs), for v0.1 and lean, split into steps from the log.

    .venv/bin/python bench/host.py [--sessions 20] [--keep] [--empty-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._common import machine, table
from bench.phase1 import real_scenarios
from memoryd import prompts
from memoryd.host.client_config import snippet
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM, RecordedRequest, ToolCall, last_user_text
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode
from tests.e2e.test_phase1_e2e import memoryd

VARIANTS = ("bare00", "v01000", "lean00")  # equal lengths: sandbox paths appear in every request
# the first line of templates/read_path.md: how the injected block is told from opencode's prompt
BLOCK_HEADING = "## Memory from earlier sessions"
LABEL = {"bare00": "bare opencode", "v01000": "memoryd v0.1", "lean00": "memoryd lean"}


@dataclass
class Proc:
    pid: int
    rss_kb: int
    cmd: str


@dataclass
class Variant:
    name: str
    bodies: list[int] = field(default_factory=list)  # bytes per user request, in order
    tools: list[int] = field(default_factory=list)  # bytes of the tools array per request
    procs_before: list[Proc] = field(default_factory=list)
    procs_after: list[Proc] = field(default_factory=list)
    opencode_rss_kb: int = 0
    pass_s: float = 0.0
    with_memory: int = 0  # bytes of a first-turn request once memory exists
    block_text: str = ""  # the block as the shim injected it into that request
    block: int = 0
    tool_call_s: float = 0.0
    tool_result: str = ""


def descendants(pid: int) -> list[Proc]:
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(p.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        c = todo.pop()
        try:
            rss = int(Path(f"/proc/{c}/status").read_text().split("VmRSS:")[1].split()[0])
            cmd = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
        except (OSError, IndexError):
            continue
        out.append(Proc(c, rss, cmd))
        todo += children.get(c, [])
    return out


def rss_kb(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("VmRSS:")[1].split()[0])


def install_v01(box: OpencodeSandbox, env: dict[str, str]) -> None:
    """memoryd 0.1's footprint: global agent files, the MCP server entry, a shim without tools."""
    agent_dir = box.config_dir / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    for name in ("memoryd-extract", "memoryd-consolidate"):
        (agent_dir / f"{name}.md").write_text(prompts.render(f"agents/{name}.md"))
    assert memoryd(env, "install", "opencode").returncode == 0
    shim = box.config_dir / "plugin" / "memoryd.js"
    text = shim.read_text()
    start = text.index("const TOOLS = ") + len("const TOOLS = ")
    end = text.index("; //", start)
    shim.write_text(text[:start] + "{}" + text[end:])
    box.config["mcp"] = json.loads(snippet("opencode", environ=env))["mcp"]
    box.write_config()


def user_requests(mock: MockLLM, sids: set[str]) -> list[RecordedRequest]:
    return [r for r in mock.requests if r.session_id in sids]


def first_turn(d: Any, box: OpencodeSandbox, mock: MockLLM) -> tuple[int, str, str]:
    """Bytes of the first request of a new session after the workload (the project folder now
    holds what the workload wrote, which opencode's own prompt reflects): each variant's, and
    bare opencode's as the baseline."""
    mock.clear()
    sid = d.create_session("a new day", directory=box.project_dir)["id"]
    d.say(sid, "What should I know before I start?", directory=box.project_dir)
    body = user_requests(mock, {sid})[0].body
    injected = [
        m["content"]
        for m in body.get("messages") or []
        if m.get("role") == "system" and str(m.get("content", "")).startswith(BLOCK_HEADING)
    ]
    return len(json.dumps(body)), sid, injected[0] if injected else ""


def run_variant(name: str, base: Path, bin_: Path, mock: MockLLM, n: int) -> Variant:
    v = Variant(name)
    box = OpencodeSandbox(base / name, bin_, mock.base_url)
    try:
        env = box.env
        env.update(MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0", MEMORYD_MAX_ROLLOUTS_PER_STARTUP="32")
        if name == "v01000":
            install_v01(box, env)
        elif name == "lean00":
            out = memoryd(env, "install", "opencode")
            assert out.returncode == 0, out.stderr
        box.restart()
        d = box.driver
        mock.set_responder(None)
        mock.clear()
        sids: set[str] = set()
        for i in range(n):
            title, turns = real_scenarios(i)
            sid = d.create_session(title, directory=box.project_dir)["id"]
            sids.add(sid)
            for turn in turns:
                d.say(sid, turn, directory=box.project_dir, timeout=120)
        for r in user_requests(mock, sids):
            v.bodies.append(len(json.dumps(r.body)))
            v.tools.append(len(json.dumps(r.body.get("tools") or [])))
        v.procs_before = descendants(box.pid)
        if name == "bare00":
            v.opencode_rss_kb = rss_kb(box.pid)
            v.with_memory, _, _ = first_turn(d, box, mock)  # the same request, no memoryd at all
            return v
        cons = ScriptedConsolidator()
        install(mock, cons)
        t = time.monotonic()
        out = memoryd(env, "run", "--once", timeout=600)
        v.pass_s = time.monotonic() - t
        assert out.returncode == 0, out.stdout + out.stderr
        time.sleep(1.0)
        v.procs_after = descendants(box.pid)
        v.opencode_rss_kb = rss_kb(box.pid)
        # the block the shim injects for this project: instructions, global and project layers
        v.with_memory, sid, v.block_text = first_turn(d, box, mock)
        v.block = len(v.block_text.encode())
        if name == "lean00":
            default = mock.default_responder

            def search(req: dict[str, Any]) -> Any:
                msgs = req.get("messages") or []
                if msgs and msgs[-1].get("role") == "user" and "search teal" in last_user_text(req):
                    return ToolCall("memory_search", {"query": "teal"})
                return default(req)

            mock.set_responder(search)
            d.say(sid, "search teal", directory=box.project_dir)
            for m in d.messages(sid, directory=box.project_dir):
                for p in m["parts"]:
                    if p.get("type") == "tool" and p.get("tool") == "memory_search":
                        st = p["state"]
                        v.tool_call_s = (st["time"]["end"] - st["time"]["start"]) / 1000
                        v.tool_result = str(st.get("output") or st.get("error"))[:120]
        return v
    finally:
        box.stop()


STEPS = (
    ("spawn", "started opencode serve"),
    ("listening", "listening on"),
    ("connected", "using opencode"),
    ("first write", "memory folder:"),
    ("diffed", "baseline diff:"),
    ("consolidated", "reset to"),
    ("stopped", "stopped opencode serve"),
)
EMPTY_CASES = ("empty", "one note")  # a truly empty home; one note (so a consolidation runs)


def empty_home_pass(
    name: str, base: Path, bin_: Path, mock: MockLLM, case: str
) -> dict[str, float]:
    """``memoryd -vv run --once`` on a fresh home (empty, or holding one note), with memoryd's own
    private server; seconds from launching memoryd to each step, from its log."""
    import os
    import subprocess
    from datetime import datetime

    box = OpencodeSandbox(base / f"{case[:3]}-{name}", bin_, mock.base_url, start=False)
    env = box.base_env  # no MEMORYD_HOST_URL: memoryd starts (and stops) its own opencode
    if name == "v01000":
        install_v01(box, env)
    else:
        assert memoryd(env, "install", "opencode").returncode == 0
    if case == "one note":
        note = "We deploy with make deploy-staging first, then production."
        assert memoryd(env, "note", "add", note).returncode == 0
    install(mock, ScriptedConsolidator())
    requests_before = len(mock.requests)
    load = os.getloadavg()[0]
    launched, t = time.time(), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "memoryd", "-vv", "run", "--once"], env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    wall = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr[-2000:]
    at: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        try:
            ts = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        for step, needle in STEPS:
            if needle in line and (step not in at or step == "consolidated"):
                at[step] = ts  # the last reset is the consolidation's (the first is ensure()'s)
    out = {step: round(at[step] - launched, 2) for step, _ in STEPS if step in at}
    out["wall"] = round(wall, 2)
    out["model calls"] = len(mock.requests) - requests_before
    out["load"] = round(load, 1)
    if case == "empty":  # nothing changed: no model call, ever (a project rule)
        assert out["model calls"] == 0, out
    if not out["model calls"]:
        out.pop("consolidated", None)  # its only "reset to" is the baseline's creation
    return out


def kb(n: float) -> str:
    return f"{n / 1024:.2f} KB"


def report(vs: dict[str, Variant]) -> None:
    bare = vs["bare00"]
    rows: list[tuple[str, ...]] = []
    for name in VARIANTS:
        v = vs[name]
        if len(v.bodies) != len(bare.bodies):
            print(f"WARNING: {name} sent {len(v.bodies)} user requests, bare {len(bare.bodies)}")
        added = [a - b for a, b in zip(v.bodies, bare.bodies, strict=False)]
        rows.append(
            (
                LABEL[name],
                str(len(v.bodies)),
                kb(statistics.mean(v.bodies)),
                kb(statistics.median(added)) if added else "-",
                kb(max(added)) if added else "-",
                f"{statistics.mean(v.bodies) / statistics.mean(bare.bodies):.3f}x",
            )
        )
    print("\n== Bytes per user request, no memory yet (20-session workload) ==")
    table(
        rows,
        ("variant", "requests", "mean bytes", "added (median)", "added (max)", "vs bare"),
    )

    print("\n== Processes below opencode (the user's instance + memoryd's helper instances) ==")
    rows = []
    for name in VARIANTS:
        v = vs[name]
        for label, procs in (
            ("after the workload", v.procs_before),
            ("after a pass", v.procs_after),
        ):
            if name == "bare00" and label == "after a pass":
                continue
            mem = [p for p in procs if "memoryd" in p.cmd]
            rows.append(
                (
                    f"{LABEL[name]}, {label}",
                    str(len(procs)),
                    str(len(mem)),
                    f"{sum(p.rss_kb for p in mem) / 1024:.1f} MB",
                    f"{sum(p.rss_kb for p in procs) / 1024:.1f} MB",
                )
            )
    table(rows, ("when", "processes", "memoryd processes", "memoryd RSS", "all RSS"))

    print("\n== With memory, a pass, a tool call ==")
    rows = []
    for name in VARIANTS[1:]:
        v = vs[name]
        # the block travels JSON-escaped inside the request: count it as it travels
        block = len(json.dumps(v.block_text)[1:-1].encode()) if v.block_text else 0
        rows.append(
            (
                LABEL[name],
                f"{v.pass_s:.2f} s",
                kb(v.block),
                kb(v.with_memory),
                kb(v.with_memory - block - bare.with_memory) + " (vs bare's same request)",
                f"{v.tool_call_s * 1000:.0f} ms" if v.tool_call_s else "-",
            )
        )
    table(
        rows,
        (
            "variant",
            "pass (20 + consol.)",
            "block",
            "1st request",
            "added beyond block",
            "tool call",
        ),
    )
    lean = vs["lean00"]
    if lean.tool_result:
        print(f"memory_search result (start): {lean.tool_result!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--empty-only", action="store_true", help="only the empty-home pass timing")
    args = ap.parse_args(argv)
    print(f"memoryd host bench, {time.strftime('%Y-%m-%d %H:%M')}, {machine()}")
    base = Path(tempfile.mkdtemp(prefix="mdhost-"))
    bin_ = ensure_opencode()
    out: dict[str, Variant] = {}
    try:
        with MockLLM() as mock:
            if not args.empty_only:
                for name in VARIANTS:
                    t = time.monotonic()
                    out[name] = run_variant(name, base, bin_, mock, args.sessions)
                    print(f"{LABEL[name]}: done in {time.monotonic() - t:.1f} s", flush=True)
            empty = {
                (case, name): empty_home_pass(name, base, bin_, mock, case)
                for case in EMPTY_CASES
                for name in VARIANTS[1:]
            }
        if out:
            report(out)
        steps = [s for s, _ in STEPS] + ["wall"]
        for case in EMPTY_CASES:
            print(f"\n== Home: {case}, private server: seconds from launching memoryd ==")
            rows = [
                (
                    LABEL[n],
                    *(f"{e.get(s, float('nan')):.2f}" for s in steps),
                    str(e["model calls"]),
                    f"{e['load']:.1f}",
                )
                for (c, n), e in empty.items()
                if c == case
            ]
            table(rows, ("variant", *steps, "model calls", "load"))
            a, b = empty[(case, "v01000")]["wall"], empty[(case, "lean00")]["wall"]
            print(f"lean / v0.1 wall: {b / a:.2f}x (goal for the empty home: lean <= 4 s)")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
