"""The conversation model, free of I/O: events, messages, the lifecycle and the reducer.

- ``events``: the event vocabulary, one frozen struct per fact a conversation records;
- ``messages``: the provider-neutral message model every wire maps to and from;
- ``canonical``: canonical JSON, so hashes and comparisons are stable;
- ``machine``: the lifecycle, which event may follow which;
- ``state``: conversation state and the pure reducer that folds events into it;
- ``snapshots``: the folded state saved at a conversation's head;
- ``conversation``: a conversation bound to a journal, the only way engine code appends;
- ``nesting``: one nesting limit for JSON that comes from outside.

The main names are re-exported here and by :mod:`turnlog.engine`::

    from turnlog.engine.model import ConversationState, Message, fold
"""

from turnlog._lazy import export

#: What this package re-exports, by the module that defines it (imported on first use).
_EXPORTS = {
    ".canonical": ("canonical_json", "digest"),
    ".conversation": ("Conversation", "load_state"),
    ".events": ("Event", "decode_event", "encode_event"),
    ".machine": ("Lifecycle",),
    ".messages": ("Image", "Message", "Text", "Thinking", "ToolCall", "ToolResult", "Usage"),
    ".state": ("ConversationState", "StateBuilder", "fold", "reduce"),
}

__all__ = export(__name__, _EXPORTS)
