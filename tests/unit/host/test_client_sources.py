"""Claude Code transcripts and Codex rollouts as phase-1 sources.

The fixtures are real files written by the pinned binaries (``client_fixtures/generate.py``), with
the sandbox root replaced by ``/home/user``. Each test copies them into a temp client home under
a git repository, so scopes, forgetting and the idle rule run against the real phase 1 with the
fake opencode (the extraction runner) at the boundary.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import HOUR, ManualClock
from memoryd.host import claude_transcript, codex_rollout
from memoryd.host.client_records import CLAUDE_SKIPPED, CODEX_SKIPPED, epoch_ms
from memoryd.host.client_sources import client_sources, outside_tools
from memoryd.host.ids import CLAUDE_CODE, CODEX, OPENCODE, host_of
from memoryd.host.opencode import OpencodeClient
from memoryd.paths import Paths
from memoryd.scopes import scope_key
from memoryd.settings import ExtensionsSettings, Settings
from memoryd.store import Store
from memoryd.write.phase1 import Phase1
from memoryd.write.transcript import build_transcript
from tests.fakehost import FakeOpencode
from tests.narrow import present

pytestmark = pytest.mark.anyio
FIXTURES = Path(__file__).resolve().parent / "client_fixtures"
CLAUDE_ID = "8c1b2a34-5d6e-4f70-8a9b-0c1d2e3f4a5b"
CODEX_ID = "01a2372e-086f-7e41-b0fb-10a93fd1efc8"


def fixture_text(name: str, root: Path) -> str:
    return (FIXTURES / name).read_text().replace("/home/user", str(root))


def newest_stamp(name: str) -> int:
    stamps = []
    for line in (FIXTURES / name).read_text().splitlines():
        at = epoch_ms(json.loads(line).get("timestamp"))
        if at is not None:
            stamps.append(at)
    return max(stamps)


@pytest.fixture
def clock() -> ManualClock:
    # seven hours after the newest fixture record: idle (6 h) and young (10 days)
    return ManualClock(max(newest_stamp(p.name) for p in FIXTURES.glob("*.jsonl")) + 7 * HOUR)


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """``tmp/project`` (a git repository with an ``app/`` subfolder) and both clients' homes."""
    (tmp_path / "project" / ".git").mkdir(parents=True)
    (tmp_path / "project" / "app").mkdir()
    claude = (
        tmp_path
        / "claude"
        / "projects"
        / f"-{str(tmp_path / 'project' / 'app').strip('/').replace('/', '-')}"
    )
    claude.mkdir(parents=True)
    (claude / f"{CLAUDE_ID}.jsonl").write_text(fixture_text("claude_subfolder.jsonl", tmp_path))
    day = tmp_path / "codex" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-02T14-40-00-{CODEX_ID}.jsonl").write_text(
        fixture_text("codex_subfolder.jsonl", tmp_path)
    )
    # Each file last written when its newest record was: the clock above, not today's date,
    # decides whether a session is idle (a file listed from stat alone is dated by its mtime).
    for path, name in (
        (claude / f"{CLAUDE_ID}.jsonl", "claude_subfolder.jsonl"),
        (day / f"rollout-2026-12-02T14-40-00-{CODEX_ID}.jsonl", "codex_subfolder.jsonl"),
    ):
        at = newest_stamp(name) / 1000
        os.utime(path, (at, at))
    return tmp_path


def claude_file(world: Path) -> Path:
    return next((world / "claude" / "projects").glob(f"*/{CLAUDE_ID}.jsonl"))


def codex_file(world: Path) -> Path:
    return next((world / "codex" / "sessions").rglob(f"rollout-*-{CODEX_ID}.jsonl"))


def settings_for(world: Path, **top: Any) -> Settings:
    return Settings(
        extensions=ExtensionsSettings(
            claude_home=str(world / "claude"), codex_home=str(world / "codex")
        ),
        max_rollouts_per_startup=8,
        **top,
    )


def phase1(
    store: Store, host: FakeOpencode, paths: Paths, clock: ManualClock, settings: Settings
) -> Phase1:
    client = OpencodeClient("http://opencode.test", transport=host.transport())
    return Phase1(
        store=store,
        client=client,
        settings=settings,
        paths=paths,
        clock=clock,
        worker_id="test",
        file_sources=client_sources(settings, environ={}),
    )


def extraction_inputs(host: FakeOpencode) -> list[str]:
    return [p["parts"][0]["text"] for p in host.prompts]


# -- parsers ----------------------------------------------------------------------------------


def test_claude_transcript_reads_words_tools_and_answers_but_not_harness_text(world: Path) -> None:
    path = claude_file(world)
    parsed = claude_transcript.parse(path, path.read_bytes(), fallback_ms=0)
    assert parsed.session_id == f"claude-code:{CLAUDE_ID}"
    assert parsed.directory == str(world / "project" / "app")
    assert parsed.title.startswith("We always deploy with make ship")
    assert parsed.problems == [] and parsed.unknown == {}
    text = build_transcript(parsed.messages).text
    assert "We always deploy with make ship" in text
    assert '[tool call: Read] {"file_path":' in text and "[tool result: Read]" in text
    assert "Read it: the deploy target is make ship." in text
    assert "Correction: staging uses make ship-staging." in text
    # the harness's own context (environment, git status, skill listings) is not the user's words
    for harness in ("system-reminder", "gitStatus", "Primary working directory", "dataviz"):
        assert harness not in text
    # the tool result sits with its call, and the second turn is its own user message
    users = [m for m in parsed.messages if m.info.is_user]
    assert [p.text for m in users for p in m.parts] == [
        "We always deploy with make ship. READ the deploy file.",
        "Correction: staging uses make ship-staging.",
    ]


def test_codex_rollout_reads_response_items_and_drops_environment_and_instructions(
    world: Path,
) -> None:
    path = codex_file(world)
    parsed = codex_rollout.parse(path, path.read_bytes(), fallback_ms=0)
    assert parsed.session_id == f"codex:{CODEX_ID}"
    assert parsed.directory == str(world / "project" / "app") and parsed.parent is None
    assert parsed.problems == [] and parsed.unknown == {}
    text = build_transcript(parsed.messages).text
    assert "Our staging host is blue-7." in text
    assert '[tool call: exec_command] {"cmd": "cat DEPLOY.txt"}' in text
    assert "[tool result: exec_command]" in text and "make ship" in text
    assert "Read it: the deploy target is make ship." in text
    for harness in ("environment_context", "skills_instructions", "Skill roots", "permissions"):
        assert harness not in text
    # event_msg mirrors are not read twice: the user's words appear once
    assert text.count("Our staging host is blue-7.") == 1


def test_malformed_and_unknown_lines_are_named_and_the_rest_still_counts(world: Path) -> None:
    path = claude_file(world)
    lines = path.read_text().splitlines()
    lines.insert(3, '{"type": "user", "message": {"content": "cut off mid-wr')
    lines.insert(5, "[1, 2, 3]")
    lines.append('{"type": "hologram", "payload": 1}')
    path.write_text("\n".join(lines) + "\n")
    parsed = claude_transcript.parse(path, path.read_bytes(), fallback_ms=0)
    assert [(p.line, p.reason.split(" (")[0]) for p in parsed.problems] == [
        (4, "not valid JSON"),
        (6, "not a JSON object"),
    ]
    assert str(parsed.problems[0]).startswith(f"{path}:4: not valid JSON")
    assert parsed.unknown == {"hologram": 1}
    assert "Correction: staging uses make ship-staging." in build_transcript(parsed.messages).text


def test_codex_sub_agents_are_not_roots(world: Path) -> None:
    path = codex_file(world)
    lines = path.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["payload"]["source"] = {"subagent": "review"}
    path.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    assert codex_rollout.parse(path, path.read_bytes(), fallback_ms=0).parent is not None


def test_ids_are_namespaced_per_host_and_skip_tables_name_a_reason() -> None:
    assert host_of(f"claude-code:{CLAUDE_ID}") == CLAUDE_CODE
    assert host_of(f"codex:{CODEX_ID}") == CODEX
    assert host_of("ses_abc") == OPENCODE and host_of("codex") == OPENCODE
    assert all(why.strip() for why in [*CLAUDE_SKIPPED.values(), *CODEX_SKIPPED.values()])


def test_outside_tools_are_web_and_other_mcp_servers_not_memoryd() -> None:
    names = [
        "Read",
        "mcp__memoryd__memory_search",
        "mcp__github__get_issue",
        "WebFetch",
        "web_search",
    ]
    assert outside_tools(names) == ["mcp__github__get_issue", "WebFetch", "web_search"]


# -- settings ----------------------------------------------------------------------------------


def test_sources_are_on_when_the_home_exists_and_honour_the_clients_env(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
        "CODEX_HOME": str(tmp_path / "cx"),
    }
    assert client_sources(Settings(), env) == []
    (tmp_path / "cc").mkdir()
    (tmp_path / ".claude").mkdir()  # the default home is not used when CLAUDE_CONFIG_DIR is set
    (tmp_path / "cx").mkdir()
    found = {s.host: s.home for s in client_sources(Settings(), env)}
    assert found == {CLAUDE_CODE: tmp_path / "cc", CODEX: tmp_path / "cx"}
    off = Settings(extensions=ExtensionsSettings(claude_sessions=False))
    assert [s.host for s in client_sources(off, env)] == [CODEX]
    on = Settings(extensions=ExtensionsSettings(codex_sessions=True))
    assert CODEX in [s.host for s in client_sources(on, {"HOME": str(tmp_path / "nowhere")})]


# -- phase 1 over the client files --------------------------------------------------------------


async def test_each_client_session_is_extracted_once_scoped_to_the_repository_root(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    host = FakeOpencode()
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert report.succeeded == 2 and report.failed == 0
    assert report.hosts[CLAUDE_CODE]["seen"] == 1 and report.hosts[CODEX]["seen"] == 1
    inputs = "\n".join(extraction_inputs(host))
    assert "We always deploy with make ship" in inputs and "Our staging host is blue-7." in inputs
    root = str(world / "project")
    for sid in (f"claude-code:{CLAUDE_ID}", f"codex:{CODEX_ID}"):
        out = store.outputs.output(sid)
        assert out is not None and out.worktree == root  # started in app/, scoped to the repo
        assert out.cwd == str(world / "project" / "app")
        assert out.scope == scope_key(root)
    # nothing changed: no model call, whatever the file's mtime says
    host.prompts.clear()
    os.utime(claude_file(world))
    os.utime(codex_file(world))
    again = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert again.claimed == 0 and again.up_to_date == 2 and host.prompts == []


async def test_a_client_session_waits_for_the_idle_rule_and_a_new_turn_reextracts(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    host = FakeOpencode()
    clock.advance(-6 * HOUR)  # one hour after the last record: not idle yet
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert report.skipped["not_idle"] == 2 and host.prompts == []
    clock.advance(6 * HOUR)
    await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert len(host.prompts) == 2
    host.prompts.clear()
    path = codex_file(world)
    turn = {
        "timestamp": "2026-12-02T15:00:00.000Z",
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Also: the CI runner is gamma-3."}],
        },
    }
    with path.open("a") as fh:
        fh.write(json.dumps(turn) + "\n")
    clock.set(present(epoch_ms(turn["timestamp"])) + 7 * HOUR)
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert report.claimed == 1 and len(host.prompts) == 1
    assert "the CI runner is gamma-3" in extraction_inputs(host)[0]
    assert present(store.outputs.output(f"codex:{CODEX_ID}")).source_updated_at == epoch_ms(
        turn["timestamp"]
    )


async def test_a_deleted_transcript_is_forgotten_but_an_unreachable_home_forgets_nothing(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    host = FakeOpencode()
    await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert len(store.outputs.newest_first()) == 2
    shutil.move(world / "codex", world / "codex-unmounted")  # the disk is gone, not the sessions
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert report.forgotten == 0 and store.outputs.output(f"codex:{CODEX_ID}") is not None
    shutil.move(world / "codex-unmounted", world / "codex")
    claude_file(world).unlink()
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    assert report.forgotten == 1
    assert store.outputs.output(f"claude-code:{CLAUDE_ID}") is None
    assert store.outputs.output(f"codex:{CODEX_ID}") is not None


async def test_a_source_switched_off_keeps_its_memory(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    host = FakeOpencode()
    await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    off = settings_for(world)
    off.extensions.claude_sessions = False
    report = await phase1(store, host, paths, clock, off).run_pass()
    assert report.forgotten == 0 and store.outputs.output(f"claude-code:{CLAUDE_ID}") is not None


async def test_old_files_are_listed_without_being_read(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    path = claude_file(world)
    path.write_bytes(b"\x00not json at all\n")  # would be a line problem if it were read
    long_ago = (clock.now_ms() - 30 * 24 * HOUR) / 1000
    os.utime(path, (long_ago, long_ago))
    report = await phase1(
        store, host := FakeOpencode(), paths, clock, settings_for(world)
    ).run_pass()
    assert report.skipped["too_old"] == 1 and report.hosts[CLAUDE_CODE]["problems"] == []
    assert len(host.prompts) == 1  # only the Codex session


async def test_a_session_with_external_context_is_polluted_not_extracted(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    path = claude_file(world)
    path.write_text(path.read_text().replace('"name": "Read"', '"name": "mcp__github__get_issue"'))
    host = FakeOpencode()
    report = await phase1(
        store, host, paths, clock, settings_for(world, disable_on_external_context=True)
    ).run_pass()
    assert (
        report.polluted == 1 and store.outputs.memory_mode(f"claude-code:{CLAUDE_ID}") == "polluted"
    )


# -- status and the UI ---------------------------------------------------------------------------


async def test_status_and_the_dashboard_show_each_host(
    store: Store, paths: Paths, clock: ManualClock, world: Path
) -> None:
    from starlette.testclient import TestClient

    from memoryd.cli.status import host_rows
    from memoryd.store.home import App
    from memoryd.store.keys import LAST_PASS
    from memoryd.web.app import create_app
    from memoryd.web.security import Secrets
    from memoryd.write.snapshot import snapshot

    with claude_file(world).open("a") as fh:
        fh.write("{not json\n")
    host = FakeOpencode()
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    store.ledger.put_state(LAST_PASS, {"at": clock.now_ms(), "phase1": report.as_dict()})
    hosts = snapshot(store, Settings(), paths)["hosts"]
    assert list(hosts) == [OPENCODE, CLAUDE_CODE, CODEX]
    assert (hosts[CLAUDE_CODE]["seen"], hosts[CLAUDE_CODE]["extracted"]) == (1, 1)
    assert (hosts[CODEX]["seen"], hosts[CODEX]["extracted"]) == (1, 1)
    assert hosts[OPENCODE]["extracted"] == 0 and hosts[CODEX]["last_error"] is None
    line = len(claude_file(world).read_text().splitlines())
    assert hosts[CLAUDE_CODE]["last_error"].startswith(
        f"{claude_file(world)}:{line}: not valid JSON"
    )
    rows = dict(host_rows(hosts))
    assert rows[CODEX].startswith("1 sessions seen, 1 extracted")
    assert "not valid JSON" in rows[CLAUDE_CODE]

    app = App(paths=paths, clock=clock)
    try:
        keys = Secrets(port=8765)
        web = TestClient(create_app(app, keys), base_url="http://127.0.0.1:8765")
        page = web.get(f"/?token={keys.token}").text
    finally:
        app.close()
    for name in (OPENCODE, CLAUDE_CODE, CODEX):
        assert f'data-host="{name}"' in page
    assert "not valid JSON" in page


# -- ids elsewhere: helper titles and citations ----------------------------------------------------


def test_the_helper_extracting_a_client_session_is_recognised_as_memoryd_s() -> None:
    from memoryd.host.models import Session, SessionTime
    from memoryd.write.helpers import is_own_helper

    for sid in (f"claude-code:{CLAUDE_ID}", f"codex:{CODEX_ID}"):
        helper = Session(
            id="ses_helper1",
            title=f"memoryd-extract-{sid}",
            directory="/x",
            time=SessionTime(created=1, updated=1),
            metadata={"memoryd": "extract"},
        )
        assert is_own_helper(helper)


def test_a_cited_client_session_counts_as_used(store: Store, tmp_path: Path) -> None:
    from memoryd.read.citations import parse_citations
    from memoryd.read.usage import ingest_spool

    sid = f"codex:{CODEX_ID}"
    claim = store.stage1.claim_stage1(sid, 1, max_running=10, worker_id="w")
    store.stage1.mark_stage1_succeeded(
        sid,
        present(claim.token),
        raw_memory="r",
        rollout_summary="s",
        rollout_slug=None,
        cwd=None,
        title=None,
    )
    reply = f"Done.\n<memory-citation>\n<session_ids>\n{sid}\n</session_ids>\n</memory-citation>"
    assert parse_citations(reply).session_ids == [sid]
    spool = tmp_path / "spool" / "citations.jsonl"
    spool.parent.mkdir()
    record = {"v": 1, "session_id": "ses_user1", "part_id": "prt_1", "cited": [sid], "ts": 1}
    spool.write_text(json.dumps(record) + "\n")
    ingest_spool(store, spool)
    assert present(store.outputs.output(sid)).usage_count == 1


def test_a_queued_prompt_is_the_users_words_and_sidechain_turns_are_not(world: Path) -> None:
    path = claude_file(world)
    extra = [
        {
            "type": "attachment",
            "timestamp": "2026-12-02T14:41:00.000Z",
            "attachment": {"type": "queued_command", "prompt": "also bump the version to 2.1"},
        },
        {
            "type": "user",
            "isSidechain": True,
            "timestamp": "2026-12-02T14:41:01.000Z",
            "message": {"role": "user", "content": "SUBAGENT-PROMPT search the repo"},
        },
    ]
    with path.open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in extra)
    text = build_transcript(
        claude_transcript.parse(path, path.read_bytes(), fallback_ms=0).messages
    ).text
    assert "also bump the version to 2.1" in text and "SUBAGENT-PROMPT" not in text


async def test_a_transcript_too_large_to_read_fails_its_job_naming_the_file(
    store: Store, paths: Paths, clock: ManualClock, world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryd.host import client_sources as cs

    big = claude_file(world)
    monkeypatch.setattr(cs, "CLIENT_TRANSCRIPT_MAX_BYTES", big.stat().st_size - 1)
    host = FakeOpencode()
    report = await phase1(store, host, paths, clock, settings_for(world)).run_pass()
    # the listing names it, and no session of the other client suffers
    assert any(str(big) in p and "too large" in p for p in report.hosts[CLAUDE_CODE]["problems"])
    assert store.outputs.output(f"codex:{CODEX_ID}") is not None
    assert store.outputs.output(f"claude-code:{CLAUDE_ID}") is None and report.failed == 1
    job = present(store.stage1.stage1_job(f"claude-code:{CLAUDE_ID}"))
    assert job["status"] != "running" and str(big) in job["last_error"]
