from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.errors import ConfigError, PathError
from memoryd.paths import Paths
from memoryd.settings import load_settings


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_defaults_match_codex(tmp_path: Path) -> None:
    s = load_settings(tmp_path / "absent.toml", environ={})
    assert (s.generate_memories, s.use_memories) == (True, True)
    assert s.max_rollouts_per_startup == 2 and s.min_rollout_idle_hours == 6
    assert s.max_rollout_age_days == 10 and s.max_raw_memories_for_consolidation == 256
    assert s.max_unused_days == 30 and s.disable_on_external_context is False
    assert s.host.url is None and s.host.start_server is True
    assert set(s.sources.values()) == {"default"}


def test_file_then_env_layering_and_sources(tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "c.toml",
        'min_rollout_idle_hours = 2\nextract_model = "mock/mock-small"\n[host]\nurl = "http://127.0.0.1:4096/"\n',
    )
    env = {
        "MEMORYD_MIN_ROLLOUT_IDLE_HOURS": "0",
        "MEMORYD_HOST_PASSWORD": "pw",
        "MEMORYD_GENERATE_MEMORIES": "false",
    }
    s = load_settings(cfg, environ=env)
    assert s.min_rollout_idle_hours == 0
    assert s.extract_model == "mock/mock-small"
    assert s.host.url == "http://127.0.0.1:4096"
    assert s.host.resolved_password({}) == "pw"
    assert s.generate_memories is False
    assert s.sources["min_rollout_idle_hours"] == "env"
    assert s.sources["extract_model"] == "file"
    assert s.sources["host.url"] == "file"
    assert s.sources["max_unused_days"] == "default"


def test_codex_memories_table_is_accepted(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", "[memories]\nmax_unused_days = 3\n")
    assert load_settings(cfg, environ={}).max_unused_days == 3


def test_password_from_named_env_var(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", '[host]\npassword_env = "MY_OC_PW"\n')
    s = load_settings(cfg, environ={})
    assert s.host.resolved_password({"MY_OC_PW": "secret"}) == "secret"
    assert s.host.resolved_password({}) is None


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (
            "min_rollout_idel_hours = 1\n",
            "min_rollout_idel_hours",
            "did you mean 'min_rollout_idle_hours'",
        ),
        ("[host]\nurll = 'x'\n", "host.urll", "did you mean 'url'"),
        (
            "max_rollouts_per_startup = 0\n",
            "max_rollouts_per_startup",
            "greater than or equal to 1",
        ),
        ("min_rollout_idle_hours = 49\n", "min_rollout_idle_hours", "less than or equal to 48"),
        ("max_unused_days = 'soon'\n", "max_unused_days", "integer"),
        ("extract_model = 'gpt'\n", "extract_model", "provider/model"),
        ("[host]\nurl = 'localhost:4096'\n", "host.url", "http://"),
        ("host = 3\n", "host", "table"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    cfg = write(tmp_path / "c.toml", text)
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, environ={})
    msg = str(info.value)
    assert key in msg and fragment in msg and str(cfg) in msg


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MEMORYD_MAX_ROLLOUT_AGE_DAYS"):
        load_settings(tmp_path / "none.toml", environ={"MEMORYD_MAX_ROLLOUT_AGE_DAYS": "500"})


def test_invalid_toml(tmp_path: Path) -> None:
    cfg = write(tmp_path / "c.toml", "this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(cfg, environ={})


def test_memoryd_home_puts_everything_under_one_folder(tmp_path: Path) -> None:
    p = Paths.from_env({"MEMORYD_HOME": str(tmp_path / "h")})
    for path in (p.config_file, p.db, p.memories, p.logs, p.helper_dir):
        assert str(path).startswith(str(tmp_path / "h"))
    assert p.config_file.name == "config.toml"


def test_xdg_layout_without_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    p = Paths.from_env({k: v for k, v in os.environ.items() if k != "MEMORYD_HOME"})
    if os.uname().sysname == "Linux":
        assert p.config_file == tmp_path / "cfg" / "memoryd" / "config.toml"
        assert p.db == tmp_path / "data" / "memoryd" / "memory.db"
        assert p.logs == tmp_path / "state" / "memoryd" / "logs"


def test_ensure_dir_refuses_symlink_and_unwritable(tmp_path: Path) -> None:
    p = Paths.from_env({"MEMORYD_HOME": str(tmp_path / "h")})
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(PathError, match="symlink"):
        p.ensure_dir(link)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(PathError):
        p.ensure_dir(blocker / "sub")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(PathError, match="not writable"):
            p.ensure_dir(ro)


CODEX_V2_TABLE = """\
[memories]
version = "v2"
dual_write = true
consolidation_service_tier = "flex"
dedicated_tools = true
min_rate_limit_remaining_percent = 25
no_memories_if_mcp_or_web_search = true
max_unused_days = 12
extract_model = "openai/gpt-5-mini"
future_knob = { depth = 2 }
"""


def test_a_current_codex_memories_table_is_accepted_and_mapped(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path / "c.toml", CODEX_V2_TABLE), environ={})
    assert s.extensions.codex_version == "v2"
    assert s.disable_on_external_context is True  # Codex's legacy name for the same option
    assert s.max_unused_days == 12
    assert s.extract_model == "openai/gpt-5-mini"
    assert s.sources["extensions.codex_version"] == "file"
    assert s.codex_only == {
        "dual_write": True,
        "consolidation_service_tier": "flex",
        "dedicated_tools": True,
        "min_rate_limit_remaining_percent": 25,
        "future_knob": {"depth": 2},
    }


def test_memoryd_keys_win_over_the_pasted_codex_table(tmp_path: Path) -> None:
    text = 'max_unused_days = 4\n[extensions]\ncodex_version = "v1"\n' + CODEX_V2_TABLE
    s = load_settings(write(tmp_path / "c.toml", text), environ={})
    assert (s.max_unused_days, s.extensions.codex_version) == (4, "v1")


def test_unknown_keys_stay_errors_outside_the_codex_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(write(tmp_path / "c.toml", "dual_write = true\n"), environ={})
    assert exc.value.key == "dual_write"


def test_a_bad_codex_version_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings(write(tmp_path / "c.toml", '[memories]\nversion = "v3"\n'), environ={})
    assert exc.value.key == "extensions.codex_version"
