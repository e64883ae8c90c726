"""The one place that builds memoryd's paths.

By default memoryd follows the XDG layout (through platformdirs, so macOS gets its native
folders): the config file under the config dir, ``memory.db`` and ``memories/`` under the data
dir, logs and runtime state under the state dir. ``MEMORYD_HOME`` puts all of it under one
folder, which is what tests and throwaway setups use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memoryd.errors import PathError

APP = "memoryd"
HOME_ENV = "MEMORYD_HOME"


@dataclass(frozen=True)
class Paths:
    config_file: Path
    data_dir: Path
    state_dir: Path

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Paths:
        env = os.environ if environ is None else environ
        home = env.get(HOME_ENV)
        if home:
            root = Path(home).expanduser().absolute()
            return cls(config_file=root / "config.toml", data_dir=root, state_dir=root / "state")
        import platformdirs  # only without MEMORYD_HOME (~2 MB of imports a daemon can skip)

        return cls(
            config_file=Path(platformdirs.user_config_dir(APP)) / "config.toml",
            data_dir=Path(platformdirs.user_data_dir(APP)),
            state_dir=Path(platformdirs.user_state_dir(APP)),
        )

    @property
    def db(self) -> Path:
        return self.data_dir / "memory.db"

    @property
    def memories(self) -> Path:
        return self.data_dir / "memories"

    @property
    def baseline_git(self) -> Path:
        """The phase-2 baseline repository, kept outside the memory folder on purpose."""
        return self.data_dir / "baseline.git"

    @property
    def validated_memory(self) -> Path:
        """The last validated copy of the agent-owned memory files (what turns are shown)."""
        return self.state_dir / "validated"

    @property
    def folder_signature(self) -> Path:
        """The memory folder's agent-owned files as last judged (stat data): the cheap no-change check."""
        return self.state_dir / "folder.sig.json"

    @property
    def phase2_running(self) -> Path:
        """Marker that a consolidation agent may be editing the folder (left behind by a kill)."""
        return self.state_dir / "phase2.running"

    @property
    def sync_git(self) -> Path:
        """The cache of the sync remote (``sync_remote``): what was last fetched and pushed."""
        return self.data_dir / "sync.git"

    @property
    def review_dir(self) -> Path:
        """Review mode's staged consolidation; outside the memory folder so nothing reads it early."""
        return self.data_dir / "review"

    @property
    def proposed_notes(self) -> Path:
        """Notes a model wrote that the user has not accepted yet: outside the memory folder, so
        search, reads, consolidation and the block cannot see them."""
        return self.data_dir / "proposed-notes"

    @property
    def staged_edit(self) -> Path:
        """An agent edit held for the user (a host session's change to the agent-owned files)."""
        return self.review_dir / "agent-edit"

    @property
    def ui_url_file(self) -> Path:
        """The daemon's web UI address with its access token (owner-readable only)."""
        return self.state_dir / "ui-url"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def helper_dir(self) -> Path:
        """Working directory of memoryd's extraction helper sessions (kept empty, not a git repo)."""
        return self.state_dir / "helper"

    @property
    def runner_dir(self) -> Path:
        """Working directory of a client CLI runner's calls (``claude -p``): empty, ours alone."""
        return self.state_dir / "runner"

    @property
    def readpath_block(self) -> Path:
        """The rendered memory block the opencode shim injects into every turn."""
        return self.state_dir / "readpath" / "block.md"

    @property
    def fence_token(self) -> Path:
        """The per-install secret on the block's fence lines (mode 0600; memory text never has it)."""
        return self.state_dir / "readpath" / "fence.token"

    @property
    def readpath_projects(self) -> Path:
        """One block per project (``<key>.md``): the global layer plus that project's layer."""
        return self.state_dir / "readpath" / "projects"

    @property
    def readpath_seen(self) -> Path:
        """Where the shim announces, once per load, the project key of its instance folder."""
        return self.state_dir / "readpath" / "seen"

    @property
    def citation_spool(self) -> Path:
        """JSON lines appended by the shim, one per reply that cited memory."""
        return self.state_dir / "spool" / "citations.jsonl"

    @property
    def install_manifest(self) -> Path:
        return self.state_dir / "installed.json"

    @property
    def server_state(self) -> Path:
        """Where the shim records the live opencode server (URL, pid, auth) when it loads."""
        return self.state_dir / "opencode-server.json"

    @property
    def private_servers(self) -> Path:
        """One record per ``opencode serve`` memoryd started, so a killed memoryd's are reaped."""
        return self.state_dir / "private-servers"

    def named(self) -> dict[str, Path]:
        return {
            "config": self.config_file,
            "db": self.db,
            "memories": self.memories,
            "logs": self.logs,
        }

    def ensure_dir(self, path: Path) -> Path:
        """Create ``path`` (and parents) as a real, writable directory or raise :class:`PathError`."""
        if path.is_symlink():
            raise PathError(path, "is a symlink; memoryd refuses to write through links")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PathError(path, f"cannot create directory ({exc.strerror or exc})") from exc
        if not path.is_dir():
            raise PathError(path, "exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PathError(path, "is not writable")
        return path


def change_mark_file(memories: Path) -> Path:
    """Bumped by whoever edits memory files in place (rename-free): the search index's cue.

    Kept beside the memory folder, not in it, so the consolidator cannot touch it.
    """
    return memories.with_name(memories.name + ".changed")


def bump_change_mark(memories: Path) -> None:
    """Record that files under ``memories`` may have changed without their folder noticing."""
    mark = change_mark_file(memories)
    try:
        fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    except OSError:
        return  # best effort: the index still re-checks everything every few minutes
    try:
        os.write(fd, b".")
        if os.fstat(fd).st_size > 4096:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def templates_dir() -> Path:
    """Templates ship inside the wheel as ``memoryd/_templates``; a source checkout uses ``templates/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "_templates"
    if packaged.is_dir():
        return packaged
    return here.parent / "templates"


def _user_home(env: dict[str, str] | os._Environ[str]) -> Path:
    home = env.get("HOME") or env.get("USERPROFILE")
    return Path(home) if home else Path.home()


def claude_config_dir(configured: str | None, environ: dict[str, str] | None = None) -> Path:
    """Claude Code's home: the configured one, else ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ if environ is None else environ
    value = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if value:
        return Path(value).expanduser().absolute()
    return _user_home(env) / ".claude"


def codex_home(configured: str | None, environ: dict[str, str] | None = None) -> Path:
    """Codex's home: the configured one, else ``$CODEX_HOME``, else ``~/.codex``."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ if environ is None else environ
    value = env.get("CODEX_HOME", "").strip()
    if value:
        return Path(value).expanduser().absolute()
    return _user_home(env) / ".codex"
