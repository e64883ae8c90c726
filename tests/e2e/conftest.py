"""Fixtures for tests that drive the real ``opencode serve``.

Scopes are chosen for speed on a small machine (a server takes ~2 s to start and ~370 MB):

* ``opencode_bin`` (session): installs the pinned opencode into the test cache once.
* ``mock_llm`` (function): the module's :class:`MockLLM`, cleared and back on the default
  responder for every test, so scripting one test never leaks into the next.
* ``sandbox`` (module): one isolated opencode per test module, wired to that mock. Tests in a
  module share its sessions and config dir: create your own sessions, and if you change config
  or agent files, restart (or use ``make_sandbox`` for a private one).
* ``make_sandbox`` (function): factory for extra sandboxes (same mock), stopped at teardown.

Every test under ``tests/e2e`` is marked ``e2e`` automatically.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import MakeSandbox, OpencodeDriver, OpencodeSandbox, ensure_opencode

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    return ensure_opencode()


@pytest.fixture(scope="module")
def _module_mock_llm() -> Iterator[MockLLM]:
    with MockLLM() as mock:
        yield mock


@pytest.fixture
def mock_llm(_module_mock_llm: MockLLM) -> MockLLM:
    _module_mock_llm.set_extraction_reply(None)
    _module_mock_llm.delay_s = 0.0
    _module_mock_llm.clear()
    return _module_mock_llm


@pytest.fixture(scope="module")
def sandbox(
    opencode_bin: Path, _module_mock_llm: MockLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpencodeSandbox]:
    box = OpencodeSandbox(
        tmp_path_factory.mktemp("opencode"), opencode_bin, _module_mock_llm.base_url
    )
    try:
        yield box
    finally:
        box.stop()


@pytest.fixture
def driver(sandbox: OpencodeSandbox) -> OpencodeDriver:
    return sandbox.driver


@pytest.fixture
def make_sandbox(
    opencode_bin: Path, _module_mock_llm: MockLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MakeSandbox]:
    made: list[OpencodeSandbox] = []

    def make(**kwargs: Any) -> OpencodeSandbox:
        box = OpencodeSandbox(
            tmp_path_factory.mktemp("opencode"), opencode_bin, _module_mock_llm.base_url, **kwargs
        )
        made.append(box)
        return box

    try:
        yield make
    finally:
        for box in made:
            box.stop()
