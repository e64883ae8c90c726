"""Optional inputs and outputs beside opencode: Claude Code's project memory, Codex's memory folder."""
