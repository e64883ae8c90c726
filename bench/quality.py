"""Memory-quality bench: fixed sessions through memoryd's real extraction and consolidation.

The sessions of :mod:`bench.quality_cases` (preferences shown by interruption and repetition, a
proposal the user rejected, one nobody adopted, a fix found after two failures, a version that
went stale, a secret, a planted instruction, small talk, a second project...) are replayed into an
isolated real ``opencode serve``: a scripted model plays the assistant, its shell commands run
against stub tools that print the scripted output, its file writes really happen. Then
``memoryd install opencode`` and ``memoryd run --once --force-consolidation`` run exactly as a
user would run them, and every rubric item is judged on what memoryd stored and on the
consolidated ``MEMORY.md`` / ``memory_summary.md``.

* Without ``--model`` the scripted test model (``tests/e2e/mockllm.py``) also answers memoryd's
  helpers, with hand-written ideal extractions and the literal scripted consolidator: this checks
  the harness itself (every memory-scope item must pass; folder items show what a naive
  consolidator gets wrong).
* With ``--model provider/model`` memoryd's helpers use that model (``extract_model`` and
  ``consolidation_model``), so the table scores the prompts with a real model. The session replay
  still uses the scripted model. The provider must be known to the sandboxed opencode: pass its
  config with ``--opencode-config`` (an ``opencode.json`` whose ``provider`` block is merged in)
  and, if you log in with ``opencode auth login``, ``--auth-file`` (your ``auth.json``). API keys
  in the environment reach opencode as usual.

Run from the repo root::

    .venv/bin/python bench/quality.py [--model P/M] [--opencode-config FILE] [--auth-file FILE]
                                      [--only NAME ...] [--json OUT] [--keep]

Not a test (``tests/e2e/test_quality_bench_e2e.py`` runs it once with the scripted model).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import fmt_s, machine, table
from bench.quality_cases import SCENARIOS, Judged, Run, Say, Scenario, Write, oracle_answer
from memoryd.paths import Paths
from memoryd.store import Store
from tests.e2e.consolidator import ScriptedConsolidator, is_consolidation
from tests.e2e.mockllm import (
    Error,
    MockLLM,
    Reply,
    Text,
    ToolCall,
    is_extraction,
    last_user_text,
)
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode

QUEUE_ENV = "QUALITY_BENCH_QUEUE"
STUB_TOOLS = ("pytest", "git", "npm", "pnpm", "terraform", "make")
# Network-free defaults that only make sense for the scripted model.
REAL_MODEL_UNSET = ("OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_DEFAULT_PLUGINS")
LANES = 4  # sessions are replayed on this many threads (one project's stale pair stays in order)
# A stub prints the output the scripted assistant queued for this exact command line, oldest first.
STUB = """#!/bin/sh
q="${QUALITY_BENCH_QUEUE:?}"
d="$q/$(printf '%s' "$(basename "$0") $*" | tr -c 'A-Za-z0-9' '_')"
f=$(ls "$d" 2>/dev/null | head -n 1)
if [ -n "$f" ]; then
  cat "$d/$f/out"; rc=$(cat "$d/$f/rc"); rm -rf "$d/$f"; exit "$rc"
fi
echo "$(basename "$0"): not available in the quality bench" >&2; exit 127
"""


def stub_key(command: str) -> str:
    """The queue folder the stub reads for ``command`` (what ``basename $0`` and ``$*`` give)."""
    words = shlex.split(command)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)  # VAR=value prefixes are not arguments
    return re.sub(r"[^A-Za-z0-9]", "_", " ".join([os.path.basename(words[0]), *words[1:]]))


# --- replaying the sessions --------------------------------------------------------------------


class Replay:
    """The scripted assistant: finds the turn by the user's text, plays its steps one per request."""

    def __init__(self, dirs: dict[str, Path], queue: Path) -> None:
        self.queue = queue
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self.turns: dict[str, tuple[Scenario, int]] = {}
        self.dirs = dirs
        for sc in SCENARIOS:
            for i, turn in enumerate(sc.turns):
                if turn.user in self.turns:
                    raise ValueError(f"user text repeats across turns: {turn.user!r}")
                self.turns[turn.user] = (sc, i)
        texts = list(self.turns)
        if any(a != b and a in b for a in texts for b in texts):
            raise ValueError("a user turn's text contains another's; turns would be ambiguous")

    def __call__(self, req: dict[str, Any]) -> Reply:
        said = last_user_text(req)
        found = [v for k, v in self.turns.items() if k in said]
        if len(found) != 1:
            return Text("(the quality bench has no scripted reply for this turn)")
        sc, i = found[0]
        messages = req.get("messages") or []
        last_user = max(j for j, m in enumerate(messages) if m.get("role") == "user")
        done = sum(1 for m in messages[last_user:] if m.get("role") == "assistant")
        steps = sc.turns[i].steps
        if done >= len(steps):
            return Text("Done.")
        return self._step(sc, steps[done])

    def _step(self, sc: Scenario, step: Run | Write | Say) -> Reply:
        if isinstance(step, Say):
            return Text(step.text)
        if isinstance(step, Write):
            path = self.dirs[sc.project] / step.path
            return ToolCall("write", {"filePath": str(path), "content": step.content})
        if step.output is not None:
            with self._lock:
                slot = self.queue / stub_key(step.command) / f"{next(self._seq):06d}"
                tmp = slot.with_name(slot.name + ".tmp")
                tmp.mkdir(parents=True)
                (tmp / "rc").write_text(str(step.rc))
                (tmp / "out").write_text(step.output + "\n")
                tmp.rename(slot)
        return ToolCall("bash", {"command": step.command, "description": "run a command"})


class ScriptedHelpers:
    """Scripted-model mode: ideal extractions per session, the literal scripted consolidator."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.consolidator = ScriptedConsolidator()
        self.by_title = {sc.title: sc for sc in SCENARIOS}

    def __call__(self, req: dict[str, Any]) -> Reply:
        if is_consolidation(req):
            return self.consolidator(req)
        if is_extraction(req):
            text = last_user_text(req)
            title = re.search(r"^Session title: (.*)$", text, re.M)
            cwd = re.search(r"^Working directory: (.*)$", text, re.M)
            sc = self.by_title.get(title.group(1).strip()) if title else None
            if sc is None or cwd is None:
                return Error(400, "quality bench: extraction for an unknown session")
            return ToolCall("StructuredOutput", oracle_answer(sc, cwd.group(1).strip(), text))
        return self.replay(req)


def real_helpers_guard(replay: Replay) -> Any:
    """Real-model mode: the mock plays the sessions only; a helper reaching it is a setup error."""

    def respond(req: dict[str, Any]) -> Reply:
        if is_extraction(req) or is_consolidation(req):
            return Error(400, "quality bench: a memoryd helper reached the scripted model")
        return replay(req)

    return respond


# --- the sandbox -------------------------------------------------------------------------------


class BenchSandbox(OpencodeSandbox):
    def __init__(self, *args: Any, real_model: bool, **kwargs: Any) -> None:
        self.real_model = real_model
        super().__init__(*args, **kwargs)

    @property
    def base_env(self) -> dict[str, str]:
        env = super().base_env
        if self.real_model:
            for key in REAL_MODEL_UNSET:
                env.pop(key, None)
        return env


def merge_provider_config(box: OpencodeSandbox, model: str, extra: dict[str, Any]) -> None:
    """Add the maintainer's provider(s) beside the mock; sessions keep using the mock model."""
    providers = dict(extra.get("provider") or {})
    box.config["provider"].update(providers)
    enabled = set(box.config["enabled_providers"]) | set(providers) | {model.split("/", 1)[0]}
    box.config["enabled_providers"] = sorted(enabled)
    for key, value in extra.items():
        if key not in ("provider", "model", "small_model", "enabled_providers", "$schema"):
            box.config[key] = value


def prepare_work(root: Path) -> tuple[dict[str, Path], Path, Path]:
    """Project folders with their files, the stub tools, and the output queue."""
    work = root / "work"
    dirs = {sc.project: (work / sc.project) for sc in SCENARIOS}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    bin_dir, queue = root / "stub-bin", root / "queue"
    bin_dir.mkdir()
    queue.mkdir()
    stub = bin_dir / "stub"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    for name in STUB_TOOLS:
        (bin_dir / name).symlink_to(stub)
    for sc in SCENARIOS:
        for rel, content in sc.files.items():
            path = dirs[sc.project] / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
    release = dirs["shop"] / "scripts" / "release.sh"  # a project script: the stub, run by path
    release.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(stub, release)
    return {k: v.resolve() for k, v in dirs.items()}, bin_dir, queue


def replay_sessions(
    box: OpencodeSandbox, scenarios: list[Scenario], dirs: dict[str, Path]
) -> dict[str, str]:
    """Create and play every session; scenarios sharing a stubbed command run on the same lane.

    Lanes keep the order of sessions that must stay ordered (an older and a newer version of a fact
    live in one project) and stop two sessions from taking each other's queued command output.
    """
    order = {sc.name: i for i, sc in enumerate(scenarios)}
    groups: list[list[Scenario]] = []  # sessions linked by a shared stubbed command, in order
    for sc in scenarios:
        keys = _stub_keys(sc)
        touching = [g for g in groups if any(keys & _stub_keys(o) for o in g)]
        merged = sorted([o for g in touching for o in g] + [sc], key=lambda s: order[s.name])
        groups = [g for g in groups if g not in touching] + [merged]
    lanes: list[list[Scenario]] = [[] for _ in range(min(LANES, len(groups)))]
    for group in sorted(groups, key=len, reverse=True):
        min(lanes, key=len).extend(group)
    sids: dict[str, str] = {}

    def play(lane: list[Scenario]) -> None:
        for sc in lane:
            sid = box.driver.create_session(sc.title, directory=dirs[sc.project])["id"]
            for turn in sc.turns:
                box.driver.say(sid, turn.user, directory=dirs[sc.project], timeout=180)
            sids[sc.name] = sid

    with ThreadPoolExecutor(len(lanes)) as pool:
        for f in [pool.submit(play, lane) for lane in lanes]:
            f.result()
    return sids


def _stub_keys(sc: Scenario) -> set[str]:
    return {
        stub_key(s.command)
        for t in sc.turns
        for s in t.steps
        if isinstance(s, Run) and s.output is not None
    }


# --- judging -------------------------------------------------------------------------------------


@dataclass
class Item:
    scenario: str
    label: str
    scope: str
    ok: bool
    detail: str


def judge(
    scenarios: list[Scenario],
    sids: dict[str, str],
    home: Path,
    dirs: dict[str, Path],
    stored_bytes: list[int] | None = None,
) -> list[Item]:
    paths = Paths.from_env({"MEMORYD_HOME": str(home)})
    folder = "\n".join(
        (paths.memories / f).read_text(encoding="utf-8", errors="replace")
        for f in ("MEMORY.md", "memory_summary.md")
        if (paths.memories / f).is_file()
    )
    store = Store(paths.db)
    items = []
    try:
        for sc in scenarios:
            out = store.outputs.output(sids[sc.name])
            if out is not None and stored_bytes is not None:
                stored_bytes.append(len((out.raw_memory + out.rollout_summary).encode("utf-8")))
            j = Judged(
                stored=out is not None,
                raw_memory=out.raw_memory if out else "",
                rollout_summary=out.rollout_summary if out else "",
                cwd=os.path.realpath(out.cwd) if out and out.cwd else None,
                project_dir=os.path.realpath(dirs[sc.project]),
                folder=folder,
            )
            for check in sc.checks:
                ok, detail = check.judge(j)
                items.append(Item(sc.name, check.label, check.scope, ok, detail))
    finally:
        store.close()
    return items


def report(
    items: list[Item], model: str, request_bytes: list[int], stored_bytes: list[int]
) -> dict[str, Any]:
    rows = [(i.scenario, i.label, i.scope, "1" if i.ok else "0", i.detail[:60]) for i in items]
    print(f"\nrubric ({model}):")
    table(rows, ("session", "item", "scope", "score", "detail"))
    by_scope = {
        scope: (
            sum(i.ok for i in items if i.scope == scope),
            sum(1 for i in items if i.scope == scope),
        )
        for scope in ("memory", "folder")
    }
    total = (sum(i.ok for i in items), len(items))
    print()
    for scope, (ok, n) in by_scope.items():
        print(f"{scope} items: {ok}/{n}")
    per_request = sum(request_bytes) / len(request_bytes) if request_bytes else None
    per_stored = sum(stored_bytes) / len(stored_bytes) if stored_bytes else 0
    sent = f"{per_request / 1000:.1f} KB sent" if per_request is not None else "sent: not seen"
    print(
        f"score: {total[0]}/{total[1]} ({100 * total[0] / max(total[1], 1):.0f} %)  |  "
        f"per extracted session: {sent}, {per_stored / 1000:.2f} KB stored "
        f"({len(stored_bytes)} sessions stored)"
    )
    return {
        "model": model,
        "bytes_per_extraction_request": per_request,
        "stored_bytes_per_session": per_stored,
        "items": [i.__dict__ for i in items],
        "score": {"passed": total[0], "total": total[1]},
        "by_scope": {k: {"passed": v[0], "total": v[1]} for k, v in by_scope.items()},
    }


# --- the run -------------------------------------------------------------------------------------


def memoryd(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(
            f"memoryd {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return proc


def run(args: argparse.Namespace) -> dict[str, Any]:
    scenarios = [sc for sc in SCENARIOS if not args.only or sc.name in args.only]
    if not scenarios:
        raise SystemExit(f"no scenario named {args.only}; known: {[s.name for s in SCENARIOS]}")
    binary = ensure_opencode()  # before the stubs go on PATH (the installer uses the real npm)
    root = Path(tempfile.mkdtemp(prefix="memoryd-quality-"))
    mock: MockLLM | None = None
    box: BenchSandbox | None = None
    try:
        dirs, bin_dir, queue = prepare_work(root)
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        os.environ[QUEUE_ENV] = str(queue)
        replay = Replay(dirs, queue)
        mock = MockLLM(ScriptedHelpers(replay) if not args.model else real_helpers_guard(replay))
        mock.start()
        box = BenchSandbox(
            root / "sandbox", binary, mock.base_url, start=False, real_model=bool(args.model)
        )
        if args.model:
            extra = (
                json.loads(Path(args.opencode_config).read_text()) if args.opencode_config else {}
            )
            merge_provider_config(box, args.model, extra)
            box.write_config()
            if args.auth_file:
                auth = box.xdg_data / "opencode" / "auth.json"
                auth.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(args.auth_file, auth)
                auth.chmod(0o600)
        t0 = time.perf_counter()
        box.start()
        sids = replay_sessions(box, scenarios, dirs)
        t_sessions = time.perf_counter() - t0
        env = box.env
        env.update(MEMORYD_MIN_ROLLOUT_IDLE_HOURS="0", MEMORYD_MAX_ROLLOUTS_PER_STARTUP="16")
        if args.model:
            env.update(MEMORYD_EXTRACT_MODEL=args.model, MEMORYD_CONSOLIDATION_MODEL=args.model)
        memoryd(env, "install", "opencode", "--config-dir", str(box.config_dir), timeout=120)
        t1 = time.perf_counter()
        passed = memoryd(env, "run", "--once", "--force-consolidation", timeout=args.timeout)
        t_memoryd = time.perf_counter() - t1
        print(passed.stdout.strip())
        stored: list[int] = []
        items = judge(scenarios, sids, box.memoryd_home, dirs, stored)
        model = args.model or "scripted test model (harness mechanics)"
        # Request bytes are weighed where the model is reached: at the mock in scripted mode (a
        # real provider's requests never pass through the bench).
        sent = [len(json.dumps(r.body).encode("utf-8")) for r in mock.extraction_requests]
        result = report(items, model, sent, stored)
        n_ext = len(mock.extraction_requests)
        print(
            f"\n{len(scenarios)} sessions replayed in {fmt_s(t_sessions)}; memoryd pass "
            f"{fmt_s(t_memoryd)}"
            + (f" ({n_ext} extraction requests to the scripted model)" if not args.model else "")
        )
        print(machine())
        result.update(
            sessions=len(scenarios),
            extraction_requests=n_ext,
            memory_root=str(box.memoryd_home / "memories"),
        )
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return result
    finally:
        if box is not None:
            box.stop()
        if mock is not None:
            mock.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", help="provider/model for memoryd's helpers (default: the scripted test model)"
    )
    ap.add_argument("--opencode-config", help="opencode.json whose provider block defines --model")
    ap.add_argument("--auth-file", help="an opencode auth.json to copy into the sandbox")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these sessions")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for the memoryd pass")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox folder for inspection")
    args = ap.parse_args(argv)
    if (args.opencode_config or args.auth_file) and not args.model:
        ap.error("--opencode-config and --auth-file need --model")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
