"""``memory_read`` and ``memory_list``: look at the memory folder one file or one folder at a time.

Line numbers count ``\\n`` only (not the other characters :meth:`str.splitlines` breaks on), so
they agree with search results, editors and the ``file:start-end`` citations the model writes.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memoryd.errors import InvalidArgument
from memoryd.folder.guard import entries, open_path, servable, split_path
from memoryd.tools.common import Result, check_int
from memoryd.tools.scope import ALL, Scope
from memoryd.tuning import LIST_MAX_RESULTS, READ_MAX_BYTES

_LINE_RE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; a final line without one is still a line."""
    return _LINE_RE.findall(text)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form fits ``max_bytes`` (never half a character)."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class ListEntry:
    path: str
    kind: Literal["d", "f"]
    size: int | None = None

    def line(self) -> str:
        return f"d {self.path}/" if self.kind == "d" else f"f {self.path}"


@dataclass(frozen=True)
class ListResult(Result):
    path: str
    entries: list[ListEntry]
    total: int
    truncated: int = 0

    def to_text(self) -> str:
        if not self.entries:
            return f"{self.path or '.'}: empty"
        lines = [e.line() for e in self.entries]
        if self.truncated:
            lines.append(
                f"[{self.truncated} more entries not shown; list a subfolder or raise max_results]"
            )
        return "\n".join(lines)


@dataclass(frozen=True)
class ReadResult(Result):
    path: str
    kind: Literal["file", "dir"]
    content: str = ""
    start_line: int = 1
    end_line: int = 0
    total_lines: int = 0
    next_line_offset: int | None = None
    capped: bool = False
    line_cut: bool = False
    listing: ListResult | None = field(default=None)

    def to_text(self) -> str:
        if self.kind == "dir":
            assert self.listing is not None
            head = f"{self.path or '.'} is a directory; use memory_list to browse it."
            return f"{head}\n{self.listing.to_text()}"
        parts = []
        if self.start_line != 1:
            parts.append(f"[{self.path}: starting at line {self.start_line} of {self.total_lines}]")
        parts.append(self.content.rstrip("\n") if parts or self.next_line_offset else self.content)
        if self.next_line_offset is not None:
            why = (
                f"output capped at {READ_MAX_BYTES // 1024} KiB"
                if self.capped
                else f"{self.total_lines - self.end_line} more lines"
            )
            cut = f"; line {self.end_line} was cut short" if self.line_cut else ""
            parts.append(f"[{why}{cut}; continue with line_offset={self.next_line_offset}]")
        return "\n".join(parts)


def _listing(node_fd: int, rel: str, max_results: int, scope: Scope = ALL) -> ListResult:
    found: list[ListEntry] = []
    visible = 0
    for name, st in entries(node_fd, at_root=not rel):
        path = f"{rel}/{name}" if rel else name
        if not scope.allows(path):
            continue  # another project's folder: not even its name
        if stat.S_ISDIR(st.st_mode):
            kind: Literal["d", "f"] = "d"
        elif servable(path, st):
            kind = "f"
        else:
            continue  # links, special files, hard links and oversized files are skipped
        visible += 1
        if len(found) < max_results:
            found.append(ListEntry(path, kind, st.st_size if kind == "f" else None))
    return ListResult(path=rel, entries=found, total=visible, truncated=visible - len(found))


def memory_list(
    root: Path, path: str | None = "", max_results: int | None = None, scope: Scope = ALL
) -> ListResult:
    """Immediate entries of a folder in name order, ``d``/``f`` marked; hidden entries and links skipped.

    Entries carry their path from the memory root, ready to pass to :func:`memory_read`. A missing
    memory folder lists as empty (nothing has been remembered yet); a file path is an error.
    """
    limit = check_int(
        "max_results", max_results, low=1, high=LIST_MAX_RESULTS, default=LIST_MAX_RESULTS
    )
    if not split_path(path) and not root.exists() and not root.is_symlink():
        return ListResult(path="", entries=[], total=0)
    with open_path(root, path) as node:
        scope.check(node.rel)
        if node.kind != "dir":
            raise InvalidArgument(f"{node.rel}: is a file; use memory_read to read it")
        return _listing(node.fd, node.rel, limit, scope)


def memory_read(
    root: Path,
    path: str,
    line_offset: int | None = None,
    max_lines: int | None = None,
    scope: Scope = ALL,
) -> ReadResult:
    """A window of a file's lines (1-based ``line_offset``), at most 256 KiB, with a paging hint.

    Whole lines are returned while they fit; a single line longer than the cap is cut on a UTF-8
    boundary and reading resumes at the next line. An offset past the end is an error, so a model
    paging through a file learns it has reached the end instead of getting silence.
    """
    offset = check_int("line_offset", line_offset, low=1, default=1)
    limit = None if max_lines is None else check_int("max_lines", max_lines, low=1)
    with open_path(root, path) as node:
        scope.check(node.rel)
        if node.kind == "dir":
            return ReadResult(
                path=node.rel,
                kind="dir",
                listing=_listing(node.fd, node.rel, LIST_MAX_RESULTS, scope),
            )
        text = decode(node.read())
        rel = node.rel
    lines = split_lines(text)
    total = len(lines)
    if offset > max(total, 1):
        raise InvalidArgument(f"line_offset {offset} is past the end of {rel} ({total} lines)")
    stop = total if limit is None else min(total, offset - 1 + limit)
    out: list[str] = []
    used = 0
    capped = line_cut = False
    for i in range(offset - 1, stop):
        size = len(lines[i].encode("utf-8"))
        if used + size > READ_MAX_BYTES:
            capped = True
            if not out:
                out.append(_cut_utf8(lines[i], READ_MAX_BYTES))
                line_cut = True
            break
        out.append(lines[i])
        used += size
    end = offset - 1 + len(out)
    more = end < total
    if not out and total == 0:
        end = 0
    return ReadResult(
        path=rel,
        kind="file",
        content="".join(out),
        start_line=offset,
        end_line=end,
        total_lines=total,
        next_line_offset=end + 1 if more else None,
        capped=capped,
        line_cut=line_cut,
    )


__all__ = ["ListEntry", "ListResult", "ReadResult", "memory_list", "memory_read"]
