"""The 20-session pass through the real opencode, alternated between versions of memoryd.

The machine's speed swings by a third from one minute to the next, so "before" and "after"
measured in separate runs say little. Here one ``opencode serve`` sandbox (``tests.e2e``, the
scripted model) holds 20 sessions of ``bench/idle.py``'s workload; each version is checked out
(``git worktree``), byte-compiled, and installed into its own copy of the memoryd home (what a
user of that version has); then, round after round, each version's ``memoryd run --once`` runs
on a fresh copy of its home. Printed per run and summed up per version: the pass's CPU with its
children (``wait4``), its own peak RSS and its tokenizer helper's.

Run from the repo root (``.`` is the working tree)::

    .venv/bin/python bench/pass_ab.py                          # c6d423c (issue 28's "now") vs .
    .venv/bin/python bench/pass_ab.py --rounds 5 bbaffe9 .      # any revisions, in this order

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import compileall
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import checkout, machine, table
from bench.idle import SESSIONS, memoryd, memoryd_peak
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode

N_SESSIONS = 20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "revs", nargs="*", default=["c6d423c", "."], help="revisions ('.' = working tree)"
    )
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="memoryd-pass-ab-"))
    codes = {rev: checkout(rev, root) for rev in args.revs}
    for code in codes.values():
        compileall.compile_dir(str(code / "memoryd"), quiet=1)
    mock = MockLLM().start()
    install(mock, ScriptedConsolidator())
    box = OpencodeSandbox(root / "sandbox", ensure_opencode(), mock.base_url)
    cpu: dict[str, list[float]] = {rev: [] for rev in codes}
    try:
        for i in range(N_SESSIONS):
            title, turns = SESSIONS[i % len(SESSIONS)]
            sid = box.driver.create_session(f"{title} ({i + 1})", directory=box.project_dir)["id"]
            for text in turns:
                box.driver.say(sid, text, directory=box.project_dir)
        env = {**box.env, "MEMORYD_MIN_ROLLOUT_IDLE_HOURS": "0",
               "MEMORYD_MAX_ROLLOUTS_PER_STARTUP": str(N_SESSIONS + 12)}  # fmt: skip
        home = box.memoryd_home
        homes: dict[str, Path] = {}
        for rev, code in codes.items():  # each version installs into its own copy of the home
            shutil.rmtree(home, ignore_errors=True)
            done = memoryd(
                env, "install", "opencode", "--config-dir", str(box.config_dir), code=code
            )
            if done.returncode != 0:
                raise RuntimeError(f"install of {rev} failed: {done.stderr[-500:]}")
            homes[rev] = root / f"home-{len(homes)}"
            shutil.copytree(home, homes[rev], symlinks=True)
        print(f"pass A/B ({machine()}), {N_SESSIONS} sessions, {args.rounds} rounds")
        for n in range(args.rounds):
            for rev, code in codes.items():
                shutil.rmtree(home)
                shutil.copytree(homes[rev], home, symlinks=True)
                done, peak = memoryd_peak(env, "run", "--once", code=code)
                if done.returncode != 0:
                    raise RuntimeError(f"run --once of {rev} failed: {done.stderr[-500:]}")
                cpu[rev].append(peak.cpu_s)
                print(f"  round {n + 1} {rev:>10}: {peak.cpu_s:.3f} s CPU, peak {peak.own_kb / 1024:.1f} MB,"
                      f" tokenizer helper {peak.helper_kb / 1024:.1f} MB", flush=True)  # fmt: skip
    finally:
        box.stop()
        mock.stop()
        for code in codes.values():
            if code != REPO:
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(code)],
                               check=False)  # fmt: skip
    rows = [[rev, f"{min(v):.2f} s", f"{statistics.median(v):.2f} s", f"{max(v):.2f} s"]
            for rev, v in cpu.items()]  # fmt: skip
    table(rows, ["memoryd", "lowest", "median", "highest"], right_align=True)
    first = next(iter(cpu))
    for rev in list(cpu)[1:]:
        ratios = [b / a for a, b in zip(cpu[first], cpu[rev], strict=True)]
        print(f"{rev} / {first}, round by round: median {statistics.median(ratios):.2f}"
              f" ({min(ratios):.2f}–{max(ratios):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
