"""The demo toolset (``--tools demo``) and the offline demo conversation (``turnlog demo``).

Deterministic and offline: ``get_weather`` knows a few cities (an unknown one
is a tool failure), ``add`` adds, ``get_current_time`` reads the engine
clock, ``append_note`` appends a line to a file (a side-effecting handler
tool), ``wait`` sleeps.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from turnlog.engine.tools.registry import ToolRegistry, tool

__all__ = ["DEMO_PROMPT", "DEMO_SCRIPT", "WEATHER", "demo_tools"]

#: The forecasts ``get_weather`` knows.
WEATHER: dict[str, dict[str, Any]] = {
    "paris": {"city": "Paris", "forecast": "sunny", "temp_c": 21},
    "london": {"city": "London", "forecast": "light rain", "temp_c": 14},
    "tokyo": {"city": "Tokyo", "forecast": "cloudy", "temp_c": 18},
    "new york": {"city": "New York", "forecast": "windy", "temp_c": 16},
}


@tool(effect="read_only")
def get_weather(city: str) -> dict[str, Any]:
    """Get today's forecast for a city.

    Args:
        city: the city's name, e.g. Paris
    """
    found = WEATHER.get(city.strip().lower())
    if found is None:
        raise LookupError(f"no forecast for {city!r}; known cities: "
                          + ", ".join(v["city"] for v in WEATHER.values()))
    return dict(found)


@tool(effect="read_only")
def add(a: float, b: float) -> dict[str, float]:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return {"sum": a + b}


@tool(effect="read_only")
def get_current_time(now: Any = None) -> dict[str, str]:
    """Get the current date and time (UTC)."""
    return {"now": now.isoformat() if now is not None else ""}


@tool(handler=True)
def append_note(path: str, text: str) -> dict[str, int]:
    """Append one line of text to a notes file.

    Args:
        path: the file to append to
        text: the line to append
    """
    with open(path, "a", encoding="utf-8") as f:
        f.write(text.replace("\n", " ") + "\n")
    return {"lines": sum(1 for _ in Path(path).open(encoding="utf-8"))}


@tool(effect="idempotent")
def wait(seconds: float) -> dict[str, float]:
    """Wait a number of seconds, then report how long.

    Args:
        seconds: how long to wait (at most 60)
    """
    if not 0 <= seconds <= 60:
        raise ValueError("seconds must be between 0 and 60")
    time.sleep(seconds)
    return {"slept": seconds}


def demo_tools() -> ToolRegistry:
    """A fresh registry with the five demo tools."""
    return ToolRegistry([get_weather, add, get_current_time, append_note, wait])


DEMO_PROMPT = "What's the weather in Paris and in Atlantis, and what is 2 + 3?"

#: The scripted model of ``turnlog demo``: a failing call, a refused duplicate, a final answer.
DEMO_SCRIPT: dict[str, Any] = {"turns": [
    {"text": "Let me check the weather and the time.",
     "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_current_time", "arguments": {}}]},
    {"text": "Now Atlantis.", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]},
    {"text": "Atlantis has no forecast. Now the sum.",
     "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
    {"text": "Let me double-check that sum.",
     "tool_calls": [{"name": "add", "arguments": {"b": 3, "a": 2.0}}]},
    {"text": "Paris is sunny at 21 °C, Atlantis has no forecast (it is not a real city), "
             "and 2 + 3 = 5."},
]}
