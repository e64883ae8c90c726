"""Does a host tool call name the memory folder? The evidence an agent edit is judged by.

memoryd cannot see which process wrote a file, but opencode keeps what each session's tools were
asked to do. A tool call is taken as the writer of a change when its input names the memory
folder or one of its files: an absolute path, a path relative to the session's folder or to a
``cd``/``pushd`` in the same command, a ``~`` or ``$HOME`` form, a glob that matches a changed
file, a patch header (``*** Update File:``, ``+++ b/…``), the ``patch`` part's ``files``, or (in a
shell command, where a path may be put together at run time) the bare name of a changed summary. Any tool that can write counts, and a session that runs inside
the folder names it with every such call.

The rules lean one way on purpose: a false match costs the user one accept, a missed one lets a
web page write the memory every turn is shown. Text built at run time (``base64 -d | sh``, paths
assembled from variables the command sets) is out of reach; that limit is documented.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryd.tuning import EDIT_SCAN_MAX_CHARS

# Tools that cannot change a file (opencode's built-ins and memoryd's own shim tools).
READ_ONLY_TOOLS = frozenset(
    {
        "read",
        "glob",
        "grep",
        "list",
        "webfetch",
        "websearch",
        "codesearch",
        "todoread",
        "todowrite",
        "question",
        "skill",
        "memory_search",
        "memory_read",
        "memory_note",
    }
)
# Tools whose input holds a file path and the new text: only the path says where they write.
FILE_TOOLS = frozenset({"write", "edit", "multiedit"})
# Tools whose paths opencode resolves against the session's folder: what they name is exact.
EXACT_TOOLS = FILE_TOOLS | {"patch", "apply_patch"}
PATH_KEYS = frozenset({"filePath", "file_path", "path", "filename", "file"})
DIR_KEYS = frozenset({"workdir", "cwd", "directory"})
# Names distinctive enough that naming one is naming the memory (when that file changed).
DISTINCT_NAMES = frozenset({"memory_summary.md", "MEMORY.md"})

_WORD = re.compile(r"""[^\s'"`;|&<>(),]+""")
_QUOTED = re.compile(r"""'([^'\n]*)'|"([^"\n]*)\"""")
_CD = re.compile(
    r"""(?:^|[;&|(\n{]|\bthen\b|\bdo\b)\s*(?:cd|pushd)\s+(?:-[LP]\s+)?(?:--\s+)?"""
    r"""("[^"\n]*"|'[^'\n]*'|[^\s;&|)]+)"""
)
_PATCH_HEADER = re.compile(
    r"^(?:\*\*\* (?:Add|Update|Delete) File:|\*\*\* Move to:|\+\+\+|---)[ \t]+(.+?)[ \t]*$", re.M
)
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Folder:
    """The memory folder as a tool input may spell it, and the files that changed in it."""

    roots: tuple[str, ...]  # its absolute path and, when different, the resolved one
    changed: tuple[str, ...]  # relpaths (``/``-separated) that differ from the validated copy
    home: str

    @classmethod
    def of(cls, root: Path, changed: Iterable[str], home: str | None = None) -> Folder:
        absolute = os.path.normpath(os.path.abspath(root))
        real = os.path.realpath(absolute)
        roots = (absolute,) if real == absolute else (absolute, real)
        return cls(roots, tuple(sorted(changed)), home or os.path.expanduser("~"))

    def holds(self, path: str) -> bool:
        return any(path == r or path.startswith(r + "/") for r in self.roots)

    def holds_resolved(self, path: str) -> bool:
        return self.holds(path) or self.holds(os.path.realpath(path))


def strings(value: Any, depth: int = 0) -> Iterator[str]:
    """Every string leaf of a JSON value (bounded depth: inputs are untrusted)."""
    if depth > 8:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v, depth + 1)


def _keyed(value: Any, keys: frozenset[str], depth: int = 0) -> Iterator[str]:
    """String values stored under one of ``keys``, at any depth (``multiedit``'s edits too)."""
    if depth > 8:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if k in keys and isinstance(v, str):
                yield v
            else:
                yield from _keyed(v, keys, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _keyed(v, keys, depth + 1)


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    return token


def expand(token: str, home: str) -> str:
    """``~``, ``$HOME`` and other variables as memoryd's own environment has them."""
    if token == "~" or token.startswith("~/"):
        token = home + token[1:]
    token = token.replace("${HOME}", home).replace("$HOME", home)
    return os.path.expandvars(token) if "$" in token else token


def _words(text: str) -> set[str]:
    """Path-like pieces of a command or patch: words, quoted strings, ``k=v`` values, headers."""
    out: set[str] = set()
    for m in _QUOTED.finditer(text):
        out.add(m.group(1) if m.group(1) is not None else m.group(2))
    for word in _WORD.findall(text):
        out.add(word)
        if "=" in word:
            out.update(p for p in word.split("=") if p)
    for m in _PATCH_HEADER.finditer(text):
        name = m.group(1).split("\t", 1)[0]
        out.add(name)
        if name.startswith(("a/", "b/")):
            out.add(name[2:])
    return {w for w in out if w and "://" not in w}


def _resolve(token: str, bases: list[str], home: str) -> list[str]:
    path = expand(token, home)
    if os.path.isabs(path):
        return [os.path.normpath(path)]
    return [os.path.normpath(os.path.join(b, path)) for b in bases]


def _directories(texts: list[str], cwds: list[str], dirs: list[str], home: str) -> list[str]:
    """Where relative names may resolve: the session's folders, a ``workdir``, every ``cd``."""
    bases = [os.path.normpath(c) for c in cwds if c and os.path.isabs(c)]
    for d in dirs:
        bases += _resolve(d, list(bases), home)
    for text in texts:
        for m in _CD.finditer(text):
            bases += _resolve(_unquote(m.group(1)), list(bases), home)
    bases += [os.path.realpath(b) for b in bases]
    return list(dict.fromkeys(bases))


def _names_file(token: str, folder: Folder) -> str | None:
    """A token spelling a changed file's relpath, or the bare name of a changed summary."""
    base = token.rstrip("/").rsplit("/", 1)[-1]
    for rel in folder.changed:
        if token == rel or token.endswith("/" + rel):
            return rel
        if base in DISTINCT_NAMES and base == rel.rsplit("/", 1)[-1]:
            return rel
    return None


def _judge_token(token: str, bases: list[str], folder: Folder, *, exact: bool) -> str | None:
    """Why ``token`` names the folder; ``exact`` tools (file and patch tools) resolve their paths
    against the session's folder themselves, so a bare name elsewhere is just elsewhere."""
    spelled = expand(token, folder.home)
    absolute = os.path.isabs(spelled)
    for target in _resolve(token, bases, folder.home):
        if _GLOB.search(target):
            for rel in folder.changed:
                for root in folder.roots:
                    if fnmatch.fnmatchcase(f"{root}/{rel}", target):
                        return f"a pattern matching {rel} ({token})"
        elif folder.holds(target) or (absolute and folder.holds_resolved(target)):
            return f"names {target}"
    if absolute or exact:
        return None  # an explicit path elsewhere: not ours, whatever its name
    named = _names_file(spelled, folder)
    return f"names {named} ({token})" if named is not None else None


def names_folder(tool: str, tool_input: Any, cwds: list[str], folder: Folder) -> str | None:
    """Why this tool call names the memory folder, or ``None`` when it does not."""
    if tool in READ_ONLY_TOOLS:
        return None
    dirs = list(_keyed(tool_input, DIR_KEYS))
    if tool in FILE_TOOLS:
        texts = list(_keyed(tool_input, PATH_KEYS))
    else:
        texts = [s for s in strings(tool_input) if s not in dirs]
    huge = max((len(t) for t in [*texts, *dirs]), default=0)
    if huge > EDIT_SCAN_MAX_CHARS:
        return f"an input too large to read through ({huge:,} characters)"  # fails closed
    bases = _directories(texts, cwds, dirs, folder.home)
    for base in bases:
        if folder.holds(base):
            return f"works in the memory folder ({base})"
    for text in texts:
        words = {text} if tool in FILE_TOOLS else _words(text)
        for token in sorted(words):
            reason = _judge_token(token, bases, folder, exact=tool in EXACT_TOOLS)
            if reason is not None:
                return reason
    return None


def patch_names_folder(files: Any, folder: Folder) -> str | None:
    """The ``patch`` part's ``files`` (absolute paths opencode saw change in a step)."""
    if not isinstance(files, list):
        return None
    for f in files:
        if isinstance(f, str) and os.path.isabs(f) and folder.holds_resolved(os.path.normpath(f)):
            return f"changed {f}"
    return None
