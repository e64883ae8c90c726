"""Which local project another machine's session belongs to: checkouts matched by identity.

Two machines rarely share a checkout path, so the path-derived scope key (``memoryd.scopes``)
cannot match a remote session to a local project. Each published session therefore carries the
identity of its checkout, and the reader matches it against its own checkouts, in this order:

1. the normalised URL of the checkout's ``origin`` remote (scheme, user info, a trailing ``.git``
   and ``/`` dropped, lowercased as hosting services compare names, ``git@host:path`` read as
   ``host/path``), so an ssh and an https clone of one repository match;
2. when either side has no ``origin`` (a local-only repository, a loose folder): the checkout's
   folder name, but only when exactly one local checkout has that name.

Two URLs that differ never match on the name alone. A session that matches nothing stays in the
global layer of the sync inputs. Root commits are not compared: finding one means walking a
repository's whole history on every publish, and the URL already covers shared repositories.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memoryd.scopes import scope_key

log = logging.getLogger(__name__)

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


def normalise_url(url: str) -> str | None:
    """A remote URL as an identity: ``host/path`` (lowercase host), or ``None`` if empty."""
    text = url.strip()
    if not text:
        return None
    if _SCHEME.match(text):
        rest = _SCHEME.sub("", text, count=1)
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1]
        host = re.sub(r":\d+$", "", host)
    elif (m := _SCP.match(text)) and not text.startswith("/"):
        host, path = m.group(1), m.group(2)
    else:  # a path remote: only meaningful on one machine, kept as it is
        host, path = "", text
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    # Hosting services treat owner and repository names case-insensitively; so does this.
    return f"{host}/{path}".lower() if host else path or None


def _git_config(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot / "config"
    if dot.is_file():  # a linked worktree: "gitdir: <main>/.git/worktrees/<name>"
        try:
            line = dot.read_text("utf-8", "replace").strip()
        except OSError:
            return None
        if not line.startswith("gitdir:"):
            return None
        gitdir = (root / line.removeprefix("gitdir:").strip()).resolve()
        common = gitdir / "commondir"
        try:
            base = (gitdir / common.read_text().strip()).resolve() if common.is_file() else gitdir
        except OSError:
            return None
        return base / "config"
    return None


def origin_url(root: str | None) -> str | None:
    """The normalised ``origin`` URL of the checkout at ``root`` (``None``: none, unreadable)."""
    if not root:
        return None
    config = _git_config(Path(root))
    if config is None or not config.is_file():
        return None
    from dulwich.config import ConfigFile

    try:
        url = ConfigFile.from_path(str(config)).get((b"remote", b"origin"), b"url")
    except (KeyError, OSError, ValueError):
        return None
    return normalise_url(url.decode("utf-8", "replace"))


def folder_name(root: str | None) -> str | None:
    if not root or root == "/":
        return None
    return root.rstrip("/").rsplit("/", 1)[-1] or None


@dataclass(frozen=True)
class Checkout:
    key: str
    repo: str | None
    name: str | None


def local_checkouts(roots: Iterable[str]) -> list[Checkout]:
    """This machine's checkouts (scope roots) with their identities."""
    return [Checkout(scope_key(r), origin_url(r), folder_name(r)) for r in sorted(set(roots))]


def match_project(repo: str | None, name: str | None, checkouts: list[Checkout]) -> str | None:
    """The local project key a remote session with identity (``repo``, ``name``) belongs to."""
    if repo:
        by_url = sorted({c.key for c in checkouts if c.repo == repo})
        if by_url:
            return by_url[0]  # several local clones of one repository: the first, stably
    if name:
        by_name = [c for c in checkouts if c.name == name and not (repo and c.repo)]
        if len(by_name) == 1:
            return by_name[0].key
    return None
