"""``memoryd hook claude-code|codex``: the memory block for a client's ``SessionStart`` hook.

Claude Code and Codex both run a command at ``SessionStart`` (a new session, ``/clear``, and in
Claude Code also after a compaction) with a JSON payload on stdin naming the session's ``cwd``,
and both add the ``additionalContext`` the command prints to the model's context: Claude Code as
a system message, Codex as a developer message. SessionStart rather than ``UserPromptSubmit``:
the block then sits once at the start of the conversation, where it stays in the client's
prompt cache, instead of one more copy in the history on every prompt.

The text is the opencode shim's, byte for byte: the block file the daemon already renders for
the checkout that holds ``cwd`` (:func:`memoryd.scopes.find_worktree`, the same key opencode's
worktree gets), else the global-only block, while the daemon is told (as the shim does) to render
this project's block from now on. Nothing is tokenized or rendered here, so a call costs one
interpreter start and a few file reads. It never fails the client's turn: any problem prints
nothing and exits 0, with one line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from memoryd.fsutil import read_regular
from memoryd.paths import Paths
from memoryd.scopes import find_worktree, is_scope_key, scope_key

CLIENTS = ("claude-code", "codex")
EVENT = "SessionStart"
MAX_PAYLOAD = 1 << 20
MAX_BLOCK = 1 << 20


def block_for(paths: Paths, cwd: str) -> str | None:
    """The block opencode's shim would inject for an instance in ``cwd``; ``None`` for none."""
    root = find_worktree(Path(cwd))
    key = scope_key(root)
    if not is_scope_key(key):
        return None
    own = read_regular(paths.readpath_projects / f"{key}.md", limit=MAX_BLOCK)
    if own is None:
        announce(paths, key, root)
        own = read_regular(paths.readpath_block, limit=MAX_BLOCK)
    if own is None:
        return None
    text = own.decode("utf-8", "replace")
    return text if text.strip() else None


def announce(paths: Paths, key: str, root: str) -> None:
    """Ask the daemon to render this project's block (the shim's ``seen`` file)."""
    seen = paths.readpath_seen / key
    if os.path.lexists(seen):
        return
    paths.ensure_dir(paths.readpath_seen)
    fd = os.open(seen, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (root + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def hook_output(block: str, event: str = EVENT) -> str:
    """What both clients read from a SessionStart hook's stdout."""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": event, "additionalContext": block}},
        ensure_ascii=False,
    )


def _payload(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def run(client: str, raw: bytes, environ: dict[str, str] | None = None) -> str | None:
    """The hook's stdout for payload ``raw`` (``None``: print nothing)."""
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}")
    data = _payload(raw)
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        cwd = os.getcwd()
    event = data.get("hook_event_name")
    block = block_for(Paths.from_env(environ), cwd)
    if block is None:
        return None
    return hook_output(block, event if event == EVENT else EVENT)


def main(argv: list[str]) -> int:
    client = argv[0] if argv else ""
    try:
        raw = sys.stdin.buffer.read(MAX_PAYLOAD)
        out = run(client, raw)
    except Exception as exc:  # the client's turn goes on without memory, never fails
        print(f"memoryd hook: no memory block ({exc})", file=sys.stderr)
        return 0
    if out is not None:
        sys.stdout.write(out)
        sys.stdout.flush()
    return 0
