"""Issue 13 acceptance: ``memoryd ui`` in a real headless browser, over memory the real opencode made.

Debian's ``chromium`` is driven by Playwright's Python API through ``executable_path`` (no
browser download; ``scripts/install-browser`` installs it through apt when it is missing). The
memory comes from the real ``opencode serve`` and the scripted model: one consolidation goes
live, a second one is staged by review mode. The browser then loads the dashboard, searches,
forgets a session through its confirmation page, accepts the staged review (and the injected
block changes), and shows a transcript carrying ``<img onerror>`` and ``<script>`` as text
without running anything.

Set ``UI_SCREENSHOT=docs/dashboard.png`` to save the dashboard screenshot the README uses.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported where used: collecting the unit tests must not need playwright
    from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page

from memoryd.read.fence import normalise
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import OpencodeSandbox
from tests.e2e.test_phase1_e2e import memoryd, outputs, run_env

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "Render check: <img src=x onerror=alert(1)> and <script>alert(2)</script> stay text."


@functools.cache
def chromium() -> str:
    """The system chromium, installed through the project's script when missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-browser")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/install-browser failed:\n{proc.stderr[-2000:]}")
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture
def browser() -> Iterator[Browser]:
    args = ["--no-sandbox"] if os.geteuid() == 0 else []  # chromium refuses root with a sandbox
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium(), headless=True, args=args)
        try:
            yield b
        finally:
            b.close()


def session(box: OpencodeSandbox, title: str, text: str) -> str:
    sid: str = box.driver.create_session(title, directory=box.project_dir)["id"]
    box.driver.say(sid, text, directory=box.project_dir)
    return sid


def start_ui(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "ui", "--no-open", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{20,}", url), url
    return proc, url


def test_ui_in_a_real_browser(
    sandbox: OpencodeSandbox, mock_llm: MockLLM, browser: Browser
) -> None:
    install(mock_llm, ScriptedConsolidator())
    env = run_env(sandbox)
    home = sandbox.memoryd_home
    db_sid = session(
        sandbox, "database choice", "We chose PostgreSQL 16 for the billing service database."
    )
    hostile_sid = session(sandbox, "hostile markup", HOSTILE)
    assert memoryd(env, "install", "opencode").returncode == 0
    first = memoryd(env, "run", "--once")
    assert "phase 2: consolidated" in first.stdout, first.stdout + first.stderr
    block_file = home / "state" / "readpath" / "block.md"
    live_block = block_file.read_text()
    assert "PostgreSQL 16" in (home / "memories" / "MEMORY.md").read_text()

    # review mode on: the next consolidation is staged, and the block keeps the live memory
    env["MEMORYD_REVIEW"] = "true"
    session(sandbox, "deploy day", "Deploys of the billing service happen on Tuesdays only.")
    second = memoryd(env, "run", "--once", "--force-consolidation")
    assert "staged for review" in second.stdout, second.stdout + second.stderr
    assert block_file.read_text() == live_block
    staged_summary = (home / "review" / "staged" / "tree" / "memory_summary.md").read_text()
    assert staged_summary.splitlines()[1:] and staged_summary not in live_block

    proc, url = start_ui(env)
    dialogs: list[str] = []
    errors: list[str] = []
    page: Page = browser.new_page()

    def on_dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        d.dismiss()

    def on_console(m: ConsoleMessage) -> None:
        if m.type == "error":
            errors.append(m.text)

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    started = time.monotonic()
    try:
        # dashboard: the token becomes a cookie and leaves the address bar
        page.goto(url)
        assert "token=" not in page.url
        assert page.locator("h1").inner_text() == "Dashboard"
        assert page.locator('[data-field="pipeline.extracted"]').inner_text() == "3"
        assert page.locator("svg.chart rect.bar").count() == 30
        assert page.locator(".badge").count() == 1  # a review is waiting
        if shot := os.environ.get("UI_SCREENSHOT"):
            page.set_viewport_size({"width": 1200, "height": 900})
            page.screenshot(path=str(REPO / shot), full_page=True)

        # hostile transcript text shows as text on every page that renders it; nothing runs
        for where in ("/memory", "/timeline", "/sessions"):
            page.click(f'nav a[href="{where}"]')
            page.wait_for_load_state("load")
            assert page.get_by_text("<script>alert(2)</script>", exact=False).count() >= 1, where
            assert page.locator("main img").count() == 0, where
            assert page.locator("main script").count() == 0, where
        page.evaluate("() => new Promise((r) => setTimeout(r, 300))")  # let a stray onerror fire
        assert dialogs == [] and errors == [], (dialogs, errors)

        # ranked search
        page.click('nav a[href="/search"]')
        page.fill('input[name="q"]', "PostgreSQL")
        page.press('input[name="q"]', "Enter")
        page.wait_for_url(re.compile(r"/search\?q=PostgreSQL"))
        assert "PostgreSQL 16" in page.locator("ol.results").inner_text()

        # accept the staged review: the diff is shown, then the block changes (before any forget:
        # forgetting a session the stage used discards the stage, so it can never go live)
        page.click('nav a[href="/review"]')
        diff = page.locator("#staged-diff").inner_text()
        assert "Tuesdays" in diff and "+++ b/MEMORY.md" in diff
        assert block_file.read_text() == live_block
        page.click("#accept")
        page.wait_for_url(re.compile(r"/review\?done="))
        assert "accepted" in page.locator(".flash").inner_text()
        new_block = block_file.read_text()
        assert new_block != live_block
        # the block shows memory text NFKC-normalised (the fence check sees what the model sees)
        assert all(normalise(line) in new_block for line in staged_summary.splitlines()[1:])
        assert "Tuesdays" in (home / "memories" / "MEMORY.md").read_text()
        assert page.locator(".badge").count() == 0

        # forget a session, through its confirmation page
        page.click('nav a[href="/sessions"]')
        page.click(f'tr[data-session="{db_sid}"] a.danger')
        assert page.locator("h1").inner_text() == "Forget this session?"
        assert db_sid in outputs(home)
        page.click("#confirm-forget")
        page.wait_for_url(re.compile(r"/sessions\?done="))
        assert f"forgot session {db_sid}" in page.locator(".flash").inner_text()
        assert db_sid not in outputs(home) and hostile_sid in outputs(home)
        assert page.locator(f'tr[data-session="{db_sid}"] select').input_value() == "disabled"

        # the dashboard is live: a change made elsewhere shows up without a reload
        page.click('nav a[href="/"]')
        extracted = page.locator('[data-field="pipeline.extracted"]')
        assert extracted.inner_text() == "2"
        gone = memoryd(env, "forget", "--session", hostile_sid)
        assert gone.returncode == 0, gone.stderr
        page.wait_for_function(
            "() => document.querySelector('[data-field=\"pipeline.extracted\"]')"
            ".textContent === '1'",
            timeout=15_000,
        )
        assert dialogs == [] and errors == [], (dialogs, errors)
        elapsed = time.monotonic() - started
        print(f"browser part of the UI e2e: {elapsed:.1f} s")
        assert elapsed < 60
    finally:
        page.close()
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)  # also closes both pipes
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err
