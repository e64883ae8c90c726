"""The Codex exchange: home resolution, overlap refusal, import (with forgetting), export, echo guard."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memoryd.extensions import codex as codex_exchange
from memoryd.extensions.codex import (
    FROM_CODEX,
    FROM_OPENCODE,
    codex_home_dir,
    codex_memory_root,
    exchange_blocked,
    export_codex,
    import_codex,
    roots_overlap,
)
from memoryd.paths import templates_dir
from memoryd.settings import Settings
from tests.unit.extension_helpers import age_everything, mtimes, settings_with, write

SECRET = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


def template(name: str) -> bytes:
    return (templates_dir() / "extensions" / name / "instructions.md").read_bytes()


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "memoryd" / "memories"
    root.mkdir(parents=True)
    return root


@pytest.fixture
def codex_home(tmp_path: Path) -> Path:
    home = tmp_path / "codex-home"
    (home / "memories").mkdir(parents=True)
    return home


def imp(codex_home: Path, **extra: object) -> Settings:
    return settings_with(codex_import=True, codex_home=str(codex_home), **extra)


def exp(codex_home: Path, **extra: object) -> Settings:
    return settings_with(codex_export=True, codex_home=str(codex_home), **extra)


COPIES = "extensions/codex_import/resources/codex"
EXPORTED = "extensions/opencode_import/resources/opencode"


# -- homes and overlap --------------------------------------------------------------------------


def test_codex_home_precedence(tmp_path: Path) -> None:
    assert (
        codex_home_dir(settings_with(codex_home=str(tmp_path)), {"CODEX_HOME": "/env"}) == tmp_path
    )
    assert codex_home_dir(Settings(), {"CODEX_HOME": "/env/codex", "HOME": "/h"}) == Path(
        "/env/codex"
    )
    assert codex_home_dir(Settings(), {"CODEX_HOME": "  ", "HOME": "/h"}) == Path("/h/.codex")
    assert codex_home_dir(Settings(), {"HOME": "/h"}) == Path("/h/.codex")
    # No such home: a fresh Codex home is a v2 one.
    assert codex_memory_root(Settings(), {"HOME": "/h"}) == Path("/h/.codex/memories_v2")


def test_the_codex_folder_follows_codex_version(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    fresh = settings_with(codex_home=str(home))
    assert codex_memory_root(fresh) == home / "memories_v2"
    (home / "memories").mkdir()  # a legacy home
    assert codex_memory_root(fresh) == home / "memories"
    pinned = settings_with(codex_home=str(home), codex_version="v2")
    assert codex_memory_root(pinned) == home / "memories_v2"
    shutil.rmtree(home / "memories")
    v1 = settings_with(codex_home=str(home), codex_version="v1")
    assert codex_memory_root(v1) == home / "memories"
    assert sorted(os.listdir(home)) == []  # choosing a folder creates none


def test_a_v2_home_is_imported_from_and_exported_to_memories_v2(
    tmp_path: Path, memory_root: Path
) -> None:
    home = tmp_path / "v2-home"
    write(home / "memories_v2" / "memory_summary.md", "v1\ncodex v2 summary\n")
    assert import_codex(imp(home), memory_root)
    copied = memory_root / "extensions" / "codex_import" / "resources" / "codex"
    assert sorted(os.listdir(copied)) == ["memory_summary.md"]  # v2 has no MEMORY.md
    write(memory_root / "MEMORY.md", "# ours\n")
    write(memory_root / "memory_summary.md", "v1\nours\n")
    assert export_codex(exp(home), memory_root)
    assert (home / "memories_v2" / EXPORTED / "memory_summary.md").read_text() == "v1\nours\n"
    assert not (home / "memories").exists()  # never switches the home to legacy


def test_roots_overlap(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    assert roots_overlap(a, a)
    assert roots_overlap(a, a / "inner") and roots_overlap(a / "inner", a)
    assert roots_overlap(a / "x" / ".." / "inner", a)
    assert not roots_overlap(a, b)
    assert not roots_overlap(tmp_path / "ab", a)  # a shared name prefix is not nesting
    assert not roots_overlap(tmp_path / "missing1", tmp_path / "missing2")
    link = tmp_path / "link"
    link.symlink_to(a, target_is_directory=True)
    assert roots_overlap(link, a) and roots_overlap(link / "deeper", a)


def test_overlap_by_inode_when_paths_do_not_resolve_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stands in for a case-insensitive alias or a bind mount: lexically different, same folder.
    a = tmp_path / "a"
    (a / "inner").mkdir(parents=True)
    alias = tmp_path / "alias"
    alias.symlink_to(a, target_is_directory=True)
    monkeypatch.setattr(codex_exchange, "_resolve", lambda p: Path(p).absolute())
    assert roots_overlap(alias, a)
    assert roots_overlap(alias / "inner", a)
    assert roots_overlap(a, alias / "inner")
    assert not roots_overlap(tmp_path / "elsewhere", a)


def test_overlap_fails_closed_when_undecidable(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert roots_overlap(loop / "x", tmp_path / "other") in (True, False)  # never raises
    assert roots_overlap(Path("bad\x00path"), tmp_path)


@pytest.mark.parametrize("layout", ["same", "codex_inside", "memory_inside", "symlink"])
def test_overlapping_roots_are_refused(tmp_path: Path, layout: str) -> None:
    if layout == "same":
        codex_home = tmp_path / "h"
        memory_root = codex_home / "memories"
    elif layout == "codex_inside":
        memory_root = tmp_path / "m"
        codex_home = memory_root / "sub"
    elif layout == "memory_inside":
        codex_home = tmp_path / "h"
        memory_root = codex_home / "memories" / "ours"
    else:
        memory_root = tmp_path / "m"
        codex_home = tmp_path / "linked-home"
        codex_home.mkdir()
        (codex_home / "memories").symlink_to(memory_root, target_is_directory=True)
    memory_root.mkdir(parents=True, exist_ok=True)
    (codex_home / "memories").mkdir(parents=True, exist_ok=True)
    write(memory_root / "MEMORY.md", "ours\n")
    write(memory_root / "memory_summary.md", "v1\nours\n")
    both = settings_with(codex_import=True, codex_export=True, codex_home=str(codex_home))
    assert exchange_blocked(both, memory_root) is not None
    age_everything(tmp_path)
    before = mtimes(tmp_path)
    assert import_codex(both, memory_root) is False
    assert export_codex(both, memory_root) is False
    assert mtimes(tmp_path) == before


# -- import -------------------------------------------------------------------------------------


def test_import_copies_and_is_idempotent(codex_home: Path, memory_root: Path) -> None:
    write(codex_home / "memories" / "MEMORY.md", "# Codex memory\n")
    write(codex_home / "memories" / "memory_summary.md", "v1\nsummary\n")
    assert import_codex(imp(codex_home), memory_root) is True
    assert files(memory_root) == {
        f"{COPIES}/MEMORY.md": b"# Codex memory\n",
        f"{COPIES}/memory_summary.md": b"v1\nsummary\n",
        "extensions/codex_import/instructions.md": template("codex_import"),
    }
    age_everything(memory_root)
    before = mtimes(memory_root)
    assert import_codex(imp(codex_home), memory_root) is False
    assert mtimes(memory_root) == before
    write(codex_home / "memories" / "MEMORY.md", "# Codex memory, revised\n")
    assert import_codex(imp(codex_home), memory_root) is True
    assert (memory_root / COPIES / "MEMORY.md").read_text() == "# Codex memory, revised\n"
    assert (
        mtimes(memory_root)[f"{COPIES}/memory_summary.md"] == before[f"{COPIES}/memory_summary.md"]
    )


def test_import_redacts(codex_home: Path, memory_root: Path) -> None:
    write(codex_home / "memories" / "MEMORY.md", f"use token {SECRET} for the API\n")
    import_codex(imp(codex_home), memory_root)
    copy = (memory_root / COPIES / "MEMORY.md").read_text()
    assert SECRET not in copy and "[REDACTED" in copy


def test_vanished_artifacts_are_forgotten(codex_home: Path, memory_root: Path) -> None:
    write(codex_home / "memories" / "MEMORY.md", "m\n")
    write(codex_home / "memories" / "memory_summary.md", "v1\n")
    import_codex(imp(codex_home), memory_root)
    (codex_home / "memories" / "MEMORY.md").unlink()
    assert import_codex(imp(codex_home), memory_root) is True
    assert not (memory_root / COPIES / "MEMORY.md").exists()
    assert (memory_root / COPIES / "memory_summary.md").exists()
    (codex_home / "memories" / "memory_summary.md").unlink()
    assert import_codex(imp(codex_home), memory_root) is True
    assert not (memory_root / COPIES / "memory_summary.md").exists()
    assert (
        memory_root / "extensions/codex_import/instructions.md"
    ).exists()  # explains the deletions
    assert import_codex(imp(codex_home), memory_root) is False


def test_unreachable_codex_root_changes_nothing(
    codex_home: Path, memory_root: Path, tmp_path: Path
) -> None:
    write(codex_home / "memories" / "MEMORY.md", "m\n")
    import_codex(imp(codex_home), memory_root)
    age_everything(memory_root)
    before = mtimes(memory_root)
    codex_home.rename(tmp_path / "away")
    assert import_codex(imp(codex_home), memory_root) is False
    assert mtimes(memory_root) == before
    (tmp_path / "away").rename(codex_home)
    os.rename(codex_home / "memories", codex_home / "memories.bak")
    write(codex_home / "memories", "not a folder")
    assert import_codex(imp(codex_home), memory_root) is False
    assert mtimes(memory_root) == before


def test_odd_artifact_keeps_our_copy(codex_home: Path, memory_root: Path, tmp_path: Path) -> None:
    write(codex_home / "memories" / "MEMORY.md", "m\n")
    import_codex(imp(codex_home), memory_root)
    (codex_home / "memories" / "MEMORY.md").unlink()
    (codex_home / "memories" / "MEMORY.md").symlink_to(write(tmp_path / "x.md", "elsewhere\n"))
    os.mkfifo(codex_home / "memories" / "memory_summary.md")
    assert import_codex(imp(codex_home), memory_root) is False  # and no hang on the FIFO
    assert (memory_root / COPIES / "MEMORY.md").read_text() == "m\n"


def test_import_without_artifacts_seeds_nothing(codex_home: Path, memory_root: Path) -> None:
    assert import_codex(imp(codex_home), memory_root) is False
    assert not (memory_root / "extensions").exists()


def test_import_disabled(codex_home: Path, memory_root: Path) -> None:
    write(codex_home / "memories" / "MEMORY.md", "m\n")
    assert import_codex(settings_with(codex_home=str(codex_home)), memory_root) is False
    assert not (memory_root / "extensions").exists()


def test_import_uses_codex_home_env(
    codex_home: Path, memory_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(codex_home / "memories" / "MEMORY.md", "from env\n")
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    assert import_codex(settings_with(codex_import=True), memory_root) is True
    assert (memory_root / COPIES / "MEMORY.md").read_text() == "from env\n"


def test_import_refuses_symlinked_copy_folder(
    codex_home: Path, memory_root: Path, tmp_path: Path
) -> None:
    write(codex_home / "memories" / "MEMORY.md", "m\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (memory_root / "extensions").symlink_to(elsewhere, target_is_directory=True)
    assert import_codex(imp(codex_home), memory_root) is False
    assert list(elsewhere.iterdir()) == []


# -- export -------------------------------------------------------------------------------------


def ours(
    memory_root: Path,
    summary: str = "v1\n## User profile\nx\n",
    memory: str = "# Project\n- fact\n",
) -> None:
    write(memory_root / "MEMORY.md", memory)
    write(memory_root / "memory_summary.md", summary)


def test_export_writes_into_an_existing_codex_root(codex_home: Path, memory_root: Path) -> None:
    ours(memory_root, memory=f"# P\n- key {SECRET}\n")
    assert export_codex(exp(codex_home), memory_root) is True
    got = files(codex_home / "memories")
    assert got[f"{EXPORTED}/memory_summary.md"] == b"v1\n## User profile\nx\n"
    assert (
        SECRET.encode() not in got[f"{EXPORTED}/MEMORY.md"]
        and b"[REDACTED" in got[f"{EXPORTED}/MEMORY.md"]
    )
    assert got["extensions/opencode_import/instructions.md"] == template("codex_export")
    age_everything(codex_home)
    before = mtimes(codex_home)
    assert export_codex(exp(codex_home), memory_root) is False
    assert mtimes(codex_home) == before
    ours(memory_root, summary="v1\nnewer\n")
    assert export_codex(exp(codex_home), memory_root) is True
    assert (codex_home / "memories" / EXPORTED / "memory_summary.md").read_text() == "v1\nnewer\n"


def test_export_never_bootstraps_codex(tmp_path: Path, memory_root: Path) -> None:
    ours(memory_root)
    home = tmp_path / "no-codex-yet"
    assert export_codex(exp(home), memory_root) is False
    assert not home.exists()
    home.mkdir()
    assert export_codex(exp(home), memory_root) is False
    assert list(home.iterdir()) == []


@pytest.mark.parametrize(
    "summary", [None, "", "v2\n", " v1\n", "summary without version\n", "v1 trailing\n"]
)
def test_export_needs_a_v1_summary(
    codex_home: Path, memory_root: Path, summary: str | None
) -> None:
    write(memory_root / "MEMORY.md", "m\n")
    if summary is not None:
        write(memory_root / "memory_summary.md", summary)
    assert export_codex(exp(codex_home), memory_root) is False
    assert list((codex_home / "memories").iterdir()) == []


def test_export_accepts_crlf_v1(codex_home: Path, memory_root: Path) -> None:
    ours(memory_root, summary="v1\r\nwindows\r\n")
    assert export_codex(exp(codex_home), memory_root) is True


def test_export_needs_our_memory_file(codex_home: Path, memory_root: Path) -> None:
    write(memory_root / "memory_summary.md", "v1\n")
    assert export_codex(exp(codex_home), memory_root) is False
    assert list((codex_home / "memories").iterdir()) == []


@pytest.mark.parametrize(
    "link_at",
    ["extensions", "extensions/opencode_import", "extensions/opencode_import/resources", EXPORTED],
)
def test_export_refuses_symlinked_extension_dirs(
    codex_home: Path, memory_root: Path, tmp_path: Path, link_at: str
) -> None:
    ours(memory_root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = codex_home / "memories" / link_at
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    assert export_codex(exp(codex_home), memory_root) is False
    assert list(elsewhere.iterdir()) == []


def test_export_replaces_a_symlinked_target_file(
    codex_home: Path, memory_root: Path, tmp_path: Path
) -> None:
    ours(memory_root)
    victim = write(tmp_path / "victim.txt", "keep me\n")
    dest = codex_home / "memories" / EXPORTED
    dest.mkdir(parents=True)
    (dest / "MEMORY.md").symlink_to(victim)
    assert export_codex(exp(codex_home), memory_root) is True
    assert victim.read_text() == "keep me\n"
    assert (
        not (dest / "MEMORY.md").is_symlink()
        and (dest / "MEMORY.md").read_text() == "# Project\n- fact\n"
    )


def test_export_never_raises(
    codex_home: Path, memory_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours(memory_root)

    def boom(*_a: object, **_k: object) -> Path:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(codex_exchange, "ensure_dirs", boom)
    assert export_codex(exp(codex_home), memory_root) is False


def test_export_disabled(codex_home: Path, memory_root: Path) -> None:
    ours(memory_root)
    assert (
        export_codex(settings_with(codex_home=str(codex_home), codex_import=True), memory_root)
        is False
    )
    assert list((codex_home / "memories").iterdir()) == []


# -- echo guard ---------------------------------------------------------------------------------


def test_echo_guard_in_both_instruction_files() -> None:
    ours_text = template("codex_import").decode()
    theirs = template("codex_export").decode()
    # Our consolidator tags Codex-derived memory and skips what came from us ...
    assert FROM_CODEX in ours_text and FROM_OPENCODE in ours_text
    assert f"skip `{FROM_OPENCODE}`" in ours_text.lower()
    # ... and Codex's consolidator does the mirror image.
    assert FROM_OPENCODE in theirs and FROM_CODEX in theirs
    assert f"skip `{FROM_CODEX}`" in theirs.lower()
    for text in (ours_text, theirs):
        assert "never instructions" in text.lower()
        assert "never edit, move or delete" in text.lower()
