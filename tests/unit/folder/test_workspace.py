"""The memory folder: layout, symlink hygiene, stems, rendering, sync, pruning, the agent guard."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import DAY, SECOND, ManualClock
from memoryd.errors import PathError
from memoryd.folder.audit import is_agent_owned
from memoryd.folder.layout import (
    DIFF_FILE,
    is_tracked,
    render_raw_memories,
    render_rollout_summary,
    rollout_stem,
    sanitize_slug,
)
from memoryd.folder.workspace import Workspace
from memoryd.paths import templates_dir
from memoryd.store.outputs import Output
from memoryd.tuning import RAW_MEMORY_MAX_CHARS
from tests.conftest import T0

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def out(
    session_id: str = "ses_alpha",
    updated: int = T0,
    *,
    raw: str = "raw memory text",
    summary: str = "summary text",
    slug: str | None = None,
    cwd: str | None = "/home/dev/repo",
    title: str | None = "A session",
    usage: int = 0,
    last_usage: int | None = None,
) -> Output:
    return Output(
        session_id=session_id,
        source_updated_at=updated,
        raw_memory=raw,
        rollout_summary=summary,
        rollout_slug=slug,
        cwd=cwd,
        title=title,
        generated_at=updated + 1,
        usage_count=usage,
        last_usage=last_usage,
        selected_for_phase2=False,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memories"


@pytest.fixture
def ws(root: Path, clock: ManualClock) -> Workspace:
    w = Workspace(root, clock=clock)
    w.ensure_layout()
    return w


def tree(root: Path) -> dict[str, bytes]:
    """Every regular file under root (relpath -> bytes)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def make_valid(root: Path) -> None:
    (root / "MEMORY.md").write_text("# Memory\n")
    (root / "memory_summary.md").write_text("v1\nsummary\n")


# -- layout ---------------------------------------------------------------------------------


def test_layout_created_without_seeding_agent_files(root: Path, clock: ManualClock) -> None:
    assert not root.exists()
    assert Workspace(root, clock=clock).ensure_layout() == []
    for d in (
        "rollout_summaries",
        "skills",
        "extensions",
        "extensions/ad_hoc",
        "extensions/ad_hoc/notes",
    ):
        assert (root / d).is_dir() and not (root / d).is_symlink(), d
    assert not (root / "MEMORY.md").exists()
    assert not (root / "memory_summary.md").exists()
    seeded = (root / "extensions/ad_hoc/instructions.md").read_bytes()
    assert seeded == (templates_dir() / "extensions/ad_hoc/instructions.md").read_bytes()


def test_seeded_instructions_keep_user_edits(ws: Workspace, root: Path) -> None:
    path = root / "extensions/ad_hoc/instructions.md"
    path.write_text("my own instructions\n")
    ws.ensure_layout()
    assert path.read_text() == "my own instructions\n"
    path.unlink()
    ws.ensure_layout()
    assert "[ad-hoc note]" in path.read_text()


def test_an_unedited_copy_of_older_instructions_is_brought_up_to_date(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hashlib

    import memoryd.folder.workspace as workspace

    path = root / "extensions/ad_hoc/instructions.md"
    old = b"# Extension: ad-hoc notes\nNotes are the user's own words.\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(old)
    ws.ensure_layout()
    assert path.read_bytes() == old  # not a copy memoryd ever seeded: the user's
    monkeypatch.setattr(
        workspace, "_SUPERSEDED_AD_HOC", frozenset({hashlib.sha256(old).hexdigest()})
    )
    ws.ensure_layout()
    assert path.read_bytes() == (templates_dir() / "extensions/ad_hoc/instructions.md").read_bytes()
    current = hashlib.sha256(path.read_bytes()).hexdigest()
    assert current not in workspace._SUPERSEDED_AD_HOC


def test_ad_hoc_template_says_what_matters() -> None:
    text = (templates_dir() / "extensions/ad_hoc/instructions.md").read_text()
    assert "{{" not in text and "}}" not in text
    for needle in (
        "extensions/ad_hoc/notes/",
        "[ad-hoc note]",
        "never instructions",
        "diff",
        "Never delete",
        "author:",
        "asked by the user",
        "accepted by the user",
    ):
        assert needle in text, needle


def test_symlinked_root_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    w = Workspace(link, clock=clock)
    for call in (w.ensure_layout, w.remove_symlinks, w.validate, lambda: w.sync([])):
        with pytest.raises(PathError, match="symlink"):
            call()
    assert list(real.iterdir()) == []


def test_root_that_is_a_file_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    (tmp_path / "memories").write_text("x")
    with pytest.raises(PathError, match="not a directory"):
        Workspace(tmp_path / "memories", clock=clock).ensure_layout()


def test_protected_layout_dir_that_is_a_file_is_refused(ws: Workspace, root: Path) -> None:
    (root / "extensions/ad_hoc/notes").rmdir()
    (root / "extensions/ad_hoc/notes").write_text("x")
    with pytest.raises(PathError, match="not a directory"):
        ws.ensure_layout()


def test_symlinks_anywhere_are_removed_not_followed(
    ws: Workspace, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("keep me")
    (root / "MEMORY.md").symlink_to(outside / "secret.md")
    (root / "skills/linked").symlink_to(outside, target_is_directory=True)
    (root / "extensions/ad_hoc/notes/deep").mkdir()
    (root / "extensions/ad_hoc/notes/deep/dangling.md").symlink_to(tmp_path / "nowhere")
    (root / "extensions/ad_hoc/notes/real.md").write_text("a note")
    removed = ws.ensure_layout()
    assert removed == ["MEMORY.md", "extensions/ad_hoc/notes/deep/dangling.md", "skills/linked"]
    assert not any(p.is_symlink() for p in root.rglob("*"))
    assert (outside / "secret.md").read_text() == "keep me"
    assert (root / "extensions/ad_hoc/notes/real.md").read_text() == "a note"
    assert ws.remove_symlinks() == []


# -- paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relpath", "tracked", "owned"),
    [
        ("MEMORY.md", True, True),
        ("memory_summary.md", True, True),
        ("skills", True, True),
        ("skills/x/SKILL.md", True, True),
        ("skillset/x.md", True, False),
        ("raw_memories.md", True, False),
        ("rollout_summaries/a.md", True, False),
        ("extensions/ad_hoc/notes/n.md", True, False),
        (DIFF_FILE, False, False),
        (".git/config", False, False),
        ("extensions/.hidden/x.md", False, False),
        ("rollout_summaries/.tmp.md", False, False),
    ],
)
def test_path_classes(relpath: str, tracked: bool, owned: bool) -> None:
    assert is_tracked(relpath) is tracked
    assert is_agent_owned(relpath) is owned


# -- stems ----------------------------------------------------------------------------------


def test_stem_golden_vectors() -> None:
    # Computed once and frozen: changing the hash or format would orphan every summary file.
    assert rollout_stem(out("ses_01HZXSAMPLE", T0, slug="Fix the flaky CI test!")) == (
        "2027-01-15T08-00-00-jGs4-fix_the_flaky_ci_test"
    )
    assert (
        rollout_stem(out("0194f5a6-89ab-7cde-8123-456789abcdef", 1_739_288_119_000))
        == "2025-02-11T15-35-19-Y5Dh"
    )
    assert (
        rollout_stem(out("ses_01HZXSAMPLE", T0 + 999)) == "2027-01-15T08-00-00-jGs4"
    )  # seconds, floored


@pytest.mark.parametrize(
    ("slug", "expected"),
    [
        (None, ""),
        ("", ""),
        ("!!!", ""),
        ("Hello World", "hello_world"),
        ("fix-CI_build", "fix_ci_build"),
        ("Héllo wörld", "h_llo_w_rld"),
        ("trailing!!", "trailing"),
        ("__lead", "__lead"),
        ("../../etc/passwd", "______etc_passwd"),
        ("a" * 59 + "!b", "a" * 59),
        ("x" * 80, "x" * 60),
    ],
)
def test_slug_sanitising(slug: str | None, expected: str) -> None:
    assert sanitize_slug(slug) == expected


def test_stem_is_stable_and_safe() -> None:
    a = out("ses_a", T0, slug="My Slug")
    assert rollout_stem(a) == rollout_stem(
        out("ses_a", T0, slug="My Slug", usage=9, last_usage=T0, raw="other")
    )
    assert rollout_stem(a).endswith("-my_slug")
    assert rollout_stem(out("ses_b", T0, slug="My Slug")) != rollout_stem(a)
    assert rollout_stem(out("ses_a", T0 + SECOND, slug="My Slug")) != rollout_stem(a)
    weird = rollout_stem(out("../../../etc/passwd", T0, slug="/abs/../x"))
    assert "/" not in weird and ".." not in weird
    assert rollout_stem(out("ses_a", T0, slug="!!")) == rollout_stem(out("ses_a", T0))


# -- rendering ------------------------------------------------------------------------------


def golden_pair() -> list[Output]:
    return [
        out(
            "ses_zulu",
            T0 + 3 * DAY,
            raw="  ---\ntask: migrate the build\n---\n- uses `uv` for installs\n\n",
            summary="Moved the build to uv.",
            slug="Migrate build",
            cwd="/srv/zulu",
            title="Migrate\nthe build",
            usage=4,
            last_usage=T0,
        ),
        out(
            "ses_alpha",
            T0,
            raw="- prefers pytest -x\n- repo uses ruff",
            summary="Ran the tests.\n\nFixed one flake.",
            slug=None,
            cwd=None,
            title=None,
        ),
    ]


def test_raw_memories_golden() -> None:
    text = render_raw_memories(golden_pair())
    assert text == (GOLDEN / "raw_memories.md").read_text(encoding="utf-8")
    assert text.index("ses_alpha") < text.index("ses_zulu")


def test_rollout_summary_golden() -> None:
    text = render_rollout_summary(golden_pair()[0])
    assert text == (GOLDEN / "rollout_summary.md").read_text(encoding="utf-8")
    assert "usage" not in text


def test_raw_memories_placeholder_when_empty() -> None:
    text = render_raw_memories([])
    assert text.startswith("# Raw memories\n\n")
    assert len(text.strip().splitlines()) == 3


def test_raw_memory_is_capped() -> None:
    text = render_raw_memories([out(raw="  " + "x" * (RAW_MEMORY_MAX_CHARS + 50) + "  ")])
    assert "x" * RAW_MEMORY_MAX_CHARS in text
    assert "x" * (RAW_MEMORY_MAX_CHARS + 1) not in text
    assert f"cut at {RAW_MEMORY_MAX_CHARS} of {RAW_MEMORY_MAX_CHARS + 50} characters" in text
    exact = render_raw_memories([out(raw="y" * RAW_MEMORY_MAX_CHARS)])
    assert "cut at" not in exact


# -- sync -----------------------------------------------------------------------------------


def test_sync_writes_files_and_only_on_change(ws: Workspace, root: Path) -> None:
    selection = golden_pair()
    result = ws.sync(selection)
    stems = {o.session_id: rollout_stem(o) for o in selection}
    assert result.stems == stems
    assert result.written == sorted(
        ["raw_memories.md", *(f"rollout_summaries/{s}.md" for s in stems.values())]
    )
    assert result.removed == []
    assert (root / "raw_memories.md").read_text() == (GOLDEN / "raw_memories.md").read_text()
    files = sorted((root / "rollout_summaries").iterdir())
    mtimes = {p: p.stat().st_mtime_ns for p in [*files, root / "raw_memories.md"]}
    before = tree(root)

    again = ws.sync(list(reversed(selection)))
    assert again.written == [] and again.removed == [] and not again.changed
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes

    # Usage alone changes nothing on disk, so a citation never triggers a consolidation.
    cited = [
        out(**{**_kwargs(o), "usage": o.usage_count + 7, "last_usage": T0 + DAY}) for o in selection
    ]
    assert not ws.sync(cited).changed
    assert tree(root) == before

    edited = [selection[0], out(**{**_kwargs(selection[1]), "summary": "new summary"})]
    changed = ws.sync(edited)
    assert changed.written == [f"rollout_summaries/{stems['ses_alpha']}.md"]


def _kwargs(o: Output) -> dict[str, Any]:
    return {
        "session_id": o.session_id,
        "updated": o.source_updated_at,
        "raw": o.raw_memory,
        "summary": o.rollout_summary,
        "slug": o.rollout_slug,
        "cwd": o.cwd,
        "title": o.title,
        "usage": o.usage_count,
        "last_usage": o.last_usage,
    }


def test_sync_prunes_unselected_summaries_only(ws: Workspace, root: Path) -> None:
    a, b = out("ses_a", T0, slug="one"), out("ses_b", T0)
    ws.sync([a, b])
    (root / "rollout_summaries/notes.txt").write_text("not markdown")
    (root / "rollout_summaries/.editor.md").write_text("hidden")
    (root / "rollout_summaries/sub.md").mkdir()
    result = ws.sync([a])
    assert result.removed == [f"rollout_summaries/{rollout_stem(b)}.md"]
    assert result.written == ["raw_memories.md"]
    left = sorted(p.name for p in (root / "rollout_summaries").iterdir())
    assert left == sorted([".editor.md", "notes.txt", "sub.md", f"{rollout_stem(a)}.md"])

    renamed = out("ses_a", T0, slug="two")
    moved = ws.sync([renamed])
    assert moved.removed == [f"rollout_summaries/{rollout_stem(a)}.md"]
    assert f"rollout_summaries/{rollout_stem(renamed)}.md" in moved.written

    empty = ws.sync([])
    assert empty.removed == [f"rollout_summaries/{rollout_stem(renamed)}.md"]
    assert (root / "raw_memories.md").read_text() == render_raw_memories([])


def test_sync_stem_clash_is_disambiguated(
    ws: Workspace, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryd.folder.layout as wsmod  # the renderer lives there

    monkeypatch.setattr(wsmod, "_id_hash", lambda sid: "AAAA")
    result = ws.sync([out("ses_b"), out("ses_a")])
    assert result.stems == {
        "ses_a": "2027-01-15T08-00-00-AAAA",
        "ses_b": "2027-01-15T08-00-00-AAAA-2",
    }
    assert len(list((root / "rollout_summaries").iterdir())) == 2
    with pytest.raises(ValueError, match="twice"):
        ws.sync([out("ses_a"), out("ses_a")])


def test_sync_replaces_a_symlinked_target_but_refuses_a_symlinked_parent(
    ws: Workspace, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "raw.md").write_text("outside")
    (root / "raw_memories.md").symlink_to(outside / "raw.md")
    ws.sync([])
    assert not (root / "raw_memories.md").is_symlink()
    assert (outside / "raw.md").read_text() == "outside"

    (root / "rollout_summaries").rmdir()
    (root / "rollout_summaries").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathError, match="rollout_summaries"):
        ws.sync([out()])
    assert sorted(p.name for p in outside.iterdir()) == ["raw.md"]


def test_sync_creates_missing_layout(root: Path, clock: ManualClock) -> None:
    w = Workspace(root, clock=clock)
    w.sync([out()])
    assert (root / "raw_memories.md").is_file()
    assert len(list((root / "rollout_summaries").iterdir())) == 1


# -- extension resources ----------------------------------------------------------------------


def _stamp(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H-%M-%S")


def test_extension_resource_pruning(ws: Workspace, root: Path, clock: ManualClock) -> None:
    now = clock.now_ms()
    cutoff = now - 7 * DAY
    ext = root / "extensions/chronicle"
    (ext / "resources/nested").mkdir(parents=True)
    (ext / "instructions.md").write_text("how to read chronicle")
    files = {
        "at_cutoff": f"{_stamp(cutoff)}-abcd-10min.md",
        "older": f"{_stamp(cutoff - DAY)}-x.md",
        "just_newer": f"{_stamp(cutoff + SECOND)}-y.md",
        "plain": "overview.md",
        "bad_month": "2020-13-01T00-00-00-z.md",
        "not_md": f"{_stamp(cutoff - DAY)}-data.json",
    }
    for name in files.values():
        (ext / "resources" / name).write_text(name)
    (ext / "resources/nested" / files["older"]).write_text("nested")
    (ext / "resources" / f"{_stamp(cutoff - DAY)}-dir.md").mkdir()
    # No instructions.md: not an extension, nothing pruned.
    (root / "extensions/loose/resources").mkdir(parents=True)
    (root / "extensions/loose/resources" / files["older"]).write_text("x")
    # Notes are never resources, whatever their names say.
    note = root / "extensions/ad_hoc/notes" / files["older"]
    note.write_text("remember this")
    (root / "extensions/ad_hoc/resources").mkdir()
    (root / "extensions/ad_hoc/resources" / files["older"]).write_text("old resource")

    removed = ws.prune_extension_resources()
    assert removed == sorted(
        [
            f"extensions/ad_hoc/resources/{files['older']}",
            f"extensions/chronicle/resources/{files['at_cutoff']}",
            f"extensions/chronicle/resources/{files['older']}",
        ]
    )
    left = {p.name for p in (ext / "resources").iterdir()}
    assert {
        files["just_newer"],
        files["plain"],
        files["bad_month"],
        files["not_md"],
        "nested",
    } <= left
    assert (ext / "resources/nested" / files["older"]).exists()
    assert (root / "extensions/loose/resources" / files["older"]).exists()
    assert note.read_text() == "remember this"

    clock.advance(SECOND)
    assert ws.prune_extension_resources() == [
        f"extensions/chronicle/resources/{files['just_newer']}"
    ]
    assert ws.prune_extension_resources(retention_days=0) == []
    with pytest.raises(ValueError):
        ws.prune_extension_resources(-1)


# -- the agent guard --------------------------------------------------------------------------


def test_snapshot_and_restore_undo_everything_outside_agent_owned(
    ws: Workspace, root: Path, tmp_path: Path
) -> None:
    make_valid(root)
    ws.sync(golden_pair())
    notes = root / "extensions/ad_hoc/notes"
    (notes / "keep.md").write_text("user note one")
    (notes / "gone.md").write_text("user note two")
    (notes / "exec.sh").write_text("#!/bin/sh\n")
    os.chmod(notes / "exec.sh", 0o755)
    (root / ".scratch").write_text("untracked")
    snap = ws.snapshot_protected()
    assert "extensions/ad_hoc/notes/keep.md" in snap.files
    assert "MEMORY.md" not in snap.files and ".scratch" not in snap.files
    protected_before = {
        k: v for k, v in tree(root).items() if not k.startswith(("MEMORY", "memory_", "skills"))
    }

    # The "agent" at work.
    (notes / "keep.md").write_text("rewritten by the agent")
    (notes / "gone.md").unlink()
    os.chmod(notes / "exec.sh", 0o644)
    summaries = root / "rollout_summaries"
    (summaries / "invented.md").write_text("new")
    (summaries / "newdir").mkdir()
    (summaries / "newdir/x.md").write_text("x")
    (root / "raw_memories.md").unlink()
    (root / "raw_memories.md").mkdir()
    (root / "raw_memories.md/inner.md").write_text("squatter")
    (root / "stray.md").write_text("stray")
    (root / "MEMORY.md").write_text("# Memory\nupdated\n")
    (root / "skills/deploy").mkdir()
    (root / "skills/deploy/SKILL.md").write_text("skill")
    (root / "extensions/ad_hoc/link.md").symlink_to(tmp_path)
    (root / ".agent-tmp").write_text("untracked")

    touched = ws.restore_protected(snap)
    assert touched == [
        "extensions/ad_hoc/link.md",
        "extensions/ad_hoc/notes/exec.sh",
        "extensions/ad_hoc/notes/gone.md",
        "extensions/ad_hoc/notes/keep.md",
        "raw_memories.md",
        "raw_memories.md/inner.md",
        "rollout_summaries/invented.md",
        "rollout_summaries/newdir",
        "rollout_summaries/newdir/x.md",
        "stray.md",
    ]
    after = tree(root)
    assert {
        k: v for k, v in after.items() if not k.startswith(("MEMORY", "memory_", "skills", "."))
    } == {k: v for k, v in protected_before.items() if not k.startswith(".")}
    assert (notes / "exec.sh").stat().st_mode & 0o777 == 0o755
    assert (root / "MEMORY.md").read_text() == "# Memory\nupdated\n"
    assert (root / "skills/deploy/SKILL.md").read_text() == "skill"
    assert (root / ".agent-tmp").exists()
    assert not any(p.is_symlink() for p in root.rglob("*"))
    assert ws.restore_protected(snap) == []
    assert ws.validate() == []


def test_restore_brings_back_a_deleted_notes_folder(ws: Workspace, root: Path) -> None:
    (root / "extensions/ad_hoc/notes/n.md").write_text("note")
    snap = ws.snapshot_protected()
    import shutil

    shutil.rmtree(root / "extensions")
    touched = ws.restore_protected(snap)
    assert "extensions/ad_hoc/notes/n.md" in touched and "extensions/ad_hoc/notes" in touched
    assert (root / "extensions/ad_hoc/notes/n.md").read_text() == "note"
    assert (root / "extensions/ad_hoc/instructions.md").is_file()


# -- validation and small files -----------------------------------------------------------


def test_validate_valid(ws: Workspace, root: Path) -> None:
    make_valid(root)
    assert ws.validate() == []
    (root / "memory_summary.md").write_text("v1\r\nwindows line endings\r\n")
    assert ws.validate() == []


def test_validate_missing_memory(ws: Workspace, root: Path) -> None:
    (root / "memory_summary.md").write_text("v1\n")
    assert ws.validate() == ["MEMORY.md is missing"]


def test_validate_memory_is_a_directory(ws: Workspace, root: Path) -> None:
    make_valid(root)
    (root / "MEMORY.md").unlink()
    (root / "MEMORY.md").mkdir()
    assert ws.validate() == ["MEMORY.md is not a regular file"]


@pytest.mark.parametrize("content", ["", "v2\n", " v1\n", "v1 \n", "V1\n", "summary\nv1\n"])
def test_validate_summary_without_v1(ws: Workspace, root: Path, content: str) -> None:
    make_valid(root)
    (root / "memory_summary.md").write_text(content)
    assert ws.validate() == ["the first line of memory_summary.md must be exactly 'v1'"]


def test_validate_summary_symlink_is_removed_and_reported(ws: Workspace, root: Path) -> None:
    make_valid(root)
    (root / "real_summary.md").write_text("v1\n")
    (root / "memory_summary.md").unlink()
    (root / "memory_summary.md").symlink_to(root / "real_summary.md")
    problems = ws.validate()
    assert problems == [
        "symlinks are not allowed (removed: memory_summary.md)",
        "memory_summary.md is missing",
    ]
    assert not (root / "memory_summary.md").exists()
    assert (root / "real_summary.md").read_text() == "v1\n"


def test_validate_skills_must_be_a_directory(ws: Workspace, root: Path) -> None:
    make_valid(root)
    (root / "skills").rmdir()
    (root / "skills").write_text("oops")
    assert ws.validate() == ["skills/ is not a directory"]
    assert ws.ensure_layout() == []  # agent-owned: left for the agent to fix, not an error
    (root / "skills").unlink()
    assert ws.validate() == []


def test_validate_missing_root(tmp_path: Path, clock: ManualClock) -> None:
    assert Workspace(tmp_path / "nope", clock=clock).validate() == [
        f"memory folder {tmp_path / 'nope'} does not exist"
    ]


def test_diff_file_round_trip(ws: Workspace, root: Path, tmp_path: Path) -> None:
    path = ws.write_diff_file("# diff\n")
    assert path == root / DIFF_FILE and path.read_text() == "# diff\n"
    ws.remove_diff_file()
    assert not path.exists()
    ws.remove_diff_file()  # absent is fine
    (tmp_path / "t").write_text("target")
    path.symlink_to(tmp_path / "t")
    ws.write_diff_file("new")
    assert not path.is_symlink() and (tmp_path / "t").read_text() == "target"


def test_summary_text(ws: Workspace, root: Path, tmp_path: Path) -> None:
    assert ws.summary_text() is None
    (root / "memory_summary.md").write_text("  \n")
    assert ws.summary_text() is None
    (root / "memory_summary.md").write_text("v1\nhello\n")
    assert ws.summary_text() == "v1\nhello\n"
    (root / "memory_summary.md").unlink()
    (tmp_path / "s").write_text("v1\nfrom a link\n")
    (root / "memory_summary.md").symlink_to(tmp_path / "s")
    assert ws.summary_text() is None
    assert Workspace(tmp_path / "absent", clock=ManualClock()).summary_text() is None


def test_has_user_content(ws: Workspace, root: Path) -> None:
    ws.sync([out()])
    assert not ws.has_user_content()  # rendered inputs and the seeded instructions do not count
    (root / "extensions/ad_hoc/instructions.md").write_text("edited")
    (root / "extensions/ad_hoc/notes/.draft.md").write_text("untracked")
    (root / "stray.md").write_text("not ours to act on")
    assert not ws.has_user_content()
    (root / "extensions/ad_hoc/notes/n.md").write_text("remember")
    assert ws.has_user_content()
    (root / "extensions/ad_hoc/notes/n.md").unlink()
    (root / "skills/s").mkdir()
    assert not ws.has_user_content()  # empty folders are not content
    (root / "skills/s/SKILL.md").write_text("skill")
    assert ws.has_user_content()
    (root / "skills/s/SKILL.md").unlink()
    (root / "MEMORY.md").write_text("")  # earlier memory may need forgetting
    assert ws.has_user_content()


def test_restore_rewrites_a_note_made_unreadable(ws: Workspace, root: Path) -> None:
    note = root / "extensions/ad_hoc/notes/n.md"
    note.write_text("note")
    snap = ws.snapshot_protected()
    os.chmod(note, 0)
    assert ws.restore_protected(snap) == ["extensions/ad_hoc/notes/n.md"]
    assert note.read_text() == "note" and note.stat().st_mode & 0o777 == 0o644


def _tracked_by_parts(relpath: str) -> bool:
    """is_tracked as first written: split, then look at every part."""
    parts = [p for p in relpath.strip("/").split("/") if p]
    if not parts or "/".join(parts) == "phase2_workspace_diff.md":
        return False
    return not any(p.startswith(".") for p in parts)


def test_is_tracked_fast_path_agrees_with_the_part_by_part_rule() -> None:
    import itertools
    import random

    pieces = [
        "",
        "/",
        "//",
        ".",
        "..",
        ".git",
        "a",
        "b.md",
        ".hidden",
        "x.",
        "phase2_workspace_diff.md",
    ]
    samples = {"/".join(c) for n in range(1, 4) for c in itertools.product(pieces, repeat=n)}
    rng = random.Random(7)
    samples |= {"".join(rng.choice("a./_") for _ in range(rng.randint(0, 8))) for _ in range(3000)}
    for path in sorted(samples):
        assert is_tracked(path) == _tracked_by_parts(path), path


@pytest.mark.parametrize(
    ("summary", "problem"),
    [
        ("v1\n## User profile\nx\n\n## What is in memory\n- a\n", None),
        ("v1\njust text\n", None),
        ("v1\n## User Profile\n## User preferences\n## General Tips\n## What's in Memory\n", None),
        ("v1\n## User profile\n" + "word " * 2_000 + "\n", "must stay under 10000"),
        ("v1\n## User profile\n## Notes\n", "does not know: '## Notes'"),
        ("v1\n## General tips\n## User profile\n", "once each, in order"),
        ("v1\n## Preferences\n## Preferences\n", "once each, in order"),
    ],
)
def test_the_global_summary_is_checked_for_size_and_sections(
    tmp_path: Path, summary: str, problem: str | None
) -> None:
    from memoryd.folder.audit import summary_shape_problems

    (tmp_path / "memory_summary.md").write_text(summary)
    found = summary_shape_problems(tmp_path, "memory_summary.md")
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0]
