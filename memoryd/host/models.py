"""Typed views of the opencode HTTP answers memoryd reads.

opencode's objects carry many more keys than memoryd uses and grow between versions, so every
model accepts unknown fields (``extra="allow"``: they stay reachable for debugging) while the few
fields memoryd relies on (ids, titles, directories, timestamps, roles) are required and typed. A
missing or mistyped relied-on field is a protocol error at the client boundary rather than a
``KeyError`` deep inside discovery or extraction.

Field names keep opencode's spelling (``sessionID``, ``parentID``, ``modelID``) so the models map
one-to-one onto ``GET /doc`` and the observed payloads in ``opencode-host.md``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Loose(BaseModel):
    """Base for host payloads: unknown keys are kept, never rejected."""

    model_config = ConfigDict(extra="allow")


# --------------------------------------------------------------------------------------------
# Sessions


class SessionTime(_Loose):
    created: int
    updated: int
    archived: int | None = None


class ProjectRef(_Loose):
    """The ``project`` object ``/experimental/session`` attaches to each session."""

    id: str
    name: str | None = None
    worktree: str | None = None


class Session(_Loose):
    id: str
    title: str
    directory: str
    time: SessionTime
    parentID: str | None = None
    projectID: str | None = None
    metadata: dict[str, Any] | None = None
    project: ProjectRef | None = None
    version: str | None = None

    @property
    def is_archived(self) -> bool:
        return self.time.archived is not None

    @property
    def is_root(self) -> bool:
        return self.parentID is None

    @property
    def worktree(self) -> str | None:
        """The session's project worktree (only listings carry it; ``/`` for loose folders)."""
        return self.project.worktree if self.project else None


# --------------------------------------------------------------------------------------------
# Messages


class MessageTime(_Loose):
    created: int
    completed: int | None = None


class CacheTokens(_Loose):
    read: int = 0
    write: int = 0


class MessageTokens(_Loose):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: CacheTokens = Field(default_factory=CacheTokens)


class MessageInfo(_Loose):
    id: str
    sessionID: str
    role: str  # "user" | "assistant" today; other strings are tolerated
    time: MessageTime
    parentID: str | None = None
    agent: str | None = None
    modelID: str | None = None
    providerID: str | None = None
    finish: str | None = None
    error: dict[str, Any] | None = None
    structured: Any = None
    tokens: MessageTokens | None = None
    cost: float | None = None

    @property
    def is_user(self) -> bool:
        return self.role == "user"

    @property
    def is_assistant(self) -> bool:
        return self.role == "assistant"


class ToolState(_Loose):
    status: str | None = None
    input: Any = None
    output: Any = None
    error: Any = None
    title: str | None = None
    metadata: dict[str, Any] | None = None


class Part(_Loose):
    """One message part. Only ``type`` is required: opencode has a dozen part kinds."""

    type: str
    id: str | None = None
    text: str | None = None
    synthetic: bool | None = None
    ignored: bool | None = None
    tool: str | None = None
    callID: str | None = None
    state: ToolState | None = None

    @property
    def is_visible_text(self) -> bool:
        """A text part the user or model actually wrote (not injected, not ignored)."""
        return self.type == "text" and bool(self.text) and not self.synthetic and not self.ignored


class Message(_Loose):
    info: MessageInfo
    parts: list[Part] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Usage and prompt results


class TokenUsage(BaseModel):
    """Token counts of one or more model calls, flattened and summable."""

    model_config = ConfigDict(frozen=True)

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @classmethod
    def from_tokens(cls, tokens: MessageTokens | None) -> TokenUsage:
        if tokens is None:
            return cls()
        return cls(
            input=tokens.input,
            output=tokens.output,
            reasoning=tokens.reasoning,
            cache_read=tokens.cache.read,
            cache_write=tokens.cache.write,
        )

    @classmethod
    def from_info(cls, info: MessageInfo) -> TokenUsage:
        return cls.from_tokens(info.tokens)

    @property
    def total(self) -> int:
        return self.input + self.output + self.reasoning + self.cache_read + self.cache_write

    def __add__(self, other: TokenUsage) -> TokenUsage:
        if not isinstance(other, TokenUsage):
            return NotImplemented
        return TokenUsage(
            input=self.input + other.input,
            output=self.output + other.output,
            reasoning=self.reasoning + other.reasoning,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
        )


class PromptResult(_Loose):
    """What a synchronous prompt returns: the *last* assistant message of the turn."""

    info: MessageInfo
    parts: list[Part] = Field(default_factory=list)

    @property
    def structured(self) -> Any:
        return self.info.structured

    @property
    def text(self) -> str:
        """The visible text parts of the final message, joined by newlines."""
        return "\n".join(p.text for p in self.parts if p.is_visible_text and p.text)

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage.from_info(self.info)
