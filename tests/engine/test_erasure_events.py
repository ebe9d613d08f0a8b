"""The erasure's engine half: redaction keeps each event's structure and drops its content;
erasure and hold records are lifecycle markers; refusals name the first erased event."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.audit.erasure import (
    ERASED,
    erase_conversation,
    first_erased,
    held,
    hold,
    prune,
    redact,
    refuse_erased,
)
from turnlog.engine.errors import ConversationErasedError, InvalidEventError
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    ErasureRecorded,
    HoldPlaced,
    ModelRequested,
    ModelResponded,
    ToolCompleted,
    ToolStarted,
    UserMessage,
    encode_event,
)
from turnlog.engine.model.messages import Text, ToolCall
from turnlog.engine.model.state import StateBuilder, fold
from turnlog.journal import Journal

TEXT = st.text(min_size=3, max_size=30).map(lambda t: f"Q{t}Z")


def _conversation(secret: str) -> list:
    call = ToolCall(id="call_1", name="lookup", arguments={"q": secret},
                    raw_arguments=json.dumps({"q": secret}))
    return [
        ConversationStarted(conversation_id="c", provider="p", model="m", system=secret,
                            metadata={"who": secret}),
        UserMessage.of(secret),
        ModelRequested(turn=1, digest="d" * 64, provider="p", model="m"),
        ModelResponded(turn=1, parts=(Text(text=secret), call), raw={"body": secret},
                       stop_reason="tool_use"),
        ToolStarted(call_id="call_1", name="lookup", arguments={"q": secret}),
        ToolCompleted(call_id="call_1", name="lookup", success=True, content=secret,
                      data={"r": secret}),
        ModelRequested(turn=2, digest="e" * 64, provider="p", model="m"),
        ModelResponded(turn=2, parts=(Text(text=secret),)),
        ConversationCompleted(final_content=secret),
    ]


@settings(max_examples=30, deadline=None)
@given(secret=TEXT)
def test_redaction_drops_every_text_and_keeps_what_the_lifecycle_reads(secret):
    events = _conversation(secret)
    redacted = [redact(e) for e in events]
    for event in redacted:
        assert secret not in encode_event(event).payload
    assert [type(e) for e in redacted] == [type(e) for e in events]
    before, after = fold(events), fold(redacted)
    assert (after.lifecycle, after.turn_count, after.status) == (
        before.lifecycle, before.turn_count, before.status)
    assert after.messages[0].parts == (Text(text=ERASED),)


def test_markers_are_accepted_after_the_start_and_change_nothing():
    builder = StateBuilder()
    for event in _conversation("x"):
        builder.apply(event)
    state = builder.state()
    for marker in (ErasureRecorded(by="a", reason="r", seqs=(2,)), HoldPlaced(by="a", reason="r")):
        builder.apply(marker)
    after = builder.state()
    assert (after.lifecycle, after.status, after.messages) == (
        state.lifecycle, state.status, state.messages)
    assert not StateBuilder().accepts(HoldPlaced(by="a", reason="r"))  # not before the start


def test_erase_hold_and_prune_through_the_library(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        journal.append("c", [encode_event(e) for e in _conversation("QSECRETZ")], 0)
        journal.append("f", [encode_event(ConversationStarted(
            conversation_id="f", provider="p", model="m"))], 0, parent=("c", 3))
        with pytest.raises(InvalidEventError, match="reason"):
            erase_conversation(journal, "c", reason="")
        assert erase_conversation(journal, "c", reason="asked", seq=2, by="dpo") == [2]
        assert first_erased(journal, "c").seq == 2 and first_erased(journal, "f").seq == 2
        with pytest.raises(ConversationErasedError, match="fork parent 'c'") as raised:
            refuse_erased(journal, "f", "fork")
        assert (raised.value.conversation_id, raised.value.seq) == ("c", 2)
        record = list(journal.read("c"))[-1]
        assert record.type == "erasure_recorded"
        assert msgspec.json.decode(record.payload)["by"] == "dpo"

        hold(journal, "c", reason="litigation")
        assert held(journal, "c").reason == "litigation"
        first = prune(journal, "2999-01-01")
        assert (first.held, first.erased) == (["c"], {"f": [1]})
        hold(journal, "c", reason="", release=True)
        assert held(journal, "c") is None
        done = prune(journal, "2999-01-01")
        assert (list(done.erased), done.unchanged) == (["c"], ["f"])
        assert journal.verify().ok
        assert "QSECRETZ" not in "".join(e.payload for e in journal.read_all())


class _HoldPlacedMidPrune:
    """A journal on which another writer places a legal hold after ``prune`` read the
    conversation and before its erasure's transaction (the first erase only)."""

    def __init__(self, journal, conversation_id):
        self._journal, self._id, self.raced = journal, conversation_id, False

    def __getattr__(self, name):
        return getattr(self._journal, name)

    def erase(self, stream_id, kept, record, expected_seq=None):
        if not self.raced:
            self.raced = True
            hold(self._journal, self._id, reason="litigation", by="counsel")
        return self._journal.erase(stream_id, kept, record, expected_seq)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_prune_never_erases_a_conversation_held_while_it_ran(tmp_path, backend):
    from tests.pgcluster import fresh_url

    target = str(tmp_path / "j.db") if backend == "sqlite" else fresh_url()
    with Journal.open(target) as journal:
        journal.append("c", [encode_event(e) for e in _conversation("QHELDZ")], 0)
        racing = _HoldPlacedMidPrune(journal, "c")
        done = prune(racing, "2999-01-01")
        assert racing.raced and (done.held, done.erased) == (["c"], {})
        assert first_erased(journal, "c") is None and held(journal, "c").by == "counsel"
        assert "QHELDZ" in "".join(e.payload for e in journal.read("c"))
        assert journal.verify().ok


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_state_folded_before_an_erasure_is_never_saved_after_it(tmp_path, backend):
    """A writer that folded the conversation before another erased it (the erasure keeps
    every hash) cannot save that state as a snapshot: it holds the erased content."""
    from tests.pgcluster import fresh_url
    from turnlog.engine.model.snapshots import open_builder, save_snapshot, snapshot_kind
    from turnlog.journal import InvalidAppendError

    target = str(tmp_path / "j.db") if backend == "sqlite" else fresh_url()
    with Journal.open(target) as journal:
        journal.append("c", [encode_event(e) for e in _conversation("QRACEZ")], 0)
        stale = open_builder(journal, "c")  # folded before the erasure
        assert stale.system == "QRACEZ"
        erase_conversation(journal, "c", reason="asked")
        assert save_snapshot(journal, "c", stale) is None
        assert journal.read_snapshot("c", snapshot_kind()) is None
        with pytest.raises(InvalidAppendError, match="erasure recorded after seq"):
            journal.write_snapshot("c", "k", stale.seq, b"QRACEZ")
        fresh = open_builder(journal, "c")  # read after it: saved at its end
        assert fresh.system == ERASED and save_snapshot(journal, "c", fresh) is not None
        assert "QRACEZ" not in "".join(e.payload for e in journal.read_all())


@settings(max_examples=25, deadline=None)
@given(parent_seq=st.sampled_from([None, 2, 5, 8]), child_seq=st.sampled_from([None, 1, 2]),
       at=st.integers(min_value=3, max_value=9))
def test_first_erased_from_rows_already_read_is_the_lineage_answer(tmp_path_factory, parent_seq,
                                                                   child_seq, at):
    """``own=`` (the stream's rows a caller read: replay) finds the same first erased event
    as reading the whole lineage, wherever the erasure is: parent, child, none."""
    path = tmp_path_factory.mktemp("own") / "j.db"
    with Journal(path) as journal:
        journal.append("c", [encode_event(e) for e in _conversation("QSECRETZ")], 0)
        journal.append("f", [encode_event(e) for e in [
            ConversationStarted(conversation_id="f", provider="p", model="m"),
            UserMessage.of("QCHILDZ")]], 0, parent=("c", at))
        if parent_seq is not None:
            erase_conversation(journal, "c", reason="asked", seq=parent_seq)
        if child_seq is not None:
            erase_conversation(journal, "f", reason="asked", seq=child_seq)
        for cid in ("c", "f"):
            slow = first_erased(journal, cid)
            fast = first_erased(journal, cid, own=list(journal.read(cid)))
            assert fast == slow
        expected = ("c", parent_seq) if parent_seq is not None and parent_seq <= at else (
            ("f", child_seq) if child_seq is not None else None)
        found = first_erased(journal, "f", own=list(journal.read("f")))
        assert (found and (found.stream_id, found.seq)) == (expected or None)
