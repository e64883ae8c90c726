"""Install memoryd's pieces into opencode's config folder, and take exactly them out again.

opencode loads agent definitions from ``<config>/agent/*.md``. memoryd writes its files there
and records each one's SHA-256 in a manifest in its own state folder. That record is what makes
the installer safe to re-run and to undo: a file still matching its recorded hash is ours to
update or remove; a file that changed since is the user's, and is left alone unless ``--force``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memoryd import __version__, prompts
from memoryd.errors import InstallError, PathError
from memoryd.fsutil import atomic_write, read_json_object, read_regular, sha256
from memoryd.host.mcp_config import McpStep, install_mcp, uninstall_mcp
from memoryd.host.permissions import consolidator_agent_permission
from memoryd.paths import Paths

HOST = "opencode"
MCP_RECORD = "opencode-mcp"
MARKER = f"# Installed by memoryd {__version__}. Edits are kept: memoryd will not overwrite a changed file without --force."

Action = Literal["create", "update", "unchanged", "replace", "keep-modified", "remove", "absent"]


@dataclass(frozen=True)
class PlannedFile:
    relpath: str
    content: bytes


@dataclass(frozen=True)
class Step:
    action: Action
    path: Path

    def describe(self) -> str:
        text = {
            "create": "create",
            "update": "update",
            "unchanged": "unchanged",
            "replace": "replace (changed by you; --force)",
            "keep-modified": "kept: changed since memoryd wrote it (use --force to replace/remove)",
            "remove": "remove",
            "absent": "already gone",
        }[self.action]
        return f"{text:<12} {self.path}" if len(text) <= 12 else f"{self.path}: {text}"


def default_config_dir(environ: dict[str, str] | None = None) -> Path:
    """``$OPENCODE_CONFIG_DIR`` when set (opencode loads agents and plugins from it), else the XDG one."""
    env = os.environ if environ is None else environ
    if env.get("OPENCODE_CONFIG_DIR"):
        return Path(env["OPENCODE_CONFIG_DIR"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".config")
    return Path(base) / "opencode"


def _with_marker(markdown: str) -> str:
    """Put the marker as a YAML comment inside the front matter, so opencode still parses it."""
    if not markdown.startswith("---\n"):
        raise InstallError("agent template must start with YAML front matter")
    return "---\n" + MARKER + "\n" + markdown[4:]


AGENTS = ("memoryd-extract", "memoryd-consolidate")
# Rendered into the agent files; the consolidator's permissions live in memoryd/host/permissions.py.
AGENT_VARIABLES: dict[str, dict[str, str]] = {
    "memoryd-consolidate": {"permission": consolidator_agent_permission()},
}
SHIM = "plugin/memoryd.js"
HELPER_AGENT_PREFIX = "memoryd-"


def planned_files(paths: Paths) -> list[PlannedFile]:
    """memoryd's agents (``templates/agents/``, each with the marker comment) and the read-path shim."""
    files = []
    for name in AGENTS:
        variables = AGENT_VARIABLES.get(name, {})
        files.append(
            PlannedFile(
                f"agent/{name}.md",
                _with_marker(prompts.render(f"agents/{name}.md", **variables)).encode("utf-8"),
            )
        )
    shim = prompts.render(
        "opencode/memoryd.js",
        block_file=json.dumps(str(paths.readpath_block)),
        spool_file=json.dumps(str(paths.citation_spool)),
        server_file=json.dumps(str(paths.server_state)),
        helper_agent_prefix=json.dumps(HELPER_AGENT_PREFIX),
        memoryd_version=json.dumps(__version__),
    )
    files.append(PlannedFile(SHIM, shim.encode("utf-8")))
    return files


class Installer:
    def __init__(self, paths: Paths, config_dir: Path | None = None) -> None:
        self.paths = paths
        self.manifest_path = paths.install_manifest
        manifest = self._load()
        recorded = manifest.get(HOST, {}).get("config_dir")
        self.config_dir = (
            config_dir or (Path(recorded) if recorded else None) or default_config_dir()
        ).absolute()

    def _load(self) -> dict:
        return read_json_object(self.manifest_path, InstallError)

    def _recorded(self) -> dict[str, str]:
        entry = self._load().get(HOST, {})
        if entry.get("config_dir") and Path(entry["config_dir"]) != self.config_dir:
            return {}
        return dict(entry.get("files", {}))

    def _save(self, files: dict[str, str]) -> None:
        data = self._load()
        if files:
            data[HOST] = {
                "config_dir": str(self.config_dir),
                "files": files,
                "version": __version__,
            }
        else:
            data.pop(HOST, None)
        self.paths.ensure_dir(self.manifest_path.parent)
        atomic_write(self.manifest_path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def _current(self, path: Path) -> bytes | None:
        try:
            return read_regular(path)
        except PathError as exc:
            raise InstallError(f"{path}: {exc.problem}; remove it and re-run") from exc

    def plan_install(self, *, force: bool = False) -> list[tuple[Step, PlannedFile]]:
        recorded = self._recorded()
        plan = []
        for pf in planned_files(self.paths):
            target = self.config_dir / pf.relpath
            current = self._current(target)
            if current is None:
                action: Action = "create"
            elif current == pf.content:
                action = "unchanged"
            elif recorded.get(pf.relpath) == sha256(current):
                action = "update"
            elif force:
                action = "replace"
            else:
                action = "keep-modified"
            plan.append((Step(action, target), pf))
        return plan

    def _mcp_record(self) -> dict[str, Any]:
        entry = self._load().get(MCP_RECORD, {})
        return (
            entry
            if isinstance(entry, dict) and entry.get("config_dir") == str(self.config_dir)
            else {}
        )

    def _save_mcp(self, record: dict[str, Any]) -> None:
        data = self._load()
        if record:
            data[MCP_RECORD] = {**record, "config_dir": str(self.config_dir)}
        else:
            data.pop(MCP_RECORD, None)
        self.paths.ensure_dir(self.manifest_path.parent)
        atomic_write(self.manifest_path, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def install(self, *, force: bool = False, dry_run: bool = False) -> list[Step | McpStep]:
        plan = self.plan_install(force=force)
        mcp_step, mcp_record = install_mcp(
            self.config_dir, self._mcp_record(), force=force, dry_run=dry_run
        )
        if dry_run:
            return [*(s for s, _ in plan), mcp_step]
        recorded = self._recorded()
        for step, pf in plan:
            if step.action in ("create", "update", "replace"):
                try:
                    step.path.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(step.path, pf.content)
                except (OSError, PathError) as exc:
                    raise InstallError(f"cannot write {step.path}: {exc}") from exc
            if step.action != "keep-modified":
                recorded[pf.relpath] = sha256(pf.content)
        self._save(recorded)
        self._save_mcp(mcp_record)
        return [*(s for s, _ in plan), mcp_step]

    def uninstall(self, *, force: bool = False, dry_run: bool = False) -> list[Step | McpStep]:
        recorded = self._recorded()
        steps: list[Step | McpStep] = []
        remaining: dict[str, str] = {}
        order = {pf.relpath: i for i, pf in enumerate(planned_files(self.paths))}
        for rel, digest in sorted(
            recorded.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])
        ):
            target = self.config_dir / rel
            current = self._current(target)
            if current is None:
                steps.append(Step("absent", target))
            elif sha256(current) == digest or force:
                steps.append(Step("remove", target))
                if not dry_run:
                    target.unlink()
                    _remove_empty_parents(target.parent, self.config_dir)
            else:
                steps.append(Step("keep-modified", target))
                remaining[rel] = digest
        mcp_record = self._mcp_record()
        mcp_step = uninstall_mcp(
            self.config_dir,
            {k: v for k, v in mcp_record.items() if k != "config_dir"},
            force=force,
            dry_run=dry_run,
        )
        if mcp_step is not None:
            steps.append(mcp_step)
        if not dry_run:
            self._save(remaining)
            if mcp_step is not None and mcp_step.action != "keep-modified":
                self._save_mcp({})
        return steps


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
