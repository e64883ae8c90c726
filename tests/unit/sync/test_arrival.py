"""What is known is published at once, searchable on arrival, and forgotten from history.

Same setup as ``test_sync.py``: homes sharing a bare repository through a plain path (dulwich's
local transport), only the clock faked. Here the sessions are extracted and *not* consolidated.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from dulwich.objects import Commit
from dulwich.repo import Repo

from memoryd.clock import DAY, ManualClock
from memoryd.scopes import scope_key
from memoryd.store.keys import SYNC_STATE
from memoryd.sync import engine
from memoryd.sync import git as transport
from memoryd.sync.branch import BRANCH, session_key, session_path
from memoryd.sync.checkouts import Checkout, match_project, normalise_url, origin_url
from memoryd.tools.hits import SearchQuery
from memoryd.tools.notes import memory_forget
from memoryd.tools.scope import Scope
from memoryd.tools.search import memory_search
from memoryd.write.snapshot import sync_snapshot
from tests.conftest import T0
from tests.narrow import checked, present
from tests.unit.sync.test_engine import Machine, remote_files


def extract(m: Machine, sid: str, fact: str, *, cwd: str = "/home/dev/project") -> None:
    """A stage-1 output, never consolidated (``selected_for_phase2`` stays 0)."""
    c = m.store.stage1.claim_stage1(sid, T0, max_running=100, worker_id="w")
    assert m.store.stage1.mark_stage1_succeeded(
        sid,
        present(c.token),
        raw_memory=f"- {fact}" if fact else "",
        rollout_summary=f"Summary: {fact}" if fact else "",
        rollout_slug="slug",
        cwd=cwd,
        worktree=cwd,
        title=f"title {sid}",
    )


def reachable_blobs(remote: Path) -> list[bytes]:
    """Every blob of every commit reachable from the sync branch."""
    repo = Repo(str(remote))
    try:
        out: list[bytes] = []
        for entry in repo.get_walker(include=[repo.refs[BRANCH]]):
            tree = entry.commit.tree
            for item in repo.object_store.iter_tree_contents(tree):
                out.append(repo.object_store[item.sha].as_raw_string())
        return out
    finally:
        repo.close()


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    assert transport.init_remote(str(path))
    return path


@pytest.fixture
def machines(tmp_path: Path, remote: Path, clock: ManualClock) -> tuple[Machine, Machine]:
    return Machine(tmp_path / "a", str(remote), clock), Machine(tmp_path / "b", str(remote), clock)


def test_every_current_output_is_published_without_a_consolidation(
    machines: tuple[Machine, Machine], remote: Path, clock: ManualClock
) -> None:
    a, _ = machines
    extract(a, "ses_new", "Billing uses PostgreSQL 16")
    extract(a, "ses_off", "A disabled session")
    extract(a, "ses_forgot", "A forgotten session")
    extract(a, "ses_empty", "")
    a.store.outputs.set_mode("ses_off", "disabled")
    a.store.tombstones.add_tombstone("ses_forgot")
    assert a.store.outputs.consumed_count() == 0  # nothing was consolidated
    assert a.sync().status == "pushed"
    files = remote_files(remote)
    sessions = {p for p in files if "/sessions/" in p}
    assert sessions == {f"machines/{a.id}/{session_path('ses_new')}"}, sessions
    assert "PostgreSQL 16" in files[f"machines/{a.id}/{session_path('ses_new')}"].decode()

    # retention: an output unused for longer than max_unused_days leaves the folder
    clock.advance((a.settings.max_unused_days + 1) * DAY)
    assert a.sync().status == "pushed"
    assert not [p for p in remote_files(remote) if "/sessions/" in p]


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_remote_sessions_are_searchable_at_once_and_scoped_by_repository(
    tmp_path: Path, machines: tuple[Machine, Machine]
) -> None:
    a, b = machines
    # One repository, two checkouts at different paths (an ssh clone on A, https on B).
    ca, cb, other = tmp_path / "work" / "shop", tmp_path / "src" / "shop-b", tmp_path / "misc"
    for folder, url in (
        (ca, "git@github.com:acme/shop.git"),
        (cb, "https://github.com/Acme/shop"),
        (other, "https://github.com/acme/other.git"),
    ):
        folder.mkdir(parents=True)
        _git("init", "-q", cwd=folder)
        _git("remote", "add", "origin", url, cwd=folder)
    extract(a, "ses_shop", "Checkout totals are computed in cents", cwd=str(ca))
    extract(b, "ses_b_shop", "B works on the shop too", cwd=str(cb))
    extract(b, "ses_b_misc", "B also has another project", cwd=str(other))
    assert a.sync().ok and b.sync().ok
    assert b.store.outputs.consumed_count() == 0

    key_b = scope_key(str(cb))
    found = memory_search(
        b.paths.memories, SearchQuery("totals are computed"), scope=Scope("project", key_b)
    )
    assert len({m.path for m in found.matches}) == 1, found.matches
    hit = found.matches[0]
    assert hit.path.startswith(f"extensions/sync/resources/{a.id}/projects/{key_b}/sessions/")
    text = (b.paths.memories / hit.path).read_text()
    assert f"machine: {a.id}" in text and f"project: {key_b}" in text
    # another project of B's does not see it; the whole-memory scope does
    assert not memory_search(
        b.paths.memories,
        SearchQuery("totals are computed"),
        scope=Scope("project", scope_key(str(other))),
    ).matches
    assert memory_search(
        b.paths.memories, SearchQuery("totals are computed"), scope=Scope("all")
    ).matches
    snap = sync_snapshot(b.store, b.settings)
    assert snap["received"]["sessions"] == 1 and snap["received"]["machines"] == 1
    assert snap["last_success"] and snap["interval_s"] == b.settings.sync_interval_s


def test_checkout_identity_matching() -> None:
    for url in (
        "git@github.com:Acme/shop.git",
        "https://github.com/acme/shop",
        "ssh://git@GitHub.com:22/acme/shop.git/",
        "https://token@github.com/acme/shop.git",
    ):
        assert normalise_url(url) == "github.com/acme/shop", url
    assert normalise_url("/srv/git/shop.git") == "srv/git/shop"
    local = [
        Checkout("shop-1", "github.com/acme/shop", "shop"),
        Checkout("notes-2", None, "notes"),
        Checkout("x-3", "github.com/acme/x", "tools"),
    ]
    assert match_project("github.com/acme/shop", "anything", local) == "shop-1"
    assert match_project(None, "notes", local) == "notes-2"
    assert match_project("github.com/me/notes", "notes", local) == "notes-2"  # no URL locally
    assert match_project("github.com/other/tools", "tools", local) is None  # URLs differ
    assert match_project(None, "missing", local) is None
    assert origin_url(None) is None


def test_a_forget_rewrites_history_and_concurrent_pushes_lose_nothing(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = machines
    extract(a, "ses_keep", "Deploys go through ArgoCD")
    extract(a, "ses_gone", "The staging password rotates weekly")
    assert a.sync().ok and b.sync().ok
    for _ in range(3):  # some history holding the text
        extract(a, f"ses_more{_}", f"Another fact {_}")
        assert a.sync().status == "pushed"
    assert any(b"rotates weekly" in blob for blob in reachable_blobs(remote))

    memory_forget(a.store, a.paths.memories, session_id="ses_gone")
    extract(b, "ses_b", "B pushed this meanwhile")
    # B pushes between A's fetch and A's push: A's compare-and-swap loses, A retries on top.
    real_push = transport.SyncRepo.push
    state = {"raced": False}

    def racing_push(
        self: transport.SyncRepo, remote_url: str, base: object, new: object, **kw: bool
    ) -> None:
        if not state["raced"] and self.git_dir == a.paths.sync_git:
            state["raced"] = True
            assert b.sync().status == "pushed"
        real_push(self, remote_url, base, new, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(transport.SyncRepo, "push", racing_push)
    out = a.sync()
    assert state["raced"] and out.status == "pushed" and out.races == 1 and out.rerooted
    monkeypatch.setattr(transport.SyncRepo, "push", real_push)

    assert not any(b"rotates weekly" in blob for blob in reachable_blobs(remote))
    repo = Repo(str(remote))
    try:
        assert checked(Commit, repo[repo.refs[BRANCH]]).parents == []  # one root commit
    finally:
        repo.close()
    files = remote_files(remote)
    assert f"machines/{b.id}/{session_path('ses_b')}" in files  # B's concurrent push survived
    assert f"machines/{a.id}/{session_path('ses_keep')}" in files
    assert f"machines/{a.id}/{session_path('ses_gone')}" not in files
    assert json.loads(files[f"machines/{a.id}/tombstones.json"])["sessions"].keys() == {"ses_gone"}

    # B, still on the old lineage, syncs again: nothing lost, the rewrite reached it, and the
    # forgotten session leaves B's rendered inputs
    assert b.sync().ok
    keys = " ".join(str(p) for p in (b.paths.memories / "extensions").rglob("*.md"))
    assert session_key("ses_gone") not in keys and session_key("ses_keep") in keys
    assert sync_snapshot(a.store, a.settings)["rerooted_at"]
    # a sync with nothing removed is an ordinary commit on top of the root again
    extract(a, "ses_after", "Later fact")
    assert a.sync().status == "pushed"
    repo = Repo(str(remote))
    try:
        assert len(checked(Commit, repo[repo.refs[BRANCH]]).parents) == 1
    finally:
        repo.close()


@pytest.mark.anyio
async def test_the_daemon_syncs_after_a_pass_that_extracted(
    monkeypatch: pytest.MonkeyPatch, paths: object, remote: Path
) -> None:
    from memoryd.read.usage import IngestResult
    from memoryd.runtime import daemon as daemon_mod
    from memoryd.store.home import App
    from memoryd.write.passes import PassResult
    from memoryd.write.phase1 import Phase1Report
    from memoryd.write.phase2 import Phase2Result, Phase2Status

    monkeypatch.setenv("MEMORYD_SYNC_REMOTE", str(remote))
    monkeypatch.setattr(daemon_mod, "SYNC_CHECK_S", 3600)  # only the pass may trigger it
    app = App(paths)  # type: ignore[arg-type]
    app.store.ledger.put_state(SYNC_STATE, {"next_due": 2**62})

    async def extracted(app: App, **kw: object) -> PassResult:
        await asyncio.sleep(0.5)
        # no consolidation: the cooldown holds it
        return PassResult(
            Phase1Report(succeeded=1), Phase2Result(Phase2Status.SKIPPED_COOLDOWN), IngestResult()
        )

    async def no_tick(app: object, *, judge_edits: bool) -> None:
        return None

    monkeypatch.setattr(daemon_mod, "run_pass", extracted)
    monkeypatch.setattr(daemon_mod, "daemon_tick", no_tick)
    d = daemon_mod.Daemon(app, interval_s=3600)
    serving = asyncio.create_task(d.serve())
    try:
        for _ in range(200):
            if engine.sync_state(app.store).get("last_success"):
                break
            await asyncio.sleep(0.05)
        assert engine.sync_state(app.store).get("last_success")
    finally:
        d.handle_exit(15)
        await asyncio.wait_for(serving, 10)


def test_a_new_baseline_leaves_arrived_remote_memory_as_new_input(tmp_path: Path) -> None:
    from memoryd.folder.baseline import Baseline

    root = tmp_path / "memories"
    (root / "extensions" / "sync" / "resources" / "m-1" / "sessions").mkdir(parents=True)
    arrived = root / "extensions" / "sync" / "resources" / "m-1" / "sessions" / "k.md"
    arrived.write_text("session_id: s\n- a remote fact\n")
    (root / "MEMORY.md").write_text("# Memory\n")
    baseline = Baseline(tmp_path / "baseline.git", root)
    assert baseline.ensure()
    changed = {c.path for c in baseline.diff().changes}
    assert changed == {"extensions/sync/resources/m-1/sessions/k.md"}, changed
