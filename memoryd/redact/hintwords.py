"""The hint words every text's index tells present or absent at once (:mod:`.prefilter`).

Why a room of its own: the rules pick their steps by these words, and a literal that holds one a
text lacks is never looked for; both are answered here, from the words alone.
"""

from __future__ import annotations

from collections.abc import Iterable


class HintWords:
    """The words each text's index tells present or absent all at once: redaction's hint words.

    Most are absent from any one text, and a literal holding an absent one is absent too, so
    most literals are answered without a scan. A word holding another is looked for only where
    that one stands (``password`` only in a text with ``pass``)."""

    def __init__(self, words: Iterable[str]) -> None:
        ordered = sorted(set(words), key=lambda w: (len(w), w))
        parent = {
            w: max((o for o in ordered if o != w and o in w), key=len, default="") for w in ordered
        }
        self.all = tuple(ordered)
        self.roots = tuple(w for w in ordered if not parent[w])
        # each root behind its least common character: one memchr rules a group out
        gates: dict[str, list[str]] = {}
        for w in self.roots:
            gates.setdefault(max(w, key=_rarity), []).append(w)
        self.gates = tuple(
            (c, tuple(ws)) for c, ws in sorted(gates.items(), key=lambda g: -_rarity(g[0]))
        )
        children: dict[str, list[str]] = {}
        for w in ordered:
            if parent[w]:
                children.setdefault(parent[w], []).append(w)
        self.children = {p: tuple(c) for p, c in children.items()}
        # what a literal (and a pattern's or rule's tuple of them) is guarded by, as asked
        self._guard: dict[str, str] = {}
        self._guards: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}

    def present(self, folded: str) -> frozenset[str]:
        found = {w for c, ws in self.gates if c in folded for w in ws if w in folded}
        todo = [c for p in found if p in self.children for c in self.children[p]]
        while todo:
            w = todo.pop()
            if w in folded:
                found.add(w)
                todo += self.children.get(w, ())
        return frozenset(found)

    def guard(self, literal: str) -> str:
        """The longest word ``literal`` holds ("" for none): a text without it lacks the literal."""
        got = self._guard.get(literal)
        if got is None:
            got = self._guard[literal] = next((w for w in reversed(self.all) if w in literal), "")
        return got

    def guards(self, literals: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
        """Each of ``literals`` with its :meth:`guard`."""
        got = self._guards.get(literals)
        if got is None:
            got = self._guards[literals] = tuple((lit, self.guard(lit)) for lit in literals)
        return got


# Characters from most to least common in transcripts (English prose and code); one not listed
# (another letter, a digit, a symbol) is rarer than all of them.
_COMMON = " etaoinsrlhdcu.mp_f(gy),=\n:bw\"v-/'k"


def _rarity(c: str) -> int:
    i = _COMMON.find(c)
    return len(_COMMON) if i < 0 else i


KNOWN = HintWords(())


def know(words: Iterable[str]) -> None:
    """Set the words every text's index looks for at once (folded; see :class:`HintWords`)."""
    global KNOWN
    KNOWN = HintWords(words)
