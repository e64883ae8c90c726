"""The keys of memory.db's small named state (``Store.put_state`` / ``get_state``), in one place.

Each key has one writer; ``memoryd status`` and the UI read most of them. A key is part of the
database format: renaming one loses what existing homes recorded under it.
"""

from __future__ import annotations

LAST_PASS = "last_pass"  # what the last pass did (write/passes.py)
LAST_PASS_ERROR = "last_pass_error"  # what stopped the last pass, None after a clean one
DAEMON = "daemon"  # the running daemon's heartbeat (runtime/daemon.py)
HOST_SEEN = "host"  # the opencode last reached: URL, version, private or not
RUNNER_SEEN = "runner"  # the runner the last pass used (opencode, claude-code) and why
# Entries removed from the memory folder because memoryd's layout has no place for them.
FOLDER_SWEPT = "memory_folder_swept"
# A change of the agent-owned files waiting because opencode could not say who made it.
AGENT_EDIT_HELD = "agent_edit_held"
REVIEW_HISTORY = "review_history"  # accepted and rejected reviews, newest first
CIRCUIT = "circuit"  # the rate-limit circuit breakers (write/budget.py)
SYNC_MACHINE = "sync_machine"  # this machine's sync id and name
SYNC_STATE = "sync"  # the last sync's outcome, its backoff and what waits to be pushed
NOTE_WRITE = "note_write:"  # prefix: a user's note written or deleted by memoryd, by relpath
PHASE2_URGENT = "phase2_urgent_input"  # the input version of the last urgent phase-2 enqueue
