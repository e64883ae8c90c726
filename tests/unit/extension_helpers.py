"""Shared helpers for the extension tests (Claude import, Codex exchange)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memoryd.settings import ExtensionsSettings, Settings

OLD_NS = 1_600_000_000 * 10**9  # a fixed past mtime, to prove a run rewrote nothing


def settings_with(**ext: Any) -> Settings:
    return Settings(extensions=ExtensionsSettings(**ext))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def mtimes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[p.relative_to(root).as_posix()] = os.lstat(p).st_mtime_ns
    return out


def age_everything(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.utime(Path(dirpath) / name, ns=(OLD_NS, OLD_NS), follow_symlinks=False)
