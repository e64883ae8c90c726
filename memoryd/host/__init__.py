"""The agent host (opencode) as seen by memoryd: an HTTP client and the payload models."""

from memoryd.host.models import (
    Message,
    MessageInfo,
    Part,
    PromptResult,
    Session,
    TokenUsage,
)
from memoryd.host.opencode import (
    HELPER_METADATA_KEY,
    HELPER_TITLE_PREFIX,
    OpencodeClient,
    is_helper_session,
)

__all__ = [
    "HELPER_METADATA_KEY",
    "HELPER_TITLE_PREFIX",
    "Message",
    "MessageInfo",
    "OpencodeClient",
    "Part",
    "PromptResult",
    "Session",
    "TokenUsage",
    "is_helper_session",
]
