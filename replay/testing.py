"""Testing support for turnlog users: hypothesis strategies and a replay-every-run pytest plugin.

Strategies (need ``hypothesis``; importing them without it raises an
``ImportError`` that says how to install it)::

    from hypothesis import given
    from turnlog.replay.testing import conversations, tool_calls, arguments

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
    pytest_plugins = ["turnlog.replay.testing"]

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
from typing import TYPE_CHECKING, Any

from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationFailed,
    ConversationHalted,
    ConversationStarted,
    DirectiveLayer,
    DuplicatePolicy,
    ForkRef,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    RejectReason,
    ReplayRef,
    ToolCallRejected,
    ToolCompleted,
    ToolSpec,
    ToolStarted,
    TurnLimitReached,
    UserMessage,
)
from turnlog.engine.tools.calls import assign_call_ids
from turnlog.engine.model.messages import Image, Text, Thinking, ToolCall, Usage
from turnlog.engine.model.state import StateBuilder
from turnlog.engine.loop.texts import duplicate_message, result_content
from turnlog.journal import Journal

if TYPE_CHECKING:
    from .deterministic import ReplayResult

__all__ = [
    "RecordedConversation",
    "arguments",
    "conversations",
    "events",
    "identifiers",
    "json_values",
    "pytest_addoption",
    "pytest_generate_tests",
    "replay_cases",
    "tool_call_lists",
    "tool_calls",
]

_HINT = ("turnlog.replay.testing's strategies need hypothesis: pip install hypothesis "
         "(or pip install -e '.[testing]' in turnlog's checkout)")


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


def identifiers():
    """Identifier-like names (``[a-z][a-z0-9_]{0,11}``): tool names, argument keys."""
    return _st().from_regex(_NAMES, fullmatch=True)


#: provider call ids as servers send them, from a small pool so repeats are common
_PROVIDER_IDS = ("x", "x_2", "call_0", "call_1", "toolu_01", "")


def tool_call_lists(names: Any = None, *, min_size: int = 0, max_size: int = 4):
    """The calls of one response: several calls whose provider ids often repeat.

    Ids come from a small pool (``"x"``, ``"x_2"``, ``"call_0"``, ...) as
    providers send them (servers number calls from 0 every turn, some repeat
    an id within a response); ``engine.calls.assign_call_ids`` makes them
    unique, as the loop and the importers do.
    """
    st = _st()
    return st.lists(tool_calls(names, ids=st.sampled_from(_PROVIDER_IDS)), min_size=min_size,
                    max_size=max_size)


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


def events():
    """Any single event with arbitrary field values (not a valid history: see ``conversations``).

    For codec and schema laws: every event type, every part kind, tool calls
    with any raw or invalid argument text.
    """
    st = _st()
    small = st.integers(0, 10_000)
    floats = st.floats(allow_nan=False, allow_infinity=False)
    ids, names = st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True), identifiers()
    args, values = arguments(), json_values()
    calls = st.builds(ToolCall, id=ids, name=names, arguments=args,
                      raw_arguments=st.text(max_size=30), invalid=st.none() | st.text(max_size=10),
                      provider_id=st.none() | ids)
    parts = st.one_of(
        st.builds(Text, text=st.text(max_size=40)),
        st.builds(Thinking, text=st.text(max_size=40), signature=st.none() | st.text(max_size=10),
                  provider=st.none() | names),
        calls,
        st.builds(Image, media_type=st.sampled_from(["image/png", "image/jpeg"]),
                  data=st.none() | st.text(alphabet="ABCDEF0123456789", max_size=20)))
    usage = st.builds(Usage, input_tokens=small, output_tokens=small, cached_input_tokens=small,
                      cache_write_tokens=small, reasoning_tokens=small)
    specs = st.builds(ToolSpec, name=names, description=st.text(max_size=30),
                      handler=st.booleans(),
                      effect=st.sampled_from(["read_only", "idempotent", "side_effecting"]))
    policies = st.builds(
        DuplicatePolicy, rule=st.sampled_from(["previous", "window", "anywhere", "off"]),
        window=st.integers(1, 5), exempt=st.lists(names, max_size=2).map(tuple),
        observe_only=st.booleans(), max_refusals=st.none() | st.integers(1, 5))
    replaced = st.lists(names, max_size=2).map(tuple)
    return st.one_of(
        st.builds(ConversationStarted, conversation_id=ids, provider=names, model=names,
                  mode=st.sampled_from(["chat", "pipeline"]), max_turns=st.integers(1, 50),
                  system=st.text(max_size=40),
                  directives=st.lists(st.builds(DirectiveLayer, layer=names, name=names,
                                                text=st.text(max_size=20)), max_size=2).map(tuple),
                  tools=st.lists(specs, max_size=3).map(tuple), duplicate_policy=policies,
                  parameters=args, metadata=args,
                  fork=st.none() | st.builds(ForkRef, conversation_id=ids, seq=small, hash=ids),
                  replay_of=st.none() | st.builds(ReplayRef, conversation_id=ids)),
        st.builds(UserMessage, parts=st.lists(parts, max_size=3).map(tuple),
                  timestamp=st.none() | st.text(max_size=25), replaced=replaced),
        st.builds(ModelRequested, turn=small, digest=ids, provider=names, model=names,
                  parameters=args),
        st.builds(ModelResponded, turn=small, parts=st.lists(parts, max_size=4).map(tuple),
                  stop_reason=st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal",
                                               "other"]),
                  usage=usage, provider=names, model=names, response_id=st.none() | ids,
                  raw=values, latency_ms=st.none() | floats,
                  source=st.sampled_from(["provider", "imported", "runner"]), replaced=replaced),
        st.builds(ModelFailed, turn=small, error_type=names, message=st.text(max_size=30),
                  status=st.none() | st.integers(100, 599), retryable=st.booleans()),
        st.builds(ToolCallRejected, call_id=ids, name=names, reason=st.sampled_from(RejectReason),
                  content=st.text(max_size=40), arguments=args,
                  details=st.dictionaries(names, values, max_size=2)),
        st.builds(ToolStarted, call_id=ids, name=names, arguments=args,
                  idempotency_key=st.none() | ids, duplicate=st.booleans()),
        st.builds(ToolCompleted, call_id=ids, name=names, success=st.booleans(),
                  content=st.text(max_size=40), data=values,
                  error=st.none() | st.text(max_size=20), duration_ms=st.none() | floats),
        st.builds(TurnLimitReached, turn_count=small, max_turns=small,
                  pending_tool_calls=st.booleans(), warning=st.text(max_size=20)),
        st.builds(ConversationHalted, reason=st.text(max_size=20), refusals=small),
        st.builds(ConversationCompleted, final_content=st.text(max_size=40)),
        st.builds(ConversationFailed, error=st.text(max_size=30), error_type=names),
    )


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
        # provider ids repeat (within the response and across turns), as real servers send
        # them; the engine's one rule makes them unique, as the loop does
        parts += assign_call_ids([ToolCall(id=f"call_{i % 2}", name=n, arguments=a)
                                  for i, (n, a) in enumerate(calls)], self.builder.call_ids)
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

    def assert_replays(self, **kw: Any) -> ReplayResult:
        """Re-run it deterministically; fail the test with the divergence report if it differs.

        A conversation replay cannot check (imported or external-runner
        messages: ``ReplayResult.skipped``) skips the test with that reason,
        never passes it. Returns the result of a replay that held.
        """
        import pytest

        from .deterministic import replay

        with Journal(self.path) as journal:
            result = replay(journal, self.conversation_id, collect=True, **kw)
        if result.divergence is not None:
            pytest.fail(result.divergence.render(), pytrace=False)
        if result.skipped is not None:
            pytest.skip(f"{self}: not replayed: {result.skipped}")
        return result

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
