"""Sync through a git remote: publication, reading other machines, tombstones, races, backoff, secrets.

Two (or three) memoryd homes share one bare repository through a plain path, which is dulwich's
local transport: the same code path as git:// and ssh apart from the socket (the e2e test drives
a real ``git daemon``). Only the clock is faked.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.repo import Repo

from memoryd.clock import ManualClock
from memoryd.errors import ConfigError, SyncError
from memoryd.folder.layout import AD_HOC_NOTES
from memoryd.paths import Paths
from memoryd.settings import Settings, load_settings
from memoryd.store import Store
from memoryd.store.keys import SYNC_STATE
from memoryd.sync import engine
from memoryd.sync import git as transport
from memoryd.sync.branch import BRANCH, session_key, session_path
from memoryd.sync.engine import exchange, run_sync, sync_due
from memoryd.sync.inputs import import_sync, read_remote, remote_tombstones
from memoryd.sync.publish import build_publication, machine_id
from memoryd.tools.notes import memory_add_note, memory_forget
from memoryd.tuning import GIT_MODE_FILE, GIT_MODE_TREE
from memoryd.write.snapshot import snapshot
from tests.conftest import T0
from tests.narrow import checked, present

SECRET = "sk-proj-Zq8XwV3mT1uP6yR4nL0kJ7hG2fD5sA9cB1"


async def no_tick(app: object, *, judge_edits: bool) -> None:
    """The daemon's tick, left out (these tests drive passes only)."""


class Machine:
    def __init__(self, root: Path, remote: str, clock: ManualClock) -> None:
        home = root
        self.paths = Paths(
            config_file=home / "config.toml", data_dir=home, state_dir=home / "state"
        )
        self.paths.ensure_dir(home)
        self.clock = clock
        self.store = Store(self.paths.db, clock=clock)
        self.settings = Settings(sync_remote=remote)

    @property
    def id(self) -> str:
        return machine_id(self.store)

    def remember(self, sid: str, fact: str, *, wm: int = T0) -> None:
        c = self.store.stage1.claim_stage1(sid, wm, max_running=100, worker_id="w")
        assert self.store.stage1.mark_stage1_succeeded(
            sid,
            present(c.token),
            raw_memory=f"- {fact}",
            rollout_summary=f"Summary: {fact}",
            rollout_slug="slug",
            cwd="/home/dev/project",
            title=f"title {sid}",
        )
        claim = self.store.phase2.claim_phase2(worker_id="w", ignore_cooldown=True)
        selected = [(o.session_id, o.source_updated_at) for o in self.store.outputs.newest_first()]
        assert claim.token and self.store.phase2.mark_phase2_succeeded(
            claim.token, selected, consolidated=True, watermark=wm
        )

    def sync(self) -> engine.SyncOutcome:
        return asyncio.run(run_sync(self.store, self.settings, self.paths, self.clock))

    def inputs(self) -> dict[str, str]:
        forgotten = set(self.store.tombstones.tombstones())
        forgotten |= {s for s, m in self.store.outputs.memory_modes().items() if m != "enabled"}
        self.paths.memories.mkdir(exist_ok=True)  # phase 2 lays the folder out first
        import_sync(
            self.paths.memories,
            self.paths.sync_git,
            enabled=bool(self.settings.sync_remote),
            own_id=self.id,
            forgotten=forgotten,
            limit=256,
        )
        base = self.paths.memories / "extensions" / "sync"
        if not base.exists():
            return {}
        return {
            str(p.relative_to(base)): p.read_text() for p in sorted(base.rglob("*")) if p.is_file()
        }


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    path = tmp_path / "remote.git"
    assert transport.init_remote(str(path)) and not transport.init_remote(str(path))
    return path


@pytest.fixture
def machines(tmp_path: Path, remote: Path, clock: ManualClock) -> tuple[Machine, Machine]:
    return Machine(tmp_path / "a", str(remote), clock), Machine(tmp_path / "b", str(remote), clock)


def remote_files(remote: Path) -> dict[str, bytes]:
    repo = Repo(str(remote))
    try:
        head = repo.refs[BRANCH]
        tree = repo[checked(Commit, repo[head]).tree]
        out: dict[str, bytes] = {}
        for entry in repo.object_store.iter_tree_contents(tree.id):
            out[entry.path.decode()] = repo.object_store[entry.sha].as_raw_string()
        return out
    finally:
        repo.close()


def test_sync_remote_setting(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    assert load_settings(cfg, {}).sync_remote is None
    got = load_settings(cfg, {"MEMORYD_SYNC_REMOTE": "git://127.0.0.1/memory.git"})
    assert got.sync_remote == "git://127.0.0.1/memory.git" and got.sources["sync_remote"] == "env"
    for ok in ("/srv/memory.git", "~/memory.git", "git@host:me/memory.git", "https://h/x.git"):
        assert Settings(sync_remote=ok).sync_remote == ok
    for bad in ("relative/path.git", "ftp://h/x.git"):
        with pytest.raises(ConfigError, match="sync_remote"):
            load_settings(cfg, {"MEMORYD_SYNC_REMOTE": bad})


def test_a_token_in_the_remote_url_is_never_shown(
    tmp_path: Path, clock: ManualClock, paths: Paths
) -> None:
    from memoryd.tools.admin import memory_inspect

    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    url = f"https://alice:{token}@127.0.0.1:9/me/memory.git"
    a = Machine(tmp_path / "a", url, clock)
    a.settings = load_settings(tmp_path / "none.toml", {"MEMORYD_SYNC_REMOTE": url})
    out = a.sync()
    assert out.status == "failed"
    shown = json.dumps(
        [
            out.detail,
            snapshot(a.store, a.settings, a.paths),
            memory_inspect(a.store, a.settings, a.paths).to_dict(),
        ]
    )
    assert token not in shown and "127.0.0.1:9/me/memory.git" in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://alice:s3cret-Pa55@h.example/me/m.git", "https://***@h.example/me/m.git"),
        ("https://{tok}@h.example/me/m.git", "https://***@h.example/me/m.git"),
        ("https://{tok}:x-oauth-basic@h.example:8443/m.git", "https://***@h.example:8443/m.git"),
        ("ssh://git@h.example/me/m.git", "ssh://git@h.example/me/m.git"),
        ("ssh://git:hunter2@h.example/me/m.git", "ssh://***@h.example/me/m.git"),
        ("ssh://alice@h.example/me/m.git", "ssh://***@h.example/me/m.git"),
        ("git@h.example:me/m.git", "git@h.example:me/m.git"),
        ("{tok}@h.example:me/m.git", "***@h.example:me/m.git"),
        ("git://h.example/m.git", "git://h.example/m.git"),
        ("/srv/memory.git", "/srv/memory.git"),
    ],
)
def test_remote_user_info_is_never_shown(url: str, shown: str) -> None:
    tok = "ghp" + "Zq8XwV3mT1uP6yR4nL0kJ7hG2fD5sA9cB1"  # no ghp_ prefix: patterns miss it
    url = url.format(tok=tok)
    assert transport.display_remote(url) == shown
    err = transport._errors(url)(OSError(f"HTTP 401 for {url}"))
    assert tok not in str(err) and "s3cret" not in str(err) and "hunter2" not in str(err)


def test_a_token_as_the_user_name_is_not_stored(tmp_path: Path, clock: ManualClock) -> None:
    from memoryd.tools.admin import memory_inspect

    token = "tok" + "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
    url = f"https://{token}@127.0.0.1:9/me/memory.git"
    a = Machine(tmp_path / "a", url, clock)
    a.settings = load_settings(tmp_path / "none.toml", {"MEMORYD_SYNC_REMOTE": url})
    out = a.sync()
    assert out.status == "failed"
    stored = json.dumps(engine.sync_state(a.store))
    shown = json.dumps(
        [
            out.detail,
            snapshot(a.store, a.settings, a.paths),
            memory_inspect(a.store, a.settings, a.paths).to_dict(),
        ]
    )
    assert token not in stored and token not in shown
    assert "https://***@127.0.0.1:9/me/memory.git" in stored


def test_a_session_remembered_on_a_reaches_b(
    machines: tuple[Machine, Machine], remote: Path
) -> None:
    a, b = machines
    a.remember("ses_a1", "Billing uses PostgreSQL 16")
    memory_add_note(a.paths.memories, "Always run the linters before pushing", clock=a.clock)
    first = a.sync()
    assert first.status == "pushed", first.detail
    files = remote_files(remote)
    mine = f"machines/{a.id}/{session_path('ses_a1')}"
    assert json.loads(files[mine])["raw_memory"] == "- Billing uses PostgreSQL 16"
    assert any(p.startswith(f"machines/{a.id}/notes/") for p in files)
    assert a.inputs() == {}  # a machine never reads its own folder back

    out = b.sync()
    assert out.status == "pushed" and out.machines == 1 and out.inputs_changed
    assert present(b.store.phase2.phase2_job())[
        "input_watermark"
    ]  # B's next pass knows there is new input
    got = b.inputs()
    session = got[f"resources/{a.id}/sessions/{session_key('ses_a1')}.md"]
    assert "session_id: ses_a1" in session and "Billing uses PostgreSQL 16" in session
    assert f"machine: {a.id}" in session
    assert [k for k in got if "/notes/" in k] and "instructions.md" in got
    # B published its own (empty) folder and A now sees one other machine, but no inputs
    assert a.sync().machines == 1 and a.inputs() == {}
    # nothing changed: a second sync pushes nothing
    assert b.sync().status == "up_to_date"


def test_forgetting_on_a_removes_it_on_b_and_nothing_resurrects_it(
    tmp_path: Path, machines: tuple[Machine, Machine], remote: Path, clock: ManualClock
) -> None:
    a, b = machines
    c = Machine(tmp_path / "c", str(remote), clock)
    a.remember("ses_keep", "Deploys go through ArgoCD")
    a.remember("ses_gone", "The staging password rotates weekly")
    # C holds a copy of the same session (a shared opencode, a restored backup...)
    c.remember("ses_gone", "The staging password rotates weekly")
    for m in (a, c, b):
        assert m.sync().ok
    assert len([k for k in b.inputs() if "/sessions/" in k]) == 3

    memory_forget(a.store, a.paths.memories, session_id="ses_gone")
    assert a.store.tombstones.tombstones().keys() == {"ses_gone"}
    assert a.sync().status == "pushed"
    assert f"machines/{a.id}/tombstones.json" in remote_files(remote)
    out = b.sync()
    assert out.inputs_changed
    job = present(b.store.phase2.phase2_job())
    assert job["cooldown_until"] is None  # forgetting is urgent on every machine
    left = b.inputs()
    assert [k for k in left if "/sessions/" in k] == [
        f"resources/{a.id}/sessions/{session_key('ses_keep')}.md"
    ]  # C's copy is not rendered either: the tombstone wins
    assert not any("rotates weekly" in text for text in left.values())

    # C honours the tombstone: its own copy is forgotten and no longer published
    out = c.sync()
    assert out.honoured == ["ses_gone"] and c.store.outputs.output("ses_gone") is None
    assert c.store.outputs.memory_mode("ses_gone") == "disabled"
    assert not [p for p in remote_files(remote) if p.startswith(f"machines/{c.id}/sessions/")]


def test_forgetting_another_machines_session_on_b(machines: tuple[Machine, Machine]) -> None:
    a, b = machines
    a.remember("ses_a", "Use ruff, not flake8")
    a.sync()
    b.sync()
    assert b.inputs()
    res = memory_forget(b.store, b.paths.memories, session_id="ses_a")
    assert "another machine" in res.to_text()
    assert b.inputs() == {}  # gone from B at once
    b.sync()
    assert a.sync().honoured == ["ses_a"]  # and A forgets its own session
    assert a.store.outputs.output("ses_a") is None


def test_a_remote_ref_locked_by_another_push_is_a_lost_race_not_a_failure(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote on this disk: another machine's push holds the ref's lock file for a moment."""
    a, _ = machines
    a.remember("ses_a", "fact from A")
    pub = build_publication(a.store, a.paths.memories, 30)
    lock = remote / "refs" / "heads" / "memoryd-sync.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(b"")
    real_fetch = transport.SyncRepo.fetch
    fetches = []

    def fetch_then_release(self: transport.SyncRepo, url: str):  # type: ignore[no-untyped-def]
        fetches.append(url)
        if len(fetches) == 2:
            lock.unlink()  # the other push finished
        return real_fetch(self, url)

    monkeypatch.setattr(transport.SyncRepo, "fetch", fetch_then_release)
    result = exchange(a.paths.sync_git, str(remote), pub)
    assert result.pushed and result.races == 1
    assert f"machines/{a.id}/{session_path('ses_a')}" in remote_files(remote)


def test_both_pushing_at_once_loses_neither(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = machines
    a.remember("ses_a", "fact from A")
    b.remember("ses_b", "fact from B")
    pub_a = build_publication(a.store, a.paths.memories, 30)
    pub_b = build_publication(b.store, b.paths.memories, 30)
    real_fetch = transport.SyncRepo.fetch
    raced: list[bool] = []

    def fetch_then_b_pushes(self: transport.SyncRepo, url: str):  # type: ignore[no-untyped-def]
        head = real_fetch(self, url)
        if self.git_dir == a.paths.sync_git and not raced:
            raced.append(True)  # B pushes between A's fetch and A's push
            assert exchange(b.paths.sync_git, url, pub_b).pushed
        return head

    monkeypatch.setattr(transport.SyncRepo, "fetch", fetch_then_b_pushes)
    result = exchange(a.paths.sync_git, str(remote), pub_a)
    assert result.pushed and result.races == 1
    files = remote_files(remote)
    assert f"machines/{a.id}/{session_path('ses_a')}" in files
    assert f"machines/{b.id}/{session_path('ses_b')}" in files
    repo = Repo(str(remote))
    head = checked(Commit, repo[repo.refs[BRANCH]])
    assert len(head.parents) == 1  # A's commit sits on top of B's, nothing was overwritten
    repo.close()


def test_offline_remote_queues_with_backoff_and_recovers(
    machines: tuple[Machine, Machine], remote: Path, clock: ManualClock, tmp_path: Path
) -> None:
    a, _ = machines
    a.settings = Settings(sync_remote="git://127.0.0.1:9/memory.git")  # discard port: refused
    a.remember("ses_a", "fact from A")
    out = a.sync()
    assert out.status == "failed" and "127.0.0.1" in out.detail
    snap = snapshot(a.store, a.settings, a.paths)["sync"]
    assert snap["state"] == "retrying" and snap["last_error"] and snap["last_success"] is None
    assert snap["pending"]["added"] == 2  # machine.json and the session wait to be pushed
    assert not sync_due(a.store, a.settings, clock)
    clock.advance(31_000)
    assert sync_due(a.store, a.settings, clock)
    a.sync()
    assert engine.sync_state(a.store)["retry_at"] - clock.now_ms() == 60_000  # doubled
    assert a.store.outputs.output("ses_a") is not None  # local memory untouched

    a.settings = Settings(sync_remote=str(remote))  # the remote is back (a path this time)
    out = a.sync()
    assert out.status == "pushed"
    snap = snapshot(a.store, a.settings, a.paths)["sync"]
    assert snap["state"] == "ok" and snap["last_error"] is None and snap["failures"] == 0
    assert snap["pending"]["added"] == 0 and snap["last_success"]
    assert f"machines/{a.id}/{session_path('ses_a')}" in remote_files(remote)


def test_a_missing_path_is_offline_and_never_created(tmp_path: Path, clock: ManualClock) -> None:
    gone = tmp_path / "unmounted" / "memory.git"
    gone.parent.mkdir()
    a = Machine(tmp_path / "a", str(gone), clock)
    out = a.sync()
    assert out.status == "failed" and "--init" in out.detail
    assert not gone.exists()  # an unmounted share must not become a new, empty remote
    (gone.parent / "stray.txt").write_text("x")
    with pytest.raises(SyncError, match="not a repository"):
        transport.init_remote(str(gone.parent))


def test_a_flagged_secret_stops_the_push(machines: tuple[Machine, Machine], remote: Path) -> None:
    a, b = machines
    b.remember("ses_b", "fact from B")
    b.sync()
    a.remember("ses_a", "fact from A")
    notes = a.paths.memories.joinpath(*AD_HOC_NOTES.split("/"))
    notes.mkdir(parents=True)
    (notes / "keys.md").write_text(f"the key is {SECRET}\n")  # dropped in by hand
    out = a.sync()
    assert out.status == "blocked" and "notes/keys.md" in out.detail
    assert SECRET not in out.detail
    assert not any(p.startswith(f"machines/{a.id}/") for p in remote_files(remote))
    assert out.machines == 1 and a.inputs()  # pulling still works
    snap = snapshot(a.store, a.settings, a.paths)["sync"]
    assert snap["state"] == "blocked" and snap["blocked"][0]["path"] == "notes/keys.md"
    (notes / "keys.md").unlink()
    assert a.sync().status == "pushed"


def test_hostile_remote_files_are_checked_and_redacted(
    machines: tuple[Machine, Machine], remote: Path
) -> None:
    a, b = machines
    a.remember("ses_a", f"token {SECRET} leaked")  # as if another memoryd published it raw
    a.store._conn.execute(
        "UPDATE stage1_outputs SET raw_memory = ? WHERE session_id = 'ses_a'",
        (f"- token {SECRET} leaked",),
    )
    pub = build_publication(a.store, a.paths.memories, 30)
    files = dict(pub.files)
    files["sessions/0/" + "0" * 24 + ".json"] = b'{"format": 1, "session_id": "other"}'
    files["sessions/" + session_key("ses_x") + ".json"] = files[session_path("ses_a")]  # unsharded
    files["notes/../../escape.md"] = b"nope"
    forged = type(pub)(pub.machine_id, files, 1, 0, 0)
    exchange(a.paths.sync_git, str(remote), forged)  # bypasses the scan on purpose
    b.sync()
    got = b.inputs()
    sessions = [k for k in got if "/sessions/" in k]
    assert sessions == [f"resources/{a.id}/sessions/{session_key('ses_a')}.md"]
    assert SECRET not in got[sessions[0]] and "leaked" in got[sessions[0]]
    assert not any("escape" in k for k in got)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_an_incremental_sync_moves_only_what_changed(
    machines: tuple[Machine, Machine], remote: Path
) -> None:
    a, b = machines
    for i in range(150):
        a.remember(f"ses_{i:03d}", f"fact number {i} " + "padding words " * 40)
    a.sync()
    b.sync()
    before_b, before_remote = folder_bytes(b.paths.sync_git), folder_bytes(remote)
    a.remember("ses_new", "one more fact")
    assert a.sync().status == "pushed"
    assert b.sync().inputs_changed
    # 150 sessions are ~130 KB; one more must not re-send them (the cache offers its head as
    # "have" when fetching, and a push sends only objects the remote lacks)
    assert folder_bytes(b.paths.sync_git) - before_b < 20_000
    assert folder_bytes(remote) - before_remote < 20_000
    assert transport.blob_id(b"abc") == Blob.from_string(b"abc").id


@pytest.mark.anyio
async def test_the_daemon_syncs_after_a_validated_consolidation(
    monkeypatch: pytest.MonkeyPatch, paths: Paths, remote: Path
) -> None:
    from memoryd.read.usage import IngestResult
    from memoryd.runtime import daemon as daemon_mod
    from memoryd.store.home import App
    from memoryd.write.passes import PassResult
    from memoryd.write.phase1 import Phase1Report
    from memoryd.write.phase2 import Phase2Result, Phase2Status

    monkeypatch.setenv("MEMORYD_SYNC_REMOTE", str(remote))
    monkeypatch.setattr(daemon_mod, "SYNC_CHECK_S", 3600)  # only the consolidation may trigger it
    app = App(paths)
    app.store.ledger.put_state(SYNC_STATE, {"next_due": 2**62})  # the timer is far away

    async def consolidated(app: App, **kw: object) -> PassResult:
        await asyncio.sleep(0.5)  # the sync job's check at start finds nothing due
        return PassResult(Phase1Report(), Phase2Result(Phase2Status.SUCCEEDED), IngestResult())

    monkeypatch.setattr(daemon_mod, "run_pass", consolidated)
    monkeypatch.setattr(daemon_mod, "daemon_tick", no_tick)
    d = daemon_mod.Daemon(app, interval_s=3600)
    serving = asyncio.create_task(d.serve())
    try:
        for _ in range(200):
            if engine.sync_state(app.store).get("last_success"):
                break
            await asyncio.sleep(0.05)
        mid = machine_id(app.store)
        assert f"machines/{mid}/machine.json" in remote_files(remote)
    finally:
        d.handle_exit(15)
        await asyncio.wait_for(serving, 10)


def _plant(machine: Machine, mid: str, folder: ObjectID) -> None:
    """Make the fetched head carry ``machines/<mid>`` = ``folder`` next to what is there."""
    repo = transport.SyncRepo(machine.paths.sync_git)
    try:
        head = repo.tracking_head()
        root = repo.compose(repo.root_tree(head), mid, folder)
        repo.set_tracking(repo.commit(root, head, "hostile"))
    finally:
        repo.close()


def _tree(repo: transport.SyncRepo, entries: dict[bytes, tuple[int, ObjectID]]) -> ObjectID:
    t = Tree()
    for name, (mode, sha) in entries.items():
        t.add(name, mode, sha)
    repo.repo.object_store.add_object(t)
    return t.id


def test_one_hostile_machine_folder_skips_that_machine_only(
    machines: tuple[Machine, Machine], remote: Path
) -> None:
    a, b = machines
    a.remember("ses_a", "a fact from a")
    a.sync()
    b.sync()
    assert any(k.endswith(".md") for k in b.inputs())
    repo = transport.SyncRepo(b.paths.sync_git)
    try:
        blob = Blob.from_string(b"x")
        repo.repo.object_store.add_object(blob)
        deep = _tree(repo, {b"f": (GIT_MODE_FILE, blob.id)})
        for _ in range(3000):  # nested far past the interpreter's recursion limit
            deep = _tree(repo, {b"d": (GIT_MODE_TREE, deep)})
        missing = _tree(repo, {b"sessions": (GIT_MODE_TREE, ObjectID(b"1" * 40))})
    finally:
        repo.close()
    _plant(b, "deep-00000001", deep)
    _plant(b, "gone-00000001", missing)
    got = b.inputs()  # before the fix: RecursionError / KeyError out of phase 2's preparation
    assert f"resources/{a.id}/sessions/{session_key('ses_a')}.md" in got
    assert not any("deep-" in k or "gone-" in k for k in got)
    repo = transport.SyncRepo(b.paths.sync_git)
    try:
        read = read_remote(repo, b.id)
        assert set(read.machines) == {a.id}
        assert set(read.skipped) == {"deep-00000001", "gone-00000001"}
        assert "deeper" in read.skipped["deep-00000001"]
        assert "missing" in read.skipped["gone-00000001"]
        dead, skipped = remote_tombstones(repo, repo.tracking_head(), b.id)
        assert set(skipped) == {"deep-00000001", "gone-00000001"}
    finally:
        repo.close()


def test_a_machine_skipped_once_keeps_its_rendered_inputs(
    machines: tuple[Machine, Machine], remote: Path
) -> None:
    a, b = machines
    a.remember("ses_a", "a fact from a")
    a.sync()
    b.sync()
    before = b.inputs()
    assert before
    repo = transport.SyncRepo(b.paths.sync_git)
    try:
        broken = _tree(repo, {b"sessions": (GIT_MODE_TREE, ObjectID(b"2" * 40))})
    finally:
        repo.close()
    _plant(b, a.id, broken)  # a's folder now points at a tree the cache lacks
    assert b.inputs() == before  # not read as "a forgot everything"


def test_caps_on_notes_and_machines(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.sync import inputs

    a, b = machines
    a.remember("ses_a", "a fact from a")
    a.sync()
    b.sync()
    monkeypatch.setattr(inputs, "SYNC_MAX_SESSIONS_PER_MACHINE", 0)
    repo = transport.SyncRepo(b.paths.sync_git)
    try:
        read = read_remote(repo, b.id)
        assert not read.machines and "sessions" in read.skipped[a.id]
        monkeypatch.setattr(inputs, "SYNC_MAX_SESSIONS_PER_MACHINE", 10)
        monkeypatch.setattr(inputs, "SYNC_MAX_MACHINES", 0)
        read = read_remote(repo, b.id)
        assert not read.machines and "machines" in read.skipped[a.id]
    finally:
        repo.close()
    out = b.sync()
    assert out.ok
    snap = snapshot(b.store, b.settings, b.paths)["sync"]
    assert a.id in snap["skipped_machines"]


def test_blob_sizes_are_read_from_the_header_before_inflating(
    tmp_path: Path, remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = b"0" * (256 * 1024)  # compresses to a few KiB: a cheap push, a costly read
    small = b"hello"
    loose = transport.SyncRepo(tmp_path / "loose.git")
    try:
        for data in (big, small):
            loose.repo.object_store.add_object(Blob.from_string(data))
        store = loose.repo.object_store
        assert transport.object_size(store, Blob.from_string(big).id) == len(big)
        assert transport.object_size(store, ObjectID(b"3" * 40)) is None
        calls: list[ObjectID] = []
        real = store.get_raw

        def counted(sha: ObjectID) -> tuple[int, bytes]:
            calls.append(sha)
            return real(sha)

        monkeypatch.setattr(store, "get_raw", counted)
        assert loose.blob(Blob.from_string(big).id, 1024) is None
        assert calls == []  # refused without inflating it
        assert loose.blob(Blob.from_string(small).id, 1024) == small
    finally:
        loose.close()
    # The same through a pack, deltas included (what a fetch stores).
    src = Repo.init_bare(str(tmp_path / "src.git"), mkdir=True)
    try:
        blobs = [Blob.from_string(big), Blob.from_string(big[:-1] + b"1"), Blob.from_string(small)]
        src.object_store.add_objects([(b, None) for b in blobs])
        packed = transport.SyncRepo(tmp_path / "packed.git")
        try:
            packed.repo.object_store.add_objects([(b, None) for b in blobs])
            packed.repo.object_store.pack_loose_objects()
            store = packed.repo.object_store
            assert store.packs
            for b in blobs:
                assert transport.object_size(store, b.id) == len(b.as_raw_string())
            assert packed.blob(blobs[1].id, 1024) is None
            assert packed.blob(blobs[2].id, 1024) == small
        finally:
            packed.close()
    finally:
        src.close()


def test_a_tombstone_removed_from_the_remote_resurrects_nothing(
    machines: tuple[Machine, Machine], remote: Path, tmp_path: Path
) -> None:
    from memoryd.sync.branch import tombstones_bytes

    a, b = machines
    a.remember("ses_a", "a fact from a")
    b.remember("ses_b", "b's own fact")
    a.sync()
    b.sync()
    assert f"resources/{a.id}/sessions/{session_key('ses_a')}.md" in b.inputs()
    pub = build_publication(a.store, a.paths.memories, 30)
    evil = tmp_path / "evil.git"

    def push_third(files: dict[str, bytes]) -> None:
        exchange(evil, str(remote), type(pub)("evil-00000001", files, 0, 0, len(files)))

    push_third({"tombstones.json": tombstones_bytes({"ses_a": T0, "ses_b": T0})})
    out = b.sync()
    assert out.honoured == ["ses_b"]
    assert not any(session_key("ses_a") in k for k in b.inputs())
    assert {"ses_a", "ses_b"} <= set(b.store.tombstones.tombstones())
    push_third({"notes/x.md": b"tombstones gone\n"})  # the writer takes its tombstones back
    b.sync()
    assert not any(session_key("ses_a") in k for k in b.inputs())  # still forgotten
    assert b.store.outputs.output("ses_b") is None
    assert {"ses_a", "ses_b"} <= set(b.store.tombstones.tombstones())


def test_a_push_landing_while_a_fetch_packs_leaves_a_head_whose_objects_came(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote on this disk reads its refs again after making the pack: B's push landing in
    between made A record B's new head, whose objects A never received, and A's next read of it
    failed (seen once in the sync e2e, both machines syncing at once)."""
    a, b = machines
    a.remember("ses_a", "fact from A")
    b.remember("ses_b", "fact from B")
    assert a.sync().status == "pushed"
    pub_b = build_publication(b.store, b.paths.memories, 30)
    real_find = Repo.find_missing_objects
    landed: list[bool] = []

    def find_then_b_pushes(self: Repo, *args, **kwargs):  # type: ignore[no-untyped-def]
        missing = real_find(self, *args, **kwargs)
        if not landed:
            landed.append(True)  # A's wants are fixed; B's push lands before A's refs are read
            assert exchange(b.paths.sync_git, str(remote), pub_b).pushed
        return missing

    monkeypatch.setattr(Repo, "find_missing_objects", find_then_b_pushes)
    repo = transport.SyncRepo(a.paths.sync_git)
    try:
        head = repo.fetch(str(remote))
        assert landed and head is not None
        assert repo.machines(head)  # its objects are here: this read failed before
    finally:
        repo.close()
    monkeypatch.undo()
    assert a.sync().ok  # and the next sync takes B's head as usual
    assert any(f"{b.id}/" in k for k in a.inputs())


def test_a_remote_naming_a_head_it_never_sends_is_a_clear_failure(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote that advertises a head and sends no objects for it (hostile, or broken) fails
    the sync with a message, and records nothing; it used to record the head, and the next read
    of it raised a bare ``KeyError``."""
    a, b = machines
    a.remember("ses_a", "fact from A")
    assert a.sync().status == "pushed"
    real = transport.SyncRepo._fetch_capped

    def sends_nothing(self, client, path, wants):  # type: ignore[no-untyped-def]
        return real(self, client, path, lambda refs, depth=None: wants(refs, depth) and [])

    monkeypatch.setattr(transport.SyncRepo, "_fetch_capped", sends_nothing)
    out = b.sync()
    assert out.status == "failed" and "did not send" in out.detail, out
    assert b.inputs() == {}
    monkeypatch.undo()
    b.clock.advance(2 * 60 * 60 * 1000)
    assert b.sync().ok and b.inputs()


def test_an_oversized_fetch_is_refused_and_nothing_kept(
    machines: tuple[Machine, Machine], remote: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = machines
    for i in range(10):
        a.remember(f"ses_{i}", f"fact number {i}: the build uses tool {i * 7919}")
    assert a.sync().status == "pushed"
    monkeypatch.setattr(transport, "SYNC_MAX_FETCH_BYTES", 1024)
    out = b.sync()
    assert out.status == "failed" and "MiB in one fetch" in out.detail
    assert b.inputs() == {}  # no head recorded from the refused pack
    assert not list((b.paths.sync_git / "objects" / "pack").glob("*.pack"))
    assert not list((b.paths.sync_git / "objects").glob("incoming-*"))
    monkeypatch.setattr(transport, "SYNC_MAX_FETCH_BYTES", 64 * 1024 * 1024)
    b.clock.advance(2 * 60 * 60 * 1000)
    assert b.sync().ok and len([k for k in b.inputs() if "/sessions/" in k]) == 10


@pytest.mark.parametrize(
    "status",
    [
        "failed to update ref",  # git daemon, two pushes at once (seen in the sync e2e)
        "fetch first",
        "non-fast-forward",
        "cannot lock ref 'refs/heads/memoryd-sync': is at 1234 but expected 5678",
        "unable to set refs/heads/memoryd-sync",
    ],
)
def test_a_push_that_lost_a_race_is_retried_not_reported(status: str) -> None:
    from memoryd.errors import PushRaceLost

    assert isinstance(transport.push_refusal("git://host/memory.git", status), PushRaceLost)


@pytest.mark.parametrize(
    "status",
    [
        "pre-receive hook declined",
        "deny updating a hidden ref",
        "push blocked by the server's policy",  # "blocked" holds "lock": not a race
    ],
)
def test_a_push_the_remote_refuses_says_why(status: str) -> None:
    err = transport.push_refusal("git://host/memory.git", status)
    assert isinstance(err, SyncError) and status in str(err)
