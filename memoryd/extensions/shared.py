"""Memory exchanged with other agents, as extensions of the memory folder (all off by default).

Three producers feed ``extensions/<name>/`` in the memory folder, or the other agent's folder:

* ``external_agent_import`` (:mod:`memoryd.extensions.claude_code`): Claude Code's per-project memory
  files, mirrored under ``resources/<project key>/`` with a ``scope.json`` naming the project's
  working directory;
* ``codex_import`` (:mod:`memoryd.extensions.codex`): Codex's consolidated ``MEMORY.md`` and
  ``memory_summary.md``, copied under ``resources/codex/``;
* the export (:mod:`memoryd.extensions.codex`): our two artifacts offered to Codex's consolidator
  under ``<codex memories>/extensions/opencode_import/``.

Each extension comes with an ``instructions.md`` (templates under ``templates/extensions/``) that
tells the consolidator what the files are. All of them are inputs: the consolidator may not edit
them, and a copy that disappears shows up as a deletion in the next diff, which is how memory
learned from it gets forgotten.

This module holds what the producers share: the settings switch, reading files without following
links (and without blocking on a FIFO), creating folders that refuse links, and writes that only
happen when the bytes change, so an unchanged source never dirties the workspace or moves an
mtime.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

from memoryd.errors import PathError
from memoryd.folder.layout import EXTENSIONS_DIR
from memoryd.fsutil import atomic_write, lstat_or_none, read_regular, real_dir
from memoryd.paths import templates_dir
from memoryd.redact import redact
from memoryd.settings import Settings
from memoryd.tuning import EXTENSION_SOURCE_MAX_BYTES

log = logging.getLogger(__name__)

INSTRUCTIONS = "instructions.md"
RESOURCES = "resources"

# Bigger source files are skipped (and reported), never cut: a truncated copy would read as an edit.


def extensions_enabled(settings: Settings) -> bool:
    """Whether any importer or the export is switched on."""
    ext = settings.extensions
    return ext.claude_import or ext.codex_import or ext.codex_export


def read_source(path: Path, *, limit: int | None = EXTENSION_SOURCE_MAX_BYTES) -> bytes | None:
    """Bytes of an imported file (at most ``limit``); ``None`` when it does not exist.

    Raises :class:`PathError` for a symlink, a non-regular file, a file over ``limit`` bytes, or
    one we may not read (see :func:`memoryd.fsutil.read_regular`).
    """
    return read_regular(path, limit=limit)


def redacted(data: bytes) -> bytes:
    """Imported text with secrets replaced; undecodable bytes become U+FFFD (stable across runs)."""
    return redact(data.decode("utf-8", errors="replace")).encode("utf-8")


def real_chain(root: Path, *parts: str) -> bool:
    """True when ``root`` and each ``root/parts[:i]`` are real directories (no link on the way)."""
    current = root
    if not real_dir(current):
        return False
    for part in parts:
        current = current / part
        if not real_dir(current):
            return False
    return True


def ensure_dirs(root: Path, *parts: str) -> Path:
    """``root/parts...`` as real directories, creating missing ones; ``root`` itself must exist.

    A symlink or a non-directory anywhere on the way raises :class:`PathError`: the writers
    below never write through a link, whoever planted it.
    """
    st = lstat_or_none(root)
    if st is None:
        raise PathError(root, "does not exist")
    if stat.S_ISLNK(st.st_mode):
        raise PathError(root, "is a symlink; refusing to write through it")
    if not stat.S_ISDIR(st.st_mode):
        raise PathError(root, "is not a directory")
    current = root
    for part in parts:
        current = current / part
        st = lstat_or_none(current)
        if st is None:
            try:
                os.mkdir(current, 0o755)
            except FileExistsError:
                pass
            except OSError as exc:
                raise PathError(
                    current, f"cannot create directory ({exc.strerror or exc})"
                ) from exc
            st = lstat_or_none(current)
        if st is None or stat.S_ISLNK(st.st_mode):
            raise PathError(current, "is a symlink; refusing to write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise PathError(current, "is not a directory")
    return current


def current_bytes(path: Path) -> bytes | None:
    """What a target file holds now, ``None`` when absent or not something we would keep as is."""
    try:
        return read_source(path, limit=None)
    except PathError:
        return None


def write_if_changed(path: Path, data: bytes) -> bool:
    """Atomically write ``data`` unless the file already holds exactly these bytes.

    The parent must already be a real directory (see :func:`ensure_dirs`). A symlink at
    ``path`` is replaced, never written through; a directory there is an error.
    """
    if current_bytes(path) == data:
        return False
    st = lstat_or_none(path)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise PathError(path, "is a directory")
    atomic_write(path, data)
    return True


def remove_entry(path: Path) -> bool:
    """Delete a file, a link (never its target) or a whole folder; False when nothing was there."""
    st = lstat_or_none(path)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return True


def template_bytes(extension: str) -> bytes:
    """The shipped ``templates/extensions/<extension>/instructions.md``."""
    source = templates_dir() / EXTENSIONS_DIR / extension / INSTRUCTIONS
    try:
        return source.read_bytes()
    except OSError as exc:
        raise PathError(
            source, f"cannot read the {extension} instructions template ({exc.strerror or exc})"
        ) from exc


def sync_instructions(ext_dir: Path, extension: str) -> bool:
    """Bring ``ext_dir/instructions.md`` in line with the template; True when it was (re)written.

    Unlike the ad-hoc notes' instructions, these are memoryd's own text describing files
    memoryd produces, so a local edit is put back rather than preserved.
    """
    written = write_if_changed(ext_dir / INSTRUCTIONS, template_bytes(extension))
    if written:
        log.info("extensions: wrote %s", ext_dir / INSTRUCTIONS)
    return written
