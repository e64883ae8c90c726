"""memoryd's helper agents, defined only in the folders memoryd's own sessions run in.

opencode lists every non-primary agent of the global config in the user's ``task`` tool
(``hidden`` does not keep them out), so helper agents installed globally cost every user request
bytes and invite the user's agent to delegate to them. An instance also reads ``opencode.json``
from its directory and, for a folder outside any git repository, from every parent up to ``/``.
So each helper agent is written into a project config that only memoryd's instances load:

* ``memoryd-extract`` into ``<helper dir>/opencode.json`` (the empty folder extraction runs in);
* ``memoryd-consolidate`` into ``opencode.json`` of the memory folder's *parent*, memoryd's data
  folder. The consolidator's session runs in the memory folder and may only touch files there,
  so it can neither edit its own definition nor plant one that wins: opencode resolves a
  parent's definition the same way for every instance under it.

The definitions come from ``templates/agents/<name>.md`` (front matter + prompt), the one place
their permissions are written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd import prompts
from memoryd.errors import InstallError, PathError
from memoryd.fsutil import atomic_write, read_regular
from memoryd.host.permissions import consolidator_agent_permission
from memoryd.paths import Paths

EXTRACT_AGENT = "memoryd-extract"
CONSOLIDATE_AGENT = "memoryd-consolidate"
HELPER_AGENT_PREFIX = "memoryd-"
SCHEMA = "https://opencode.ai/config.json"


@dataclass(frozen=True)
class AgentHome:
    """Where one helper agent is defined, and the session directory that sees it."""

    name: str
    config_file: Path
    session_dir: Path


def agent_homes(paths: Paths) -> dict[str, AgentHome]:
    return {
        EXTRACT_AGENT: AgentHome(
            EXTRACT_AGENT, paths.helper_dir / "opencode.json", paths.helper_dir
        ),
        CONSOLIDATE_AGENT: AgentHome(
            CONSOLIDATE_AGENT, paths.memories.parent / "opencode.json", paths.memories
        ),
    }


def _scalar(raw: str) -> Any:
    text = raw.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_front_matter(markdown: str) -> tuple[dict[str, Any], str]:
    """The YAML subset agent templates use (nested maps of scalars, ``#`` comments), and the body."""
    lines = markdown.split("\n")
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise InstallError("agent template must start with YAML front matter")
    end = lines.index("---", 1)
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep:
            raise InstallError(f"agent template: cannot read front matter line {line!r}")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        name = _scalar(key)
        if value.strip():
            parent[str(name)] = _scalar(value)
        else:
            child: dict[str, Any] = {}
            parent[str(name)] = child
            stack.append((indent, child))
    body = "\n".join(lines[end + 1 :]).strip() + "\n"
    return root, body


def agent_definition(name: str) -> dict[str, Any]:
    """One agent as opencode's config ``agent`` table wants it (the prompt inline)."""
    meta, body = parse_front_matter(prompts.render(f"agents/{name}.md"))
    if name == CONSOLIDATE_AGENT:
        meta["permission"] = consolidator_agent_permission()  # one place: host/permissions.py
    return {**meta, "prompt": body}


def config_text(name: str) -> str:
    data = {"$schema": SCHEMA, "agent": {name: agent_definition(name)}}
    return json.dumps(data, indent=2) + "\n"


def write_agent_config(paths: Paths, name: str) -> bool:
    """Write ``name``'s project config where its sessions run; True when the bytes changed.

    A changed file means an instance that already booted still has the old definition, so the
    caller disposes it. Unchanged bytes are not rewritten (no mtime churn for opencode).
    """
    home = agent_homes(paths)[name]
    paths.ensure_dir(home.config_file.parent)
    paths.ensure_dir(home.session_dir)
    text = config_text(name).encode("utf-8")
    try:
        current = read_regular(home.config_file)
    except PathError as exc:
        raise InstallError(f"{home.config_file}: {exc.problem}; remove it") from exc
    if current == text:
        return False
    atomic_write(home.config_file, text)
    return True


def remove_agent_configs(paths: Paths) -> list[Path]:
    """Delete the helper configs memoryd wrote (uninstall); a file that is not ours stays."""
    removed = []
    for home in agent_homes(paths).values():
        try:
            current = read_regular(home.config_file)
        except PathError:
            continue
        if current is not None and current == config_text(home.name).encode("utf-8"):
            home.config_file.unlink()
            removed.append(home.config_file)
    return removed
