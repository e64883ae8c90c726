"""The real Claude Code and Codex CLIs in an isolated sandbox, pointed at a scripted model.

Everything a client could touch lives under one temp folder: ``HOME``, ``CLAUDE_CONFIG_DIR``,
``CODEX_HOME`` and a project folder. Both clients talk to one :class:`ClientModels` server
(facts in ``reference/real-clients.md``); the binaries come from ``scripts/install-clients``.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.e2e.client_models import ClientModels

REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-clients"


@cache
def client_binary(which: str) -> Path:
    """The pinned native binary of ``codex`` or ``claude`` (installed into the test cache once)."""
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), which], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"scripts/install-clients {which} failed:\n{proc.stderr[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def codex_config(base_url: str, extra: str = "") -> str:
    """A Codex ``config.toml`` using the scripted model, headless and without update checks."""
    return (
        'model = "gpt-5"\n'
        'model_provider = "mock"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "read-only"\n'
        "check_for_update_on_startup = false\n"
        f"{extra}"
        "\n[model_providers.mock]\n"
        'name = "mock"\n'
        f'base_url = "{base_url}/v1"\n'
        'env_key = "MOCK_API_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )


@dataclass
class ClientSandbox:
    """One isolated world for both clients; ``env`` is what every client process gets."""

    root: Path
    models: ClientModels
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sub in ("home", "claude", "codex", "project"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        config = self.codex_home / "config.toml"
        if not config.exists():
            config.write_text(codex_config(self.models.base_url))

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def claude_config_dir(self) -> Path:
        return self.root / "claude"

    @property
    def codex_home(self) -> Path:
        return self.root / "codex"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_"))
        }
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            CLAUDE_CONFIG_DIR=str(self.claude_config_dir),
            CODEX_HOME=str(self.codex_home),
            ANTHROPIC_BASE_URL=self.models.base_url,
            ANTHROPIC_API_KEY="sk-ant-scripted-model",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            MOCK_API_KEY="scripted-model",
        )
        env.update(self.extra_env)
        return env

    def claude(
        self, prompt: str, *args: str, cwd: Path | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """``claude -p PROMPT ARGS…`` in the project folder (or ``cwd``)."""
        return subprocess.run(
            [str(client_binary("claude")), "-p", prompt, *args],
            cwd=cwd or self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def codex(
        self, prompt: str, *args: str, cwd: Path | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """``codex exec ARGS… PROMPT`` in the project folder (or ``cwd``)."""
        return subprocess.run(
            [str(client_binary("codex")), "exec", "--skip-git-repo-check", *args, prompt],
            cwd=cwd or self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def claude_transcripts(self) -> list[Path]:
        return sorted((self.claude_config_dir / "projects").glob("*/*.jsonl"))

    def codex_rollouts(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").rglob("rollout-*.jsonl"))
