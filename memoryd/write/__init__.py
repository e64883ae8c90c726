"""The write side: phase 1 (extract each idle session), phase 2 (consolidate the memory folder),
the pass that runs them, and what they share (transcripts, helper sessions, the git baseline, budget)."""
