"""Which entries of a long transcript the extractor reads: ranked, newest first, shown in order.

A session longer than the token budget cannot be read whole. Cutting its middle keeps how it
started and how it ended and drops whatever the user said in between, which is often the
correction that decided the task. Instead every entry gets a rank by what it is worth to a
future agent:

0. the user's own words (and the files they attached), the first of them before all else: it
   usually states the task the rest of the session is about,
1. the agent's final answer of each turn (its last text before the user spoke again),
2. the rest of what the agent said (step commentary, errors, subtask prompts),
3. tool calls and their output (already capped per entry where they are built).

Entries are taken rank by rank, newest first within a rank, while they fit the budget (one
that does not fit is passed over, a smaller one later may still fit). What was taken is
rendered in source order under its ``[role]`` headers, and every run of left-out entries leaves
a visible marker, so the extractor knows where the gaps are and how big they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memoryd import tokenizer as tokens
from memoryd.tuning import CHARS_PER_TOKEN_CEILING, SELECTION_ENTRY_OVERHEAD_TOKENS

RANK_TASK, RANK_USER, RANK_FINAL, RANK_AGENT, RANK_TOOL = -1, 0, 1, 2, 3
GAP_MARKER = "[… {n} {what} omitted here …]"


@dataclass(frozen=True)
class Entry:
    message: int  # index of its message in the transcript
    role: str
    rank: int
    text: str


def _gap(n: int) -> str:
    return GAP_MARKER.format(n=n, what="entry" if n == 1 else "entries")


def render(entries: Sequence[Entry], keep: Sequence[bool] | None = None) -> str:
    """Entries in source order, grouped under ``[role]`` per message, gaps marked."""
    blocks: list[str] = []
    current: list[str] = []
    current_msg: int | None = None
    gap = 0

    def flush() -> None:
        if current and current_msg is not None:
            blocks.append(f"[{entries_role[current_msg]}]\n" + "\n\n".join(current))

    entries_role = {e.message: e.role for e in entries}
    for i, entry in enumerate(entries):
        if keep is not None and not keep[i]:
            gap += 1
            continue
        if gap:
            flush()
            current, current_msg = [], None
            blocks.append(_gap(gap))
            gap = 0
        if entry.message != current_msg:
            flush()
            current, current_msg = [], entry.message
        current.append(entry.text)
    flush()
    if gap:
        blocks.append(_gap(gap))
    return "\n\n".join(blocks)


def _candidates(entries: Sequence[Entry], budget: int) -> list[int]:
    """Entries in the order they are offered, cut where even the most optimistic count is spent.

    Counting every entry of a huge session would cost more than the extraction; a token never
    covers more than ``CHARS_PER_TOKEN_CEILING`` characters, so once the optimistic sum passes
    the budget, nothing later in the order could be taken whole anyway.
    """
    order = sorted(range(len(entries)), key=lambda i: (entries[i].rank, -i))
    chosen: list[int] = []
    optimistic = 0
    for i in order:
        chosen.append(i)
        optimistic += len(entries[i].text) // CHARS_PER_TOKEN_CEILING
        if optimistic > budget:
            break
    return chosen


def select(entries: Sequence[Entry], budget: int) -> tuple[str, int]:
    """The rendered text within ``budget`` tokens and how many entries were left out."""
    if not entries:
        return "", 0
    whole = render(entries)
    if len(whole.encode("utf-8", "surrogatepass")) <= budget:
        return whole, 0  # every token covers at least one byte
    if len(whole) <= budget * CHARS_PER_TOKEN_CEILING and tokens.count(whole) <= budget:
        return whole, 0
    order = _candidates(entries, budget)
    costs = tokens.count_many([entries[i].text for i in order])
    keep = [False] * len(entries)
    spent = 0
    # Every entry taken may open a gap marker and a header next to it: charge for both.
    for i, cost in zip(order, costs, strict=True):
        cost += SELECTION_ENTRY_OVERHEAD_TOKENS
        if spent + cost <= budget:
            keep[i] = True
            spent += cost
    text = render(entries, keep)
    # The overhead is generous; should a rendering still be over, the middle cut is the backstop.
    text = tokens.truncate_middle(text, budget)
    return text, keep.count(False)
