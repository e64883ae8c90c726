"""What ``memoryd run`` loads: modules only other commands use stay out of the daemon's memory."""

from __future__ import annotations

import subprocess
import sys

# Each is 0.4-1.8 MB of RSS in a process that never uses it (issue 16: an idle daemon <= 50 MB).
NOT_IN_THE_DAEMON = [
    "click",  # httpx's command-line client
    "pygments",
    "httpx._main",
    "tiktoken",  # the tokenizer lives in a helper process (memoryd.tokens)
    "memoryd.tools",  # the memory tools: MCP server and `memoryd memory`
    "memoryd.runtime.service",  # `memoryd service`; plistlib pulls in xml
    "plistlib",
]


def test_the_daemons_imports_leave_out_what_it_never_uses():
    probe = (
        "import sys, memoryd.cli, memoryd.runtime.daemon, memoryd.write.passes\n"
        f"print(sorted(m for m in {NOT_IN_THE_DAEMON!r} if sys.modules.get(m) is not None))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_httpx_still_works_without_its_cli():
    probe = "import memoryd, httpx\nprint(httpx.Client, callable(httpx.main))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert "httpx.Client" in out and "True" in out
