"""The long-running process: daemon lifecycle, the host event follower, service files, logging."""
