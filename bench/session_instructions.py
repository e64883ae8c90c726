"""Instructions one more new session costs memoryd, counted under valgrind rather than timed.

CPU time on this machine swings by a third from minute to minute, so two versions' "CPU per new
session" measured minutes apart can differ by more than the change between them. Instructions
do not swing: the same work counts the same to within a few parts in a thousand. Per revision,
``bench/scale.py``'s own home (its sessions, outputs and scripted model) is built small, one
pass consolidates it, then a pass extracts and consolidates 20 or 50 new sessions; each runs in
its own process under ``valgrind --tool=cachegrind`` (``PYTHONHASHSEED=0``), and the difference
of the two counts over 30 is what one more session costs. The fake host's handling of the
requests is in it (~8 M a session; ``scale.py``'s CPU figure leaves it out).

Run from the repo root (``.`` is the working tree; each other revision is checked out into a
git worktree, and must have ``bench/scale.py``); needs ``valgrind`` (Debian's package)::

    .venv/bin/python bench/session_instructions.py 88825b9 .

Each revision takes ~3 minutes. Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import checkout

HOME_SESSIONS = 150  # the per-session cost hardly depends on the history (see scale.py's table)
FEW, MANY = 20, 50

# the child: the checkout's own scale.py, so memoryd, the fake host and the workload are all of
# that revision
_CHILD = """
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {bench!r})
import scale
home = scale.build_home({home}, Path(tempfile.mkdtemp(prefix="memoryd-bench-ir-")))
scale.one_pass(home, force=True)
scale.add_new_sessions(home, 20, seed=3)
scale.one_pass(home)
scale.add_new_sessions(home, {new}, seed=77)
scale.one_pass(home)
"""
_REFS_RE = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(code: Path, new: int) -> int:
    """Instructions of the whole child (and its children) that extracts ``new`` sessions."""
    child = _CHILD.format(bench=str(code / "bench"), home=HOME_SESSIONS, new=new)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(code)}
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes",
         "--cachegrind-out-file=/dev/null", sys.executable, "-c", child],
        capture_output=True, text=True, env=env, cwd=code, check=False,
    )  # fmt: skip
    counts = [int(n.replace(",", "")) for n in _REFS_RE.findall(done.stderr)]
    if done.returncode != 0 or not counts:
        raise RuntimeError(f"the child failed ({done.returncode}): {done.stderr[-2000:]}")
    return sum(counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "revs", nargs="*", default=["88825b9", "."], help="revisions ('.' = working tree)"
    )
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-ir-"))
    first: float | None = None
    try:
        for rev in args.revs:
            code = checkout(rev, root)
            if not (code / "bench" / "scale.py").exists():
                print(f"{rev}: has no bench/scale.py", file=sys.stderr)
                return 2
            few, many = instructions(code, FEW), instructions(code, MANY)
            each = (many - few) / (MANY - FEW)
            first = first or each
            print(
                f"{rev:>12}  per new session {each / 1e6:7.1f} M instructions"
                f"  ({each / first:.2f}× the first)  [{FEW} new: {few / 1e9:.2f} G, {MANY} new: {many / 1e9:.2f} G]",
                flush=True,
            )
    finally:
        for rev in args.revs:
            if rev != ".":
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                                str(root / f"rev-{rev.replace('/', '_')}")], check=False)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
