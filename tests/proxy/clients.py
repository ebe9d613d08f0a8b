"""Client scripts that talk to a model API the way agents do: the official SDKs, tools
run by the client itself, the whole history resent each turn.

Each ``run_*`` plays the standard 3-turn tool conversation (``providerkit``)
against ``base_url`` and returns the final answer text; ``stream=True`` reads
every answer as a stream.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai

from tests.providerkit import KEYS, SYSTEM, TOOLS, run_tool

from turnlog.engine.model.messages import ToolCall

QUESTION = "What's the weather in Paris, and 2 + 3?"


def _run(name: str, args: dict[str, Any], call_id: str = "") -> tuple[str, bool]:
    return run_tool(ToolCall(id=call_id or "x", name=name, arguments=args))


def openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in TOOLS]


def run_openai(base_url: str, *, stream: bool = False, question: str = QUESTION,
               headers: dict[str, str] | None = None, key: str = KEYS["openai"]) -> str:
    client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0,
                           default_headers=headers or {})
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": question}]
    for _ in range(5):
        if stream:
            content, calls = "", {}
            with client.chat.completions.create(
                    model="fake-model", messages=messages, tools=openai_tools(), stream=True,
                    stream_options={"include_usage": True}) as chunks:
                for chunk in chunks:
                    for choice in chunk.choices:
                        content += choice.delta.content or ""
                        for tc in choice.delta.tool_calls or []:
                            call = calls.setdefault(tc.index, {
                                "id": tc.id, "type": "function",
                                "function": {"name": tc.function.name, "arguments": ""}})
                            call["function"]["arguments"] += tc.function.arguments or ""
            message: dict[str, Any] = {"role": "assistant", "content": content or None}
            if calls:
                message["tool_calls"] = [calls[i] for i in sorted(calls)]
        else:
            answer = client.chat.completions.create(model="fake-model", messages=messages,
                                                    tools=openai_tools())
            message = answer.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        if not message.get("tool_calls"):
            return message.get("content") or ""
        for tc in message["tool_calls"]:
            out, _ = _run(tc["function"]["name"], json.loads(tc["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
    raise AssertionError("the conversation did not end")


def run_anthropic(base_url: str, *, stream: bool = False, question: str = QUESTION,
                  key: str = KEYS["anthropic"]) -> str:
    client = anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0)
    tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
             for t in TOOLS]
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(5):
        kw = dict(model="fake-model", max_tokens=512, system=SYSTEM, messages=messages,
                  tools=tools)
        if stream:
            with client.messages.stream(**kw) as events:
                answer = events.get_final_message()
        else:
            answer = client.messages.create(**kw)
        blocks = [b.model_dump(exclude_none=True) for b in answer.content]
        messages.append({"role": "assistant", "content": blocks})
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if not uses:
            return "".join(b.get("text", "") for b in blocks if b["type"] == "text")
        results = []
        for use in uses:
            out, ok = _run(use["name"], use["input"])
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": out,
                            "is_error": not ok})
        messages.append({"role": "user", "content": results})
    raise AssertionError("the conversation did not end")


def run_gemini(base_url: str, *, stream: bool = False, question: str = QUESTION,
               key: str = KEYS["gemini"]) -> str:
    """Gemini over plain HTTP (its SDK is not a dependency), as the REST API documents."""
    tools = [{"functionDeclarations": [{"name": t.name, "description": t.description,
                                        "parameters": t.parameters} for t in TOOLS]}]
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": question}]}]
    with httpx.Client(base_url=base_url, headers={"x-goog-api-key": key}) as http:
        for _ in range(5):
            body = {"contents": contents, "tools": tools,
                    "systemInstruction": {"parts": [{"text": SYSTEM}]}}
            if stream:
                parts: list[dict[str, Any]] = []
                with http.stream("POST", "/v1beta/models/fake-model:streamGenerateContent",
                                 params={"alt": "sse"}, json=body) as answer:
                    answer.raise_for_status()
                    for line in answer.iter_lines():
                        if line.startswith("data:"):
                            for part in json.loads(line[5:])["candidates"][0]["content"]["parts"]:
                                if "text" in part and parts and "text" in parts[-1] \
                                        and part.get("thought") == parts[-1].get("thought"):
                                    parts[-1] = {**parts[-1], "text": parts[-1]["text"] + part["text"]}
                                else:
                                    parts.append(part)
            else:
                answer = http.post("/v1beta/models/fake-model:generateContent", json=body)
                answer.raise_for_status()
                parts = answer.json()["candidates"][0]["content"]["parts"]
            contents.append({"role": "model", "parts": parts})
            calls = [p["functionCall"] for p in parts if "functionCall" in p]
            if not calls:
                return "".join(p.get("text", "") for p in parts if not p.get("thought"))
            contents.append({"role": "user", "parts": [
                {"functionResponse": {"name": c["name"],
                                      "response": {"result": _run(c["name"], c["args"])[0]}}}
                for c in calls]})
    raise AssertionError("the conversation did not end")


def run_responses(base_url: str, *, stream: bool = False, question: str = QUESTION,
                  key: str = KEYS["openai-responses"]) -> str:
    client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0)
    tools = [{"type": "function", "name": t.name, "description": t.description,
              "parameters": t.parameters, "strict": False} for t in TOOLS]
    items: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(5):
        kw = dict(model="fake-model", instructions=SYSTEM, input=items, tools=tools, store=False)
        if stream:
            with client.responses.stream(**kw) as events:
                answer = events.get_final_response()
        else:
            answer = client.responses.create(**kw)
        output = [o.model_dump(exclude_none=True) for o in answer.output]
        items += output
        calls = [o for o in output if o["type"] == "function_call"]
        if not calls:
            return answer.output_text
        for call in calls:
            out, _ = _run(call["name"], json.loads(call["arguments"]))
            items.append({"type": "function_call_output", "call_id": call["call_id"],
                          "output": out})
    raise AssertionError("the conversation did not end")


RUNNERS = {"openai": run_openai, "anthropic": run_anthropic, "gemini": run_gemini,
           "openai-responses": run_responses}
