"""Phase 1 end to end against the in-process fake host (MockTransport) and an injected clock."""

from __future__ import annotations

import asyncio
import json
from typing import Any, NoReturn

import httpx
import pytest

from memoryd.clock import DAY, HOUR, MINUTE, ManualClock
from memoryd.errors import MemorydError
from memoryd.host.agents import EXTRACT_AGENT
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.prompts import SKELETON_MARKERS
from memoryd.settings import Settings
from memoryd.store import Store
from memoryd.write.phase1 import Phase1, normalize_slug
from tests.fakehost import FakeOpencode, Reply, good_reply
from tests.narrow import present

pytestmark = pytest.mark.anyio
SECRET = "sk-proj-Zq8XwV3mT1uP6yR4nL0kJ7hG2fD5sA9c"


@pytest.fixture
def host(clock: ManualClock) -> FakeOpencode:
    h = FakeOpencode()
    now = clock.now_ms()
    for i in range(3):
        h.add_session(
            f"ses_old{i}aaaaaa", updated=now - 7 * HOUR - i * MINUTE, title=f"session {i}"
        )
    return h


def make(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, **overrides: Any
) -> Phase1:
    settings = Settings(**overrides)
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    return Phase1(
        store=store, client=client, settings=settings, paths=paths, clock=clock, worker_id="test"
    )


async def test_extracts_idle_sessions_and_cleans_up_helpers(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    now = clock.now_ms()
    host.add_session("ses_child0000", updated=now - 8 * HOUR, parent="ses_old0aaaaaa")
    host.add_session(
        "ses_helperold",
        updated=now - 8 * HOUR,
        title="memoryd-extract-ses_x",
        metadata={"memoryd": "extract"},
    )
    host.add_session("ses_recent000", updated=now - 1 * HOUR)
    report = await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    assert report.succeeded == 3 and report.failed == 0
    assert report.skipped["not_idle"] == 1
    assert {o.session_id for o in store.outputs.newest_first()} == {
        f"ses_old{i}aaaaaa" for i in range(3)
    }
    assert (
        host.helper_sessions == []
    )  # ours were deleted, the stale leftover too; neither was a candidate
    assert report.stale_helpers == 1
    body = host.prompts[0]
    assert body["agent"] == EXTRACT_AGENT
    assert body["format"]["type"] == "json_schema"
    assert set(body["format"]["schema"]["required"]) == {
        "raw_memory",
        "rollout_summary",
        "rollout_slug",
    }
    assert "BEGIN SESSION TRANSCRIPT" in body["parts"][0]["text"] and body["system"]
    assert body["tools"] == {
        "list_mcp_resources": False,
        "list_mcp_resource_templates": False,
        "read_mcp_resource": False,
    }
    out = present(store.outputs.output("ses_old0aaaaaa"))
    assert (
        out.rollout_slug == "fixed_the_build"
        and out.cwd == "/srv/proj"
        and out.title == "session 0"
    )
    totals = store.ledger.token_totals()["phase1"]
    assert totals["calls"] == 3 and totals["input"] == 3 * 1200 and totals["output"] == 3 * 150


async def test_claims_per_pass_are_capped_and_second_pass_is_free(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    p1 = make(store, host, paths, clock)  # default cap 2
    first = await p1.run_pass()
    assert first.claimed == 2 and first.succeeded == 2
    second = await p1.run_pass()
    assert second.claimed == 1
    host.prompts.clear()
    third = await p1.run_pass()
    assert third.claimed == 0 and third.up_to_date == 3 and host.prompts == []


async def test_one_new_turn_means_exactly_one_reextraction(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    p1 = make(store, host, paths, clock, max_rollouts_per_startup=8)
    await p1.run_pass()
    host.prompts.clear()
    clock.advance(10 * MINUTE)
    host.touch("ses_old1aaaaaa", clock.now_ms() - 1)
    report = await make(
        store, host, paths, clock, max_rollouts_per_startup=8, min_rollout_idle_hours=0
    ).run_pass()
    assert report.claimed == 1 and len(host.prompts) == 1
    assert present(store.outputs.output("ses_old1aaaaaa")).source_updated_at == clock.now_ms() - 1


async def test_idle_and_age_windows(store: Store, paths: Paths, clock: ManualClock) -> None:
    host = FakeOpencode()
    now = clock.now_ms()
    host.add_session("ses_fresh0000", updated=now - 5 * HOUR)
    host.add_session("ses_ancient00", updated=now - 11 * DAY)
    host.add_session("ses_justright", updated=now - 6 * HOUR)
    report = await make(store, host, paths, clock).run_pass()
    assert report.skipped["not_idle"] == 1 and report.skipped["too_old"] == 1
    assert [o.session_id for o in store.outputs.newest_first()] == ["ses_justright"]
    report0 = await make(store, host, paths, clock, min_rollout_idle_hours=0).run_pass()
    assert report0.succeeded == 1 and store.outputs.output("ses_fresh0000") is not None


async def test_schema_breaking_answer_fails_with_backoff_not_crash(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    host.reply = lambda body: {
        "structured": {"raw_memory": ["not", "a", "string"], "rollout_summary": "x"}
    }
    report = await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    assert report.failed == 3 and report.succeeded == 0
    assert "breaks the schema" in report.errors[0]
    job = present(store.stage1.stage1_job("ses_old0aaaaaa"))
    assert (
        job["status"] == "pending"
        and job["retry_remaining"] == 2
        and job["retry_at"] == clock.now_ms() + HOUR
    )
    assert host.helper_sessions == []  # helpers removed even on failure
    assert (
        store.ledger.token_totals()["phase1"]["calls"] == 3
    )  # the tokens were spent and are recorded
    host.prompts.clear()
    host.reply = good_reply
    again = await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    assert again.claimed == 0 and host.prompts == [] and again.skipped["skipped_backoff"] == 3
    clock.advance(HOUR)
    later = await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    assert later.succeeded == 3


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (
            lambda b: {"text": "I think the session was about builds."},
            "did not return structured output",
        ),
        (
            lambda b: {
                "structured": {
                    "raw_memory": "a",
                    "rollout_summary": "b",
                    "rollout_slug": None,
                    "extra": 1,
                }
            },
            "extra",
        ),
        (
            lambda b: {
                "structured": {"raw_memory": f"x {SKELETON_MARKERS[0]} y", "rollout_summary": "b"}
            },
            "echoes the template",
        ),
        (
            lambda b: {
                "error": {
                    "name": "APIError",
                    "data": {"message": "prompt is too long", "statusCode": 400},
                }
            },
            "too long",
        ),
    ],
)
async def test_bad_model_answers_fail_the_job(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, reply: Reply, fragment: str
) -> None:
    host.reply = reply
    report = await make(store, host, paths, clock).run_pass()
    assert report.failed == 2 and report.succeeded == 0
    assert fragment in report.errors[0]
    assert store.outputs.output_count() == 0
    assert host.helper_sessions == []


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        (
            lambda b: {
                "http_status": 500,
                "json": {"name": "UnknownError", "data": {"message": "Unexpected server error"}},
            },
            "HTTP 500",
        ),
        (lambda b: {"http_status": 429, "json": {}}, "HTTP 429"),
        (lambda b: {"http_status": 200, "content": b"<html>not json"}, "unexpected answer"),
    ],
)
async def test_host_faults_release_claims_without_burning_retries(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, reply: Reply, fragment: str
) -> None:
    """A 5xx, a 429 or a garbled answer is opencode's trouble, not the session's."""
    host.reply = reply
    report = await make(store, host, paths, clock).run_pass()
    assert report.failed == 0 and report.released == 2 and report.succeeded == 0
    assert fragment in (report.waiting or "")
    for sid in ("ses_old0aaaaaa", "ses_old1aaaaaa"):
        job = present(store.stage1.stage1_job(sid))
        assert job["status"] == "pending" and job["retry_remaining"] == 3, dict(job)
        assert fragment in job["last_error"]
    assert host.helper_sessions == []
    host.reply = good_reply
    assert (await make(store, host, paths, clock).run_pass()).succeeded == 2


async def test_text_json_fallback_is_accepted(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    host.reply = lambda b: {
        "text": '```json\n{"raw_memory": "r", "rollout_summary": "s", "rollout_slug": null}\n```'
    }
    report = await make(store, host, paths, clock).run_pass()
    assert report.succeeded == 2


async def test_empty_answer_means_no_output_and_removes_stale_row(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    p1 = make(store, host, paths, clock, max_rollouts_per_startup=8)
    await p1.run_pass()
    assert store.outputs.output("ses_old0aaaaaa") is not None
    host.reply = lambda b: {
        "structured": {"raw_memory": "", "rollout_summary": "", "rollout_slug": None}
    }
    clock.advance(MINUTE)
    host.touch("ses_old0aaaaaa", clock.now_ms() - 7 * HOUR + 2 * MINUTE)
    report = await p1.run_pass()
    assert report.no_output == 1
    assert store.outputs.output("ses_old0aaaaaa") is None
    assert present(store.stage1.stage1_job("ses_old0aaaaaa"))["status"] == "done"
    assert store.ledger.token_totals()["phase1"]["calls"] == 4


async def test_empty_transcript(store: Store, paths: Paths, clock: ManualClock) -> None:
    host = FakeOpencode()
    host.add_session("ses_empty0000", updated=clock.now_ms() - 7 * HOUR, turns=[])
    report = await make(store, host, paths, clock).run_pass()
    assert report.no_output == 1 and host.prompts == []


async def test_polluted_sessions_are_skipped_when_asked(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode()
    now = clock.now_ms()
    s = host.add_session("ses_web00000", updated=now - 7 * HOUR, turns=[("user", "look this up")])
    host.messages["ses_web00000"].append(
        host.message(
            "ses_web00000",
            "assistant",
            [
                {
                    "type": "tool",
                    "callID": "c1",
                    "tool": "webfetch",
                    "state": {
                        "status": "completed",
                        "input": {"url": "https://example.com"},
                        "output": "page",
                    },
                },
            ],
            created=s["time"]["updated"],
        )
    )
    report = await make(store, host, paths, clock, disable_on_external_context=True).run_pass()
    assert report.polluted == 1 and host.prompts == []
    assert store.outputs.memory_mode("ses_web00000") == "polluted"
    again = await make(store, host, paths, clock, disable_on_external_context=True).run_pass()
    assert again.skipped["mode_polluted"] == 1
    # without the option the same session is extracted normally
    host2 = FakeOpencode()
    host2.sessions, host2.messages = host.sessions, host.messages
    store.outputs.set_mode("ses_web00000", "enabled")
    clock.advance(MINUTE)
    host.touch("ses_web00000", clock.now_ms() - 7 * HOUR)
    assert (await make(store, host2, paths, clock).run_pass()).succeeded == 1


async def test_secrets_never_reach_the_model_nor_the_db(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    host = FakeOpencode()
    host.add_session(
        "ses_secret000",
        updated=clock.now_ms() - 7 * HOUR,
        turns=[("user", f"my key is {SECRET} please set OPENAI_API_KEY"), ("assistant", "done")],
    )
    host.reply = lambda b: {
        "structured": {
            "raw_memory": f"user key {SECRET}",
            "rollout_summary": f"set key {SECRET}",
            "rollout_slug": "key",
        }
    }
    report = await make(store, host, paths, clock).run_pass()
    assert report.succeeded == 1
    assert SECRET not in str(host.prompts)
    out = present(store.outputs.output("ses_secret000"))
    assert SECRET not in out.raw_memory and SECRET not in out.rollout_summary
    assert SECRET.encode() not in paths.db.read_bytes()


async def test_deleted_session_is_forgotten(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    del host.sessions["ses_old2aaaaaa"]
    report = await make(store, host, paths, clock).run_pass()
    assert report.forgotten == 1
    assert (
        store.outputs.output("ses_old2aaaaaa") is None
        and store.stage1.stage1_job("ses_old2aaaaaa") is None
    )


async def test_missing_agent_is_a_clear_error(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    host.agents = ["build"]
    with pytest.raises(MemorydError, match=r"does not load the 'memoryd-extract' agent from .*"):
        await make(store, host, paths, clock).run_pass()
    # memoryd wrote the definition into its own helper folder, and made opencode re-read it
    config = json.loads((paths.helper_dir / "opencode.json").read_text())
    assert config["agent"]["memoryd-extract"]["permission"]["*"] == "deny"
    assert "POST /instance/dispose" in host.calls
    assert store.stage1.stage1_counts()["running"] == 0


async def test_cancellation_releases_claims_without_burning_retries(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    host.prompt_delay = 30
    task = asyncio.ensure_future(make(store, host, paths, clock).run_pass())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if host.prompts:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    job = present(store.stage1.stage1_job("ses_old0aaaaaa"))
    assert job["status"] == "pending" and job["retry_remaining"] == 3 and job["retry_at"] is None
    assert host.helper_sessions == []


async def test_generate_memories_off_extracts_nothing(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    report = await make(store, host, paths, clock, generate_memories=False).run_pass()
    assert report.claimed == 0 and host.prompts == []
    assert store.outputs.memory_mode("ses_old0aaaaaa") == "disabled"


def test_slug_normalization() -> None:
    assert normalize_slug("Fix Build: CI/CD!") == "fix_build_ci_cd"
    assert normalize_slug("x" * 100) == "x" * 60
    assert normalize_slug("!!!") is None and normalize_slug(None) is None


async def test_rate_limit_opens_circuit_and_releases_without_burning_retries(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    host.reply = lambda b: {
        "error": {"name": "APIError", "data": {"message": "Rate limit reached", "statusCode": 429}}
    }
    report = await make(store, host, paths, clock).run_pass()
    assert report.failed == 0 and report.released == 2 and "Rate limit" in present(report.waiting)
    job = present(store.stage1.stage1_job("ses_old0aaaaaa"))
    assert job["status"] == "pending" and job["retry_remaining"] == 3 and job["retry_at"] is None
    host.prompts.clear()
    host.reply = good_reply
    waiting = await make(store, host, paths, clock).run_pass()
    assert host.prompts == [] and "circuit open" in present(waiting.waiting)
    clock.advance(HOUR + 1)
    assert (await make(store, host, paths, clock).run_pass()).succeeded == 2


async def test_daily_budget_makes_jobs_wait_not_fail(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    report = await make(
        store, host, paths, clock, daily_token_budget=1000, max_rollouts_per_startup=1
    ).run_pass()
    assert report.succeeded == 1  # 1,350 tokens: now over the budget
    host.prompts.clear()
    again = await make(store, host, paths, clock, daily_token_budget=1000).run_pass()
    assert (
        host.prompts == [] and again.claimed == 0 and "daily token budget" in present(again.waiting)
    )
    assert store.stage1.stage1_counts()["failed"] == 0


async def test_host_going_away_releases_without_burning_retries(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    import httpx

    def gone(body: dict[str, Any]) -> NoReturn:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    host.reply = gone
    report = await make(store, host, paths, clock).run_pass()
    assert report.failed == 0 and report.released == 2 and "unreachable" in present(report.waiting)
    job = present(store.stage1.stage1_job("ses_old0aaaaaa"))
    assert job["status"] == "pending" and job["retry_remaining"] == 3 and job["retry_at"] is None


async def test_stale_helpers_from_a_killed_memoryd_are_removed(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    now = clock.now_ms()
    host.add_session(
        "ses_stalehelp1",
        updated=now - 2 * HOUR,
        title="memoryd-extract-ses_abc123",
        metadata={"memoryd": "extract"},
        turns=[],
    )
    host.add_session(
        "ses_freshhelp",
        updated=now - 10 * MINUTE,
        title="memoryd-consolidate",
        metadata={"memoryd": "consolidate"},
        turns=[],
    )
    host.add_session(
        "ses_userfork0",
        updated=now - 2 * HOUR,
        title="Fork of my work",
        metadata={"memoryd": "extract"},
        turns=[],
    )
    report = await make(store, host, paths, clock).run_pass()
    assert report.stale_helpers == 1
    assert "ses_stalehelp1" in host.deleted
    assert "ses_freshhelp" in host.sessions and "ses_userfork0" in host.sessions


async def test_archived_sessions_are_neither_extracted_nor_forgotten(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    host.sessions["ses_old1aaaaaa"]["time"]["archived"] = clock.now_ms()
    host.touch("ses_old1aaaaaa", clock.now_ms() - 7 * HOUR + 1)
    host.calls.clear()
    report = await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    assert report.forgotten == 0 and report.claimed == 0
    assert store.outputs.output("ses_old1aaaaaa") is not None
    assert not [c for c in host.calls if c.startswith("GET /session/ses_")]  # no per-session probes


async def test_cancel_releases_claims_still_waiting_for_a_slot(
    store: Store,
    host: FakeOpencode,
    paths: Paths,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memoryd.write.phase1 as phase1

    monkeypatch.setattr(phase1, "EXTRACTION_CONCURRENCY", 1)
    host.prompt_delay = 30
    task = asyncio.ensure_future(
        make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    )
    for _ in range(200):
        await asyncio.sleep(0.01)
        if host.prompts:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for i in range(3):
        job = present(store.stage1.stage1_job(f"ses_old{i}aaaaaa"))
        assert job["status"] == "pending" and job["retry_remaining"] == 3, (i, dict(job))


async def test_a_404_from_the_helper_does_not_forget_the_session(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    await make(store, host, paths, clock, max_rollouts_per_startup=8).run_pass()
    clock.advance(MINUTE)
    host.touch("ses_old0aaaaaa", clock.now_ms() - 7 * HOUR)
    host.reply = lambda b: {
        "http_status": 404,
        "json": {"name": "NotFoundError", "data": {"message": "Session not found"}},
    }
    report = await make(store, host, paths, clock).run_pass()
    assert report.forgotten == 0 and report.failed == 1
    assert store.outputs.output("ses_old0aaaaaa") is not None


async def test_a_turn_between_listing_and_reading_is_not_extracted_twice(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock
) -> None:
    """Found by the chaos bench (scenario 4): a turn that lands after the pass listed
    the sessions but before the extraction read the transcript was read, yet the output claimed
    the listed version, so the next pass sent the model the same transcript again."""
    listed = host._list
    moved: list[int] = []

    def list_then_a_turn_lands(request: httpx.Request) -> httpx.Response:
        page = listed(request)
        if not moved:
            moved.append(clock.now_ms() - 1)
            host.touch("ses_old1aaaaaa", moved[0], ("user", "and use ruff"))
        return page

    host._list = list_then_a_turn_lands  # type: ignore[method-assign]
    settings = {"max_rollouts_per_startup": 8, "min_rollout_idle_hours": 0}
    await make(store, host, paths, clock, **settings).run_pass()
    assert "and use ruff" in json.dumps([p for p in host.prompts if "ses_old1aaaaaa" in str(p)])
    assert present(store.outputs.output("ses_old1aaaaaa")).source_updated_at == moved[0]
    host.prompts.clear()
    report = await make(store, host, paths, clock, **settings).run_pass()
    assert report.claimed == 0 and host.prompts == []


def test_stored_rollout_summaries_are_capped_keeping_head_and_tail() -> None:
    from memoryd.tuning import ROLLOUT_SUMMARY_MAX_BYTES
    from memoryd.write.phase1 import cap_rollout_summary

    short = "# t\n\n## Task 1: x\n"
    assert cap_rollout_summary(short) == short
    long = "# Title of the session\n" + "é detail line\n" * 2_000 + "## Task 9: the newest task\n"
    capped = cap_rollout_summary(long)
    assert len(capped.encode("utf-8")) <= ROLLOUT_SUMMARY_MAX_BYTES < len(long.encode("utf-8"))
    assert capped.startswith("# Title of the session")
    assert capped.endswith("## Task 9: the newest task\n")
    assert "bytes of this summary omitted" in capped
    capped.encode("utf-8")  # no split character
