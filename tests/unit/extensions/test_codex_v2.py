"""The export to a v2 Codex home asks its consolidator for its summary only, never a MEMORY.md."""

from __future__ import annotations

from pathlib import Path

from memoryd.extensions.codex import export_codex
from memoryd.paths import templates_dir
from tests.unit.extension_helpers import settings_with, write

INSTRUCTIONS = "extensions/opencode_import/instructions.md"


def export_to(home: Path, memory_root: Path) -> str:
    write(memory_root / "MEMORY.md", "# P\n- fact\n")
    write(memory_root / "memory_summary.md", "v1\n## User profile\nx\n")
    settings = settings_with(codex_export=True, codex_home=str(home))
    assert export_codex(settings, memory_root) is True
    folder = "memories" if (home / "memories").is_dir() else "memories_v2"
    return (home / folder / INSTRUCTIONS).read_text()


def test_a_v2_home_gets_instructions_for_its_summary(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    (home / "memories_v2").mkdir(parents=True)
    text = export_to(home, tmp_path / "mem")
    assert text == (templates_dir() / "extensions/codex_export_v2/instructions.md").read_text()
    assert "your `MEMORY.md`" not in text and "no `MEMORY.md` of yours" in text
    assert not (home / "memories").exists()


def test_a_legacy_home_keeps_the_memory_md_instructions(tmp_path: Path) -> None:
    home = tmp_path / "codex"
    (home / "memories").mkdir(parents=True)
    text = export_to(home, tmp_path / "mem")
    assert text == (templates_dir() / "extensions/codex_export/instructions.md").read_text()
    assert "your `MEMORY.md`" in text
