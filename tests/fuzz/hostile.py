"""A seeded, bounded fuzz of everything that reads outside input: only ``TurnlogError``s escape.

Inputs are valid seeds (transcript entries of every import format, response
bodies of every provider adapter) mutated by a seeded ``random.Random``:
values swapped for hostile ones (lone surrogates, wrong types, ``{}`` where
a string belongs, huge and negative numbers, deep nesting on either side of
``engine.nesting.MAX_DEPTH``, as data and as JSON text in a string), keys
dropped or added, lists shuffled. Each input is fed to the importer
(``import_entries`` with each ``--format``, and detection) or to
``parse_body`` + each adapter's ``map_response``, and a response that maps
is then recorded (every third, and every one that nests deep) as a live one
is: a ``Loop`` turn whose provider returns it
(``model_responded``, its calls refused or run, in a real journal); anything
but a ``TurnlogError`` is a finding.

``python -m tests.fuzz.hostile [N] [SEED]`` runs it standalone and prints
its figures.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from turnlog.engine.formats.detect import FORMATS
from turnlog.engine.formats.importer import import_entries
from turnlog.engine.loop import Loop
from turnlog.engine.errors import NestingError
from turnlog.engine.model.nesting import MAX_DEPTH, check_depth
from turnlog.engine.providers import anthropic, gemini, openai, openai_responses
from turnlog.engine.providers._common import parse_body
from turnlog.journal import Journal, TurnlogError

__all__ = ["ENTRY_SEEDS", "RESPONSE_SEEDS", "fuzz", "mutate"]

HOSTILE: list[Any] = [
    "\udd20", "x\ud800y", "\udfff\ud800", "", " ", "\x00", "é", "e\u0301", {}, [], None, True, 0, -1,
    2**64, 1e308, -0.0, 3.5, "9" * 40, {"type": {}}, [{}], {"": None}, ["\udd20"],
    {"e\u0301": 1, "é": 2}, "x" * 5000,
]
_ROLES = ["user", "assistant", "system", "tool", "model", "function", "developer"]

ENTRY_SEEDS: list[list[Any]] = [
    [{"role": "user", "content": "q", "timestamp": "2025-08-27T21:40:00.000Z"},
     {"role": "assistant", "content": "a"}, {"input": "r", "context": "c"}],
    [{"role": "system", "content": "s"}, {"role": "user", "content": "w?"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
         {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"x": 2}'}}]},
     {"role": "tool", "tool_call_id": "x", "content": "ok"},
     {"role": "tool", "tool_call_id": "x", "content": "ok2"}, {"role": "assistant", "content": "done"}],
    [{"role": "user", "content": [{"type": "text", "text": "q"}]},
     {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                       {"type": "tool_use", "id": "t1", "name": "f",
                                        "input": {"a": 1}}]},
     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                   "content": [{"type": "text", "text": "r"}]}]}],
    [{"role": "user", "parts": [{"text": "q"}]},
     {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
     {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "r"}}}]},
     {"role": "model", "parts": [{"text": "done", "thoughtSignature": "s"}]}],
    [{"role": "user", "content": "q"},
     {"role": "assistant", "content": "AI ACTION (Turn 1): Executing Google Search with "
                                      "parameters: query: x"},
     {"role": "user", "content": "TOOL RESPONSE (Turn 1): SUCCESS: Google Search completed "
                                 "successfully.\n\n{\"a\":1}"}],
    [{"type": "conversation_started", "seq": 1, "payload": {"conversation_id": "c",
                                                            "provider": "p", "model": "m"}},
     {"type": "user_message", "seq": 2, "payload": {"parts": [{"type": "text", "text": "hi"}]},
      "recorded_at": "2025-01-01T00:00:00Z"},
     {"type": "model_responded", "payload": {"turn": 1, "source": "imported", "parts": [
         {"type": "tool_call", "id": "a", "name": "f", "arguments": {"k": 1}}]}},
     {"type": "tool_completed", "payload": {"call_id": "a", "name": "f", "success": True,
                                            "content": "ok"}}],
]

RESPONSE_SEEDS: dict[str, dict[str, Any]] = {
    "openai": {"id": "chatcmpl-1", "model": "gpt", "choices": [{"index": 0, "finish_reason":
        "tool_calls", "message": {"role": "assistant", "content": "hi", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{bad"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                  "prompt_tokens_details": {"cached_tokens": 1}}},
    "anthropic": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                  "stop_reason": "tool_use", "content": [
                      {"type": "thinking", "thinking": "t", "signature": "s"},
                      {"type": "text", "text": "hi"},
                      {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}],
                  "usage": {"input_tokens": 3, "output_tokens": 4}},
    "gemini": {"modelVersion": "g", "responseId": "r", "candidates": [{"finishReason": "STOP",
        "content": {"role": "model", "parts": [{"text": "hi"}, {"thought": True, "text": "t"},
                                               {"functionCall": {"name": "f", "args": {"a": 1}}}]}}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4}},
    "openai-responses": {"id": "resp_1", "model": "gpt", "status": "completed", "output": [
        {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "t"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a":1}'}],
        "usage": {"input_tokens": 3, "output_tokens": 4}},
}
MAPPERS: dict[str, Callable[[Any], Any]] = {
    "openai": openai.map_response, "anthropic": anthropic.map_response,
    "gemini": gemini.map_response, "openai-responses": openai_responses.map_response,
}


def _hostile(rnd: random.Random) -> Any:
    pick = rnd.random()
    if pick < 0.08:  # deep nesting: under the limit (where it sits in the body), past it, far past
        depth = rnd.choice([20, 100, MAX_DEPTH - 8, MAX_DEPTH - 3, 300, 450, 1200, 5000])
        value: Any = rnd.choice(["x", "\udd20", {}])
        for _ in range(depth):
            value = [value] if rnd.random() < 0.5 else {"a": value}
        if rnd.random() < 0.3:  # as JSON text: tool arguments, a script's arguments_raw
            try:
                return json.dumps(value)
            except (RecursionError, ValueError):
                return "[" * depth + "]" * depth
        return value
    if pick < 0.2:
        return rnd.choice(_ROLES + list(FORMATS))
    value = rnd.choice(HOSTILE)
    return copy.deepcopy(value) if isinstance(value, (dict, list)) and value else value


def mutate(value: Any, rnd: random.Random, rate: float) -> Any:
    """``value`` with some of its parts replaced by hostile ones (a fresh copy)."""
    if rnd.random() < rate:
        return _hostile(rnd)
    if isinstance(value, dict):
        out = {k: mutate(v, rnd, rate) for k, v in value.items() if rnd.random() > rate / 2}
        if rnd.random() < rate:
            out[rnd.choice(["type", "role", "content", "id", "\udd20", "parts", "text"])] = (
                _hostile(rnd))
        return out
    if isinstance(value, list):
        out = [mutate(v, rnd, rate) for v in value]
        if rnd.random() < rate:
            rnd.shuffle(out)
        if out and rnd.random() < rate:
            out.append(rnd.choice(out))  # shared, never mutated
        return out
    if isinstance(value, str) and rnd.random() < rate:
        cut = rnd.randrange(len(value) + 1)
        return value[:cut] + rnd.choice(["\udd20", "\ud83d", "\x00", "\u0301"]) + value[cut:]
    return value


_JOURNAL: list[Journal] = []


class _Answer:
    """A provider that answers with the response under test (the live path's last step)."""

    name = "fuzz"
    model = "fuzz"

    def __init__(self) -> None:
        self.response: Any = None

    def complete(self, request: Any) -> Any:
        return self.response


_ANSWER = _Answer()
_LOOP: list[Loop] = []


def _import(entries: Any, fmt: str | None, n: int) -> None:
    if n % 500 == 1:  # a fresh journal now and then: the fuzz measures parsing, not a big file
        _JOURNAL[:] = [Journal(":memory:")]
    import_entries(_JOURNAL[0], entries, fmt=fmt, conversation_id=f"fuzz-{n}")


def rnd_deep(body: Any) -> bool:
    """Every so often, the response text is nested far deeper than any parser recurses."""
    return isinstance(body, dict) and len(body) == 1


def _deep(body: Any) -> bool:
    """Whether ``body`` nests more than 50 levels (a deep hostile value went in)."""
    try:
        check_depth(body, "body", limit=50)
    except NestingError:
        return True
    return False


def _respond(name: str, body: Any, as_text: bool, n: int) -> None:
    if as_text and rnd_deep(body):
        body = parse_body("[" * 100_000 + "]" * 100_000, name)
    elif as_text:
        try:
            text = json.dumps(body, ensure_ascii=bool(body) and len(str(body)) % 2 == 0)
        except (ValueError, RecursionError):
            return  # not an input JSON can carry
        body = parse_body(text, name)
    response = MAPPERS[name](body)
    if n % 6 and not _deep(body):  # recording costs a loop turn: every third, and every deep one
        return
    if not _LOOP or n % 500 == 0:  # a fresh journal now and then, as for imports
        _LOOP[:] = [Loop(Journal(":memory:"), _ANSWER)]
    _ANSWER.response = response
    result = _LOOP[0].start("q", conversation_id=f"fuzz-{n}", max_turns=1)
    if result.status == "failed" and "nests deeper" not in (result.error or ""):
        raise AssertionError(f"recording the mapped response failed: {result.error}")


def fuzz(n: int, seed: int, rate: float = 0.15) -> tuple[int, float, list[tuple[str, Any, str]]]:
    """Feed ``n`` mutated inputs; ``(inputs, seconds, findings)``."""
    rnd = random.Random(seed)
    findings: list[tuple[str, Any, str]] = []
    start = time.perf_counter()
    fmts = [None, *FORMATS]
    names = list(MAPPERS)
    for i in range(n):
        if i % 2:
            entries = mutate(rnd.choice(ENTRY_SEEDS), rnd, rate)
            target, call = f"import:{fmts[i // 2 % len(fmts)]}", lambda: _import(
                entries, fmts[i // 2 % len(fmts)], i)
            value = entries
        else:
            name = names[i // 2 % len(names)]
            body = mutate(RESPONSE_SEEDS[name], rnd, rate)
            target, call = f"response:{name}", lambda: _respond(name, body, rnd.random() < 0.3, i)
            value = body
        try:
            call()
        except TurnlogError:
            pass
        except Exception as exc:  # noqa: BLE001 - the finding this fuzz exists for
            findings.append((target, value, f"{type(exc).__name__}: {exc}"[:300]))
    return n, time.perf_counter() - start, findings


if __name__ == "__main__":  # pragma: no cover
    count, seconds, found = fuzz(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
                                 int(sys.argv[2]) if len(sys.argv) > 2 else 20261123)
    print(f"{count} inputs in {seconds:.1f} s, {len(found)} untyped exceptions")
    kinds: dict[str, int] = {}
    for target, _, error in found:
        kinds[f"{target} {error[:90]}"] = kinds.get(f"{target} {error[:90]}", 0) + 1
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:40]:
        print(v, k)
