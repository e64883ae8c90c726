"""Install memoryd's one piece into opencode's config folder, and take exactly it out again.

The global config gets only the shim (``plugin/memoryd.js``): it injects the memory block and
offers the model memoryd's three memory tools, each call answered by a short-lived local
``memoryd tool`` process. Nothing else goes into the user's config on purpose: helper agents
there would be listed in every user request's ``task`` tool (they now live in memoryd's own
folders, :mod:`memoryd.host.agents`), and an MCP server there would start one ``memoryd mcp``
process per opencode instance, memoryd's own helper instances included. Earlier versions
installed both; ``install`` removes them (when unchanged) and ``uninstall`` still does.

memoryd records each file's SHA-256 in a manifest in its own state folder. That record is what
makes the installer safe to re-run and to undo: a file still matching its recorded hash is ours
to update or remove; a file that changed since is the user's, and is left alone unless
``--force``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memoryd import __version__, prompts
from memoryd.errors import InstallError, PathError
from memoryd.fsutil import (
    atomic_write,
    read_json_object,
    read_regular,
    remove_empty_parents,
    sha256,
)
from memoryd.host.agents import HELPER_AGENT_PREFIX, remove_agent_configs
from memoryd.host.mcp_config import McpStep, server_command, server_env, uninstall_mcp
from memoryd.paths import Paths

HOST = "opencode"
MCP_RECORD = "opencode-mcp"

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


SHIM = "plugin/memoryd.js"


def planned_files(paths: Paths) -> list[PlannedFile]:
    """The shim, with memoryd's paths and the command that answers its tools filled in."""
    files = []
    shim = prompts.render(
        "opencode/memoryd.js",
        block_file=json.dumps(str(paths.readpath_block)),
        projects_dir=json.dumps(str(paths.readpath_projects)),
        seen_dir=json.dumps(str(paths.readpath_seen)),
        spool_file=json.dumps(str(paths.citation_spool)),
        server_file=json.dumps(str(paths.server_state)),
        helper_agent_prefix=json.dumps(HELPER_AGENT_PREFIX),
        memoryd_version=json.dumps(__version__),
        tool_command=json.dumps([*server_command()[:-1], "tool"]),
        tool_env=json.dumps(server_env()),
        tool_specs=json.dumps(prompts.tool_specs()),
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

    def _load(self) -> dict[str, Any]:
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
        planned = {pf.relpath for _, pf in plan}
        recorded = self._recorded()
        # what an earlier version installed and this one does not (helper agents, MCP entry)
        stale, kept = self._remove_recorded(
            {k: v for k, v in recorded.items() if k not in planned}, force=force, dry_run=dry_run
        )
        old_mcp = self._remove_mcp(force=force, dry_run=dry_run)
        extra: list[Step | McpStep] = [*stale, *([old_mcp] if old_mcp else [])]
        if dry_run:
            return [*(s for s, _ in plan), *extra]
        recorded = {k: v for k, v in recorded.items() if k in planned} | kept
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
        return [*(s for s, _ in plan), *extra]

    def uninstall(self, *, force: bool = False, dry_run: bool = False) -> list[Step | McpStep]:
        steps, remaining = self._remove_recorded(self._recorded(), force=force, dry_run=dry_run)
        mcp_step = self._remove_mcp(force=force, dry_run=dry_run)
        if mcp_step is not None:
            steps.append(mcp_step)
        if not dry_run:
            self._save(remaining)
            remove_agent_configs(self.paths)
        return steps

    def _remove_recorded(
        self, recorded: dict[str, str], *, force: bool, dry_run: bool
    ) -> tuple[list[Step | McpStep], dict[str, str]]:
        """Remove recorded files still as memoryd wrote them; returns steps and what stays."""
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
                    remove_empty_parents(target.parent, self.config_dir)
            else:
                steps.append(Step("keep-modified", target))
                remaining[rel] = digest
        return steps, remaining

    def _remove_mcp(self, *, force: bool, dry_run: bool) -> McpStep | None:
        """Take out the ``mcp.memoryd`` entry an earlier version registered, if still ours."""
        mcp_record = self._mcp_record()
        mcp_step = uninstall_mcp(
            self.config_dir,
            {k: v for k, v in mcp_record.items() if k != "config_dir"},
            force=force,
            dry_run=dry_run,
        )
        if not dry_run and mcp_step is not None and mcp_step.action != "keep-modified":
            self._save_mcp({})
        return mcp_step
