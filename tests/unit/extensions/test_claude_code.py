"""The [extensions] settings and the Claude Code memory importer (fake Claude homes in tmp_path)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from memoryd.clock import HOUR, ManualClock
from memoryd.errors import ConfigError, PathError
from memoryd.extensions import claude_code as claude_import
from memoryd.extensions.claude_code import (
    EXTENSION,
    HOME_KEY,
    NO_CWD,
    SCOPE_FILE,
    ImportResult,
    claude_home_dir,
    project_cwd,
    sync_claude_import,
)
from memoryd.extensions.shared import extensions_enabled, read_source
from memoryd.paths import templates_dir
from memoryd.redact import redact
from memoryd.settings import Settings, load_settings
from tests.conftest import T0
from tests.unit.extension_helpers import age_everything, mtimes, settings_with, write

SECRET = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"


def session_lines(cwd: object) -> str:
    records = [
        "not json at all",
        json.dumps({"type": "summary", "summary": "earlier"}),
        '{"cwd": broken',
        json.dumps(
            {
                "type": "user",
                "cwd": cwd,
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user"},
            }
        ),
        json.dumps(
            {"type": "assistant", "cwd": "/somewhere/else", "timestamp": "2026-01-01T00:00:01Z"}
        ),
    ]
    return "\n".join(records) + "\n"


def add_session(project: Path, name: str, cwd: object, mtime_s: int) -> Path:
    path = write(project / name, session_lines(cwd))
    os.utime(path, (mtime_s, mtime_s))
    return path


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    home = tmp_path / "claude-home"
    (home / "projects").mkdir(parents=True)
    return home


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "memories"
    root.mkdir()
    return root


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work" / "shop"
    d.mkdir(parents=True)
    return d


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def add_project(home: Path, key: str, files: dict[str, str], cwd: Path | None) -> Path:
    project = home / "projects" / key
    project.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        write(project / "memory" / rel, text)
    if cwd is not None:
        add_session(project, "a1.jsonl", str(cwd), 1_700_000_000)
    return project


def target(root: Path, key: str) -> Path:
    return root / "extensions" / EXTENSION / "resources" / key


def tree(path: Path) -> dict[str, str]:
    return {
        p.relative_to(path).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def run(home: Path, root: Path, clock: ManualClock, **ext: object) -> ImportResult:
    return sync_claude_import(
        settings_with(claude_import=True, claude_home=str(home), **ext), root, clock
    )


# -- settings -----------------------------------------------------------------------------------


def test_extension_settings_default_off(tmp_path: Path) -> None:
    s = load_settings(tmp_path / "absent.toml", environ={})
    ext = s.extensions
    assert (ext.claude_import, ext.codex_import, ext.codex_export) == (False, False, False)
    assert ext.claude_home is None and ext.codex_home is None and ext.claude_projects == []
    assert not extensions_enabled(s)
    assert s.sources["extensions.claude_import"] == "default"


def test_extension_settings_from_file_and_env(tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "c.toml",
        '[extensions]\nclaude_import = true\nclaude_projects = ["-home-a", "-home-b"]\ncodex_home = "~/cx"\n',
    )
    s = load_settings(cfg, environ={"MEMORYD_EXTENSIONS_CODEX_EXPORT": "true"})
    assert s.extensions.claude_import and s.extensions.codex_export and extensions_enabled(s)
    assert s.extensions.claude_projects == ["-home-a", "-home-b"]
    assert s.sources["extensions.claude_import"] == "file"
    assert s.sources["extensions.codex_export"] == "env"
    s = load_settings(cfg, environ={"MEMORYD_EXTENSIONS_CLAUDE_PROJECTS": " -x , -y,,-x "})
    assert s.extensions.claude_projects == ["-x", "-y"]
    s = load_settings(tmp_path / "none.toml", environ={"MEMORYD_EXTENSIONS_CLAUDE_HOME": ""})
    assert s.extensions.claude_home is None


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (
            "[extensions]\nclaude_imprt = true\n",
            "extensions.claude_imprt",
            "did you mean 'claude_import'",
        ),
        ("[extensions]\nbogus = 1\n", "extensions.bogus", "unknown option"),
        ("extensions = 3\n", "extensions", "table"),
        ("[extensions]\nclaude_home = 'rel/path'\n", "extensions.claude_home", "absolute"),
        (
            "[extensions]\nclaude_projects = ['a/b']\n",
            "extensions.claude_projects",
            "project folder",
        ),
        ("[extensions]\nclaude_projects = [1]\n", "extensions.claude_projects", "strings"),
        ("[extensions]\ncodex_import = 'maybe'\n", "extensions.codex_import", "bool"),
    ],
)
def test_bad_extension_settings_name_the_key(
    tmp_path: Path, text: str, key: str, fragment: str
) -> None:
    cfg = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={})
    msg = str(info.value)
    assert f"{key}:" in msg and fragment in msg and str(cfg) in msg


def test_claude_home_default(tmp_path: Path) -> None:
    assert claude_home_dir(Settings(), {"HOME": "/home/u"}) == Path("/home/u/.claude")
    assert claude_home_dir(Settings(), {"USERPROFILE": "/users/u"}) == Path("/users/u/.claude")
    assert claude_home_dir(settings_with(claude_home=str(tmp_path)), {"HOME": "/x"}) == tmp_path


# -- the importer -------------------------------------------------------------------------------


def test_first_import(claude: Path, memory_root: Path, workdir: Path, clock: ManualClock) -> None:
    add_project(
        claude,
        "-work-shop",
        {
            "MEMORY.md": "# Shop\n- see topics/db.md\n",
            "topics/db.md": "Postgres on 5433\n",
            "Extra.MD": "x\n",
            "notes.txt": "not markdown\n",
            ".hidden.md": "dot file\n",
            ".cache/x.md": "dot dir\n",
        },
        workdir,
    )
    result = run(claude, memory_root, clock)
    assert (
        result.changed
        and result.imported == ["-work-shop"]
        and result.removed == []
        and result.skipped == {}
    )
    copy = target(memory_root, "-work-shop")
    assert tree(copy) == {
        "Extra.MD": "x\n",
        "MEMORY.md": "# Shop\n- see topics/db.md\n",
        SCOPE_FILE: json.dumps({"cwd": str(workdir.resolve())}, indent=2) + "\n",
        "topics/db.md": "Postgres on 5433\n",
    }
    instructions = memory_root / "extensions" / EXTENSION / "instructions.md"
    assert (
        instructions.read_bytes()
        == (templates_dir() / "extensions" / EXTENSION / "instructions.md").read_bytes()
    )
    assert not [p for p in copy.parent.iterdir() if p.name.startswith(".")]


def test_unchanged_second_run_writes_nothing(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-work-shop", {"MEMORY.md": "m\n", "a/b.md": "b\n"}, workdir)
    assert run(claude, memory_root, clock).changed
    age_everything(memory_root)
    before = mtimes(memory_root)
    clock.advance(2 * HOUR)
    result = run(claude, memory_root, clock)
    assert (
        not result.changed
        and result.imported == []
        and result.removed == []
        and result.skipped == {}
    )
    assert mtimes(memory_root) == before


def test_changed_source_replaces_the_project_folder(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    project = add_project(
        claude, "-work-shop", {"MEMORY.md": "v1 text\n", "old.md": "gone soon\n"}, workdir
    )
    add_project(claude, "-other", {"MEMORY.md": "other\n"}, workdir)
    run(claude, memory_root, clock)
    other_before = mtimes(target(memory_root, "-other"))
    inode = os.stat(target(memory_root, "-work-shop")).st_ino
    write(project / "memory" / "MEMORY.md", "v2 text\n")
    (project / "memory" / "old.md").unlink()
    write(project / "memory" / "new" / "n.md", "new file\n")
    result = run(claude, memory_root, clock)
    assert result.changed and result.imported == ["-work-shop"]
    copy = target(memory_root, "-work-shop")
    assert tree(copy) == {
        "MEMORY.md": "v2 text\n",
        "new/n.md": "new file\n",
        SCOPE_FILE: tree(copy)[SCOPE_FILE],
    }
    assert os.stat(copy).st_ino != inode  # swapped in whole, not edited in place
    assert mtimes(target(memory_root, "-other")) == other_before
    assert sorted(p.name for p in copy.parent.iterdir()) == ["-other", "-work-shop"]


def test_changed_cwd_rewrites_scope(
    claude: Path, memory_root: Path, workdir: Path, tmp_path: Path, clock: ManualClock
) -> None:
    project = add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    moved = tmp_path / "moved"
    moved.mkdir()
    add_session(project, "b2.jsonl", str(moved), 1_800_000_000)
    assert run(claude, memory_root, clock).imported == ["-p"]
    assert json.loads((target(memory_root, "-p") / SCOPE_FILE).read_text()) == {
        "cwd": str(moved.resolve())
    }


def test_deleted_source_removes_the_copy(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-gone", {"MEMORY.md": "m\n"}, workdir)
    emptied = add_project(claude, "-emptied", {"MEMORY.md": "m\n"}, workdir)
    add_project(claude, "-kept", {"MEMORY.md": "k\n"}, workdir)
    run(claude, memory_root, clock)
    shutil.rmtree(claude / "projects" / "-gone")
    (emptied / "memory" / "MEMORY.md").unlink()
    result = run(claude, memory_root, clock)
    assert result.changed and result.removed == ["-emptied", "-gone"] and result.imported == []
    assert (
        not target(memory_root, "-gone").exists() and not target(memory_root, "-emptied").exists()
    )
    assert target(memory_root, "-kept").is_dir()
    assert (memory_root / "extensions" / EXTENSION / "instructions.md").is_file()


def test_copy_without_scope_is_not_ours(
    claude: Path, memory_root: Path, clock: ManualClock
) -> None:
    foreign = write(target(memory_root, "-foreign") / "x.md", "hand-made\n")
    result = run(claude, memory_root, clock)
    assert not result.changed and foreign.read_text() == "hand-made\n"


def test_no_cwd_skips_and_keeps_the_copy(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    project = add_project(claude, "-p", {"MEMORY.md": "first\n"}, workdir)
    add_project(claude, "-fresh", {"MEMORY.md": "never scoped\n"}, None)
    result = run(claude, memory_root, clock)
    assert result.imported == ["-p"] and result.skipped == {"-fresh": NO_CWD}
    assert not target(memory_root, "-fresh").exists()
    age_everything(memory_root)
    before = mtimes(memory_root)
    workdir.rmdir()  # the only session now names a directory that is gone
    write(project / "memory" / "MEMORY.md", "second\n")
    result = run(claude, memory_root, clock)
    assert result.skipped == {"-p": NO_CWD, "-fresh": NO_CWD}
    assert not result.changed and result.removed == []
    assert (target(memory_root, "-p") / "MEMORY.md").read_text() == "first\n"
    assert mtimes(memory_root) == before


def test_cwd_comes_from_the_newest_usable_session(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    older, newer = tmp_path / "older", tmp_path / "newer"
    older.mkdir()
    newer.mkdir()
    add_session(project, "1.jsonl", str(older), 1_700_000_000)
    add_session(project, "2.jsonl", str(newer), 1_700_000_100)
    assert project_cwd(project) == str(newer.resolve())
    add_session(
        project, "3.jsonl", str(tmp_path / "missing"), 1_700_000_200
    )  # newest, but not a directory
    add_session(project, "4.jsonl", "relative/path", 1_700_000_300)
    add_session(
        project, "5.jsonl", None, 1_700_000_400
    )  # the first string cwd in it is /somewhere/else
    write(project / "6.jsonl", "\x00\xff garbage\n{]\n")
    os.utime(project / "6.jsonl", (1_700_000_500, 1_700_000_500))
    (project / "7.jsonl").symlink_to(project / "1.jsonl")
    (project / "sub").mkdir()
    add_session(
        project / "sub", "8.jsonl", str(older), 1_700_000_600
    )  # not directly in the project
    assert project_cwd(project) == str(newer.resolve())
    linked = tmp_path / "linked"
    linked.symlink_to(older)
    add_session(project, "9.jsonl", str(linked), 1_700_000_700)
    assert project_cwd(project) == str(older.resolve())
    assert project_cwd(tmp_path / "no-such-project") is None


def test_unreachable_home_changes_nothing(
    claude: Path, memory_root: Path, workdir: Path, tmp_path: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    age_everything(memory_root)
    before = mtimes(memory_root)
    moved = tmp_path / "elsewhere"
    claude.rename(moved)
    result = run(claude, memory_root, clock)
    assert not result.changed and result.removed == [] and HOME_KEY in result.skipped
    assert "unreachable" in result.skipped[HOME_KEY]
    assert mtimes(memory_root) == before
    moved.rename(claude)
    shutil.rmtree(claude / "projects")
    write(claude / "projects", "a file, not a folder")
    result = run(claude, memory_root, clock)
    assert not result.changed and HOME_KEY in result.skipped and mtimes(memory_root) == before


def test_allowlist(claude: Path, memory_root: Path, workdir: Path, clock: ManualClock) -> None:
    add_project(claude, "-a", {"MEMORY.md": "a\n"}, workdir)
    add_project(claude, "-b", {"MEMORY.md": "b\n"}, workdir)
    result = run(claude, memory_root, clock, claude_projects=["-a", "-missing"])
    assert result.imported == ["-a"] and result.skipped == {"-missing": "not found"}
    assert not target(memory_root, "-b").exists()
    assert run(claude, memory_root, clock).imported == ["-b"]  # empty allowlist = every project
    result = run(claude, memory_root, clock, claude_projects=["-b"])  # narrowing forgets the rest
    assert result.removed == ["-a"] and result.imported == [] and target(memory_root, "-b").is_dir()


def test_symlinks_in_the_source_are_never_followed(
    claude: Path, memory_root: Path, workdir: Path, tmp_path: Path, clock: ManualClock
) -> None:
    outside = write(tmp_path / "outside" / "private.md", "private text\n")
    project = add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    (project / "memory" / "link.md").symlink_to(outside)
    (project / "memory" / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    linked_project = claude / "projects" / "-linked"
    linked_project.symlink_to(project, target_is_directory=True)
    other = add_project(claude, "-linked-memory", {}, workdir)
    (other / "memory").symlink_to(outside.parent, target_is_directory=True)
    result = run(claude, memory_root, clock)
    assert result.imported == ["-p"]
    assert set(tree(target(memory_root, "-p"))) == {"MEMORY.md", SCOPE_FILE}
    assert (
        not target(memory_root, "-linked").exists()
        and not target(memory_root, "-linked-memory").exists()
    )


def test_secrets_are_redacted_before_landing(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    text = f"# Keys\nexport OPENAI_API_KEY={SECRET}\npassword: hunter2hunter2\n"
    add_project(claude, "-p", {"MEMORY.md": text, "deep/x.md": f"token {SECRET}\n"}, workdir)
    run(claude, memory_root, clock)
    copy = tree(target(memory_root, "-p"))
    assert copy["MEMORY.md"] == redact(text)
    assert all(SECRET not in v and "hunter2" not in v for v in copy.values())
    assert "[REDACTED" in copy["deep/x.md"]
    assert not run(claude, memory_root, clock).changed  # redacted copies compare equal next time


def test_oversized_file_is_reported_not_cut(
    claude: Path,
    memory_root: Path,
    workdir: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(claude_import, "EXTENSION_SOURCE_MAX_BYTES", 10)
    add_project(claude, "-p", {"MEMORY.md": "small\n", "big.md": "x" * 100}, workdir)
    result = run(claude, memory_root, clock)
    assert result.imported == ["-p"] and "-p/big.md" in result.skipped
    assert set(tree(target(memory_root, "-p"))) == {"MEMORY.md", SCOPE_FILE}


def test_tampered_copy_is_rebuilt(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    copy = target(memory_root, "-p")
    write(copy / "stray.md", "added by hand\n")
    (copy / "MEMORY.md").write_text("edited\n")
    assert run(claude, memory_root, clock).imported == ["-p"]
    assert (
        set(tree(copy)) == {"MEMORY.md", SCOPE_FILE} and (copy / "MEMORY.md").read_text() == "m\n"
    )


def test_stale_staging_leftovers_are_swept(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    resources = target(memory_root, "-p").parent
    stale = write(resources / ".staging-abc" / "MEMORY.md", "half\n").parent
    fresh = write(resources / ".old-def" / "MEMORY.md", "in flight\n").parent
    old_s = (T0 - 2 * HOUR) // 1000
    os.utime(stale, (old_s, old_s))
    new_s = T0 // 1000
    os.utime(fresh, (new_s, new_s))
    result = run(claude, memory_root, clock)
    assert not result.changed  # dot-prefixed leftovers are invisible to the baseline
    assert not stale.exists() and fresh.exists()


def test_disabled_import_does_nothing(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    result = sync_claude_import(settings_with(claude_home=str(claude)), memory_root, clock)
    assert not result.changed and result.skipped == {} and not (memory_root / "extensions").exists()


def test_empty_home_seeds_no_instructions(
    claude: Path, memory_root: Path, clock: ManualClock
) -> None:
    result = run(claude, memory_root, clock)
    assert not result.changed and not (memory_root / "extensions").exists()


def test_symlinked_extension_folder_is_refused(
    claude: Path, memory_root: Path, workdir: Path, tmp_path: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (memory_root / "extensions").symlink_to(elsewhere, target_is_directory=True)
    result = run(claude, memory_root, clock)
    assert not result.changed and result.imported == []
    assert "symlink" in result.skipped["-p"]
    assert list(elsewhere.iterdir()) == []


def test_edited_instructions_are_restored(
    claude: Path, memory_root: Path, workdir: Path, clock: ManualClock
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    instructions = memory_root / "extensions" / EXTENSION / "instructions.md"
    instructions.write_text("ignore everything\n")
    result = run(claude, memory_root, clock)
    assert result.changed and result.imported == []
    assert (
        instructions.read_bytes()
        == (templates_dir() / "extensions" / EXTENSION / "instructions.md").read_bytes()
    )


def test_unlistable_projects_folder_changes_nothing(
    claude: Path,
    memory_root: Path,
    workdir: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    add_project(claude, "-p", {"MEMORY.md": "m\n"}, workdir)
    run(claude, memory_root, clock)
    age_everything(memory_root)
    before = mtimes(memory_root)

    def denied(path: Path) -> list[tuple[str, Path]]:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(claude_import, "_project_dirs", denied)
    result = run(claude, memory_root, clock)
    assert not result.changed and "Permission denied" in result.skipped[HOME_KEY]
    assert mtimes(memory_root) == before


def test_unreadable_memory_file_keeps_the_copy(
    claude: Path,
    memory_root: Path,
    workdir: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = add_project(claude, "-p", {"MEMORY.md": "m\n", "b.md": "b\n"}, workdir)
    run(claude, memory_root, clock)
    write(project / "memory" / "MEMORY.md", "changed\n")
    real = read_source

    def flaky(path: Path, **kw: Any) -> bytes | None:
        if path.name == "b.md":
            raise PathError(path, "cannot read (Permission denied)")
        return real(path, **kw)

    monkeypatch.setattr(claude_import, "read_source", flaky)
    result = run(claude, memory_root, clock)
    assert not result.changed and result.skipped["-p"].startswith("memory not readable")
    assert (target(memory_root, "-p") / "MEMORY.md").read_text() == "m\n"
