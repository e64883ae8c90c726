from __future__ import annotations

import json
from typing import Any

from memoryd import tokenizer as tokens
from memoryd.host.models import Message
from memoryd.write.transcript import build_transcript, external_tools, is_instruction_fragment

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def msg(role: str, parts: list[dict[str, Any]], **info: Any) -> Message:
    return Message.model_validate(
        {
            "info": {
                "id": "msg_1",
                "sessionID": "ses_1",
                "role": role,
                "time": {"created": 1},
                **info,
            },
            "parts": parts,
        }
    )


def test_keeps_text_and_tools_drops_noise() -> None:
    messages = [
        msg(
            "user",
            [
                {"type": "text", "text": "Please fix the failing test"},
                {"type": "text", "text": "synthetic context", "synthetic": True},
                {"type": "text", "text": "ignored", "ignored": True},
                {
                    "type": "text",
                    "text": "# AGENTS.md instructions for /x\n<INSTRUCTIONS>do things</INSTRUCTIONS>",
                },
            ],
        ),
        msg(
            "assistant",
            [
                {"type": "step-start"},
                {"type": "reasoning", "text": "SECRET THOUGHTS"},
                {"type": "text", "text": "Running the tests."},
                {
                    "type": "tool",
                    "callID": "c",
                    "tool": "bash",
                    "state": {
                        "status": "error",
                        "input": {"command": "pytest -x"},
                        "error": "exit 1: AssertionError",
                    },
                },
                {
                    "type": "tool",
                    "callID": "d",
                    "tool": "read",
                    "state": {
                        "status": "completed",
                        "input": {"filePath": "/x/a.py"},
                        "output": "def f(): pass",
                    },
                },
                {"type": "patch", "hash": "abc", "files": []},
                {"type": "step-finish", "reason": "stop"},
            ],
        ),
        msg("system", [{"type": "text", "text": "system stuff"}]),
    ]
    t = build_transcript(messages)
    assert "Please fix the failing test" in t.text and "Running the tests." in t.text
    assert "[tool call: bash]" in t.text and "[tool error: bash] exit 1: AssertionError" in t.text
    assert "[tool result: read] def f(): pass" in t.text
    for gone in (
        "SECRET THOUGHTS",
        "synthetic context",
        "ignored",
        "INSTRUCTIONS",
        "system stuff",
        "step-",
    ):
        assert gone not in t.text
    assert t.text.index("[user]") < t.text.index("[assistant]")
    assert t.tool_names == ["bash", "read"] and t.entries == 2


def test_secrets_redacted_in_text_and_tool_payloads() -> None:
    t = build_transcript(
        [
            msg("user", [{"type": "text", "text": f"token {SECRET}"}]),
            msg(
                "assistant",
                [
                    {
                        "type": "tool",
                        "tool": "write",
                        "callID": "c",
                        "state": {
                            "status": "completed",
                            "input": {"filePath": ".env", "content": f"GITHUB_TOKEN={SECRET}\n"},
                            "output": "ok",
                        },
                    }
                ],
            ),
        ]
    )
    assert SECRET not in t.text


def test_citations_are_stripped_and_collected() -> None:
    reply = (
        "Use make test.\n<memory-citation>\n<citation_entries>\nMEMORY.md:1-3|note=[build]\n"
        "</citation_entries>\n<session_ids>\nses_abc123456\n</session_ids>\n</memory-citation>"
    )
    t = build_transcript([msg("assistant", [{"type": "text", "text": reply, "id": "prt_1"}])])
    assert "memory-citation" not in t.text and "Use make test." in t.text
    assert t.citations == [("prt_1", ["ses_abc123456"])]


def test_tool_output_bounded_keeping_head_and_tail() -> None:
    out = "HEAD" + "x" * 50_000 + "TAIL"
    t = build_transcript(
        [
            msg(
                "assistant",
                [
                    {
                        "type": "tool",
                        "tool": "bash",
                        "callID": "c",
                        "state": {
                            "status": "completed",
                            "input": {"command": "cat big"},
                            "output": out,
                        },
                    }
                ],
            )
        ]
    )
    assert "HEAD" in t.text and "TAIL" in t.text and len(t.text) < 6_000


def test_token_cap_keeps_the_task_and_the_newest_turns_with_a_gap_marker() -> None:
    messages = [
        msg("user", [{"type": "text", "text": f"turn {i} " + "word " * 200}]) for i in range(200)
    ]
    t = build_transcript(messages, max_tokens=2_000)
    assert tokens.count(t.text) <= 2_000 and t.truncated and t.omitted > 150
    assert t.text.startswith("[user]\nturn 0 ")  # the task as first stated
    assert "turn 199 " in t.text and "turn 198 " in t.text and "turn 100 " not in t.text
    assert "entries omitted here" in t.text and "omitted from the middle" not in t.text


def tool(name: str, output: str) -> dict[str, Any]:
    return {
        "type": "tool",
        "tool": name,
        "state": {"status": "completed", "input": {"cmd": name}, "output": output},
    }


def long_session(correction: str, turns: int = 40) -> list[Message]:
    """A long session: each turn a request, a pile of tool output, commentary and an answer."""
    out = [msg("user", [{"type": "text", "text": "Port the billing exporter to the new queue."}])]
    for i in range(turns):
        if i == turns // 2:
            out.append(msg("user", [{"type": "text", "text": correction}]))
        else:
            out.append(msg("user", [{"type": "text", "text": f"next step {i}"}]))
        out.append(
            msg(
                "assistant",
                [
                    {"type": "text", "text": f"Looking at step {i} now."},
                    tool("bash", f"log line {i} " * 900),
                    tool("read", f"file body {i} " * 900),
                    {"type": "text", "text": f"Step {i} done: exporter stage {i} moved."},
                ],
            )
        )
    return out


def test_a_mid_session_correction_survives_a_long_session() -> None:
    correction = "No, stop: never retry failed charges automatically, flag them for a human."
    messages = long_session(correction)
    whole = build_transcript(messages, max_tokens=10_000_000)
    assert tokens.count(whole.text) > 40_000 and not whole.truncated
    t = build_transcript(messages, max_tokens=8_000)
    assert tokens.count(t.text) <= 8_000 and t.truncated
    assert correction in t.text  # the middle cut dropped exactly this
    assert t.text.startswith("[user]\nPort the billing exporter")
    # every user turn is in, then final answers, newest first; tool output goes first
    assert all(
        f"next step {i}\n" in t.text or f"next step {i}" in t.text
        for i in range(0, 40, 7)
        if i != 20
    )
    assert "Step 39 done" in t.text and "log line 0 " not in t.text
    # source order kept, with the gaps shown
    assert t.text.index(correction) < t.text.index("Step 39 done")
    assert t.text.index("next step 19") < t.text.index(correction) < t.text.index("next step 21")
    assert "entries omitted here" in t.text


def test_final_answers_outrank_commentary_and_tools() -> None:
    messages = long_session("a correction", turns=6)
    # room for the user turns and the answers, not for the tool output
    t = build_transcript(messages, max_tokens=420)
    for i in range(6):
        assert f"Step {i} done" in t.text, i
    assert "Looking at step" not in t.text and "log line" not in t.text
    # a little more room goes to the newest commentary first
    t = build_transcript(messages, max_tokens=480)
    assert "Looking at step 5 now" in t.text and "Looking at step 0 now" not in t.text
    assert "log line" not in t.text


def test_gap_markers_count_the_left_out_entries() -> None:
    messages = long_session("a correction", turns=3)
    t = build_transcript(messages, max_tokens=400)
    shown = sum(int(n) for n in __import__("re").findall(r"\[… (\d+) entr", t.text))
    assert shown == t.omitted > 0


def test_a_huge_pasted_message_is_bounded_and_still_leaves_room() -> None:
    messages = [
        msg("user", [{"type": "text", "text": "Fix the flaky test."}]),
        msg("user", [{"type": "text", "text": "PASTE " + "stack frame\n" * 20_000}]),
        msg("user", [{"type": "text", "text": "Use the fake clock, not sleeps."}]),
    ]
    t = build_transcript(messages, max_tokens=20_000)
    assert "Use the fake clock" in t.text and "Fix the flaky test" in t.text
    assert "characters omitted" in t.text and len(t.text) < 30_000


def test_assistant_error_is_kept() -> None:
    t = build_transcript(
        [msg("assistant", [], error={"name": "APIError", "data": {"message": "rate limited"}})]
    )
    assert "[assistant error: APIError] rate limited" in t.text


def test_empty() -> None:
    t = build_transcript([msg("user", [{"type": "text", "text": "   "}])])
    assert t.empty and t.text == ""


def test_external_tools() -> None:
    names = ["read", "webfetch", "github_search", "memoryd_memory_search", "bash"]
    assert external_tools(names, ["github", "memoryd"]) == ["webfetch", "github_search"]
    assert external_tools(["read"], []) == []


def test_fragment_filter() -> None:
    assert is_instruction_fragment("<skill>x</skill>")
    assert not is_instruction_fragment("please read AGENTS.md")
    json.dumps({})  # keep json import honest for future payload tests


def test_secret_straddling_the_tool_output_cut_is_still_redacted() -> None:
    from memoryd.tuning import TOOL_OUTPUT_CHARS

    # place the secret exactly where the head/tail cut would fall
    pad = "x" * (TOOL_OUTPUT_CHARS // 2 - 10)
    out = pad + " " + SECRET + " " + "y" * 50_000
    t = build_transcript(
        [
            msg(
                "assistant",
                [
                    {
                        "type": "tool",
                        "tool": "bash",
                        "callID": "c",
                        "state": {
                            "status": "completed",
                            "input": {"command": "env"},
                            "output": out,
                        },
                    }
                ],
            )
        ]
    )
    assert SECRET[:20] not in t.text and SECRET[-20:] not in t.text


def test_tokenizer_loads_on_demand_and_is_released() -> None:
    tokens.release()
    assert not tokens.loaded()
    assert tokens.truncate_middle("short", 100) == "short"  # fits in bytes: never tokenized
    assert not tokens.loaded()
    assert tokens.count("hello world") == 2
    assert tokens.loaded()
    tokens.release()
    assert not tokens.loaded()
    assert tokens.count("hello world") == 2  # loads again when needed


def test_each_text_is_redacted_once(monkeypatch: Any) -> None:
    """Redaction is most of an extraction's CPU: a text part went through it twice (once as an
    entry, again when its length was bounded)."""
    from memoryd.redact import redact as real

    seen: list[str] = []

    def counting(text: str) -> str:
        seen.append(text)
        return real(text)

    monkeypatch.setattr("memoryd.write.transcript.redact", counting)
    said = f"my token is {SECRET}, please keep the deploy notes short"
    out = build_transcript(
        [
            msg("user", [{"type": "text", "text": said}]),
            msg("assistant", [{"type": "text", "text": "Done: the notes are short now."}]),
        ]
    )
    assert SECRET not in out.text and "keep the deploy notes short" in out.text
    assert len(seen) == len(set(seen)) == 2, seen
