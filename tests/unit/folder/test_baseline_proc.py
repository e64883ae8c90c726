"""The daemon's baseline runs in a child process: the same answers as in process, the same
errors, its log lines in the daemon's log, and dulwich never loaded by the daemon."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.errors import BaselineError
from memoryd.folder import baseline_proc
from memoryd.folder.baseline import Baseline
from memoryd.folder.baseline_proc import ChildBaseline, open_baseline
from memoryd.folder.layout import is_tracked


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    yield
    baseline_proc.release()
    baseline_proc.keep_out_of_process(False)


def folder(tmp_path: Path) -> tuple[Path, Path]:
    wt = tmp_path / "memories"
    (wt / "skills" / "lint").mkdir(parents=True)
    (wt / "MEMORY.md").write_text("# Memory\n\n- use ruff\n")
    (wt / "memory_summary.md").write_text("v1\n- short\n")
    (wt / "skills" / "lint" / "SKILL.md").write_bytes(b"binary?\x00\xff no\n")
    (wt / ".hidden").write_text("never tracked\n")
    return tmp_path / "data" / "baseline.git", wt


def test_the_child_answers_as_the_in_process_baseline(tmp_path: Path) -> None:
    gd_a, wt_a = folder(tmp_path / "a")
    gd_b, wt_b = folder(tmp_path / "b")
    here = open_baseline(gd_a, wt_a)
    baseline_proc.keep_out_of_process()
    there = open_baseline(gd_b, wt_b)
    assert isinstance(there, ChildBaseline) and not isinstance(here, ChildBaseline)

    assert here.ensure() is there.ensure() is True
    assert here.ensure() is there.ensure() is False
    for wt in (wt_a, wt_b):
        (wt / "MEMORY.md").write_text("# Memory\n\n- use ruff check --fix\n")
        (wt / "skills" / "lint" / "SKILL.md").unlink()
        (wt / "notes.md").write_bytes("é".encode() + b" \xff\n")  # not UTF-8
        (wt / "caf\udce9.md").write_text("a name that is not UTF-8 either\n")
    a, b = here.diff(), there.diff()
    assert a == b and [c.status for c in b.changes] == ["M", "A", "A", "D"]
    assert "+- use ruff check --fix" in b.patch
    assert here.head_files() == there.head_files()
    assert there.head_files()["skills/lint/SKILL.md"] == b"binary?\x00\xff no\n"

    hold: dict[str, tuple[bool, bytes] | None] = {
        "MEMORY.md": (False, b"# held\n\xff"),
        "notes.md": None,
    }
    here.reset(hold)
    there.reset(hold)
    assert here.head_files() == there.head_files()
    assert there.head_files()["MEMORY.md"] == b"# held\n\xff"
    assert [c.path for c in there.diff().changes] == ["MEMORY.md", "notes.md"]
    assert baseline_proc.helper_pid() is not None


def test_a_baseline_error_comes_back_as_the_same_error(tmp_path: Path) -> None:
    gd, wt = folder(tmp_path)
    baseline_proc.keep_out_of_process()
    with pytest.raises(BaselineError) as here:
        Baseline(gd, wt, exclude=lambda p: not is_tracked(p)).diff()
    with pytest.raises(BaselineError) as there:
        open_baseline(gd, wt).diff()
    assert str(there.value) == str(here.value)
    assert "baseline unreadable (missing)" in str(there.value)
    pid = baseline_proc.helper_pid()
    assert pid is not None  # a refusal keeps the child
    os.symlink(tmp_path, wt / "link")
    with pytest.raises(BaselineError, match="symlink in the memory folder"):
        open_baseline(gd, wt).ensure()
    assert baseline_proc.helper_pid() == pid


def test_the_childs_log_lines_land_in_the_parents_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gd, wt = folder(tmp_path)
    baseline_proc.keep_out_of_process()
    gd.parent.mkdir(parents=True)
    gd.write_text("not a repository")
    with caplog.at_level(logging.INFO, logger="memoryd"):
        assert open_baseline(gd, wt).ensure() is True
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert any(
        name == "memoryd.folder.baseline" and level == logging.WARNING and "re-initialising" in msg
        for name, level, msg in said
    ), said


def test_a_child_that_died_between_calls_is_replaced_and_one_that_dies_mid_call_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gd, wt = folder(tmp_path)
    baseline_proc.keep_out_of_process()
    b = open_baseline(gd, wt)
    assert b.ensure() is True
    pid = baseline_proc.helper_pid()
    assert pid is not None
    os.kill(pid, 9)
    while baseline_proc.helper_pid() == pid:  # reaped by the next poll
        time.sleep(0.01)
    assert b.diff().empty
    assert baseline_proc.helper_pid() not in (None, pid)

    real = baseline_proc._child.source
    monkeypatch.setattr(
        baseline_proc._child, "source", lambda: "import os\nos.read(0, 4)\nos._exit(7)"
    )
    baseline_proc.release()
    with pytest.raises(BaselineError, match=r"baseline helper \(.*\) failed: .*exit code 7"):
        b.diff()
    monkeypatch.setattr(baseline_proc._child, "source", real)
    assert b.diff().empty
    assert baseline_proc.release() is True and baseline_proc.helper_pid() is None


def test_a_daemon_pass_never_loads_dulwich_and_leaves_no_child(tmp_path: Path) -> None:
    """What the daemon does (keep_out_of_process, then a consolidation's baseline work, and the
    end of a pass, here one that fails on an unreachable host), in a fresh interpreter: dulwich
    is never imported there and no child outlives the pass."""
    probe = textwrap.dedent(
        f"""
        import asyncio, os, sys
        from pathlib import Path
        from memoryd.store.home import App
        from memoryd.paths import Paths
        from memoryd.folder import baseline_proc, rollback
        from memoryd.write import passes
        paths = Paths.from_env({{"MEMORYD_HOME": {str(tmp_path / "home")!r}}})
        paths.memories.mkdir(parents=True)
        (paths.memories / "MEMORY.md").write_text("# Memory\\n")
        baseline_proc.keep_out_of_process()
        b = rollback.baseline(paths)
        b.ensure()
        (paths.memories / "MEMORY.md").write_text("# Memory\\n- more\\n")
        changed = [c.path for c in b.diff().changes]
        b.reset()
        child = baseline_proc.helper_pid() is not None
        passes.tick(App(paths))  # a tick during a pass leaves the child alone
        child = child and baseline_proc.helper_pid() is not None
        os.environ["MEMORYD_HOST_URL"] = "http://127.0.0.1:9"
        import memoryd.tuning
        memoryd.tuning.HOST_RETRY_DELAYS_S = ()  # no real sleeps before the pass gives up
        try:
            asyncio.run(passes.run_pass(App(paths)))
        except Exception as exc:
            assert "unreachable" in str(exc), exc
        print(changed, child, baseline_proc.helper_pid(), any(m.startswith("dulwich") for m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['MEMORY.md']", "True", "None", "False"]


def test_releasing_at_a_pass_end_never_waits_for_a_call_in_flight(tmp_path: Path) -> None:
    gd, wt = folder(tmp_path)
    baseline_proc.keep_out_of_process()
    assert open_baseline(gd, wt).ensure() is True
    pid = baseline_proc.helper_pid()
    with baseline_proc._child._lock:  # another thread's call (a review accept) holds the child
        started = time.monotonic()
        assert baseline_proc.release(wait=False) is False
        assert time.monotonic() - started < 0.5
        assert baseline_proc.helper_pid() == pid
    assert baseline_proc.release(wait=False) is True
    assert baseline_proc.helper_pid() is None
