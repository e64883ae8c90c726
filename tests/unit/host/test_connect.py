from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from memoryd.host.live import recorded_server
from memoryd.paths import Paths


def write(paths: Paths, data: object) -> None:
    paths.ensure_dir(paths.state_dir)
    paths.server_state.write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_live_recorded_server_is_used(paths: Paths) -> None:
    write(
        paths,
        {"url": "http://127.0.0.1:4096/", "pid": os.getpid(), "username": "me", "password": "pw"},
    )
    assert recorded_server(paths) == ("http://127.0.0.1:4096", "me", "pw")


def test_dead_or_bad_records_are_ignored(paths: Paths) -> None:
    assert recorded_server(paths) is None
    p = subprocess.Popen(["true"])
    p.wait()
    write(paths, {"url": "http://127.0.0.1:4096", "pid": p.pid})
    assert recorded_server(paths) is None
    write(paths, "{not json")
    assert recorded_server(paths) is None
    write(paths, {"url": "file:///etc/passwd", "pid": os.getpid()})
    assert recorded_server(paths) is None
    write(paths, {"url": "http://127.0.0.1:1", "pid": os.getpid(), "password": 5})
    assert recorded_server(paths) == ("http://127.0.0.1:1", "opencode", None)


def test_symlinked_record_is_ignored(paths: Paths, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"url": "http://127.0.0.1:4096", "pid": os.getpid()}))
    paths.ensure_dir(paths.state_dir)
    paths.server_state.symlink_to(real)
    assert recorded_server(paths) is None
