"""A second opinion on request bodies: the SDKs' own request types, via pydantic.

``fakerules`` is written by the same hands as the mappings, so a mistake can
hide in both. ``sdk_problem`` validates a body against the request types the
official SDKs declare (``anthropic.types.MessageCreateParams``,
``openai.types.chat.CompletionCreateParams``, ``openai.types.responses.
ResponseCreateParams``, the non-streaming variants) with a pydantic
``TypeAdapter``. The SDKs type list fields as ``Iterable``, which pydantic
validates lazily, so the validated value is walked to the end. Gemini has no
SDK among turnlog's dependencies; its rules live in ``fakerules`` alone.
Anthropic bodies are checked against the beta request type, a superset of
the stable one: server tool blocks (``mcp_tool_use``, ``container_upload``
...) are valid Messages API content that only the beta types declare.
Bedrock's Converse bodies are checked against botocore's service model
(``bedrock-runtime``'s ``Converse``/``ConverseStream`` input shapes) by
botocore's own ``ParamValidator`` (``bedrock_problem``), the check boto3
makes before it sends.
"""

from __future__ import annotations

import threading

from functools import cache
from typing import Any

from anthropic.types.beta import message_create_params
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params
from pydantic import TypeAdapter, ValidationError

__all__ = ["SDK_TYPES", "bedrock_problem", "sdk_problem"]

SDK_TYPES: dict[str, Any] = {
    "anthropic": message_create_params.MessageCreateParamsNonStreaming,
    "openai": completion_create_params.CompletionCreateParamsNonStreaming,
    "openai-responses": response_create_params.ResponseCreateParamsNonStreaming,
    "anthropic:stream": message_create_params.MessageCreateParamsStreaming,
    "openai:stream": completion_create_params.CompletionCreateParamsStreaming,
    "openai-responses:stream": response_create_params.ResponseCreateParamsStreaming,
}


@cache
def _adapter(provider: str) -> TypeAdapter[Any]:
    return TypeAdapter(SDK_TYPES[provider])


_VALIDATING = threading.Lock()


def _drain(value: Any) -> None:
    """Walk ``value`` to the end, so every lazily validated ``Iterable`` is checked."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not isinstance(item, (str, bytes)) and hasattr(item, "__next__"):
            stack.extend(list(item))


@cache
def _bedrock_shapes() -> Any:
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def bedrock_problem(params: Any, operation: str = "Converse", shape: str | None = None) -> str | None:
    """The first error botocore's validator finds in Converse ``params`` (``modelId`` included),
    or ``None``. ``shape`` validates against one named shape instead (``Messages`` ...)."""
    from botocore.validate import ParamValidator

    model = _bedrock_shapes()
    if shape is not None:  # a named shape: wrap it as the member of a one-member structure
        params = {"value": params}
        target = model.operation_model(operation).input_shape
        target = type(target)("Wrapper", {"type": "structure", "members": {"value": {"shape": shape}}},
                              target._shape_resolver)
    else:
        target = model.operation_model(operation).input_shape
    report = ParamValidator().validate(params, target)
    if report.has_errors():
        return f"botocore {operation} input: {report.generate_report().splitlines()[0]}"
    return None


def sdk_problem(provider: str, body: Any) -> str | None:
    """The first error the SDK's request type finds in ``body``, or ``None`` (no SDK: ``None``)."""
    if provider in ("bedrock", "bedrock:stream"):  # body carries modelId, from the path
        return bedrock_problem(body, "ConverseStream" if provider.endswith("stream") else "Converse")
    if provider not in SDK_TYPES:
        return None
    if isinstance(body, dict) and body.get("stream") is True:  # the streaming twin of the type
        provider += ":stream"
    try:
        with _VALIDATING:  # pydantic-core's lazy iterables panic when validated from two threads
            _drain(_adapter(provider).validate_python(body))
    except ValidationError as exc:
        first = _meant(exc.errors())
        where = ".".join(str(p) for p in first["loc"])
        return f"SDK request type {SDK_TYPES[provider].__name__}: {where}: {first['msg']}"
    return None


def _meant(errors: list[Any]) -> Any:
    """The error of the union member the body meant: not one whose ``type``/``role`` differs."""
    wrong = [e["loc"][:-1] for e in errors
             if e["type"] == "literal_error" and e["loc"] and e["loc"][-1] in ("type", "role")]
    meant = [e for e in errors if not any(e["loc"][:len(w)] == w for w in wrong)] or errors
    return max(meant, key=lambda e: len(e["loc"]))
