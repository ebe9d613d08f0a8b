"""Replay a recorded run deterministically, fork it, and diff the branches.

Run: ``python examples/replay_fork_diff.py [DB]`` (offline). Deterministic replay
re-runs the agent loop over the recording: the recorded model answers only the
request it was asked, the recorded tools only the calls they ran, so any
change in the loop's rules shows as a divergence — the model is never called.
A fork copies nothing: it names its parent, the seq and the parent's hash.
"""

from __future__ import annotations

import sys

from turnlog import Journal, Loop, ScriptedProvider, diff, fork, replay, tool


@tool(effect="read_only")
def add(a: float, b: float) -> dict:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return {"sum": a + b}


def main(db: str = "replay_fork_diff.db") -> None:
    with Journal(db) as journal:
        recorded = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]
        original = Loop(journal, ScriptedProvider(recorded), [add]).start("2 + 3?")
        outcome = replay(journal, original.conversation_id)
        print(f"replay of {original.conversation_id}: {'identical' if outcome.ok else 'diverged'}")
        assert outcome.ok

        # Branch off after the first user message (seq 2) and ask something else.
        branch = fork(journal, original.conversation_id, 2, message="And 2 + 4?")
        other = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 4}}]}, {"text": "6"}]
        forked = Loop(journal, ScriptedProvider(other), [add]).resume(branch)
        print(f"fork {branch}: {forked.status}, answer {forked.final_content!r}")
        assert forked.final_content == "6"
        assert journal.verify().ok  # the fork is checked against its parent's hash at seq 2

        changes = diff(journal, original.conversation_id, branch)
        print(changes.render())


if __name__ == "__main__":
    main(*sys.argv[1:])
