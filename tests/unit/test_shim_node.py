"""The opencode shim (templates/opencode/memoryd.js) under node: its own test suite, and a smoke
test of the file as memoryd itself renders it. node is required: without it these tests fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd import prompts
from memoryd.tools.shim import SPECS

REPO = Path(__file__).resolve().parents[2]
SHIM = "opencode/memoryd.js"
PLACEHOLDERS = {
    "block_file",
    "projects_dir",
    "seen_dir",
    "spool_file",
    "server_file",
    "helper_agent_prefix",
    "memoryd_version",
    "tool_command",
    "tool_env",
    "tool_specs",
}


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "node is not on PATH: the opencode shim tests need node >= 18 (node:test)",
            pytrace=False,
        )
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    m = re.match(r"v(\d+)\.", version)
    if not m or int(m.group(1)) < 18:
        pytest.fail(
            f"node {version or '?'} is too old for the shim tests: need >= 18", pytrace=False
        )
    return node


def test_shim_node_suite_passes() -> None:
    node = _node()
    proc = subprocess.run(
        [node, "--test", "tests/shim/"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"node --test tests/shim/ failed ({proc.returncode}):\n{out[-6000:]}"
    )
    tests = re.search(r"^# tests (\d+)$", out, re.M)
    assert tests and int(tests.group(1)) >= 10, f"node found too few shim tests:\n{out[-2000:]}"
    assert re.search(r"^# fail 0$", out, re.M) and re.search(r"^# skipped 0$", out, re.M), out[
        -2000:
    ]


def test_memoryd_renders_a_loadable_shim(tmp_path: Path) -> None:
    """Render with memoryd.prompts (values as JSON literals, awkward paths) and load it in node."""
    node = _node()
    assert prompts.placeholders(SHIM) == PLACEHOLDERS
    state = tmp_path / 'st\'ate "dir" $1 \\g<0> \u2713'
    files = {
        "block_file": state / "readpath" / "block.md",
        "projects_dir": state / "readpath" / "projects",
        "seen_dir": state / "readpath" / "seen",
        "spool_file": state / "spool" / "citations.jsonl",
        "server_file": state / "opencode-server.json",
    }
    values = {
        **files,
        "helper_agent_prefix": "memoryd-",
        "memoryd_version": "0.1.0",
    }
    text = prompts.render(
        SHIM,
        **{k: json.dumps(str(v)) for k, v in values.items()},
        tool_command=json.dumps([sys.executable, "-m", "memoryd", "tool"]),
        tool_env=json.dumps({"MEMORYD_HOME": str(tmp_path / "home")}),
        tool_specs=json.dumps(SPECS),
    )
    shim = tmp_path / "memoryd.mjs"
    shim.write_text(text, encoding="utf-8")
    (state / "readpath").mkdir(parents=True)
    files["block_file"].write_text("## memory block\n", encoding="utf-8")
    script = """
const [shimPath] = process.argv.slice(1);
const mod = await import(require('node:url').pathToFileURL(shimPath).href);
const hooks = await mod.MemorydShim({ serverUrl: new URL('http://127.0.0.1:4096') });
const out = { system: ['provider prompt'] };
await hooks['experimental.chat.system.transform']({ sessionID: 'ses_x' }, out);
const read = await hooks.tool.memory_read.execute({ path: 'MEMORY.md', line: 1 }, { sessionID: 'ses_x' }).catch((e) => 'ERR ' + e.message);
console.log(JSON.stringify({ exports: Object.keys(mod), hooks: Object.keys(hooks).sort(), system: out.system, tools: Object.keys(hooks.tool), read }));
""".replace("require('node:url')", "(await import('node:url'))")
    proc = subprocess.run(
        [node, "--input-type=module", "-e", script, str(shim)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["exports"] == ["MemorydShim"]
    assert got["hooks"] == [
        "chat.message",
        "config",
        "experimental.chat.system.transform",
        "experimental.text.complete",
        "tool",
    ]
    # the three memory tools, answered by a real `memoryd tool` process in that home
    assert got["tools"] == ["memory_search", "memory_read", "memory_note"]
    assert got["read"].startswith("ERR ") and "MEMORY.md" in got["read"], got["read"]
    assert got["system"] == ["provider prompt", "## memory block\n"]
    info = json.loads(files["server_file"].read_text(encoding="utf-8"))
    assert info["url"] == "http://127.0.0.1:4096/" and info["version"] == "0.1.0"
    assert files["server_file"].stat().st_mode & 0o777 == 0o600
