"""Codex's trust record for memoryd's hook, as Codex itself computes it.

Codex runs a hook from the user's config only once it is trusted: ``[hooks.state."<key>"]``
with ``trusted_hash`` equal to the hash Codex computes for the hook's definition (the key names
the config file, the event and the hook's position). memoryd does not guess that format: it asks
the user's own ``codex app-server`` (JSON-RPC over stdio, no model, no network) for
``hooks/list`` and copies the key and ``currentHash`` of the hook whose command is memoryd's.
When no Codex binary can be run, the install says so and the user trusts the hook in ``/hooks``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from memoryd.errors import InstallError
from memoryd.tuning import CODEX_TRUST_TIMEOUT_S


def find_codex(explicit: str | None = None) -> str | None:
    return explicit or shutil.which("codex")


def _request(rid: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n"


def hook_trust(
    codex: str, command: str, cwd: Path, environ: dict[str, str] | None = None
) -> tuple[str, str] | None:
    """(key, hash) of the user-config hook running ``command``, ``None`` when Codex lists none.

    Raises :class:`InstallError` when the app server cannot be run or does not answer.
    """
    env = dict(os.environ if environ is None else environ)
    messages = (
        _request(1, "initialize", {"clientInfo": {"name": "memoryd", "version": "1"}})
        + json.dumps({"jsonrpc": "2.0", "method": "initialized"})
        + "\n"
        + _request(2, "hooks/list", {"cwds": [str(cwd)]})
    )
    try:
        proc = subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            text=True,
        )
    except OSError as exc:
        raise InstallError(f"cannot run {codex} app-server: {exc}") from exc
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(messages)
        proc.stdin.flush()
        answer = _read_answer(proc, 2)
    finally:
        proc.kill()
        proc.wait(timeout=CODEX_TRUST_TIMEOUT_S)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    return pick(answer, command)


def _read_answer(proc: subprocess.Popen[str], rid: int) -> dict[str, Any]:
    """The result of request ``rid``; the app server is killed if it takes too long."""
    import threading

    assert proc.stdout is not None
    timer = threading.Timer(CODEX_TRUST_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == rid:
                if "error" in msg:
                    raise InstallError(f"codex app-server refused hooks/list: {msg['error']}")
                result = msg.get("result")
                return result if isinstance(result, dict) else {}
    finally:
        timer.cancel()
    raise InstallError("codex app-server did not list its hooks in time")


def pick(result: dict[str, Any], command: str) -> tuple[str, str] | None:
    """memoryd's hook in a ``hooks/list`` result: a user-config command hook with our command."""
    for entry in result.get("data") or []:
        for hook in (entry or {}).get("hooks") or []:
            if not isinstance(hook, dict):
                continue
            if hook.get("command") != command or hook.get("source") != "user":
                continue
            key, digest = hook.get("key"), hook.get("currentHash")
            if isinstance(key, str) and isinstance(digest, str):
                return key, digest
    return None
