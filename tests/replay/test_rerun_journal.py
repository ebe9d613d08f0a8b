"""The journal a replay's re-run writes into: rows in memory, each append checked first.

Replay writes no database: what the loop appends to the replayed stream is
shown to the checker (a divergence leaves the stream as it was), refused
like a journal's append when stale or ahead, and a fork's ancestors are read
from the recorded journal, nothing copied.
"""

from __future__ import annotations

import pytest

from turnlog.engine.model.events import UserMessage, encode_event
from turnlog.journal import ConcurrencyError, Journal, SeqGapError
from turnlog.replay import Divergence, fork
from turnlog.replay._scratch import RerunJournal
from turnlog.replay.deterministic import replay
from turnlog.replay.driver import record_scripted
from turnlog.replay.recorded import Recording

SCRIPT = [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5."}]


class _Refuse:
    """A checker that refuses every event whose payload holds ``word``."""

    def __init__(self, recording: Recording, word: str) -> None:
        self.recording, self.word = recording, word
        self.seen: list[str] = []

    def check(self, events, expected_seq: int) -> None:
        for event in events:
            self.seen.append(event.type)
            if self.word in event.payload:
                raise Divergence(self.recording.conversation_id, expected_seq + 1, None, None,
                                 f"refused {self.word}")


@pytest.fixture
def recorded(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        record_scripted(journal, "c1", ["add 2 and 3"], SCRIPT)
        yield journal


def test_a_refused_append_leaves_the_stream_as_it_was(recorded):
    rec = Recording(recorded, "c1")
    rerun = RerunJournal(recorded, _Refuse(rec, "nope"))
    first = [encode_event(rec.started)]
    assert [r.seq for r in rerun.append("c1", first, 0)] == [1]
    with pytest.raises(Divergence):
        rerun.append("c1", [encode_event(UserMessage.of("ok")),
                            encode_event(UserMessage.of("nope"))], 1)
    assert rerun.last_seq("c1") == 1 and [r.type for r in rerun.read("c1")] == [
        "conversation_started"]
    assert rerun.checker.seen == ["conversation_started", "user_message", "user_message"]


def test_a_stale_or_early_append_is_refused_like_a_journals(recorded):
    rec = Recording(recorded, "c1")
    rerun = RerunJournal(recorded, _Refuse(rec, "\x00"))
    rerun.append("c1", [encode_event(rec.started)], 0)
    with pytest.raises(ConcurrencyError):
        rerun.append("c1", [encode_event(UserMessage.of("again"))], 0)
    with pytest.raises(SeqGapError):
        rerun.append("c1", [encode_event(UserMessage.of("ahead"))], 5)
    assert rerun.last_seq("c1") == 1
    # the recorded journal is only read: its stream is unchanged
    assert recorded.last_seq("c1") == rec.last_seq


def test_a_fork_replays_over_its_recorded_ancestors_without_copying_them(recorded):
    fid = fork(recorded, "c1", 2, new_id="f1")
    from turnlog.engine.loop import Loop
    from turnlog.engine.demo import demo_tools
    from turnlog.engine.providers.scripted import ScriptedProvider

    Loop(recorded, ScriptedProvider(SCRIPT), demo_tools()).resume(fid)
    result = replay(recorded, fid, collect=True)
    assert result.ok and result.checked == recorded.last_seq(fid)
    rec = Recording(recorded, fid)
    rerun = RerunJournal(recorded, _Refuse(rec, "\x00"))
    rerun.append(fid, [encode_event(rec.started)], 0, parent=("c1", 2))
    assert rerun.ancestry(fid) == [("c1", 2), (fid, None)]
    assert [r.stream_id for r in rerun.lineage(fid)] == ["c1", "c1", fid]
    assert rerun.last_seq("c1") == recorded.last_seq("c1")  # read through, not copied
