"""Project scopes: which part of memory belongs to which checkout.

A scope is one opencode worktree (the git checkout root a session runs in). A session in a folder
that is not inside a git repository belongs to opencode's catch-all project ``global`` with
worktree ``/``; such a session is scoped to its own directory instead, because one scope for every
loose folder on the machine would bring back exactly the cross-talk scopes exist to stop.

The scope root is turned into a *key*: the root folder's name as a lowercase ASCII slug plus eight
hex characters of the SHA-256 of the root path. Readable in ``ls``, stable across runs and
machines with the same paths, safe as a single path component, and different for two checkouts of
one repository (their roots differ). The shim computes the same key in JavaScript when it loads
(``templates/opencode/memoryd.js``); both sides are pinned by one golden test.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

ROOT_WORKTREE = "/"
NAME_MAX_CHARS = 32
HASH_CHARS = 8
PROJECTS_DIR = "projects"
_KEY = re.compile(rf"[a-z0-9]+(?:-[a-z0-9]+)*-[0-9a-f]{{{HASH_CHARS}}}|[0-9a-f]{{{HASH_CHARS}}}")


def scope_root(worktree: str | None, directory: str | None) -> str | None:
    """The folder that bounds a session's scope, or ``None`` when it is not known (yet)."""
    if worktree and worktree != ROOT_WORKTREE:
        return worktree
    if worktree == ROOT_WORKTREE and directory:
        return directory
    return None


def checkout_root(worktree: str | None, directory: str | None) -> str | None:
    """The worktree to record for a session, resolved to *its own* checkout.

    opencode keys projects by the repository's root commit, so two checkouts of one repository
    are one opencode project, and the listing reports the project's first worktree for sessions
    in either. A session whose folder is not inside the reported worktree is in another checkout:
    its own git root is looked up on disk (memoryd runs on the same machine as opencode), which is
    also what the opencode instance, and so the shim, sees as its worktree.
    """
    if not worktree or worktree == ROOT_WORKTREE or not directory:
        return worktree
    base = worktree.rstrip("/")
    if directory == base or directory.startswith(base + "/"):
        return worktree
    return find_worktree(Path(directory))


def _slug(name: str) -> str:
    out = []
    for ch in name:
        out.append(ch.lower() if ch.isascii() and ch.isalnum() else "-")
    return re.sub(r"-+", "-", "".join(out)).strip("-")[:NAME_MAX_CHARS].strip("-")


def scope_key(root: str) -> str:
    """``<folder-name-slug>-<8 hex of sha256(root)>``; just the hash when the name has no ASCII."""
    digest = hashlib.sha256(root.encode("utf-8")).hexdigest()[:HASH_CHARS]
    name = _slug(root.rstrip("/").rsplit("/", 1)[-1])
    return f"{name}-{digest}" if name else digest


def is_scope_key(text: str) -> bool:
    return bool(_KEY.fullmatch(text))


def find_worktree(path: Path) -> str:
    """The scope root for a folder on this machine: its git checkout root, else the folder itself.

    Mirrors how opencode picks an instance's worktree (the nearest parent holding ``.git``, a
    folder in a main checkout or a file in a linked worktree), so the MCP server and the CLI land on
    the same key as the sessions started there.
    """
    start = Path(os.path.abspath(path))
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(start)


def project_dir(key: str) -> str:
    """The relpath of a scope's folder in the memory folder."""
    return f"{PROJECTS_DIR}/{key}"
