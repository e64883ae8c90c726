"""Sync benchmark: time and wire bytes of memoryd's sync beside plain ``git push`` / ``git fetch``.

A real ``git daemon --enable=receive-pack`` serves two bare repositories on 127.0.0.1; a small
byte-counting TCP proxy sits in front of it, so both sides are measured the same way (bytes on
the wire, each direction). Two memoryd homes, A and B, each with its own store:

1. **first sync, publish**: A holds N outputs (default 1,000; ~0.4–1.5 KB raw memory and ~1–3 KB
   summary each, like phase 2's bench) and syncs into the empty remote;
2. **first sync, receive**: B (no outputs of its own) syncs and fetches all of them;
3. **incremental, publish**: A gains 1 output and syncs (N outputs already in the remote);
4. **incremental, receive**: B syncs and fetches that one;
5. **nothing changed**: A syncs again;
6. **extracted on A → searchable on B**: A gains 1 output (no consolidation anywhere), A syncs,
   B syncs, and B's ``memory_search`` finds its fact: the latency of a session's arrival;
7. **forget re-root**: A forgets one of the N sessions and syncs; the push is a new root commit
   (no reachable commit keeps the text), then B fetches it.

The git baselines of 6 and 7 are a push plus a fetch, and a ``git rm`` + commit + push that keeps
history (what memoryd did before it re-rooted).

memoryd's time is the whole ``run_sync`` (read the DB, build the folder, secret scan, fetch,
commit, push, record state). The baseline is the git binary with the same files in a checkout:
``git add -A && git commit && git push`` for publishing and ``git fetch`` for receiving, into the
second repository through the same proxy.

Run from the repo root::

    .venv/bin/python bench/sync.py [--outputs 1000] [--reps 3]

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import WORDS, fmt_s, machine, paragraph, table
from memoryd.clock import SystemClock
from memoryd.paths import Paths
from memoryd.redact import find_secrets
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.sync.branch import MACHINES, session_path
from memoryd.sync.engine import run_sync
from memoryd.sync.publish import build_publication
from memoryd.tools.hits import SearchQuery
from memoryd.tools.notes import memory_forget
from memoryd.tools.search import memory_search


class CountingProxy:
    """127.0.0.1:port → target port, counting bytes client→server (up) and server→client (down)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.up = self.down = 0
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.up = self.down = 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, server, "up"), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, "down"), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    setattr(self, way, getattr(self, way) + len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_WR if s is dst else socket.SHUT_RD)
                except OSError:
                    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 18))).capitalize() + "."


class Home:
    def __init__(self, root: Path, remote: str) -> None:
        self.paths = Paths(
            config_file=root / "config.toml", data_dir=root, state_dir=root / "state"
        )
        self.paths.ensure_dir(root)
        self.paths.memories.mkdir(exist_ok=True)
        self.store = Store(self.paths.db, clock=SystemClock())
        self.settings = Settings(sync_remote=remote)

    def add_outputs(self, rng: random.Random, start: int, count: int, fact: str = "") -> None:
        rows = []
        for i in range(start, start + count):
            while True:  # real outputs are stored redacted: redraw random text the scan flags
                raw = "\n".join(
                    f"- {paragraph(rng, rng.randint(80, 300), sentence)}" for _ in range(4)
                )
                raw += f"\n- {fact}" if fact else ""
                summary = paragraph(rng, rng.randint(1000, 3000), sentence)
                if not find_secrets(raw + "\n" + summary):
                    break
            rows.append(
                (f"ses_{i:06d}", 1_800_000_000_000 + i, raw, summary, f"slug-{i}", "/home/dev/p",
                 f"Session {i}", 1_800_000_000_000, 1)
            )  # fmt: skip
        with self.store._conn:
            self.store._conn.executemany(
                """INSERT INTO stage1_outputs (session_id, source_updated_at, raw_memory,
                   rollout_summary, rollout_slug, cwd, title, generated_at, selected_for_phase2)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                rows,
            )

    def sync(self) -> Any:
        out = asyncio.run(run_sync(self.store, self.settings, self.paths, SystemClock()))
        assert out.ok, out.detail
        return out


def timed(proxy: CountingProxy, fn: Callable[[], object]) -> tuple[float, int, int]:
    proxy.reset()
    t = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - t
    time.sleep(0.05)  # let the pipe threads count the last bytes
    return elapsed, proxy.up, proxy.down


def _rerooted(out: Any) -> None:
    assert out.rerooted, "a forget must re-root the branch"


def kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


def run(outputs: int, base: Path) -> dict[str, tuple[float, int, int]]:
    remotes = base / "remotes"
    remotes.mkdir()
    for name in ("memoryd.git", "git.git"):
        git("init", "-q", "--bare", str(remotes / name))
    port = free_port()
    daemon = subprocess.Popen(
        ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
         f"--base-path={remotes}", "--export-all", "--enable=receive-pack", str(remotes)],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        proxy = CountingProxy(port)
        url = f"git://127.0.0.1:{proxy.port}"
        rng = random.Random(14)
        a = Home(base / "a", f"{url}/memoryd.git")
        b = Home(base / "b", f"{url}/memoryd.git")
        a.add_outputs(rng, 0, outputs)
        res: dict[str, tuple[float, int, int]] = {}
        res["first publish"] = timed(proxy, a.sync)
        res["first receive"] = timed(proxy, b.sync)
        a.add_outputs(rng, outputs, 1)
        res["incremental publish"] = timed(proxy, a.sync)
        res["incremental receive"] = timed(proxy, b.sync)
        res["nothing changed"] = timed(proxy, a.sync)

        # extracted on A -> searchable on B: A's sync, B's sync, B's search; no consolidation
        needle = "The bench fact travels between machines"
        a.add_outputs(rng, outputs + 1, 1, fact=needle)

        def arrive() -> None:
            a.sync()
            b.sync()
            assert memory_search(b.paths.memories, SearchQuery(needle)).matches, (
                "not searchable on B"
            )

        res["extracted on A → searchable on B"] = timed(proxy, arrive)
        # a forget rewrites the branch: one root commit, pushed by compare-and-swap
        memory_forget(a.store, a.paths.memories, session_id="ses_000007")
        res["forget re-root, publish"] = timed(proxy, lambda: _rerooted(a.sync()))
        res["forget re-root, receive"] = timed(proxy, b.sync)
        a.store._conn.execute(
            "DELETE FROM stage1_outputs WHERE session_id = ?", (f"ses_{outputs + 1:06d}",)
        )

        # baseline: the same files through the git binary
        a.store._conn.execute(
            "DELETE FROM stage1_outputs WHERE session_id = ?", (f"ses_{outputs:06d}",)
        )
        pub = build_publication(a.store, a.paths.memories, 30)
        work, clone = base / "git-work", base / "git-clone"
        git("init", "-q", "-b", "memoryd-sync", str(work))
        for k, v in (("user.email", "b@e"), ("user.name", "bench")):
            git("config", k, v, cwd=work)
        git("remote", "add", "origin", f"{url}/git.git", cwd=work)
        folder = work / MACHINES / pub.machine_id

        def write(files: dict[str, bytes]) -> None:
            for rel, data in files.items():
                p = folder / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)

        def publish(msg: str) -> None:
            git("add", "-A", cwd=work)
            git("commit", "-q", "-m", msg, cwd=work)
            git("push", "-q", "origin", "memoryd-sync", cwd=work)

        write(pub.files)
        res["git: first publish"] = timed(proxy, lambda: publish("first"))
        git("init", "-q", str(clone))
        git("remote", "add", "origin", f"{url}/git.git", cwd=clone)
        res["git: first receive"] = timed(proxy, lambda: git("fetch", "-q", "origin", cwd=clone))
        a.add_outputs(random.Random(99), outputs, 1)
        new = build_publication(a.store, a.paths.memories, 30)
        write({k: v for k, v in new.files.items() if pub.files.get(k) != v})
        res["git: incremental publish"] = timed(proxy, lambda: publish("one more"))
        res["git: incremental receive"] = timed(
            proxy, lambda: git("fetch", "-q", "origin", cwd=clone)
        )
        res["git: nothing changed"] = timed(
            proxy, lambda: git("push", "-q", "origin", "memoryd-sync", cwd=work)
        )

        def push_and_fetch() -> None:
            write({"extra.json": needle.encode()})
            publish("arrive")
            git("fetch", "-q", "origin", cwd=clone)

        res["git: extracted on A → searchable on B"] = timed(proxy, push_and_fetch)
        gone = folder / session_path("ses_000008")  # still in the checkout

        def forget_and_publish() -> None:
            gone.unlink()
            publish("forget (history kept)")

        res["git: forget re-root, publish"] = timed(proxy, forget_and_publish)
        res["git: forget re-root, receive"] = timed(
            proxy, lambda: git("fetch", "-q", "origin", cwd=clone)
        )
        a.store.close()
        b.store.close()
        return res
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--outputs", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    if shutil.which("git") is None:
        print("bench/sync.py needs the git binary for the baseline and the git daemon")
        return 2
    runs = []
    for _ in range(args.reps):
        with tempfile.TemporaryDirectory(prefix="memoryd-bench-sync-") as tmp:
            runs.append(run(args.outputs, Path(tmp)))
    print(f"sync of {args.outputs:,} outputs over git:// ({machine()}); median of {args.reps} runs")
    rows = []
    for step in (
        "first publish",
        "first receive",
        "incremental publish",
        "incremental receive",
        "nothing changed",
        "extracted on A → searchable on B",
        "forget re-root, publish",
        "forget re-root, receive",
    ):
        med = [
            statistics.median(r[k][i] for r in runs)
            for k in (step, f"git: {step}")
            for i in range(3)
        ]
        rows.append((step, fmt_s(med[0]), kb(int(med[1])), kb(int(med[2])),
                     fmt_s(med[3]), kb(int(med[4])), kb(int(med[5])), f"{med[0] / med[3]:.1f}×"))  # fmt: skip
    table(
        rows, ("step", "memoryd", "up", "down", "git", "up", "down", "time ratio"), right_align=True
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
