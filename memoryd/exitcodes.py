"""Every exit code memoryd's command line returns; library code raises, only ``cli/`` exits.

The service files (systemd's ``RestartPreventExitStatus``) read :data:`NO_RESTART_STATUS` from
here, so the codes a restart cannot fix are named once.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # bad arguments or config
EXIT_HOST = 3  # opencode unreachable or refusing our credentials
EXIT_STARTUP_FAILURE = 4  # the daemon cannot start: bad config, unreadable store, already running
EXIT_INTERRUPTED = 130

NO_RESTART_STATUS = (EXIT_USAGE, EXIT_STARTUP_FAILURE)
