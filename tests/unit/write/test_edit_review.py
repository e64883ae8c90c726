"""A staged agent edit through ``memoryd review`` / ``memoryd status`` and the web UI's
Review page: accept makes it the validated copy and the baseline's, reject drops it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memoryd.cli import main
from memoryd.clock import ManualClock
from memoryd.folder import rollback
from memoryd.folder.baseline import Baseline
from memoryd.folder.layout import is_tracked
from memoryd.folder.validated import ValidatedMemory
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.read.block import sync_block
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.store.home import App
from memoryd.web.app import create_app
from memoryd.web.security import Secrets
from memoryd.write import agent_edits, edit_review, review
from tests.fakehost import FakeOpencode

OLD = 1_700_000_000
SUMMARY = "v1\n- validated: deploys go through CI\n"
EDITED = "v1\n- EDITED-BY-AGENT: deploy from laptops\n"
PORT = 48124
BASE = f"http://127.0.0.1:{PORT}"


def baseline(paths: Paths) -> Baseline:
    return Baseline(paths.baseline_git, paths.memories, exclude=lambda p: not is_tracked(p))


@pytest.fixture
def staged(paths: Paths, store: Store, clock: ManualClock) -> Path:
    """A validated folder with a baseline, then an agent's write judged and staged."""
    root = paths.memories
    root.mkdir(parents=True, exist_ok=True)
    (root / "MEMORY.md").write_text("# Memory\n- validated fact\n")
    (root / "memory_summary.md").write_text(SUMMARY)
    (root / "raw_memories.md").write_text("- input seen by the last consolidation\n")
    for name in ("MEMORY.md", "memory_summary.md", "raw_memories.md"):
        os.utime(root / name, (OLD, OLD))
    baseline(paths).ensure()
    rollback.record(paths, source="a validated run")
    sync_block(paths, Settings())
    # an input that arrived since the last consolidation: still a change after the accept
    (root / "raw_memories.md").write_text("- input seen by the last consolidation\n- a new one\n")
    (root / "memory_summary.md").write_text(EDITED)
    host = FakeOpencode()
    host.add_tool_call(
        "ses_agent00001",
        "write",
        {"filePath": str(root / "memory_summary.md"), "content": EDITED},
        at=time.time_ns() // 1_000_000,
        title="read the deploy page",
    )

    async def judge() -> str | None:
        client = OpencodeClient("http://opencode.test", transport=host.transport())
        return await agent_edits.reconcile(paths, store, clock, client)

    import asyncio

    assert asyncio.run(judge()) == "staged"
    assert (root / "memory_summary.md").read_text() == SUMMARY
    return root


def assert_accepted(paths: Paths) -> None:
    assert edit_review.pending(paths) is None
    assert ValidatedMemory(paths).summary() == EDITED.encode()
    assert (paths.memories / "memory_summary.md").read_text() == EDITED
    assert b"EDITED-BY-AGENT" in paths.readpath_block.read_bytes()
    head = baseline(paths).head_files()
    assert head["memory_summary.md"] == EDITED.encode()
    # the new input is still a change for the next consolidation
    assert head["raw_memories.md"] == b"- input seen by the last consolidation\n"
    changes = {f"{c.status} {c.path}" for c in baseline(paths).diff().changes}
    assert changes == {"M raw_memories.md"}
    # judged: the next look is quiet
    assert rollback.seen_change(paths) is None


def assert_rejected(paths: Paths) -> None:
    assert edit_review.pending(paths) is None
    assert ValidatedMemory(paths).summary() == SUMMARY.encode()
    assert (paths.memories / "memory_summary.md").read_text() == SUMMARY
    assert b"EDITED-BY-AGENT" not in paths.readpath_block.read_bytes()
    assert baseline(paths).head_files()["memory_summary.md"] == SUMMARY.encode()


# -- CLI ----------------------------------------------------------------------------------------


def test_review_and_status_name_the_session_then_accept(
    staged: Path, paths: Paths, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "agent edit" in out and "ses_agent00001" in out and "'read the deploy page'" in out
    assert "memory_summary.md" in out and "not live" in out
    assert main(["review"]) == 0
    out = capsys.readouterr().out
    assert "ses_agent00001" in out and "write" in out and str(staged) in out
    assert "+- EDITED-BY-AGENT" in out and "--accept-edit" in out
    assert main(["review", "--accept"]) == 1  # that is the consolidation's: none is staged
    capsys.readouterr()
    assert main(["review", "--accept-edit"]) == 0
    assert "accepted" in capsys.readouterr().out
    assert_accepted(paths)
    entry = review.history(store)[0]
    assert entry["decision"] == "accepted" and entry["kind"] == "agent_edit"
    assert entry["sessions"] == ["ses_agent00001"]
    assert main(["review", "--accept-edit"]) == 1
    assert "no agent edit is waiting" in capsys.readouterr().err
    assert main(["status", "--json"]) == 0
    assert '"pending": false' in capsys.readouterr().out


def test_reject_through_the_cli(
    staged: Path, paths: Paths, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", "--reject-edit", "a web page wrote that"]) == 0
    assert_rejected(paths)
    entry = review.history(store)[0]
    assert entry["decision"] == "rejected" and entry["reason"] == "a web page wrote that"


def test_accept_refuses_while_a_consolidation_runs(
    staged: Path, paths: Paths, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    claim = store.phase2.claim_phase2(worker_id="someone", ignore_cooldown=True)
    assert claim.claimed
    assert main(["review", "--accept-edit"]) == 1
    assert "busy" in capsys.readouterr().err
    assert edit_review.pending(paths) is not None
    assert store.phase2.release_phase2(claim.token or "", None, status="done")
    assert main(["review", "--accept-edit"]) == 0
    job = store.phase2.phase2_job()
    assert job is not None and job["status"] == "done"  # accepting an edit is not a run


def test_an_edit_that_does_not_validate_stays_staged(
    staged: Path, paths: Paths, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    edit = edit_review.pending(paths)
    assert edit is not None
    (paths.staged_edit / "files" / "memory_summary.md").write_text("no version line\n")
    assert main(["review", "--accept-edit"]) == 1
    assert "does not validate" in capsys.readouterr().err
    assert edit_review.pending(paths) is not None
    assert (paths.memories / "memory_summary.md").read_text() == SUMMARY


# -- web ----------------------------------------------------------------------------------------


@pytest.fixture
def web(paths: Paths, clock: ManualClock) -> Iterator[tuple[TestClient, Secrets, App]]:
    app = App(paths=paths, clock=clock)
    keys = Secrets(port=PORT)
    client = TestClient(create_app(app, keys), base_url=BASE, follow_redirects=False)
    assert client.get(f"/?token={keys.token}").status_code == 303
    yield client, keys, app
    app.close()


def test_the_review_page_shows_the_edit_and_accepts_it(
    staged: Path, paths: Paths, web: tuple[TestClient, Secrets, App]
) -> None:
    client, keys, _app = web
    html = client.get("/review").text
    assert 'id="agent-edit"' in html and "ses_agent00001" in html
    assert "read the deploy page" in html and "<strong>write</strong>" in html
    assert '<span class="add">+- EDITED-BY-AGENT' in html
    assert "Nothing is waiting" not in html
    assert 'class="badge"' in client.get("/").text
    assert client.post("/review/edit/accept", data={}).status_code == 403  # no CSRF token
    assert edit_review.pending(paths) is not None
    r = client.post("/review/edit/accept", data={"csrf": keys.csrf})
    assert r.status_code == 303
    assert_accepted(paths)
    assert "an agent edit (ses_agent00001)" in client.get("/review").text
    assert client.post("/review/edit/accept", data={"csrf": keys.csrf}).status_code == 409


def test_the_review_page_rejects_it(
    staged: Path, paths: Paths, web: tuple[TestClient, Secrets, App]
) -> None:
    client, keys, _app = web
    r = client.post("/review/edit/reject", data={"csrf": keys.csrf, "reason": "not mine"})
    assert r.status_code == 303
    assert_rejected(paths)
    assert "not mine" in client.get("/review").text


def test_the_review_page_says_a_change_is_held(
    paths: Paths, store: Store, clock: ManualClock, web: tuple[TestClient, Secrets, App]
) -> None:
    client, _keys, _app = web
    paths.memories.mkdir(parents=True, exist_ok=True)
    (paths.memories / "memory_summary.md").write_text("v1\n- who?\n")
    agent_edits.hold(store, clock, ["memory_summary.md"], "connection refused")
    html = client.get("/review").text
    assert 'id="edit-held"' in html and "connection refused" in html
