"""Which tool inputs name the memory folder (the rule table, one line per spelling)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memoryd.write.edit_trace import Folder, names_folder, patch_names_folder

HOME = "/home/dev"
MEM = f"{HOME}/.local/share/memoryd/memories"
FOLDER = Folder((MEM,), ("MEMORY.md", "memory_summary.md", "skills/deploy/SKILL.md"), HOME)
PROJECT = "/home/dev/src/app"

NAMED: list[tuple[str, Any, str]] = [
    ("bash", {"command": f"cat > {MEM}/memory_summary.md <<'EOF'\nv1\nEOF"}, PROJECT),
    ("bash", {"command": "cat > ~/.local/share/memoryd/memories/memory_summary.md"}, PROJECT),
    ("bash", {"command": 'echo x >> "$HOME/.local/share/memoryd/memories/MEMORY.md"'}, PROJECT),
    (
        "bash",
        {"command": "printf x | tee ${HOME}/.local/share/memoryd/memories/MEMORY.md"},
        PROJECT,
    ),
    ("bash", {"command": "cd ~/.local/share/memoryd/memories && sed -i s/a/b/ MEMORY.md"}, PROJECT),
    ("bash", {"command": "cd ../../.local/share/memoryd; echo y > memories/notes.txt"}, PROJECT),
    ("bash", {"command": "pushd ~/.local/share/memoryd/memories; rm -rf skills"}, PROJECT),
    ("bash", {"command": "cp /tmp/x ~/.local/share/memoryd/mem*/memory_summary.md"}, PROJECT),
    ("bash", {"command": "dd if=/tmp/x of=~/.local/share/memoryd/memories/MEMORY.md"}, PROJECT),
    ("bash", {"command": "python3 -c \"open('" + MEM + "/MEMORY.md','w').write('x')\""}, PROJECT),
    ("bash", {"command": 'D=$(mktemp); cp "$D" "$MEMDIR/memory_summary.md"'}, PROJECT),
    ("bash", {"command": "ls", "workdir": MEM}, PROJECT),
    ("bash", {"command": "echo x > MEMORY.md"}, MEM),
    ("bash", {"command": "echo x > skills/deploy/SKILL.md"}, f"{MEM}/skills"),
    ("write", {"filePath": f"{MEM}/MEMORY.md", "content": "x"}, PROJECT),
    ("write", {"filePath": "skills/deploy/SKILL.md", "content": "x"}, MEM),
    ("write", {"filePath": "../memories/MEMORY.md", "content": "x"}, f"{MEM}/../x"),
    ("edit", {"filePath": f"{MEM}/memory_summary.md", "oldString": "a", "newString": "b"}, "/"),
    ("multiedit", {"filePath": "x.py", "edits": [{"filePath": f"{MEM}/MEMORY.md"}]}, PROJECT),
    ("patch", {"patchText": f"*** Begin Patch\n*** Add File: {MEM}/skills/x/SKILL.md\n"}, "/"),
    ("apply_patch", {"input": f"*** Update File: {MEM}/MEMORY.md\n@@\n-a\n+b\n"}, "/"),
    ("some_mcp_write", {"target": {"path": f"{MEM}/MEMORY.md"}}, PROJECT),
    ("task", {"prompt": f"write the summary into {MEM}/memory_summary.md"}, PROJECT),
]

NOT_NAMED: list[tuple[str, Any, str]] = [
    ("bash", {"command": "pytest -q tests/ && git status"}, PROJECT),
    ("bash", {"command": "cat > docs/notes.md <<'EOF'\nmemories are nice\nEOF"}, PROJECT),
    ("bash", {"command": f"echo x > {HOME}/.local/share/other/MEMORY.md"}, PROJECT),
    ("bash", {"command": "curl -s https://example.com/memories/MEMORY.md"}, PROJECT),
    ("write", {"filePath": f"{PROJECT}/MEMORY.md", "content": f"see {MEM}"}, PROJECT),
    ("write", {"filePath": "src/app.py", "content": "x"}, PROJECT),
    ("write", {"filePath": "MEMORY.md", "content": "x"}, PROJECT),
    ("apply_patch", {"patchText": "*** Update File: memory_summary.md\n"}, PROJECT),
    ("edit", {"filePath": f"{MEM}-backup/MEMORY.md", "oldString": "a", "newString": "b"}, "/"),
    ("read", {"filePath": f"{MEM}/MEMORY.md"}, PROJECT),
    ("grep", {"pattern": "x", "path": MEM}, PROJECT),
    ("memory_search", {"query": MEM}, PROJECT),
]


@pytest.mark.parametrize(("tool", "given", "cwd"), NAMED)
def test_inputs_that_name_the_folder(tool: str, given: Any, cwd: str) -> None:
    assert names_folder(tool, given, [cwd], FOLDER) is not None


@pytest.mark.parametrize(("tool", "given", "cwd"), NOT_NAMED)
def test_inputs_that_do_not(tool: str, given: Any, cwd: str) -> None:
    assert names_folder(tool, given, [cwd], FOLDER) is None


def test_a_symlinked_route_into_the_folder_is_resolved(tmp_path: Path) -> None:
    mem = tmp_path / "memories"
    mem.mkdir()
    (tmp_path / "alias").symlink_to(mem)
    folder = Folder.of(mem, ["MEMORY.md"], home=str(tmp_path))
    given = {"command": f"echo x > {tmp_path}/alias/MEMORY.md"}
    assert names_folder("bash", given, ["/"], folder) is not None
    real_home = Folder.of(tmp_path / "alias", ["MEMORY.md"], home=str(tmp_path))
    assert real_home.holds(os.path.realpath(mem))


def test_patch_part_files() -> None:
    assert patch_names_folder([f"{MEM}/MEMORY.md"], FOLDER) is not None
    assert patch_names_folder([f"{PROJECT}/MEMORY.md"], FOLDER) is None
    assert patch_names_folder("not a list", FOLDER) is None


def test_an_input_too_large_to_scan_counts_as_naming_the_folder() -> None:
    """Padding a command past the scan cap must not hide the path at its end."""
    given = {"command": "echo " + "a " * 1_000_000 + "> /tmp/anything"}
    assert "too large" in (names_folder("bash", given, [PROJECT], FOLDER) or "")
    assert (
        names_folder("write", {"filePath": "/srv/x", "content": "a" * 10**6}, ["/"], FOLDER) is None
    )
