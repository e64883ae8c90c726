"""The model runs in Claude Code: ``claude -p``, as the user is already signed in to it.

Each call is one child process with the client's own world switched off, flag by flag (observed
on Claude Code 2.1.332, see ``ARCHITECTURE.md``):

* ``--tools ""``: no built-in tool at all (no Read, Write, Bash, web, tasks, tool search);
* ``--setting-sources ""``: none of the user's or a project's settings, so no hooks (memoryd's
  own read-path hook included), permission rules or plugins, and no ``CLAUDE.md`` is loaded;
* ``--strict-mcp-config``: no MCP server but the one given with ``--mcp-config`` (phase 2 only:
  memoryd's own file tools, :mod:`memoryd.runner.files_mcp`, each named in ``--allowedTools``;
  ``--permission-mode dontAsk`` denies anything else instead of asking nobody);
* ``--no-session-persistence``: the run writes no transcript, so it never shows up among the
  user's Claude Code sessions that memoryd reads as input. Its display name is
  :data:`RUNNER_MARKER` as well, for any reader that meets one anyway;
* the prompt goes in on stdin (an extraction input is larger than one argument may be), the
  answer comes back as one JSON result with the structured output and the usage.

The child runs in memoryd's own empty helper folder with the user's environment (that is where
their sign-in lives) and is killed with its process group on timeout or cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from memoryd import prompts
from memoryd.errors import (
    ExtractionInvalid,
    HostNotStarted,
    HostProtocolError,
    HostTimeout,
    ModelCallError,
)
from memoryd.host.ids import CLAUDE_CODE
from memoryd.runner.base import (
    FILES_SERVER,
    FILES_TOOLS,
    AgentRun,
    Answer,
    RecordRun,
    estimated_usage,
)
from memoryd.store.ledger import CallUsage
from memoryd.tuning import (
    RUNNER_CONSOLIDATE_MAX_TURNS,
    RUNNER_EXTRACT_MAX_TURNS,
    RUNNER_PROCESSES,
)

log = logging.getLogger(__name__)

RUNNER_MARKER = "memoryd-runner"  # the display name of every run (they are never persisted)
_STDERR_KEEP = 2000


def find_claude(configured: str) -> str | None:
    """The ``claude`` executable: a path as configured, else looked up on PATH."""
    if os.sep in configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which(configured)


def model_arg(model: str | None) -> list[str]:
    """``--model`` from memoryd's ``provider/model`` setting (the provider is Claude's own)."""
    if not model:
        return []
    return ["--model", model.split("/", 1)[1] if "/" in model else model]


def base_args(system: str, *, max_turns: int) -> list[str]:
    return [
        "-p",
        "--output-format",
        "json",
        "--no-session-persistence",
        "--name",
        RUNNER_MARKER,
        "--tools",
        "",
        "--setting-sources",
        "",
        "--strict-mcp-config",
        "--permission-mode",
        "dontAsk",
        "--disable-slash-commands",
        "--system-prompt",
        system,
        "--max-turns",
        str(max_turns),
    ]


def files_server_args(root: Path) -> list[str]:
    """memoryd's own file tools for the memory folder, and the grant for exactly those."""
    config = {
        "mcpServers": {
            FILES_SERVER: {
                "type": "stdio",
                "command": sys.executable,
                "args": ["-m", "memoryd", "runner-files", str(root)],
                "env": {},
            }
        }
    }
    allowed = ",".join(f"mcp__{FILES_SERVER}__{t}" for t in FILES_TOOLS)
    return ["--mcp-config", json.dumps(config), "--allowedTools", allowed]


def usage_of(result: dict[str, Any], sent: str) -> tuple[CallUsage, bool]:
    """Tokens from the client's own report; estimated (and said so) when it has none."""
    usage = result.get("usage")
    cost = result.get("total_cost_usd")
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return estimated_usage(sent, str(result.get("result") or "")), True

    def num(key: str) -> int:
        v = usage.get(key)
        return int(v) if isinstance(v, (int, float)) else 0

    return (
        CallUsage(
            num("input_tokens"),
            num("output_tokens"),
            0,
            num("cache_read_input_tokens"),
            num("cache_creation_input_tokens"),
            float(cost) if isinstance(cost, (int, float)) else 0.0,
        ),
        False,
    )


def model_of(result: dict[str, Any], configured: str | None) -> str | None:
    used = result.get("modelUsage")
    if isinstance(used, dict) and used:
        return f"anthropic/{next(iter(used))}"
    return configured


def check_result(result: dict[str, Any]) -> None:
    """A result the client marked as an error becomes a model error (a 429 opens the circuit)."""
    if not result.get("is_error"):
        return
    status = result.get("api_error_status")
    errors = result.get("errors") or [result.get("result") or result.get("subtype") or "error"]
    raise ModelCallError(
        f"claude {result.get('subtype') or 'error'}",
        "; ".join(str(e) for e in errors)[:500],
        status=status if isinstance(status, int) else None,
    )


class ClaudeCodeRunner:
    name = CLAUDE_CODE

    def __init__(self, executable: str, *, workdir: Path, memories: Path) -> None:
        self.executable = executable
        self.workdir = workdir
        self.memories = memories
        self._gate = asyncio.Semaphore(RUNNER_PROCESSES)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # no update check, no telemetry: a background run must not reach anything but the model
        env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        return env

    async def run(self, args: list[str], stdin: str, timeout: float) -> dict[str, Any]:
        """One ``claude`` child: its JSON result, or the error it died with."""
        async with self._gate:
            return await self._run(args, stdin, timeout)

    async def _run(self, args: list[str], stdin: str, timeout: float) -> dict[str, Any]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            proc = await asyncio.create_subprocess_exec(
                self.executable,
                *args,
                cwd=self.workdir,
                env=self.env(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise HostNotStarted(self.executable, str(exc)) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode("utf-8")), timeout)
        except TimeoutError as exc:
            _kill(proc)
            await proc.wait()
            raise HostTimeout("claude -p", timeout) from exc
        except BaseException:
            _kill(proc)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            raise
        try:
            result = json.loads(out.decode("utf-8", errors="replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            tail = err.decode("utf-8", errors="replace")[-_STDERR_KEEP:].strip()
            if proc.returncode:
                raise HostNotStarted(
                    self.executable, f"exited with {proc.returncode}: {tail or 'no output'}"
                ) from None
            raise HostProtocolError("claude -p", f"no JSON result ({tail[:200]})") from None
        if not isinstance(result, dict):
            raise HostProtocolError("claude -p", "the result is not a JSON object")
        return result

    async def answer(
        self,
        *,
        key: str,
        system: str,
        text: str,
        schema: dict[str, Any],
        model: str | None,
        timeout: float,
    ) -> Answer:
        args = [
            *base_args(system, max_turns=RUNNER_EXTRACT_MAX_TURNS),
            "--json-schema",
            json.dumps(schema),
            *model_arg(model),
        ]
        log.debug("claude -p: extracting %s", key)
        result = await self.run(args, text, timeout)
        check_result(result)
        usage, estimated = usage_of(result, system + text)
        structured = result.get("structured_output")
        answer_text = result.get("result")
        if structured is None and not isinstance(answer_text, str):
            raise ExtractionInvalid("claude -p returned neither structured output nor text")
        return Answer(
            structured,
            answer_text if isinstance(answer_text, str) else "",
            usage,
            model_of(result, model),
            estimated,
        )

    async def consolidate(
        self, *, text: str, model: str | None, timeout: float, record: RecordRun
    ) -> None:
        system = prompts.render("runner_consolidator_system.md", memory_root=str(self.memories))
        args = [
            *base_args(system, max_turns=RUNNER_CONSOLIDATE_MAX_TURNS),
            *files_server_args(self.memories),
            *model_arg(model),
        ]
        run = AgentRun(CallUsage(), model, "aborted")
        try:
            result = await self.run(args, text, timeout)
            usage, estimated = usage_of(result, system + text)
            run = AgentRun(usage, model_of(result, model), "error", estimated)
            check_result(result)
            run = AgentRun(usage, run.model, "ok", estimated)
        finally:
            record(run)


def _kill(proc: asyncio.subprocess.Process) -> None:
    """End the client and what it started (its MCP server) together."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
