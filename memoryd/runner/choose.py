"""Which runner a pass uses: the setting, or (``auto``) what this machine has.

``auto`` keeps opencode whenever it is there, so nothing changes for its users: a configured
``[host] url``, a live server the shim recorded, or an ``opencode`` memoryd may start. Only
without any of those does it turn to Claude Code on PATH. With neither, the error says what to
install. The choice and why are recorded for ``memoryd status``. The runner decides who runs the
model, not whose sessions are read: with ``runner = "claude-code"`` and opencode there, opencode's
sessions are still listed through it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import RunnerMissing
from memoryd.host.ids import CLAUDE_CODE, OPENCODE
from memoryd.host.live import recorded_server
from memoryd.paths import Paths
from memoryd.runner.base import Runner
from memoryd.runner.claude_cli import ClaudeCodeRunner, find_claude
from memoryd.settings import Settings


@dataclass(frozen=True)
class Choice:
    name: str
    why: str
    executable: str | None = None  # the client CLI, for a runner that is one

    def as_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "why": self.why, "executable": self.executable}


def _opencode_installed(settings: Settings) -> bool:
    exe = settings.host.opencode_bin
    if "/" in exe:
        return Path(exe).expanduser().is_file()
    return shutil.which(exe) is not None


def opencode_there(settings: Settings, paths: Paths) -> str | None:
    """Why opencode can be used here (configured, running, or installed), or ``None``."""
    if settings.host.url:
        return "a [host] url is configured"
    if recorded_server(paths) is not None:
        return "opencode's shim recorded a running server"
    if settings.host.start_server and _opencode_installed(settings):
        return "opencode is installed"
    return None


def choose(settings: Settings, paths: Paths) -> Choice:
    wanted = settings.runner
    if wanted == OPENCODE:
        return Choice(OPENCODE, "runner = opencode")
    if wanted == CLAUDE_CODE:
        exe = find_claude(settings.claude_bin)
        if exe is None:
            raise RunnerMissing(
                "runner = claude-code",
                f"{settings.claude_bin!r} is not on PATH or not executable; install Claude Code "
                "(npm install -g @anthropic-ai/claude-code), sign in with `claude`, or set "
                "claude_bin to its full path",
            )
        return Choice(CLAUDE_CODE, "runner = claude-code", exe)
    there = opencode_there(settings, paths)
    if there is not None:
        return Choice(OPENCODE, f"auto: {there}")
    exe = find_claude(settings.claude_bin)
    if exe is not None:
        return Choice(CLAUDE_CODE, "auto: no opencode here; Claude Code is on PATH", exe)
    raise RunnerMissing(
        "runner = auto",
        "opencode and Claude Code not found on PATH; install one of them "
        "(npm install -g opencode-ai, or npm install -g @anthropic-ai/claude-code and sign in "
        "with `claude`), or set [host] url to a running opencode",
    )


def client_runner(choice: Choice, paths: Paths) -> Runner:
    """The runner for a choice that needs no opencode."""
    assert choice.name == CLAUDE_CODE and choice.executable is not None
    return ClaudeCodeRunner(choice.executable, workdir=paths.runner_dir, memories=paths.memories)
