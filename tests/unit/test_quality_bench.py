"""The quality bench's fixed sessions, rubric checks and stub tools (no opencode needed)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from bench.quality import STUB, STUB_TOOLS, Replay, stub_key
from bench.quality_cases import (
    MID_CORRECTION,
    SCENARIOS,
    InProjectDir,
    Judged,
    Marked,
    NotAPreference,
    Omits,
    OnlyWith,
    Run,
    Say,
    Scenario,
    YieldsNothing,
    oracle_answer,
)
from memoryd.host.models import PromptResult
from memoryd.write.phase1 import validate_extraction

CWD = "/home/ana/work"


def _heard(sc: Scenario) -> str:
    """All a session's words, as an extraction request that kept everything would carry them."""
    return "\n".join(
        [t.user for t in sc.turns]
        + [s.text for t in sc.turns for s in t.steps if isinstance(s, Say)]
    )


def _judged(name: str, **changes: object) -> Judged:
    sc = next(s for s in SCENARIOS if s.name == name)
    answer = oracle_answer(sc, CWD, _heard(sc))
    base = Judged(
        stored=bool(answer["raw_memory"]),
        raw_memory=answer["raw_memory"],
        rollout_summary=answer["rollout_summary"],
        cwd=CWD,
        project_dir=CWD,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_fixed_set_covers_what_the_issue_asks_for() -> None:
    assert len(SCENARIOS) >= 12
    assert len({s.name for s in SCENARIOS}) == len({s.title for s in SCENARIOS}) == len(SCENARIOS)
    users = [t.user for s in SCENARIOS for t in s.turns]
    assert len(users) == len(set(users))
    Replay({}, Path("/nonexistent"))  # refuses user texts that repeat or contain one another
    kinds = {type(c) for s in SCENARIOS for c in s.checks}
    assert {YieldsNothing, Marked, Omits, OnlyWith, InProjectDir} <= kinds
    assert len({s.project for s in SCENARIOS}) >= 2
    assert sum(isinstance(c, YieldsNothing) for s in SCENARIOS for c in s.checks) >= 2
    assert any("[rejected]" in c.need for s in SCENARIOS for c in s.checks if isinstance(c, Marked))
    assert any("[proposed]" in c.need for s in SCENARIOS for c in s.checks if isinstance(c, Marked))
    assert all(s.checks for s in SCENARIOS)
    for s in SCENARIOS:
        for t in s.turns:
            for step in t.steps:
                if isinstance(step, Run) and step.output is not None:
                    tool = stub_key(step.command).split("_")[0]
                    assert tool in (*STUB_TOOLS, "release"), step.command  # release.sh: a stub too


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_oracle_answers_are_valid_and_pass_their_memory_checks(sc: Scenario) -> None:
    answer = oracle_answer(sc, CWD, _heard(sc))
    result = PromptResult.model_validate(
        {
            "info": {
                "id": "m",
                "sessionID": "s",
                "role": "assistant",
                "time": {"created": 1},
                "structured": answer,
            }
        }
    )
    extracted = validate_extraction(result)  # the real schema and template-echo check
    assert (extracted is None) == (sc.oracle is None)
    j = _judged(sc.name)
    for check in sc.checks:
        if check.scope == "memory":
            assert check.judge(j)[0], check.label


def test_checks_fail_on_bad_memories() -> None:
    redis = next(s for s in SCENARIOS if s.name == "redis_rejected")
    marked = next(c for c in redis.checks if isinstance(c, Marked))
    j = _judged("redis_rejected")
    adopted = replace(j, raw_memory=j.raw_memory.replace("[rejected]", "[adopted]"))
    assert not marked.judge(adopted)[0]
    assert not marked.judge(replace(j, raw_memory="- Uses sqlite [user]"))[0]

    secret = Omits("leak", pattern=r"sk_live_51")
    assert not secret.judge(replace(j, rollout_summary="key sk_live_51Hx9Qe"))[0]
    assert secret.judge(j)[0]

    assert not YieldsNothing("x").judge(j)[0]
    assert not InProjectDir("x").judge(replace(j, project_dir="/elsewhere"))[0]

    stale = OnlyWith("x", scope="folder", pattern=r"1\.5\.7", context=r"replac|1\.9")
    assert not stale.judge(replace(j, folder="- Terraform is 1.5.7 [verified]"))[0]
    assert stale.judge(replace(j, folder="- Terraform 1.9.8 (replaces 1.5.7)"))[0]


def test_stub_prints_queued_output_per_command_line(tmp_path: Path) -> None:
    bin_dir, queue = tmp_path / "bin", tmp_path / "queue"
    bin_dir.mkdir()
    stub = bin_dir / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    for name in STUB_TOOLS:
        (bin_dir / name).symlink_to(stub)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "QUALITY_BENCH_QUEUE": str(queue),
    }
    commands = {
        "AWS_PROFILE=staging terraform plan": ("Plan: 0 to add", 0),
        "git commit -am 'Rename get_cart to load_cart'": ("[main 4f2a9c1] Rename", 0),
        "pytest -q -n 4 tests/test_orders.py": ("3 failed", 1),
    }
    for i, (command, (text, rc)) in enumerate(commands.items()):
        slot = queue / stub_key(command) / f"{i:06d}"
        slot.mkdir(parents=True)
        (slot / "out").write_text(text + "\n")
        (slot / "rc").write_text(str(rc))
    for command, (text, rc) in commands.items():
        proc = subprocess.run(
            ["sh", "-c", command], env=env, capture_output=True, text=True, timeout=30
        )
        assert (proc.stdout, proc.returncode) == (text + "\n", rc), command
    again = subprocess.run(
        ["sh", "-c", "terraform plan"], env=env, capture_output=True, text=True, timeout=30
    )
    assert again.returncode == 127  # consumed: nothing queued any more


def test_real_model_mode_adds_the_provider_and_keeps_sessions_on_the_mock(tmp_path: Path) -> None:
    from bench.quality import REAL_MODEL_UNSET, BenchSandbox, merge_provider_config

    box = BenchSandbox(tmp_path, "opencode", "http://127.0.0.1:9/v1", start=False, real_model=True)
    ollama = {
        "npm": "@ai-sdk/openai-compatible",
        "options": {"baseURL": "http://127.0.0.1:11434/v1"},
    }
    merge_provider_config(
        box,
        "ollama/qwen",
        {"provider": {"ollama": ollama}, "model": "ollama/qwen", "share": "manual"},
    )
    assert box.config["provider"]["ollama"] == ollama and "mock" in box.config["provider"]
    assert box.config["enabled_providers"] == ["mock", "ollama"]
    assert box.config["model"] == "mock/mock-model"  # the replayed sessions stay scripted
    assert box.config["share"] == "manual"
    assert not set(REAL_MODEL_UNSET) & set(box.base_env)
    scripted = BenchSandbox(
        tmp_path / "s", "opencode", "http://x/v1", start=False, real_model=False
    )
    assert set(REAL_MODEL_UNSET) <= set(scripted.base_env)


def test_the_scripted_extractor_cannot_record_a_correction_it_was_not_sent() -> None:
    sc = next(s for s in SCENARIOS if s.name == "mid_correction")
    assert MID_CORRECTION in _heard(sc)
    cut = oracle_answer(sc, CWD, _heard(sc).replace(MID_CORRECTION, "[… omitted …]"))
    j = Judged(stored=True, raw_memory=cut["raw_memory"], rollout_summary=cut["rollout_summary"])
    verdicts = [c.judge(j)[0] for c in sc.checks if c.scope == "memory"]
    assert verdicts and not any(verdicts)


def test_a_one_off_request_written_as_a_preference_fails() -> None:
    sc = next(s for s in SCENARIOS if s.name == "one_off")
    check = next(c for c in sc.checks if isinstance(c, NotAPreference) and c.scope == "memory")
    good = _judged("one_off")
    assert check.judge(good)[0]
    bad = replace(
        good,
        raw_memory=good.raw_memory + "\nPreferences:\n- Wants reports as Markdown tables [user]\n",
    )
    assert not check.judge(bad)[0]
    folder = NotAPreference("x", scope="folder", pattern="table")
    assert not folder.judge(replace(good, folder="# shop\n## Preferences\n- tables always\n"))[0]
    assert folder.judge(replace(good, folder="# shop\n## Knowledge\n- a table once\n"))[0]
