"""What Claude Code and Codex each need to use memoryd, as data: where it goes and what it says.

Both get three things (facts in ``reference/real-clients.md``, checked against the pinned
binaries by ``tests/e2e/test_client_readback_e2e.py``):

* **the MCP server** (``memoryd mcp``). Codex: ``required = true``, so it waits for the server
  instead of starting without its tools; the four read tools ``approval_mode = "approve"`` (they
  also say ``readOnlyHint``) so they run under ``approval_policy = "never"``, and every other tool
  of the server ``"prompt"``, so the note tool stays gated. Claude Code: a user-scope server in
  ``.claude.json``, and the read tools in ``permissions.allow`` of ``settings.json``, the grant
  headless ``claude -p`` needs (annotations do not replace it); the note tool is not granted.
* **the memory block**, through a ``SessionStart`` hook running ``memoryd hook <client>``
  (:mod:`memoryd.read.hook`). In Codex the hook must also be trusted: the trust entry
  (``hooks.state``) is what Codex itself reports for the hook (:mod:`memoryd.host.codex_trust`).
* nothing in the user's repository: all of it is user-level config.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.errors import InstallError
from memoryd.host.ids import CODEX
from memoryd.host.mcp_config import GATE_NOTE, KEY, opencode_snippet, server_command, server_env

__all__ = [
    "CLAUDE",
    "CLIENTS",
    "READ_TOOLS",
    "claude_entries",
    "codex_block",
    "snippet",
]

CLAUDE = "claude-code"
CLIENTS = (CLAUDE, CODEX)
# The tools that change nothing (memoryd.cli.mcp_server.READ_ONLY_TOOLS; kept here so an install
# does not import the MCP SDK; a unit test holds the two equal).
READ_TOOLS = ("memory_read", "memory_list", "memory_search", "memory_inspect")
HOOK_EVENT = "SessionStart"
HOOK_TIMEOUT_S = 10
BEGIN = "# >>> memoryd: written by `memoryd install codex`; `memoryd uninstall codex` removes it"
END = "# <<< memoryd"


def claude_config_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"]).expanduser()
    return Path(env.get("HOME", str(Path.home()))) / ".claude"


def claude_user_file(environ: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps user-scope MCP servers: ``.claude.json`` in ``CLAUDE_CONFIG_DIR``
    when that is set (what ``claude mcp add --scope user`` writes), else ``~/.claude.json``."""
    env = os.environ if environ is None else environ
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"]).expanduser() / ".claude.json"
    return Path(env.get("HOME", str(Path.home()))) / ".claude.json"


def codex_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"]).expanduser()
    return Path(env.get("HOME", str(Path.home()))) / ".codex"


def hook_command(
    client: str, python: str | None = None, environ: dict[str, str] | None = None
) -> str:
    """The shell command a client runs at SessionStart (``MEMORYD_HOME`` carried when set)."""
    argv = [*server_command(python)[:-1], "hook", client]
    env = server_env(environ)
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    return " ".join([*(["env", *prefix] if prefix else []), shlex.join(argv)])


def allowed_tools() -> list[str]:
    """Claude Code's permission rules for the read tools (``mcp__<server>__<tool>``)."""
    return [f"mcp__{KEY}__{t}" for t in READ_TOOLS]


@dataclass(frozen=True)
class ClaudeEntries:
    """memoryd's additions to Claude Code's two files."""

    server: dict[str, Any]  # .claude.json: mcpServers.memoryd
    hook_group: dict[str, Any]  # settings.json: one entry of hooks.SessionStart
    allow: list[str]  # settings.json: permissions.allow


def claude_entries(
    python: str | None = None, environ: dict[str, str] | None = None
) -> ClaudeEntries:
    cmd = server_command(python)
    server: dict[str, Any] = {"type": "stdio", "command": cmd[0], "args": cmd[1:]}
    env = server_env(environ)
    if env:
        server["env"] = env
    group = {
        "hooks": [
            {
                "type": "command",
                "command": hook_command(CLAUDE, python, environ),
                "timeout": HOOK_TIMEOUT_S,
            }
        ]
    }
    return ClaudeEntries(server, group, allowed_tools())


def toml_str(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, bar DEL)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_array(items: list[str]) -> str:
    return "[" + ", ".join(toml_str(i) for i in items) + "]"


def codex_block(
    python: str | None = None,
    environ: dict[str, str] | None = None,
    trust: tuple[str, str] | None = None,
) -> str:
    """memoryd's part of Codex's ``config.toml``: tables only, so it can follow any user config;
    ``trust`` is the (key, hash) Codex reports for the hook once it is written."""
    cmd = server_command(python)
    env = server_env(environ)
    lines = [
        BEGIN,
        f"[mcp_servers.{KEY}]",
        f"command = {toml_str(cmd[0])}",
        f"args = {toml_array(cmd[1:])}",
    ]
    if env:
        lines.append("env = { " + ", ".join(f"{k} = {toml_str(v)}" for k, v in env.items()) + " }")
    lines += ["required = true", 'default_tools_approval_mode = "prompt"']
    for tool in READ_TOOLS:
        lines += ["", f"[mcp_servers.{KEY}.tools.{tool}]", 'approval_mode = "approve"']
    lines += [
        "",
        f"[[hooks.{HOOK_EVENT}]]",
        f"[[hooks.{HOOK_EVENT}.hooks]]",
        'type = "command"',
        f"command = {toml_str(hook_command(CODEX, python, environ))}",
        f"timeout = {HOOK_TIMEOUT_S}",
    ]
    if trust is not None:
        lines += ["", f"[hooks.state.{toml_str(trust[0])}]", f"trusted_hash = {toml_str(trust[1])}"]
    lines.append(END)
    return "\n".join(lines) + "\n"


def snippet(client: str, python: str | None = None, environ: dict[str, str] | None = None) -> str:
    """What ``memoryd install --print <client>`` prints: everything the install would add."""
    if client == CLAUDE:
        e = claude_entries(python, environ)
        cmd = [e.server["command"], *e.server["args"]]
        add = " ".join(f"-e {k}={shlex.quote(v)}" for k, v in e.server.get("env", {}).items())
        return (
            GATE_NOTE
            + f"# `memoryd install {CLAUDE}` writes all of this; or by hand:\n"
            + f"claude mcp add --scope user {KEY} {add + ' ' if add else ''}-- {shlex.join(cmd)}\n"
            + f"# or in {claude_user_file(environ)}:\n"
            + json.dumps({"mcpServers": {KEY: e.server}}, indent=2)
            + f"\n# and in {claude_config_dir(environ) / 'settings.json'} (the memory block at"
            " session start; the read tools without a prompt, also for headless `claude -p`):\n"
            + json.dumps(
                {"hooks": {HOOK_EVENT: [e.hook_group]}, "permissions": {"allow": e.allow}},
                indent=2,
            )
            + f"\n# one-off instead of the allow list: claude -p … --allowedTools {','.join(e.allow)}"
        )
    if client == CODEX:
        return (
            GATE_NOTE
            + f"# `memoryd install {CODEX}` appends this to {codex_home(environ) / 'config.toml'}"
            " and trusts the hook\n# (Codex runs an untrusted hook only after you approve it"
            " in /hooks):\n" + codex_block(python, environ)
        )
    if client == "opencode":
        return opencode_snippet(python, environ)
    raise InstallError(f"unknown host {client!r} (choose opencode, {CLAUDE} or {CODEX})")
