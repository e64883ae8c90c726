"""``memoryd mcp`` configuration snippets for hosts, and removing the old opencode registration.

opencode gets memoryd's tools from the shim instead (no process per instance); earlier versions
registered ``mcp.memoryd`` in ``opencode.json`` and recorded what they wrote, so
:func:`uninstall_mcp` removes that key only if it is still what memoryd wrote. A config that
does not parse as plain JSON is never rewritten (that would drop the user's comments).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.errors import InstallError, PathError
from memoryd.fsutil import atomic_write, read_regular, sha256

KEY = "memoryd"
# Printed with every snippet for another host: the erase gate is the same everywhere.
GATE_NOTE = (
    "# memoryd offers models only memory_read, memory_list, memory_search, memory_add_note and\n"
    "# memory_inspect. Forgetting, session modes and reset are not MCP tools: a model's\n"
    "# confirm=true is not your consent. Run them yourself: memoryd forget | mode | reset.\n"
)


def server_command(python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "memoryd", "mcp"]


def server_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    home = env.get("MEMORYD_HOME")
    return {"MEMORYD_HOME": str(Path(home).expanduser().absolute())} if home else {}


def opencode_entry(
    python: str | None = None, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "local", "command": server_command(python), "enabled": True}
    env = server_env(environ)
    if env:
        entry["environment"] = env
    return entry


def opencode_snippet(python: str | None = None, environ: dict[str, str] | None = None) -> str:
    """opencode's MCP entry (the clients' snippets build on this module in ``client_config``)."""
    return json.dumps({"mcp": {KEY: opencode_entry(python, environ)}}, indent=2)


@dataclass
class McpStep:
    action: str  # keep-modified | remove | absent
    path: Path

    def describe(self) -> str:
        text = {
            "keep-modified": "kept mcp.memoryd: changed since memoryd wrote it (use --force)",
            "remove": "remove mcp.memoryd (memoryd's tools now come from its plugin)",
            "absent": "mcp.memoryd already gone",
        }[self.action]
        return f"{self.path}: {text}"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        raw = read_regular(path)
    except PathError as exc:
        raise InstallError(f"{path}: {exc.problem}") from exc
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def uninstall_mcp(
    config_dir: Path, record: dict[str, Any], *, force: bool, dry_run: bool
) -> McpStep | None:
    if not record:
        return None
    path = config_dir / "opencode.json"
    data = _read_json(path)
    current = (
        (data or {}).get("mcp", {}).get(KEY) if isinstance((data or {}).get("mcp"), dict) else None
    )
    if data is None or current is None:
        return McpStep("absent", path)
    if sha256(json.dumps(current, sort_keys=True).encode()) != record.get("sha") and not force:
        return McpStep("keep-modified", path)
    if not dry_run:
        del data["mcp"][KEY]
        if not data["mcp"]:
            del data["mcp"]
        if record.get("created") and set(data) <= {"$schema"}:
            path.unlink()
        else:
            atomic_write(path, json.dumps(data, indent=2) + "\n")
    return McpStep("remove", path)
