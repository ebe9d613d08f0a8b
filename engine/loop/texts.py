"""The reference's tool-message texts, byte for byte (ConversationManager).

These are what the model reads as tool results and correction messages, and
what the Data Machine text projection renders::

    >>> display_name("google_search")
    'Google Search'
    >>> success_message("twitter_publish")
    'SUCCESS: Twitter Publish completed successfully. The requested operation has been finished as requested.'
    >>> tool_failed_message("twitter_publish", "Invalid credentials")
    'TOOL FAILED: twitter_publish execution failed - Invalid credentials'
    >>> failure_message("google_search", "API quota exceeded")
    'TOOL FAILED: Google Search execution failed - API quota exceeded. Please review the error and adjust your approach if needed.'

JSON data in results is compact (``,`` and ``:`` separators), keeps non-ASCII
characters as they are and does not escape ``/``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from turnlog.engine.model.canonical import canonical_json
from turnlog.engine.errors import InvalidEventError

__all__ = [
    "UNANSWERED",
    "display_name",
    "duplicate_message",
    "failure_message",
    "json_data",
    "readable_result",
    "refusal_message",
    "result_content",
    "success_message",
    "tool_failed_message",
]


#: The result a request carries for a tool call the history holds no result for (every API
#: refuses an unanswered call). It is a placeholder, not a result: an import that meets it
#: leaves a trailing call pending and records an earlier one as ``unrecorded``.
UNANSWERED = "Error: no result was recorded for this tool call."


def display_name(tool_name: str) -> str:
    """``google_search`` -> ``Google Search`` (underscores to spaces, words capitalised)."""
    return " ".join(w[:1].upper() + w[1:] for w in tool_name.replace("_", " ").split(" "))


def success_message(tool_name: str, display: str | None = None) -> str:
    """The default success text (the reference's generateSuccessMessage)."""
    return (f"SUCCESS: {display or display_name(tool_name)} completed successfully. "
            "The requested operation has been finished as requested.")


def tool_failed_message(tool_name: str, error: str) -> str:
    """The failure text of a tool result (generateSuccessMessage's failure branch: raw name)."""
    return f"TOOL FAILED: {tool_name} execution failed - {error}"


def failure_message(tool_name: str, error: str, display: str | None = None) -> str:
    """The standalone failure text with guidance (the reference's generateFailureMessage)."""
    return (f"TOOL FAILED: {display or display_name(tool_name)} execution failed - {error}. "
            "Please review the error and adjust your approach if needed.")


def duplicate_message(tool_name: str, mode: str = "chat", display: str | None = None) -> str:
    """The correction sent for a refused duplicate call, shaped per mode.

    In pipeline mode the model is also told to finish the step with its
    handler tool rather than stop (the reference's #1441).

    >>> duplicate_message("google_search")
    'You just called the Google Search tool with the exact same parameters as your previous action. Please try a different approach or use different parameters instead.'
    """
    text = (f"You just called the {display or display_name(tool_name)} tool with the exact same "
            "parameters as your previous action. Please try a different approach or use different "
            "parameters instead.")
    if mode == "pipeline":
        text += (" If you already have what this step needs, call the handler tool for the next "
                 "step to complete it instead of ending the conversation.")
    return text


def json_data(data: Any) -> str:
    """Compact JSON for tool data in messages."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def result_content(tool_name: str, *, success: bool, data: Any = None, error: str | None = None,
                   handler: bool = False, message: str | None = None,
                   display: str | None = None) -> str:
    """What the model is sent as a tool's result (formatToolResultMessage without its prefix).

    A success is ``message`` (default: the success text) followed, for a
    non-handler tool with data, by a blank line and the JSON data; a failure
    is the TOOL FAILED text.

    >>> result_content("add", success=True, data={"sum": 5})
    'SUCCESS: Add completed successfully. The requested operation has been finished as requested.\\n\\n{"sum":5}'
    """
    if not success:
        return tool_failed_message(tool_name, error or "unknown error")
    text = message if message is not None else success_message(tool_name, display)
    if not handler and data is not None:
        text += "\n\n" + json_data(data)
    return text


#: The default success text (``success_message``) of any tool, at the start of a result.
_SUCCESS = re.compile(r"SUCCESS: [^\n]*? completed successfully\. "
                      r"The requested operation has been finished as requested\.(?:\n\n|$)")


def readable_result(content: str) -> str:
    """A tool result as people read it (``show``, the viewer, reports, diffs): the model's
    text without the default success sentence, which says nothing the status does not.

    The journal and every export keep the exact text the model was sent.

    >>> readable_result(result_content("add", success=True, data={"sum": 5}))
    '{"sum":5}'
    >>> readable_result(success_message("publish"))
    ''
    >>> readable_result("TOOL FAILED: add execution failed - boom")
    'TOOL FAILED: add execution failed - boom'
    """
    found = _SUCCESS.match(content)
    return content[found.end():] if found else content


def _arguments_text(arguments: Any) -> str:
    try:
        return canonical_json(arguments)
    except InvalidEventError:
        return repr(arguments)


def refusal_message(reason: str, tool_name: str, details: dict[str, Any] | None = None, *,
                    mode: str = "chat", display: str | None = None,
                    arguments: Any = None) -> str:
    """The correction the model reads for a refused call, rendered from its reason and details.

    ``reason`` is a ``RejectReason`` code; ``details`` its data (see
    ``engine.events.RejectReason``). The one place these sentences are written.

    >>> refusal_message("disabled", "publish", {"why": "no credentials"})
    'TOOL FAILED: publish execution failed - tool is disabled: no credentials'
    """
    d = details or {}
    if reason == "duplicate":
        return duplicate_message(tool_name, mode, display)
    if reason == "unrecorded":
        return (f"Tool call refused: this conversation replays recorded conversation "
                f"{d.get('source', '')!r} and serves tool results only from its recording, which "
                f"has no {tool_name} call with these arguments ({_arguments_text(arguments or {})})."
                " The tool was not run; answer without it or use a call the recording has.")
    if reason == "refused":
        return (f"Tool call refused: this replay runs with tools disabled, so {tool_name} was "
                "not run. Answer without tools.")
    if reason == "denied":
        return str(d.get("why") or f"denied: {tool_name} was not run")
    if reason == "halted":
        why = (f"not run: the run is halted after {d.get('refusals', 0)} refused duplicate "
               "tool call(s)")
    elif reason == "cut_off":
        why = ("the call was cut off by the output token limit (max_tokens); call it again with "
               "shorter arguments")
    elif reason == "invalid_arguments" and d.get("stage") == "schema":
        why = (f"invalid arguments: {d.get('problem', '')}. Call it again with arguments that "
               "match its schema")
    elif reason == "invalid_arguments":
        why = f"invalid arguments: {d.get('problem', '')}"
    elif reason == "unknown":
        why = (f"unknown tool {tool_name!r}; available tools: "
               f"{', '.join(d.get('available', ())) or 'none'}")
    elif reason == "disabled":
        why = f"tool is disabled: {d.get('why', '')}"
    else:
        why = d.get("why") or f"not run ({reason})"
    return tool_failed_message(tool_name, why)
