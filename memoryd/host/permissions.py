"""The opencode permission rules that confine memoryd's consolidation agent: the one place for them.

opencode 1.18 evaluates a tool call against the agent's rules followed by the session's, and the
last rule whose permission and pattern both match wins (no match at all means ``ask``). ``*`` in
a pattern matches any run of characters, ``/`` included; nothing else is special and nothing can
be escaped. File patterns are compared with the path *relative to the instance's worktree*: the
git root above the session's folder, or ``/`` when there is none (then ``MEMORY.md`` in
``/home/u/mem`` is checked as ``home/u/mem/MEMORY.md``). A path outside the session's folder
(outside the worktree, for a git worktree) is first checked as ``external_directory``.

So the rules are built per run from the worktree opencode reports for the memory folder, and
sent with the helper session (session rules come last, so they beat any agent definition, even
one planted in a parent folder). The agent file itself denies everything, so an agent used
without these session rules can do nothing at all.

What the agent may do:

* read files inside the memory folder, nothing else;
* write only ``MEMORY.md``, ``memory_summary.md``, ``*.md`` files under ``skills/``,
  ``projects/<key>/memory_summary.md`` and ``projects/<key>/MEMORY.md`` — never a dot entry nor
  an instruction file opencode would load (``AGENTS.md`` …); markdown only, so no write can hand a language server or a
  formatter something to execute;
* glob and grep only when opencode's own folder check confines them to the memory folder (the
  folder is the worktree, or there is no git worktree); inside a larger git repository they
  could search the rest of it, so they are not offered there;
* nothing outside the folder (``external_directory``), no shell, web, tasks, skills, MCP tools,
  and no MCP resources (opencode checks those as ``read`` of ``mcp:<server>:…``).

Never send a per-prompt ``tools`` map with these rules: opencode 1.18 turns that map into the
session's entire permission list, silently replacing them.
"""

from __future__ import annotations

import os
from typing import Any

from memoryd.errors import ConfinementError

# Paths (relative to the memory folder, opencode wildcard syntax) the consolidator may write.
CONSOLIDATOR_WRITES = (
    "MEMORY.md",
    "memory_summary.md",
    "skills/*.md",
    "projects/*/memory_summary.md",
    "projects/*/MEMORY.md",
)
# Never writable, even where a pattern above would match: instruction files and dot entries.
CONSOLIDATOR_NEVER_WRITES = (
    "*AGENTS.md",
    "*CLAUDE.md",
    "*CONTEXT.md",
    "*/.*",
    ".*",
)

Rule = dict[str, Any]

# opencode 1.18 leaves a tool off the model's list when the *agent's* last rule for it is a "*"
# deny, before the session's rules are considered. So the agent file names the file tools with a
# pattern no real path can match (relative paths never start with "/"): listed, yet useless
# until a run's session rules open the memory folder.
_UNMATCHABLE = "/opened-per-run-by-memoryd"
AGENT_TOOLS = ("read", "edit", "glob", "grep")


def consolidator_agent_permission() -> dict[str, Any]:
    """The ``permission`` of the consolidation agent's definition (opencode config form)."""
    perm: dict[str, Any] = {"*": "deny"}
    for tool in AGENT_TOOLS:
        perm[tool] = {"*": "deny", _UNMATCHABLE: "allow"}
    return perm


def _rule(permission: str, pattern: str, action: str) -> Rule:
    return {"permission": permission, "pattern": pattern, "action": action}


def worktree_prefix(memory_root: str, worktree: str) -> str:
    """The memory folder as opencode's permission patterns see it: ``""`` or ``"a/b/"``."""
    root = os.path.abspath(memory_root)
    top = os.path.abspath(worktree or "/")
    rel = os.path.relpath(root, top)
    if rel == ".." or rel.startswith("../"):
        raise ConfinementError(f"opencode reports a worktree that is not above {root}", [top])
    if any(c in rel for c in "*?"):
        # opencode patterns cannot escape these; a pattern built from such a path would match more.
        raise ConfinementError(
            "the memory folder's path has '*' or '?' (move MEMORYD_HOME elsewhere)", [root]
        )
    return "" if rel == "." else rel.replace(os.sep, "/") + "/"


def consolidator_rules(memory_root: str, worktree: str) -> list[Rule]:
    """Session permission rules for one consolidation run (see the module docstring)."""
    prefix = worktree_prefix(memory_root, worktree)
    rules = [_rule("*", "*", "deny"), _rule("read", prefix + "*", "allow")]
    rules += [_rule("read", p, "deny") for p in ("../*", "mcp:*")]
    rules += [_rule("edit", prefix + p, "allow") for p in CONSOLIDATOR_WRITES]
    rules += [_rule("edit", prefix + p, "deny") for p in CONSOLIDATOR_NEVER_WRITES]
    if prefix == "" or os.path.abspath(worktree or "/") == "/":
        rules += [_rule("glob", "*", "allow"), _rule("grep", "*", "allow")]
    rules.append(_rule("external_directory", "*", "deny"))
    return rules
