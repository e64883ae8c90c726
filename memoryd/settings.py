"""One settings model, with Codex's ``[memories]`` option names and ranges.

Values come from three layers, later ones winning: defaults, the TOML config file
(``paths.config_file``), then environment variables (``MEMORYD_<OPTION>`` for each option,
``MEMORYD_HOST_URL`` / ``_USERNAME`` / ``_PASSWORD`` / ... for the ``[host]`` table,
``MEMORYD_EXTENSIONS_<OPTION>`` for the ``[extensions]`` table). A typo'd key
or an out-of-range value is an error that names the key and where it came from; memoryd does not
silently clamp like Codex does, because a daemon that quietly ignores what you wrote is worse
than one that refuses to start.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from memoryd.errors import ConfigError
from memoryd.tuning import SYNC_INTERVAL_MAX_S, SYNC_INTERVAL_MIN_S, SYNC_INTERVAL_MS

ENV_PREFIX = "MEMORYD_"
Source = Literal["default", "file", "env"]


class HostSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    url: str | None = Field(default=None, description="Base URL of a running `opencode serve`.")
    username: str = Field(default="opencode", description="Basic-auth user (opencode's default).")
    password: str | None = Field(
        default=None, description="Basic-auth password, if the server has one."
    )
    password_env: str | None = Field(
        default="OPENCODE_SERVER_PASSWORD", description="Name of an env var holding the password."
    )
    start_server: bool = Field(
        default=True, description="Start a private `opencode serve` when none is configured."
    )
    opencode_bin: str = Field(
        default="opencode", description="The opencode executable memoryd may start."
    )
    # The first request for a new directory boots an opencode instance, which waits for its npm
    # install of plugin types (about 9 s online, over 70 s offline): leave room for that.
    request_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    # Below the 1 h job lease and the 90 min after which a helper session counts as abandoned.
    prompt_timeout_s: float = Field(default=900.0, gt=0, le=3000)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v.rstrip("/")

    def resolved_password(self, environ: dict[str, str] | None = None) -> str | None:
        if self.password:
            return self.password
        env = os.environ if environ is None else environ
        if self.password_env:
            return env.get(self.password_env) or None
        return None


class ExtensionsSettings(BaseModel):
    """The ``[extensions]`` table: other agents. Their sessions are read when their home exists;
    the memory exchanges are off by default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    claude_import: bool = Field(
        default=False, description="Mirror Claude Code's per-project memory files."
    )
    claude_home: str | None = Field(
        default=None,
        description="Claude Code's home (default: $CLAUDE_CONFIG_DIR, else ~/.claude).",
    )
    claude_projects: list[str] = Field(
        default_factory=list,
        description="Claude project keys to import (empty = all); env: comma-separated.",
    )
    claude_sessions: bool | None = Field(
        default=None,
        description="Read Claude Code's session transcripts in phase 1 (unset: when its home "
        "exists; the home is claude_home, else $CLAUDE_CONFIG_DIR, else ~/.claude).",
    )
    codex_sessions: bool | None = Field(
        default=None,
        description="Read Codex's rollouts in phase 1 (unset: when its home exists).",
    )
    codex_import: bool = Field(
        default=False, description="Copy Codex's MEMORY.md and memory_summary.md in."
    )
    codex_export: bool = Field(
        default=False, description="Offer our memory to an existing Codex memory folder."
    )
    codex_home: str | None = Field(
        default=None, description="Codex's home (default: $CODEX_HOME, else ~/.codex)."
    )
    codex_version: Literal["v1", "v2"] | None = Field(
        default=None,
        description="Which Codex memory folder the exchange uses: v1 memories/, v2 memories_v2/ "
        "(unset: as Codex decides, memories/ when it exists, else memories_v2/). "
        "A pasted [memories] version sets it.",
    )

    @field_validator("claude_home", "codex_home")
    @classmethod
    def _home(cls, v: str | None) -> str | None:
        if v is None or v.strip() == "":
            return None
        if not Path(v).expanduser().is_absolute():
            raise ValueError("must be an absolute path (or start with ~)")
        return v

    @field_validator("claude_projects", mode="before")
    @classmethod
    def _project_keys(cls, v: Any) -> list[str]:
        items = v.split(",") if isinstance(v, str) else v
        if not isinstance(items, list | tuple):
            # ValueError, not TypeError: pydantic turns only the former into a validation error.
            raise ValueError("must be a list of project keys (or a comma-separated string)")
        keys: list[str] = []
        for item in items:
            if not isinstance(item, str):
                raise ValueError(f"project keys must be strings (got {item!r})")
            key = item.strip()
            if not key:
                continue
            if "/" in key or "\\" in key or key in (".", ".."):
                raise ValueError(f"{key!r} is not a project folder name")
            if key not in keys:
                keys.append(key)
        return keys


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    generate_memories: bool = Field(
        default=True, description="Run the write pipeline (phases 1 and 2)."
    )
    use_memories: bool = Field(
        default=True, description="Inject memory into every turn (read path)."
    )
    max_rollouts_per_startup: int = Field(
        default=2,
        ge=1,
        le=128,
        description="Claims per pass; also the cross-process cap on running extractions.",
    )
    min_rollout_idle_hours: float = Field(
        default=6,
        ge=0,
        le=48,
        description="A session must be idle this long before it is extracted (0 = at once).",
    )
    max_rollout_age_days: int = Field(
        default=10, ge=0, le=90, description="Older sessions are never extracted."
    )
    max_raw_memories_for_consolidation: int = Field(default=256, ge=1, le=4096)
    max_unused_days: int = Field(default=30, ge=0, le=365)
    extract_model: str | None = Field(default=None, description='"provider/model" for extraction.')
    consolidation_model: str | None = Field(
        default=None, description='"provider/model" for consolidation.'
    )
    runner: Literal["auto", "opencode", "claude-code"] = Field(
        default="auto",
        description="Who runs memoryd's model calls: opencode, or Claude Code (`claude -p`, as "
        "you are signed in). auto: opencode when configured or installed, else claude on PATH.",
    )
    claude_bin: str = Field(
        default="claude", description="The Claude Code executable the claude-code runner starts."
    )
    disable_on_external_context: bool = Field(
        default=False, description="Skip sessions that used web or MCP tools (marked polluted)."
    )
    daily_token_budget: int = Field(
        default=1_000_000, ge=0, description="Tokens memoryd may spend per UTC day (0 = unlimited)."
    )
    max_model_calls_per_hour: int = Field(
        default=120, ge=0, description="Helper prompts per rolling hour (0 = unlimited)."
    )
    sync_remote: str | None = Field(
        default=None,
        description="A git URL (ssh, git://, https) or an absolute path to share memory through.",
    )
    sync_interval_s: int = Field(
        default=SYNC_INTERVAL_MS // 1000,
        ge=SYNC_INTERVAL_MIN_S,
        le=SYNC_INTERVAL_MAX_S,
        description="Seconds between syncs when nothing asks for one sooner (a pass that "
        "extracted new sessions, a consolidation, a retry after the remote was away).",
    )
    review: bool = Field(
        default=False,
        description="Stage each validated consolidation for review (`memoryd review`, the UI) "
        "instead of making it live at once.",
    )
    ui: bool = Field(default=False, description="The daemon also serves the web UI (`memoryd ui`).")
    ui_port: int = Field(
        default=8377, ge=1, le=65535, description="Port of the web UI on 127.0.0.1."
    )
    host: HostSettings = Field(default_factory=HostSettings)
    extensions: ExtensionsSettings = Field(default_factory=ExtensionsSettings)
    _sources: dict[str, Source] = PrivateAttr(default_factory=dict)
    _codex_only: dict[str, Any] = PrivateAttr(default_factory=dict)

    @field_validator("extract_model", "consolidation_model")
    @classmethod
    def _model_ref(cls, v: str | None) -> str | None:
        if v is None or v == "":
            return None
        provider, sep, model = v.partition("/")
        if not sep or not provider or not model:
            raise ValueError('must look like "provider/model"')
        return v

    @field_validator("sync_remote")
    @classmethod
    def _sync_remote(cls, v: str | None) -> str | None:
        if v is None or v.strip() == "":
            return None
        v = v.strip()
        if any(c in v for c in "\x00\n\r"):
            raise ValueError("must be one line")
        if "://" in v:
            scheme = v.split("://", 1)[0].lower()
            if scheme not in ("ssh", "git", "http", "https", "file", "git+ssh", "ssh+git"):
                raise ValueError(f"unsupported scheme {scheme!r} (use ssh, git, https or a path)")
            return v
        if v.startswith(("/", "~")):
            return v
        if ":" in v.split("/", 1)[0]:
            return v  # scp-like ssh form: user@host:path
        raise ValueError(
            "must be a git URL (ssh://, git://, https://, user@host:path) or an absolute path"
        )

    @property
    def sources(self) -> dict[str, Source]:
        """Where each effective value came from, keyed ``option`` or ``host.option``."""
        return dict(self._sources)

    @property
    def codex_only(self) -> dict[str, Any]:
        """Keys of a pasted Codex ``[memories]`` table accepted without an effect here."""
        return dict(self._codex_only)


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# Nested tables: name -> model. Each gets ``[name]`` in TOML and ``MEMORYD_<NAME>_<OPTION>`` in the env.
_TABLES: dict[str, type[BaseModel]] = {"host": HostSettings, "extensions": ExtensionsSettings}


# Keys a current Codex ``[memories]`` table may carry that have no meaning for memoryd, with why.
# They are accepted (so the table can be pasted as is) and listed by ``memoryd inspect``; so is any
# other key of that table memoryd does not know.
CODEX_ONLY_KEYS: dict[str, str] = {
    "dual_write": "Codex writes both its memory folders; memoryd exchanges with the one "
    "extensions.codex_version names",
    "consolidation_service_tier": "an OpenAI API service tier; memoryd's models go through opencode",
    "dedicated_tools": "memoryd's memory tools are always offered through opencode",
    "min_rate_limit_remaining_percent": "opencode does not report rate-limit headroom; memoryd "
    "uses daily_token_budget, max_model_calls_per_hour and its rate-limit circuit instead",
}
UNKNOWN_CODEX_KEY = "not a memoryd option"
# Codex keys that map onto a memoryd option of another name: Codex key -> memoryd dotted key.
CODEX_ALIASES: dict[str, str] = {
    "version": "extensions.codex_version",
    "no_memories_if_mcp_or_web_search": "disable_on_external_context",
}


def _split_codex_table(
    file_data: dict[str, Any], table: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fold a pasted ``[memories]`` table into memoryd's keys; returns (data, Codex-only keys).

    memoryd's own keys in the file (top level or ``[extensions]``) win over the table's.
    """
    own = {k: v for k, v in file_data.items() if k != "memories"}
    mapped: dict[str, Any] = {}
    codex_only: dict[str, Any] = {}
    for key, value in table.items():
        if key in CODEX_ALIASES:
            head, _, tail = CODEX_ALIASES[key].rpartition(".")
            if head:
                mapped.setdefault(head, {})[tail] = value
            else:
                mapped[tail] = value
        elif key in Settings.model_fields and key not in _TABLES:
            mapped[key] = value
        else:
            codex_only[key] = value
    return _merge(mapped, own), codex_only


def _check_keys(data: dict[str, Any], source: str) -> None:
    top = list(Settings.model_fields)
    for key, value in data.items():
        if key not in Settings.model_fields:
            raise ConfigError(f"unknown option{_suggest(key, top)}", source=source, key=key)
        if key in _TABLES:
            if not isinstance(value, dict):
                raise ConfigError(f"must be a table ([{key}])", source=source, key=key)
            model = _TABLES[key]
            sub = list(model.model_fields)
            for hk in value:
                if hk not in model.model_fields:
                    raise ConfigError(
                        f"unknown option{_suggest(hk, sub)}", source=source, key=f"{key}.{hk}"
                    )


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in Settings.model_fields:
        if name in _TABLES:
            continue
        val = environ.get(ENV_PREFIX + name.upper())
        if val is not None:
            out[name] = val
    for table, model in _TABLES.items():
        values: dict[str, Any] = {}
        for name in model.model_fields:
            val = environ.get(f"{ENV_PREFIX}{table.upper()}_{name.upper()}")
            if val is not None:
                values[name] = val
        if values:
            out[table] = values
    return out


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = {**merged[k], **v}
        else:
            merged[k] = v
    return merged


def _flatten(data: dict[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for k, v in data.items():
        if isinstance(v, dict):
            keys += _flatten(v, f"{prefix}{k}.")
        else:
            keys.append(prefix + k)
    return keys


def _raise_validation(exc: ValidationError, file_keys: set[str], config_file: Path) -> None:
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    env_name = ENV_PREFIX + key.replace(".", "_").upper()
    source = str(config_file) if key in file_keys else f"environment ({env_name})"
    got = first.get("input")
    raise ConfigError(f"{first['msg']} (got {got!r})", source=source, key=key) from exc


def load_settings(config_file: Path, environ: dict[str, str] | None = None) -> Settings:
    """Read defaults, then ``config_file`` (if present), then the environment."""
    env = os.environ if environ is None else environ
    file_data: dict[str, Any] = {}
    codex_only: dict[str, Any] = {}
    if config_file.exists():
        try:
            with config_file.open("rb") as fh:
                file_data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML ({exc})", source=str(config_file)) from exc
        except OSError as exc:
            raise ConfigError(
                f"cannot read ({exc.strerror or exc})", source=str(config_file)
            ) from exc
        if "memories" in file_data and isinstance(file_data["memories"], dict):
            # Accept Codex's own table as is: its keys map onto ours, the rest are kept for inspect.
            file_data, codex_only = _split_codex_table(file_data, file_data["memories"])
        _check_keys(file_data, str(config_file))
    env_data = _env_layer(env)
    merged = _merge(file_data, env_data)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        _raise_validation(exc, set(_flatten(file_data)), config_file)
        raise  # unreachable
    sources: dict[str, Source] = {}
    file_keys, env_keys = set(_flatten(file_data)), set(_flatten(env_data))
    all_keys = [k for k in Settings.model_fields if k not in _TABLES]
    for table, model in _TABLES.items():
        all_keys += [f"{table}.{k}" for k in model.model_fields]
    for key in all_keys:
        sources[key] = "env" if key in env_keys else "file" if key in file_keys else "default"
    settings._sources = sources
    settings._codex_only = codex_only
    return settings
