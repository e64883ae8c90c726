"""Bytes of the model requests memoryd makes, through the real opencode: two short sessions.

Two short sessions (a decision and a preference) are said in a sandboxed ``opencode serve`` wired
to the scripted mock model; ``memoryd run --once`` extracts both and runs the first
consolidation. Every model request memoryd's helpers send is weighed as opencode sends it (JSON
body bytes): each extraction request split into its fixed part (system text and tool schema,
the same for every session) and the session's own part, and the first consolidation request
whole, with its first model turn's system text and tool schema apart.

Run it on two trees to compare (the checkout's own code is what ``memoryd`` runs)::

    .venv/bin/python bench/requests.py

Not a test: nothing here is collected by pytest.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.consolidator import ScriptedConsolidator, install, is_consolidation
from tests.e2e.mockllm import MockLLM, is_extraction
from tests.e2e.sandbox import OpencodeSandbox, ensure_opencode
from tests.e2e.test_phase1_e2e import memoryd, run_env

SESSIONS = (
    ("database choice", "We chose PostgreSQL 16 for the billing service; SQLite is too limited."),
    ("test style", "From now on I prefer pytest fixtures over setUp methods in this repo."),
)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _split(body: dict[str, Any]) -> tuple[int, int, int]:
    """(system bytes, tool schema bytes, whole body bytes) of one chat request."""
    system = sum(_size(m) for m in body.get("messages", []) if m.get("role") == "system")
    return system, _size(body.get("tools") or []), _size(body)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="memoryd-requests-") as tmp, MockLLM() as mock:
        box = OpencodeSandbox(Path(tmp), ensure_opencode(), mock.base_url)
        try:
            box.start()
            install(mock, ScriptedConsolidator())
            for title, text in SESSIONS:
                sid = box.driver.create_session(title, directory=box.project_dir)["id"]
                box.driver.say(sid, text, directory=box.project_dir)
            mock.clear()
            env = run_env(box)
            out = memoryd(env, "run", "--once", "--force-consolidation")
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            extraction = [r.body for r in mock.requests if is_extraction(r.body)]
            consolidation = [r.body for r in mock.requests if is_consolidation(r.body)]
        finally:
            box.stop()
    if not extraction or not consolidation:
        print("no extraction or consolidation request was seen", file=sys.stderr)
        return 1
    print(f"{len(extraction)} extraction requests, {len(consolidation)} consolidation requests")
    for i, body in enumerate(extraction):
        system, tools, whole = _split(body)
        print(
            f"extraction {i + 1}: fixed {(system + tools) / 1000:.1f} KB ({system + tools:,} B) "
            f"(system {system / 1000:.1f} + tools {tools / 1000:.1f}), whole {whole / 1000:.1f} KB"
        )
    system, tools, whole = _split(consolidation[0])
    print(
        f"first consolidation request: whole {whole / 1000:.1f} KB ({whole:,} B) "
        f"(system {system / 1000:.1f} KB, tools {tools / 1000:.1f} KB); "
        f"{len(consolidation)} model turns, {sum(map(_size, consolidation)) / 1000:.1f} KB in all"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
