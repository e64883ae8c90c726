"""The read path: the memory block the opencode shim injects into every turn of the user's agent.

memoryd renders ``templates/read_path.md`` (how to use the memory folder, how to cite it) with the
last *validated* ``memory_summary.md`` (:mod:`memoryd.folder.validated`, never the live folder file a
consolidation may be editing or may have left invalid) and keeps the result in
:attr:`Paths.readpath_block`. The
shim only has to read that one file; everything that costs (tokenizing, truncating) happens here,
in the daemon, and only when an input really changed.

Rules for the block:

* **Budget.** The *whole* rendered block, instructions and summary, stays within
  :data:`BLOCK_TOKEN_BUDGET` tokens (:func:`memoryd.tokenizer.count`). The instruction overhead is
  measured by rendering with an empty summary (and the real fence lines, token included); the
  summary gets what is left and is cut out of the middle (:func:`memoryd.tokenizer.truncate_middle`),
  so both its head (profile, preferences) and its tail (the newest index lines) survive. Token
  counts of concatenated text are not strictly additive, so the result is re-checked and the
  summary share shrunk until the block fits.
* **No block** when the summary is absent, blank, not a plain file (a symlink, a hard link, a
  FIFO…), over its cap, or when the memory folder itself is a symlink. memoryd never follows
  links in the memory folder.
* **The ``v1`` line is dropped.** The consolidator must start the summary with a line that is
  exactly ``v1`` (a format marker memoryd checks after phase 2). It tells the user's agent nothing
  and would cost tokens on every request, so the first line is removed when it is exactly ``v1``
  (a trailing ``\\r`` tolerated); a summary without it is shown as is. Leading and trailing blank
  space is trimmed too. Line numbers in citations come from the agent's own read/grep of the file,
  never from the injected copy, so the shift does not matter.
* **Reference notes, fenced.** The summaries sit between the template's begin/end lines, which
  carry this install's fence token; summary text is normalised, loses the token and every line
  that could pass for a fence line (:mod:`memoryd.read.fence`), so no text in it can close the
  fence and continue outside it as if memoryd had written it.
* **Bounded, plain files.** A summary is read through
  :func:`memoryd.folder.audit.read_memory_file`: one over its cap, hard-linked or not regular
  gives no text, before anything is read or tokenized.
* **Deterministic.** The same summary bytes, memory folder and template give the same block bytes.

:func:`sync_block` is called after every phase 2 and on every daemon tick (to pick up hand edits
of the summary). Its no-change path must be nearly free, so it keeps a sidecar stamp
(``block.md.stamp``, JSON) recording the ``lstat`` of the summary, of the memory folder and of the
template, the inputs hash (the fence token included, read once per process), and the ``lstat``
of the block it wrote. When all of them still match, nothing is read or tokenized. When any
differs the block is rendered again, but the file is only rewritten when its bytes change, so its
mtime moves only on a real change (the shim can key a cache on it); it is written mode 0600,
since it carries the fence token. The "no block" state is stamped as well. :mod:`memoryd.prompts`
caches template text per process, so the template's entry in the stamp matters across restarts
(an upgrade re-renders even though the summary did not move), not within one run.

Racy stamps: a file rewritten in place within one timestamp tick, keeping its size and inode,
would look unchanged. Like git's racy-index rule, metadata alone is not trusted while a summary's
mtime is younger than :data:`RACY_WINDOW_NS`: such a stamp also holds a hash of the summaries'
bytes, taken before rendering, and the next tick compares the files' bytes to it instead of
rendering again (rendering means tokenizing, a helper process). Once the files have settled the
stamp is saved without the hash.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from memoryd import prompts
from memoryd import tokenizer as tokens
from memoryd.errors import PathError
from memoryd.folder.audit import read_memory_file
from memoryd.folder.layout import SUMMARY_FILE
from memoryd.folder.validated import ValidatedMemory
from memoryd.fsutil import atomic_write, read_json_quiet, read_regular
from memoryd.paths import Paths, templates_dir
from memoryd.read import fence
from memoryd.redact import redact
from memoryd.scopes import PROJECTS_DIR, is_scope_key
from memoryd.settings import Settings
from memoryd.tuning import BLOCK_TOKEN_BUDGET, RACY_WINDOW_NS

__all__ = [
    "SUMMARY_BEGIN",
    "SUMMARY_END",
    "TEMPLATE",
    "render_block",
    "stamp_path",
    "summary_token_budget",
    "sync_block",
]

log = logging.getLogger(__name__)

TEMPLATE = "read_path.md"
VERSION_LINE = "v1"
SUMMARY_BEGIN = fence.BEGIN_LINE  # "{token}" is this install's fence token
SUMMARY_END = fence.END_LINE
PROJECT_HEADING = "## This project (other projects' folders are not yours): projects/"
NO_GLOBAL = "(nothing that holds across projects yet)"

# Bump when the rendering rules change, so stamps written by an older memoryd are not trusted.
STAMP_VERSION = 4
_MAX_FIT_ROUNDS = 8


# --- rendering -----------------------------------------------------------------------------------


def _root_ok(root: Path) -> bool:
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        log.warning("memory folder %s is a symlink; no memory block", root)
        return False
    return stat.S_ISDIR(st.st_mode)


T = TypeVar("T")
_SYNC = threading.local()


@contextmanager
def _one_sync() -> Iterator[None]:
    """Within one :func:`sync_block`, every block shows the same global summary: it is read,
    redacted, counted and cut once, not once per project (a redaction and tokenizer round trips
    each). Nothing outlives the call; racing edits are caught by the stamp, as before."""
    _SYNC.memo = {}
    try:
        yield
    finally:
        _SYNC.memo = None


def _once(key: tuple[Any, ...], make: Callable[[], T]) -> T:
    memo: dict[tuple[Any, ...], Any] | None = getattr(_SYNC, "memo", None)
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]  # type: ignore[no-any-return]


def _count(text: str) -> int:
    return _once(("count", text), lambda: tokens.count(text))


def _summary_text(root: Path, rel: str, token: str) -> str | None:
    """The summary as the agent should see it, or ``None`` when there is nothing to show."""
    return _once(("summary", str(root), rel, token), lambda: _read_summary(root, rel, token))


def _read_summary(root: Path, rel: str, token: str) -> str | None:
    try:
        data = read_memory_file(root, rel)  # no link, no FIFO, nothing over its cap
    except PathError as exc:
        log.warning("no memory summary shown: %s", exc)
        return None
    if data is None:
        return None
    text = data.decode("utf-8", errors="replace")
    first, sep, rest = text.partition("\n")
    if first.rstrip("\r") == VERSION_LINE:
        text = rest if sep else ""
    # Hand edits and model output alike: nothing secret is injected, nothing forges the fence.
    text = fence.neutralise(redact(fence.normalise(text)), token).strip()
    return text or None


def _project_summary(root: Path, key: str, token: str) -> str | None:
    """A project's validated layer (``root`` is the validated copy), only from real folders."""
    folder = root / PROJECTS_DIR / key
    try:
        if not stat.S_ISDIR(os.lstat(root / PROJECTS_DIR).st_mode):
            return None
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None
    except (FileNotFoundError, NotADirectoryError):
        return None
    return _summary_text(root, f"{PROJECTS_DIR}/{key}/{SUMMARY_FILE}", token)


def _project_section(key: str, text: str) -> str:
    """The project's layer, after the global one inside the summary markers: one heading line is
    all it adds, so a scoped block costs no more than one summary holding the same text."""
    return f"\n\n{PROJECT_HEADING}{key}/\n{text}"


def _render(base_path: str, token: str, summary: str, project: str = "") -> str:
    return prompts.render(
        TEMPLATE,
        base_path=base_path,
        fence_token=token,
        memory_summary=summary,
        project_memory=project,
    )


def summary_token_budget(paths: Paths) -> int:
    """Tokens left for the summaries once the instructions are paid for (for phase 2's prompt).

    The global summary and a project's summary share this budget in one block; the consolidator
    is told the figure and that the two together should stay within it.
    """
    overhead = tokens.count(_render(str(paths.memories), fence.fence_token(paths), ""))
    return max(BLOCK_TOKEN_BUDGET - overhead, 0)


def _split(global_tokens: int, project_tokens: int, budget: int) -> tuple[int, int]:
    """Share ``budget`` between the two layers: each gets half, and what one leaves the other may use."""
    if global_tokens + project_tokens <= budget:
        return global_tokens, project_tokens
    half = budget // 2
    if global_tokens <= half:
        return global_tokens, budget - global_tokens
    if project_tokens <= half:
        return budget - project_tokens, project_tokens
    return half, budget - half


def render_block(paths: Paths, key: str | None = None) -> str | None:
    """The block for the global summary (and project ``key``'s, if it has one), within
    :data:`BLOCK_TOKEN_BUDGET`; ``None`` when there is nothing to show.

    A key without a project layer gets exactly the global-only block, byte for byte.
    """
    root = paths.memories
    if not _root_ok(root):
        return None
    validated = ValidatedMemory(paths)
    token = fence.fence_token(paths)
    summary = _summary_text(validated.root, SUMMARY_FILE, token)
    project = _project_summary(validated.root, key, token) if key else None
    if summary is None and project is None:
        return None
    base = str(root)
    shown = summary if summary is not None else NO_GLOBAL
    wrapper = _project_section(key, "") if key and project is not None else ""
    budget = BLOCK_TOKEN_BUDGET - _count(_render(base, token, "", wrapper))
    if budget <= 0:
        log.warning(
            "read-path instructions alone exceed %d tokens; no memory block", BLOCK_TOKEN_BUDGET
        )
        return None
    g_tokens = _count(shown)
    p_tokens = _count(project) if project is not None else 0

    def cut(text: str, share: int, whole: int) -> str:
        if share >= whole:  # it fits as counted: truncating would hand back the same text
            return fence.neutralise(text, token)
        # A cut can start a line half way through one: judge the lines it leaves again.
        cut_text = _once(("cut", text, share), lambda: tokens.truncate_middle(text, share))
        return fence.neutralise(cut_text, token)

    def build(total: int) -> str:
        g_share, p_share = _split(g_tokens, p_tokens, total)
        text = cut(shown, g_share, g_tokens)
        if key and project is not None:
            section = _project_section(key, cut(project, p_share, p_tokens))
            return _render(base, token, text, section)
        return _render(base, token, text)

    block = build(budget)
    for _ in range(_MAX_FIT_ROUNDS):
        excess = _count(block) - BLOCK_TOKEN_BUDGET
        if excess <= 0:
            return block
        # Tokens merge across the seams (and a cut may split a multi-byte character), so the
        # parts can count a little more than they did alone; shrink the summary share and retry.
        budget -= excess
        if budget <= 0:
            break
        block = build(budget)
    log.warning(
        "could not fit the memory summary into %d tokens; no memory block", BLOCK_TOKEN_BUDGET
    )
    return None


# --- the block file and its stamp ----------------------------------------------------------------


def stamp_path(paths: Paths) -> Path:
    block = paths.readpath_block
    return block.with_name(block.name + ".stamp")


def _lstat_sig(path: Path) -> list[int] | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return [st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _inputs_hash(paths: Paths, settings: Settings) -> str:
    """Everything besides file metadata that shapes the block."""
    material = {
        "stamp_version": STAMP_VERSION,
        "budget": BLOCK_TOKEN_BUDGET,
        "encoding": tokens.ENCODING,
        "base_path": str(paths.memories),
        "use_memories": settings.use_memories,
        "template_path": str(templates_dir() / TEMPLATE),
        "fence": fence.fence_token(paths),  # cached: no file read on the no-change path
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


def _keys_in(folder: Path, suffix: str = "") -> set[str]:
    """Key-shaped names in ``folder`` (with ``suffix`` removed); links and junk are ignored."""
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if not e.is_symlink()]
    except (FileNotFoundError, NotADirectoryError):
        return set()
    return {
        n.removesuffix(suffix)
        for n in names
        if n.endswith(suffix) and is_scope_key(n.removesuffix(suffix))
    }


def known_keys(paths: Paths) -> list[str]:
    """Projects that get a block file: those with a layer, those a shim announced, those with a block.

    Every one of them is rendered, with or without a project layer, so the shim's single ``stat``
    of its own project's file always sees the current block.
    """
    keys = _keys_in(paths.memories / PROJECTS_DIR)
    keys |= _keys_in(ValidatedMemory(paths).root / PROJECTS_DIR)
    keys |= _keys_in(paths.readpath_seen)
    keys |= _keys_in(paths.readpath_projects, ".md")
    return sorted(keys)


def project_block_path(paths: Paths, key: str) -> Path:
    return paths.readpath_projects / f"{key}.md"


def _input_stamp(paths: Paths, settings: Settings) -> dict[str, Any]:
    root = paths.memories
    layers = ValidatedMemory(paths).root / PROJECTS_DIR  # the read path shows validated layers only
    keys = known_keys(paths)
    return {
        "inputs": _inputs_hash(paths, settings),
        "root": _lstat_sig(root),
        "summary": _lstat_sig(ValidatedMemory(paths).summary_path),
        "template": _lstat_sig(templates_dir() / TEMPLATE),
        "projects_dir": _lstat_sig(root / PROJECTS_DIR),
        "layers_dir": _lstat_sig(layers),
        "seen_dir": _lstat_sig(paths.readpath_seen),
        "projects": {
            k: [_lstat_sig(layers / k), _lstat_sig(layers / k / SUMMARY_FILE)] for k in keys
        },
    }


def _block_sigs(paths: Paths, keys: list[str]) -> dict[str, Any]:
    sigs: dict[str, Any] = {"": _lstat_sig(paths.readpath_block)}
    sigs.update({k: _lstat_sig(project_block_path(paths, k)) for k in keys})
    return sigs


def _load_stamp(path: Path) -> dict[str, Any] | None:
    loaded = read_json_quiet(path)
    return loaded if isinstance(loaded, dict) else None


def _remove(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        # Linux says EISDIR for a directory, macOS says EPERM.
        problem = "is a directory" if path.is_dir() else f"cannot remove ({exc.strerror or exc})"
        raise PathError(path, problem) from exc
    return True


def _current_bytes(path: Path) -> bytes | None:
    try:
        return read_regular(path)
    except PathError:
        return None  # a link or a non-file there is replaced by atomic_write


def _put(target: Path, block: str | None, paths: Paths, *, keep: bool = False) -> bool:
    """Write ``block``; with none, remove the file, or empty it when ``keep`` (a project's file:
    a shim that finds it missing would fall back to the global block it read at load)."""
    if block is None and not keep:
        return _remove(target)
    block = block or ""
    paths.ensure_dir(target.parent)
    data = block.encode("utf-8")
    if _current_bytes(target) == data:
        return False
    atomic_write(target, data, mode=0o600)  # it carries the fence token
    return True


def sync_block(paths: Paths, settings: Settings) -> bool:
    """Bring every block file up to date; return whether any changed (written or removed).

    ``block.md`` is the global-only block (the shim's fallback for a folder it has no file for
    yet); ``projects/<key>.md`` is the block of one project (global plus its layer). With
    ``use_memories`` off, or no block to show, the files are removed. Otherwise each is written
    atomically, and only when its bytes differ. Raises :class:`PathError` when the block's folder
    cannot be created or written (a symlink there, say).
    """
    target = paths.readpath_block
    sidecar = stamp_path(paths)
    if not settings.use_memories:
        removed = _remove(target)
        for key in _keys_in(paths.readpath_projects, ".md"):
            removed = _put(project_block_path(paths, key), None, paths, keep=True) or removed
        _remove(sidecar)
        return removed

    inputs = _input_stamp(paths, settings)
    keys = sorted(inputs["projects"])
    saved = _load_stamp(sidecar)
    if (
        saved is not None
        and saved.get("v") == STAMP_VERSION
        and {k: saved.get(k) for k in inputs} == inputs
        and saved.get("block") == _block_sigs(paths, keys)
    ):
        if "content" not in saved:
            return False
        if saved["content"] == _content_hash(paths, keys):  # racy stamp: the bytes decide
            if not _racy(inputs):
                _save_stamp(sidecar, paths, inputs, keys, None)
            return False

    content = _content_hash(paths, keys) if _racy(inputs) else None  # before rendering
    with _one_sync():
        changed = _put(target, render_block(paths), paths)
        for key in keys:
            block = render_block(paths, key)
            changed = _put(project_block_path(paths, key), block, paths, keep=True) or changed

    if _input_stamp(paths, settings) != inputs:
        _remove(sidecar)  # it changed while we rendered: check again next time
    else:
        _save_stamp(sidecar, paths, inputs, keys, content if _racy(inputs) else None)
    return changed


def _racy(inputs: dict[str, Any]) -> bool:
    """Whether a summary is too fresh for its metadata to prove it unchanged."""
    sigs = [inputs["summary"]] + [v[1] for v in inputs["projects"].values()]
    now = time.time_ns()
    return any(sig is not None and now - sig[4] < RACY_WINDOW_NS for sig in sigs)


def _content_hash(paths: Paths, keys: list[str]) -> str:
    """The bytes of every summary the blocks are rendered from."""
    root = ValidatedMemory(paths).root
    digest = hashlib.sha256()
    rels = [SUMMARY_FILE] + [f"{PROJECTS_DIR}/{k}/{SUMMARY_FILE}" for k in keys]
    for rel in rels:
        try:
            data = read_memory_file(root, rel)
        except PathError:
            data = None
        digest.update(b"-" if data is None else b"%d:" % len(data) + data)
    return digest.hexdigest()


def _save_stamp(
    sidecar: Path, paths: Paths, inputs: dict[str, Any], keys: list[str], content: str | None
) -> None:
    stamp = {"v": STAMP_VERSION, **inputs, "block": _block_sigs(paths, keys)}
    if content is not None:
        stamp["content"] = content
    encoded = json.dumps(stamp, sort_keys=True).encode("utf-8")
    if _current_bytes(sidecar) != encoded:
        paths.ensure_dir(sidecar.parent)
        atomic_write(sidecar, encoded)
