"""``memoryd install claude-code|codex``: merge memoryd's entries into the client's own config,
record what was there, and put exactly that back on ``uninstall``.

The client files are the user's (and, for ``.claude.json``, the client's own state), so an
install never replaces them: it adds memoryd's entries (:mod:`memoryd.host.client_config`) to
what is there, and refuses a file it cannot read faithfully (JSON that does not parse, TOML
that would stop parsing). Before the first change of a file its bytes are kept in memoryd's
state folder and its SHA-256 after the change is recorded in the install manifest, beside the
opencode install's entry. Uninstall then has two ways back:

* the file is still as memoryd left it: its original bytes are written back (or it is removed,
  when memoryd created it), so the file is exactly what it was;
* it changed since (Claude Code rewrites ``.claude.json`` all the time, the user edits
  ``config.toml``): only memoryd's entries come out, where they are still what memoryd wrote.
  An entry the user changed is kept and reported, unless ``--force``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.errors import InstallError, PathError
from memoryd.fsutil import atomic_write, read_json_object, read_regular_with_mode, sha256
from memoryd.host import client_config as cc
from memoryd.host.codex_trust import find_codex, hook_trust
from memoryd.host.ids import CODEX
from memoryd.host.mcp_config import KEY, server_command
from memoryd.paths import Paths
from memoryd.tuning import MCP_PRIME_TIMEOUT_S

BACKUPS = "client-backups"


@dataclass(frozen=True)
class ClientStep:
    action: (
        str  # write | unchanged | restore | remove-entries | delete | keep-modified | absent | note
    )
    path: Path
    detail: str = ""

    def describe(self) -> str:
        text = {
            "write": "add memoryd's entries to",
            "unchanged": "unchanged",
            "restore": "put back as it was before memoryd:",
            "remove-entries": "take memoryd's entries out of",
            "delete": "remove (memoryd created it)",
            "keep-modified": "kept: memoryd's entries changed since it wrote them (use --force):",
            "absent": "already gone:",
            "note": "note:",
        }[self.action]
        return f"{text} {self.path}" + (f" ({self.detail})" if self.detail else "")


def _read(path: Path) -> tuple[bytes, int] | None:
    try:
        return read_regular_with_mode(path)
    except PathError as exc:
        raise InstallError(f"{path}: {exc.problem}") from exc


def _json(path: Path, raw: bytes | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InstallError(
            f"{path} is not plain JSON ({exc}); memoryd will not rewrite it"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; memoryd will not rewrite it")
    return data


def _dump(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


class ClientInstaller:
    """One client's install record: the files touched, their original bytes, memoryd's entries."""

    def __init__(
        self,
        paths: Paths,
        client: str,
        environ: dict[str, str] | None = None,
        codex_bin: str | None = None,
    ) -> None:
        if client not in cc.CLIENTS:
            raise InstallError(f"unknown client {client!r} (choose {' or '.join(cc.CLIENTS)})")
        self.paths, self.client, self.environ, self.codex_bin = paths, client, environ, codex_bin
        self.backups = paths.install_manifest.parent / BACKUPS

    # --- the record ---------------------------------------------------------------------------

    def _manifest(self) -> dict[str, Any]:
        return read_json_object(self.paths.install_manifest, InstallError)

    def record(self) -> dict[str, Any]:
        entry = self._manifest().get(self.client)
        return dict(entry.get("files", {})) if isinstance(entry, dict) else {}

    def _save(self, files: dict[str, Any]) -> None:
        data = self._manifest()
        if files:
            data[self.client] = {"files": files, "version": __version__}
        else:
            data.pop(self.client, None)
        self.paths.ensure_dir(self.paths.install_manifest.parent)
        atomic_write(self.paths.install_manifest, json.dumps(data, indent=2, sort_keys=True) + "\n")

    def _backup_name(self, path: Path) -> str:
        return f"{self.client}-{sha256(str(path).encode())[:16]}.orig"

    def _remember(self, files: dict[str, Any], path: Path, before: bytes | None) -> dict[str, Any]:
        """The file's record, keeping its original bytes on the first change only."""
        rec = dict(files.get(str(path)) or {})
        if rec and (before is None or sha256(before) != rec.get("sha")):
            # changed since memoryd wrote it: the kept original is no longer what to put back,
            # so uninstall will take out memoryd's entries only
            if rec.get("backup"):
                (self.backups / str(rec["backup"])).unlink(missing_ok=True)
            kept = {k: rec[k] for k in ("trust",) if k in rec}
            rec = {"created": bool(rec.get("created")), "stale": True, **kept}
        if not rec:
            rec["created"] = before is None
            if before is not None:
                self.paths.ensure_dir(self.backups)
                name = self._backup_name(path)
                atomic_write(self.backups / name, before, mode=0o600)
                rec["backup"] = name
        return rec

    def _write(self, path: Path, data: bytes, mode: int | None) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, mode=0o600 if mode is None else mode)
        except (OSError, PathError) as exc:
            raise InstallError(f"cannot write {path}: {exc}") from exc

    # --- install ------------------------------------------------------------------------------

    def install(self, *, dry_run: bool = False, prime: bool = True) -> list[ClientStep]:
        steps = (
            self._install_claude(dry_run)
            if self.client == cc.CLAUDE
            else self._install_codex(dry_run)
        )
        if prime and not dry_run:
            prime_tool_list(self.environ)
        return steps

    def _install_claude(self, dry_run: bool) -> list[ClientStep]:
        e = cc.claude_entries(environ=self.environ)
        files = self.record()
        steps: list[ClientStep] = []
        user_file = cc.claude_user_file(self.environ)
        settings = cc.claude_config_dir(self.environ) / "settings.json"
        merges: list[tuple[Path, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]]] = [
            (user_file, lambda d, rec: _merge_server(d, rec, e.server)),
            (settings, lambda d, rec: _merge_settings(d, rec, e.hook_group, e.allow)),
        ]
        for path, merge in merges:
            got = _read(path)
            before, mode = (got[0], got[1]) if got else (None, None)
            rec = dict(files.get(str(path)) or {})
            data = _json(path, before)
            added = merge(data, rec.get("added") or {})
            after = _dump(data)
            if before is not None and after == before:
                steps.append(ClientStep("unchanged", path))
                continue
            steps.append(ClientStep("write", path))
            if dry_run:
                continue
            rec = self._remember(files, path, before)
            self._write(path, after, mode)
            files[str(path)] = {**rec, "sha": sha256(after), "added": added}
            self._save(files)
        return steps

    def _install_codex(self, dry_run: bool) -> list[ClientStep]:
        path = cc.codex_home(self.environ) / "config.toml"
        files = self.record()
        got = _read(path)
        before, mode = (got[0], got[1]) if got else (None, None)
        text = (before or b"").decode("utf-8")
        rec = dict(files.get(str(path)) or {})
        base = _without_block(text, rec.get("appended"))
        if base is None:
            raise InstallError(
                f"{path}: memoryd's block was changed by hand; run `memoryd uninstall codex "
                "--force` first, or edit it yourself (`memoryd install codex --print`)"
            )
        trust = rec.get("trust")
        block = cc.codex_block(environ=self.environ, trust=tuple(trust) if trust else None)
        appended = _join(base, block)
        if appended == text:
            if dry_run or not rec:
                return [ClientStep("unchanged", path)]
            trusted = self._trust(path)  # a hook moved or Codex changed: its trust follows
            if trusted is None or list(trusted) == trust:
                return [ClientStep("unchanged", path)]
            rec = self._remember(files, path, before)
            rec["trust"] = list(trusted)
            block = cc.codex_block(environ=self.environ, trust=trusted)
            self._put_codex(path, base, block, mode, files, rec)
            return [ClientStep("write", path, "the hook's trust entry")]
        if dry_run:
            return [ClientStep("write", path)]
        rec = self._remember(files, path, before)
        steps = [ClientStep("write", path)]
        self._put_codex(path, base, block, mode, files, rec)
        trusted = self._trust(path)
        if trusted is None:
            steps.append(
                ClientStep("note", path, "trust memoryd's SessionStart hook in codex: /hooks")
            )
        elif list(trusted) != trust:
            block = cc.codex_block(environ=self.environ, trust=trusted)
            rec["trust"] = list(trusted)
            self._put_codex(path, base, block, mode, files, rec)
        return steps

    def _put_codex(
        self,
        path: Path,
        base: str,
        block: str,
        mode: int | None,
        files: dict[str, Any],
        rec: dict[str, Any],
    ) -> None:
        full = _join(base, block)
        try:
            tomllib.loads(full)
        except tomllib.TOMLDecodeError as exc:
            raise InstallError(
                f"{path}: adding memoryd's tables would break it ({exc}); add them by hand "
                "(`memoryd install codex --print`)"
            ) from exc
        data = full.encode("utf-8")
        self._write(path, data, mode)
        files[str(path)] = {**rec, "sha": sha256(data), "appended": full[len(base) :]}
        self._save(files)

    def _trust(self, path: Path) -> tuple[str, str] | None:
        codex = find_codex(self.codex_bin)
        if codex is None:
            return None
        command = cc.hook_command(CODEX, environ=self.environ)
        env = dict(self.environ) if self.environ is not None else None
        try:
            return hook_trust(codex, command, path.parent, env)
        except InstallError:
            return None

    # --- uninstall ----------------------------------------------------------------------------

    def uninstall(self, *, force: bool = False, dry_run: bool = False) -> list[ClientStep]:
        files = self.record()
        steps: list[ClientStep] = []
        for name, rec in sorted(files.items()):
            path = Path(name)
            step, left = self._undo(path, rec, force=force, dry_run=dry_run)
            steps.append(step)
            if not dry_run:
                if left:
                    files[name] = rec
                else:
                    files.pop(name)
                    backup = rec.get("backup")
                    if backup:
                        (self.backups / backup).unlink(missing_ok=True)
                self._save(files)
        return steps

    def _original(self, rec: dict[str, Any]) -> bytes | None:
        if rec.get("created"):
            return None
        got = _read(self.backups / str(rec.get("backup")))
        if got is None:
            raise InstallError(
                f"memoryd's copy of the original file is missing ({rec.get('backup')})"
            )
        return got[0]

    def _undo(
        self, path: Path, rec: dict[str, Any], *, force: bool, dry_run: bool
    ) -> tuple[ClientStep, bool]:
        """Step taken and whether memoryd's entries are still there afterwards."""
        got = _read(path)
        if got is None:
            return ClientStep("absent", path), False
        current, mode = got
        if sha256(current) == rec.get("sha") and not rec.get("stale"):
            original = self._original(rec)
            if not dry_run:
                if original is None:
                    path.unlink()
                else:
                    self._write(path, original, mode)
            return ClientStep("delete" if original is None else "restore", path), False
        if path.name == "config.toml":
            text = _without_block(current.decode("utf-8"), rec.get("appended"), force=force)
        else:
            text = _without_json(path, current, rec, force=force)
        if text is None:
            return ClientStep("keep-modified", path), True
        if text == current.decode("utf-8"):
            return ClientStep("absent", path, "memoryd's entries are gone"), False
        if not dry_run:
            if rec.get("created") and not text.strip():
                path.unlink()
            else:
                self._write(path, text.encode("utf-8"), mode)
        return ClientStep("remove-entries", path), False


def prime_tool_list(environ: dict[str, str] | None = None) -> bool:
    """Start ``memoryd mcp`` once and ask for its tools, so the SDK server's list is kept for the
    early answer (:mod:`memoryd.mcp_handshake`) before any client has waited for it: a short
    headless run often ends before the SDK has loaded, and the list would never be kept."""
    import os
    import subprocess

    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "memoryd-install", "version": __version__},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    env = dict(os.environ if environ is None else environ)
    try:
        proc = subprocess.run(
            server_command(),
            input="".join(json.dumps(m) + "\n" for m in lines),
            capture_output=True,
            text=True,
            env=env,
            timeout=MCP_PRIME_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return '"id":2' in proc.stdout.replace(" ", "")


# --- JSON merges (Claude Code) ---------------------------------------------------------------


def _obj(data: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InstallError(f"{path} is not a JSON object; memoryd will not rewrite it")
    return value


def _merge_server(
    data: dict[str, Any], old: dict[str, Any], server: dict[str, Any]
) -> dict[str, Any]:
    _obj(data, "mcpServers", "mcpServers")[KEY] = server
    return {"server": server}


def _merge_settings(
    data: dict[str, Any], old: dict[str, Any], group: dict[str, Any], allow: list[str]
) -> dict[str, Any]:
    hooks = _obj(data, "hooks", "hooks")
    groups = hooks.setdefault(cc.HOOK_EVENT, [])
    if not isinstance(groups, list):
        raise InstallError(f"hooks.{cc.HOOK_EVENT} is not a list; memoryd will not rewrite it")
    groups[:] = [g for g in groups if g != old.get("hook_group") and g != group]
    groups.append(group)
    rules = _obj(data, "permissions", "permissions").setdefault("allow", [])
    if not isinstance(rules, list):
        raise InstallError("permissions.allow is not a list; memoryd will not rewrite it")
    ours = list(old.get("allow") or [])
    for rule in allow:
        if rule not in rules:
            rules.append(rule)
            ours.append(rule)
    return {"hook_group": group, "allow": sorted(set(ours))}


def _without_json(path: Path, raw: bytes, rec: dict[str, Any], *, force: bool) -> str | None:
    data = _json(path, raw)
    added = rec.get("added") or {}
    if "server" in added:
        servers = data.get("mcpServers")
        if isinstance(servers, dict) and KEY in servers:
            if servers[KEY] != added["server"] and not force:
                return None
            del servers[KEY]
            if not servers:
                del data["mcpServers"]
    if "hook_group" in added:
        hooks = data.get("hooks")
        groups = hooks.get(cc.HOOK_EVENT) if isinstance(hooks, dict) else None
        if isinstance(groups, list):
            groups[:] = [g for g in groups if g != added["hook_group"]]
            if not groups:
                del hooks[cc.HOOK_EVENT]  # type: ignore[union-attr]
            if not hooks:
                del data["hooks"]
        perms = data.get("permissions")
        rules = perms.get("allow") if isinstance(perms, dict) else None
        if isinstance(rules, list):
            rules[:] = [r for r in rules if r not in (added.get("allow") or [])]
            if not rules:
                del perms["allow"]  # type: ignore[union-attr]
            if not perms:
                del data["permissions"]
    if rec.get("created") and not data:
        return ""
    return _dump(data).decode("utf-8")


# --- the TOML block (Codex) ------------------------------------------------------------------


def _join(base: str, block: str) -> str:
    """``base`` with memoryd's block after it, one blank line between."""
    if not base:
        return block
    return base + ("" if base.endswith("\n") else "\n") + "\n" + block


def _without_block(text: str, appended: str | None, *, force: bool = False) -> str | None:
    """``text`` without memoryd's block: the exact bytes it appended, else (``force``) whatever
    sits between its markers; ``None`` when a changed block is there and not forced."""
    if appended and appended in text:
        i = text.rindex(appended)
        return text[:i] + text[i + len(appended) :]
    start = text.find(cc.BEGIN)
    if start < 0:
        return text
    if not force:
        return None
    end = text.find(cc.END, start)
    stop = len(text) if end < 0 else end + len(cc.END)
    if text[stop : stop + 1] == "\n":
        stop += 1
    head = text[:start]
    if head.endswith("\n\n"):
        head = head[:-1]
    return head + text[stop:]
