"""Regenerate the client transcript fixtures with the real Claude Code and Codex binaries.

Run by hand (``.venv/bin/python -m tests.unit.host.client_fixtures.generate``) after a client update;
the unit tests only read the files it writes. Each client runs in the e2e sandbox against the
scripted model: a first turn in a subfolder of a git repository that reads a file through a tool,
then a second turn in the same session that corrects it. Machine-specific text is replaced
(the sandbox root becomes ``/home/user``) and long strings of records the parsers skip are cut, so
the files stay small and say nothing about this machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.e2e.client_models import ClientModels, ClientReply, ClientRequest
from tests.e2e.clients import ClientSandbox
from tests.e2e.mockllm import Text, ToolCall

HERE = Path(__file__).resolve().parent
FAKE_ROOT = "/home/user"
KEEP_WHOLE = {"user", "assistant", "response_item", "session_meta", "summary", "custom-title"}
CUT = 160


def _responder(box: ClientSandbox) -> Any:
    def respond(req: ClientRequest) -> ClientReply:
        if req.has_tool_result_after_last_user_text():
            return Text("Read it: the deploy target is make ship.")
        last = req.last_user_text()
        if "READ" in last:
            if req.api == "messages":
                return [ToolCall("Read", {"file_path": str(box.project / "app" / "DEPLOY.txt")})]
            return [ToolCall("exec_command", {"cmd": "cat DEPLOY.txt"})]
        return Text("Noted: " + " ".join(last.split())[:70])

    return respond


def _cut(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return value if len(value) <= CUT else value[:CUT] + "…"
    if isinstance(value, list | dict) and depth >= 3:
        return "…"
    if isinstance(value, list):
        return [_cut(v, depth + 1) for v in value[:6]]
    if isinstance(value, dict):
        return {k: _cut(v, depth + 1) for k, v in value.items()}
    return value


def _clean(path: Path, root: Path) -> str:
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        kind = record.get("type")
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        harness = kind == "response_item" and payload.get("role") == "developer"
        if kind not in KEEP_WHOLE or harness:
            record = _cut(record)
        if kind == "session_meta":
            record["payload"] = _cut(record["payload"])
        text = json.dumps(record, ensure_ascii=False)
        text = text.replace(str(root), FAKE_ROOT)
        text = re.sub(r"Linux [0-9][^\"\\]*", "Linux", text)
        out.append(text)
    return "\n".join(out) + "\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, ClientModels() as models:
        root = Path(tmp)
        box = ClientSandbox(root, models)
        models.set_responder(_responder(box))
        subprocess.run(["git", "init", "-q", str(box.project)], check=True)
        app = box.project / "app"
        app.mkdir()
        (app / "DEPLOY.txt").write_text("make ship\n")
        for run in (
            box.claude("We always deploy with make ship. READ the deploy file.", cwd=app),
            box.claude("Correction: staging uses make ship-staging.", "--continue", cwd=app),
            box.codex("Our staging host is blue-7. READ the deploy file.", cwd=app),
            box.codex("Correction: staging host is blue-8.", cwd=app),
        ):
            assert run.returncode == 0, run.stderr[-2000:]
        (claude,) = box.claude_transcripts()
        rollouts = box.codex_rollouts()
        (HERE / "claude_subfolder.jsonl").write_text(_clean(claude, root))
        (HERE / "codex_subfolder.jsonl").write_text(_clean(rollouts[0], root))
        (HERE / "codex_second.jsonl").write_text(_clean(rollouts[-1], root))


if __name__ == "__main__":
    main()
