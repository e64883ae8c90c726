"""The service file itself: a systemd user unit or a launchd agent, rendered from the environment.

Split from :mod:`memoryd.runtime.manager` (which installs, starts and reports on it): rendering is
pure and has no manager to talk to, so it reads and tests on its own. The choices it encodes
(absolute interpreter, passed-through variables, restart policy) are explained there.
"""

from __future__ import annotations

import os
import plistlib
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from memoryd import __version__
from memoryd.errors import ServiceError
from memoryd.paths import HOME_ENV, Paths

Platform = Literal["systemd", "launchd"]

UNIT = "memoryd.service"
LABEL = "dev.memoryd"
#: Variables copied from the installing environment into the service, when set.
PASSTHROUGH = (HOME_ENV, "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "PATH")
RESTART_SEC = 10
START_LIMIT_INTERVAL = 300
START_LIMIT_BURST = 5
STOP_TIMEOUT = 20  # the daemon exits within 10 s of SIGTERM
LAUNCHD_THROTTLE = 30  # launchd has no start limit; space out a crash loop instead


def interpreter() -> str:
    """The running interpreter as an absolute path, symlinks kept (a venv's python is a link)."""
    if not sys.executable:
        raise ServiceError("cannot tell which python runs memoryd (sys.executable is empty)")
    return os.path.abspath(sys.executable)


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def service_path(platform: Platform, environ: Mapping[str, str]) -> Path:
    if platform == "systemd":
        xdg = environ.get("XDG_CONFIG_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else _home(environ) / ".config"
        return base / "systemd" / "user" / UNIT
    return _home(environ) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def service_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the service's environment gets beyond the manager's own: see the module docstring."""
    env = {"PYTHONUNBUFFERED": "1"}
    for name in PASSTHROUGH:
        value = environ.get(name)
        if not value:
            continue
        if (
            name == HOME_ENV
        ):  # pin the folder the installer saw, not one relative to the service's cwd
            value = str(Paths.from_env({HOME_ENV: value}).data_dir)
        env[name] = value
    return env


_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: systemd refuses quotes and backslashes in an executable name ("contains special characters"),
#: and would expand ``$`` in argv[0], from which python finds its venv.
_EXEC_REFUSED = re.compile(r"[\x00-\x1f\x7f\"'\\$]")


def _exec_path(path: str) -> str:
    """The ExecStart executable: ``%`` doubled (a specifier), quoted only for whitespace."""
    if _EXEC_REFUSED.search(path):
        raise ServiceError(
            f"{path}: systemd cannot start an interpreter whose path holds a quote, backslash, '$' or "
            "control character; install memoryd under a plainer path"
        )
    escaped = path.replace("%", "%%")
    return escaped if _PLAIN.fullmatch(path) else f'"{escaped}"'


def _environment_line(name: str, value: str) -> str:
    """``Environment=`` quoting: C escapes inside double quotes, ``%`` doubled; ``$`` is literal there."""
    if _CONTROL.search(value):
        raise ServiceError(f"{name}={value!r}: control characters cannot go into a systemd unit")
    word = f"{name}={value}".replace("%", "%%")
    if _PLAIN.fullmatch(f"{name}={value}"):
        return f"Environment={word}"
    return 'Environment="' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _no_restart_status() -> tuple[int, ...]:
    # Imported here: the codes belong to cli/, and cli/ imports this module.
    from memoryd.exitcodes import NO_RESTART_STATUS

    return NO_RESTART_STATUS


def render_systemd(*, python: str, environ: Mapping[str, str]) -> str:
    if not os.path.isabs(python):
        raise ServiceError(f"{python}: the service needs an absolute interpreter path")
    exec_start = f"{_exec_path(python)} -m memoryd run"
    env_lines = [_environment_line(k, v) for k, v in service_environment(environ).items()]
    lines = [
        f"# Installed by memoryd {__version__} (`memoryd service install`); `memoryd service uninstall` removes it.",
        "# memoryd keeps this file if you edit it (use --force to replace or remove it).",
        "[Unit]",
        "Description=memoryd: cross-session memory for coding agents",
        "# A crash loop stops after the burst; `systemctl --user reset-failed memoryd` re-arms it.",
        f"StartLimitIntervalSec={START_LIMIT_INTERVAL}",
        f"StartLimitBurst={START_LIMIT_BURST}",
        "",
        "[Service]",
        "Type=notify",
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        f"RestartSec={RESTART_SEC}",
        "# 2: bad usage; 4: startup failure (bad config, unreadable store, already running). Restarts cannot fix those.",
        f"RestartPreventExitStatus={' '.join(map(str, _no_restart_status()))}",
        f"TimeoutStopSec={STOP_TIMEOUT}",
        "# SIGTERM to memoryd first (it stops its opencode helpers), then to whatever is left.",
        "KillMode=mixed",
        *env_lines,
        "SyslogIdentifier=memoryd",
        "NoNewPrivileges=yes",
        "UMask=0077",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def render_launchd(*, python: str, environ: Mapping[str, str]) -> bytes:
    if not os.path.isabs(python):
        raise ServiceError(f"{python}: the service needs an absolute interpreter path")
    log = str(Paths.from_env(dict(environ)).logs / "service.log")
    plist = {
        "Label": LABEL,
        "ProgramArguments": [python, "-m", "memoryd", "run"],
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": LAUNCHD_THROTTLE,
        "ExitTimeOut": STOP_TIMEOUT,
        "ProcessType": "Background",
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "EnvironmentVariables": service_environment(environ),
    }
    return plistlib.dumps(plist, fmt=plistlib.FMT_XML, sort_keys=True)


def render(platform: Platform, *, python: str, environ: Mapping[str, str]) -> tuple[Path, bytes]:
    """Where the service file goes for ``platform`` and its exact bytes. Works on any OS."""
    if platform == "systemd":
        return service_path(platform, environ), render_systemd(
            python=python, environ=environ
        ).encode("utf-8")
    if platform == "launchd":
        return service_path(platform, environ), render_launchd(python=python, environ=environ)
    raise ServiceError(f"unknown service platform {platform!r} (systemd or launchd)")


def detect_platform(sys_platform: str | None = None) -> Platform:
    name = sys.platform if sys_platform is None else sys_platform
    if name.startswith("linux"):
        return "systemd"
    if name == "darwin":
        return "launchd"
    raise ServiceError(
        f"no supported service manager on {name}; pass --platform systemd or launchd"
    )
