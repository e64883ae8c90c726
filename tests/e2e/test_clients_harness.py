"""The client harness itself: both real CLIs reach the scripted model and leave transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.client_models import ClientModels, ClientRequest
from tests.e2e.clients import ClientSandbox
from tests.e2e.mockllm import Text

pytestmark = pytest.mark.e2e


def test_both_clients_answer_from_the_scripted_model_and_keep_a_transcript(tmp_path: Path) -> None:
    with ClientModels() as models:
        box = ClientSandbox(tmp_path, models)
        claude = box.claude("remember: the build uses tabs")
        assert claude.returncode == 0, claude.stderr[-2000:]
        assert "ok: remember: the build uses tabs" in claude.stdout
        codex = box.codex("remember: the build uses spaces")
        assert codex.returncode == 0, codex.stderr[-2000:]
        assert "ok: remember: the build uses spaces" in codex.stdout
        apis = {r.api for r in models.requests}
        assert apis == {"messages", "responses"}
        assert len(box.claude_transcripts()) == 1
        assert len(box.codex_rollouts()) == 1
        assert "the build uses tabs" in box.claude_transcripts()[0].read_text()
        assert "the build uses spaces" in box.codex_rollouts()[0].read_text()


def test_a_scripted_responder_decides_the_answer(tmp_path: Path) -> None:
    def responder(req: ClientRequest) -> Text:
        return Text(f"{req.api} saw {len(req.user_texts())} user turn(s)")

    with ClientModels(responder) as models:
        box = ClientSandbox(tmp_path, models)
        out = box.codex("one turn")
        assert out.returncode == 0, out.stderr[-2000:]
        assert "responses saw 1 user turn(s)" in out.stdout
