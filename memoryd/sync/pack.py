"""The pack a re-rooted push sends: only what the remote does not already hold.

A re-root (see :mod:`memoryd.sync.engine`) pushes a parentless commit in place of the fetched
head. dulwich's own object walk looks for a commit both sides share, finds none, and would send
every object again (1.3 MB at 1,000 outputs for a one-file forget). The remote's branch still
points at the fetched head when the compare-and-swap succeeds, so it holds every object under
that head's tree: those are left out, and the pack carries the new commit and the few trees and
blobs that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dulwich.objects import Commit, ObjectID, Tree
from dulwich.pack import UnpackedObject, pack_objects_to_data
from dulwich.repo import Repo

from memoryd.tuning import GIT_MODE_TREE


def _walk(repo: Repo, tree: ObjectID, skip: set[ObjectID], out: list[ObjectID]) -> None:
    """Ids of ``tree`` and everything under it that ``skip`` lacks (added to ``skip`` as seen)."""
    if tree in skip:
        return
    skip.add(tree)
    out.append(tree)
    obj = repo.object_store[tree]
    assert isinstance(obj, Tree)
    for entry in obj.items():
        if entry.mode == GIT_MODE_TREE:
            _walk(repo, entry.sha, skip, out)
        elif entry.sha not in skip:
            skip.add(entry.sha)
            out.append(entry.sha)


def _tree_of(repo: Repo, sha: ObjectID) -> ObjectID:
    commit = repo.object_store[sha]
    assert isinstance(commit, Commit)
    return ObjectID(commit.tree)


def pack_beside(repo: Repo, base: ObjectID) -> Callable[..., tuple[int, Iterator[UnpackedObject]]]:
    """A ``generate_pack_data`` for ``send_pack`` that leaves out everything under ``base``."""

    def generate(
        have: object, want: list[ObjectID], **kw: object
    ) -> tuple[int, Iterator[UnpackedObject]]:
        remote_has: set[ObjectID] = set()
        _walk(repo, _tree_of(repo, base), remote_has, [])
        ids: list[ObjectID] = []
        for sha in want:
            if sha not in remote_has:
                remote_has.add(sha)
                ids.append(sha)
                _walk(repo, _tree_of(repo, sha), remote_has, ids)
        objects = [repo.object_store[i] for i in ids]
        return pack_objects_to_data(objects, ofs_delta=bool(kw.get("ofs_delta", True)))

    return generate
