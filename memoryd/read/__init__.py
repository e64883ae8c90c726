"""The read side: the block injected into every turn, citations, and usage fed back from them.

It imports nothing from :mod:`memoryd.write`: reading memory never depends on the pipeline that makes it."""
