"""The provider-neutral message model: what every provider maps to and from.

A ``Message`` has a role (system, user, assistant, tool) and ordered parts.
Parts are tagged structs, so a list of them encodes to JSON that says what
each part is::

    >>> import msgspec
    >>> msg = Message(role="user", parts=(Text(text="hi"),))
    >>> msgspec.json.encode(msg)
    b'{"role":"user","parts":[{"type":"text","text":"hi"}]}'

Tool calls keep both the parsed ``arguments`` and the ``raw_arguments`` string
the model produced; when the model's arguments are not a JSON object,
``invalid`` says why and ``arguments`` is empty, so nothing is silently
replaced and the loop can tell the model.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "EXTRA",
    "USAGE_COUNTS",
    "Image",
    "Message",
    "Opaque",
    "Part",
    "Role",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "Usage",
    "render_opaque",
    "text_of",
    "tool_calls_of",
]

Role = Literal["system", "user", "assistant", "tool"]

# Parts and messages are built with ``gc=False``: frozen values that hold only strings,
# numbers and plain containers cannot form a reference cycle, and a long conversation's
# state holds hundreds of thousands of them, which the cyclic collector would otherwise
# traverse again and again while a history is folded or a snapshot decoded.


class _Part(msgspec.Struct, frozen=True, kw_only=True, gc=False, tag_field="type", omit_defaults=True):
    """Base of every message part."""


class Text(_Part, tag="text", frozen=True):
    """Plain text."""

    text: str


class Thinking(_Part, tag="thinking", frozen=True):
    """A model's reasoning. ``signature`` and ``provider`` bind it to the provider that made it.

    ``source`` names the vendor field it came in when that is not the
    provider's own (``reasoning_content``, ``reasoning``, ``reasoning_details``,
    ``extra_content`` ...); ``wire`` keeps that field's value verbatim when it
    is not plain text, so an export to the same wire sends it back unchanged.
    """

    text: str
    signature: str | None = None
    provider: str | None = None
    redacted: bool = False
    source: str | None = None
    wire: Any = None


class ToolCall(_Part, tag="tool_call", frozen=True):
    """A call the model asked for.

    ``raw_arguments`` is the argument text exactly as the model produced it;
    ``arguments`` its parsed object. ``invalid`` is set (and ``arguments``
    empty) when the text is not a JSON object, or when the call was cut off
    by the token limit; such a call is never executed.

    ``id`` is unique in its conversation (``engine.calls.assign_call_ids``);
    ``provider_id`` keeps the id the provider sent when it had to be changed
    (a provider repeated it), and is what the provider is sent back.
    """

    id: str
    name: str
    arguments: dict[str, Any] = {}
    raw_arguments: str = "{}"
    invalid: str | None = None
    provider_id: str | None = None


class ToolResult(_Part, tag="tool_result", frozen=True):
    """The answer to one tool call, as the model will see it."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


class Image(_Part, tag="image", frozen=True):
    """An image, either inline (``data`` is base64) or by ``url``."""

    media_type: str = "image/png"
    data: str | None = None
    url: str | None = None


class Opaque(_Part, tag="opaque", frozen=True):
    """Content only ``provider`` can take back: its wire JSON (``data``) kept verbatim.

    ``kind`` is the wire's type for it (``web_search_tool_result``,
    ``document``, ``file``, ``executableCode`` ...). With ``attach`` set,
    ``kind`` is a field of the previous part's wire block (``citations`` on
    an Anthropic text block) and ``data`` that field's value. ``kind``
    ``EXTRA`` holds the unknown keys of an imported message (``data`` is an
    object of them). Exports to ``provider`` send ``data`` back as it was;
    other providers get ``render_opaque``'s marked text instead.
    """

    provider: str
    kind: str
    data: Any = None
    attach: bool = False


#: ``Opaque.kind`` of an imported message's unknown keys.
EXTRA = "extra"

Part = Text | Thinking | ToolCall | ToolResult | Image | Opaque


class Message(msgspec.Struct, frozen=True, kw_only=True, gc=False, omit_defaults=True):
    """One message: a role and its ordered parts.

    ``provider``/``model`` record which model wrote an assistant message, so a
    conversation that crossed providers shows who said what.
    """

    role: Role
    parts: tuple[Part, ...] = ()
    provider: str | None = None
    model: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Token usage of one model call, in one meaning for every provider.

    ``input_tokens`` counts ALL prompt tokens, cached ones included (OpenAI's
    ``prompt_tokens``; for Anthropic, ``input_tokens + cache_read_input_tokens
    + cache_creation_input_tokens``). ``cached_input_tokens`` is the part read
    from the provider's cache, ``cache_write_tokens`` the part written to it
    and ``cache_write_1h_tokens`` the part of those written for one hour
    (Anthropic's ``ephemeral_1h``; the rest are 5-minute writes).
    ``input_audio_tokens`` and ``input_image_tokens`` are parts of
    ``input_tokens``; ``reasoning_tokens`` and ``output_audio_tokens`` parts
    of ``output_tokens``. No token is counted twice: each part is inside its
    total. ``raw`` is the wire's usage object verbatim (``None`` when none was
    sent); it is dropped when usages are added up.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_1h_tokens: int = 0
    input_audio_tokens: int = 0
    input_image_tokens: int = 0
    output_audio_tokens: int = 0
    raw: dict[str, Any] | None = None

    def __add__(self, other: Usage) -> Usage:
        # every count spelled out (a test checks it is every field but ``raw``): the fold
        # adds usages once per response, and a generic loop over the fields cost ~8x this
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
                     cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
                     reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
                     cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
                     input_audio_tokens=self.input_audio_tokens + other.input_audio_tokens,
                     input_image_tokens=self.input_image_tokens + other.input_image_tokens,
                     output_audio_tokens=self.output_audio_tokens + other.output_audio_tokens)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


#: The token counts of a ``Usage`` (every field but ``raw``), in order.
USAGE_COUNTS: tuple[str, ...] = tuple(name for name in Usage.__struct_fields__ if name != "raw")


def _elide(value: Any) -> Any:
    # inline file bytes are not readable text: their size stands in for them
    if isinstance(value, dict):
        return {k: (f"<{len(v)} characters of base64>" if k == "data" and isinstance(v, str)
                    and len(v) > 200 else _elide(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide(v) for v in value]
    return value


def render_opaque(part: Opaque) -> str | None:
    """The marked text another provider is sent instead of ``part`` (``None``: nothing).

    The one rendering of provider-bound content: ``[provider kind: JSON]``,
    with long inline base64 ``data`` replaced by its size. An ``EXTRA``
    part (a message's unknown keys) is metadata of its own wire and renders
    to nothing.

    >>> render_opaque(Opaque(provider="anthropic", kind="web_search_tool_result",
    ...                      data={"tool_use_id": "s1", "content": []}))
    '[anthropic web_search_tool_result: {"tool_use_id":"s1","content":[]}]'
    """
    if part.kind == EXTRA:
        return None
    body = msgspec.json.encode(_elide(part.data)).decode()
    return f"[{part.provider} {part.kind}: {body}]"


def text_of(parts: tuple[Part, ...] | list[Part]) -> str:
    """The concatenated text parts (thinking excluded).

    >>> text_of((Text(text="a"), ToolCall(id="1", name="t"), Text(text="b")))
    'ab'
    """
    return "".join(p.text for p in parts if type(p) is Text)


def tool_calls_of(parts: tuple[Part, ...] | list[Part]) -> list[ToolCall]:
    """The tool calls among ``parts``, in order."""
    return [p for p in parts if type(p) is ToolCall]
