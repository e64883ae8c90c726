from __future__ import annotations

import argparse
import json
import os
import plistlib
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from memoryd.cli import service as service_cli
from memoryd.errors import ServiceError
from memoryd.exitcodes import NO_RESTART_STATUS
from memoryd.paths import Paths
from memoryd.runtime import manager as service_mod
from memoryd.runtime.manager import RunResult, Service, run_command
from memoryd.runtime.servicefile import (
    LABEL,
    UNIT,
    detect_platform,
    interpreter,
    render,
    service_path,
)
from memoryd.store.home import App

PY = "/opt/memoryd venv/bin/python"  # absolute, with a space: must be quoted, never resolved

# -- a small systemd unit validator (always runs; systemd-analyze is a bonus) --------------------

SERVICE_LIFECYCLE = {
    "Type",
    "ExecStart",
    "Restart",
    "RestartSec",
    "RestartPreventExitStatus",
    "TimeoutStopSec",
}
SERVICE_EXEC = {"KillMode", "Environment", "SyslogIdentifier", "NoNewPrivileges", "UMask"}
SECTIONS = {
    "Unit": {"Description", "StartLimitIntervalSec", "StartLimitBurst", "After", "Wants"},
    "Service": SERVICE_LIFECYCLE | SERVICE_EXEC,
    "Install": {"WantedBy"},
}
REPEATABLE = {"Environment", "After", "Wants", "WantedBy"}
CHOICES = {
    "Type": {"simple", "exec", "forking", "oneshot", "dbus", "notify", "notify-reload", "idle"},
    "Restart": {
        "no",
        "on-success",
        "on-failure",
        "on-abnormal",
        "on-watchdog",
        "on-abort",
        "always",
    },
    "KillMode": {"control-group", "mixed", "process", "none"},
    "NoNewPrivileges": {"yes", "no", "true", "false"},
}
INTEGER = {"StartLimitIntervalSec", "StartLimitBurst", "RestartSec", "TimeoutStopSec"}
ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "s": " "}


def systemd_words(value: str) -> list[str]:
    """Split a setting like systemd does (EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), then resolve ``%%``."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote = "", None
        while i < n:
            c = value[i]
            if quote is None and c in " \t":
                break
            if c == "\\":
                if i + 1 >= n or value[i + 1] not in ESCAPES:
                    raise ValueError(f"unknown escape in {value!r}")
                word += ESCAPES[value[i + 1]]
                i += 2
                continue
            if quote is None and c in "\"'":
                quote = c
            elif c == quote:
                quote = None
            else:
                word += c
            i += 1
        if quote:
            raise ValueError(f"unbalanced quotes in {value!r}")
        if re.search(r"%[^%]", word.replace("%%", "")):
            raise ValueError(f"unescaped specifier in {value!r}")
        words.append(word.replace("%%", "%"))
    return words


def validate_unit(text: str) -> tuple[list[str], dict[str, dict[str, list[str]]]]:
    """Problems found, and the parsed settings (section -> key -> raw values)."""
    problems: list[str] = []
    parsed: dict[str, dict[str, list[str]]] = {}
    section = None
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            problems.append(f"{no}: line continuation")
        m = re.fullmatch(r"\[(\w+)\]", line)
        if m:
            section = m.group(1)
            if section not in SECTIONS:
                problems.append(f"{no}: unknown section [{section}]")
            parsed.setdefault(section, {})
            continue
        key, sep, value = line.partition("=")
        if not sep or section is None:
            problems.append(f"{no}: not a key=value line in a section: {line!r}")
            continue
        if key not in SECTIONS.get(section, set()):
            problems.append(f"{no}: {key} does not belong in [{section}]")
        values = parsed[section].setdefault(key, [])
        if values and key not in REPEATABLE:
            problems.append(f"{no}: {key} given twice")
        values.append(value)
        try:
            words = systemd_words(value)
        except ValueError as exc:
            problems.append(f"{no}: {exc}")
            continue
        if key in CHOICES and value not in CHOICES[key]:
            problems.append(f"{no}: {key}={value} is not one of {sorted(CHOICES[key])}")
        if key in INTEGER and not value.isdigit():
            problems.append(f"{no}: {key} wants an integer")
        if key == "UMask" and not re.fullmatch(r"0[0-7]{3}", value):
            problems.append(f"{no}: UMask wants an octal mode")
        if key == "RestartPreventExitStatus" and not all(w.isdigit() for w in words):
            problems.append(f"{no}: RestartPreventExitStatus wants exit codes")
        if key == "Environment" and not all(
            re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w, re.DOTALL) for w in words
        ):
            problems.append(f"{no}: Environment wants NAME=value words")
        if key == "ExecStart":
            if not words or not words[0].startswith("/"):
                problems.append(f"{no}: ExecStart must start with an absolute path")
            elif re.search(r"[\"'\\$]", words[0]):
                problems.append(f"{no}: systemd refuses special characters in the executable name")
    for section, required in (
        ("Service", "ExecStart"),
        ("Service", "Type"),
        ("Install", "WantedBy"),
    ):
        if required not in parsed.get(section, {}):
            problems.append(f"missing {required} in [{section}]")
    return problems, parsed


def setting(parsed: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    (value,) = parsed[section][key]
    return value


def environment(parsed: dict[str, dict[str, list[str]]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in parsed["Service"].get("Environment", []):
        for word in systemd_words(value):
            name, _, val = word.partition("=")
            env[name] = val
    return env


# -- fixtures --------------------------------------------------------------------------------


class FakeRunner:
    """Records every command; answers from (argv prefix -> result) rules, default success."""

    def __init__(self, rules: dict[tuple[str, ...], RunResult] | None = None) -> None:
        self.rules = rules or {}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> RunResult:
        assert 0 < timeout <= 120
        argv = tuple(argv)
        self.calls.append(argv)
        for prefix, result in sorted(self.rules.items(), key=lambda kv: -len(kv[0])):
            if argv[: len(prefix)] == prefix:
                return result
        return RunResult(0, "", "")


NO_BUS = RunResult(1, "", "Failed to connect to bus: No medium found\n")


@pytest.fixture
def bare(tmp_path: Path) -> dict[str, str]:
    """An installing environment without MEMORYD_HOME: for rendering only (its Paths are the real ones)."""
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "USER": "tester"}


@pytest.fixture
def env(bare: dict[str, str], memoryd_home: Path) -> dict[str, str]:
    """The environment for anything that writes: HOME and MEMORYD_HOME both under tmp_path."""
    return {**bare, "MEMORYD_HOME": str(memoryd_home)}


def make(
    env: dict[str, str], runner: FakeRunner, platform: str = "systemd", **kw: object
) -> Service:
    kw.setdefault("python", PY)
    paths = Paths.from_env(env)
    assert "MEMORYD_HOME" in env and paths.state_dir.is_relative_to(Path(env["HOME"]).parent), (
        "tests stay in tmp"
    )
    return Service(platform, environ=env, runner=runner, paths=paths, **kw)  # type: ignore[arg-type]


# -- rendering ---------------------------------------------------------------------------------


def test_systemd_unit_runs_the_absolute_interpreter_with_a_bounded_restart_policy(
    bare: dict[str, str],
) -> None:
    env = bare
    path, data = render("systemd", python=PY, environ=env)
    assert path == Path(env["HOME"]) / ".config/systemd/user/memoryd.service"
    problems, parsed = validate_unit(data.decode())
    assert problems == []
    assert systemd_words(setting(parsed, "Service", "ExecStart")) == [PY, "-m", "memoryd", "run"]
    assert setting(parsed, "Service", "ExecStart").startswith('"/opt/memoryd venv/bin/python" ')
    assert setting(parsed, "Service", "Type") == "notify"
    assert setting(parsed, "Service", "Restart") == "on-failure"
    assert setting(parsed, "Service", "RestartSec") == "10"
    assert setting(parsed, "Service", "TimeoutStopSec") == "20"
    assert setting(parsed, "Service", "KillMode") == "mixed"
    assert setting(parsed, "Service", "NoNewPrivileges") == "yes"
    assert int(setting(parsed, "Unit", "StartLimitBurst")) >= 1
    assert int(setting(parsed, "Unit", "StartLimitIntervalSec")) > 10 * int(
        setting(parsed, "Unit", "StartLimitBurst")
    )
    assert setting(parsed, "Install", "WantedBy") == "default.target"
    assert (
        "After" not in parsed["Unit"]
    )  # loopback only; network.target means nothing to a user manager
    env_vars = environment(parsed)
    assert env_vars["PYTHONUNBUFFERED"] == "1"
    assert env_vars["PATH"] == env["PATH"]  # so the daemon finds opencode as the shell did
    assert "MEMORYD_HOME" not in env_vars


def test_no_restart_for_exit_codes_a_restart_cannot_fix(env: dict[str, str]) -> None:
    from memoryd.exitcodes import EXIT_STARTUP_FAILURE, EXIT_USAGE

    assert set(NO_RESTART_STATUS) == {EXIT_USAGE, EXIT_STARTUP_FAILURE}
    _, parsed = validate_unit(render("systemd", python=PY, environ=env)[1].decode())
    assert systemd_words(setting(parsed, "Service", "RestartPreventExitStatus")) == ["2", "4"]


def test_memoryd_home_is_passed_through_only_when_set_and_quoted(
    env: dict[str, str], tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    _, data = render("systemd", python=PY, environ={**env, "MEMORYD_HOME": str(plain)})
    assert f"\nEnvironment=MEMORYD_HOME={plain}\n" in data.decode()
    spaced = tmp_path / "my memory 100%"
    _, data = render("systemd", python=PY, environ={**env, "MEMORYD_HOME": str(spaced)})
    assert f'\nEnvironment="MEMORYD_HOME={tmp_path}/my memory 100%%"\n' in data.decode()
    problems, parsed = validate_unit(data.decode())
    assert problems == []
    assert environment(parsed)["MEMORYD_HOME"] == str(spaced)
    _, data = render("systemd", python=PY, environ={**env, "MEMORYD_HOME": ""})
    assert "MEMORYD_HOME" not in data.decode()


def test_memoryd_home_is_pinned_to_an_absolute_path(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(env["HOME"])
    _, data = render("systemd", python=PY, environ={**env, "MEMORYD_HOME": "rel/home"})
    _, parsed = validate_unit(data.decode())
    assert environment(parsed)["MEMORYD_HOME"] == str(Path(env["HOME"]) / "rel" / "home")


@pytest.mark.parametrize(
    "value", ['/tmp/"quoted"', "/tmp/back\\slash", "/tmp/$HOME", "/tmp/it's", "/tmp/%h %%"]
)
def test_environment_values_round_trip_through_systemd_quoting(
    env: dict[str, str], value: str
) -> None:
    _, data = render("systemd", python=PY, environ={**env, "XDG_DATA_HOME": value})
    problems, parsed = validate_unit(data.decode())
    assert problems == []
    assert environment(parsed)["XDG_DATA_HOME"] == value


def test_control_characters_and_unstartable_interpreters_are_refused(env: dict[str, str]) -> None:
    with pytest.raises(ServiceError, match="control characters"):
        render(
            "systemd", python=PY, environ={**env, "MEMORYD_HOME": "/tmp/a\nExecStartPre=/bin/evil"}
        )
    for bad in (
        '/opt/o"brien/python',
        "/opt/o'brien/python",
        "/opt/back\\slash/python",
        "/opt/$X/python",
    ):
        with pytest.raises(ServiceError, match="systemd cannot start"):
            render("systemd", python=bad, environ=env)
    with pytest.raises(ServiceError, match="absolute"):
        render("systemd", python="python3", environ=env)
    # launchd has no such rule: the same path is fine in a plist
    _, data = render("launchd", python="/opt/o'brien/python", environ=env)
    assert plistlib.loads(data)["ProgramArguments"][0] == "/opt/o'brien/python"


def test_interpreter_is_absolute_and_keeps_venv_symlinks() -> None:
    got = interpreter()
    assert os.path.isabs(got) and got == os.path.abspath(sys.executable)
    if os.path.islink(sys.executable):  # a venv: resolving would lose its site-packages
        assert got != os.path.realpath(sys.executable)


def test_unit_dir_respects_xdg_config_home(env: dict[str, str], tmp_path: Path) -> None:
    assert service_path("systemd", {**env, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}) == (
        tmp_path / "cfg" / "systemd" / "user" / UNIT
    )
    assert service_path("systemd", {**env, "XDG_CONFIG_HOME": "relative"}).is_relative_to(
        env["HOME"]
    )


def _systemd_analyze(unit: Path, runtime: Path) -> subprocess.CompletedProcess[str]:
    runtime.mkdir(mode=0o700, exist_ok=True)
    sub_env = {
        **os.environ,
        "XDG_RUNTIME_DIR": str(runtime),
        "SYSTEMD_UNIT_PATH": f"{unit.parent}:",
    }
    return subprocess.run(
        ["systemd-analyze", "--user", "--man=no", "verify", str(unit)],
        capture_output=True, text=True, timeout=60, env=sub_env, check=False,
    )  # fmt: skip


def test_unit_passes_the_validator_and_systemd_analyze_when_present(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The validator always runs; ``systemd-analyze verify`` runs too when installed (it also checks
    that the quoted interpreter path unquotes to an executable file)."""
    odd_dir = tmp_path / "venv with space 100%"
    odd_dir.mkdir()
    python = odd_dir / "python"
    python.symlink_to(sys.executable)
    environ = {
        **env,
        "MEMORYD_HOME": str(tmp_path / "home dir %i"),
        "XDG_STATE_HOME": '/tmp/"s"\\x',
    }
    units: list[Path] = []
    for py in (interpreter(), str(python)):
        _, data = render("systemd", python=py, environ=environ)
        problems, _ = validate_unit(data.decode())
        assert problems == [], problems
        unit = tmp_path / f"unit{len(units)}" / UNIT
        unit.parent.mkdir()
        unit.write_bytes(data)
        units.append(unit)
    broken = validate_unit(data.decode().replace("KillMode=mixed", "KillMode=gentle"))[0]
    assert broken and "KillMode" in broken[0]  # the validator does catch a bad value
    if shutil.which("systemd-analyze") is None:
        return  # validator only (report: systemd-analyze absent on this machine)
    for unit in units:
        res = _systemd_analyze(unit, tmp_path / "runtime")
        if "Failed to initialize manager" in res.stderr or "RuntimeDirectory" in res.stderr:
            pytest.fail(f"systemd-analyze could not run here: {res.stderr}")
        assert res.returncode == 0, res.stderr
        assert str(unit) not in res.stderr and UNIT not in res.stderr, (
            res.stderr
        )  # no warnings for our file


def test_plist_round_trips_with_the_expected_keys(bare: dict[str, str], tmp_path: Path) -> None:
    env = bare
    path, data = render("launchd", python=PY, environ=env)
    assert path == Path(env["HOME"]) / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    plist = plistlib.loads(data)
    assert plist["Label"] == LABEL
    assert plist["ProgramArguments"] == [PY, "-m", "memoryd", "run"]
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert isinstance(plist["ThrottleInterval"], int) and plist["ThrottleInterval"] >= 10
    assert plist["ProcessType"] == "Background"
    logs = Paths.from_env(env).logs  # platformdirs' folder here: rendering writes nothing
    assert (
        Path(plist["StandardOutPath"]).parent == logs
        and Path(plist["StandardErrorPath"]).parent == logs
    )
    assert plist["EnvironmentVariables"] == {"PYTHONUNBUFFERED": "1", "PATH": env["PATH"]}
    home = tmp_path / "mem home"
    plist = plistlib.loads(
        render("launchd", python=PY, environ={**env, "MEMORYD_HOME": str(home)})[1]
    )
    assert plist["EnvironmentVariables"]["MEMORYD_HOME"] == str(home)
    assert Path(plist["StandardErrorPath"]).parent == home / "state" / "logs"
    assert (
        plistlib.dumps(plist)
        == render("launchd", python=PY, environ={**env, "MEMORYD_HOME": str(home)})[1]
    )


def test_platform_detection() -> None:
    assert detect_platform("linux") == "systemd"
    assert detect_platform("darwin") == "launchd"
    with pytest.raises(ServiceError, match="--platform"):
        detect_platform("win32")


# -- install / uninstall ---------------------------------------------------------------------


def test_dry_run_changes_nothing_and_runs_nothing(env: dict[str, str]) -> None:
    runner = FakeRunner()
    svc = make(env, runner)
    report = svc.install(dry_run=True)
    assert report.action == "create" and report.dry_run and report.content == svc.content
    assert [c.argv[2] for c in report.planned] == ["daemon-reload", "enable"]
    assert runner.calls == []
    assert not svc.path.exists() and not svc.paths.install_manifest.exists()
    assert list(Path(env["HOME"]).iterdir()) == [] and not Path(env["MEMORYD_HOME"]).exists()
    text = "\n".join(service_cli.report_lines(report))
    assert (
        "would create" in text
        and "Type=notify" in text
        and "systemctl --user daemon-reload" in text
    )
    # the module-level entry point takes the same injections
    again = service_mod.install(
        "systemd", dry_run=True, environ=env, python=PY, runner=runner, paths=svc.paths
    )
    assert again.action == "create" and again.content == svc.content and runner.calls == []
    # launchd too, and uninstall of a real install
    assert (
        make(env, runner, "launchd", sys_platform="darwin", uid=501).install(dry_run=True).planned
    )
    assert runner.calls == []
    svc.install()
    runner.calls.clear()
    report = svc.uninstall(dry_run=True)
    assert report.action == "remove" and runner.calls == [] and svc.path.exists()


def test_install_without_a_user_bus_writes_the_file_and_returns_manual_steps(
    env: dict[str, str],
) -> None:
    runner = FakeRunner({("systemctl", "--user"): NO_BUS})
    svc = make(env, runner)
    report = svc.install()
    assert svc.path.read_bytes() == svc.content and report.wrote
    assert report.manager == "unavailable" and "Failed to connect to bus" in report.detail
    assert report.manual == [
        "systemctl --user daemon-reload",
        "systemctl --user enable --now memoryd.service",
    ]
    assert runner.calls == [("systemctl", "--user", "show-environment")]  # one probe, then nothing
    manifest = json.loads(svc.paths.install_manifest.read_text())
    assert manifest["service"]["systemd"]["path"] == str(svc.path)


def test_install_with_a_manager_reloads_enables_and_starts(env: dict[str, str]) -> None:
    runner = FakeRunner()
    report = make(env, runner).install()
    assert report.manager == "ok" and report.action == "create"
    assert runner.calls == [
        ("systemctl", "--user", "show-environment"),
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "--now", "--no-block", UNIT),
    ]
    assert (
        any("enable-linger tester" in n for n in report.notes)
        or Path("/var/lib/systemd/linger/tester").exists()
    )
    runner.calls.clear()
    assert make(env, runner).install().action == "unchanged"
    assert ("systemctl", "--user", "try-restart", "--no-block", UNIT) not in runner.calls
    runner.calls.clear()
    report = make({**env, "PATH": "/opt/node/bin:/usr/bin"}, runner).install()
    assert report.action == "update"  # ours (hash in the manifest), so it is replaced and restarted
    assert ("systemctl", "--user", "try-restart", "--no-block", UNIT) in runner.calls


def test_a_failing_manager_command_is_an_error_with_the_rest_to_run_by_hand(
    env: dict[str, str],
) -> None:
    runner = FakeRunner(
        {
            ("systemctl", "--user", "enable"): RunResult(
                1, "", "Unit file memoryd.service does not exist."
            )
        }
    )
    report = make(env, runner).install()
    assert report.manager == "failed" and "does not exist" in report.detail
    assert report.manual == ["systemctl --user enable --now memoryd.service"]
    assert report.path.exists()


def test_uninstall_removes_only_our_file(env: dict[str, str]) -> None:
    runner = FakeRunner()
    svc = make(env, runner)
    svc.paths.ensure_dir(svc.paths.state_dir)
    svc.paths.install_manifest.write_text(
        json.dumps({"opencode": {"files": {"agent/x.md": "abc"}}})
    )
    svc.install()
    other = svc.path.parent / "other.service"
    other.write_text("[Service]\nExecStart=/bin/true\n")
    runner.calls.clear()
    report = make(env, runner).uninstall()
    assert report.action == "remove" and report.removed and report.manager == "ok"
    assert not svc.path.exists() and other.exists()
    assert runner.calls == [
        ("systemctl", "--user", "show-environment"),
        ("systemctl", "--user", "disable", UNIT),
        ("systemctl", "--user", "stop", UNIT),
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "reset-failed", UNIT),
    ]
    manifest = json.loads(svc.paths.install_manifest.read_text())
    assert "service" not in manifest and manifest["opencode"] == {"files": {"agent/x.md": "abc"}}
    assert make(env, runner).uninstall().action == "absent"


def test_user_edited_file_is_kept_unless_forced(env: dict[str, str]) -> None:
    runner = FakeRunner()
    svc = make(env, runner)
    svc.install()
    edited = svc.path.read_text().replace("RestartSec=10", "RestartSec=30")
    svc.path.write_text(edited)
    assert make(env, runner).install().action == "keep-modified"
    assert svc.path.read_text() == edited
    runner.calls.clear()
    report = make(env, runner).uninstall()
    assert report.action == "keep-modified" and not report.removed
    assert svc.path.read_text() == edited
    assert ("systemctl", "--user", "disable", UNIT) in runner.calls  # still stopped and disabled
    assert any("--force removes it" in line for line in service_cli.report_lines(report))
    assert make(env, runner).uninstall(force=True).removed
    assert not svc.path.exists()


def test_a_foreign_file_is_not_overwritten(env: dict[str, str]) -> None:
    runner = FakeRunner()
    svc = make(env, runner)
    svc.path.parent.mkdir(parents=True)
    svc.path.write_text("[Service]\nExecStart=/usr/bin/memoryd run\n")
    assert svc.install().action == "keep-modified"
    assert svc.path.read_text().startswith("[Service]")
    assert make(env, runner).install(force=True).action == "replace"
    assert svc.path.read_bytes() == svc.content


def test_uninstall_without_a_manager_removes_the_file_and_its_enable_link(
    env: dict[str, str],
) -> None:
    svc = make(env, FakeRunner())
    svc.install()
    wants = svc.path.parent / "default.target.wants"
    wants.mkdir()
    (wants / UNIT).symlink_to(svc.path)  # what `systemctl enable` makes
    runner = FakeRunner({("systemctl", "--user"): NO_BUS})
    report = make(env, runner).uninstall()
    assert report.removed and report.manager == "unavailable"
    assert not svc.path.exists() and not (wants / UNIT).is_symlink()
    assert report.manual == [
        "systemctl --user stop memoryd.service",
        "systemctl --user daemon-reload",
    ]


def test_uninstall_keeps_the_file_while_the_service_is_still_running(env: dict[str, str]) -> None:
    make(env, FakeRunner()).install()
    runner = FakeRunner(
        {
            ("systemctl", "--user", "stop"): RunResult(124, "", "no answer within 60 s"),
            ("systemctl", "--user", "is-active"): RunResult(0, "deactivating\n", ""),
        }
    )
    report = make(env, runner).uninstall()
    assert report.manager == "failed" and not report.removed and report.path.exists()
    assert "deactivating" in report.detail
    assert make(env, runner).uninstall(force=True).removed


def test_stop_failing_for_a_never_loaded_unit_is_fine(env: dict[str, str]) -> None:
    make(env, FakeRunner({("systemctl",): NO_BUS})).install()
    runner = FakeRunner(
        {
            ("systemctl", "--user", "stop"): RunResult(
                5, "", "Failed to stop memoryd.service: Unit not loaded."
            ),
            ("systemctl", "--user", "is-active"): RunResult(3, "inactive\n", ""),
        }
    )
    report = make(env, runner).uninstall()
    assert report.removed and report.manager == "ok"


def test_symlinked_unit_file_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    svc = make(env, FakeRunner())
    svc.path.parent.mkdir(parents=True)
    svc.path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ServiceError, match="symlink"):
        svc.install()


def test_launchd_install_and_uninstall_on_macos(env: dict[str, str]) -> None:
    target = f"gui/501/{LABEL}"
    runner = FakeRunner(
        {("launchctl", "print", target): RunResult(113, "", "Could not find service")}
    )
    svc = make(env, runner, "launchd", sys_platform="darwin", uid=501)
    report = svc.install()
    assert report.manager == "ok" and svc.path.exists() and svc.paths.logs.is_dir()
    assert runner.calls == [
        ("launchctl", "print", "gui/501"),
        ("launchctl", "print", target),
        ("launchctl", "enable", target),
        ("launchctl", "bootstrap", "gui/501", str(svc.path)),
        ("launchctl", "kickstart", target),
    ]
    runner = FakeRunner()  # now loaded
    assert make(env, runner, "launchd", sys_platform="darwin", uid=501).uninstall().removed
    assert ("launchctl", "bootout", target) in runner.calls and not svc.path.exists()


def test_launchd_off_macos_writes_the_plist_and_prints_the_commands(env: dict[str, str]) -> None:
    runner = FakeRunner()
    report = make(env, runner, "launchd", sys_platform="linux", uid=501).install()
    assert runner.calls == [] and report.manager == "unavailable" and report.path.exists()
    assert report.manual == [
        f"launchctl enable gui/501/{LABEL}",
        f"launchctl bootstrap gui/501 {report.path}",
        f"launchctl kickstart gui/501/{LABEL}",
    ]


def test_status_reports_file_and_manager_state(env: dict[str, str]) -> None:
    svc = make(env, FakeRunner({("systemctl",): NO_BUS}))
    st = svc.status()
    assert st.file == "absent" and st.manager == "unavailable"
    svc.install()
    show = "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nMainPID=4242\nNRestarts=2\nResult=success\nStatusText=idle\n"
    st = make(env, FakeRunner({("systemctl", "--user", "show"): RunResult(0, show, "")})).status()
    assert st.file == "ours" and st.manager == "ok" and st.state["MainPID"] == "4242"
    lines = service_cli.status_lines(st)
    assert any("active (running), enabled, pid 4242, restarted 2 times" in line for line in lines)
    svc.path.write_text(svc.path.read_text() + "# mine\n")
    assert make(env, FakeRunner({("systemctl",): NO_BUS})).status().file == "modified"


def test_uninstall_and_status_work_even_if_the_interpreter_path_is_unrenderable(
    env: dict[str, str],
) -> None:
    make(env, FakeRunner()).install()
    bad = make(env, FakeRunner(), python="/opt/o'brien/python")
    assert bad.status().file == "ours"  # via the manifest hash
    assert bad.uninstall().removed
    with pytest.raises(ServiceError):
        bad.install()


def test_run_command_never_raises_and_never_hangs(tmp_path: Path) -> None:
    assert run_command(["memoryd-no-such-binary-xyz"], 5).returncode == 127
    res = run_command([sys.executable, "-c", "import time; time.sleep(10)"], 0.3)
    assert res.returncode == 124 and "no answer" in res.detail
    assert run_command([sys.executable, "-c", "import sys; sys.exit(3)"], 10).returncode == 3


# -- cli -------------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="memoryd")
    service_cli.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_install_exits_zero_and_prints_manual_steps_without_a_manager(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    runner = FakeRunner({("systemctl",): NO_BUS})
    monkeypatch.setattr(service_mod, "run_command", runner)
    args = _parse(["service", "install", "--platform", "systemd"])
    assert args.handler(App(), args) == 0
    out = capsys.readouterr().out
    assert "created:" in out and "systemctl --user enable --now memoryd.service" in out
    assert (Path(env["HOME"]) / ".config/systemd/user" / UNIT).exists()
    args = _parse(["service", "status", "--platform", "systemd"])
    assert args.handler(App(), args) == 0
    assert "unavailable" in capsys.readouterr().out
    args = _parse(["service", "uninstall", "--platform", "systemd", "--dry-run"])
    assert args.handler(App(), args) == 0
    assert "would remove" in capsys.readouterr().out
    monkeypatch.setattr(
        service_mod, "run_command", FakeRunner({("systemctl", "--user", "enable"): RunResult(1)})
    )
    args = _parse(["service", "install", "--platform", "systemd", "--force"])
    assert args.handler(App(), args) == 1
    assert "error:" in capsys.readouterr().out
