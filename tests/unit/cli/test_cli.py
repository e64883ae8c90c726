"""The CLI edge: exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd import tokenizer
from memoryd.cli import main
from memoryd.paths import Paths


def test_path_prints_each_location(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    for name, expected in paths.named().items():
        assert main(["path", name]) == 0
        assert capsys.readouterr().out.strip() == str(expected)


def test_bad_config_exits_2_with_one_line(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text("max_rollouts_per_startup = 500\n")
    assert main(["status"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "max_rollouts_per_startup" in err


def test_unreachable_host_exits_3(
    paths: Paths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_HOST_URL", "http://127.0.0.1:9")
    assert main(["run", "--once"]) == 3
    assert "unreachable" in capsys.readouterr().err


def test_missing_opencode_binary_is_a_clear_error(
    paths: Paths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYD_HOST_OPENCODE_BIN", "definitely-not-opencode")
    assert main(["run", "--once"]) == 3
    assert "not found" in capsys.readouterr().err


def test_newer_database_is_refused_at_the_edge(
    paths: Paths, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    assert main(["status"]) == 0
    capsys.readouterr()
    conn = sqlite3.connect(paths.db)
    conn.execute("INSERT INTO _memoryd_migrations (name, applied_at) VALUES ('m999_future', 1)")
    conn.commit()
    conn.close()
    assert main(["status"]) == 1
    assert "newer memoryd" in capsys.readouterr().err


def test_reset_needs_yes(paths: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reset"]) == 1
    assert "--yes" in capsys.readouterr().out


def test_run_once_says_why_a_pass_stopped_in_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 11: a ``run --once`` that cannot reach opencode exits 3 and ``status`` says why."""
    import json as _json

    from memoryd.cli import main

    monkeypatch.setenv("MEMORYD_HOST_URL", "http://127.0.0.1:9")  # nothing listens on discard
    monkeypatch.setattr("memoryd.tuning.HOST_RETRY_DELAYS_S", (0.0,))
    assert main(["run", "--once"]) == 3
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    snap = _json.loads(capsys.readouterr().out)
    assert "127.0.0.1:9" in snap["last_pass_error"]["error"]


def test_every_phase2_status_has_a_line() -> None:
    """Chaos, disk trouble: a new status once crashed ``run --once`` with a KeyError."""
    from memoryd.cli.run import phase2_line
    from memoryd.write.phase2 import Phase2Result, Phase2Status

    for status in Phase2Status:
        assert phase2_line(Phase2Result(status, "why")).startswith("phase 2: ")


def test_install_leaves_the_tokenizer_table_decoded_for_the_first_pass(
    paths: Paths, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Install starts a tokenizer helper once, so the first pass finds the decoded table (a
    third of a helper's start) and the compact copy it counts from in process; a dry run
    writes nothing."""
    copies = paths.state_dir / "tokenizer"
    assert main(["install", "opencode", "--config-dir", str(tmp_path / "oc"), "--dry-run"]) == 0
    assert not copies.exists()
    assert main(["install", "opencode", "--config-dir", str(tmp_path / "oc")]) == 0
    assert sorted(p.suffix for p in copies.iterdir()) == [".bpe", ".ranks"]
    assert not tokenizer.loaded()  # the helper it started has ended
