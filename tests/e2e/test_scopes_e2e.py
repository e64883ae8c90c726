"""Issue 12 acceptance against the real opencode: project scopes, and compaction as a save point."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from memoryd.folder.validated import ValidatedMemory
from memoryd.paths import Paths
from memoryd.read import block as readpath
from memoryd.scopes import scope_key
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM, transcript_of
from tests.e2e.sandbox import MakeSandbox, OpencodeSandbox
from tests.e2e.test_daemon_e2e import start_daemon, stop, wait_for
from tests.e2e.test_phase1_e2e import memoryd, run_env, status
from tests.e2e.test_readpath_e2e import systems

NAMES = ("alpha", "beta", "gamma")


def git_repo(folder: Path) -> Path:
    """A checkout with one empty commit. opencode names a project by its root commit, and these
    commits can come out identical (same tree, author, second): then the three checkouts are one
    opencode project, which is exactly when the worktree, not the project id, must be the scope."""
    folder.mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(folder)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return folder


def test_each_project_sees_its_layer_and_the_global_one_only(
    make_sandbox: MakeSandbox, mock_llm: MockLLM, tmp_path: Path
) -> None:
    box: OpencodeSandbox = make_sandbox()
    env = run_env(box)
    home = box.memoryd_home
    install(mock_llm, ScriptedConsolidator(scoped=True))
    folders = {n: git_repo(box.root / "src" / n) for n in NAMES}
    d = box.driver
    for name, folder in folders.items():
        sid = d.create_session(f"{name} work", directory=folder)["id"]
        d.say(
            sid,
            f"{name.upper()}-FACT: the {name} service builds with make {name}-build and ships Fridays",
            directory=folder,
        )
        d.say(
            sid,
            "(everywhere) the user prefers tabs over spaces in every language they write",
            directory=folder,
        )
    assert memoryd(env, "install", "opencode").returncode == 0
    out = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in out.stdout, out.stdout + out.stderr

    memories = home / "memories"
    keys = {n: scope_key(str(f)) for n, f in folders.items()}
    for name, key in keys.items():
        layer = (memories / "projects" / key / "memory_summary.md").read_text()
        assert layer.startswith("v1\n") and f"{name.upper()}-FACT" in layer
        assert not any(f"{o.upper()}-FACT" in layer for o in NAMES if o != name)
        assert (
            f"worktree: {folders[name]}" in (memories / "projects" / key / "project.md").read_text()
        )
    top = (memories / "memory_summary.md").read_text()
    assert "tabs over spaces" in top and "-FACT" not in top

    box.restart()  # load the shim
    d = box.driver
    mock_llm.clear()
    alpha = folders["alpha"]
    sid = d.create_session("more alpha work", directory=alpha)["id"]
    for i in range(3):
        d.say(sid, f"question {i} about the build", directory=alpha)
    d.say(sid, "note it [[tool:write path=notes.md content=x]]", directory=alpha)
    turns = [r for r in mock_llm.requests if r.session_id == sid]
    assert len(turns) == 5  # 4 turns + the step after the tool call
    blocks = {systems(r)[1] for r in turns}
    assert len(blocks) == 1, "the block must be byte-identical across the turns of a session"
    block = blocks.pop()
    assert "ALPHA-FACT" in block and "tabs over spaces" in block
    assert "BETA-FACT" not in block and "GAMMA-FACT" not in block
    assert block == (home / "state" / "readpath" / "projects" / f"{keys['alpha']}.md").read_text()

    # two of these checkouts share a root commit (one opencode project): still separate scopes
    beta = folders["beta"]
    bsid = d.create_session("beta again", directory=beta)["id"]
    d.say(bsid, "what builds beta", directory=beta)
    bblock = systems([r for r in mock_llm.requests if r.session_id == bsid][0])[1]
    assert "BETA-FACT" in bblock and "ALPHA-FACT" not in bblock and "GAMMA-FACT" not in bblock

    # a fourth, new folder: the global layer only (from the shim's load-time fallback) ...
    delta = box.root / "src" / "delta"
    delta.mkdir()
    dsid = d.create_session("new project", directory=delta)["id"]
    d.say(dsid, "first question here", directory=delta)
    dblock = systems([r for r in mock_llm.requests if r.session_id == dsid][0])[1]
    global_only = (home / "state" / "readpath" / "block.md").read_text()
    assert dblock == global_only and "tabs over spaces" in dblock and "-FACT" not in dblock
    # ... and the shim announced it, so the next tick renders its own (identical) file
    assert memoryd(env, "run", "--once").returncode == 0
    dfile = home / "state" / "readpath" / "projects" / f"{scope_key(str(delta))}.md"
    assert dfile.read_text() == global_only
    mock_llm.clear()
    d.say(dsid, "second question here", directory=delta)
    assert systems(mock_llm.requests[-1])[1] == dblock  # no change seen mid-session

    # bytes per request: the scoped block against a global-only block over the same memory
    flat = Paths(config_file=tmp_path / "c.toml", data_dir=tmp_path / "d", state_dir=tmp_path / "s")
    flat.memories.mkdir(parents=True)
    layers = [top] + [
        (memories / "projects" / k / "memory_summary.md").read_text().split("\n", 1)[1]
        for k in keys.values()
    ]
    (flat.memories / "memory_summary.md").write_text("\n".join(layers))
    ValidatedMemory(flat).record({"memory_summary.md": "\n".join(layers).encode()}, source="e2e")
    flat_block = readpath.render_block(flat) or ""
    scoped_bytes = len(block.encode("utf-8"))
    flat_bytes = len(flat_block.replace(str(flat.memories), str(memories)).encode("utf-8"))
    print(f"\nblock bytes per request: scoped {scoped_bytes}, global-only {flat_bytes}")
    assert flat_block and scoped_bytes <= flat_bytes


def summarize(box: OpencodeSandbox, sid: str) -> None:
    box.driver.request(
        "POST",
        f"/session/{sid}/summarize",
        directory=box.project_dir,
        json_body={"providerID": "mock", "modelID": "mock-model", "auto": False},
        timeout=60,
    )


def test_a_compacted_session_is_saved_before_it_goes_idle_once_per_compaction(
    make_sandbox: MakeSandbox, mock_llm: MockLLM
) -> None:
    box: OpencodeSandbox = make_sandbox()
    env = run_env(box)
    env["MEMORYD_MIN_ROLLOUT_IDLE_HOURS"] = "6"  # never idle during this test
    install(mock_llm, ScriptedConsolidator())
    assert memoryd(env, "install", "opencode").returncode == 0
    daemon = start_daemon(env)
    try:
        wait_for(
            lambda: (status(env).get("daemon") or {}).get("events", {}).get("state") == "connected",
            30,
            "the event stream to connect",
            daemon.output,
        )
        d = box.driver
        sid = d.create_session("long session", directory=box.project_dir)["id"]
        for i in range(3):
            d.say(
                sid,
                f"EARLY-{i}: the cache layer uses redis with a ttl of {i + 5} minutes",
                directory=box.project_dir,
            )
        time.sleep(2)
        assert mock_llm.extraction_requests == []  # not idle: nothing yet
        summarize(box, sid)
        wait_for(
            lambda: mock_llm.extraction_requests, 30, "the save-point extraction", daemon.output
        )
        first = transcript_of(mock_llm.extraction_requests[0])
        assert "EARLY-0" in first and "EARLY-2" in first
        d.say(
            sid, "LATER: the queue moved from rabbitmq to nats last week", directory=box.project_dir
        )
        time.sleep(4)
        assert len(mock_llm.extraction_requests) == 1  # once per compaction

        summarize(box, sid)
        wait_for(
            lambda: len(mock_llm.extraction_requests) >= 2,
            30,
            "the second save point",
            daemon.output,
        )
        second = transcript_of(mock_llm.extraction_requests[1])
        # continued from the watermark (opencode's summary of the early part is not re-read)
        assert "LATER" in second and "EARLY-0" not in second
        time.sleep(3)
        assert len(mock_llm.extraction_requests) == 2
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(15)
        finally:
            stop(daemon)
