"""Redaction benchmark: memoryd's redactor beside Yelp's detect-secrets on the same corpora.

Three measures, both tools in the same process on the same inputs:

* **recall** on ``tests/unit/redact_corpus.py``'s labelled secrets. memoryd counts a sample when
  the labelled secret is gone from ``redact(text)``; detect-secrets (a scanner, not a redactor)
  counts it when its default plugins report anything at all in the sample's file, which is the
  most generous reading for it.
* **false positives** on the ham corpus: ham lines that memoryd changes, and ham lines on which
  detect-secrets reports a finding.
* **throughput** (CPU time of this process, best of ``--runs``) on a transcript-like text (default 5 MB) built from the ham, prose and a
  sprinkling of the secret samples, part of it wrapped in JSON tool payloads as opencode stores
  them: ``redact()`` over the whole text against ``SecretsCollection.scan_file`` over the same
  text written to a file.

When git history is at hand, the redactor as it was before the corpora (``--before``, default
commit 42c1a90) runs on the same inputs too, for the cost of the added rules; and both are timed
per phase-1 session inside ``build_transcript`` on bench/phase1.py's synthetic sessions (each part
redacted on its own, as phase 1 does).

Run from the repo root (detect-secrets comes with the ``bench`` extra)::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/redact.py [--mb 5] [--runs 3] [--seed N] [--before REV] [--sessions N]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import WORDS, machine, paragraph, table
from memoryd.redact import redact
from tests.unit.redact_corpus import HAM, SECRETS

MB = 1 << 20


def transcript_text(mb: float, seed: int) -> str:
    """About ``mb`` MB of session-like text: ham lines, prose, now and then a secret sample, and
    every few blocks a JSON tool payload holding the next block."""
    rng = random.Random(seed)

    def sentence(r: random.Random) -> str:
        return " ".join(r.choice(WORDS) for _ in range(r.randint(6, 18))).capitalize() + "."

    parts: list[str] = []
    size = 0
    target = int(mb * MB)
    while size < target:
        block = [rng.choice(HAM) for _ in range(rng.randint(5, 30))]
        block.append(paragraph(rng, rng.randint(200, 1200), sentence))
        if rng.random() < 0.15:
            block.append(rng.choice(SECRETS).text)
        text = "\n".join(block)
        if rng.random() < 0.3:
            text = json.dumps({"tool": "bash", "state": {"status": "completed", "output": text}})
        parts.append(text)
        size += len(text) + 1
    return "\n".join(parts)


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """Best CPU time of this process over ``runs`` (the machine is shared: wall time would
    measure the neighbours too; every tool here runs in-process on one thread)."""
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def load_before(rev: str) -> ModuleType | None:
    """The redactor at ``rev`` as a standalone module, or None without git history."""
    try:
        src = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:memoryd/redact.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "redact_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("redact_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the redactors --------------------------------------------------------------------------------


def redactor_recall(fn: Callable[[str], str]) -> int:
    return sum(s.secret not in fn(s.text) for s in SECRETS)


def redactor_fp(fn: Callable[[str], str]) -> int:
    return sum(fn(line) != line for line in HAM)


# --- detect-secrets -------------------------------------------------------------------------------


class DetectSecrets:
    def __init__(self) -> None:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings

        self.collection = SecretsCollection
        self.settings = default_settings
        self.dir = Path(tempfile.mkdtemp(prefix="redact-bench-"))

    def findings(self, text: str, name: str = "sample.txt") -> set[int]:
        """Line numbers with a finding in ``text`` (scanned as a file, default plugins)."""
        path = self.dir / name
        path.write_text(text)
        found = self.collection()
        with self.settings():
            found.scan_file(str(path))
        return {s.line_number for secrets in found.data.values() for s in secrets}

    def recall(self) -> int:
        return sum(bool(self.findings(s.text, f"s{i}.txt")) for i, s in enumerate(SECRETS))

    def fp(self) -> int:
        return len(self.findings("\n".join(HAM), "ham.txt"))

    def scan(self, text: str) -> None:
        self.findings(text, "transcript.txt")


# --- per phase-1 session -------------------------------------------------------------------------


def per_session_ms(
    fns: dict[str, Callable[[str], str]], sessions: int, runs: int
) -> dict[str, float]:
    """Mean redaction time per session inside ``build_transcript`` (every part redacted on its
    own, as phase 1 does) on bench/phase1.py's synthetic sessions, for each redactor."""
    from bench.phase1 import build_fake, make_dataset
    from memoryd.host.models import Message
    from memoryd.write import transcript as transcript_mod

    data = make_dataset(sessions)
    host = build_fake(data)
    convos = [[Message.model_validate(m) for m in host.messages[s.sid]] for s in data]
    out: dict[str, float] = {}
    real = transcript_mod.redact
    try:
        for name, fn in fns.items():
            spent = 0.0

            def timed(text: str, fn: Callable[[str], str] = fn) -> str:
                nonlocal spent
                start = time.process_time()
                try:
                    return fn(text)
                finally:
                    spent += time.process_time() - start

            transcript_mod.redact = timed  # type: ignore[assignment]
            best = float("inf")
            for _ in range(runs):
                spent = 0.0
                for msgs in convos:
                    transcript_mod.build_transcript(msgs)
                best = min(best, spent)
            out[name] = 1e3 * best / len(convos)
    finally:
        transcript_mod.redact = real
    return out


# --- report ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=float, default=5.0, help="transcript size for throughput")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per tool (best is kept)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--before", default="42c1a90", help="git revision of the previous redactor")
    ap.add_argument("--sessions", type=int, default=200, help="phase-1 sessions to time (0: skip)")
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    n_formats = len({s.fmt for s in SECRETS})
    print(f"corpora: {len(SECRETS)} secret samples over {n_formats} formats, {len(HAM)} ham lines")
    text = transcript_text(args.mb, args.seed)
    size = len(text.encode()) / MB
    print(f"transcript: {size:.2f} MB\n")

    rows: list[tuple[str, int, int, float]] = []
    t = best_of(args.runs, lambda: redact(text))
    rows.append(("memoryd", redactor_recall(redact), redactor_fp(redact), size / t))
    before = load_before(args.before)
    if before is not None:
        old: Callable[[str], str] = before.redact
        t = best_of(args.runs, lambda: old(text))
        rows.append(
            (f"memoryd before ({args.before})", redactor_recall(old), redactor_fp(old), size / t)
        )
    try:
        ds = DetectSecrets()
    except ImportError:
        print("detect-secrets is not installed: pip install -e '.[bench]'")
        ds = None
    if ds is not None:
        t = best_of(max(1, args.runs // 2), lambda: ds.scan(text))
        rows.append(("detect-secrets", ds.recall(), ds.fp(), size / t))

    mine = rows[0]
    out = [
        (
            name,
            f"{recall}/{len(SECRETS)} ({100 * recall / len(SECRETS):.1f} %)",
            f"{fp}/{len(HAM)}",
            f"{mbs:.2f}",
            "1.00" if name == mine[0] else f"{mine[3] / mbs:.2f}",
        )
        for name, recall, fp, mbs in rows
    ]
    table(out, ("tool", "recall", "false positives (ham lines)", "MB/s", "memoryd speed ×"))

    if args.sessions:
        fns: dict[str, Callable[[str], str]] = {"memoryd": redact}
        if before is not None:
            fns[f"memoryd before ({args.before})"] = before.redact
        ms = per_session_ms(fns, args.sessions, args.runs)
        print(f"\nredaction per phase-1 session ({args.sessions} sessions of bench/phase1.py):")
        table(
            [(name, f"{v:.2f} ms", f"{v / ms['memoryd']:.2f}") for name, v in ms.items()],
            ("redactor", "per session", "× memoryd"),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
