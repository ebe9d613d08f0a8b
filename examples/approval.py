"""Human approval: a risky call waits for a person, who decides from anywhere.

Run: ``python examples/approval.py [DB]`` (offline). The run pauses with status
``awaiting_approval``; a decision is an event (``approval_decided``) in the same
hash chain, written here by ``Loop.decide`` — or from another process by
``turnlog approve ID --all --yes --as ann`` — and ``resume`` goes on.
"""

from __future__ import annotations

import json
import sys

from turnlog import Journal, Loop, ScriptedProvider, tool

PAID: list[float] = []


@tool(needs_approval=lambda args: args["amount"] > 100)
def pay(to: str, amount: float) -> dict:
    """Pay someone.

    Args:
        to: who is paid
        amount: how much, in euros
    """
    PAID.append(amount)
    return {"paid": amount, "to": to}


def main(db: str = "approval.db") -> None:
    script = [
        {"tool_calls": [{"name": "pay", "arguments": {"to": "ann", "amount": 20}},
                        {"name": "pay", "arguments": {"to": "bob", "amount": 500}}]},
        {"text": "Paid ann 20; bob's payment was denied."},
    ]
    with Journal(db) as journal:
        loop = Loop(journal, ScriptedProvider(script), [pay])
        paused = loop.start("Pay ann 20 and bob 500.")
        print(f"{paused.conversation_id}: {paused.status}; waiting: "
              f"{list(paused.awaiting_approval)}")
        # The small payment needs no approval and ran; the large one waits.
        assert paused.status == "awaiting_approval" and PAID == [20]

        for call_id in paused.awaiting_approval:
            loop.decide(paused.conversation_id, call_id, False, "carol",
                        reason="over the monthly limit")
        done = loop.resume(paused.conversation_id)
        print(f"after the decision: {done.status}, paid {PAID}, answer {done.final_content!r}")
        assert done.completed and PAID == [20]  # the denied call never ran
        decided = [json.loads(row.payload) for row in journal.read(paused.conversation_id)
                   if row.type == "approval_decided"]
        print("recorded decision:", decided[0]["decision"], "by", decided[0]["approver"])


if __name__ == "__main__":
    main(*sys.argv[1:])
