"""A first agent run: a scripted model calls a tool, every step lands in a journal.

Run: ``python examples/first_run.py [DB]`` (offline; default ``first_run.db`` in
the current directory). Swap ``ScriptedProvider`` for
``get_provider("anthropic", model=...)`` to talk to a real model.
"""

from __future__ import annotations

import sys

from turnlog import Journal, Loop, ScriptedProvider, load_state, tool


@tool(effect="read_only")
def add(a: float, b: float) -> dict:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return {"sum": a + b}


def main(db: str = "first_run.db") -> None:
    script = [
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"tool_calls": [{"name": "add", "arguments": {"b": 3, "a": 2.0}}]},  # the same call again
        {"text": "2 + 3 = 5"},
    ]
    with Journal(db) as journal:
        result = Loop(journal, ScriptedProvider(script), [add]).start("What is 2 + 3?")
        print(f"{result.conversation_id}: {result.status}, {result.turn_count} turns, "
              f"answer {result.final_content!r}")
        # The repeated call (same tool, same canonical arguments) was refused, not run.
        for row in journal.read(result.conversation_id):
            print(f"  {row.seq:>2} {row.type}")
        state = load_state(journal, result.conversation_id)
        assert result.completed and len(state.messages) > 0
        report = journal.verify()
        print("journal verifies:", report.ok)
        assert report.ok


if __name__ == "__main__":
    main(*sys.argv[1:])
