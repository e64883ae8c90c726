"""Which part of the memory folder a tool call may see and change.

A tool call runs for one project: the checkout its opencode instance (or the shell running the
CLI) is in, turned into a key by :mod:`memoryd.scopes`. What it sees is chosen by ``scope``:

* ``project`` (the default): the global layer plus this project's folder ``projects/<key>/``;
* ``global``: the global layer only (everything outside ``projects/``);
* ``all``: every project too.

What it may *change* is never wider than ``project``: a note is filed in the caller's project or
the global layer, and forgetting touches only sessions and notes of the caller's project or
the global layer. A worktree is the boundary: two checkouts of one repository are two projects.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memoryd.errors import InvalidArgument, NotFound
from memoryd.scopes import PROJECTS_DIR, find_worktree, is_scope_key, scope_key

# Where other machines' memory is rendered (memoryd.sync.inputs, under extensions/<source>/).
REMOTE_RESOURCES = ("extensions", "sync", "resources")

ScopeMode = Literal["project", "global", "all"]
SCOPE_MODES: tuple[str, ...] = ("project", "global", "all")


@dataclass(frozen=True)
class Scope:
    mode: ScopeMode = "all"
    project: str | None = None  # the caller's key; None when it has none (then project == global)

    @classmethod
    def for_folder(cls, folder: Path | str, mode: object = "project") -> Scope:
        return cls(check_mode(mode), scope_key(find_worktree(Path(folder))))

    def with_mode(self, mode: object) -> Scope:
        return Scope(check_mode(mode) if mode is not None else self.mode, self.project)

    def key_of(self, relpath: str) -> str | None:
        """The project a path belongs to (``None`` for the global layer and ``projects/`` itself).

        Another machine's session matched to a local checkout is rendered at
        ``extensions/sync/resources/<machine>/projects/<key>/...`` and belongs to ``<key>`` too.
        """
        parts = [p for p in relpath.strip("/").split("/") if p]
        if len(parts) > 1 and parts[0] == PROJECTS_DIR:
            return parts[1]
        n = len(REMOTE_RESOURCES)
        if (
            len(parts) > n + 2
            and tuple(parts[:n]) == REMOTE_RESOURCES
            and parts[n + 1] == PROJECTS_DIR
        ):
            return parts[n + 2]
        return None

    def allows_key(self, key: str | None) -> bool:
        if key is None or self.mode == "all":
            return True
        return self.mode == "project" and key == self.project

    def allows(self, relpath: str) -> bool:
        return self.allows_key(self.key_of(relpath))

    def check(self, relpath: str) -> None:
        """Refuse a path outside the scope the way a missing one is refused: nothing leaks."""
        if not self.allows(relpath):
            raise NotFound(
                f"{relpath}: not in this scope ({self.describe()}); pass scope='all' to look at "
                "other projects"
            )

    def describe(self) -> str:
        if self.mode == "all":
            return "all projects"
        if self.mode == "global" or self.project is None:
            return "global memory"
        return f"project {self.project} and global memory"

    @property
    def writable(self) -> Scope:
        """Where a change may land: never wider than the caller's project and the global layer.

        Only the unbound scope (a shell, no project) may change any project.
        """
        if self.mode == "all" and self.project is None:
            return self
        return Scope("project", self.project)


ALL = Scope("all")


def check_mode(mode: object) -> ScopeMode:
    if mode not in SCOPE_MODES:
        raise InvalidArgument(f"scope must be one of {', '.join(SCOPE_MODES)}, got {mode!r}")
    return mode  # type: ignore[return-value]


def resolve_project(value: str) -> str:
    """A ``--project`` argument (a folder path or a project key) as a key."""
    if is_scope_key(value) and not Path(value).exists():
        return value
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise InvalidArgument(f"--project {value!r} is neither a folder nor a project key")
    return scope_key(find_worktree(folder))


__all__ = ["ALL", "SCOPE_MODES", "Scope", "ScopeMode", "check_mode", "resolve_project"]
