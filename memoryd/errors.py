"""Every error memoryd raises on purpose derives from :class:`MemorydError`.

Exceptions carry structured fields and build their own message; they become user-facing text
only at the edges (the CLI prints ``str(exc)`` on one line, the MCP layer returns it as a tool
error). Library code never calls ``sys.exit``.

The tree::

    MemorydError
    ├── ConfigError                 bad config file, unknown key, out-of-range value
    ├── PathError                   a data folder that is a symlink, unwritable, or missing
    ├── StoreError                  memory.db problems
    │   ├── StoreCorrupt            the file is not a SQLite database we can read
    │   └── SchemaTooNew            written by a newer memoryd; refused
    ├── TemplateError               a prompt template is missing or lacks a variable
    ├── HostError                   talking to the agent host (opencode)
    │   ├── HostUnreachable         connection refused, DNS, server never said "listening"
    │   ├── HostAuthError           401/403
    │   ├── HostTimeout             no answer in time
    │   ├── HostProtocolError       an answer we cannot parse (malformed JSON, wrong shape)
    │   ├── HostHTTPError           any other non-2xx answer (status, name, message)
    │   │   └── HostNotFound        404: the session (or route) does not exist
    │   └── HelperError             a helper prompt ran but did not give a usable result
    │       ├── ModelCallError      the host reported ``info.error`` for the prompt
    │       └── ExtractionInvalid   structured output missing or breaking the schema
    ├── InstallError                writing or removing files in the host's config
    └── ConfinementError            the consolidator's folder is not safe, or a run broke its confinement
"""

from __future__ import annotations


class MemorydError(Exception):
    """Root of every error memoryd raises deliberately."""


class ConfigError(MemorydError):
    def __init__(self, message: str, *, source: str | None = None, key: str | None = None) -> None:
        self.source = source
        self.key = key
        where = f"{source}: " if source else ""
        what = f"{key}: " if key else ""
        super().__init__(f"{where}{what}{message}")


class PathError(MemorydError):
    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class StoreError(MemorydError):
    pass


class StoreCorrupt(StoreError):
    def __init__(self, path: object, detail: str) -> None:
        self.path = path
        super().__init__(
            f"{path} is not a readable memoryd database ({detail}); it was left untouched. "
            "Move it aside to start fresh."
        )


class SchemaTooNew(StoreError):
    def __init__(self, path: object, unknown: list[str]) -> None:
        self.path = path
        self.unknown = unknown
        super().__init__(
            f"{path} was written by a newer memoryd (unknown migrations: {', '.join(unknown)}); "
            "upgrade memoryd to use it."
        )


class TemplateError(MemorydError):
    pass


class HostError(MemorydError):
    pass


class HostUnreachable(HostError):
    def __init__(self, url: str, detail: str) -> None:
        self.url = url
        super().__init__(f"opencode at {url} is unreachable: {detail}")


class HostAuthError(HostError):
    def __init__(self, url: str, status: int) -> None:
        self.url = url
        self.status = status
        super().__init__(
            f"opencode at {url} refused our credentials (HTTP {status}); "
            "check [host] username/password or MEMORYD_HOST_PASSWORD"
        )


class HostTimeout(HostError):
    def __init__(self, what: str, seconds: float) -> None:
        self.what = what
        self.seconds = seconds
        super().__init__(f"{what}: no answer from opencode within {seconds:g} s")


class HostProtocolError(HostError):
    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        super().__init__(f"{what}: unexpected answer from opencode ({detail})")


class HostHTTPError(HostError):
    def __init__(self, what: str, status: int, name: str | None, message: str | None) -> None:
        self.what = what
        self.status = status
        self.name = name
        self.detail = message
        tail = f"{name}: {message}" if name or message else "no detail"
        super().__init__(f"{what}: HTTP {status} ({tail})")


class HostNotFound(HostHTTPError):
    pass


class HelperError(HostError):
    pass


class ModelCallError(HelperError):
    """The host ran the prompt but the model call failed (``info.error`` on an HTTP 200)."""

    def __init__(
        self, name: str, message: str, *, status: int | None = None, retryable: bool | None = None
    ) -> None:
        self.name = name
        self.status = status
        self.retryable = retryable
        code = f" (HTTP {status})" if status else ""
        super().__init__(f"model call failed: {name}{code}: {message}")

    @property
    def is_rate_limit(self) -> bool:
        text = str(self).lower()
        return self.status in (429, 529) or any(
            w in text for w in ("rate limit", "quota", "overloaded")
        )


class ExtractionInvalid(HelperError):
    pass


class InstallError(MemorydError):
    pass


class ConfinementError(MemorydError):
    """The consolidation agent's folder or its surroundings break memoryd's confinement.

    Raised before a run (opencode would load config planted above the memory folder) and after
    one (the agent changed what it may not, or left entries outside memoryd's layout).
    """

    def __init__(self, problem: str, entries: list[str]) -> None:
        self.problem = problem
        self.entries = list(entries)
        shown = ", ".join(self.entries[:10]) + (" …" if len(self.entries) > 10 else "")
        super().__init__(f"{problem}: {shown}" if shown else problem)
