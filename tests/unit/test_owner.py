"""Nothing waits after a crash. Claims and helper sessions name their owning process;
when that process is provably gone the next memoryd takes over at once, without burning a retry."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import HOUR, ManualClock
from memoryd.host.opencode import OpencodeClient
from memoryd.owner import Owner, boot_id, current_owner, owner_gone, pid_space, process_start
from memoryd.paths import Paths
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.write.helpers import remove_orphaned_helpers
from memoryd.write.phase1 import Phase1
from tests.fakehost import FakeOpencode
from tests.narrow import present

pytestmark = pytest.mark.anyio


def dead_owner() -> Owner:
    """The identity of a process that ran on this machine and has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(proc.pid)
    proc.wait()
    return Owner(socket.gethostname(), boot_id(), proc.pid, start or "1", pid_space())


def test_owner_liveness() -> None:
    me = current_owner()
    assert me.pid == os.getpid() and not owner_gone(me)
    assert owner_gone(dead_owner())
    # our own pid, but a process that started at another moment: the pid was reused
    assert owner_gone(Owner(me.host, me.boot, me.pid, me.start + "0", me.space)) == bool(me.start)
    # another machine sharing the home, or an unreadable record: never provably gone
    assert not owner_gone(Owner("some-other-host", me.boot, 1, "1"))
    assert not owner_gone(None)
    assert Owner.decode("{not json") is None
    assert Owner.decode(me.encode()) == me


def test_a_dead_pid_in_another_pid_space_is_not_proof() -> None:
    """Same host name, other pid space (a host-network container, a clone on a shared home)."""
    gone = dead_owner()
    assert owner_gone(gone)
    for space in ("other-machine-id:" + pid_space().split(":")[1], pid_space() + "0", None):
        assert not owner_gone(Owner(gone.host, gone.boot, gone.pid, gone.start, space))
    assert Owner.decode('{"host":"h","boot":"b","pid":1,"start":"s"}') == Owner("h", "b", 1, "s")


def test_a_dead_owners_stage1_claim_is_taken_over_at_once(store: Store, clock: ManualClock) -> None:
    first = store.stage1.claim_stage1(
        "ses_a", 100, max_running=1, worker_id="w1", owner=dead_owner()
    )
    assert first.claimed
    # the lease has an hour to run, yet the owner is gone: no wait, no retry burned, no cap slot held
    other = store.stage1.claim_stage1("ses_b", 100, max_running=1, worker_id="w2")
    assert other.claimed, "a crashed owner's claim still counts against the running cap"
    again = store.stage1.claim_stage1("ses_a", 100, max_running=2, worker_id="w2")
    assert again.claimed and again.token != first.token
    assert present(store.stage1.stage1_job("ses_a"))["retry_remaining"] == 3
    # and the crashed worker can no longer finalize anything
    assert not store.stage1.mark_stage1_failed("ses_a", present(first.token), "x")


def test_a_live_owners_claim_still_waits_for_the_lease(store: Store, clock: ManualClock) -> None:
    assert store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w1").claimed
    assert store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w2").status == (
        "skipped_running"
    )
    clock.advance(HOUR + 1)
    assert store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w2").claimed


def test_release_orphaned_claims_returns_them_to_pending(store: Store, clock: ManualClock) -> None:
    gone = dead_owner()
    store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w1", owner=gone)
    store.stage1.claim_stage1("ses_live", 100, max_running=4, worker_id="w1")
    store.phase2.claim_phase2(worker_id="w1", owner=gone)
    released = store.owners.release_orphaned_claims()
    assert sorted(released) == [("memory_consolidate_global", "global"), ("memory_stage1", "ses_a")]
    job = present(store.stage1.stage1_job("ses_a"))
    assert job["status"] == "pending" and job["retry_remaining"] == 3 and job["retry_at"] is None
    assert f"pid {gone.pid}" in job["last_error"]
    assert present(store.stage1.stage1_job("ses_live"))["status"] == "running"
    assert present(store.phase2.phase2_job())["status"] == "pending"


def test_a_dead_owners_phase2_lease_is_taken_over(store: Store) -> None:
    assert store.phase2.claim_phase2(worker_id="a", owner=dead_owner()).claimed
    assert store.phase2.claim_phase2(worker_id="b").claimed


async def test_helpers_are_recorded_before_the_prompt_and_orphans_removed_at_once(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode()
    now = clock.now_ms()
    host.add_session("ses_user000001", updated=now - 7 * HOUR)
    # a helper a killed memoryd created two minutes ago (far from the 90-minute sweep)
    host.add_session(
        "ses_orphan0001",
        updated=now - 2 * 60_000,
        title="memoryd-extract-ses_user000001",
        metadata={"memoryd": "extract"},
    )
    store.owners.record_helper("ses_orphan0001", "extract", owner=dead_owner())
    recorded_at_prompt: list[int] = []
    base_reply = host.reply

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        recorded_at_prompt.append(store.owners.helper_count())
        return base_reply(body)

    host.reply = reply
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    p1 = Phase1(
        store=store, client=client, settings=Settings(), paths=paths, clock=clock, worker_id="t"
    )
    report = await p1.run_pass()
    assert "ses_orphan0001" in host.deleted
    assert report.stale_helpers == 1 and report.succeeded == 1
    assert recorded_at_prompt == [1]  # the live helper was in the DB when it was prompted
    assert store.owners.helper_count() == 0  # deleted helpers leave no record


def test_a_killed_memoryds_private_server_is_reaped(tmp_path: Path) -> None:
    import json

    from memoryd.host.server import reap_orphaned_servers

    records = tmp_path / "private-servers"
    records.mkdir()
    procs = []
    for owner in (dead_owner(), current_owner()):
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        procs.append(proc)
        (records / f"{proc.pid}.json").write_text(
            json.dumps({"pid": proc.pid, "start": process_start(proc.pid), "owner": owner.encode()})
        )
    try:
        assert reap_orphaned_servers(records) == 1
        assert procs[0].wait(5) == -9
        assert procs[1].poll() is None  # a live memoryd's server is left alone
        assert [p.name for p in records.iterdir()] == [f"{procs[1].pid}.json"]
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def test_a_helper_whose_create_answer_was_lost_is_found_and_deleted(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    """Chaos, host faults: opencode made the helper but the answer was reset on the way
    back. Before: it stayed in the user's session list for 90 minutes."""
    import httpx

    host = FakeOpencode()
    host.add_session("ses_user000001", updated=clock.now_ms() - 7 * HOUR)
    real = host.handle
    lost: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        resp = await real(request)
        if request.method == "POST" and request.url.path == "/session" and not lost:
            lost.append(resp.json()["id"])
            raise httpx.ReadError("connection reset by peer", request=request)
        return resp

    host.handle = handle  # type: ignore[method-assign]
    client = OpencodeClient("http://opencode.test", transport=httpx.MockTransport(handle))
    p1 = Phase1(
        store=store, client=client, settings=Settings(), paths=paths, clock=clock, worker_id="t"
    )
    first = await p1.run_pass()
    assert first.released == 1 and first.failed == 0
    assert lost and lost[0] in host.sessions  # it exists, and memoryd never learned its id
    second = await p1.run_pass()
    assert lost[0] not in host.sessions and second.stale_helpers == 1
    assert second.succeeded == 1 and host.helper_sessions == []
    assert store.owners.helper_count() == 0


def _running_server() -> subprocess.Popen[bytes]:
    """Stands in for the ``opencode serve`` a memoryd started (its own session, as memoryd's)."""
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def test_a_dead_memoryd_whose_server_still_runs_is_not_gone(store: Store) -> None:
    """A SIGKILLed memoryd's own opencode serve goes on driving the helper prompt it was
    given (a fresh server's first model call came seconds later); releasing that claim let the
    next run extract the version again while the orphan's call was still to come."""
    server = _running_server()
    try:
        owner = replace(dead_owner(), server=f"{server.pid}:{process_start(server.pid)}")
        assert Owner.decode(owner.encode()) == owner
        assert not owner_gone(owner)
        store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w1", owner=owner)
        store.owners.record_helper("ses_helper0001", "extract", owner=owner)
        assert store.owners.release_orphaned_claims() == []
        assert store.owners.orphaned_helpers() == []
        assert store.stage1.claim_stage1("ses_a", 100, max_running=4, worker_id="w2").status == (
            "skipped_running"
        )
        server.kill()
        server.wait()
        assert owner_gone(owner)
        assert store.owners.release_orphaned_claims() == [("memory_stage1", "ses_a")]
        assert store.owners.orphaned_helpers() == ["ses_helper0001"]
    finally:
        server.kill()
        server.wait()


def test_records_name_the_server_memoryd_started(tmp_path: Path) -> None:
    from memoryd.owner import note_server

    server = _running_server()
    try:
        note_server(server.pid)
        assert current_owner().server == f"{server.pid}:{process_start(server.pid)}"
        assert not owner_gone(current_owner())
    finally:
        note_server(None)
        server.kill()
        server.wait()
    assert current_owner().server is None


async def test_a_pass_stops_a_dead_memoryds_server_before_it_releases_its_claims(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    import json

    server = _running_server()
    try:
        gone = dead_owner()
        paths.private_servers.mkdir(parents=True, exist_ok=True)
        (paths.private_servers / f"{server.pid}.json").write_text(
            json.dumps(
                {"pid": server.pid, "start": process_start(server.pid), "owner": gone.encode()}
            )
        )
        held_by = replace(gone, server=f"{server.pid}:{process_start(server.pid)}")
        store.stage1.claim_stage1(
            "ses_user000001", 100, max_running=4, worker_id="w1", owner=held_by
        )
        host = FakeOpencode()
        host.add_session("ses_user000001", updated=clock.now_ms() - 7 * HOUR)
        client = OpencodeClient("http://opencode.test", transport=host.transport())
        p1 = Phase1(
            store=store, client=client, settings=Settings(), paths=paths, clock=clock, worker_id="t"
        )
        report = await p1.run_pass()
        assert server.wait(5) == -9  # the orphan's server is stopped by the pass itself
        assert report.orphans_released == 1 and report.succeeded == 1
    finally:
        server.kill()
        server.wait()


async def test_an_orphaned_helper_is_aborted_before_it_is_deleted(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    """Deleting a killed memoryd's helper did not stop a turn opencode was about to
    send (the storm saw extraction calls of helpers already deleted): abort it first."""
    host = FakeOpencode()
    host.add_session(
        "ses_orphan0001",
        updated=clock.now_ms() - 2 * 60_000,
        title="memoryd-extract-ses_user000001",
        metadata={"memoryd": "extract"},
    )
    store.owners.record_helper("ses_orphan0001", "extract", owner=dead_owner())
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    assert await remove_orphaned_helpers(client, store) == 1
    mine = [c for c in host.calls if "ses_orphan0001" in c and not c.startswith("GET")]
    assert mine[:2] == [
        "POST /session/ses_orphan0001/abort",
        "DELETE /session/ses_orphan0001",
    ], host.calls
