"""An isolated opencode for end-to-end tests, and a tiny sync driver for its HTTP API.

:class:`OpencodeSandbox` gives each test module its own HOME/XDG tree, an ``opencode.json`` whose
only provider is the scripted :class:`~tests.e2e.mockllm.MockLLM`, and a private
``opencode serve`` with password auth (started through memoryd's own
:class:`~memoryd.host.server.PrivateServer`, so that code is exercised too).

:class:`OpencodeDriver` deliberately does not use memoryd's HTTP client: the harness has to stay
an independent witness of what the host really does.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx

from memoryd.host.server import PrivateServer, ServerHandle, seed_config_dir

log = logging.getLogger(__name__)

OPENCODE_VERSION = "1.18.33"
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-opencode"

# Everything opencode would otherwise fetch, read from the real home, or download at run time.
ISOLATION_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
}
# Inherited variables that would let the real user's setup leak into a sandbox.
_STRIPPED_PREFIXES = ("OPENCODE_", "MEMORYD_")


@functools.cache
def ensure_opencode() -> Path:
    """Install the pinned opencode into the test cache (once per process) and return its binary."""
    if shutil.which("npm") is None:
        raise RuntimeError("npm is needed to install opencode for the e2e tests")
    started = time.monotonic()
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OPENCODE_VERSION": OPENCODE_VERSION},
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"scripts/install-opencode failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    binary = Path(lines[-1].strip())
    log.info("opencode %s at %s (%.1f s)", OPENCODE_VERSION, binary, time.monotonic() - started)
    return binary


def mock_provider_config(base_url: str) -> dict[str, Any]:
    """An ``opencode.json`` whose only provider is the mock model server at ``base_url``."""
    model = {"tool_call": True, "temperature": True}
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": "mock/mock-model",
        "small_model": "mock/mock-small",
        "enabled_providers": ["mock"],
        "lsp": False,
        "formatter": False,
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock LLM",
                "options": {"baseURL": base_url, "apiKey": "mock-key"},
                "models": {
                    "mock-model": {
                        "name": "Mock Model",
                        **model,
                        "limit": {"context": 128000, "output": 8192},
                    },
                    "mock-small": {
                        "name": "Mock Small",
                        **model,
                        "limit": {"context": 128000, "output": 4096},
                    },
                },
            }
        },
    }


def _obj(resp: httpx.Response) -> dict[str, Any]:
    return cast(dict[str, Any], resp.json())


def _list(resp: httpx.Response) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], resp.json())


class OpencodeDriver:
    """Sync calls to the opencode HTTP API, just enough to drive scenarios from tests."""

    def __init__(
        self,
        url: str,
        username: str,
        password: str,
        *,
        directory: Path | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.url = url
        self.directory = directory
        # Short connect timeout: a server that accepted but will never answer must fail fast.
        self.http = httpx.Client(
            base_url=url, auth=(username, password), timeout=httpx.Timeout(timeout, connect=5.0)
        )

    def close(self) -> None:
        self.http.close()

    def _params(self, directory: Path | str | None, **extra: Any) -> dict[str, Any]:
        d = directory if directory is not None else self.directory
        params = {k: v for k, v in extra.items() if v is not None}
        if d is not None:
            params["directory"] = str(d)
        return params

    def request(
        self,
        method: str,
        path: str,
        *,
        directory: Path | str | None = None,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        kwargs: dict[str, Any] = {"params": self._params(directory, **(params or {}))}
        if json_body is not None:
            kwargs["json"] = json_body
        if timeout is not None:
            kwargs["timeout"] = httpx.Timeout(timeout, connect=5.0)
        resp = self.http.request(method, path, **kwargs)
        resp.raise_for_status()
        return resp

    def health(self, timeout: float = 5.0) -> dict[str, Any]:
        return _obj(self.request("GET", "/global/health", timeout=timeout))

    def create_session(
        self, title: str = "e2e session", directory: Path | str | None = None, **body: Any
    ) -> dict[str, Any]:
        """Always titled, so opencode makes no extra title-generation model call."""
        return _obj(
            self.request(
                "POST", "/session", directory=directory, json_body={"title": title, **body}
            )
        )

    def get_session(self, session_id: str) -> dict[str, Any]:
        return _obj(self.request("GET", f"/session/{session_id}"))

    def prompt(
        self,
        session_id: str,
        body: dict[str, Any],
        *,
        directory: Path | str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """POST /session/{id}/message with an arbitrary body; blocks until the turn ends."""
        return _obj(
            self.request(
                "POST",
                f"/session/{session_id}/message",
                directory=directory,
                json_body=body,
                timeout=timeout,
            )
        )

    def say(
        self,
        session_id: str,
        text: str,
        *,
        agent: str = "build",
        directory: Path | str | None = None,
        timeout: float | None = None,
        **body: Any,
    ) -> dict[str, Any]:
        """One user turn; returns ``{info, parts}`` of the last assistant message."""
        payload = {"parts": [{"type": "text", "text": text}], "agent": agent, **body}
        return self.prompt(session_id, payload, directory=directory, timeout=timeout)

    def messages(
        self, session_id: str, directory: Path | str | None = None
    ) -> list[dict[str, Any]]:
        return _list(self.request("GET", f"/session/{session_id}/message", directory=directory))

    def delete_session(self, session_id: str) -> bool:
        return bool(self.request("DELETE", f"/session/{session_id}").json())

    def list_all_sessions(
        self, *, roots: bool = False, archived: bool = False, page_size: int = 1000
    ) -> list[dict[str, Any]]:
        """Every session of every project, following ``x-next-cursor`` pages."""
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": page_size, "roots": str(roots).lower()}
        if archived:
            params["archived"] = "true"
        while True:
            resp = self.http.get("/experimental/session", params=params)
            resp.raise_for_status()
            out += resp.json()
            cursor = resp.headers.get("x-next-cursor")
            if not cursor:
                return out
            params["cursor"] = cursor

    def agents(self, directory: Path | str | None = None) -> list[dict[str, Any]]:
        return _list(self.request("GET", "/agent", directory=directory))

    def dispose(self, directory: Path | str | None = None) -> None:
        """Make the instance for ``directory`` re-read agents and plugins (no restart)."""
        self.request("POST", "/instance/dispose", directory=directory)


class OpencodeSandbox:
    """An isolated XDG tree, a mock-LLM config, and a running private ``opencode serve``.

    Layout under ``root``: ``home/``, ``config/`` (``$XDG_CONFIG_HOME``; opencode's own config is
    ``config/opencode``), ``data/``, ``state/``, ``cache/``, ``project/`` (not a git repo),
    ``memoryd/`` (``MEMORYD_HOME``) and ``opencode-server.log``.
    """

    def __init__(
        self,
        root: Path,
        opencode_bin: Path | str,
        mock_base_url: str,
        *,
        extra_config: dict[str, Any] | None = None,
        start: bool = True,
        startup_timeout: float = 60.0,
    ) -> None:
        self.root = Path(root)
        self.opencode_bin = str(opencode_bin)
        self.mock_base_url = mock_base_url
        self.startup_timeout = startup_timeout
        self.home = self.root / "home"
        self.xdg_config = self.root / "config"
        self.xdg_data = self.root / "data"
        self.xdg_state = self.root / "state"
        self.xdg_cache = self.root / "cache"
        self.config_dir = self.xdg_config / "opencode"
        self.project_dir = self.root / "project"
        self.memoryd_home = self.root / "memoryd"
        self.log_file = self.root / "opencode-server.log"
        for d in (
            self.home,
            self.config_dir,
            self.xdg_data,
            self.xdg_state,
            self.xdg_cache,
            self.project_dir,
            self.memoryd_home,
        ):
            d.mkdir(parents=True, exist_ok=True)
        self.config: dict[str, Any] = mock_provider_config(mock_base_url)
        if extra_config:
            self.config.update(extra_config)
        self.write_config()
        seed_config_dir(self.config_dir)
        self.server: PrivateServer | None = None
        self.handle: ServerHandle | None = None
        self.client: OpencodeDriver | None = None
        self._port: int | None = None
        self._password: str | None = None
        self.startup_seconds: float | None = None
        if start:
            self.start()

    # -- environment -----------------------------------------------------------------------------

    @property
    def base_env(self) -> dict[str, str]:
        """The isolated environment without server coordinates (for opencode itself)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.xdg_config),
            XDG_DATA_HOME=str(self.xdg_data),
            XDG_STATE_HOME=str(self.xdg_state),
            XDG_CACHE_HOME=str(self.xdg_cache),
            MEMORYD_HOME=str(self.memoryd_home),
            MEMORYD_HOST_OPENCODE_BIN=self.opencode_bin,
            **ISOLATION_ENV,
        )
        return env

    @property
    def env(self) -> dict[str, str]:
        """For memoryd subprocesses: same XDG tree, MEMORYD_HOME, and this server's URL/credentials.

        Drop ``MEMORYD_HOST_URL`` to make memoryd start its own private server instead.
        """
        env = self.base_env
        if self.handle is not None:
            env.update(
                MEMORYD_HOST_URL=self.handle.url,
                MEMORYD_HOST_USERNAME=self.handle.username,
                MEMORYD_HOST_PASSWORD=self.handle.password,
            )
        return env

    @property
    def url(self) -> str:
        return self._require().url

    @property
    def username(self) -> str:
        return self._require().username

    @property
    def password(self) -> str:
        return self._require().password

    @property
    def pid(self) -> int:
        return self._require().pid

    def _require(self) -> ServerHandle:
        if self.handle is None:
            raise RuntimeError("the sandbox server is not running")
        return self.handle

    # -- config ------------------------------------------------------------------------------------

    def write_config(self) -> Path:
        """Write ``self.config`` to ``opencode.json`` (takes effect on restart)."""
        path = self.config_dir / "opencode.json"
        path.write_text(json.dumps(self.config, indent=2) + "\n", encoding="utf-8")
        return path

    def write_agent(self, name: str, text: str) -> Path:
        """Add ``agent/<name>.md`` to the config dir (takes effect on restart or dispose)."""
        path = self.config_dir / "agent" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> ServerHandle:
        """Start the server; a restart reuses the port and password, so :attr:`env` stays valid."""
        if self.handle is not None:
            return self.handle
        self.server = PrivateServer(
            self.opencode_bin,
            cwd=self.project_dir,
            env=self.base_env,
            startup_timeout=self.startup_timeout,
            log_file=self.log_file,
            port=self._port,
            password=self._password,
            log_level="INFO",
        )
        self.handle = self.server.start()
        self.startup_seconds = self.server.startup_seconds
        self._port = int(self.handle.url.rsplit(":", 1)[1])
        self._password = self.handle.password
        self.client = OpencodeDriver(
            self.handle.url, self.handle.username, self.handle.password, directory=self.project_dir
        )
        return self.handle

    def stop(self) -> None:
        """Stop the server (idempotent); the tree on disk stays for inspection."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.handle = None

    def restart(self) -> ServerHandle:
        """opencode reads its config once; restart after changing config or agent files."""
        self.stop()
        return self.start()

    def dispose(self, directory: Path | str | None = None) -> None:
        """Lighter than :meth:`restart`: re-read agent files and plugins for one directory."""
        self.driver.dispose(directory)

    @property
    def driver(self) -> OpencodeDriver:
        if self.client is None:
            raise RuntimeError("the sandbox server is not running")
        return self.client

    def server_log(self, tail: int = 60) -> str:
        """The last lines opencode printed (stdout and --print-logs stderr)."""
        try:
            lines = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-tail:])

    def __enter__(self) -> OpencodeSandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# What the ``make_sandbox`` fixture hands a test: build another sandbox (keyword options as above).
MakeSandbox = Callable[..., OpencodeSandbox]
