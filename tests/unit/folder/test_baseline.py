from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, ObjectID, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from memoryd.errors import BaselineError, MemorydError
from memoryd.folder.baseline import DIFF_FILE_NAME, Baseline, default_exclude
from memoryd.folder.linediff import Change, WorkspaceDiff

GIT = shutil.which("git")


@pytest.fixture
def wt(tmp_path: Path) -> Path:
    w = tmp_path / "memories"
    w.mkdir()
    return w


@pytest.fixture
def gd(tmp_path: Path) -> Path:
    return tmp_path / "data" / "baseline.git"


@pytest.fixture
def bl(gd: Path, wt: Path) -> Baseline:
    return Baseline(gd, wt, exclude=default_exclude)


def write(root: Path, rel: str, data: str | bytes, *, exec_: bool = False) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_bytes(data)
    p.chmod(0o755 if exec_ else 0o644)
    return p


def object_ids(gd: Path) -> set[ObjectID]:
    with Repo(str(gd)) as r:
        return set(iter(r.object_store))


def commits(gd: Path) -> list[Commit]:
    with Repo(str(gd)) as r:
        objs = [r.object_store[i] for i in r.object_store]
        return [o for o in objs if isinstance(o, Commit)]


def git_files(gd: Path) -> list[str]:
    return sorted(str(p.relative_to(gd)) for p in gd.rglob("*"))


def blob_id(data: bytes) -> ObjectID:
    return Blob.from_string(data).id


# -- ensure -----------------------------------------------------------------------------------


def test_fresh_ensure_commits_the_worktree(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "MEMORY.md", "# Memory\n")
    write(wt, "skills/x/SKILL.md", "skill\n")
    write(wt, "skills/x/run.sh", "#!/bin/sh\n", exec_=True)

    assert bl.ensure() is True

    assert bl.head_files() == {
        "MEMORY.md": b"# Memory\n",
        "skills/x/SKILL.md": b"skill\n",
        "skills/x/run.sh": b"#!/bin/sh\n",
    }
    assert bl.diff().empty
    [commit] = commits(gd)
    assert commit.parents == []
    assert commit.author == commit.committer == b"memoryd <memoryd@localhost>"
    with Repo(str(gd)) as r:
        assert r.head() == commit.id
        tree = r.object_store[commit.tree]
        assert isinstance(tree, Tree)
        sub = r.object_store[tree[b"skills"][1]]
        assert isinstance(sub, Tree)
        x = r.object_store[sub[b"x"][1]]
        assert isinstance(x, Tree)
        assert x[b"run.sh"][0] == 0o100755
        assert x[b"SKILL.md"][0] == 0o100644
    assert not (wt / ".git").exists()  # the repository lives outside the memory folder


def test_fresh_ensure_of_an_empty_worktree(bl: Baseline, gd: Path) -> None:
    assert bl.ensure() is True
    assert bl.head_files() == {}
    assert bl.diff().empty
    assert len(commits(gd)) == 1


def test_existing_baseline_is_preserved(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "MEMORY.md", "one\n")
    bl.ensure()
    head_before = commits(gd)[0].id
    write(wt, "MEMORY.md", "two\n")

    assert bl.ensure() is False

    assert commits(gd)[0].id == head_before
    assert bl.diff().changes == [Change("M", "MEMORY.md")]


def test_repo_without_commit_gets_one(bl: Baseline, gd: Path, wt: Path) -> None:
    gd.parent.mkdir(parents=True)
    Repo.init_bare(str(gd), mkdir=True).close()
    write(wt, "a.md", "a\n")
    with pytest.raises(BaselineError, match="no baseline commit"):
        bl.diff()

    assert bl.ensure() is True
    assert bl.head_files() == {"a.md": b"a\n"}


def test_missing_worktree_raises(gd: Path, tmp_path: Path) -> None:
    b = Baseline(gd, tmp_path / "nope")
    with pytest.raises(BaselineError, match="missing"):
        b.ensure()


def test_git_dir_inside_worktree_is_refused(wt: Path) -> None:
    with pytest.raises(BaselineError, match="outside"):
        Baseline(wt / "baseline.git", wt)


def test_baseline_error_is_a_memoryd_error() -> None:
    assert issubclass(BaselineError, MemorydError)


# -- corrupt repositories ---------------------------------------------------------------------


def _assert_rebuilt(bl: Baseline, gd: Path, files: dict[str, bytes]) -> None:
    assert bl.ensure() is True
    assert gd.is_dir() and not gd.is_symlink()
    assert bl.head_files() == files
    assert bl.diff().empty
    assert len(commits(gd)) == 1


def test_garbage_git_dir_is_reinitialised(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    gd.mkdir(parents=True)
    (gd / "HEAD").write_text("not a ref at all")
    (gd / "junk").write_bytes(os.urandom(64))
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})
    assert not (gd / "junk").exists()


def test_git_dir_that_is_a_file_is_replaced(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    gd.parent.mkdir(parents=True)
    gd.write_text("garbage")
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})


def test_symlinked_git_dir_is_replaced_and_target_untouched(
    bl: Baseline, gd: Path, wt: Path, tmp_path: Path
) -> None:
    write(wt, "a.md", "a\n")
    elsewhere = tmp_path / "elsewhere.git"
    Repo.init_bare(str(elsewhere), mkdir=True).close()
    before = git_files(elsewhere)
    gd.parent.mkdir(parents=True)
    gd.symlink_to(elsewhere)

    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})

    assert git_files(elsewhere) == before  # nothing written through the link


def test_symlink_inside_git_dir_is_replaced(
    bl: Baseline, gd: Path, wt: Path, tmp_path: Path
) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    (tmp_path / "outside").mkdir()
    (gd / "refs" / "tags").rmdir()
    (gd / "refs" / "tags").symlink_to(tmp_path / "outside")
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})


def test_head_pointing_to_missing_object_is_reinitialised(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    (gd / "refs" / "heads" / "main").write_text("1" * 40 + "\n")
    with pytest.raises(BaselineError, match="missing"):
        bl.diff()
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})


def _commit_loose(gd: Path, tree_id: ObjectID, extra: tuple[Tree, ...] = ()) -> ObjectID:
    """Point HEAD at a new loose commit of ``tree_id`` (which may not exist)."""
    with Repo(str(gd)) as r:
        for obj in extra:
            r.object_store.add_object(obj)
        c = Commit()
        c.tree = tree_id
        c.author = c.committer = b"t <t@t>"
        c.author_time = c.commit_time = 0
        c.author_timezone = c.commit_timezone = 0
        c.message = b"t\n"
        r.object_store.add_object(c)
        r.refs[Ref(b"refs/heads/main")] = c.id
        return c.id


def test_missing_head_tree_fails_the_diff_loudly(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    _commit_loose(gd, ObjectID(b"2" * 40))

    with pytest.raises(BaselineError, match="tree .* is missing"):
        bl.diff()
    with pytest.raises(BaselineError):
        bl.head_files()
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})


def test_missing_blob_of_a_changed_file_fails_the_diff(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    tree = Tree()
    tree.add(b"a.md", 0o100644, ObjectID(b"3" * 40))  # a blob that is not in the store
    _commit_loose(gd, tree.id, (tree,))

    with pytest.raises(BaselineError):
        bl.diff()  # a.md differs from the recorded id, and its old content cannot be read
    # ensure() notices the missing blob instead of calling the baseline good forever
    _assert_rebuilt(bl, gd, {"a.md": b"a\n"})


def test_leftovers_of_an_interrupted_reset_are_swept(bl: Baseline, gd: Path, wt: Path) -> None:
    bl.ensure()
    for name in (".baseline.git.new-abc", ".baseline.git.old-def"):
        (gd.parent / name / "objects").mkdir(parents=True)
    (gd.parent / "unrelated").mkdir()

    assert bl.ensure() is False

    assert sorted(p.name for p in gd.parent.iterdir()) == [
        "baseline.git",
        "baseline.git.stat",
        "unrelated",
    ]


# -- diff -------------------------------------------------------------------------------------


def test_add_modify_delete(bl: Baseline, wt: Path) -> None:
    write(wt, "keep.md", "same\n")
    write(wt, "mod.md", "1\n2\n3\n4\n5\n6\n7\n8\n9\n")
    write(wt, "gone.md", "bye\n")
    bl.ensure()
    write(wt, "mod.md", "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n")
    (wt / "gone.md").unlink()
    write(wt, "new.md", "hello\nworld\n")

    d = bl.diff()

    assert d.changes == [Change("D", "gone.md"), Change("M", "mod.md"), Change("A", "new.md")]
    assert not d.empty
    assert d.patch == (
        "diff --git a/gone.md b/gone.md\n"
        "deleted file mode 100644\n"
        "--- a/gone.md\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-bye\n"
        "diff --git a/mod.md b/mod.md\n"
        "--- a/mod.md\n"
        "+++ b/mod.md\n"
        "@@ -2,7 +2,7 @@\n"
        " 2\n 3\n 4\n-5\n+FIVE\n 6\n 7\n 8\n"
        "diff --git a/new.md b/new.md\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/new.md\n"
        "@@ -0,0 +1,2 @@\n"
        "+hello\n+world\n"
    )


def test_two_distant_edits_make_two_hunks(bl: Baseline, wt: Path) -> None:
    lines = [f"line {i}\n" for i in range(1, 31)]
    write(wt, "m.md", "".join(lines))
    bl.ensure()
    lines[1] = "changed 2\n"
    lines[25] = "changed 26\n"
    write(wt, "m.md", "".join(lines))

    patch = bl.diff().patch

    assert [l for l in patch.splitlines() if l.startswith("@@")] == [
        "@@ -1,5 +1,5 @@",
        "@@ -23,7 +23,7 @@",
    ]


def test_rename_is_delete_plus_add(bl: Baseline, wt: Path) -> None:
    write(wt, "old/name.md", "content\n")
    bl.ensure()
    (wt / "new").mkdir()
    (wt / "old" / "name.md").rename(wt / "new" / "name.md")

    assert bl.diff().changes == [Change("A", "new/name.md"), Change("D", "old/name.md")]


def test_mode_change_alone_is_a_modification(bl: Baseline, wt: Path) -> None:
    p = write(wt, "tool.sh", "echo hi\n")
    bl.ensure()
    p.chmod(0o755)

    d = bl.diff()

    assert d.changes == [Change("M", "tool.sh")]
    assert d.patch == "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n"


def test_mode_and_content_change(bl: Baseline, wt: Path) -> None:
    p = write(wt, "tool.sh", "echo hi\n", exec_=True)
    bl.ensure()
    p.write_text("echo bye\n")
    p.chmod(0o644)

    patch = bl.diff().patch

    assert patch.startswith(
        "diff --git a/tool.sh b/tool.sh\nold mode 100755\nnew mode 100644\n--- a/tool.sh\n+++ b/tool.sh\n"
    )
    assert "-echo hi\n+echo bye\n" in patch


def test_binary_files(bl: Baseline, wt: Path) -> None:
    write(wt, "img.bin", b"\x89PNG\x00\x01\x02")
    bl.ensure()
    write(wt, "img.bin", b"\x89PNG\x00\x01\x03")
    write(wt, "added.bin", b"\x00\x00")

    d = bl.diff()

    assert d.changes == [Change("A", "added.bin"), Change("M", "img.bin")]
    assert d.patch == (
        "diff --git a/added.bin b/added.bin\nnew file mode 100644\n"
        "Binary files /dev/null and b/added.bin differ\n"
        "diff --git a/img.bin b/img.bin\n"
        "Binary files a/img.bin and b/img.bin differ\n"
    )


def test_invalid_utf8_text_is_decoded_with_replacement(bl: Baseline, wt: Path) -> None:
    write(wt, "latin.md", b"caf\xe9\n")
    bl.ensure()
    write(wt, "latin.md", b"caf\xe9 au lait\n")

    assert "+caf\ufffd au lait\n" in bl.diff().patch


def test_nested_dirs_sorted_and_empty_dirs_ignored(bl: Baseline, wt: Path) -> None:
    bl.ensure()
    write(wt, "z.md", "z\n")
    write(wt, "a/b/c/deep.md", "deep\n")
    write(wt, "a/b.md", "b\n")
    write(wt, "a-b.md", "dash\n")
    (wt / "empty" / "nested").mkdir(parents=True)

    d = bl.diff()

    assert [c.path for c in d.changes] == ["a-b.md", "a/b.md", "a/b/c/deep.md", "z.md"]
    assert {c.status for c in d.changes} == {"A"}
    assert "diff --git a/a/b/c/deep.md b/a/b/c/deep.md\n" in d.patch
    bl.reset()
    assert bl.diff().empty
    assert "empty" not in {p.split("/")[0] for p in bl.head_files()}


def test_empty_file_added_and_deleted(bl: Baseline, wt: Path) -> None:
    write(wt, "was-empty.md", "")
    bl.ensure()
    (wt / "was-empty.md").unlink()
    write(wt, "empty.md", "")

    d = bl.diff()

    assert d.changes == [Change("A", "empty.md"), Change("D", "was-empty.md")]
    assert d.patch == (
        "diff --git a/empty.md b/empty.md\nnew file mode 100644\n"
        "diff --git a/was-empty.md b/was-empty.md\ndeleted file mode 100644\n"
    )


def test_missing_final_newline_is_marked(bl: Baseline, wt: Path) -> None:
    write(wt, "n.md", "a\nb")
    bl.ensure()
    write(wt, "n.md", "a\nc")

    assert bl.diff().patch.endswith(
        "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )


def test_excluded_paths_are_never_tracked(bl: Baseline, wt: Path, tmp_path: Path) -> None:
    write(wt, "MEMORY.md", "m\n")
    write(wt, DIFF_FILE_NAME, "old diff\n")
    write(wt, ".hidden.md", "h\n")
    write(wt, ".opencode/state.json", "{}\n")
    write(wt, "skills/.cache/x", "x\n")
    (wt / ".opencode" / "link").symlink_to(tmp_path)  # never looked at: excluded
    bl.ensure()
    assert bl.head_files() == {"MEMORY.md": b"m\n"}

    write(wt, DIFF_FILE_NAME, "new diff\n")
    write(wt, ".hidden.md", "changed\n")
    write(wt, "skills/.cache/y", "y\n")
    assert bl.diff().empty


def test_no_exclude_tracks_dot_files(gd: Path, wt: Path) -> None:
    write(wt, ".dot.md", "d\n")
    b = Baseline(gd, wt)
    b.ensure()
    assert b.head_files() == {".dot.md": b"d\n"}


def test_custom_exclude_gets_posix_relpaths(gd: Path, wt: Path) -> None:
    write(wt, "keep/a.md", "a\n")
    write(wt, "skip/b.md", "b\n")
    asked: list[str] = []

    def exclude(rel: str) -> bool:
        asked.append(rel)
        return rel == "skip"

    b = Baseline(gd, wt, exclude=exclude)
    b.ensure()

    assert b.head_files() == {"keep/a.md": b"a\n"}
    assert set(asked) == {"keep", "keep/a.md", "skip"}


def test_diff_writes_no_objects(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    write(wt, "b.md", "b\n")
    bl.ensure()
    write(wt, "a.md", "changed\n")
    write(wt, "c/new.md", "new content that is in no object yet\n")
    (wt / "b.md").unlink()
    ids, files = object_ids(gd), git_files(gd)

    d = bl.diff()

    assert len(d.changes) == 3
    assert object_ids(gd) == ids
    assert git_files(gd) == files
    assert blob_id(b"new content that is in no object yet\n") not in ids


def test_special_files_are_skipped(bl: Baseline, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    os.mkfifo(wt / "pipe")
    bl.ensure()  # must not block on the fifo
    assert bl.head_files() == {"a.md": b"a\n"}
    assert bl.diff().empty


# -- symlinks in the worktree -----------------------------------------------------------------


def test_symlink_in_worktree_fails_diff_and_reset(
    bl: Baseline, gd: Path, wt: Path, tmp_path: Path
) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    head = commits(gd)[0].id
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    (wt / "notes").mkdir()
    (wt / "notes" / "leak.md").symlink_to(secret)

    with pytest.raises(BaselineError, match="notes/leak.md"):
        bl.diff()
    with pytest.raises(BaselineError, match="notes/leak.md"):
        bl.reset()
    assert [c.id for c in commits(gd)] == [head]  # the failed reset left the old baseline alone


def test_symlinked_directory_in_worktree_fails(bl: Baseline, wt: Path, tmp_path: Path) -> None:
    bl.ensure()
    (tmp_path / "outside").mkdir()
    (wt / "dir").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(BaselineError, match="symlink"):
        bl.diff()


def test_fresh_ensure_with_symlink_in_worktree_fails(
    bl: Baseline, gd: Path, wt: Path, tmp_path: Path
) -> None:
    (wt / "x.md").symlink_to(tmp_path)
    with pytest.raises(BaselineError, match="x.md"):
        bl.ensure()
    assert not gd.exists()


# -- reset ------------------------------------------------------------------------------------


def test_reset_drops_history_and_deleted_content(bl: Baseline, gd: Path, wt: Path) -> None:
    secret = b"api_key=sk-live-0123456789abcdef\n"
    write(wt, "MEMORY.md", "v1\n")
    write(wt, "leak.md", secret)
    bl.ensure()
    secret_id = blob_id(secret)
    old_head = commits(gd)[0].id
    assert secret_id in object_ids(gd)

    (wt / "leak.md").unlink()
    write(wt, "MEMORY.md", "v2\n")
    bl.reset()

    [commit] = commits(gd)
    assert commit.parents == [] and commit.id != old_head
    ids = object_ids(gd)
    assert secret_id not in ids and old_head not in ids
    assert blob_id(b"v1\n") not in ids
    with Repo(str(gd)) as r:
        assert all(secret not in r.object_store[i].as_raw_string() for i in ids)
    assert all(secret_id.decode() not in f for f in git_files(gd))
    assert bl.head_files() == {"MEMORY.md": b"v2\n"}
    assert bl.diff().empty


def test_reset_twice_keeps_a_single_commit(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    for i in range(3):
        write(wt, "a.md", f"a{i}\n")
        bl.reset()
    assert len(commits(gd)) == 1
    assert len(list((gd / "objects" / "pack").glob("*.pack"))) == 1
    assert sorted(p.name for p in gd.parent.iterdir()) == ["baseline.git", "baseline.git.stat"]


def test_identical_files_share_a_blob(bl: Baseline, gd: Path, wt: Path) -> None:
    write(wt, "a.md", "same\n")
    write(wt, "b/a.md", "same\n")
    bl.ensure()
    assert bl.head_files() == {"a.md": b"same\n", "b/a.md": b"same\n"}
    with Repo(str(gd)) as r:
        packed = sum(len(pack) for pack in r.object_store.packs)
    assert packed == len(object_ids(gd)) == 4  # one blob, the root and b/ trees, one commit


# -- render -----------------------------------------------------------------------------------


def test_render_lists_status_and_fences_the_patch(bl: Baseline, wt: Path) -> None:
    write(wt, "gone.md", "x\n")
    bl.ensure()
    (wt / "gone.md").unlink()
    write(wt, "new.md", "y\n")

    text = bl.diff().render()

    assert text.startswith("# ")
    assert "memoryd" in text.split("## Status")[0]
    assert "do not edit" in text
    status = text.split("## Status\n", 1)[1].split("## Diff", 1)[0]
    assert status.strip().splitlines() == ["- D gone.md", "- A new.md"]  # sorted by path
    body = text.split("## Diff\n", 1)[1]
    assert body.strip().startswith("```diff\ndiff --git a/gone.md b/gone.md\n")
    assert body.rstrip().endswith("+y\n```")
    assert "truncated" not in text


def test_render_empty_says_none(bl: Baseline) -> None:
    bl.ensure()
    text = bl.diff().render()
    assert "## Status\n\n- none\n" in text
    assert "```diff\n```" in text


def test_render_outruns_backtick_fences_in_content() -> None:
    d = WorkspaceDiff([Change("M", "a.md")], "diff --git a/a.md b/a.md\n ```\n+````python\n")
    text = d.render()
    assert "`````diff\n" in text and text.rstrip().endswith("`````")


def test_render_truncates_at_a_character_boundary() -> None:
    patch = (
        "+" + "a" * 9 + "€" * 5 + "\n"
    )  # € is 3 bytes in UTF-8; byte 11 falls inside the first one
    d = WorkspaceDiff([Change("A", "x.md")], patch)

    text = d.render(cap_bytes=11)

    text.encode("utf-8")  # valid UTF-8 throughout
    body = text.split("```diff\n", 1)[1].split("\n```", 1)[0]
    assert body == "+" + "a" * 9
    assert len(body.encode("utf-8")) <= 11
    assert text.rstrip().endswith("```\n[diff truncated at 11 bytes]")

    at_boundary = d.render(cap_bytes=13)  # exactly one € fits
    assert at_boundary.split("```diff\n", 1)[1].split("\n```", 1)[0] == "+" + "a" * 9 + "€"
    assert "[diff truncated at 13 bytes]" in at_boundary
    assert "truncated" not in d.render(cap_bytes=len(patch.encode("utf-8")))


def test_render_default_cap_is_4_mib(bl: Baseline, wt: Path) -> None:
    bl.ensure()
    write(wt, "big.md", ("x" * 99 + "\n") * 50_000)  # ~5 MB of added lines
    d = bl.diff()
    assert len(d.patch.encode()) > 4 * 1024 * 1024  # the patch itself is whole
    text = d.render()
    assert text.rstrip().endswith("[diff truncated at 4194304 bytes]")
    assert len(text.encode()) < 4 * 1024 * 1024 + 1024


# -- cross-checks against the git binary (skipped when it is absent) --------------------------


@pytest.mark.skipif(GIT is None, reason="git binary not installed")
def test_patch_applies_with_git_and_repo_passes_fsck(
    bl: Baseline, gd: Path, wt: Path, tmp_path: Path
) -> None:
    write(wt, "MEMORY.md", "".join(f"line {i}\n" for i in range(40)))
    write(wt, "gone.md", "bye\n")
    write(wt, "tool.sh", "echo\n")
    write(wt, "n.md", "no newline")
    write(wt, "was-empty.md", "")
    bl.ensure()
    assert GIT is not None
    fsck = subprocess.run(
        [GIT, "--git-dir", str(gd), "fsck", "--strict"], capture_output=True, text=True, check=False
    )
    assert fsck.returncode == 0, fsck.stderr
    log = subprocess.run(
        [GIT, "--git-dir", str(gd), "log", "--format=%an <%ae>|%P"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert log.stdout == "memoryd <memoryd@localhost>|\n"

    write(
        wt,
        "MEMORY.md",
        "".join(f"line {i}\n" if i % 13 else f"LINE {i}\n" for i in range(40)) + "tail\n",
    )
    (wt / "gone.md").unlink()
    (wt / "tool.sh").chmod(0o755)
    write(wt, "n.md", "no newline, edited")
    write(wt, "deep/er/new.md", "new\n")
    write(wt, "empty.md", "")
    (wt / "was-empty.md").unlink()
    patch = bl.diff().patch

    scratch = tmp_path / "scratch"
    for rel, data in bl.head_files().items():
        write(scratch, rel, data)
    (scratch / "tool.sh").chmod(0o644)
    (tmp_path / "p.diff").write_text(patch)
    done = subprocess.run(
        [GIT, "apply", "--whitespace=nowarn", str(tmp_path / "p.diff")],
        cwd=scratch,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = {str(p.relative_to(scratch)): p.read_bytes() for p in scratch.rglob("*") if p.is_file()}
    want = {str(p.relative_to(wt)): p.read_bytes() for p in wt.rglob("*") if p.is_file()}
    assert got == want
    assert os.stat(scratch / "tool.sh").st_mode & 0o100


def test_large_file_with_scattered_edits_is_diffed_quickly_and_minimally(
    bl: Baseline, wt: Path
) -> None:
    # Many identical lines (blank, "- item") made an exhaustive matcher take seconds here.
    lines = [("\n", "- item\n", f"fact {i} about the project\n")[i % 3] for i in range(6000)]
    write(wt, "raw_memories.md", "".join(lines))
    bl.ensure()
    edited = list(lines)
    for i in range(2, len(edited), 60):
        edited[i] = f"fact {i} was revised\n"
    write(wt, "raw_memories.md", "".join(edited))

    started = time.process_time()  # CPU time, so a busy machine does not fail the test
    patch = bl.diff().patch
    elapsed = time.process_time() - started

    body = [l for l in patch.splitlines() if not l.startswith(("---", "+++"))]
    assert sum(l.startswith("-") for l in body) == sum(l.startswith("+") for l in body) == 100
    assert patch.count("@@ -") == 100
    assert elapsed < 2.0


def test_failed_commit_keeps_the_old_baseline(
    bl: Baseline, gd: Path, wt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(wt, "a.md", "a\n")
    bl.ensure()
    head = commits(gd)[0].id
    write(wt, "a.md", "b\n")

    def boom(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("memoryd.folder.baseline.write_pack", boom)
    with pytest.raises(BaselineError, match="No space left"):
        bl.reset()

    assert [c.id for c in commits(gd)] == [head]
    assert sorted(p.name for p in gd.parent.iterdir()) == [
        "baseline.git"
    ]  # no half-built repo left
    assert bl.diff().changes == [Change("M", "a.md")]


def test_symlinked_worktree_root_is_refused(gd: Path, wt: Path, tmp_path: Path) -> None:
    link = tmp_path / "linked-memories"
    link.symlink_to(wt, target_is_directory=True)
    with pytest.raises(BaselineError, match="symlink"):
        Baseline(gd, link).ensure()


def test_large_templated_file_with_scattered_edits_diffs_fast_and_exactly(
    bl: Baseline, wt: Path
) -> None:
    """raw_memories.md at 4,096 sessions: ~150k lines of repeated template lines and unique headers."""

    def render(version: dict[int, str]) -> str:
        parts = []
        for n in range(4096):
            parts.append(
                f"## Session `ses_{n:06d}`\nupdated_at: 2026-11-{n % 28 + 1:02d}\ncwd: /srv/p{n % 12}\n\n"
                f"---\ndescription: {version.get(n, 'stable')} memory {n}\ntask_outcome: partial\n"
                "keywords: build, tests\n---\n\n### Task 1\n- outcome: partial\n- reusable: yes\n\n"
            )
        return "".join(parts)

    (wt / "raw_memories.md").write_text(render({}))
    bl.ensure()
    changed = dict.fromkeys(range(0, 4096, 100), "changed")
    (wt / "raw_memories.md").write_text(render(changed))
    t0 = time.process_time()
    diff = bl.diff()
    assert time.process_time() - t0 < 5.0
    removed = [l for l in diff.patch.splitlines() if l.startswith("-description")]
    added = [l for l in diff.patch.splitlines() if l.startswith("+description")]
    assert len(removed) == len(added) == len(changed)
    assert all("changed memory" in l for l in added) and all("stable memory" in l for l in removed)


def test_stat_cache_reads_only_files_whose_stat_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryd.folder.baseline as bmod

    wt = tmp_path / "mem"
    wt.mkdir()
    for i in range(20):
        (wt / f"f{i}.md").write_text(f"line {i}\n")
    past = time.time_ns() - 5_000_000_000
    for p in wt.iterdir():
        os.utime(p, ns=(past, past))
    bl = Baseline(tmp_path / "baseline.git", wt)
    bl.ensure()
    bl.diff()  # the cache written by reset() is racy (files were just read): this refreshes it
    reads: list[str] = []
    real = bmod._read_file

    def counted(path: str) -> tuple[int, bytes]:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(bmod, "_read_file", counted)
    assert bl.diff().changes == [] and reads == []  # nothing read, nothing hashed
    # same size, new content, new mtime: read and reported
    (wt / "f3.md").write_text("LINE 3\n")
    os.utime(wt / "f3.md", ns=(past + 10**9, past + 10**9))
    d = bl.diff()
    assert [c.path for c in d.changes] == ["f3.md"] and reads == [str(wt / "f3.md")]
    # a recent (racy) file is always re-read, even with the stat it had
    reads.clear()
    (wt / "f3.md").write_text("line 3\n")
    bl.diff()
    assert reads == [str(wt / "f3.md")]
    # a reset makes a cache for the new commit; a corrupt cache is ignored
    bl.stat_cache.path.write_text("{not json")
    assert bl.diff().changes == []
