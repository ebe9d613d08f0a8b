"""Journals for the viewer's tests and bench: the demo, a fork, a provider swap, a recorded
replay run, a hostile (injection) transcript, and large journals built fast."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from turnlog.engine.demo import DEMO_PROMPT, DEMO_SCRIPT, demo_tools
from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal
from turnlog.replay import fork, replay_all, swap

#: Markup that would run if any page or report failed to escape it.
HOSTILE = ("<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"
           "<a href=\"javascript:window.__pwned=3\">click</a></script><script>window.__pwned=4"
           "</script>\"' onmouseover=window.__pwned=5 x=")
HOSTILE_ID = "x\"><script>window.__pwned=6</script></script><img src=x onerror=window.__pwned=7>"
#: A sentence the browser test finds on the hostile page, proving it rendered as text.
VISIBLE = "<script>window.__pwned=1</script>"


@tool(effect="read_only")
def echo(text: str) -> dict:
    """Echo the text back.

    Args:
        text: anything
    """
    return {"echo": text}


def clock(start: datetime = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)):
    """A clock that ticks one second per call."""
    now = [start]

    def tick() -> datetime:
        now[0] += timedelta(seconds=1)
        return now[0]

    return tick


def build(path: Path) -> dict[str, str]:
    """The viewer's test journal; returns the ids of its conversations by role."""
    with Journal(path, extensions=EXTENSIONS) as journal:
        Loop(journal, ScriptedProvider(DEMO_SCRIPT, model="scripted-demo"), demo_tools(),
             clock=clock()).start(DEMO_PROMPT, conversation_id="demo", model="scripted-demo")
        fork(journal, "demo", 6, new_id="demo-fork")
        other = {"turns": [{"text": "Checking Paris only.",
                            "tool_calls": [{"name": "get_weather",
                                            "arguments": {"city": "Paris"}}]},
                           {"text": "Paris is sunny."}]}
        swap(journal, "demo", ScriptedProvider(other, model="other-model"), new_id="demo-swap")
        hostile = {"turns": [{"text": HOSTILE, "tool_calls": [
            {"name": "echo", "arguments": {"text": HOSTILE}},
            {"name": "echo", "arguments": {"text": "x", HOSTILE: "key"}}]},
            {"text": "done " + HOSTILE}]}
        Loop(journal, ScriptedProvider(hostile, model=HOSTILE), [echo],
             clock=clock(datetime(2026, 1, 2, tzinfo=UTC))).start(
            HOSTILE, conversation_id=HOSTILE_ID, model=HOSTILE)
        replay_all(journal, record=True)
    return {"demo": "demo", "fork": "demo-fork", "swap": "demo-swap", "hostile": HOSTILE_ID}
