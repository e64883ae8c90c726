"""Prompt templates: loading, rendering, and the contract of the extraction answer.

Templates are plain files under :func:`memoryd.paths.templates_dir` with ``{{ name }}``
placeholders (spaces inside the braces are optional). Rendering is deliberately dumb:

* one pass of ``re.sub`` with a function, so a value that itself contains ``{{ transcript }}``
  (a session transcript quoting a template, say) is inserted verbatim and never expanded again;
* literal insertion, so ``$1``, ``\\g<0>`` and backslashes in values survive untouched;
* strict names: every placeholder must get a value and every value must have a placeholder.
  Both mistakes are reported together in one :class:`TemplateError`.

Template text is cached per path because rendering happens once per extraction job.

The module also owns the shape of a stage-1 answer: :data:`EXTRACTION_SCHEMA` is what we send as
the structured-output format, and :data:`SKELETON_MARKERS` are the format-description tokens from
``stage_one_system.md`` that a lazy model might copy back instead of filling in.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from memoryd.errors import TemplateError
from memoryd.paths import templates_dir

__all__ = [
    "EXTRACTION_SCHEMA",
    "ROLLOUT_SUMMARY_WORDS",
    "SKELETON_MARKERS",
    "placeholders",
    "render",
    "tool_specs",
]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

# Placeholder tokens used in the format skeletons of stage_one_system.md. None of them can occur
# in an answer that was actually filled in; the phase-1 validator rejects answers that echo any.
# tests/unit/test_prompts.py checks that each one really occurs in a template.
SKELETON_MARKERS: tuple[str, ...] = (
    "<one-line title naming the session's main outcome>",
    "<absolute working directory>",
    "<short task name>",
    "<success|partial|failed|unknown>",
    "<the evidence behind that verdict>",
    "<one line saying what this memory covers and when it would help>",
    "<the main task in a few words>",
    "<the wider area or theme this task belongs to>",
    "<comma-separated terms a future search would use>",
    "<evidence: command, file path, error text or test name from the session>",
)

# The rollout summary is the most detailed record memoryd keeps of a session and is read only when
# an agent wants the evidence behind a memory. 1,200 words is about 7.5 KB of Markdown, inside the
# 9,000 bytes memoryd stores (tuning.ROLLOUT_SUMMARY_MAX_BYTES; a longer one is cut, head and tail
# kept, never failed). stage_one_system.md states the same figure.
ROLLOUT_SUMMARY_WORDS = 1_200

# Sent as the prompt's structured-output format. No "$schema" key: opencode passes the schema to
# the model as tool parameters. opencode does not validate the answer, so the daemon must.
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "raw_memory": {
            "type": "string",
            "description": "Terse Markdown memory; empty when nothing is kept.",
        },
        "rollout_summary": {
            "type": "string",
            "description": (
                f"Markdown task history, under about {ROLLOUT_SUMMARY_WORDS:,} words; may be empty."
            ),
        },
        "rollout_slug": {
            "type": ["string", "null"],
            "description": "[a-z0-9_-], at most 60 characters, or null.",
        },
    },
    "required": ["raw_memory", "rollout_summary", "rollout_slug"],
    "additionalProperties": False,
}


def _resolve(name: str) -> Path:
    return _resolve_in(templates_dir(), name)


@functools.lru_cache(maxsize=64)
def _resolve_in(root: Path, name: str) -> Path:
    root = root.resolve()
    path = (root / name).resolve()
    if Path(name).is_absolute() or not path.is_relative_to(root):
        raise TemplateError(f"template name {name!r} is outside the templates folder {root}")
    return path


@functools.lru_cache(maxsize=64)
def _load(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TemplateError(f"template {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(f"template {path} cannot be read ({exc})") from exc


def placeholders(name: str) -> set[str]:
    """The placeholder names used in template ``name``."""
    return set(_PLACEHOLDER.findall(_load(_resolve(name))))


def render(name: str, **variables: str) -> str:
    """Fill template ``name`` (relative to the templates folder) with ``variables``.

    Raises :class:`TemplateError` when the template is missing, when any placeholder has no value
    (all missing names are listed), when a variable matches no placeholder (typo guard), or when
    a value is not a string.
    """
    path = _resolve(name)
    text = _load(path)
    wanted = set(_PLACEHOLDER.findall(text))
    missing = sorted(wanted - variables.keys())
    unknown = sorted(variables.keys() - wanted)
    problems = []
    if missing:
        problems.append(f"missing variable(s): {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown variable(s): {', '.join(unknown)}")
    wrong_type = sorted(k for k, v in variables.items() if not isinstance(v, str))
    if wrong_type:
        problems.append(f"non-string value(s) for: {', '.join(wrong_type)}")
    if problems:
        raise TemplateError(f"template {name}: {'; '.join(problems)}")
    return _PLACEHOLDER.sub(lambda m: variables[m.group(1)], text)


def tool_specs() -> dict[str, dict[str, Any]]:
    """The three lean tool definitions the shim registers (``opencode/tools.json``): rendered
    into the shim at install, and read by ``memoryd tool`` for their names."""
    try:
        data = json.loads(_load(_resolve("opencode/tools.json")))
    except ValueError as exc:
        raise TemplateError(f"template opencode/tools.json is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise TemplateError("template opencode/tools.json is not a JSON object")
    return data
