"""Two-way exchange with Codex CLI's own memory folder (``[extensions] codex_import/codex_export``).

Codex consolidates its sessions into ``<codex home>/memories/{MEMORY.md, memory_summary.md}``
(v1), or ``memories_v2/memory_summary.md`` alone (v2; see :func:`codex_memory_root` for which),
the artifacts memoryd produces. The exchange passes those files across, and each side's
consolidator folds the other's into its own memory:

* **Import** (:func:`import_codex`, inside a claimed phase-2 run, before the diff): Codex's two
  files are copied, redacted, to ``extensions/codex_import/resources/codex/`` when their bytes
  differ. A Codex folder that exists but no longer has a file removes our copy of it, and the
  diff turns that into forgetting. A Codex folder we cannot reach changes nothing.
* **Export** (:func:`export_codex`, after a validated phase 2): our two files go to
  ``<codex memories>/extensions/opencode_import/resources/opencode/``, with instructions for
  Codex's consolidator next to them (on a v2 home they ask it to fold them into its summary, the
  only file v2 maintains, never into a ``MEMORY.md``). Only into a Codex memory folder that already exists (we
  never create one) and only when our summary is valid (first line ``v1``). Export failures are
  logged and never fail the run.

**Echo guard.** Without one, a fact would bounce between the two agents forever, each import
looking like new information. The guard lives in the instructions: each side tags what it
learned from the other (``[from codex]`` here, ``[from opencode]`` in Codex) and ignores entries
that carry its own side's tag when they come back.

**Overlap.** If the two memory folders are the same, or one is inside the other, importing would
copy our files into ourselves and exporting would write into our own tree. :func:`roots_overlap`
compares resolved paths and, for the existing ones, device and inode numbers up the parent chain
(which catches case-insensitive aliases and bind mounts); anything it cannot decide counts as an
overlap. Overlapping roots switch both directions off.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from memoryd.errors import MemorydError, PathError
from memoryd.extensions.shared import (
    INSTRUCTIONS,
    RESOURCES,
    ensure_dirs,
    read_source,
    real_chain,
    redacted,
    remove_entry,
    sync_instructions,
    write_if_changed,
)
from memoryd.folder.layout import EXTENSIONS_DIR
from memoryd.fsutil import lstat_or_none, real_dir
from memoryd.settings import Settings
from memoryd.tuning import CODEX_ARTIFACT_MAX_BYTES

log = logging.getLogger(__name__)

IMPORT_EXTENSION = "codex_import"
IMPORT_FOLDER = "codex"
EXPORT_EXTENSION = "opencode_import"  # the folder name inside Codex's extensions/
EXPORT_TEMPLATE = "codex_export"  # our template for it (a legacy home keeps a MEMORY.md)
EXPORT_TEMPLATE_V2 = "codex_export_v2"  # a v2 home: Codex maintains only its summary
EXPORT_FOLDER = "opencode"
MEMORY_FILE = "MEMORY.md"
CODEX_V1_FOLDER = "memories"
CODEX_V2_FOLDER = "memories_v2"  # Codex's memories v2 (no MEMORY.md there, only the summary)
SUMMARY_FILE = "memory_summary.md"
ARTIFACTS: tuple[str, ...] = (MEMORY_FILE, SUMMARY_FILE)
FROM_CODEX = "[from codex]"
FROM_OPENCODE = "[from opencode]"


def codex_home_dir(settings: Settings, environ: dict[str, str] | None = None) -> Path:
    """``[extensions] codex_home``, else ``$CODEX_HOME`` when non-empty, else ``~/.codex``."""
    configured = settings.extensions.codex_home
    if configured:
        return Path(configured).expanduser()
    env = os.environ if environ is None else environ
    value = env.get("CODEX_HOME", "").strip()
    if value:
        return Path(value).expanduser().absolute()
    home = env.get("HOME") or env.get("USERPROFILE")
    return (Path(home) if home else Path.home()) / ".codex"


def codex_memory_root(settings: Settings, environ: dict[str, str] | None = None) -> Path:
    """The Codex memory folder the exchange uses, chosen the way Codex chooses it.

    ``codex_version = "v1"`` is ``memories/``, ``"v2"`` is ``memories_v2/``; unset, a home that
    already has ``memories/`` is a legacy (v1) home and any other is v2. Nothing here creates
    either folder: an empty ``memories/`` would switch a fresh Codex home to legacy.
    """
    home = codex_home_dir(settings, environ)
    version = settings.extensions.codex_version
    if version is None:
        version = "v1" if lstat_or_none(home / CODEX_V1_FOLDER) is not None else "v2"
    return home / (CODEX_V1_FOLDER if version == "v1" else CODEX_V2_FOLDER)


def _resolve(path: Path) -> Path:
    return Path(path).expanduser().resolve()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _inside_by_inode(inner: Path, outer: Path) -> bool:
    """Whether existing ``outer`` is ``inner`` or one of its existing ancestors, by (device, inode)."""
    target = _identity(outer)
    if target is None:
        return False
    return any(_identity(p) == target for p in (inner, *inner.parents))


def roots_overlap(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` are the same folder or one contains the other; True when unsure."""
    try:
        ra, rb = _resolve(a), _resolve(b)
    except (OSError, RuntimeError, ValueError):
        return True
    if ra == rb or ra.is_relative_to(rb) or rb.is_relative_to(ra):
        return True
    return _inside_by_inode(ra, rb) or _inside_by_inode(rb, ra)


def exchange_blocked(
    settings: Settings, memory_root: Path, environ: dict[str, str] | None = None
) -> str | None:
    """Why the Codex exchange must not run (overlapping folders), ``None`` when it may."""
    codex_root = codex_memory_root(settings, environ)
    if roots_overlap(codex_root, memory_root):
        return (
            f"Codex's memory folder {codex_root} overlaps memoryd's memory folder {memory_root}; "
            "the Codex import and export are off"
        )
    return None


def _listable(path: Path) -> bool:
    try:
        with os.scandir(path):
            return True
    except OSError:
        return False


# -- import -------------------------------------------------------------------------------------


def _sync_copies(codex_root: Path, memory_root: Path) -> list[str]:
    """Bring our copies of Codex's artifacts in line; returns the memory-folder relpaths changed."""
    changed: list[str] = []
    parts = (EXTENSIONS_DIR, IMPORT_EXTENSION, RESOURCES, IMPORT_FOLDER)
    dest = memory_root.joinpath(*parts)
    rel = "/".join(parts)
    for name in ARTIFACTS:
        try:
            data = read_source(codex_root / name, limit=CODEX_ARTIFACT_MAX_BYTES)
        except PathError as exc:
            log.warning("codex import: %s; our copy is left as it is", exc)
            continue
        if data is None:
            if real_chain(memory_root, *parts) and remove_entry(dest / name):
                changed.append(f"{rel}/{name}")
                log.info("codex import: Codex no longer has %s; removed our copy", name)
            continue
        ensure_dirs(memory_root, *parts)
        if write_if_changed(dest / name, redacted(data)):
            changed.append(f"{rel}/{name}")
            log.info("codex import: copied Codex's %s", name)
    has_copies = real_chain(memory_root, *parts) and any(
        lstat_or_none(dest / n) is not None for n in ARTIFACTS
    )
    ext_dir = memory_root / EXTENSIONS_DIR / IMPORT_EXTENSION
    if has_copies or lstat_or_none(ext_dir / INSTRUCTIONS) is not None:
        ensure_dirs(memory_root, EXTENSIONS_DIR, IMPORT_EXTENSION)
        if sync_instructions(ext_dir, IMPORT_EXTENSION):
            changed.append(f"{EXTENSIONS_DIR}/{IMPORT_EXTENSION}/{INSTRUCTIONS}")
    return changed


def import_codex(settings: Settings, memory_root: Path) -> bool:
    """Copy Codex's artifacts into ``extensions/codex_import/``; True when the memory folder changed.

    Call it inside a claimed phase-2 run, after the layout and baseline are ready and before the
    diff, so the copies are part of this run's diff. Never raises: problems are logged and leave
    the copies as they were.
    """
    if not settings.extensions.codex_import:
        return False
    blocked = exchange_blocked(settings, memory_root)
    if blocked:
        log.warning("codex import skipped: %s", blocked)
        return False
    codex_root = codex_memory_root(settings)
    try:
        codex_root = _resolve(codex_root)
    except (OSError, RuntimeError, ValueError) as exc:
        log.warning("codex import skipped: cannot resolve %s (%s)", codex_root, exc)
        return False
    if not real_dir(codex_root) or not _listable(codex_root):
        log.info("codex import: %s is not reachable; nothing changed", codex_root)
        return False
    if not real_dir(memory_root):
        log.warning("codex import skipped: memory folder %s is not a real directory", memory_root)
        return False
    try:
        return bool(_sync_copies(codex_root, memory_root))
    except (OSError, MemorydError) as exc:
        log.warning("codex import failed: %s", exc)
        return False


# -- export -------------------------------------------------------------------------------------


def _first_line(data: bytes) -> bytes:
    return data.split(b"\n", 1)[0].removesuffix(b"\r")


def _export(codex_root: Path, memory_root: Path) -> bool:
    summary = read_source(memory_root / SUMMARY_FILE, limit=CODEX_ARTIFACT_MAX_BYTES)
    if summary is None or _first_line(summary) != b"v1":
        log.info(
            "codex export skipped: our %s is missing or does not start with 'v1'", SUMMARY_FILE
        )
        return False
    memory = read_source(memory_root / MEMORY_FILE, limit=CODEX_ARTIFACT_MAX_BYTES)
    if memory is None:
        log.info("codex export skipped: our %s is missing", MEMORY_FILE)
        return False
    dest = ensure_dirs(codex_root, EXTENSIONS_DIR, EXPORT_EXTENSION, RESOURCES, EXPORT_FOLDER)
    changed = False
    for name, data in ((MEMORY_FILE, memory), (SUMMARY_FILE, summary)):
        if write_if_changed(dest / name, redacted(data)):
            changed = True
            log.info("codex export: wrote %s", dest / name)
    # v2 never writes a MEMORY.md: its consolidator is not asked to maintain one
    template = EXPORT_TEMPLATE_V2 if codex_root.name == CODEX_V2_FOLDER else EXPORT_TEMPLATE
    return sync_instructions(codex_root / EXTENSIONS_DIR / EXPORT_EXTENSION, template) or changed


def export_codex(settings: Settings, memory_root: Path) -> bool:
    """Offer our artifacts to Codex's consolidator; True when a file in Codex's folder changed.

    Call it only after a successful, validated phase 2. It writes only into a Codex memory folder
    that already exists, refuses symlinked folders on the way, writes atomically and only when
    bytes differ, and never raises (failures are logged and return False).
    """
    if not settings.extensions.codex_export:
        return False
    try:
        blocked = exchange_blocked(settings, memory_root)
        if blocked:
            log.warning("codex export skipped: %s", blocked)
            return False
        codex_root = _resolve(codex_memory_root(settings))
        if not real_dir(codex_root):
            log.info(
                "codex export skipped: %s does not exist (memoryd never creates it)", codex_root
            )
            return False
        return _export(codex_root, memory_root)
    except Exception as exc:
        log.warning("codex export failed: %s", exc)
        return False
