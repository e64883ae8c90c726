"""The labelled corpora: every secret sample disappears, every ham line survives byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.redact import contains_secret, find_secrets, redact
from memoryd.tools import Refused, memory_add_note
from memoryd.write.phase2 import redact_agent_files
from tests.unit.redact_corpus import HAM, SECRETS, Sample, make_secrets


def test_the_corpora_are_big_enough() -> None:
    assert len(SECRETS) >= 120
    assert len({s.fmt for s in SECRETS}) >= 60
    assert len(HAM) >= 300
    for sample in SECRETS:
        assert sample.secret in sample.text, sample.fmt


@pytest.mark.parametrize("sample", SECRETS, ids=[f"{i}-{s.fmt}" for i, s in enumerate(SECRETS)])
def test_secret_sample_is_redacted(sample: Sample) -> None:
    out = redact(sample.text)
    assert sample.secret not in out
    assert sample.keep in out, f"redaction ate the surrounding text: {out!r}"
    assert find_secrets(sample.text)
    assert contains_secret(sample.text)
    assert redact(out) == out


@pytest.mark.parametrize("sample", SECRETS, ids=[f"{i}-{s.fmt}" for i, s in enumerate(SECRETS)])
def test_secret_sample_inside_a_json_string_is_redacted_and_parses(sample: Sample) -> None:
    """Tool output reaches the redactor inside JSON strings: escaped newlines and quotes."""
    wrapped = json.dumps({"tool": "bash", "output": sample.text, "exit": 0})
    out = redact(wrapped)
    assert json.loads(out)["exit"] == 0
    assert sample.secret not in out
    assert json.dumps(sample.secret)[1:-1] not in out


@pytest.mark.parametrize("line", HAM)
def test_ham_line_is_unchanged(line: str) -> None:
    assert redact(line) == line
    assert find_secrets(line) == []


def test_ham_as_one_text_is_unchanged() -> None:
    text = "\n".join(HAM)
    assert redact(text) == text
    wrapped = json.dumps({"output": text})
    assert redact(wrapped) == wrapped


def test_json_samples_still_parse_after_redaction() -> None:
    parsed = 0
    for sample in SECRETS:
        try:
            json.loads(sample.text)
        except ValueError:
            continue
        json.loads(redact(sample.text))
        parsed += 1
    assert parsed >= 5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_random_values_of_the_same_formats_are_redacted(seed: int) -> None:
    """The rules fit the formats, not the corpus's particular values."""
    missed = [s.fmt for s in make_secrets(seed) if s.secret in redact(s.text)]
    assert missed == []


def test_note_refusal_uses_the_same_detector(tmp_path: Path) -> None:
    refused = 0
    for sample in SECRETS:
        if len(sample.text) > 4000:
            continue
        with pytest.raises(Refused):
            memory_add_note(tmp_path / "memories", sample.text)
        refused += 1
    assert refused >= 120
    assert not (tmp_path / "memories").exists()


def test_consolidator_output_scrub_uses_the_same_detector(tmp_path: Path) -> None:
    (tmp_path / "skills" / "ops").mkdir(parents=True)
    half = len(SECRETS) // 2
    memory = "# Memory\n" + "\n".join(f"- {s.text}" for s in SECRETS[:half]) + "\n"
    skill = "\n\n".join(s.text for s in SECRETS[half:]) + "\n"
    (tmp_path / "MEMORY.md").write_text(memory)
    (tmp_path / "skills" / "ops" / "SKILL.md").write_text(skill)
    (tmp_path / "memory_summary.md").write_text("v1\n" + "\n".join(HAM) + "\n")
    assert redact_agent_files(tmp_path) == ["MEMORY.md", "skills/ops/SKILL.md"]
    scrubbed = (tmp_path / "MEMORY.md").read_text() + (tmp_path / "skills/ops/SKILL.md").read_text()
    assert [s.fmt for s in SECRETS if s.secret in scrubbed] == []
    assert (tmp_path / "memory_summary.md").read_text() == "v1\n" + "\n".join(HAM) + "\n"
