"""Bring a transcript turnlog did not record, export it for another API, swap the model.

Run: ``python examples/import_swap.py [DB]`` (offline). The transcript is an
OpenAI Chat Completions request body with a tool call and its result; import
detects the format, records model and tools, and keeps every part. The export
is a valid Anthropic Messages request; the swap sends the recorded user
messages to another provider (here a scripted stand-in) and serves recorded
tool results for the same calls.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from turnlog import (Journal, ScriptedProvider, diff, export_conversation, import_file,
                     load_state, swap)

TRANSCRIPT = {
    "model": "gpt-4.1",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\": \"clear\", \"c\": 18}"},
        {"role": "assistant", "content": "Clear, 18 °C."},
    ],
    "tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}],
}


def main(db: str = "import_swap.db") -> None:
    with tempfile.TemporaryDirectory() as tmp, Journal(db) as journal:
        path = Path(tmp) / "paris.json"
        path.write_text(json.dumps(TRANSCRIPT))
        imported = import_file(journal, path)
        cid = imported.conversation_id
        print(f"imported {cid}: {imported.events} events, formats {imported.formats}, "
              f"status {imported.status}")

        anthropic = json.loads(export_conversation(journal, cid, "anthropic"))
        print("as an Anthropic request:", json.dumps(anthropic)[:160], "...")

        other_model = ScriptedProvider([
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            {"text": "Sunny and 18 degrees."}])
        swapped = swap(journal, cid, other_model, model="another-model", tools="recorded")
        answer = load_state(journal, swapped.conversation_id).final_content
        print(f"swap -> {swapped.conversation_id}: {swapped.status} on {swapped.model}, "
              f"answer {answer!r}")
        assert swapped.status == "completed" and answer == "Sunny and 18 degrees."
        print(diff(journal, cid, swapped.conversation_id).render())
        assert journal.verify().ok


if __name__ == "__main__":
    main(*sys.argv[1:])
