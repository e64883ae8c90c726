"""Run ``memoryd run`` as a per-user service: a systemd user unit or a launchd agent.

Choices that matter and why:

- The service starts the *absolute* interpreter that ran the install (``sys.executable`` made
  absolute, symlinks kept: resolving a venv's ``bin/python`` link would land on the base
  interpreter, which does not see the venv's packages) with ``-m memoryd run``. A bare
  ``memoryd`` would depend on the service manager's PATH, which is not the shell's.
- The manager's environment is not the shell's either, so the variables that decide where
  memoryd keeps its files (``MEMORYD_HOME``, ``XDG_*_HOME``) and ``PATH`` (memoryd finds
  ``opencode`` on it) are written into the service when they are set at install time.
- systemd: ``Type=notify`` (the daemon sends ``READY=1``, see :mod:`memoryd.runtime.sdnotify`),
  ``Restart=on-failure`` under a start limit so a crash loop stops instead of burning model
  quota, no restart on exit status 2 or 4 (bad usage, failed startup: a restart cannot fix
  those), and ``KillMode=mixed`` so memoryd gets SIGTERM first and stops its opencode helpers
  itself, then anything left in the group is killed: no orphans.
- Ownership is recorded as a SHA-256 in memoryd's install manifest (key ``service``). A file
  that matches the record, or what we would render now, is ours to update or remove; any other
  content is the user's and is kept unless ``force``.
- When the service manager does not answer (no user bus in a container, not on macOS), the file
  is still written and the report carries the exact commands to run by hand. Nothing here
  raises for that; every subprocess runs with a timeout.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memoryd import __version__
from memoryd.errors import PathError, ServiceError
from memoryd.fsutil import atomic_write, read_json_object, read_regular, sha256
from memoryd.paths import Paths
from memoryd.runtime.servicefile import (
    LABEL,
    UNIT,
    Platform,
    detect_platform,
    interpreter,
    render,
    service_path,
)

Action = Literal["create", "update", "unchanged", "replace", "keep-modified", "remove", "absent"]
ManagerState = Literal["ok", "unavailable", "failed", "skipped"]

MANIFEST_KEY = "service"
TIMEOUT = 15.0  # seconds for a manager command
STOP_CMD_TIMEOUT = 60.0  # for commands that wait for the daemon to stop


# -- running the manager -----------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def detail(self) -> str:
        text = (self.stderr or self.stdout).strip()
        return text.splitlines()[-1] if text else f"exit status {self.returncode}"


Runner = Callable[[Sequence[str], float], RunResult]


def run_command(argv: Sequence[str], timeout: float) -> RunResult:
    """The default runner: never raises, never waits longer than ``timeout``, never reads stdin."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        return RunResult(127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return RunResult(124, "", f"{shlex.join(argv)}: no answer within {timeout:g} s")
    except OSError as exc:
        return RunResult(126, "", f"{argv[0]}: {exc.strerror or exc}")
    return RunResult(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    timeout: float = TIMEOUT
    tolerate: bool = False  # a failure here is expected sometimes and not an error

    def shell(self) -> str:
        """The command as a person would type it (without ``--no-block``, which is for us)."""
        return shlex.join(a for a in self.argv if a != "--no-block")


def _systemctl(*args: str, timeout: float = TIMEOUT, tolerate: bool = False) -> Command:
    return Command(("systemctl", "--user", *args), timeout, tolerate)


def _launchctl(*args: str, timeout: float = TIMEOUT, tolerate: bool = False) -> Command:
    return Command(("launchctl", *args), timeout, tolerate)


@dataclass
class Ran:
    command: Command
    result: RunResult


@dataclass
class Report:
    """What install/uninstall did (or, with ``dry_run``, would do)."""

    operation: Literal["install", "uninstall"]
    platform: Platform
    path: Path
    action: Action
    content: bytes
    dry_run: bool = False
    manager: ManagerState = "skipped"
    detail: str = ""
    planned: list[Command] = field(default_factory=list)
    ran: list[Ran] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    removed: bool = False

    @property
    def wrote(self) -> bool:
        return not self.dry_run and self.action in ("create", "update", "replace")


@dataclass
class Status:
    platform: Platform
    path: Path
    file: Literal["ours", "modified", "absent"]
    manager: Literal["ok", "unavailable"]
    detail: str = ""
    state: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ManagerCommands:
    """The systemctl / launchctl steps for one service file (planned, run, or printed for a human)."""

    platform: Platform
    uid: int
    path: Path

    @property
    def target(self) -> str:
        return f"gui/{self.uid}/{LABEL}"

    def install_commands(self, action: Action, *, loaded: bool | None = None) -> list[Command]:
        """Reload, enable and start; a changed file also restarts a running daemon.

        ``--no-block``: do not wait for ``READY=1`` (up to the start timeout); ``status`` tells.
        ``loaded`` (launchd only) is ``None`` when unknown (dry run, manual steps).
        """
        changed = action in ("update", "replace")
        if self.platform == "systemd":
            cmds = [_systemctl("daemon-reload")]
            if changed:
                cmds.append(_systemctl("try-restart", "--no-block", UNIT))
            cmds.append(_systemctl("enable", "--now", "--no-block", UNIT))
            return cmds
        cmds = []
        if (changed and loaded is not False) or (action == "create" and loaded):
            cmds.append(_launchctl("bootout", self.target, timeout=STOP_CMD_TIMEOUT, tolerate=True))
        cmds.append(
            _launchctl("enable", self.target)
        )  # clears a "disabled" override, or bootstrap fails
        if changed or action == "create" or not loaded:
            cmds.append(_launchctl("bootstrap", f"gui/{self.uid}", str(self.path)))
        cmds.append(_launchctl("kickstart", self.target))
        return cmds

    def stop_commands(self) -> list[Command]:
        if self.platform == "systemd":
            return [
                _systemctl("disable", UNIT),
                _systemctl("stop", UNIT, timeout=STOP_CMD_TIMEOUT, tolerate=True),
            ]
        return [_launchctl("bootout", self.target, timeout=STOP_CMD_TIMEOUT)]

    def cleanup_commands(self) -> list[Command]:
        if self.platform == "systemd":
            return [_systemctl("daemon-reload"), _systemctl("reset-failed", UNIT, tolerate=True)]
        return []

    def manual_stop(self, *, removing: bool) -> list[Command]:
        """What to run by hand; once the file is gone only ``stop`` still works (``disable`` needs it)."""
        if self.platform == "launchd":
            return [_launchctl("bootout", self.target)]
        if removing:
            return [_systemctl("stop", UNIT), _systemctl("daemon-reload")]
        return [_systemctl("disable", "--now", UNIT)]


class Service:
    """One platform's service file plus the manager commands around it. All side effects injectable."""

    def __init__(
        self,
        platform: Platform | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
        runner: Runner | None = None,
        paths: Paths | None = None,
        sys_platform: str | None = None,
        uid: int | None = None,
    ) -> None:
        self.sys_platform = sys.platform if sys_platform is None else sys_platform
        self.platform: Platform = platform or detect_platform(self.sys_platform)
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.python = python or interpreter()
        self.run = runner or run_command
        self.paths = paths or Paths.from_env(dict(self.environ))
        self._uid = uid
        self.path = service_path(self.platform, self.environ)
        try:  # an unrenderable file must not stop uninstall/status, only install
            self._content: bytes | None = render(
                self.platform, python=self.python, environ=self.environ
            )[1]
            self._render_error: ServiceError | None = None
        except ServiceError as exc:
            self._content, self._render_error = None, exc

    @property
    def content(self) -> bytes:
        """The file this memoryd would write; raises :class:`ServiceError` if it cannot be rendered."""
        if self._content is None:
            assert self._render_error is not None
            raise self._render_error
        return self._content

    @property
    def uid(self) -> int:
        return os.getuid() if self._uid is None else self._uid

    @property
    def _target(self) -> str:
        return self._commands.target

    @property
    def _commands(self) -> ManagerCommands:
        return ManagerCommands(self.platform, self.uid, self.path)

    # manifest ------------------------------------------------------------------------------

    def _load_manifest(self) -> dict[str, Any]:
        return read_json_object(self.paths.install_manifest, ServiceError)

    def _recorded(self) -> str | None:
        entry = self._load_manifest().get(MANIFEST_KEY, {}).get(self.platform, {})
        return entry.get("sha256") if entry.get("path") == str(self.path) else None

    def _record(self, digest: str | None) -> None:
        data = self._load_manifest()
        entries = data.setdefault(MANIFEST_KEY, {})
        if digest:
            entries[self.platform] = {
                "path": str(self.path),
                "sha256": digest,
                "version": __version__,
            }
        else:
            entries.pop(self.platform, None)
        if not entries:
            data.pop(MANIFEST_KEY)
        self.paths.ensure_dir(self.paths.install_manifest.parent)
        atomic_write(self.paths.install_manifest, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def _current(self) -> bytes | None:
        try:
            return read_regular(self.path)
        except PathError as exc:
            raise ServiceError(f"{self.path}: {exc.problem}; remove it and re-run") from exc

    def _ownership(self, current: bytes | None) -> Literal["ours", "modified", "absent"]:
        if current is None:
            return "absent"
        if current == self._content or sha256(current) == self._recorded():
            return "ours"
        return "modified"

    # manager -------------------------------------------------------------------------------

    def _probe(self) -> str | None:
        """``None`` when the manager answers, else why not (a short sentence)."""
        if self.platform == "systemd":
            res = self.run(_systemctl("show-environment").argv, TIMEOUT)
            return (
                None if res.returncode == 0 else f"systemctl --user does not answer ({res.detail})"
            )
        if self.sys_platform != "darwin":
            return "launchd exists only on macOS"
        res = self.run(_launchctl("print", f"gui/{self.uid}").argv, TIMEOUT)
        return (
            None
            if res.returncode == 0
            else f"no launchd GUI session for uid {self.uid} ({res.detail})"
        )

    def _launchd_loaded(self) -> bool:
        return self.run(_launchctl("print", self._target).argv, TIMEOUT).returncode == 0

    def _execute(self, report: Report, commands: list[Command]) -> bool:
        """Run ``commands`` in order; on the first real failure record it and the rest as manual steps."""
        for i, cmd in enumerate(commands):
            res = self.run(cmd.argv, cmd.timeout)
            report.ran.append(Ran(cmd, res))
            if res.returncode != 0 and not cmd.tolerate:
                report.manager = "failed"
                report.detail = f"{cmd.shell()}: {res.detail}"
                report.manual.extend(c.shell() for c in commands[i:])
                return False
        report.manager = "ok"
        return True

    # operations ----------------------------------------------------------------------------

    def plan_install(self, *, force: bool = False) -> Action:
        current = self._current()
        if current is None:
            return "create"
        if current == self.content:
            return "unchanged"
        if self._ownership(current) == "ours":
            return "update"
        return "replace" if force else "keep-modified"

    def install(self, *, force: bool = False, dry_run: bool = False) -> Report:
        action = self.plan_install(force=force)
        report = Report("install", self.platform, self.path, action, self.content, dry_run=dry_run)
        if dry_run:
            report.planned = self._commands.install_commands(action)
            return report
        if action in ("create", "update", "replace"):
            self._write()
        if action != "keep-modified":
            self._record(sha256(self.content))
        if self.platform == "launchd":
            self.paths.ensure_dir(self.paths.logs)  # launchd creates log files, not their folder
        why = self._probe()
        if why is not None:
            report.manager, report.detail = "unavailable", why
            report.manual = [c.shell() for c in self._commands.install_commands(action)]
            return report
        loaded = self._launchd_loaded() if self.platform == "launchd" else None
        self._execute(report, self._commands.install_commands(action, loaded=loaded))
        if self.platform == "systemd" and report.manager == "ok" and not self._lingering():
            report.notes.append(
                "the service runs while you are logged in; to keep it running after logout: "
                "loginctl enable-linger " + shlex.quote(self._username())
            )
        return report

    def _write(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, self.content)
        except (OSError, PathError) as exc:
            raise ServiceError(f"cannot write {self.path}: {exc}") from exc

    def uninstall(self, *, force: bool = False, dry_run: bool = False) -> Report:
        current = self._current()
        owner = self._ownership(current)
        if owner == "absent":
            action: Action = "absent"
        else:
            action = "remove" if owner == "ours" or force else "keep-modified"
        report = Report(
            "uninstall", self.platform, self.path, action, current or b"", dry_run=dry_run
        )
        if action == "absent":
            if not dry_run and self._recorded() is not None:
                self._record(None)
            return report
        cleanup = self._commands.cleanup_commands() if action == "remove" else []
        if dry_run:
            report.planned = self._commands.stop_commands() + cleanup
            return report
        why = self._probe()
        if why is not None:
            report.manager, report.detail = "unavailable", why
            report.manual = [
                c.shell() for c in self._commands.manual_stop(removing=action == "remove")
            ]
        elif not self._stop(report) and not force:
            report.notes.append(
                f"left {self.path} in place because stopping failed (--force removes it anyway)"
            )
            return report
        if action == "remove":
            self._remove()
            report.removed = True
            if report.manager == "ok":
                self._execute(report, cleanup)
        return report

    def _stop(self, report: Report) -> bool:
        """Disable and stop; ``stop`` fails harmlessly for a unit systemd never loaded, so ask after."""
        if self.platform == "launchd":
            if not self._launchd_loaded():
                report.manager = "ok"
                return True
            return self._execute(report, self._commands.stop_commands())
        if not self._execute(report, self._commands.stop_commands()):
            return False
        if report.ran[-1].result.returncode == 0:
            return True
        res = self.run(_systemctl("is-active", UNIT).argv, TIMEOUT)
        state = res.stdout.strip()
        if state in ("active", "activating", "deactivating", "reloading", "refreshing"):
            report.manager = "failed"
            report.detail = f"{UNIT} is still {state}: {report.ran[-1].result.detail}"
            report.manual.append(_systemctl("stop", UNIT).shell())
            return False
        return True

    def _remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ServiceError(f"cannot remove {self.path}: {exc.strerror or exc}") from exc
        if self.platform == "systemd":
            # `systemctl disable` drops this link; without a reachable manager we do, or it dangles.
            wants = self.path.parent / "default.target.wants" / UNIT
            if wants.is_symlink():
                target = os.path.normpath(os.path.join(wants.parent, os.readlink(wants)))
                if target == str(self.path):
                    wants.unlink()
        self._record(None)

    def status(self) -> Status:
        owner = self._ownership(self._current())
        st = Status(self.platform, self.path, owner, "ok")
        if self.platform == "systemd":
            props = (
                "LoadState,ActiveState,SubState,UnitFileState,MainPID,NRestarts,Result,StatusText"
            )
            res = self.run(_systemctl("show", UNIT, "--property", props).argv, TIMEOUT)
            if res.returncode != 0:
                st.manager, st.detail = (
                    "unavailable",
                    f"systemctl --user does not answer ({res.detail})",
                )
                return st
            st.state = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
            return st
        why = self._probe()
        if why is not None:
            st.manager, st.detail = "unavailable", why
            return st
        res = self.run(_launchctl("print", self._target).argv, TIMEOUT)
        if res.returncode != 0:
            st.state = {"loaded": "no"}
            return st
        st.state = {"loaded": "yes"}
        for line in res.stdout.splitlines():
            key, sep, value = line.strip().partition(" = ")
            if sep and key in ("state", "pid", "last exit code", "runs"):
                st.state.setdefault(key, value)
        return st

    def _lingering(self) -> bool:
        return Path("/var/lib/systemd/linger", self._username()).exists()

    def _username(self) -> str:
        return self.environ.get("USER") or self.environ.get("LOGNAME") or str(self.uid)


def install(
    platform: Platform | None = None, *, dry_run: bool = False, force: bool = False, **inject: Any
) -> Report:
    """Write the service file, then enable and start it when the manager answers.

    :param platform: ``None`` picks systemd on Linux, launchd on macOS.
    :param dry_run: only plan: no file is written and no command runs.
    :param inject: ``environ``, ``python``, ``runner``, ``paths`` (see :class:`Service`).
    :raises ServiceError: the file cannot be written, or no platform fits this OS.
    """
    return Service(platform, **inject).install(force=force, dry_run=dry_run)


def uninstall(
    platform: Platform | None = None, *, dry_run: bool = False, force: bool = False, **inject: Any
) -> Report:
    """Stop and disable the service; remove its file if it is ours (or ``force``)."""
    return Service(platform, **inject).uninstall(force=force, dry_run=dry_run)


def status(platform: Platform | None = None, **inject: Any) -> Status:
    """Is the file there and ours, and what does the manager say ("unavailable" if it does not answer)."""
    return Service(platform, **inject).status()
