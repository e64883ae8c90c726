"""Redaction's patterns, each compiled on its first use.

The rules hold ~330 regular expressions and a text reaches only the few whose hint words it
contains (a prose paragraph ~120, a pass with nothing new none). Compiling all of them when the
package loads cost ~55 ms of every memoryd process, the ones that never redact anything too.
"""

from __future__ import annotations

import re
from typing import Any, cast

from memoryd.redact.prefilter import compile_prefiltered

# what the rules call on a pattern; each is looked up once, then read from the instance
_DIRECT = ("match", "fullmatch", "split", "groups", "groupindex")
# the calls that scan a text: these go through the pattern's prefilters, which are worked out
# on the first such call (a pattern only ever matched at a position never pays for them)
_SCANNING = ("search", "finditer", "finditer_in", "findall", "sub", "subn")


class _Lazy:
    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        # Reached only while an attribute is missing: on the first use, which compiles.
        if name in _SCANNING:
            scanner = compile_prefiltered(self.pattern, self.flags)
            for attr in _SCANNING:
                setattr(self, attr, getattr(scanner, attr))
            return getattr(scanner, name)
        if name not in _DIRECT:
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self.flags)
        for attr in _DIRECT:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r}, {self.flags})"


def lazy(pattern: str, flags: int | re.RegexFlag = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, deferred until the pattern is first used.

    It stands for a compiled pattern in what the rules call (``search``, ``finditer``, ``sub``,
    ...), not in ``re``'s module functions, which want a real one.
    """
    return cast("re.Pattern[str]", _Lazy(pattern, int(flags)))
