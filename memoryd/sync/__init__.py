"""One memory across machines, through any git remote (``sync_remote``).

Other machines are inputs, never peers. Each machine publishes only its own memory — every
current stage-1 output phase 2 could use, its notes, and the sessions it forgot (tombstones) — under ``machines/<machine id>/`` on the ``memoryd-sync`` branch, and reads every
other machine's folder as a phase-2 input, like the Claude Code and Codex imports
(``extensions/sync/`` in the memory folder). Nobody writes another machine's folder, so a push
race never needs a merge: the loser fetches and lays its own folder onto the new head again.

* :mod:`memoryd.sync.branch` — the branch layout and the published file formats;
* :mod:`memoryd.sync.publish` — what this machine publishes, and the secret scan before a push;
* :mod:`memoryd.sync.git` — dulwich: fetch, commit on the fetched head, push (compare-and-swap);
* :mod:`memoryd.sync.inputs` — other machines' folders rendered into the memory folder (after a
  pull, and in phase 2);
* :mod:`memoryd.sync.checkouts` — checkout identity, matching remote sessions to local projects;
* :mod:`memoryd.sync.engine` — one sync, the forget re-root, its recorded state, the backoff;
* :mod:`memoryd.sync.urls` — the remote as shown and stored, its credentials masked.
"""
