"""memoryd: cross-session memory for AI coding agents."""

import sys

__version__ = "0.1.0"

# httpx's __init__ imports its command-line client (httpx._main) whenever click and pygments are
# installed: ~1.8 MB in every memoryd process that never runs it. A None entry makes that import
# fail, which httpx handles (its `main` then asks for httpx[cli]). No effect once httpx is loaded.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
