"""How a sync remote is shown and stored: never with the credentials a URL can carry.

``https://<token>@host/repo.git`` puts the secret where a user name goes, so masking only
``user:password`` (or trusting the secret patterns to spot every token shape) is not enough:
the whole user-info part is replaced. The one name kept is ``git`` on an ssh remote with no
password (``git@host:me/memory.git``), the conventional account every forge uses, which says
nothing about the user and keeps the remote recognisable.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from memoryd.redact import redact

MASK = "***"
SSH_USERS = frozenset({"git"})  # conventional ssh accounts, not secrets
_SCP_LIKE = re.compile(r"^(?P<user>[^@/]+)@(?P<rest>[^:/]+:.*)$")
# user-info inside free text (an error message quoting the URL)
_USERINFO_IN_TEXT = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")


def _user(user: str | None, password: str | None, ssh: bool) -> str:
    if not user and password is None:
        return ""
    if ssh and password is None and user in SSH_USERS:
        return f"{user}@"
    return f"{MASK}@"


def mask_remote(remote: str) -> str:
    """``remote`` with its user-info removed (see the module docstring), then redacted."""
    if "://" not in remote:
        m = _SCP_LIKE.match(remote)
        if m and not remote.startswith(("/", "~")):
            user, sep, password = m["user"].partition(":")
            shown = _user(user, password if sep else None, ssh=True) + m["rest"]
            return redact(shown)
        return redact(remote)
    try:
        parts = urlsplit(remote)
    except ValueError:
        return redact(_USERINFO_IN_TEXT.sub(rf"\g<scheme>{MASK}@", remote))
    if "@" not in parts.netloc:
        return redact(remote)
    userinfo, _, hostinfo = parts.netloc.rpartition("@")
    user, sep, password = userinfo.partition(":")
    ssh = parts.scheme in ("ssh", "git+ssh", "ssh+git")
    netloc = _user(user, password if sep else None, ssh) + hostinfo
    return redact(urlunsplit(parts._replace(netloc=netloc)))


def mask_text(text: str, remote: str) -> str:
    """An error message about ``remote`` with the remote and any URL user-info masked."""
    if remote:
        text = text.replace(remote, mask_remote(remote))
    return redact(_USERINFO_IN_TEXT.sub(rf"\g<scheme>{MASK}@", text))
