"""Every error memoryd raises on purpose derives from :class:`MemorydError`.

Exceptions carry structured fields and build their own message; they become user-facing text
only at the edges (the CLI prints ``str(exc)`` on one line, the MCP layer returns it as a tool
error). Library code never calls ``sys.exit``.

The tree::

    MemorydError
    ├── ConfigError                 bad config file, unknown key, out-of-range value
    ├── PathError                   a data folder that is a symlink, unwritable, or missing
    │   ├── NotRegularFile          a link, FIFO, device, folder or hard-linked file where a file
    │   │                           was expected
    │   └── FileTooLarge            a file over its size cap, refused before it is read (also a
    │                               Refused, so the memory tools decline it like any other)
    ├── StoreError                  memory.db problems
    │   ├── StoreCorrupt            the file is not a SQLite database we can read
    │   └── SchemaTooNew            written by a newer memoryd; refused
    ├── TemplateError               a prompt template is missing or lacks a variable
    ├── TokenizerError              the tokenizer helper process failed to start, answer or count
    ├── HostError                   talking to the agent host (opencode)
    │   ├── HostUnreachable         connection refused, DNS, no server configured or recorded
    │   │   ├── HostNotStarted      memoryd's own opencode could not be found, started or readied
    │   │   └── RunnerMissing       no model runner: neither opencode nor a client CLI is there
    │   ├── HostAuthError           401/403
    │   ├── HostTimeout             no answer in time
    │   ├── HostProtocolError       an answer we cannot parse (malformed JSON, wrong shape)
    │   ├── HostHTTPError           any other non-2xx answer (status, name, message)
    │   │   └── HostNotFound        404: the session (or route) does not exist
    │   └── HelperError             a helper prompt ran but did not give a usable result
    │       ├── ModelCallError      the host reported ``info.error`` for the prompt
    │       └── ExtractionInvalid   structured output missing or breaking the schema
    ├── PortTaken                   (internal) the port picked for a private server was taken
    ├── InstallError                writing or removing files in the host's config
    │   └── AgentMissing            opencode does not know memoryd's helper agent
    ├── ServiceError                the systemd unit / launchd agent could not be written or removed
    ├── StartupFailure              the daemon cannot start (config, store, lock); exit code 4
    │   └── AlreadyRunning          another daemon holds this home's lock
    ├── BudgetWait                  work must wait (budget spent, circuit open): not a failure
    ├── ConsolidationError          a phase-2 run that must not become the new memory
    │   ├── ConfinementError        its folder is unsafe, or the consolidator went outside its files
    │   ├── InvalidMemory           the files it left do not validate
    │   └── OwnershipLost           another worker took the phase-2 lease
    ├── LeaseHeld                   a whole-memory operation refused while a consolidation runs
    ├── BaselineError               the git baseline or the worktree cannot be read or written
    ├── BaselineBroken              (internal) the baseline repository must be rebuilt
    │   └── BaselineHeadMissing     (internal) it has no commit yet
    ├── SourceUnreadable            (internal) an imported project's memory could not be read whole
    ├── TranscriptUnreadable        a Claude Code or Codex session file that cannot be read (too
    │                               large, a link, not a regular file): its job fails naming it
    ├── ReviewError                 nothing staged for review, or the job is busy (review mode)
    ├── UIError                     the web UI cannot listen on its port
    ├── SyncError                   the sync remote: unreachable, refusing, or not a repository
    │   ├── SyncBlocked             a secret scan flagged what this machine would publish
    │   └── PushRaceLost            (internal) the remote moved since our fetch; fetch and re-apply
    └── ToolError                   a memory tool declined; the message is for the model or user
        ├── NotFound                no such path, note or session (also a LookupError)
        ├── Refused                 understood and declined: a secret, a symlink, a lease
        └── InvalidArgument         out of range, malformed, or outside the folder (a ValueError)
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


class NotRegularFile(PathError):
    """Reads refuse these rather than follow a link, block on a FIFO or read another file."""


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


class TokenizerError(MemorydError):
    """Counting runs in a child process (:mod:`memoryd.tokenizer`); this says why it gave no answer."""


class HostError(MemorydError):
    pass


class HostUnreachable(HostError):
    """``url`` is the address tried; empty when there was none to try."""

    def __init__(self, url: str, detail: str) -> None:
        self.url = url
        self.detail = detail
        super().__init__(
            f"opencode at {url} is unreachable: {detail}"
            if url
            else f"no opencode server to talk to: {detail}"
        )


class HostNotStarted(HostUnreachable):
    """The private server: names the executable tried and, once it had one, its address."""

    def __init__(self, executable: str, detail: str, url: str = "") -> None:
        self.executable = executable
        HostError.__init__(
            self,
            f"could not start opencode ({executable}"
            + (f", serving on {url}" if url else "")
            + f"): {detail}",
        )
        self.url = url
        self.detail = detail


class RunnerMissing(HostUnreachable):
    """Nothing can run memoryd's model calls: the message names what to install or set."""

    def __init__(self, setting: str, detail: str) -> None:
        self.setting = setting
        self.url = ""
        self.detail = detail
        HostError.__init__(self, f"no model runner ({setting}): {detail}")


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


class ReviewError(MemorydError):
    """Nothing is staged for review, or the consolidation job is busy and cannot take a decision."""


class UIError(MemorydError):
    """The web UI could not listen on its port."""


class PortTaken(MemorydError):
    """The port chosen for a private ``opencode serve`` was taken meanwhile; try another."""

    def __init__(self, error: HostNotStarted) -> None:
        super().__init__(str(error))
        self.error = error


class AgentMissing(InstallError):
    def __init__(self, name: str, config_file: str, directory: str) -> None:
        self.name = name
        self.config_file = config_file
        self.directory = directory
        super().__init__(
            f"opencode does not load the {name!r} agent from {config_file} for sessions in "
            f"{directory} (is OPENCODE_DISABLE_PROJECT_CONFIG set?)"
        )


class ServiceError(MemorydError):
    """The service file could not be rendered, written or removed."""


class StartupFailure(MemorydError):
    """The daemon cannot start; a restart by the service manager cannot fix it."""


class AlreadyRunning(StartupFailure):
    def __init__(self, pid: str) -> None:
        self.pid = pid
        super().__init__(
            f"another memoryd daemon already runs on this home (pid {pid or '?'}); not starting twice"
        )


class BudgetWait(MemorydError):
    """Work must wait (budget spent or circuit open); not a failure."""


class ConsolidationError(MemorydError):
    """A consolidation whose result must not become the live memory."""


class ConfinementError(ConsolidationError):
    """The consolidation agent's folder or its surroundings break memoryd's confinement.

    Raised before a run (opencode would load config planted above the memory folder) and after
    one (the agent changed what it may not, or left entries outside memoryd's layout: undone).
    """

    def __init__(self, problem: str, entries: list[str]) -> None:
        self.problem = problem
        self.entries = list(entries)
        shown = ", ".join(self.entries[:10]) + (" …" if len(self.entries) > 10 else "")
        super().__init__(f"{problem}: {shown}" if shown else problem)


class InvalidMemory(ConsolidationError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("consolidation left invalid memory: " + "; ".join(problems))


class OwnershipLost(ConsolidationError):
    def __init__(self) -> None:
        super().__init__("lost the phase-2 lease to another worker; consolidation aborted")


class LeaseHeld(MemorydError):
    def __init__(self) -> None:
        super().__init__(
            "a consolidation is running (it holds the phase-2 lease); try again when it ends"
        )


class BaselineError(MemorydError):
    """The baseline repository or the worktree could not be read or written."""


class BaselineBroken(MemorydError):
    """Internal: the repository at git_dir is unusable and should be rebuilt."""


class BaselineHeadMissing(BaselineBroken):
    """Internal: the repository has no commit yet."""


class SourceUnreadable(MemorydError):
    """Internal: a project's memory could not be read completely; its copy must be left alone."""


class TranscriptUnreadable(MemorydError):
    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"session file {path}: {reason}")


class ToolError(MemorydError):
    """Root of every error a memory tool raises on purpose.

    Each message is written for the model or the user reading it: it says what was wrong and,
    where there is one, what to do instead.
    """


class NotFound(ToolError, LookupError):
    """The path, note or session does not exist (hidden entries report this too)."""


class Refused(ToolError):
    """Understood and declined: a secret, a symlink, a missing confirmation, a lease."""

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        self.reasons = list(reasons or [])
        super().__init__(message)


class FileTooLarge(PathError, Refused):
    """A file over its cap (``cap`` bytes; ``size`` as ``fstat`` or the read found it).

    Raised before the file is read whole, so an oversized memory file costs one ``fstat``, never
    a read, a redaction pass or a tokenizer call. Also a :class:`Refused`: the memory tools skip
    or decline it like any file they will not serve.
    """

    def __init__(self, path: object, size: int, cap: int) -> None:
        self.size = size
        self.cap = cap
        PathError.__init__(self, path, f"is {size} bytes, over its cap of {cap} bytes")


class InvalidArgument(ToolError, ValueError):
    """A parameter is out of range, malformed, or points outside the memory folder."""


class SyncError(MemorydError):
    """The sync remote could not be read or written; local memory is never affected."""

    def __init__(self, remote: str, detail: str) -> None:
        self.remote = remote
        self.detail = detail
        super().__init__(f"sync with {remote}: {detail}")


class SyncBlocked(SyncError):
    """Publishing stopped: the secret scan flagged files this machine would push."""

    def __init__(self, remote: str, flagged: list[tuple[str, list[str]]]) -> None:
        self.flagged = flagged
        names = ", ".join(f"{path} ({'/'.join(kinds)})" for path, kinds in flagged[:5])
        more = f" and {len(flagged) - 5} more" if len(flagged) > 5 else ""
        super().__init__(
            remote, f"push stopped: possible secrets in {len(flagged)} file(s): {names}{more}"
        )


class PushRaceLost(SyncError):
    """Internal: another machine pushed since our fetch; fetch again and lay our folder on top."""

    def __init__(self, remote: str) -> None:
        super().__init__(remote, "the remote branch moved during the push")


def is_transient(exc: BaseException) -> bool:
    """A fault of the moment (refused, reset, 5xx, 429): worth repeating an idempotent request."""
    if isinstance(exc, HostUnreachable):
        return True
    return (
        isinstance(exc, HostHTTPError)
        and not isinstance(exc, HostNotFound)
        and (exc.status >= 500 or exc.status == 429)
    )


def is_host_fault(exc: BaseException) -> bool:
    """The host failed, not the job: release the claim without burning a retry.

    Refused or reset connections, credentials, timeouts, answers we cannot parse and 5xx/429
    statuses are opencode's trouble (restarting, overloaded, a proxy in between); the session
    itself may be fine. A model error, a 404 or an invalid extraction stays the job's.
    """
    return isinstance(
        exc, (HostUnreachable, HostAuthError, HostTimeout, HostProtocolError)
    ) or is_transient(exc)
