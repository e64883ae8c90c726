"""Redaction benchmark: memoryd's redactor beside Yelp's detect-secrets on every labelled corpus.

The corpora (``tests/unit/redact_corpora.py``, by family): ``house``, written alongside the
detector, and the blind ones, each written by someone who saw neither the detector's code nor any
other corpus. For each corpus and tool:

* **recall**: memoryd counts a sample when the labelled secret is gone from ``redact(text)``;
  detect-secrets (a scanner, not a redactor) counts it when its default plugins report anything
  at all in the sample's file, the most generous reading for it;
* **ordinary lines altered**: lines memoryd changes; lines on which detect-secrets reports a
  finding;
* **by family, leave-one-family-out**: recall of each family over all corpora, and recall with
  that family's own rules switched off (``memoryd.redact.redactor(without=...)``): how much of a
  kind the rest of the detector catches, rules it was not written for;
* **throughput** (CPU time of this process, best of ``--runs``) on a transcript-like text (default
  5 MB) built from the ham, prose and a sprinkling of the secret samples, part of it wrapped in JSON
  tool payloads as opencode stores them;
* **per phase-1 session**: both redactors timed inside ``build_transcript`` on bench/phase1.py's
  synthetic sessions (each part redacted on its own, as phase 1 does).

The redactor at ``--before`` (default c6d423c, before redaction by kind) runs on the same inputs.

Run from the repo root (detect-secrets comes with the ``bench`` extra)::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python bench/redact.py [--mb 5] [--runs 3] [--seed N] [--before REV] [--sessions N]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import functools
import importlib
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
from memoryd.redact import redact, redactor
from tests.unit.redact_corpora import Labelled, Ordinary, corpora
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
    """The redactor at ``rev`` as a standalone module (a single file or the package, renamed so it
    can sit beside today's), or None without git history."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
        ).stdout

    root = Path(tempfile.mkdtemp())
    try:
        names = git("ls-tree", "--name-only", rev, "memoryd/redact/").split()
        if names:
            (root / "redact_before").mkdir()
            for name in names:
                src = git("show", f"{rev}:{name}").replace("memoryd.redact", "redact_before")
                (root / "redact_before" / Path(name).name).write_text(src)
        else:
            (root / "redact_before.py").write_text(git("show", f"{rev}:memoryd/redact.py"))
    except (OSError, subprocess.CalledProcessError):
        return None
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("redact_before")
    finally:
        sys.path.remove(str(root))


# --- the redactors --------------------------------------------------------------------------------


def recall(fn: Callable[[str], str], samples: list[Labelled]) -> int:
    return sum(s.secret not in fn(s.text) for s in samples)


def altered(fn: Callable[[str], str], ham: list[Ordinary]) -> int:
    return sum(fn(h.text) != h.text for h in ham)


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f} %)" if d else "-"


def family_rows(corpora: dict[str, tuple[list[Labelled], list[Ordinary]]]) -> list[tuple[str, ...]]:
    """Per family over all corpora: recall, and recall with that family's own rules switched off
    (what the rest of the detector catches of a kind it was not written for)."""
    samples = [s for secrets, _ in corpora.values() for s in secrets]
    rows: list[tuple[str, ...]] = []
    for family in sorted({s.family for s in samples}):
        mine = [s for s in samples if s.family == family]
        per_corpus = ", ".join(
            f"{name} {recall(redact, [s for s in mine if s.corpus == name])}"
            f"/{sum(s.corpus == name for s in mine)}"
            for name in corpora
            if any(s.corpus == name for s in mine)
        )
        without = redactor(frozenset({family}))
        rows.append(
            (
                family,
                pct(recall(redact, mine), len(mine)),
                pct(recall(without, mine), len(mine)),
                per_corpus,
            )
        )
    return rows


# --- detect-secrets -------------------------------------------------------------------------------


class DetectSecrets:
    def __init__(self) -> None:
        from detect_secrets.core.secrets_collection import SecretsCollection
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

    def recall(self, samples: list[Labelled]) -> int:
        return sum(bool(self.findings(s.text, f"s{i}.txt")) for i, s in enumerate(samples))

    def fp(self, ham: list[Ordinary]) -> int:
        return len(self.findings("\n".join(h.text for h in ham), "ham.txt"))

    def scan(self, text: str) -> None:
        self.findings(text, "transcript.txt")


# --- per phase-1 session -------------------------------------------------------------------------


def per_session_ms(
    fns: dict[str, Callable[[str], str]], sessions: int, runs: int
) -> dict[str, float]:
    """Mean redaction time per session inside ``build_transcript`` (every part redacted on its
    own, as phase 1 does) on bench/phase1.py's synthetic sessions, for each redactor."""
    from bench.phase1 import build_fake, make_dataset, patched
    from memoryd.host.models import Message
    from memoryd.write import transcript as transcript_mod

    data = make_dataset(sessions)
    host = build_fake(data)
    convos = [[Message.model_validate(m) for m in host.messages[s.sid]] for s in data]
    out: dict[str, float] = {}
    for name, fn in fns.items():
        spent = 0.0

        def timed(text: str, fn: Callable[[str], str] = fn) -> str:
            nonlocal spent
            start = time.process_time()
            try:
                return fn(text)
            finally:
                spent += time.process_time() - start

        best = float("inf")
        with patched([(transcript_mod, "redact", timed)]):
            for _ in range(runs):
                spent = 0.0
                for msgs in convos:
                    transcript_mod.build_transcript(msgs)
                best = min(best, spent)
        out[name] = 1e3 * best / len(convos)
    return out


# --- report ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=float, default=5.0, help="transcript size for throughput")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per tool (best is kept)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--before", default="c6d423c", help="git revision of the previous redactor")
    ap.add_argument("--sessions", type=int, default=200, help="phase-1 sessions to time (0: skip)")
    args = ap.parse_args(argv)

    print(f"machine: {machine()}")
    every = corpora()
    for name, (secrets, ham) in every.items():
        n_formats = len({s.fmt for s in secrets})
        print(
            f"corpus {name}: {len(secrets)} secrets over {n_formats} formats, {len(ham)} ordinary lines"
        )
    text = transcript_text(args.mb, args.seed)
    size = len(text.encode()) / MB
    print(f"transcript: {size:.2f} MB\n")

    before = load_before(args.before)
    tools: list[tuple[str, Callable[[str], str]]] = [("memoryd", redact)]
    if before is not None:
        tools.append((f"memoryd before ({args.before})", before.redact))
    try:
        ds = DetectSecrets()
    except ImportError:
        print("detect-secrets is not installed: pip install -e '.[bench]'")
        ds = None

    speed: dict[str, float] = {}
    for name, fn in tools:
        speed[name] = size / best_of(args.runs, functools.partial(fn, text))
    if ds is not None:
        speed["detect-secrets"] = size / best_of(max(1, args.runs // 2), lambda: ds.scan(text))

    rows: list[tuple[str, ...]] = []
    for corpus, (secrets, ham) in every.items():
        for name, fn in tools:
            rows.append(
                (
                    corpus,
                    name,
                    pct(recall(fn, secrets), len(secrets)),
                    pct(altered(fn, ham), len(ham)),
                )
            )
        if ds is not None:
            rows.append(
                (
                    corpus,
                    "detect-secrets",
                    pct(ds.recall(secrets), len(secrets)),
                    f"{ds.fp(ham)} lines flagged",
                )
            )
    table(rows, ("corpus", "tool", "recall", "ordinary lines altered"))
    print()
    table(
        [
            (n, f"{v:.2f}", "1.00" if n == "memoryd" else f"{speed['memoryd'] / v:.2f}")
            for n, v in speed.items()
        ],
        ("tool", "MB/s", "memoryd speed ×"),
    )
    print("\nby family, all corpora (leave-one-family-out: that family's own rules switched off):")
    table(family_rows(every), ("family", "recall", "leave-one-family-out", "per corpus"))

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
