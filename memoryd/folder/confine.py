"""What the memory folder may hold, and what opencode would pick up from it or from its parents.

The consolidation agent runs in an opencode session rooted in the memory folder. opencode 1.18
loads, from a session's directory and every parent up to its worktree (``/`` when the folder is
not inside a git repository): ``.opencode/`` (``opencode.json(c)``, ``{agent,agents}/**/*.md``,
``{command,commands}/**/*.md``, ``{mode,modes}/*.md``, ``{plugin,plugins}/*.{ts,js}``,
``{tool,tools}/*.{js,ts}``, ``{skill,skills}/**/SKILL.md``, and a ``package.json`` it installs),
``opencode.json`` / ``opencode.jsonc``, the instruction files ``AGENTS.md``, ``CLAUDE.md`` and
``CONTEXT.md``, and skills under ``.claude/skills`` and ``.agents/skills``. When a file is read,
instruction files next to it (up to the session directory) are attached too. A plugin is code
execution in opencode; config can rewrite agents, permissions, MCP servers and formatters. So
anything the agent — or anyone else — leaves in the folder is a way into the next instance that
boots there.

The defence is an allow-list, not a list of known-bad names: :func:`sweep` removes every entry
that is not part of memoryd's layout (:data:`LAYOUT`), whatever it is called — dot entries,
unknown top-level names, symlinks, FIFOs, sockets, devices, hard-linked files — before opencode
boots in the folder and again after each consolidation. :func:`planted_parent_config` looks at
the folder's parents, which memoryd does not own, and names what opencode would load from them,
so phase 2 can refuse to run there.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import PathError
from memoryd.fsutil import read_regular

log = logging.getLogger(__name__)

# Files opencode reads as instructions, wherever they sit on its walk (compared case-folded:
# macOS and Windows folders are case-insensitive).
INSTRUCTION_NAMES = frozenset({"agents.md", "claude.md", "context.md"})
# Everything opencode 1.18 loads from a directory on the walk from a session's folder upwards.
OPENCODE_LOADED = (
    ".opencode",
    "opencode.json",
    "opencode.jsonc",
    "AGENTS.md",
    "CLAUDE.md",
    "CONTEXT.md",
    ".claude",
    ".agents",
)
# Loaded from the home folder by every instance anyway (global config, global skills): not a
# property of where the memory folder lives, so not a reason to refuse.
GLOBAL_IN_HOME = frozenset({".opencode", ".claude", ".agents"})

_PLAIN = re.compile(r"[^.\x00-\x1f\x7f/\\][^\x00-\x1f\x7f/\\]*")
_RESERVED = INSTRUCTION_NAMES | {"opencode.json", "opencode.jsonc"}


def plain_name(name: str) -> bool:
    """A name memoryd's layout can hold: no leading dot, no control characters, not reserved."""
    return bool(_PLAIN.fullmatch(name)) and name.casefold() not in _RESERVED


@dataclass(frozen=True)
class Slot:
    """One place in the layout: a fixed name (or ``None`` = any plain name) and what it holds."""

    name: str | None
    kind: str  # "file" | "dir" | "tree" (a folder of plain-named folders and files, any depth)
    children: tuple[Slot, ...] = ()
    suffix: str = ""  # for files matched by any plain name: required ending


# One project's folder (``projects/<key>/``, see memoryd.folder.workspace): its layer, written by the
# consolidator, and its inputs, rendered by memoryd or written by the user's project notes.
PROJECT_LAYOUT: tuple[Slot, ...] = (
    Slot("memory_summary.md", "file"),
    Slot("MEMORY.md", "file"),
    Slot("project.md", "file"),
    Slot("raw_memories.md", "file"),
    Slot("rollout_summaries", "dir", (Slot(None, "file", suffix=".md"),)),
    Slot("notes", "dir", (Slot(None, "file", suffix=".md"),)),
)

# memoryd's layout of the memory folder; everything else is removed by :func:`sweep`.
LAYOUT: tuple[Slot, ...] = (
    Slot("MEMORY.md", "file"),
    Slot("memory_summary.md", "file"),
    Slot("raw_memories.md", "file"),
    Slot("phase2_workspace_diff.md", "file"),
    Slot("rollout_summaries", "dir", (Slot(None, "file", suffix=".md"),)),
    Slot("skills", "tree"),
    Slot("extensions", "tree"),
    Slot("projects", "dir", (Slot(None, "dir", PROJECT_LAYOUT),)),
)


def _match(slots: tuple[Slot, ...], name: str, is_dir: bool) -> Slot | None:
    if not plain_name(name):
        return None
    for slot in slots:
        if slot.name is not None and slot.name != name:
            continue
        if slot.name is None and slot.suffix and not name.endswith(slot.suffix):
            continue
        if slot.kind == "file" and not is_dir:
            return slot
        if slot.kind in ("dir", "tree") and is_dir:
            return slot
    return None


def _remove(path: Path) -> None:
    """Delete one entry without following links (a directory goes with its whole subtree)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def sweep(root: Path, *, managed: Mapping[str, bytes] | None = None) -> list[str]:
    """Remove every entry under ``root`` outside :data:`LAYOUT`; return the removed relpaths.

    Only real directories and regular files with a single link survive, and only where the
    layout has a place for them. ``managed`` names files memoryd itself renders into the folder
    (relpath → exact bytes); one is kept only while its bytes are still memoryd's. ``root``
    itself must be a real directory (the caller checks it).
    """
    removed: list[str] = []
    managed = dict(managed or {})

    def walk(folder: Path, rel: str, slots: tuple[Slot, ...], tree: bool) -> None:
        try:
            with os.scandir(folder) as it:
                names = sorted(e.name for e in it)
        except FileNotFoundError:
            return
        for name in names:
            relpath = f"{rel}{name}"
            path = folder / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            is_file = stat.S_ISREG(st.st_mode)
            if relpath in managed:
                keep = is_file and st.st_nlink == 1 and _bytes(path) == managed[relpath]
                slot = None
            elif tree:
                keep = (is_dir or is_file) and plain_name(name)
                slot = Slot(name, "tree") if is_dir else None
            else:
                slot = _match(slots, name, is_dir) if (is_dir or is_file) else None
                keep = slot is not None
            if keep and is_file and st.st_nlink != 1:
                keep = False  # a hard link shares bytes with a file outside memoryd's reach
            if not keep:
                try:
                    _remove(path)
                except FileNotFoundError:
                    continue
                removed.append(relpath + ("/" if is_dir else ""))
                continue
            if is_dir and (tree or slot is not None):
                sub_tree = tree or (slot is not None and slot.kind == "tree")
                children = () if slot is None else slot.children
                walk(path, relpath + "/", children, sub_tree)

    walk(Path(root), "", LAYOUT, False)
    if removed:
        log.warning("memory folder: removed entries outside memoryd's layout: %s", removed)
    return removed


def _bytes(path: Path) -> bytes | None:
    try:
        return read_regular(path)
    except PathError:
        return None


def _is_plain_file(path: Path, data: bytes) -> bool:
    st = os.lstat(path)
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and _bytes(path) == data


def _is_under(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def planted_parent_config(
    root: Path,
    worktree: str,
    *,
    home: Path | None = None,
    managed: Mapping[Path, bytes] | None = None,
) -> list[Path]:
    """What opencode would load into a session at ``root`` from the folders above it.

    opencode walks from the session's directory up to the worktree it reports for it (``/`` when
    the folder is in no git repository). Entries found in the home folder that every instance
    loads anyway (:data:`GLOBAL_IN_HOME`) are not reported, nor a ``managed`` file (memoryd's own
    agent definition) whose bytes are still exactly memoryd's. When ``worktree`` is not an
    ancestor of ``root`` (a symlinked path, say), the walk goes up to ``/``: better too far than
    too short.
    """
    managed = dict(managed or {})
    root = Path(os.path.abspath(root))
    top = Path(os.path.abspath(worktree or "/"))
    if not _is_under(root, top):
        top = Path("/")
    home = Path(os.path.abspath(home if home is not None else Path.home()))
    found: list[Path] = []
    if root == top:
        return found  # the folder is its own worktree: opencode looks no higher
    folder = root.parent
    while True:
        for name in OPENCODE_LOADED:
            if folder == home and name in GLOBAL_IN_HOME:
                continue
            candidate = folder / name
            if not os.path.lexists(candidate):
                continue
            if candidate in managed and _is_plain_file(candidate, managed[candidate]):
                continue
            found.append(candidate)
        if folder == top or folder.parent == folder or not _is_under(folder, top):
            break
        folder = folder.parent
    return found
