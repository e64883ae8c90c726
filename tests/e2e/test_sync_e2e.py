"""Issue 14 acceptance: two memoryd homes, each with its own real opencode, share one memory.

The remote is a bare repository served by a real ``git daemon --enable=receive-pack`` on
127.0.0.1 (and, in the second run, a plain path). A session remembered on A reaches B's
consolidation input and B's block; forgetting it on A removes it on B; both machines pushing at
once lose nothing; the remote going away and coming back loses nothing. Issue 23: a session only
extracted on A is searchable on B after one sync each and reaches B's consolidation input, with
no consolidation on A; a forget leaves no reachable commit holding the text.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dulwich.objects import Commit
from dulwich.repo import Repo

from memoryd.sync.branch import BRANCH
from tests.e2e.consolidator import install, read_content
from tests.e2e.mockllm import MockLLM, Reply, Text, ToolCall
from tests.e2e.sandbox import OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, run_env, status
from tests.e2e.test_phase2_e2e import session
from tests.narrow import checked

SYNC_DIR = "extensions/sync/resources"


def listing(tool_output: str) -> list[str]:
    """Paths inside a directory the read tool listed (``[]`` for a file or a missing path)."""
    if "<type>directory</type>" not in tool_output:
        return []
    base = re.search(r"<path>(.*?)</path>", tool_output)
    body = re.search(r"<entries>\n(.*?)</entries>", tool_output, re.S)
    if not base or not body:
        return []
    names = [ln for ln in body.group(1).splitlines() if ln and not ln.startswith("(")]
    return [f"{base.group(1)}/{n.rstrip('/')}" for n in names]


T0 = time.monotonic()


class SyncConsolidator:
    """A literal consolidator that also folds in other machines' sessions (``extensions/sync``).

    It reads the diff and ``raw_memories.md``, lists the sync inputs (the read tool lists folders), reads each, and writes
    ``MEMORY.md`` from every fact bullet it saw, so a remote session's arrival and its removal
    both show in the memory and in the summary the block is made from.
    """

    def __init__(self) -> None:
        self.diffs: list[str] = []

    def __call__(self, req: dict[str, Any]) -> Reply:
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        steps: list[tuple[str, dict[str, Any], str]] = []
        for msg in req.get("messages", []):
            if msg.get("role") == "assistant":
                for tc in msg.get("tool_calls") or []:
                    fn = tc.get("function", {})
                    calls[tc["id"]] = (fn.get("name"), json.loads(fn.get("arguments") or "{}"))
            elif msg.get("role") == "tool" and msg.get("tool_call_id") in calls:
                name, args = calls[msg["tool_call_id"]]
                content = msg.get("content")
                steps.append((name, args, content if isinstance(content, str) else str(content)))
        if not steps:
            return ToolCall("read", {"filePath": "phase2_workspace_diff.md"})
        if len(steps) == 1:
            self.diffs.append(read_content(steps[0][2]) or "")
            return ToolCall("read", {"filePath": "raw_memories.md"})
        if len(steps) == 2:
            return ToolCall("read", {"filePath": SYNC_DIR})
        queue: list[str] = []
        for _, _, out in steps[2:]:
            queue += listing(out)
        read = len(steps) - 3
        if read < len(queue):
            return ToolCall("read", {"filePath": queue[read]})
        if any(name == "write" for name, _, _ in steps):
            return Text("Consolidated.")
        bullets: list[str] = []
        for _, _, out in [steps[1], *steps[3:]]:
            text = read_content(out)
            bullets += [ln for ln in (text or "").splitlines() if ln.startswith("- ")]
        body = "\n".join(dict.fromkeys(bullets)) or "- (nothing yet)"
        return [
            ToolCall("write", {"filePath": "MEMORY.md", "content": f"# Memory\n\n{body}\n"}),
            ToolCall(
                "write",
                {"filePath": "memory_summary.md", "content": f"v1\n## What is in memory\n{body}\n"},
            ),
        ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GitDaemon:
    """A real ``git daemon`` serving ``base`` with pushes enabled, on a fixed 127.0.0.1 port."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        git = shutil.which("git")
        assert git, "git is needed to serve the test remote"
        self.proc = subprocess.Popen(
            [
                git,
                "daemon",
                "--reuseaddr",
                "--listen=127.0.0.1",
                f"--port={self.port}",
                f"--base-path={self.base}",
                "--export-all",
                "--enable=receive-pack",
                str(self.base),
            ],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("git daemon did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="module")
def git_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitDaemon]:
    base = tmp_path_factory.mktemp("remotes")
    subprocess.run(["git", "init", "-q", "--bare", str(base / "memory.git")], check=True)
    daemon = GitDaemon(base)
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def boxes(
    opencode_bin: Path, _module_mock_llm: MockLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[OpencodeSandbox, OpencodeSandbox]]:
    made = [
        OpencodeSandbox(tmp_path_factory.mktemp(name), opencode_bin, _module_mock_llm.base_url)
        for name in ("machine-a", "machine-b")
    ]
    try:
        for box in made:
            box.start()
        yield made[0], made[1]
    finally:
        for box in made:
            box.stop()


def block(env: dict[str, str]) -> str:
    path = Path(env["MEMORYD_HOME"]) / "state" / "readpath" / "block.md"
    return path.read_text() if path.exists() else ""


def remote_text(bare: Path) -> str:
    """Every file on the remote's sync branch, concatenated (read with dulwich, as a witness)."""
    repo = Repo(str(bare))
    try:
        tree = checked(Commit, repo[repo.refs[BRANCH]]).tree
        store = repo.object_store
        return "\n".join(
            store[e.sha].as_raw_string().decode() for e in store.iter_tree_contents(tree)
        )
    finally:
        repo.close()


def history_text(bare: Path) -> str:
    """Every file of every commit reachable from the remote's sync branch."""
    repo = Repo(str(bare))
    try:
        store, seen, parts = repo.object_store, set(), []
        for entry in repo.get_walker(include=[repo.refs[BRANCH]]):
            for e in store.iter_tree_contents(entry.commit.tree):
                if e.sha not in seen:
                    seen.add(e.sha)
                    parts.append(store[e.sha].as_raw_string().decode())
        return "\n".join(parts)
    finally:
        repo.close()


def ok(out: subprocess.CompletedProcess[str]) -> str:
    print(f"{time.monotonic() - T0:7.1f}s memoryd {out.args[3:]}")
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def homes(
    boxes: tuple[OpencodeSandbox, OpencodeSandbox], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """One memoryd home per machine, kept across both transports: the second run then reuses
    the opencode instances booted for their folders (the slowest part of this test)."""
    root = tmp_path_factory.mktemp("homes")
    for box, name in zip(boxes, ("home-a", "home-b"), strict=True):
        ok(memoryd(run_env(box, MEMORYD_HOME=str(root / name)), "install", "opencode"))
    return root / "home-a", root / "home-b"


@pytest.mark.parametrize("transport", ["git-daemon", "path"])
def test_one_memory_across_two_machines(
    transport: str,
    boxes: tuple[OpencodeSandbox, OpencodeSandbox],
    homes: tuple[Path, Path],
    git_daemon: GitDaemon,
    mock_llm: MockLLM,
    tmp_path: Path,
) -> None:
    """Both transports run the whole story; the second one switches the same two homes to a
    new remote, so it also shows a machine moving remotes (its folder is published again)."""
    box_a, box_b = boxes
    if transport == "git-daemon":
        remote, bare = git_daemon.url("memory.git"), git_daemon.base / "memory.git"
    else:
        remote = str(tmp_path / "m.git")
        bare = Path(remote)
    tag = transport.replace("-", "")
    cons = SyncConsolidator()
    install(mock_llm, cons)
    env_a = run_env(box_a, MEMORYD_HOME=str(homes[0]), MEMORYD_SYNC_REMOTE=remote)
    env_b = run_env(box_b, MEMORYD_HOME=str(homes[1]), MEMORYD_SYNC_REMOTE=remote)
    if transport == "path":
        assert "created a bare repository" in ok(memoryd(env_a, "sync", "--init"))

    # A remembers a session and publishes it; B pulls it and consolidates it into its block
    fact = f"The {tag} billing service pins PostgreSQL 16 and pgbouncer in transaction mode."
    sid = session(box_a, f"db {tag}", fact)
    force = "--force-consolidation"  # the other transport's run may have started the cooldown
    assert "phase 2: consolidated" in ok(memoryd(env_a, "run", "--once", force))
    assert "pushed" in ok(memoryd(env_a, "sync"))
    assert "other machines' memory changed" in ok(memoryd(env_b, "sync"))
    cons.diffs.clear()
    assert "phase 2: consolidated" in ok(memoryd(env_b, "run", "--once", force))
    assert any("A extensions/sync/resources/" in d and fact in d for d in cons.diffs), cons.diffs
    assert fact in block(env_b)
    snap_a, snap_b = status(env_a)["sync"], status(env_b)["sync"]
    assert snap_a["last_success"] and snap_a["last_error"] is None
    assert snap_b["machines"] == [snap_a["machine"]]

    # issue 23: a session A only *extracted* (its consolidation cooldown holds phase 2) is
    # published at A's next sync and searchable on B right after B's, in B's matching project
    # (both checkouts are folders named "project", neither has an origin URL)
    fresh = f"The {tag} invoice exporter writes UTF-8 CSV with a BOM for Excel."
    # B knows its own checkout from a session of its own there (its cooldown holds phase 2)
    session(box_b, f"local {tag}", f"The {tag} checkout on B runs make test before commits.")
    assert "phase 2: consolidated" not in ok(memoryd(env_b, "run", "--once"))
    session(box_a, f"csv {tag}", fresh)
    extracted = ok(memoryd(env_a, "run", "--once"))
    assert "phase 2: consolidated" not in extracted, extracted
    t_pub = time.monotonic()
    assert "pushed" in ok(memoryd(env_a, "sync"))
    ok(memoryd(env_b, "sync"))
    found = ok(memoryd(env_b, "search", "--project", str(box_b.project_dir), "invoice exporter"))
    print(f"extracted on A -> searchable on B: {time.monotonic() - t_pub:.2f} s (two syncs)")
    assert fresh in found and f"{SYNC_DIR}/{snap_a['machine']}/projects/" in found, found
    elsewhere = ok(memoryd(env_b, "search", "--project", "/", "invoice"))  # another project
    assert f"{tag} invoice exporter" not in elsewhere, elsewhere
    got = status(env_b)["sync"]["received"]
    assert got["sessions"] >= 1 and got["machines"] == 1
    cons.diffs.clear()
    assert "phase 2: consolidated" in ok(memoryd(env_b, "run", "--once", force))
    assert any(fresh in d for d in cons.diffs), cons.diffs  # B's consolidation input

    # both push at once: neither note is lost
    notes = {who: f"{tag} note written on machine {who}" for who in ("A", "B")}
    for env, who in ((env_a, "A"), (env_b, "B")):
        ok(memoryd(env, "note", "add", notes[who]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "memoryd", "sync"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in (env_a, env_b)
    ]
    for p in procs:
        said, err = p.communicate(timeout=60)
        assert p.returncode == 0, said + err
    published = remote_text(bare)
    assert notes["A"] in published and notes["B"] in published

    # the remote goes away: work queues, status says so; it comes back: nothing is lost
    away = f"{tag} note written while the remote was away"
    if transport == "git-daemon":
        git_daemon.stop()
    else:
        os.rename(remote, remote + ".away")
    ok(memoryd(env_a, "note", "add", away))
    out = memoryd(env_a, "sync")
    assert out.returncode == 1 and "failed" in out.stdout, out.stdout + out.stderr
    snap = status(env_a)["sync"]
    assert snap["state"] == "retrying" and snap["last_error"] and snap["retry_at"]
    assert snap["pending"]["added"] == 1
    assert "sync waits" in ok(memoryd(env_a, "status"))
    if transport == "git-daemon":
        git_daemon.start()
    else:
        os.rename(remote + ".away", remote)
    assert "pushed" in ok(memoryd(env_a, "sync"))
    assert status(env_a)["sync"]["pending"]["added"] == 0
    assert away in remote_text(bare) and notes["B"] in remote_text(bare)

    # forgetting on A removes it on B (urgent: no cooldown, no --force needed); B's next
    # consolidation also takes in both notes A wrote meanwhile
    ok(memoryd(env_a, "forget", "--session", sid))
    ok(memoryd(env_a, "sync"))
    ok(memoryd(env_b, "sync"))
    cons.diffs.clear()
    assert "phase 2: consolidated" in ok(memoryd(env_b, "run", "--once"))
    diff = "\n".join(cons.diffs)
    assert "D extensions/sync/resources/" in diff
    assert notes["A"] in diff and away in diff
    assert fact not in (Path(env_b["MEMORYD_HOME"]) / "memories" / "MEMORY.md").read_text()
    assert fact not in block(env_b)
    # ...and from every commit reachable from the remote's branch (A re-rooted it), while
    # everything else is still there
    assert fact not in history_text(bare)
    assert fresh in remote_text(bare) and notes["B"] in remote_text(bare)
    assert status(env_a)["sync"]["rerooted_at"]
    b_inputs = Path(env_b["MEMORYD_HOME"]) / "memories" / SYNC_DIR
    assert not any(fact in p.read_text() for p in b_inputs.rglob("*.md"))
