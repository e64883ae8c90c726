"""The hosts whose sessions become memory, and how their session ids are kept apart.

opencode's ids are used as opencode gives them (``ses_…``); a Claude Code or Codex session is
``claude-code:<uuid>`` / ``codex:<uuid>``, so no id of one host can collide with another's and
every part of memoryd can tell where a session came from by its id alone.
"""

from __future__ import annotations

from typing import Any

from memoryd.clock import iso_ms
from memoryd.store import Store

OPENCODE = "opencode"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
HOSTS = (OPENCODE, CLAUDE_CODE, CODEX)
_NAMESPACED = (CLAUDE_CODE, CODEX)
SESSION_ID_PREFIXES = ("ses_", f"{CLAUDE_CODE}:", f"{CODEX}:")  # what a cited id starts with


def namespaced(host: str, raw_id: str) -> str:
    return f"{host}:{raw_id}"


def host_of(session_id: str) -> str:
    """The host a session id belongs to: a client's namespace prefix, else opencode."""
    prefix, sep, _ = session_id.partition(":")
    return prefix if sep and prefix in _NAMESPACED else OPENCODE


def snapshot(store: Store, last_pass: Any) -> dict[str, dict[str, Any]]:
    """Per host: sessions seen by the last pass, sessions extracted, the newest error."""
    seen: dict[str, Any] = {}
    if isinstance(last_pass, dict) and isinstance(last_pass.get("phase1"), dict):
        seen = last_pass["phase1"].get("hosts") or {}
    extracted = dict.fromkeys(HOSTS, 0)
    for output in store.outputs():
        extracted[host_of(output.session_id)] += 1
    errors: dict[str, dict[str, Any]] = {}
    for job in store.stage1_last_errors(limit=50):
        host = host_of(job["session_id"])
        if host not in errors:  # newest first
            errors[host] = {
                "session_id": job["session_id"],
                "error": job["error"],
                "at": iso_ms(job["at"]),
            }
    out: dict[str, dict[str, Any]] = {}
    for host in HOSTS:
        info = seen.get(host) if isinstance(seen.get(host), dict) else None
        problems = list((info or {}).get("problems") or [])
        last_error = (errors.get(host) or {}).get("error") or (info or {}).get("error")
        if not last_error and problems:
            last_error = problems[-1]
        out[host] = {
            "active": info is not None,  # read by the last pass
            "home": (info or {}).get("home"),
            "seen": (info or {}).get("seen", 0),
            "extracted": extracted[host],
            "last_error": last_error,
            "problems": problems,
        }
    return out
