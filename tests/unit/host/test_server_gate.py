"""Issue 29: a memoryd killed between spawning its ``opencode serve`` and recording it.

The chaos storm (seed 104) once ended with a memoryd-started server still running: the run that
started it was SIGKILLed before the server's record existed, so no later memoryd knew to stop it.
The boundary faked here is the opencode executable (a script that notes its pid and waits); the
kill is real: the recording step of a separate memoryd process SIGKILLs that process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from memoryd.errors import HostNotStarted
from memoryd.host.server import PrivateServer

FAKE = textwrap.dedent(
    """\
    #!/bin/sh
    echo $$ > "$FAKE_STARTED"
    sleep 60
    """
)

# A memoryd that dies the moment after the server process exists, before its record is written.
KILLED_WHILE_RECORDING = textwrap.dedent(
    """\
    import os, signal, sys
    from pathlib import Path
    import memoryd.host.server as server

    def killed(record_dir, pid):
        os.kill(os.getpid(), signal.SIGKILL)

    server._record_server = killed
    server.PrivateServer(sys.argv[1], cwd=Path(sys.argv[2]), record_dir=Path(sys.argv[3])).start()
    """
)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake-opencode"
    script.write_text(FAKE)
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_STARTED", str(tmp_path / "started"))
    return script


def _processes_running(marker: str) -> list[int]:
    """Live processes whose command line names ``marker`` (the gate shell or the fake)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmd and stat[stat.rindex(")") + 2] != "Z":
            found.append(int(name))
    return found


def test_a_memoryd_killed_before_recording_its_server_leaves_no_server(
    tmp_path: Path, fake: Path
) -> None:
    records = tmp_path / "private-servers"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_RECORDING, str(fake), str(tmp_path), str(records)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    try:
        # Before: the fake was running, unrecorded and orphaned, and stayed so for its 60 s.
        # Now the gate shell reads end-of-file once its memoryd is gone and never starts it.
        for _ in range(500):
            if not _processes_running(str(fake)):
                break
            time.sleep(0.02)
        assert _processes_running(str(fake)) == []
        assert not (tmp_path / "started").exists()
        assert not list(records.glob("*.json"))
    finally:
        for pid in _processes_running(str(fake)):
            os.killpg(pid, signal.SIGKILL)


def test_the_recorded_process_is_the_server(tmp_path: Path, fake: Path) -> None:
    """Once the gate opens the shell execs opencode in place, so the pid memoryd recorded (for
    the reaper and the owner's server name) is the server itself."""
    records = tmp_path / "private-servers"
    server = PrivateServer(str(fake), cwd=tmp_path, record_dir=records, startup_timeout=30)
    starting = threading.Thread(target=_start, args=(server,), daemon=True)
    starting.start()
    try:
        started = tmp_path / "started"
        for _ in range(500):
            if started.exists() and started.read_text().strip():
                break
            time.sleep(0.02)
        pid = int(started.read_text())
        assert [p.name for p in records.glob("*.json")] == [f"{pid}.json"]
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert cmd[:3] == [b"/bin/sh", str(fake).encode(), b"serve"]  # the fake, not the gate
    finally:
        server.stop(3.0)
        starting.join(10)
    assert not list(records.glob("*.json"))


def _start(server: PrivateServer) -> None:
    with contextlib.suppress(HostNotStarted):  # the fake never listens: stop() ends the wait
        server.start()
