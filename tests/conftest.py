from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.clock import ManualClock
from memoryd.paths import Paths
from memoryd.store import Store

# A fixed, realistic "now" (2027-01-15T08:00:00Z) so tests never depend on the wall clock.
T0 = 1_800_000_000_000


@pytest.fixture(autouse=True)
def memoryd_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own MEMORYD_HOME; nothing touches the real user folders."""
    home = tmp_path / "memoryd-home"
    monkeypatch.setenv("MEMORYD_HOME", str(home))
    for name in list(__import__("os").environ):
        if name.startswith("MEMORYD_") and name != "MEMORYD_HOME" and name != "MEMORYD_TEST_CACHE":
            monkeypatch.delenv(name)
    # Claude Code's and Codex's homes are phase-1 sources when they exist: never the real ones.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "no-claude-home"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "no-codex-home"))
    return home


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def paths(memoryd_home: Path) -> Paths:
    return Paths.from_env()


@pytest.fixture
def store(paths: Paths, clock: ManualClock) -> Store:
    paths.ensure_dir(paths.data_dir)
    s = Store(paths.db, clock=clock)
    yield s
    s.close()
