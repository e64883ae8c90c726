"""Bytes memoryd adds to each request of the real Claude Code and Codex.

One fact is said in a sandboxed ``opencode serve`` (scripted model) and extracted and
consolidated by ``memoryd run --once``, as in ``tests/e2e/test_client_readback_e2e.py``. Then
each client answers the same one-line prompt in that project twice against the scripted client
model server, first without memoryd, then after ``memoryd install claude-code|codex``; the
server records every request body. Printed per client: the bytes of each request of the turn
without and with memoryd, and what is memoryd's in the request with it: the block (once, at
session start) and its MCP tool definitions.

    .venv/bin/python bench/client_bytes.py

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.client_models import ClientModels, ClientRequest
from tests.e2e.clients import ClientSandbox, client_binary
from tests.e2e.consolidator import ScriptedConsolidator, install
from tests.e2e.mockllm import MockLLM
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode
from tests.e2e.test_phase1_e2e import memoryd, run_env

FACT = "Deploys in this repo go out with make ship-heron from the release branch."
PROMPT = "what changed in the build last week?"


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def memoryd_tools(req: ClientRequest) -> int:
    """Bytes of memoryd's tool definitions in one request (Codex: its namespace tool)."""
    total = 0
    for tool in req.body.get("tools") or []:
        if "memoryd" in str(tool.get("name", "")):
            total += _size(tool)
    return total


def turn(
    clients: ClientSandbox, models: ClientModels, which: str, cwd: Path
) -> list[ClientRequest]:
    models.clear()
    run = clients.claude if which == "claude" else clients.codex
    out = run(PROMPT, cwd=cwd)
    if out.returncode != 0:
        raise RuntimeError(f"{which} failed: {out.stderr[-1500:]}")
    return list(models.requests)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memoryd-client-bytes-") as tmp, MockLLM() as mock:
        box = OpencodeSandbox(Path(tmp) / "oc", ensure_opencode(), mock.base_url)
        try:
            box.start()
            install(mock, ScriptedConsolidator(scoped=True))
            sid = box.driver.create_session("deploys", directory=box.project_dir)["id"]
            box.driver.say(sid, FACT, directory=box.project_dir)
            env = run_env(box)
            out = memoryd(env, "run", "--once")
            if "phase 2: consolidated" not in out.stdout:
                print(out.stdout + out.stderr, file=sys.stderr)
                return 1
        finally:
            box.stop()
        block_files = list((box.memoryd_home / "state" / "readpath" / "projects").glob("*.md"))
        block = max((p.read_text() for p in block_files), key=len)
        print(f"the project's block: {len(block.encode()):,} B ({len(block):,} characters)")
        with ClientModels() as models:
            clients = ClientSandbox(
                Path(tmp) / "clients", models, extra_env={"MEMORYD_HOME": str(box.memoryd_home)}
            )
            before = {w: turn(clients, models, w, box.project_dir) for w in ("claude", "codex")}
            for client in ("claude-code", "codex"):
                got = memoryd(
                    clients.env, "install", client, "--codex-bin", str(client_binary("codex"))
                )
                if got.returncode != 0:
                    print(got.stdout + got.stderr, file=sys.stderr)
                    return 1
            after = {w: turn(clients, models, w, box.project_dir) for w in ("claude", "codex")}
    for which in ("claude", "codex"):
        b = [len(r.raw) for r in before[which]]
        a = [len(r.raw) for r in after[which]]
        print(f"{which}: {len(b)} request(s) without memoryd {b}, {len(a)} with {a}")
        escaped = len(json.dumps(block)[1:-1].encode())  # the block as the JSON body holds it
        for i, (x, y) in enumerate(zip(b, a, strict=False)):
            req = after[which][i]
            has_block = json.dumps(block)[1:-1] in req.text()
            tools = memoryd_tools(req)
            rest = y - x - tools - (escaped if has_block else 0)
            print(
                f"  request {i + 1}: +{y - x:,} B = block {escaped if has_block else 0:,} B "
                f"+ memoryd's tool definitions {tools:,} B + the client's own wrapping {rest:,} B"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
