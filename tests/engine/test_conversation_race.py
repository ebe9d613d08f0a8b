"""``Conversation.open`` and its reload take state and last seq from one read.

A second writer commits between the fold and anything read after it (injected by
wrapping ``lineage``: deterministic, no sleeps). The stale writer's next append
must then lose the race (``ConcurrencyError``), never land on top of a state it
did not fold.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from turnlog.engine.model.conversation import Conversation, load_state
from turnlog.engine.model.events import ConversationStarted, ModelFailed, ModelRequested, UserMessage
from turnlog.journal import ConcurrencyError, Journal, StoredEvent


def request(turn: int = 1) -> ModelRequested:
    return ModelRequested(turn=turn, digest="d", provider="scripted", model="m")


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "turnlog.db"
    with Journal(path) as journal:
        conv = Conversation.start(journal, ConversationStarted(
            conversation_id="c", provider="scripted", model="m"))
        conv.append(UserMessage.of("hi"))
    return path


def commit_after_the_read(journal: Journal, monkeypatch, other: Journal, event=None) -> None:
    """Once ``journal.lineage`` has been read to its end, ``other`` appends ``event``."""
    original = journal.lineage

    def lineage(stream_id: str, to_seq: int | None = None) -> Iterator[StoredEvent]:
        yield from original(stream_id, to_seq)
        if not getattr(lineage, "done", False):
            lineage.done = True
            Conversation.open(other, "c").append(event or request())

    monkeypatch.setattr(journal, "lineage", lineage)


def test_open_takes_state_and_last_seq_from_the_same_read(path, monkeypatch):
    with Journal(path) as journal, Journal(path) as other:
        commit_after_the_read(journal, monkeypatch, other)
        conv = Conversation.open(journal, "c")

        assert conv.last_seq == conv.builder.seq == 2
        with pytest.raises(ConcurrencyError):
            conv.append(request())  # stale: the other writer's request is seq 3

        types = [e.type for e in journal.read("c")]
    assert types.count("model_requested") == 1
    with Journal(path) as journal:
        assert load_state(journal, "c").lifecycle.value == "requested"


def test_reload_after_a_lost_race_takes_state_and_last_seq_from_the_same_read(path, monkeypatch):
    with Journal(path) as journal, Journal(path) as other, Journal(path) as third:
        conv = Conversation.open(journal, "c")
        Conversation.open(other, "c").append(request())  # conv is now stale
        # while conv reloads after losing, yet another writer commits the model's failure
        commit_after_the_read(journal, monkeypatch, third,
                              ModelFailed(turn=1, error_type="timeout", message="slow"))
        with pytest.raises(ConcurrencyError):
            conv.append(request())

        assert conv.last_seq == conv.builder.seq == 3
        assert conv.builder.lifecycle.value == "requested"
        with pytest.raises(ConcurrencyError):  # stale again: the failure is seq 4
            conv.append(ModelFailed(turn=1, error_type="timeout", message="again"))
        types = [e.type for e in journal.read("c")]
    assert types == ["conversation_started", "user_message", "model_requested", "model_failed"]
