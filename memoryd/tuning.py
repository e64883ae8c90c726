"""Every tuning constant in one place: leases, retries, heartbeats, retention, caps and timeouts.

These are the knobs a maintainer turns, not a user: user-facing options live in
:mod:`memoryd.settings`. Times are epoch milliseconds (``_MS``) or seconds (``_S``) as named;
sizes are characters (``_CHARS``), bytes (``_BYTES``) or tokens (``_TOKENS``). Modules import
from here and never define a second copy.
"""

from __future__ import annotations

from memoryd.clock import DAY, HOUR, MINUTE

# -- jobs (Codex's semantics) ------------------------------------------------------------------
DEFAULT_RETRIES = 3  # failures a job may have before it waits for new input
STAGE1_LEASE_MS = 1 * HOUR
STAGE1_RETRY_DELAY_MS = 1 * HOUR
PHASE2_LEASE_MS = 1 * HOUR
PHASE2_RETRY_DELAY_MS = 1 * HOUR
PHASE2_COOLDOWN_MS = 6 * HOUR  # after a run that called the model
PHASE2_FRESH_SHARE = 0.25  # of the consolidation's places, kept for the newest sessions not cited
PHASE2_HEARTBEAT_S = 90.0  # the consolidator's lease is renewed this often; a lost one aborts
MAX_ERROR_CHARS = 4_000  # a job's last_error as stored
BUSY_TIMEOUT_MS = 5_000  # memory.db waits this long for a writer before "database is locked"

# -- phase 1 -----------------------------------------------------------------------------------
EXTRACTION_CONCURRENCY = 8  # helper prompts in flight at once
STALE_HELPER_MS = 90 * MINUTE  # longer than any helper prompt may run
TRANSCRIPT_TOKEN_BUDGET = 64_000  # what the extractor reads (ranked selection past it)
TEXT_ENTRY_CHARS = 24_000  # one user or assistant text (a pasted log), head and tail kept
SELECTION_ENTRY_OVERHEAD_TOKENS = 24  # charged per selected entry: its header and a gap marker
TOOL_INPUT_CHARS = 2_000  # per tool call, head and tail kept
TOOL_OUTPUT_CHARS = 4_000
ERROR_CHARS = 1_000
CHARS_PER_TOKEN_CEILING = 8  # pre-cut by characters before tokenizing very large transcripts
TOKENIZER_TIMEOUT_S = (
    60.0  # the tokenizer helper process starts (table load) and answers within this
)
# the daemon's baseline helper answers one ensure/diff/reset within this (a first commit of a
# 4,096-file folder takes seconds on a slow disk)
BASELINE_CHILD_TIMEOUT_S = 600.0

# -- memory folder -----------------------------------------------------------------------------
RAW_MEMORY_MAX_CHARS = 10_000  # one session's raw memory as rendered for the consolidator
ROLLOUT_SUMMARY_MAX_BYTES = 9_000  # a stored rollout summary (after redaction), head and tail kept
SLUG_MAX_CHARS = 60  # rollout summary and note file names
RESOURCE_RETENTION_DAYS = 7  # imported extension resources no longer present at the source
DIFF_CAP_BYTES = 4 * 1024 * 1024  # the workspace diff handed to the consolidator
DIFF_CONTEXT_LINES = 3
DIFF_JOIN_BLOCKS = 2  # equal blocks between two changes that are line-diffed with them
DIFF_SYNC_WINDOW_BYTES = 8192  # first window searched for where two files line up again

# -- memory files the consolidator writes (checked by size before anything reads them) -------
# A summary is shown within BLOCK_TOKEN_BUDGET (~10 KB of English, ~20 KB of CJK); 64 KiB leaves
# room for one written a little over budget and refuses the rest, such as a 50 MB summary that
# cost a pass a minute of redaction and tokenizing (issue 22). Global and project layers alike.
SUMMARY_MAX_BYTES = 64 * 1024
# MEMORY.md (global or a project's) is never injected whole: it is grepped and read in windows.
# 1 MiB is ~250 K tokens, more than a consolidator can read and edit in one context.
MEMORY_MAX_BYTES = 1024 * 1024
# Each file under skills/: a procedure an agent reads whole when it uses it, so a few pages.
SKILL_MAX_BYTES = 256 * 1024

# -- agent edits (a change of the agent-owned files made outside a consolidation) ------------------
# A tool call counts when it ran no earlier than this before the change's file time or the
# folder's last check (clocks are the same machine's; this covers a long-running tool).
EDIT_MARGIN_MS = 2 * MINUTE
EDIT_LOOKBACK_MAX_MS = 7 * DAY  # never read sessions further back (memoryd was off that long)
EDIT_MESSAGES_PAGE = 50  # messages per page when reading the recent end of a transcript
EDIT_SCAN_MAX_CHARS = 256 * 1024  # a tool-input string longer than this counts as naming the folder
EDIT_INPUT_EXCERPT_CHARS = 800  # of each matching tool input, kept (redacted) in the staged item

# -- read path ---------------------------------------------------------------------------------
SUMMARY_VALID_MAX_BYTES = 10_000  # a valid global summary is smaller (Codex v2 checks the same)
BLOCK_TOKEN_BUDGET = 2_500  # instructions + summary, by tiktoken, in every turn
SPOOL_SETTLE_S = 0.02  # a claimed citation spool waits this long for a late append

# -- cost --------------------------------------------------------------------------------------
CIRCUIT_MS = 1 * HOUR  # a rate-limited model is left alone this long

# -- daemon and events -------------------------------------------------------------------------
TICK_S = 10  # spool ingest and block refresh
EVENT_DEBOUNCE_S = 2.0  # an idle/deleted event brings the next pass this close
BACKLOG_RETRY_S = 15.0  # a pass that left eligible work behind runs again this soon
# A pass requested during a pass starts this long after it returned: APScheduler counts the old
# instance as running until its done-callback has run, and would skip an immediate start.
COALESCED_DELAY_S = 0.5
EVENT_BACKOFF_START_S = 1.0
EVENT_BACKOFF_MAX_S = 30.0
EVENT_IDLE_TIMEOUT_S = 45.0  # opencode sends a heartbeat every 10 s; silence this long is death
EVENT_PROBE_TIMEOUT_S = 3.0  # a starting server accepts connections and never answers them
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 3

# -- sync across machines (sync_remote) ------------------------------------------------------
SYNC_CHECK_S = 30  # the daemon looks this often whether a sync is due (interval or backoff)
SYNC_INTERVAL_MS = 5 * MINUTE  # default between syncs when nothing asks for one sooner
SYNC_INTERVAL_MIN_S = 30  # the shortest sync_interval_s a user may set
SYNC_INTERVAL_MAX_S = 24 * 3600
SYNC_BACKOFF_MIN_MS = 30_000  # after a failed sync, doubling on each further failure...
SYNC_BACKOFF_MAX_MS = 1 * HOUR  # ...up to this
SYNC_MAX_PUSH_RACES = 8  # pushes lost to another machine in a row before a sync counts as failed
SYNC_MAX_SESSION_BYTES = 256 * 1024  # one published session file read back from the remote
SYNC_MAX_NOTE_BYTES = 64 * 1024
SYNC_MAX_TOMBSTONES_BYTES = 4 * 1024 * 1024
# What one remote may make phase 2 read: anyone who can push can write anything, and one bad
# machine folder must cost a skipped machine, never a failed consolidation.
SYNC_MAX_TREE_DEPTH = 8  # folder levels below a machine (memoryd itself writes 3)
SYNC_MAX_TREE_ENTRIES = 20_000  # files and folders walked in one machine folder
SYNC_MAX_MACHINES = 64  # other machines read per remote (the rest are skipped, reported)
SYNC_MAX_SESSIONS_PER_MACHINE = 5_000
SYNC_MAX_NOTES_PER_MACHINE = 500
SYNC_MAX_FETCH_BYTES = 512 * 1024 * 1024  # one fetched pack, as it arrives (history included)

# -- host --------------------------------------------------------------------------------------
HOST_RETRY_DELAYS_S = (0.5, 1.5)  # an idempotent request's retries after a transient fault
HOST_ABORT_TIMEOUT_S = 2.0
HOST_DELETE_TIMEOUT_S = 10.0
HOST_CONFIRM_TIMEOUT_S = 5.0
HOST_HEALTH_TIMEOUT_S = 5.0
# one answer's body from the host: a page of a long session with images is tens of MB
HOST_MAX_ANSWER_BYTES = 256 * 1024 * 1024
PRIVATE_SERVER_STOP_TIMEOUT_S = 3.0
# a killed memoryd's server is waited for this long after its SIGKILL (it holds that memoryd's claims)
ORPHAN_SERVER_DEATH_WAIT_S = 2.0

# -- memory tools ------------------------------------------------------------------------------
SEARCH_MAX_RESULTS = 200
SEARCH_MAX_QUERIES = 32
SEARCH_MAX_QUERY_CHARS = 1000
SEARCH_MAX_CONTEXT_LINES = 50
SEARCH_MAX_WINDOW_LINES = 1000
SEARCH_MAX_LINE_CHARS = 2000
READ_MAX_BYTES = 256 * 1024
LIST_MAX_RESULTS = 2000
INSPECT_MAX_ENTRIES = 5000
NOTE_MAX_CHARS = 4000
NOTE_TITLE_MAX_CHARS = 120
# A model's note is kept only when the calling session's user asked for it (tools/provenance.py).
NOTE_ASK_USER_TURNS = 3  # the newest user messages looked at
NOTE_REQUEST_MAX_CHARS = 600  # prose longer than this is a paste around the user's request ...
NOTE_REQUEST_EDGE_CHARS = 300  # ... which is its first or last this many characters
NOTE_GROUNDED_SHARE = 0.7  # of a note's ordinary words the user must have said
NOTE_TRANSCRIPT_PAGE = 30  # newest messages read (one GET)
NOTE_TRANSCRIPT_MAX_BYTES = 8 * 1024 * 1024  # a bigger answer is not read: the note is held
NOTE_HOST_TIMEOUT_S = 3.0  # per connect/read of that GET; the tool call waits at most ~2x this
NOTE_MCP_BUSY_SESSIONS = 8  # busy sessions of a folder searched for an MCP call's session
PROPOSED_NOTES_MAX = 200  # notes waiting for the user; past it a model's next note is dropped
TOOL_FILE_MAX_BYTES = 64 * 1024 * 1024
TOOL_MAX_DEPTH = 64
INDEX_BUSY_TIMEOUT_S = 30.0
# Ranked search scores at most this many matching chunks for a one-word query (the most recently
# indexed ones), this many / words for more: BM25 costs ~2 µs per chunk and word, so a word in
# every chunk cost 0.25 s at 50 MB (issue 16).
RANKED_WINDOW = 2000
# A refresh that added this many chunks optimises the FTS index (one segment): a first build at
# 50 MB left ~1.5× slower frequent-word queries otherwise; small additions are left to automerge.
INDEX_OPTIMIZE_ADDED = 1000

# -- extensions --------------------------------------------------------------------------------
EXTENSION_SOURCE_MAX_BYTES = 4 * 1024 * 1024
CODEX_ARTIFACT_MAX_BYTES = 16 * 1024 * 1024

# -- review mode and the web UI ----------------------------------------------------------------
REVIEW_HISTORY_MAX = 50  # accept/reject decisions kept for the Review page
REVIEW_REASON_MAX_CHARS = 500
UI_CHART_DAYS = 30  # the dashboard's tokens-per-day chart
UI_SEARCH_RESULTS = 30
UI_MAX_LISTED = 500  # files listed per folder on the Memory page
UI_MAX_FORM_BYTES = 64 * 1024  # a state-changing request's body, read whole by the guard

# Claude Code and Codex (memoryd install claude-code|codex)
CODEX_TRUST_TIMEOUT_S = 30.0  # `codex app-server` listing its hooks, to copy the trust of ours
MCP_PRIME_TIMEOUT_S = 60.0  # the install's one `memoryd mcp` start that keeps the tool list

# Claude Code and Codex transcripts read as phase-1 sources (memoryd/host/client_sources.py).
CLIENT_TRANSCRIPT_MAX_BYTES = 64 * 1024 * 1024  # a larger session file is refused, naming it
CLIENT_TRANSCRIPT_MAX_FILES = 20_000  # files listed per client and pass (newest first)
CLIENT_LINE_PROBLEMS_KEPT = 20  # malformed lines remembered per client for status
CLIENT_TITLE_CHARS = 80  # a session without a title is named by its first request, cut here

# -- files and git -----------------------------------------------------------------------------
# How long a file's stat data is not trusted to prove it unchanged (git's "racy" entries): a file
# rewritten within one timestamp tick can keep its mtime, size and inode. 2 s, not 1 s: the
# coarsest mtime resolution memoryd may meet is 2 s (FAT/exFAT, some network mounts), and a
# longer window only costs a re-read of files changed in the last two seconds. Used by the
# baseline's stat cache, the folder signature, the block's stamp and the search index's mark.
RACY_WINDOW_NS = 2_000_000_000
INDEX_FULL_CHECK_S = 300  # the search index compares every file at least this often
GIT_MODE_FILE = 0o100644  # git tree entry modes, for the baseline and the sync branch
GIT_MODE_EXEC = 0o100755
GIT_MODE_TREE = 0o040000

# -- the daemon --------------------------------------------------------------------------------
DAEMON_INTERVAL_S = 300.0  # between passes when no event asks for one (`memoryd run --interval`)
DAEMON_GRACE_S = 8.0  # a stop waits this long for running work before cancelling it

# Model runners without opencode (memoryd/runner/): turns a client CLI may take per call. An
# extraction is one answer through the structured-output tool (two turns, one to spare); a
# consolidation reads, then edits a handful of files.
RUNNER_EXTRACT_MAX_TURNS = 3
RUNNER_CONSOLIDATE_MAX_TURNS = 60
RUNNER_PROCESSES = 2  # client CLI children at once (each is a ~200 MB Node process)

# The MCP server's name and its instructions to the client's model: the early handshake
# (memoryd/mcp_handshake.py) and the SDK server (memoryd/cli/mcp_server.py) answer with the same.
MCP_SERVER_NAME = "memoryd"
MCP_INSTRUCTIONS = (
    "Long-term memory of this user's earlier coding sessions (decisions, preferences, conventions, "
    "fixes). Start with memory_search; open what it finds with memory_read. Save something only when "
    "the user asks you to remember it (memory_add_note). Reads default to this project and global "
    "memory (scope='project'); scope='global' or 'all' narrows or widens them."
)
