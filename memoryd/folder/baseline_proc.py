"""The git baseline, in the daemon, behind a process boundary: dulwich never enters its heap.

A consolidation loads dulwich and the baseline code (~4 MB) into whatever process runs it, and
Python never unloads a module, so a daemon that had consolidated once idled ~4 MB larger for
good. :func:`open_baseline` gives the daemon a :class:`ChildBaseline`: the same four calls,
answered by :mod:`memoryd.folder.baseline` in a child process (:mod:`memoryd.child`) that starts
on first use and ends with the pass (:func:`release`). A one-shot command (``run --once``, the
CLI, tests) gets the in-process :class:`~memoryd.folder.baseline.Baseline`: it exits soon anyway,
and a child would only add its start-up to the pass.

Requests: ``["ensure" | "diff" | "head_files", git_dir, worktree]`` and
``["reset", git_dir, worktree, hold]``; bytes travel as base64. The child's
:class:`~memoryd.errors.BaselineError` comes back as the same error with the same message.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memoryd.child import Child, serve
from memoryd.errors import BaselineError
from memoryd.folder.layout import is_tracked
from memoryd.folder.linediff import Change, WorkspaceDiff
from memoryd.tuning import BASELINE_CHILD_TIMEOUT_S

if TYPE_CHECKING:
    from memoryd.folder.baseline import Baseline

HELPER = "memoryd baseline helper"

Hold = dict[str, tuple[bool, bytes] | None]


class BaselineLike(Protocol):
    """What phase 2, review and rollback ask of the baseline, in this process or the child."""

    def ensure(self) -> bool: ...

    def diff(self) -> WorkspaceDiff: ...

    def reset(self, hold: Hold | None = None) -> None: ...

    def head_files(self) -> dict[str, bytes]: ...


_out_of_process = False
_child = Child(
    "memoryd.folder.baseline_proc", HELPER, BaselineError, lambda: BASELINE_CHILD_TIMEOUT_S
)


def keep_out_of_process(enabled: bool = True) -> None:
    """The daemon calls this once: from then on every baseline runs in the child."""
    global _out_of_process
    _out_of_process = enabled


def open_baseline(git_dir: Path, worktree: Path) -> BaselineLike:
    """The memory folder's baseline (anything memoryd does not track is left out of it)."""
    if _out_of_process:
        return ChildBaseline(git_dir, worktree)
    return _in_process(git_dir, worktree)


def release(*, wait: bool = True) -> bool:
    """End the child until the next use; whether it was ended. ``wait=False`` leaves a child
    that another thread is using (a review accepted in the web UI) for the next release."""
    return _child.close(wait=wait)


def helper_pid() -> int | None:
    return _child.pid()


class ChildBaseline:
    """:class:`~memoryd.folder.baseline.Baseline`'s calls, answered by the child."""

    def __init__(self, git_dir: Path, worktree: Path) -> None:
        self._where = [str(Path(git_dir).absolute()), str(Path(worktree).absolute())]

    def ensure(self) -> bool:
        return bool(_child.call(["ensure", *self._where]))

    def diff(self) -> WorkspaceDiff:
        got = _child.call(["diff", *self._where])
        return WorkspaceDiff([Change(s, p) for s, p in got["changes"]], got["patch"])

    def reset(self, hold: Hold | None = None) -> None:
        _child.call(["reset", *self._where, _encode_hold(hold)])

    def head_files(self) -> dict[str, bytes]:
        got = _child.call(["head_files", *self._where])
        return {rel: base64.b64decode(data) for rel, data in got.items()}


def _in_process(git_dir: Path, worktree: Path) -> Baseline:
    from memoryd.folder.baseline import Baseline  # dulwich only when a baseline is needed

    return Baseline(git_dir, worktree, exclude=lambda p: not is_tracked(p))


def _encode_hold(hold: Hold | None) -> dict[str, Any] | None:
    if hold is None:
        return None
    return {
        rel: None if held is None else [held[0], base64.b64encode(held[1]).decode("ascii")]
        for rel, held in hold.items()
    }


def _decode_hold(hold: dict[str, Any] | None) -> Hold | None:
    if hold is None:
        return None
    return {
        rel: None if held is None else (bool(held[0]), base64.b64decode(held[1]))
        for rel, held in hold.items()
    }


def _answer(request: list[Any]) -> Any:
    op, git_dir, worktree = request[0], Path(request[1]), Path(request[2])
    baseline = _in_process(git_dir, worktree)
    if op == "ensure":
        return baseline.ensure()
    if op == "diff":
        diff = baseline.diff()
        return {"changes": [[c.status, c.path] for c in diff.changes], "patch": diff.patch}
    if op == "reset":
        baseline.reset(_decode_hold(request[3]))
        return None
    if op == "head_files":
        files = baseline.head_files()
        return {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()}
    raise ValueError(f"unknown request {op!r}")


def main() -> int:
    """The child's loop (run by :class:`memoryd.child.Child`)."""
    return serve(_answer)
