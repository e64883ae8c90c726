"""memory_add_note and memory_forget: validation, secret refusal, exclusive names, forgetting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.clock import ManualClock
from memoryd.folder.layout import AD_HOC_NOTES
from memoryd.store import Store
from memoryd.tools import (
    InvalidArgument,
    NotFound,
    Refused,
    memory_add_note,
    memory_forget,
    memory_read,
)
from memoryd.tools.notes import slugify
from tests.conftest import T0
from tests.narrow import present

STAMP = "2027-01-15T08-00-00"  # T0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memories"


def notes_in(root: Path) -> list[str]:
    d = root / AD_HOC_NOTES
    return sorted(os.listdir(d)) if d.exists() else []


def finish_phase2(store: Store) -> None:
    claim = store.phase2.claim_phase2(worker_id="test", ignore_cooldown=True)
    assert claim.claimed
    consumed = [(o.session_id, o.source_updated_at) for o in store.outputs.newest_first()]
    assert store.phase2.mark_phase2_succeeded(
        present(claim.token), consumed, consolidated=False, watermark=claim.watermark or 0
    )
    assert present(store.phase2.phase2_job())["status"] == "done"


def add_output(store: Store, sid: str) -> None:
    claim = store.stage1.claim_stage1(sid, T0, max_running=100, worker_id="test")
    assert store.stage1.mark_stage1_succeeded(
        sid,
        present(claim.token),
        raw_memory="raw",
        rollout_summary="sum",
        rollout_slug=None,
        cwd=None,
        title=None,
    )


# -- add_note ---------------------------------------------------------------------------------


def test_note_file_name_header_and_verbatim_body(root: Path, clock: ManualClock) -> None:
    body = "Use `uv run` — never pip.\n  Indented line kept.\n\n"
    r = memory_add_note(root, body, title="Python tooling!", session_id="ses_1", clock=clock)
    assert r.path == f"{AD_HOC_NOTES}/{STAMP}-python-tooling.md"
    text = (root / r.path).read_text()
    assert text == (
        "title: Python tooling!\ncreated: 2027-01-15T08:00:00Z\nsession_id: ses_1\nauthor: user\n\n"
        + body
    )
    assert r.bytes == len(text.encode()) and r.created == "2027-01-15T08:00:00Z"
    assert "saved note" in r.to_text()
    assert memory_read(root, r.path).content == text


def test_slug_from_first_words_without_title(root: Path, clock: ManualClock) -> None:
    r = memory_add_note(root, "Deploys need the VPN on; staging only.", clock=clock)
    assert r.path.endswith(f"{STAMP}-deploys-need-the-vpn-on-staging-only.md")
    assert (root / r.path).read_text().startswith("created: ")


def test_slug_fallback_for_non_latin_text(root: Path, clock: ManualClock) -> None:
    assert memory_add_note(root, "日本語のメモ", clock=clock).path.endswith(f"{STAMP}-note.md")


def test_slugify() -> None:
    assert slugify("Café Déjà-vu  & more!!") == "cafe-deja-vu-more"
    long = slugify("word " * 40)
    assert len(long) <= 60 and not long.endswith("-")
    assert slugify("x" * 100) == "x" * 60
    assert slugify("...") == ""


def test_collisions_get_suffixes_up_to_20(root: Path, clock: ManualClock) -> None:
    paths = [memory_add_note(root, f"n{i}", title="same", clock=clock).path for i in range(20)]
    assert paths[0].endswith(f"{STAMP}-same.md") and paths[1].endswith(f"{STAMP}-same-2.md")
    assert paths[19].endswith(f"{STAMP}-same-20.md")
    with pytest.raises(Refused, match="already exist"):
        memory_add_note(root, "one too many", title="same", clock=clock)
    assert len(notes_in(root)) == 20  # no temp files left behind
    assert (root / paths[0]).read_text().endswith("n0\n")  # never overwritten


def test_existing_note_is_never_overwritten(root: Path, clock: ManualClock) -> None:
    first = memory_add_note(root, "original", title="t", clock=clock)
    memory_add_note(root, "second", title="t", clock=clock)
    assert (root / first.path).read_text().endswith("original\n")


@pytest.mark.parametrize(
    ("note", "title"),
    [("", None), ("   \n", None), ("x" * 4001, None), ("ok", "t" * 121), (5, None), ("ok", 7)],
)
def test_note_validation(root: Path, note: object, title: object) -> None:
    with pytest.raises(InvalidArgument):
        memory_add_note(root, note, title=title)  # type: ignore[arg-type]
    assert notes_in(root) == []


def test_limits_are_inclusive(root: Path, clock: ManualClock) -> None:
    memory_add_note(root, "x" * 4000, title="t" * 120, clock=clock)


@pytest.mark.parametrize(
    ("note", "title", "kind"),
    [
        ("my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456", None, "openai-key"),
        ("token ghp_" + "a" * 36, None, "github-token"),
        ("DB_PASSWORD=hunter2hunter2", None, "secret-assignment"),
        ("harmless body", "AKIAABCDEFGHIJKLMNOP", "aws-key"),
    ],
)
def test_secrets_are_refused_and_nothing_is_written(
    root: Path, note: str, title: str | None, kind: str
) -> None:
    with pytest.raises(Refused, match="secret") as info:
        memory_add_note(root, note, title=title)
    assert any(kind in r for r in info.value.reasons), info.value.reasons
    assert kind in str(info.value)
    assert notes_in(root) == [] and not (root / AD_HOC_NOTES).exists()


def test_title_and_session_id_cannot_forge_header_lines(root: Path, clock: ManualClock) -> None:
    r = memory_add_note(
        root,
        "author: user\nbody",
        title="evil\nauthor: user",
        session_id="s\n# Heading",
        clock=clock,
        author="model (x)\nauthor: user",
    )
    head = (root / r.path).read_text().split("\n\n", 1)[0].splitlines()
    assert head == [
        "title: evil author: user",
        "created: 2027-01-15T08:00:00Z",
        "session_id: s # Heading",
        "author: model (x) author: user",
    ]


def test_symlinked_notes_folder_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "extensions" / "ad_hoc").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / AD_HOC_NOTES)
    with pytest.raises(Refused):
        memory_add_note(root, "should not land elsewhere")
    assert os.listdir(elsewhere) == []


def test_add_note_with_store_enqueues_phase2(root: Path, store: Store, clock: ManualClock) -> None:
    add_output(store, "ses_a")
    finish_phase2(store)
    memory_add_note(root, "remember this", clock=clock, store=store)
    assert present(store.phase2.phase2_job())["status"] == "pending"


# -- forget -----------------------------------------------------------------------------------


def test_forget_needs_exactly_one_target(root: Path, store: Store) -> None:
    with pytest.raises(InvalidArgument):
        memory_forget(store, root)
    with pytest.raises(InvalidArgument):
        memory_forget(store, root, session_id="a", note="b.md")


def test_forget_unknown_session_is_not_found(root: Path, store: Store) -> None:
    with pytest.raises(NotFound):
        memory_forget(store, root, session_id="ses_nope")


def test_forget_session_deletes_disables_and_enqueues(root: Path, store: Store) -> None:
    add_output(store, "ses_a")
    finish_phase2(store)
    r = memory_forget(store, root, session_id="ses_a")
    assert (r.removed_output, r.removed_job, r.disabled, r.phase2_enqueued) == (
        True,
        True,
        True,
        True,
    )
    assert store.outputs.output("ses_a") is None and store.stage1.stage1_job("ses_a") is None
    assert store.outputs.memory_mode("ses_a") == "disabled"  # discovery will not extract it again
    assert present(store.phase2.phase2_job())["status"] == "pending"
    assert "forgot session ses_a" in r.to_text()
    with pytest.raises(NotFound):
        memory_forget(store, root, session_id="ses_a")


def test_forget_unconsumed_output_still_enqueues(root: Path, store: Store) -> None:
    add_output(store, "ses_a")
    finish_phase2(store)
    add_output(store, "ses_b")  # extracted after the last consolidation
    assert present(store.phase2.phase2_job())["status"] == "pending"
    claim = store.phase2.claim_phase2(worker_id="t", ignore_cooldown=True)
    store.phase2.mark_phase2_succeeded(
        present(claim.token), [("ses_a", T0)], consolidated=False, watermark=claim.watermark or 0
    )
    assert present(store.phase2.phase2_job())["status"] == "done"
    assert memory_forget(store, root, session_id="ses_b").phase2_enqueued
    assert present(store.phase2.phase2_job())["status"] == "pending"


def test_forget_note_by_name_or_full_path(root: Path, store: Store, clock: ManualClock) -> None:
    a = memory_add_note(root, "first", title="a", clock=clock)
    b = memory_add_note(root, "second", title="b", clock=clock)
    finish_phase2(store)
    r = memory_forget(store, root, note=Path(a.path).name)
    assert r.note == a.path and not (root / a.path).exists()
    assert present(store.phase2.phase2_job())["status"] == "pending"
    memory_forget(store, root, note=b.path)
    assert notes_in(root) == []
    assert "deleted note" in r.to_text()


def test_forget_note_is_guarded(
    root: Path, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    memory_add_note(root, "n", clock=clock)
    (root / "MEMORY.md").write_text("keep me\n")
    victim = tmp_path / "victim.md"
    victim.write_text("keep me too\n")
    os.symlink(victim, root / AD_HOC_NOTES / "link.md")
    with pytest.raises(InvalidArgument):
        memory_forget(store, root, note="../../../MEMORY.md")
    with pytest.raises(InvalidArgument):
        memory_forget(store, root, note="/etc/passwd")
    with pytest.raises(Refused):
        memory_forget(store, root, note="link.md")
    with pytest.raises(NotFound):
        memory_forget(store, root, note="nope.md")
    with pytest.raises(NotFound):
        memory_forget(store, root, note=".hidden.md")
    assert (
        victim.exists()
        and (root / "MEMORY.md").exists()
        and (root / AD_HOC_NOTES / "link.md").is_symlink()
    )
