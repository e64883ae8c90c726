"""The memory folder's file names, and the text memoryd renders into it from the database.

Pure functions of the stage-1 outputs: the same selection always renders the same bytes, so the
baseline diff moves only on real change (see :mod:`memoryd.folder.workspace`, which writes them).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime

from memoryd.clock import iso_ms
from memoryd.store.outputs import Output
from memoryd.tuning import RAW_MEMORY_MAX_CHARS, SLUG_MAX_CHARS

log = logging.getLogger(__name__)

DIFF_FILE = "phase2_workspace_diff.md"
MEMORY_FILE = "MEMORY.md"
SUMMARY_FILE = "memory_summary.md"
RAW_MEMORIES_FILE = "raw_memories.md"
SUMMARIES_DIR = "rollout_summaries"
SKILLS_DIR = "skills"
EXTENSIONS_DIR = "extensions"
AD_HOC_INSTRUCTIONS = "extensions/ad_hoc/instructions.md"
AD_HOC_NOTES = "extensions/ad_hoc/notes"
SUMMARY_VERSION = b"v1"
# The global summary's sections, in this order (templates/consolidation.md names the same ones).
SUMMARY_HEADINGS: tuple[str, ...] = (
    "## User profile",
    "## Preferences",
    "## General tips",
    "## What is in memory",
)
PROJECT_FILE = "project.md"
PROJECT_NOTES = "notes"

_BASE62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_HASH_CHARS = 4
STAMP_FORMAT = "%Y-%m-%dT%H-%M-%S"
_STAMP_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def sanitize_slug(slug: str | None) -> str:
    """ASCII letters and digits lowercased, anything else ``_``; at most 60 chars, no trailing ``_``."""
    if not slug:
        return ""
    chars = (c.lower() if c.isascii() and c.isalnum() else "_" for c in slug)
    return "".join(chars)[:SLUG_MAX_CHARS].rstrip("_")


def _id_hash(session_id: str) -> str:
    """Four base-62 chars from sha256 of the id: short, stable across runs and Python versions."""
    n = (
        int.from_bytes(hashlib.sha256(session_id.encode("utf-8")).digest()[:8], "big")
        % len(_BASE62) ** _HASH_CHARS
    )
    out = []
    for _ in range(_HASH_CHARS):
        n, r = divmod(n, len(_BASE62))
        out.append(_BASE62[r])
    return "".join(reversed(out))


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime(STAMP_FORMAT)


def rollout_stem(output: Output) -> str:
    """File stem of an output's rollout summary: ``<UTC time>-<id hash>[-<slug>]``.

    Built only from (session_id, source_updated_at, slug), so it is stable across runs, and made
    only of ``[0-9A-Za-z_T-]``, so it can never name a path outside ``rollout_summaries/``.
    """
    stem = f"{_stamp(output.source_updated_at)}-{_id_hash(output.session_id)}"
    slug = sanitize_slug(output.rollout_slug)
    return f"{stem}-{slug}" if slug else stem


def assign_stems(outputs: Iterable[Output]) -> dict[str, str]:
    """Stems per session id, made unique: a (very unlikely) clash gets ``-2``, ``-3``… in id order."""
    stems: dict[str, str] = {}
    used: set[str] = set()
    for out in sorted(outputs, key=lambda o: o.session_id):
        if out.session_id in stems:
            raise ValueError(f"session {out.session_id!r} is selected twice")
        base = candidate = rollout_stem(out)
        n = 1
        while candidate in used:
            n += 1
            candidate = f"{base}-{n}"
        if candidate != base:
            log.warning(
                "rollout summary stem %s clashes; using %s for %s", base, candidate, out.session_id
            )
        used.add(candidate)
        stems[out.session_id] = candidate
    return stems


def _one_line(value: str | None) -> str:
    """Header values stay on one line so a title cannot forge headings or header lines."""
    if value is None:
        return "(none)"
    text = _CONTROL.sub(" ", value).strip()
    return text or "(none)"


def _header(output: Output) -> list[str]:
    return [
        f"updated_at: {iso_ms(output.source_updated_at)}",
        f"cwd: {_one_line(output.cwd)}",
        f"title: {_one_line(output.title)}",
    ]


def _capped_raw_memory(text: str) -> str:
    body = text.strip()
    if not body:
        return "(no raw memory)"
    if len(body) <= RAW_MEMORY_MAX_CHARS:
        return body
    cut = body[:RAW_MEMORY_MAX_CHARS].rstrip()
    return f"{cut}\n\n[raw memory cut at {RAW_MEMORY_MAX_CHARS} of {len(body)} characters]"


def render_raw_memories(outputs: Iterable[Output], stems: dict[str, str] | None = None) -> str:
    """``raw_memories.md``: every selected output, ordered by session id so usage churn never reorders it."""
    ordered = sorted(outputs, key=lambda o: o.session_id)
    if stems is None:
        stems = assign_stems(ordered)
    lines = ["# Raw memories", ""]
    if not ordered:
        lines.append("No session has been selected for consolidation yet.")
        return "\n".join(lines) + "\n"
    lines += [
        "One entry per session selected for consolidation, in ascending session-id order. Each entry",
        f"names its longer summary under `{SUMMARIES_DIR}/`.",
    ]
    for out in ordered:
        lines += ["", f"## Session `{_one_line(out.session_id)}`", ""]
        lines += _header(out)
        lines.append(f"rollout_summary_file: {stems[out.session_id]}.md")
        lines += ["", _capped_raw_memory(out.raw_memory)]
    return "\n".join(lines) + "\n"


def render_rollout_summary(output: Output) -> str:
    """One ``rollout_summaries/<stem>.md``: header lines, a blank line, the summary (no usage counts)."""
    lines = [f"session_id: {_one_line(output.session_id)}", *_header(output), ""]
    lines.append(output.rollout_summary.strip() or "(no summary)")
    return "\n".join(lines) + "\n"


def render_project_file(key: str, root: str, outputs: Iterable[Output]) -> str:
    """``projects/<key>/project.md``: which checkout this is, and which sessions feed it."""
    ordered = sorted(outputs, key=lambda o: o.session_id)
    ids = sorted({o.project_id for o in ordered if o.project_id})
    lines = [
        f"# Project {key}",
        "",
        f"worktree: {_one_line(root)}",
        f"opencode_project: {_one_line(ids[0] if len(ids) == 1 else ', '.join(ids) or None)}",
        f"sessions: {len(ordered)}",
        "",
        "Memory written in this folder is shown only to sessions in this worktree.",
    ]
    return "\n".join(lines) + "\n"


def path_parts(relpath: str) -> list[str]:
    return [p for p in relpath.strip("/").split("/") if p]


def is_tracked(relpath: str) -> bool:
    """Whether the baseline tracks a path: not the transient diff file, nothing dot-prefixed.

    Called for every entry of every baseline walk (4,096 summaries: ~20,000 calls a diff), so
    a clean relative path is judged by three string tests; anything else is normalised first."""
    if not relpath or relpath[0] == "/" or relpath[-1] == "/" or "//" in relpath:
        relpath = "/".join(path_parts(relpath))
        if not relpath:
            return False
    return relpath != DIFF_FILE and relpath[0] != "." and "/." not in relpath
