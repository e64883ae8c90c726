"""What ``memoryd run`` loads: modules only other commands use stay out of the daemon's memory."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryd.clock import ManualClock
from memoryd.paths import Paths
from memoryd.store import Store
from memoryd.sync import inputs
from memoryd.write.phase2 import Phase2Status
from tests.fakehost import FakeOpencode, write_memory
from tests.unit.write.test_phase2 import extracted

# Each is 0.4-1.8 MB of RSS in a process that never uses it (an idle daemon <= 50 MB).
NOT_IN_THE_DAEMON = [
    "click",  # httpx's command-line client
    "pygments",
    "httpx._main",
    "tiktoken",  # the tokenizer lives in a helper process (memoryd.tokenizer)
    "memoryd.tools",  # the memory tools: MCP server and `memoryd memory`
    "memoryd.runtime.manager",  # `memoryd service`; plistlib pulls in xml
    "plistlib",
]


def test_the_daemons_imports_leave_out_what_it_never_uses() -> None:
    probe = (
        "import sys, memoryd.cli, memoryd.runtime.daemon, memoryd.write.passes\n"
        f"print(sorted(m for m in {NOT_IN_THE_DAEMON!r} if sys.modules.get(m) is not None))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_httpx_still_works_without_its_cli() -> None:
    probe = "import memoryd, httpx\nprint(httpx.Client, callable(httpx.main))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "httpx.Client" in out and "True" in out


# --- a pass on a home that does not sync leaves the sync package (and dulwich's client) unloaded


@pytest.mark.anyio
async def test_phase2_without_a_sync_remote_never_loads_the_sync_import(
    store: Store, paths: Paths, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "memoryd.sync.inputs", None)  # importing it would fail
    monkeypatch.setitem(sys.modules, "memoryd.sync.publish", None)
    host = FakeOpencode(consolidate=write_memory)
    p2 = await extracted(store, host, paths, clock)
    result = await p2.run()
    assert result.status is Phase2Status.SUCCEEDED


@pytest.mark.anyio
async def test_a_stale_sync_folder_is_still_removed_once_sync_is_off(
    store: Store, paths: Paths, clock: ManualClock
) -> None:
    stale = paths.memories / "extensions" / inputs.EXTENSION
    (stale / "resources").mkdir(parents=True)
    (stale / "resources" / "old.md").write_text("from another machine\n")
    host = FakeOpencode(consolidate=write_memory)
    p2 = await extracted(store, host, paths, clock)
    assert (await p2.run()).ok
    assert not stale.exists() and not stale.is_symlink()
