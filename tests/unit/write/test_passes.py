"""A private opencode boots while the pass does its local work, and an empty home costs no prompt.

The boundary faked here is the opencode executable: a small script that answers the two routes
an empty pass needs (health, session list), records every request, and prints its "listening"
line only once a file the test names exists. A pass that waited for the server before doing its
local work would never create that file, and the fake would give up.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memoryd.errors import HostNotStarted
from memoryd.host.connect import open_host
from memoryd.host.server import PrivateServer
from memoryd.paths import Paths
from memoryd.settings import load_settings
from memoryd.store.home import App
from memoryd.write import passes
from memoryd.write.passes import run_pass
from memoryd.write.phase2 import Phase2Status

pytestmark = pytest.mark.anyio

FAKE = textwrap.dedent(
    """\
    import http.server, json, os, sys, time
    port = int(sys.argv[sys.argv.index("--port") + 1])
    go, log = os.environ["FAKE_GO"], os.environ["FAKE_LOG"]
    with open(log + ".env", "w") as fh:
        json.dump(dict(os.environ), fh)
    deadline = time.monotonic() + 5
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            print("gave up waiting for", go, flush=True)
            sys.exit(7)
        time.sleep(0.02)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            with open(log, "a") as fh:
                fh.write(self.command + " " + self.path + "\\n")
            path = self.path.split("?")[0]
            body = {"/global/health": {"healthy": True, "version": "9.9.9"},
                    "/experimental/session": []}.get(path)
            data = json.dumps(body).encode()
            self.send_response(200 if body is not None else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        do_POST = do_DELETE = do_PATCH = do_GET
        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", port), H)
    print(f"opencode server listening on http://127.0.0.1:{port}", flush=True)
    srv.serve_forever()
    """
)


@pytest.fixture
def fake_opencode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake-opencode"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(0o755)
    monkeypatch.setenv("MEMORYD_HOST_OPENCODE_BIN", str(script))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "requests.log"))
    return script


def requests_seen(tmp_path: Path) -> list[str]:
    log = tmp_path / "requests.log"
    return log.read_text().splitlines() if log.exists() else []


def no_server_left(paths: Paths) -> bool:
    return not list(paths.private_servers.glob("*.json"))


async def test_open_host_lets_the_caller_work_while_the_server_boots(
    paths: Paths, fake_opencode: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = tmp_path / "go"
    monkeypatch.setenv("FAKE_GO", str(go))
    settings = load_settings(paths.config_file)
    async with open_host(settings, paths) as opening:
        go.touch()  # the fake prints "listening" only now: open_host must not have waited
        host = await opening.ready()
        assert await opening.ready() is host  # one connection, one health check
        assert (host.version, host.private) == ("9.9.9", True)
        pid = json.loads(next(paths.private_servers.glob("*.json")).read_text())["pid"]
    assert no_server_left(paths)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert [r.split("?")[0] for r in requests_seen(tmp_path)] == ["GET /global/health"]


async def test_a_failed_local_step_stops_a_server_still_booting(
    paths: Paths, fake_opencode: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "never"))
    settings = load_settings(paths.config_file)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="local work failed"):
        async with open_host(settings, paths):
            for _ in range(200):  # until the fake is running (its record is written at spawn)
                if list(paths.private_servers.glob("*.json")):
                    break
                await asyncio.sleep(0.02)
            raise RuntimeError("local work failed")
    # stopped at once, not after the fake's 5 s of patience or the 60 s startup timeout
    assert time.monotonic() - started < 4
    assert no_server_left(paths)


async def test_stop_while_starting_makes_start_fail_and_leaves_nothing(
    tmp_path: Path, fake_opencode: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "never"))
    rec = tmp_path / "rec"
    server = PrivateServer(str(fake_opencode), cwd=tmp_path, record_dir=rec)
    starting = asyncio.create_task(asyncio.to_thread(server.start))
    for _ in range(200):
        if list(rec.glob("*.json")):
            break
        await asyncio.sleep(0.02)
    pid = json.loads(next(rec.glob("*.json")).read_text())["pid"]
    await asyncio.to_thread(server.stop, 3.0)
    (err,) = await asyncio.gather(starting, return_exceptions=True)
    assert isinstance(err, HostNotStarted) and "stopped before it was listening" in str(err)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not list(rec.glob("*.json"))
    assert not server.running
    with pytest.raises(HostNotStarted, match="stopped before it was started"):
        server.start()  # a stopped instance stays stopped


async def test_empty_home_pass_boots_opencode_during_local_work_and_makes_no_prompt(
    paths: Paths, fake_opencode: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass on a home with no sessions and no notes asks opencode for the session
    list and nothing else (no helper session, no model call), and starts the server only once."""
    # The store is first opened by the pass's local work (counting citations) and the fake says
    # "listening" only once the database file exists: a pass that waited for the server before
    # its local work would hang, then fail. The spy shows the server was spawned before that work.
    monkeypatch.setenv("FAKE_GO", str(paths.db))
    monkeypatch.setenv("MEMORYD_MIN_ROLLOUT_IDLE_HOURS", "0")
    server_existed: list[bool] = []
    real_tick = passes.tick

    def spy_tick(app: App) -> object:  # records, then runs the real local work
        server_existed.append(bool(list(paths.private_servers.glob("*.json"))))
        return real_tick(app)

    monkeypatch.setattr(passes, "tick", spy_tick)
    app = App(paths)
    assert not paths.db.exists()
    try:
        result = await run_pass(app)
    finally:
        app.close()
    assert server_existed == [True, False]  # spawned before the local work; stopped before the last
    assert result.phase1.discovered == 0
    assert result.phase2.status == Phase2Status.NO_INPUTS
    routes = [r.split("?")[0] for r in requests_seen(tmp_path)]
    assert routes == ["GET /global/health", "GET /experimental/session"]
    assert no_server_left(paths)


def test_private_server_gets_a_quiet_environment_the_user_can_override(
    tmp_path: Path, fake_opencode: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No self-update of the user's binary, no language-server downloads, no web UI; a value the
    user set wins, and the password is always memoryd's own."""
    (tmp_path / "go").touch()
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "go"))
    monkeypatch.setenv("OPENCODE_DISABLE_LSP_DOWNLOAD", "0")
    monkeypatch.setenv("OPENCODE_SERVER_PASSWORD", "the user's")
    with PrivateServer(str(fake_opencode), cwd=tmp_path) as handle:
        env = json.loads((tmp_path / "requests.log.env").read_text())
    assert env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
    assert env["OPENCODE_DISABLE_EMBEDDED_WEB_UI"] == "1"
    assert env["OPENCODE_DISABLE_LSP_DOWNLOAD"] == "0"
    assert env["OPENCODE_SERVER_PASSWORD"] == handle.password != "the user's"


async def test_cancelling_a_pass_waiting_for_the_boot_stops_the_server_at_once(
    paths: Paths, fake_opencode: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon shutdown cancels the pass; one still waiting for "listening" must not leave the
    server (or a start thread) behind, nor wait out the boot."""
    monkeypatch.setenv("FAKE_GO", str(tmp_path / "never"))
    settings = load_settings(paths.config_file)

    async def a_pass() -> None:
        async with open_host(settings, paths) as opening:
            await opening.ready()

    task = asyncio.create_task(a_pass())
    for _ in range(200):
        if list(paths.private_servers.glob("*.json")):
            break
        await asyncio.sleep(0.02)
    pid = json.loads(next(paths.private_servers.glob("*.json")).read_text())["pid"]
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 4
    assert no_server_left(paths)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
