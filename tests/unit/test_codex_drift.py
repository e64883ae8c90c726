"""scripts/check-codex-drift.sh against synthetic upstream repositories, and the real codex-map.yaml.

Each test builds a small "Codex" git repository in tmp_path with the git binary, writes a map
pointing at it (CODEX_MAP), and checks the script's exit code and report: 0 aligned, 1 drift,
2 setup error with one line on stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-codex-drift.sh"
REAL_MAP = ROOT / "codex-map.yaml"


PHASE1 = "codex-rs/memories/write/src/phase1.rs"
STORAGE = "codex-rs/memories/write/src/storage.rs"
SANITIZER = "codex-rs/secrets/src/sanitizer.rs"
TYPES = "codex-rs/config/src/types.rs"
UNRELATED = "codex-rs/tui/src/app.rs"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "GIT_"))}
    env.pop("NO_COLOR", None)
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / "gitconfig"),
        GIT_AUTHOR_NAME="Upstream Dev",
        GIT_AUTHOR_EMAIL="dev@example.com",
        GIT_COMMITTER_NAME="Upstream Dev",
        GIT_COMMITTER_EMAIL="dev@example.com",
        GIT_AUTHOR_DATE="2026-08-22T05:54:43Z",
        GIT_COMMITTER_DATE="2026-08-22T05:54:43Z",
    )
    env.update(extra)
    return env


@dataclass
class Upstream:
    """A throwaway Codex-like repository with a work tree."""

    path: Path
    home: Path

    def git(self, *args: str) -> str:
        out = subprocess.run(
            ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
            cwd=self.path,
            env=_env(self.home),
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip()

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, subject: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", subject)
        return self.git("rev-parse", "HEAD")


@dataclass
class Map:
    """A map file in its own folder, with the `ours` files it names."""

    dir: Path
    ref: str
    date: str = "2026-08-22"
    mappings: list[tuple[str, list[str]]] = field(default_factory=list)
    watch: list[str] = field(default_factory=list)
    v2_ref: str | None = None
    v2_mappings: list[tuple[str, list[str]]] = field(default_factory=list)
    v2_watch: list[str] = field(default_factory=list)

    def write(self, text: str | None = None) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        for ours, _ in self.mappings + self.v2_mappings:
            (self.dir / ours).parent.mkdir(parents=True, exist_ok=True)
            (self.dir / ours).touch()
        if text is None:
            lines = [
                "# test map",
                f"codex_ref: {self.ref}",
                f"codex_ref_date: {self.date}",
                "watch_paths:",
            ]
            lines += [f"  - {w}" for w in self.watch]
            lines.append("mappings:")
            for ours, theirs in self.mappings:
                lines += [f"  - ours: {ours}", "    theirs:"]
                lines += [f"      - {t}" for t in theirs]
                lines += ["    note: >-", "      Divergences go here,", "      folded over lines."]
            if self.v2_ref is not None:
                lines += [f"v2_ref: {self.v2_ref}", "v2_repo: someone/codex", "v2_watch_paths:"]
                lines += [f"  - {w}" for w in self.v2_watch]
                lines.append("v2_mappings:")
                for ours, theirs in self.v2_mappings:
                    lines += [f"  - ours: {ours}", "    theirs:"]
                    lines += [f"      - {t}" for t in theirs]
                    lines += ["    note: Read one by one."]
            text = "\n".join(lines) + "\n"
        path = self.dir / "codex-map.yaml"
        path.write_text(text)
        return path


def run(
    home: Path, *args: str | Path, map_path: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    extra = dict(env)
    if map_path is not None:
        extra["CODEX_MAP"] = str(map_path)
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)],
        env=_env(home, **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_setup_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("check-codex-drift: error: ")
    for needle in needles:
        assert needle in lines[0]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture(scope="module")
def _first_import(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The upstream's first commit, made once (fixed dates: every copy has the same hashes)."""
    base = tmp_path_factory.mktemp("upstream")
    (base / "home").mkdir()
    repo = Upstream(base / "codex", base / "home")
    repo.path.mkdir()
    repo.git("init", "-q")
    repo.write(PHASE1, "fn run() {\n    claim();\n    extract();\n}\n")
    repo.write(STORAGE, "fn stem() -> String {\n    String::new()\n}\n")
    repo.write(SANITIZER, "fn redact_secrets() {}\n")
    repo.write(TYPES, "pub struct MemoriesToml {}\n")
    repo.write(UNRELATED, "fn draw() {}\n")
    repo.commit("Initial import (#1)")
    return repo.path


@pytest.fixture
def upstream(tmp_path: Path, home: Path, _first_import: Path) -> Upstream:
    repo = Upstream(tmp_path / "codex", home)
    shutil.copytree(_first_import, repo.path, symlinks=True)
    return repo


@pytest.fixture
def pinned(tmp_path: Path, upstream: Upstream) -> Map:
    """A map pinned at the upstream's first commit."""
    return Map(
        dir=tmp_path / "memoryd",
        ref=upstream.git("rev-parse", "HEAD"),
        mappings=[
            ("memoryd/write/phase1.py", [PHASE1]),
            ("memoryd/folder/workspace.py", [STORAGE, PHASE1]),
            ("memoryd/redact.py", [SANITIZER]),
        ],
        watch=["codex-rs/memories/", TYPES],
    )


# ---- aligned -------------------------------------------------------------------------------------


def test_aligned_when_head_is_the_ref(home: Path, upstream: Upstream, pinned: Map) -> None:
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ALIGNED" in res.stdout
    assert "HEAD is codex_ref" in res.stdout
    assert "(work tree)" in res.stdout
    assert res.stderr == ""
    assert "\x1b[" not in res.stdout  # no colours without a terminal


def test_aligned_when_only_unrelated_files_changed(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.write(UNRELATED, "fn draw() { redraw(); }\n")
    upstream.commit("Redraw the TUI (#2)")
    res = run(home, map_path=pinned.write(), CODEX_REPO=str(upstream.path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ALIGNED" in res.stdout
    assert "1 upstream commits since codex_ref, none under them" in res.stdout


def test_codex_head_selects_the_commit_to_compare(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.write(PHASE1, "fn run() {}\n")
    upstream.commit("Rewrite phase 1 (#3)")
    path = pinned.write()
    assert run(home, upstream.path, map_path=path).returncode == 1
    res = run(home, upstream.path, map_path=path, CODEX_HEAD=pinned.ref)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ALIGNED" in res.stdout


# ---- drift ---------------------------------------------------------------------------------------


def test_changed_mapped_file_reports_commits_and_diffstat(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.write(PHASE1, "fn run() {\n    claim();\n    sanitize();\n    extract();\n}\n")
    upstream.commit("Drop security risk scores from stage-1 input (#38363)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert "Changed upstream (mapped files)" in out
    assert f"{PHASE1}  (ported by memoryd/write/phase1.py, memoryd/folder/workspace.py)" in out
    assert "Drop security risk scores from stage-1 input (#38363)" in out
    assert re.search(r"phase1\.rs \| 1 \+\n", out), out
    assert "1 file changed, 1 insertion(+)" in out
    # The change is under a watched prefix too.
    assert "Watched paths (any change under them)" in out
    assert (
        "DRIFT: 0 mapped upstream files moved or vanished, 1 changed; watched paths changed." in out
    )
    new_head = upstream.git("rev-parse", "HEAD")
    assert f"codex_ref: {new_head}" in out
    assert "codex_ref_date: 2026-08-22" in out
    assert res.stderr == ""


def test_long_commit_lists_are_capped(home: Path, upstream: Upstream, pinned: Map) -> None:
    for n in range(27):
        upstream.write(SANITIZER, f"fn redact_secrets() {{ /* {n} */ }}\n")
        upstream.commit(f"Tweak sanitizer {n}")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1
    assert "commits (27):" in res.stdout
    assert "Tweak sanitizer 26" in res.stdout
    assert "Tweak sanitizer 0\n" not in res.stdout
    assert "... and 2 more: git -C" in res.stdout


def test_renamed_mapped_file_names_the_new_path(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.git("mv", STORAGE, "codex-rs/memories/write/src/storage_rs_moved.rs")
    upstream.commit("Move storage (#4)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    out = res.stdout
    assert "Moved or vanished upstream" in out
    assert f"{STORAGE}  (ported by memoryd/folder/workspace.py)" in out
    assert "renamed to codex-rs/memories/write/src/storage_rs_moved.rs in " in out
    assert "Move storage (#4)" in out
    assert "DRIFT: 1 mapped upstream files moved or vanished, 0 changed" in out


def test_rename_chain_is_followed_to_the_path_at_head(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.git("mv", SANITIZER, "codex-rs/secrets/src/redact.rs")
    upstream.commit("Rename sanitizer (#5)")
    (upstream.path / "codex-rs/utils/secrets").mkdir(parents=True)
    upstream.git("mv", "codex-rs/secrets/src/redact.rs", "codex-rs/utils/secrets/redact.rs")
    upstream.commit("Move secrets into utils (#6)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "renamed to codex-rs/secrets/src/redact.rs in " in res.stdout
    assert "renamed to codex-rs/utils/secrets/redact.rs in " in res.stdout


def test_deleted_mapped_file_is_reported_with_a_same_name_hint(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    (upstream.path / SANITIZER).unlink()
    upstream.write(
        "codex-rs/core/src/sanitizer.rs",
        "// entirely new code\nfn scrub(x: &str) -> String { x.into() }\n",
    )
    upstream.commit("Replace the sanitizer (#7)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "deleted in " in res.stdout
    assert "Replace the sanitizer (#7)" in res.stdout
    assert "same name added in that commit: codex-rs/core/src/sanitizer.rs" in res.stdout


def test_watched_path_change_is_drift(home: Path, upstream: Upstream, pinned: Map) -> None:
    upstream.write(TYPES, "pub struct MemoriesToml { pub dedicated_tools: bool }\n")
    upstream.commit("Add dedicated_tools (#8)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Changed upstream (mapped files)" not in res.stdout
    assert "Watched paths (any change under them)" in res.stdout
    assert re.search(r"codex-rs/config/src/types\.rs \| 2 \+-", res.stdout), res.stdout
    assert (
        "DRIFT: 0 mapped upstream files moved or vanished, 0 changed; watched paths changed."
        in res.stdout
    )


def test_new_file_under_a_watched_prefix_is_drift(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    upstream.write("codex-rs/memories/write/src/extensions/persistent.rs", "fn sync() {}\n")
    upstream.commit("Persistent extension resources (#9)")
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1
    assert "persistent.rs" in res.stdout


def test_bare_clone_works(home: Path, tmp_path: Path, upstream: Upstream, pinned: Map) -> None:
    path = pinned.write()
    bare = tmp_path / "mirror.git"
    upstream.git("clone", "-q", "--bare", str(upstream.path), str(bare))
    res = run(home, bare, map_path=path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "(bare)" in res.stdout

    upstream.write(PHASE1, "fn run() {}\n")
    upstream.commit("Simplify phase 1 (#10)")
    upstream.git("push", "-q", str(bare), "main")
    res = run(home, bare, map_path=path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Simplify phase 1 (#10)" in res.stdout


# ---- setup errors --------------------------------------------------------------------------------


def test_no_repository_given(home: Path, pinned: Map) -> None:
    assert_setup_error(run(home, map_path=pinned.write()), "no Codex repository given")


def test_not_a_repository(home: Path, tmp_path: Path, pinned: Map) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert_setup_error(run(home, plain, map_path=pinned.write()), "is not a git repository")
    assert_setup_error(run(home, tmp_path / "absent", map_path=pinned.write()), "no such directory")


def test_subdirectory_of_a_work_tree_is_refused(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    res = run(home, upstream.path / "codex-rs", map_path=pinned.write())
    assert_setup_error(res, "lies inside the work tree of")


def test_ref_missing_from_the_repository(home: Path, upstream: Upstream, pinned: Map) -> None:
    pinned.ref = "0123456789abcdef0123456789abcdef01234567"
    assert_setup_error(
        run(home, upstream.path, map_path=pinned.write()), "codex_ref 0123456789ab is not in"
    )


def test_unknown_codex_head(home: Path, upstream: Upstream, pinned: Map) -> None:
    res = run(home, upstream.path, map_path=pinned.write(), CODEX_HEAD="origin/nowhere")
    assert_setup_error(res, "CODEX_HEAD=origin/nowhere")


def test_theirs_path_absent_at_ref(home: Path, upstream: Upstream, pinned: Map) -> None:
    pinned.mappings.append(
        ("memoryd/read/citations.py", ["codex-rs/memories/read/src/citations.rs"])
    )
    res = run(home, upstream.path, map_path=pinned.write())
    assert_setup_error(
        res, "theirs path codex-rs/memories/read/src/citations.rs does not exist at codex_ref"
    )
    assert re.search(r"codex-map\.yaml:\d+: ", res.stderr)


def test_watch_path_absent_at_ref(home: Path, upstream: Upstream, pinned: Map) -> None:
    pinned.watch.append("codex-rs/ext/memories/")
    res = run(home, upstream.path, map_path=pinned.write())
    assert_setup_error(res, "watch path codex-rs/ext/memories does not exist at codex_ref")


def test_map_missing(home: Path, tmp_path: Path, upstream: Upstream) -> None:
    assert_setup_error(run(home, upstream.path, map_path=tmp_path / "nope.yaml"), "map not found")


BAD_MAPS = {
    "no codex_ref": (
        "codex_ref_date: 2026-08-22\nmappings:\n  - ours: a.py\n    theirs:\n      - x\n",
        "no codex_ref",
    ),
    "short sha": (
        "codex_ref: 343074d\ncodex_ref_date: 2026-08-22\n",
        "full 40-character commit SHA",
    ),
    "bad date": ("codex_ref: {ref}\ncodex_ref_date: 22.08.2026\n", "YYYY-MM-DD"),
    "no mappings": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nwatch_paths:\n  - codex-rs/\n",
        "no mappings",
    ),
    "mapping without theirs": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - ours: a.py\n    note: >-\n      text\n",
        "mapping for a.py has no theirs",
    ),
    "mapping without ours": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - note: x\n    theirs:\n      - codex-rs/x\n",
        "mapping has no ours",
    ),
    "ours absent here": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - ours: gone.py\n    theirs:\n      - x\n",
        "ours path gone.py does not exist",
    ),
    "unknown top-level key": ("codex_ref: {ref}\nrefs: []\n", "unknown top-level key refs"),
    "unknown mapping key": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - ours: a.py\n    their: x\n",
        'unknown mapping key "their"',
    ),
    "flow list": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - ours: a.py\n    theirs: [x, y]\n",
        "must be a plain scalar",
    ),
    "tab indentation": ("codex_ref: {ref}\nwatch_paths:\n\t- x\n", "tab in indentation"),
    "empty folded note": (
        "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n  - ours: a.py\n    note: >-\n    theirs:\n      - x\n",
        "folded note has no text",
    ),
    "stray indentation": (
        "codex_ref: {ref}\nwatch_paths:\n    - x\n",
        "outside the supported YAML subset",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_MAPS))
def test_malformed_map(
    case: str, home: Path, tmp_path: Path, upstream: Upstream, pinned: Map
) -> None:
    text, needle = BAD_MAPS[case]
    pinned.mappings = [("a.py", [])]
    path = pinned.write(text.format(ref=pinned.ref))
    assert_setup_error(run(home, upstream.path, map_path=path), needle)
    # The map is checked before the repository is looked at.
    assert_setup_error(run(home, "--check-map", map_path=path), needle)


def test_quoted_scalars_and_one_line_notes_are_accepted(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    text = (
        "---\n"
        f'codex_ref: "{pinned.ref}"\n'
        "codex_ref_date: '2026-08-22'\n"
        "watch_paths:\n"
        '  - "codex-rs/memories/"\n'
        "mappings:\n"
        "  - ours: memoryd/write/phase1.py\n"
        f"    theirs: {PHASE1}\n"
        "    note: one line is enough\n"
        "  - ours: 'memoryd/redact.py'\n"
        "    note: >-\n"
        "      # not a comment inside a folded note\n"
        "\n"
        "      second paragraph\n"
        "    theirs:\n"
        f"      - '{SANITIZER}'\n"
    )
    path = pinned.write(text)
    res = run(home, upstream.path, map_path=path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "(2 mappings, 2 upstream files, 1 watch paths)" in res.stdout
    listed = run(home, "--list-map", map_path=path).stdout.splitlines()
    assert listed == [
        "watch\tcodex-rs/memories/",
        f"map\tmemoryd/write/phase1.py\t{PHASE1}",
        f"map\tmemoryd/redact.py\t{SANITIZER}",
    ]


def test_check_map_with_a_repository_checks_upstream_paths(
    home: Path, upstream: Upstream, pinned: Map
) -> None:
    path = pinned.write()
    res = run(home, "--check-map", upstream.path, map_path=path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every upstream path exists there" in res.stdout
    upstream.write(PHASE1, "changed\n")
    upstream.commit("Change (#11)")
    assert run(home, "--check-map", upstream.path, map_path=path).returncode == 0  # no drift check


# ---- the v2 section: a second pin for files newer than codex_ref ------------------------------

ROLLOUT_INPUT = "codex-rs/memories/write/src/rollout_input.rs"
STAGE_ONE_V2 = "codex-rs/memories/write/templates/memories/stage_one_system_v2.md"
VERSIONS = "codex-rs/state/src/runtime/memory_versions.rs"
READINESS = "codex-rs/state/src/runtime/memory_readiness.rs"
MIGRATIONS_DIR = "codex-rs/state/memory_migrations/"
MIGRATION_0002 = "codex-rs/state/memory_migrations/0002_consolidation_progress.sql"


@pytest.fixture
def v2(tmp_path: Path, upstream: Upstream) -> Map:
    """Upstream moves the way Codex moved: v2 files appear after codex_ref; v2_ref pins them.

    The v1 section stays pinned at the first commit (where none of the v2 files exist) and
    watches only TYPES, so the v2 commit itself is not v1 drift.
    """
    ref = upstream.git("rev-parse", "HEAD")
    upstream.write(ROLLOUT_INPUT, "fn rank_items() {}\n")
    upstream.write(STAGE_ONE_V2, "Record task history.\n")
    upstream.write(VERSIONS, "fn folder_for(version: u8) {}\n")
    upstream.write(READINESS, "fn v2_ready(min: u32) -> bool { true }\n")
    upstream.write(MIGRATION_0002, "CREATE TABLE consolidation_progress (id INTEGER);\n")
    v2_ref = upstream.commit("Memories v2 (#20)")
    return Map(
        dir=tmp_path / "memoryd",
        ref=ref,
        mappings=[("memoryd/write/phase1.py", [PHASE1])],
        watch=[TYPES],
        v2_ref=v2_ref,
        v2_mappings=[
            ("memoryd/write/selection.py", [ROLLOUT_INPUT]),
            ("templates/stage_one_system.md", [STAGE_ONE_V2]),
        ],
        v2_watch=[VERSIONS, READINESS, MIGRATIONS_DIR],
    )


def test_v2_files_appearing_after_codex_ref_are_drift_of_a_v1_only_map(
    home: Path, upstream: Upstream, pinned: Map, v2: Map
) -> None:
    # The map without a v2 section, watching codex-rs/memories/ from codex_ref, sees v2 arrive.
    res = run(home, upstream.path, map_path=pinned.write())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "rollout_input.rs" in res.stdout and "stage_one_system_v2.md" in res.stdout


def test_v2_section_aligned_at_v2_ref(home: Path, upstream: Upstream, v2: Map) -> None:
    res = run(home, upstream.path, map_path=v2.write())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "v2_ref      " + v2.v2_ref[:12] in res.stdout  # type: ignore[index]
    assert "ALIGNED: nothing changed under the 3 mapped upstream files or the 4 watch paths" in (
        res.stdout
    )
    assert "NOT checked" not in res.stdout
    # Its paths are checked at v2_ref, not at codex_ref (where none of them exist).
    res = run(home, "--check-map", upstream.path, map_path=v2.write())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every upstream path exists there and at v2_ref" in res.stdout


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (VERSIONS, "fn folder_for(version: u8, legacy: bool) {}\n"),
        (READINESS, "fn v2_ready(min: u32) -> bool { min > 0 }\n"),
        ("codex-rs/state/memory_migrations/0003_more.sql", "ALTER TABLE x ADD y;\n"),
    ],
    ids=["version", "readiness", "new-migration"],
)
def test_v2_watched_version_readiness_or_state_change_is_drift(
    home: Path, upstream: Upstream, v2: Map, path: str, text: str
) -> None:
    map_path = v2.write()
    upstream.write(path, text)
    upstream.commit("Memories v2 follow-up (#21)")
    res = run(home, upstream.path, map_path=map_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Watched paths (any change under them) [v2 section, since v2_ref]" in res.stdout
    assert path.rsplit("/", 1)[1] in res.stdout
    assert "watched paths changed (since v2_ref)." in res.stdout
    assert f"  v2_ref: {upstream.git('rev-parse', 'HEAD')}" in res.stdout


def test_v2_mapped_file_change_names_the_memoryd_file(
    home: Path, upstream: Upstream, v2: Map
) -> None:
    map_path = v2.write()
    upstream.write(ROLLOUT_INPUT, "fn rank_items() { tiers(); }\n")
    upstream.commit("Rank harness context below commentary (#22)")
    res = run(home, upstream.path, map_path=map_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Changed upstream (mapped files) [v2 section, since v2_ref]" in res.stdout
    assert "(ported by memoryd/write/selection.py)" in res.stdout
    assert "Rank harness context below commentary (#22)" in res.stdout
    assert "DRIFT: 0 mapped upstream files moved or vanished, 1 changed" in res.stdout


def test_unreachable_v2_ref_is_an_error_not_alignment(
    home: Path, upstream: Upstream, v2: Map
) -> None:
    v2.v2_ref = "0123456789abcdef0123456789abcdef01234567"
    map_path = v2.write()
    assert_setup_error(
        run(home, upstream.path, map_path=map_path),
        "v2_ref 0123456789ab",
        "read one by one from someone/codex",
        "--skip-v2",
    )
    assert_setup_error(run(home, "--check-map", upstream.path, map_path=map_path), "--skip-v2")
    res = run(home, "--skip-v2", upstream.path, map_path=map_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "NOT CHECKED" in res.stdout
    assert res.stdout.rstrip().endswith(
        "v2 section NOT checked: v2_ref 0123456789ab is not in this repository)."
    )
    # --skip-v2 still reports drift of the codex_ref section.
    upstream.write(TYPES, "pub struct MemoriesToml { pub version: u8 }\n")
    upstream.commit("Add version (#23)")
    res = run(home, upstream.path, map_path=map_path, CODEX_SKIP_V2="1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "v2 section NOT checked" in res.stdout


def test_v2_theirs_path_absent_at_v2_ref(home: Path, upstream: Upstream, v2: Map) -> None:
    v2.v2_mappings.append(("memoryd/write/phase1.py", ["codex-rs/memories/write/src/nope.rs"]))
    assert_setup_error(
        run(home, upstream.path, map_path=v2.write()),
        "theirs path codex-rs/memories/write/src/nope.rs does not exist at v2_ref",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n"
            "  - ours: a.py\n    theirs: x.rs\n    note: n\n"
            "v2_mappings:\n  - ours: a.py\n    theirs: y.rs\n    note: n\n",
            "without a v2_ref",
        ),
        (
            "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n"
            "  - ours: a.py\n    theirs: x.rs\n    note: n\n"
            "v2_ref: 67e69213\nv2_mappings:\n  - ours: a.py\n    theirs: y.rs\n    note: n\n",
            "v2_ref must be a full 40-character commit SHA",
        ),
        (
            "codex_ref: {ref}\ncodex_ref_date: 2026-08-22\nmappings:\n"
            "  - ours: a.py\n    theirs: x.rs\n    note: n\n"
            "v2_ref: {ref}\n",
            "v2_ref given without v2_mappings",
        ),
    ],
    ids=["no-ref", "short-ref", "no-mappings"],
)
def test_malformed_v2_section(home: Path, tmp_path: Path, text: str, needle: str) -> None:
    d = tmp_path / "m"
    d.mkdir()
    (d / "a.py").touch()
    (d / "codex-map.yaml").write_text(text.format(ref="a" * 40))
    assert_setup_error(run(home, "--check-map", map_path=d / "codex-map.yaml"), needle)


# ---- the real map --------------------------------------------------------------------------------


def parse_real_map(text: str) -> dict[str, Any]:
    """A tiny, independent reader of the YAML subset documented at the top of codex-map.yaml."""
    data: dict[str, Any] = {"watch_paths": [], "mappings": [], "v2_watch_paths": []}
    mappings: list[dict[str, Any]] = data["mappings"]
    section = key = None
    in_note = False
    for raw in text.splitlines():
        if in_note:
            if raw.startswith("      ") or not raw.strip():
                mappings[-1]["note"] = (str(mappings[-1]["note"]) + " " + raw.strip()).strip()
                continue
            in_note = False
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if not raw.startswith(" "):
            name, _, value = raw.partition(":")
            section = name
            if value.strip():
                data[name] = value.strip()
            continue
        if section in ("watch_paths", "v2_watch_paths"):
            data[section].append(raw.strip().removeprefix("- "))
            continue
        m = re.match(r"^(  - |    )(\w+):\s*(.*)$", raw)
        if m:
            if m.group(1) == "  - ":
                mappings.append({"theirs": [], "note": "", "section": section})
            key, value = m.group(2), m.group(3)
            if key == "note":
                in_note = value in (">", ">-", "|", "|-")
                mappings[-1]["note"] = "" if in_note else value
            elif key == "theirs" and value:
                mappings[-1]["theirs"].append(value)
            elif key != "theirs":
                mappings[-1][key] = value
            continue
        m = re.match(r"^      - (.+)$", raw)
        assert m and key == "theirs", f"unexpected line in codex-map.yaml: {raw!r}"
        mappings[-1]["theirs"].append(m.group(1))
    return data


@pytest.fixture(scope="module")
def real_map() -> dict[str, Any]:
    return parse_real_map(REAL_MAP.read_text())


def test_real_map_passes_the_scripts_own_validation(tmp_path: Path) -> None:
    res = run(tmp_path, "--check-map", map_path=REAL_MAP)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("codex-map.yaml: OK (")


def test_real_map_reads_the_same_in_python_and_in_the_script(
    tmp_path: Path, real_map: dict[str, Any]
) -> None:
    listed = run(tmp_path, "--list-map", map_path=REAL_MAP).stdout.splitlines()
    expected = [f"watch\t{w}" for w in real_map["watch_paths"]]
    for m in real_map["mappings"]:
        if m["section"] == "mappings":
            expected += [f"map\t{m['ours']}\t{t}" for t in m["theirs"]]
    expected += [f"v2watch\t{w}" for w in real_map["v2_watch_paths"]]
    for m in real_map["mappings"]:
        if m["section"] == "v2_mappings":
            expected += [f"v2map\t{m['ours']}\t{t}" for t in m["theirs"]]
    assert listed == expected


def test_real_map_header_and_entries(real_map: dict[str, Any]) -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", str(real_map["codex_ref"]))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(real_map["codex_ref_date"]))
    assert real_map["watch_paths"]
    mappings = real_map["mappings"]
    assert isinstance(mappings, list) and len(mappings) >= 20
    for section in ("mappings", "v2_mappings"):
        ours = [m["ours"] for m in mappings if m["section"] == section]
        assert ours, f"no {section}"
        assert len(ours) == len(set(ours)), f"one mapping per memoryd file in {section}"
    for m in mappings:
        ours_path = ROOT / m["ours"]
        assert ours_path.is_dir() if m["ours"].endswith("/") else ours_path.is_file(), (
            f"{m['ours']} does not exist in this repository"
        )
        assert m["theirs"], f"{m['ours']} has no theirs"
        assert all(str(t).startswith("codex-rs/") for t in m["theirs"])
        assert len(str(m["note"])) > 40, f"{m['ours']} needs a note on how it differs"


def test_every_module_and_template_is_mapped_or_listed_as_platform_only(
    real_map: dict[str, Any],
) -> None:
    text = REAL_MAP.read_text()
    platform = re.findall(r"^#   ((?:memoryd|templates)/\S*)", text, re.M)
    assert platform, "the platform-only comment block is missing"
    mapped = {m["ours"] for m in real_map["mappings"]}
    files = [p for p in (ROOT / "memoryd").rglob("*.py") if "__pycache__" not in p.parts]
    files += [p for p in (ROOT / "templates").rglob("*") if p.is_file()]
    unclassified = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel in mapped or any(m.endswith("/") and rel.startswith(m) for m in mapped):
            continue
        if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in platform):
            continue
        unclassified.append(rel)
    assert not unclassified, (
        f"add these to codex-map.yaml (a mapping, or the platform-only comment): {unclassified}"
    )
    for p in platform:
        assert (ROOT / p).exists(), f"platform-only entry {p} does not exist"


def test_real_map_v2_section_covers_the_v2_files(real_map: dict[str, Any]) -> None:
    assert real_map["v2_ref"] == "67e69213733ceba7c9871ac891156ee0c3109e22"
    v2 = {m["ours"]: m["theirs"] for m in real_map["mappings"] if m["section"] == "v2_mappings"}
    assert ROLLOUT_INPUT in v2["memoryd/write/selection.py"]
    assert VERSIONS in v2["memoryd/extensions/codex.py"]
    assert STAGE_ONE_V2 in v2["templates/stage_one_system.md"]
    assert any(t.endswith("consolidation_v2.md") for t in v2["templates/consolidation.md"])
    assert any(t.endswith("read_path_v2.md") for t in v2["templates/read_path.md"])
    assert MIGRATION_0002 in v2["memoryd/store/migrations.py"]
    watched = real_map["v2_watch_paths"]
    for path in (VERSIONS, READINESS, MIGRATIONS_DIR, "codex-rs/protocol/src/memory_version.rs"):
        assert path in watched
    assert "codex-rs/state/src/migrations.rs" in real_map["watch_paths"]
