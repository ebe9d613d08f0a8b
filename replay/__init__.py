"""Deterministic replay, forks, provider swaps and diffs over a turnlog journal."""
