"""Testing support for turnlog users: hypothesis strategies and a replay-every-run pytest plugin.

Strategies (need ``hypothesis``; importing them without it raises an
``ImportError`` that says how to install it)::

    from hypothesis import given
    from replay.testing import conversations, tool_calls, arguments

    @given(conversations(policy=DuplicatePolicy(rule="window", window=3)))
    def test_my_rule(events):
        state = fold(events)                  # every generated history is valid
        ...

``conversations()`` draws complete event histories the lifecycle accepts,
made the way the engine makes them: every call a duplicate policy refuses is
recorded as a ``tool_call_rejected`` with the engine's correction text, the
others run (``tool_started`` + ``tool_completed``, sometimes failing).

Replaying recorded runs in CI: add the plugin and point it at journals::

    # conftest.py
    pytest_plugins = ["replay.testing"]

    # test_recorded.py
    def test_recorded_run_replays(turnlog_conversation):
        turnlog_conversation.assert_replays()

    $ pytest --turnlog-journal runs.db

Each conversation in each journal becomes one test (id ``<file>::<conversation
id>``); ``assert_replays()`` re-runs it with the current code, recorded model
responses and recorded tool results, and fails with the divergence report.
``replay_cases(path)`` gives the same cases for ``pytest.mark.parametrize``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from engine.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationStarted,
    DuplicatePolicy,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from engine.messages import Text, ToolCall, Usage
from engine.state import StateBuilder
from engine.texts import duplicate_message, result_content
from journal import Journal

__all__ = [
    "RecordedConversation",
    "arguments",
    "conversations",
    "json_values",
    "pytest_addoption",
    "pytest_generate_tests",
    "replay_cases",
    "tool_calls",
]

_HINT = ("replay.testing's strategies need hypothesis: pip install hypothesis "
         "(or pip install 'turnlog[test]')")


def _st():
    try:
        from hypothesis import strategies
    except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
        raise ImportError(_HINT) from exc
    return strategies


_NAMES = r"[a-z][a-z0-9_]{0,11}"


def json_values(max_leaves: int = 8):
    """Any JSON value: null, booleans, integers, finite floats, text, lists and objects."""
    st = _st()
    scalars = (st.none() | st.booleans() | st.integers(-(2**53), 2**53)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=16))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                        max_leaves=max_leaves)


def arguments(max_size: int = 4):
    """Tool-argument dictionaries: identifier-like keys mapped to JSON values."""
    st = _st()
    return st.dictionaries(st.from_regex(_NAMES, fullmatch=True), json_values(), max_size=max_size)


def tool_calls(names: Any = None, *, ids: Any = None):
    """``ToolCall`` parts with valid JSON-object arguments (``raw_arguments`` matching).

    ``names`` is a strategy for tool names (default: identifier-like names).
    """
    import json

    st = _st()
    names = names if names is not None else st.from_regex(_NAMES, fullmatch=True)
    ids = ids if ids is not None else st.from_regex(r"call_[A-Za-z0-9]{1,12}", fullmatch=True)

    def build(call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
        return ToolCall(id=call_id, name=name, arguments=args,
                        raw_arguments=json.dumps(args, ensure_ascii=False))

    return st.builds(build, ids, names, arguments())


_DEFAULT_TOOLS = (ToolSpec(name="search", effect="read_only"), ToolSpec(name="add"),
                  ToolSpec(name="note", handler=True))


def conversations(*, conversation_id: str | None = None, tools: tuple[ToolSpec, ...] = _DEFAULT_TOOLS,
                  policy: DuplicatePolicy | None = None, max_turns: int = 5,
                  provider: str = "scripted", model: str = "scripted"):
    """Valid conversations: a list of events that ``fold`` accepts, from start to an end.

    Chat conversations may hold several runs (a user message after the
    previous run ended); each run ends completed, failed (``model_failed`` +
    ``conversation_failed``), or at its turn limit. Tool calls draw from
    ``tools`` with small argument dictionaries, so repeats (and duplicate
    refusals under ``policy``, default: drawn) are common. Calls refused by
    the policy are recorded exactly as the engine's loop records them.
    """
    st = _st()
    small_args = st.dictionaries(st.sampled_from(["q", "a", "b"]),
                                 st.integers(0, 2) | st.sampled_from(["x", "y"]), max_size=2)
    policies = st.builds(DuplicatePolicy,
                         rule=st.sampled_from(["previous", "window", "anywhere", "off"]),
                         window=st.integers(1, 3))

    @st.composite
    def draw_conversation(draw) -> list[Any]:
        cid = conversation_id or draw(st.from_regex(r"c[a-z0-9]{1,8}", fullmatch=True))
        mode = draw(st.sampled_from(["chat", "pipeline"]))
        started = ConversationStarted(
            conversation_id=cid, provider=provider, model=model, mode=mode, max_turns=max_turns,
            system=draw(st.text(max_size=20)), tools=tools,
            duplicate_policy=policy if policy is not None else draw(policies))
        b = _Recorder(started)
        runs = draw(st.integers(1, 3)) if mode == "chat" else 1
        for _ in range(runs):
            b.add(UserMessage.of(draw(st.text(min_size=1, max_size=20))))
            ending = draw(st.sampled_from(["completed", "completed", "failed", "limit"]))
            turns = max_turns if ending == "limit" else draw(st.integers(1, max_turns))
            for t in range(turns):
                if ending == "failed" and t == turns - 1:
                    b.add(ModelRequested(turn=b.turn + 1, digest="0" * 64, provider=provider,
                                         model=model))
                    b.add(ModelFailed(turn=b.turn + 1, error_type="ServerError",
                                      message="fake outage", provider=provider, model=model))
                    b.add(ConversationFailed(error="ServerError: fake outage",
                                             error_type="ServerError"))
                    break
                last = t == turns - 1 and ending == "completed"
                calls = [] if last else draw(st.lists(
                    st.tuples(st.sampled_from([s.name for s in tools]), small_args),
                    min_size=1, max_size=3))
                b.turn_with(calls, draw(st.text(max_size=20)), draw(st.integers(0, 500)),
                            draw(st.booleans()))
            if ending == "limit":
                b.add(TurnLimitReached(turn_count=b.builder.turn_count - b.builder.run_start_turn, max_turns=max_turns,
                                       warning=f"max turns ({max_turns}) reached"))
            elif ending == "completed":
                b.add(ConversationCompleted(final_content=b.builder.final_content))
        return b.events

    return draw_conversation()


class _Recorder:
    """Builds events the way the loop records them, checking each against the lifecycle."""

    def __init__(self, started: ConversationStarted) -> None:
        self.started = started
        self.builder = StateBuilder()
        self.events: list[Any] = []
        self.turn = 0
        self.add(started)

    def add(self, event: Any) -> None:
        self.builder.apply(event)
        self.events.append(event)

    def turn_with(self, calls: list[tuple[str, dict[str, Any]]], text: str, tokens: int,
                  fail_first: bool) -> None:
        s = self.started
        self.turn += 1
        self.add(ModelRequested(turn=self.turn, digest="0" * 64, provider=s.provider, model=s.model))
        parts: list[Any] = [Text(text=text)] if text else []
        parts += [ToolCall(id=f"call_{self.turn}_{i}", name=n, arguments=a)
                  for i, (n, a) in enumerate(calls, start=1)]
        self.add(ModelResponded(turn=self.turn, parts=tuple(parts),
                                stop_reason="tool_use" if calls else "end_turn",
                                usage=Usage(input_tokens=tokens, output_tokens=tokens // 4 + 1),
                                provider=s.provider, model=s.model))
        specs = {t.name: t for t in s.tools}
        for i, part in enumerate(p for p in parts if type(p) is ToolCall):
            if self.builder.is_duplicate(part.name, part.arguments) and not (
                    s.duplicate_policy.observe_only):
                self.add(ToolCallRejected(call_id=part.id, name=part.name, reason="duplicate",
                                          content=duplicate_message(part.name, s.mode),
                                          arguments=part.arguments))
                continue
            ok = not (fail_first and i == 0)
            self.add(ToolStarted(call_id=part.id, name=part.name, arguments=part.arguments))
            data = {"echo": part.arguments} if ok else None
            self.add(ToolCompleted(
                call_id=part.id, name=part.name, success=ok, data=data,
                error=None if ok else "fake failure",
                content=result_content(part.name, success=ok, data=data,
                                       error=None if ok else "fake failure",
                                       handler=specs[part.name].handler)))


# --- replaying recorded runs as tests ------------------------------------------------


@dataclass(frozen=True)
class RecordedConversation:
    """One recorded conversation to replay: the journal file and the conversation id."""

    path: str
    conversation_id: str

    def assert_replays(self, **kw: Any) -> None:
        """Re-run it deterministically; fail the test with the divergence report if it differs."""
        import pytest

        from .deterministic import replay

        with Journal(self.path) as journal:
            result = replay(journal, self.conversation_id, collect=True, **kw)
        if result.divergence is not None:
            pytest.fail(result.divergence.render(), pytrace=False)

    def __str__(self) -> str:
        return f"{os.path.basename(self.path)}::{self.conversation_id}"


def replay_cases(*paths: str | os.PathLike[str]) -> list[Any]:
    """One ``pytest.param(RecordedConversation)`` per conversation in each journal file.

    Use with ``@pytest.mark.parametrize("recorded", replay_cases("runs.db"))``.
    """
    import pytest

    cases = []
    for path in paths:
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no turnlog journal at {path!r}")
        with Journal(path) as journal:
            ids = sorted(info.stream_id for info in journal.streams())
        for cid in ids:
            case = RecordedConversation(path, cid)
            cases.append(pytest.param(case, id=str(case)))
    return cases


def pytest_addoption(parser: Any) -> None:
    """``--turnlog-journal PATH`` (repeatable) and the ``turnlog_journals`` ini list."""
    parser.addoption("--turnlog-journal", action="append", default=[], metavar="PATH",
                     help="a turnlog journal whose conversations the turnlog_conversation "
                          "fixture replays, one test each")
    parser.addini("turnlog_journals", type="pathlist", default=[],
                  help="turnlog journals to replay (see --turnlog-journal)")


def pytest_generate_tests(metafunc: Any) -> None:
    """Parametrise every test that asks for ``turnlog_conversation`` over the journals."""
    if "turnlog_conversation" not in metafunc.fixturenames:
        return
    paths = [*metafunc.config.getoption("turnlog_journal"),
             *map(str, metafunc.config.getini("turnlog_journals"))]
    metafunc.parametrize("turnlog_conversation", replay_cases(*paths))
