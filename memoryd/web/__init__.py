"""``memoryd ui``: a local web app to look at memory, steer it, and review consolidations.

:mod:`memoryd.web.app` holds the pages, :mod:`memoryd.web.security` the gate every request
passes, :mod:`memoryd.web.markdown` the escaping renderer, :mod:`memoryd.web.listen` the
uvicorn wiring shared by the command and the daemon.
"""
