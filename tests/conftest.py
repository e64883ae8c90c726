from __future__ import annotations

import itertools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import ManualClock
from memoryd.paths import Paths
from memoryd.store import Store

# The suite keeps its bytecode even where PYTHONDONTWRITEBYTECODE is set: pytest rewrites and
# compiles every test module (~40,000 lines, the corpora included) on each run and in each
# worker, about 5 s of CPU, and the memoryd processes the tests start read memoryd's bytecode
# instead of compiling it. Only this process changes; the variable still reaches subprocesses.
sys.dont_write_bytecode = False

# A fixed, realistic "now" (2027-01-15T08:00:00Z) so tests never depend on the wall clock.
T0 = 1_800_000_000_000

_HOME_NUMBERS = itertools.count()


@pytest.fixture(scope="session")
def _homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder holding the homes of the tests that never ask for ``tmp_path``."""
    return tmp_path_factory.mktemp("homes")


@pytest.fixture(autouse=True)
def memoryd_home(
    request: pytest.FixtureRequest, _homes: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every test gets its own MEMORYD_HOME; nothing touches the real user folders.

    A test that uses ``tmp_path`` finds its home at ``tmp_path / "memoryd-home"``; the others get
    a fresh, not yet created folder of their own, without the cost of a numbered ``tmp_path``
    (a mkdir, a symlink swap and a delete at the end, for each of thousands of pure tests)."""
    if "tmp_path" in request.fixturenames:
        tmp_path: Path = request.getfixturevalue("tmp_path")
        home = tmp_path / "memoryd-home"
    else:
        home = _homes / f"memoryd-home-{next(_HOME_NUMBERS)}"
    monkeypatch.setenv("MEMORYD_HOME", str(home))
    for name in list(__import__("os").environ):
        if name.startswith("MEMORYD_") and name != "MEMORYD_HOME" and name != "MEMORYD_TEST_CACHE":
            monkeypatch.delenv(name)
    # Claude Code's and Codex's homes are phase-1 sources when they exist: never the real ones.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home.parent / f"{home.name}-no-claude-home"))
    monkeypatch.setenv("CODEX_HOME", str(home.parent / f"{home.name}-no-codex-home"))
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


@pytest.fixture(scope="session")
def _migrated_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database migrated once per session, at T0 as the ``clock`` fixture starts.

    Migrating commits once per migration (a sync to disk each, ~30 ms); a ``store`` opened on a
    copy finds every migration applied and is the database a fresh Store would have made."""
    path = tmp_path_factory.mktemp("migrated") / "memory.db"
    Store(path, clock=ManualClock(T0)).close()  # closing checkpoints the WAL into the file
    return path


@pytest.fixture
def store(paths: Paths, clock: ManualClock, _migrated_db: Path) -> Iterator[Store]:
    paths.ensure_dir(paths.data_dir)
    if not paths.db.exists():
        shutil.copyfile(_migrated_db, paths.db)
    s = Store(paths.db, clock=clock)
    yield s
    s.close()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Workers take whole test files (module fixtures and in-file order as in a serial run), and
    all of tests/e2e goes to one worker: the real opencode, the clients and the browser run one at
    a time, as they did before the suite ran in parallel."""
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndOneE2eQueue(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/e2e" if path.startswith("tests/e2e/") else path

    return FilesAndOneE2eQueue(config, log)
