"""The git side of sync, all through dulwich: a local cache repository, fetch, commit, push.

``sync.git`` (a bare repository next to ``memory.db``) caches what was fetched; its
``memoryd-sync`` branch is the last remote head seen, which is all phase 2 and
``status`` ever read. Nothing here runs a ``git`` binary: file paths use dulwich's local client,
``git://`` its TCP client, ssh the user's ``ssh`` through dulwich's ssh vendor (keys, agent and
``~/.ssh/config`` stay the user's), https dulwich's urllib3 client with credentials from the URL
or the user's git credential store. memoryd never stores a credential.

A push is a compare-and-swap: the new commit sits on top of the head just fetched, and the ref
moves only if the remote still points at that head (dulwich checks before sending, the server's
receive-pack checks again under its lock). Losing the race raises :class:`~memoryd.errors.PushRaceLost`; the
caller fetches and lays its folder onto the new head.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from dulwich.client import (
    FetchPackResult,
    GitClient,
    LocalGitClient,
    get_credentials_from_store,
)
from dulwich.client import get_transport_and_path as _transport
from dulwich.config import StackedConfig
from dulwich.errors import NotGitRepository
from dulwich.file import FileLocked
from dulwich.object_store import BaseObjectStore
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.pack import OFS_DELTA, REF_DELTA
from dulwich.protocol import ZERO_SHA
from dulwich.refs import Ref
from dulwich.repo import Repo

from memoryd.errors import PushRaceLost, SyncError
from memoryd.sync.branch import BRANCH, MACHINES, TRACKING
from memoryd.sync.pack import pack_beside
from memoryd.sync.urls import mask_remote, mask_text
from memoryd.tuning import (
    GIT_MODE_FILE,
    GIT_MODE_TREE,
    SYNC_MAX_FETCH_BYTES,
    SYNC_MAX_TREE_DEPTH,
    SYNC_MAX_TREE_ENTRIES,
)

log = logging.getLogger(__name__)

AUTHOR = b"memoryd <memoryd@localhost>"


def blob_id(data: bytes) -> ObjectID:
    """The git blob id of ``data`` (plain SHA-1 over git's header, as git computes it)."""
    h = hashlib.sha1(b"blob %d\x00" % len(data), usedforsecurity=False)
    h.update(data)
    return ObjectID(h.hexdigest().encode("ascii"))


def _copy(tree: Tree) -> Tree:
    out = Tree()
    for e in tree.iteritems():
        out.add(e.path, e.mode, e.sha)
    return out


def display_remote(remote: str) -> str:
    """The remote as it may be shown, logged or stored (no user-info; see :mod:`.urls`)."""
    return mask_remote(remote)


def local_remote_path(remote: str) -> Path | None:
    """The folder for a plain-path (or ``file://``) remote, ``None`` for a network URL."""
    if remote.startswith("file://"):
        return Path(urlparse(remote).path)
    if remote.startswith(("/", "~")):
        return Path(remote).expanduser()
    return None


def init_remote(remote: str) -> bool:
    """Create a bare repository at a path remote (``memoryd sync --init``); False if one exists.

    Never done implicitly: a shared folder that is not mounted right now must read as offline,
    not silently become a new, empty remote.
    """
    folder = local_remote_path(remote)
    if folder is None:
        raise SyncError(display_remote(remote), "--init only creates repositories at a path")
    if folder.is_dir() and any(folder.iterdir()):
        try:
            Repo(str(folder)).close()
        except NotGitRepository as exc:
            raise SyncError(str(folder), "exists, is not empty and is not a repository") from exc
        return False
    if not folder.parent.is_dir():
        raise SyncError(str(folder), "its parent folder does not exist")
    Repo.init_bare(str(folder), mkdir=not folder.exists()).close()
    log.info("sync: created a bare repository at %s", folder)
    return True


def _client(remote: str) -> tuple[GitClient, str]:
    folder = local_remote_path(remote)
    if folder is not None:
        if not folder.is_dir():
            raise SyncError(
                display_remote(remote),
                "remote unreachable (no repository at this path; `memoryd sync --init` creates one)",
            )
        return LocalGitClient(), str(folder)
    username = password = None
    parsed = urlparse(remote)
    if parsed.scheme in ("http", "https") and parsed.hostname and not parsed.password:
        for user, secret in get_credentials_from_store(
            parsed.scheme, parsed.hostname, parsed.username or None
        ):
            username, password = user, secret
            break
    try:
        config = StackedConfig.default()
    except Exception:  # a broken ~/.gitconfig must not stop sync; it only adds url rewrites
        config = None
    return _transport(remote, config=config, username=username, password=password)


def _errors(remote: str) -> Callable[[BaseException], SyncError]:
    def wrap(exc: BaseException) -> SyncError:
        if isinstance(exc, SyncError):
            return exc
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, ConnectionRefusedError | TimeoutError):
            detail = f"remote unreachable ({detail})"
        elif isinstance(exc, NotGitRepository):
            detail = f"not a git repository ({detail})"
        return SyncError(display_remote(remote), mask_text(detail, remote)[:500])

    return wrap


@dataclass(frozen=True)
class Flat:
    """A folder's files as relpath -> blob id (what pending changes are computed from)."""

    entries: dict[str, ObjectID]

    def changes(self, other: Flat) -> tuple[list[str], list[str], list[str]]:
        """(added, changed, removed) going from ``other`` to ``self``."""
        added = sorted(p for p in self.entries if p not in other.entries)
        changed = sorted(
            p for p, b in self.entries.items() if p in other.entries and other.entries[p] != b
        )
        removed = sorted(p for p in other.entries if p not in self.entries)
        return added, changed, removed


def _pack_header(read: Callable[[int], bytes]) -> tuple[int, int]:
    """A pack entry's (type, size): type in bits 4-6 of the first byte, size base-128 after."""
    byte = read(1)[0]
    type_num, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
    while byte & 0x80:
        if shift > 63:
            raise ValueError("size field too long")
        byte = read(1)[0]
        size |= (byte & 0x7F) << shift
        shift += 7
    return type_num, size


def _skip_offset(read: Callable[[int], bytes]) -> None:
    for _ in range(10):
        if not read(1)[0] & 0x80:
            return
    raise ValueError("delta base offset too long")


def _inflate_prefix(read: Callable[[int], bytes], want: int) -> bytes:
    """The first ``want`` bytes of a zlib stream, inflating no more than that."""
    z = zlib.decompressobj()
    out = b""
    while len(out) < want:
        chunk = read(64)
        if not chunk:
            break
        out += z.decompress(chunk, want - len(out))
        while z.unconsumed_tail and len(out) < want:
            out += z.decompress(z.unconsumed_tail, want - len(out))
        if z.eof:
            break
    return out


def _delta_target_size(data: bytes) -> int:
    """A delta's result size: the second of the two varints that open it."""
    sizes: list[int] = []
    i = 0
    for _ in range(2):
        value, shift = 0, 0
        while True:
            if i >= len(data) or shift > 63:
                raise ValueError("truncated delta header")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        sizes.append(value)
    return sizes[1]


def object_size(store: BaseObjectStore, sha: ObjectID) -> int | None:
    """An object's inflated size from its header only; ``None`` when missing or unreadable."""
    try:
        for pack in getattr(store, "packs", []):
            try:
                offset = pack.index.object_offset(sha)
            except KeyError:
                continue
            with open(pack.data.path, "rb") as f:
                f.seek(offset)
                type_num, size = _pack_header(f.read)
                if type_num in (OFS_DELTA, REF_DELTA):
                    if type_num == OFS_DELTA:
                        _skip_offset(f.read)
                    else:
                        f.read(20)
                    return _delta_target_size(_inflate_prefix(f.read, 20))
                return size
        path = getattr(store, "_get_shafile_path", None)
        if path is None:
            return None
        with open(path(sha), "rb") as f:
            header = _inflate_prefix(f.read, 32)
    except (OSError, ValueError, IndexError):
        return None
    _kind, sep, rest = header.partition(b" ")
    length, nul, _ = rest.partition(b"\x00")
    if not sep or not nul or not length.isdigit():
        return None
    return int(length)


def _wanter(store: BaseObjectStore, asked: list[ObjectID | None]) -> Callable[..., list[ObjectID]]:
    """dulwich's ``determine_wants`` for the sync branch, noting the head it asked for: that
    head, not the refs the answer ends with, is the fetched one. A remote on this disk reads its
    refs again after packing, and another machine's push landing in between named a head whose
    objects never came (the next read of it failed)."""

    def wants(refs: dict[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
        head = refs.get(BRANCH)
        asked.append(head)
        return [head] if head and head != ZERO_SHA and head not in store else []

    return wants


class SyncRepo:
    """The local cache repository; safe to delete at any time (the next sync refetches)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._repo: Repo | None = None

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            self._repo = self._open()
        return self._repo

    def _open(self) -> Repo:
        if self.git_dir.is_symlink():
            raise SyncError(str(self.git_dir), "is a symlink; refusing to use it")
        if self.git_dir.is_dir():
            try:
                return Repo(str(self.git_dir))
            except NotGitRepository:
                log.warning("sync: %s is not a repository; recreating the cache", self.git_dir)
                shutil.rmtree(self.git_dir)
        return Repo.init_bare(str(self.git_dir), mkdir=True)

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    # -- reading what was fetched -------------------------------------------------------------

    def tracking_head(self) -> ObjectID | None:
        if not self.git_dir.is_dir():
            return None
        try:
            return ObjectID(self.repo.refs[TRACKING])
        except KeyError:
            return None

    def _tree(self, sha: ObjectID) -> Tree:
        try:
            obj = self.repo.object_store[sha]
        except KeyError:
            raise SyncError(str(self.git_dir), f"tree {sha.decode()} is missing") from None
        if not isinstance(obj, Tree):
            raise SyncError(str(self.git_dir), f"{sha.decode()} is not a tree")
        return obj

    def subtree(self, root: ObjectID | None, *parts: str) -> ObjectID | None:
        """Tree id at ``root/parts...``, ``None`` when any part is missing or not a folder."""
        current = root
        for part in parts:
            if current is None:
                return None
            tree = self._tree(current)
            try:
                mode, sha = tree[part.encode()]
            except KeyError:
                return None
            if mode != GIT_MODE_TREE:
                return None
            current = sha
        return current

    def root_tree(self, head: ObjectID | None) -> ObjectID | None:
        if head is None:
            return None
        commit = self.repo.object_store[head]
        if not isinstance(commit, Commit):
            raise SyncError(str(self.git_dir), "the fetched head is not a commit")
        return ObjectID(commit.tree)

    def machines(self, head: ObjectID | None) -> dict[str, ObjectID]:
        """Machine folder name -> tree id under ``machines/`` at ``head``."""
        top = self.subtree(self.root_tree(head), MACHINES)
        if top is None:
            return {}
        return {
            e.path.decode("utf-8", "replace"): e.sha
            for e in self._tree(top).iteritems()
            if e.mode == GIT_MODE_TREE
        }

    def walk(
        self, tree_id: ObjectID | None, prefix: str = ""
    ) -> Iterator[tuple[str, int, ObjectID]]:
        """(relpath, mode, blob id) for every entry below ``tree_id``, folders expanded.

        Iterative, with a depth and an entry cap: the trees come from whoever can push to the
        remote, and a folder nested thousands deep must not exhaust the interpreter's stack.
        Raises :class:`~memoryd.errors.SyncError` past either cap or on a tree missing from the
        cache.
        """
        if tree_id is None:
            return
        stack: list[tuple[ObjectID, str, int]] = [(tree_id, prefix, 0)]
        seen = 0
        while stack:
            sha, base, depth = stack.pop()
            if depth > SYNC_MAX_TREE_DEPTH:
                raise SyncError(str(self.git_dir), f"folders nested deeper than {depth - 1} levels")
            for e in self._tree(sha).iteritems():
                seen += 1
                if seen > SYNC_MAX_TREE_ENTRIES:
                    raise SyncError(str(self.git_dir), f"more than {seen - 1} entries in a folder")
                rel = f"{base}{e.path.decode('utf-8', 'replace')}"
                if e.mode == GIT_MODE_TREE:
                    stack.append((e.sha, rel + "/", depth + 1))
                else:
                    yield rel, e.mode, e.sha

    def flat_entry(self, tree_id: ObjectID, name: str) -> ObjectID | None:
        """Blob id of the file ``name`` directly in ``tree_id``, ``None`` when absent or a folder."""
        try:
            mode, sha = self._tree(tree_id)[name.encode()]
        except KeyError:
            return None
        return None if mode == GIT_MODE_TREE else sha

    def flat(self, tree_id: ObjectID | None) -> Flat:
        return Flat({rel: sha for rel, _, sha in self.walk(tree_id)})

    def blob(self, sha: ObjectID, limit: int) -> bytes | None:
        """A blob's bytes, ``None`` when it is missing, not a blob or bigger than ``limit``.

        The size is read from the object's header first, so a huge (or highly compressible)
        object pushed by anyone is never inflated whole.
        """
        size = object_size(self.repo.object_store, sha)
        if size is None or size > limit:
            return None
        try:
            type_num, data = self.repo.object_store.get_raw(sha)
        except KeyError:
            return None
        if type_num != Blob.type_num or len(data) > limit:
            return None
        return data

    # -- building what we publish -------------------------------------------------------------

    def add_folder(
        self, files: dict[str, bytes], known: Flat | None = None
    ) -> tuple[ObjectID, Flat]:
        """Store ``files`` (relpath -> bytes) as a tree; returns its id and flat listing.

        Blobs already in ``known`` (the remote's copy of this folder, reachable from the fetched
        head) are not looked up again: dulwich's loose-object check reads the whole object.
        """
        store = self.repo.object_store
        have = set(known.entries.values()) if known else set()
        flat: dict[str, ObjectID] = {}
        nested: dict[str, object] = {}
        for rel, data in files.items():
            sha = blob_id(data)
            if sha not in have and sha not in store:
                store.add_object(Blob.from_string(data))
            flat[rel] = sha
            node = nested
            *dirs, name = rel.split("/")
            for d in dirs:
                node = node.setdefault(d, {})  # type: ignore[assignment]
            node[name] = sha
        return self._write_tree(nested), Flat(flat)

    def _write_tree(self, nested: dict[str, object]) -> ObjectID:
        tree = Tree()
        for name, value in nested.items():
            if isinstance(value, dict):
                tree.add(name.encode(), GIT_MODE_TREE, self._write_tree(value))
            else:
                assert isinstance(value, bytes)
                tree.add(name.encode(), GIT_MODE_FILE, ObjectID(value))
        if tree.id not in self.repo.object_store:
            self.repo.object_store.add_object(tree)
        return tree.id

    def compose(self, base_root: ObjectID | None, machine_id: str, own: ObjectID) -> ObjectID:
        """``base_root`` with ``machines/<machine_id>`` replaced by ``own``; nothing else touched."""
        root = _copy(self._tree(base_root)) if base_root is not None else Tree()
        machines_id = self.subtree(base_root, MACHINES)
        machines = _copy(self._tree(machines_id)) if machines_id is not None else Tree()
        machines.add(machine_id.encode(), GIT_MODE_TREE, own)
        root.add(MACHINES.encode(), GIT_MODE_TREE, machines.id)
        for obj in (machines, root):
            if obj.id not in self.repo.object_store:
                self.repo.object_store.add_object(obj)
        return root.id

    def commit(self, tree: ObjectID, parent: ObjectID | None, message: str) -> ObjectID:
        c = Commit()
        c.tree = tree
        c.parents = [parent] if parent else []
        c.author = c.committer = AUTHOR
        c.author_time = c.commit_time = int(time.time())
        c.author_timezone = c.commit_timezone = 0
        c.encoding = b"UTF-8"
        c.message = message.encode("utf-8")
        self.repo.object_store.add_object(c)
        return c.id

    def set_tracking(self, head: ObjectID | None) -> None:
        if head is None:
            self.repo.refs.remove_if_equals(TRACKING, None)
        else:
            self.repo.refs[TRACKING] = head

    # -- network ------------------------------------------------------------------------------

    def fetch(self, remote: str) -> ObjectID | None:
        """Fetch the sync branch; records and returns the remote head (``None``: no branch yet)."""
        client, path = _client(remote)
        asked: list[ObjectID | None] = []
        try:
            result = self._fetch_capped(client, path, _wanter(self.repo.object_store, asked))
        except SyncError:
            raise
        except Exception as exc:
            raise _errors(remote)(exc) from exc
        head = asked[-1] if asked else result.refs.get(BRANCH)  # the one its objects came for
        head = head if head and head != ZERO_SHA else None
        if head is not None and head not in self.repo.object_store:  # named, never sent
            raise SyncError(display_remote(remote), "the remote named a head it did not send")
        self.set_tracking(head)
        return head

    def _fetch_capped(
        self, client: GitClient, path: str, wants: Callable[..., list[ObjectID]]
    ) -> FetchPackResult:
        """dulwich's fetch, with the incoming pack counted as it arrives.

        Whoever can push decides how big the pack is; past ``SYNC_MAX_FETCH_BYTES`` the fetch
        stops, nothing is kept, and the sync counts as failed (reported, retried with backoff).
        """
        store = self.repo.object_store
        spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed below on every path
            max_size=8 * 1024 * 1024, prefix="incoming-", dir=str(self.git_dir / "objects")
        )
        received = 0

        def write(data: bytes) -> None:
            nonlocal received
            received += len(data)
            if received > SYNC_MAX_FETCH_BYTES:
                raise SyncError(
                    str(self.git_dir),
                    f"the remote sent more than {SYNC_MAX_FETCH_BYTES // (1024 * 1024)} MiB "
                    "in one fetch; nothing was kept",
                )
            spool.write(data)

        try:
            result = client.fetch_pack(
                path,
                wants,
                self.repo.get_graph_walker(),
                write,  # type: ignore[arg-type]
            )
            if spool.tell():
                spool.seek(0)
                # Completes a thin pack from objects already here; a full pack is kept as is.
                store.add_thin_pack(spool.read, None)
        finally:
            spool.close()
        return result

    def push(
        self, remote: str, base: ObjectID | None, new: ObjectID, *, unrelated: bool = False
    ) -> None:
        """Move the branch from ``base`` to ``new`` (``unrelated``: a re-root); raises
        :class:`PushRaceLost` if it moved."""
        client, path = _client(remote)
        expected = base or ZERO_SHA
        store = self.repo.object_store
        packer = pack_beside(self.repo, base) if unrelated and base else store.generate_pack_data

        def update(refs: dict[Ref, ObjectID]) -> dict[Ref, ObjectID]:
            if refs.get(BRANCH, ZERO_SHA) != expected:
                raise PushRaceLost(display_remote(remote))
            return {BRANCH: new}

        try:
            result = client.send_pack(
                path.encode() if isinstance(path, str) else path,
                update,
                generate_pack_data=packer,
            )
        except PushRaceLost:
            raise
        except FileLocked as exc:
            # a remote on this machine's disk: another push holds its ref's lock file right now
            raise PushRaceLost(display_remote(remote)) from exc
        except Exception as exc:
            raise _errors(remote)(exc) from exc
        status = (result.ref_status or {}).get(BRANCH)
        if status:
            raise push_refusal(remote, status if isinstance(status, str) else str(status))


# What receive-pack says when another push moved or held the branch between our fetch and its
# ref update: "fetch first" / "non-fast-forward" (moved), "cannot lock ref" / "unable to set"
# (held), "failed to update ref" (its ref transaction failed on the same race). Fetch and retry.
RACE_MARKERS = (
    "fetch first",
    "non-fast-forward",
    "unable to set",
    "cannot lock",
    "unable to lock",
    "failed to lock",
    "failed to update ref",
)


def push_refusal(remote: str, status: str) -> PushRaceLost | SyncError:
    """The error for a push the remote answered with ``status`` for our branch."""
    if any(marker in status for marker in RACE_MARKERS):
        return PushRaceLost(display_remote(remote))
    return SyncError(display_remote(remote), f"the remote refused the push ({status})")
