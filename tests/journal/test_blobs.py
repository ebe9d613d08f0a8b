"""Content-addressed parts: large parts stored once by SHA-256 in ``blobs``, read back whole,
proved by the chain through their digest (``journal._blobs``)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import msgspec
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnlog.engine.model.conversation import Conversation
from turnlog.engine.model.events import (
    ConversationCompleted,
    ConversationStarted,
    ModelResponded,
    ToolCompleted,
    UserMessage,
    decode_event,
    encode_event,
)
from turnlog.engine.formats.exporter import export_conversation, lineage_events
from turnlog.engine.formats.importer import import_entries, read_transcript
from turnlog.engine.model.messages import Image, Opaque, Text, Thinking, ToolCall, ToolResult
from turnlog.journal import SCHEMA_VERSION, Journal, NewEvent
from turnlog.journal._blobs import join, split
from tests.old_journals import write_old_journal
from tests.pgcluster import fresh_url

from ..cli.conftest import turnlog

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + os.urandom(200 * 1024)).decode()


def blob_rows(journal) -> list[tuple[bytes, int]]:
    return journal._conn.execute("SELECT digest, length(data) FROM blobs ORDER BY 1").fetchall()


def payloads(journal) -> list[str]:
    return [p for (p,) in journal._conn.execute("SELECT payload FROM events ORDER BY position")]


def image_message(data: str = PNG) -> UserMessage:
    return UserMessage(parts=(Text(text="what is on the screen?"),
                              Image(media_type="image/png", data=data)))


def test_the_same_image_in_two_conversations_is_one_row(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        for cid in ("a", "b"):
            started = ConversationStarted(conversation_id=cid, provider="p", model="m")
            Conversation.start(journal, started, rest=[image_message(), image_message()])
        raw = base64.b64decode(PNG)
        assert blob_rows(journal) == [(hashlib.sha256(raw).hexdigest(), len(raw))]
        # the payload the chain hashes holds the digest and size, not the image
        stored = payloads(journal)[1]
        assert PNG not in stored and hashlib.sha256(raw).hexdigest() in stored
        assert f'"size":{len(raw)}' in stored and len(stored) < 400
        for cid in ("a", "b"):  # reads are whole
            events = [decode_event(e.type, e.version, e.payload) for e in journal.read(cid)]
            assert events[1:] == [image_message(), image_message()]
        assert journal.verify().ok
    assert (tmp_path / "j.db").stat().st_size < len(raw) + 64 * 1024


@pytest.mark.parametrize(("size", "kept"), [(4096, 0), (4097, 1)])
def test_a_part_is_taken_out_only_above_the_threshold(tmp_path, size, kept):
    text = "é" * (size // 2) if size % 2 == 0 else "é" * (size // 2) + "x"  # UTF-8 bytes
    image = base64.b64encode(os.urandom(size)).decode()
    assert len(text.encode()) == size
    with Journal(tmp_path / "j.db") as journal:
        journal.append("t", [encode_event(UserMessage.of(text))], 0)
        journal.append("i", [encode_event(image_message(image))], 0)
        assert len(blob_rows(journal)) == 2 * kept
        assert [n for _, n in blob_rows(journal)] == [size] * 2 * kept
        assert decode_event("user_message", 1, journal.last_event("t").payload) \
            == UserMessage.of(text)
        assert decode_event("user_message", 1, journal.last_event("i").payload) \
            == image_message(image)


def test_the_threshold_is_the_journals_and_a_bad_one_is_refused(tmp_path):
    with Journal(tmp_path / "j.db", blob_threshold=100) as journal:
        journal.append("s", [encode_event(UserMessage.of("y" * 101))], 0)
        assert len(blob_rows(journal)) == 1
    with pytest.raises(ValueError, match="blob_threshold must be an int >= 0"):
        Journal(tmp_path / "k.db", blob_threshold=-1)
    assert not (tmp_path / "k.db").exists()


def every_part_kind(big: str) -> tuple[ConversationStarted, list]:
    """A conversation whose every kind of part (and tool result) is larger than 4 KiB."""
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                               "data": base64.b64encode(big.encode()).decode()}}
    started = ConversationStarted(conversation_id="orig", provider="imported", model="",
                                  system="s" + big)
    args = {"path": "/a", "body": big}
    return started, [
        UserMessage(parts=(Text(text="look" + big), Image(data=PNG),
                           Opaque(provider="anthropic", kind="document", data=document),
                           ToolResult(call_id="x", name="t", content="r" + big))),
        ModelResponded(turn=1, source="imported", stop_reason="tool_use", parts=(
            Thinking(text="think" + big, signature="sig", provider="anthropic"),
            Text(text="answer" + big),
            ToolCall(id="c1", name="read", arguments=args, raw_arguments=json.dumps(args)))),
        ToolCompleted(call_id="c1", name="read", success=True, content="file" + big,
                      source="imported"),
        ModelResponded(turn=2, source="imported", parts=(Text(text="done" + big),)),
        ConversationCompleted(final_content="done" + big),
    ]


def test_every_part_kind_round_trips_through_export_and_import(tmp_path):
    big = "lorem ipsum ✓ " * 600
    with Journal(tmp_path / "j.db") as journal:
        started, events = every_part_kind(big)
        Conversation.start(journal, started, rest=events)
        assert len(blob_rows(journal)) >= 9
        before = len(blob_rows(journal))
        assert lineage_events(journal, "orig")[1:] == events
        text = export_conversation(journal, "orig", "jsonl")
        assert PNG in text and big in text
        entries, envelope = read_transcript(text.encode())
        import_entries(journal, entries, conversation_id="copy", envelope=envelope)
        assert lineage_events(journal, "copy")[1:] == events
        assert len(blob_rows(journal)) == before  # the copy's parts are the same rows
        for fmt in ("anthropic", "openai", "gemini"):
            exported = export_conversation(journal, "orig", fmt)
            assert big in exported and "$blob" not in exported
        assert journal.verify().ok


def test_show_and_the_viewer_read_parts_whole(tmp_path):
    path = tmp_path / "j.db"
    big = "tool output line\n" * 400
    with Journal(path) as journal:
        started, events = every_part_kind(big)
        Conversation.start(journal, started, rest=events)
    shown = turnlog("show", "orig", "--db", path, "--full")
    assert shown.returncode == 0, shown.stderr
    assert "tool output line" in shown.stdout and "$blob" not in shown.stdout
    from turnlog.engine.audit.queries import Reader

    with Reader(str(path)) as reader:
        page = json.dumps(reader.timeline("orig"), default=str)
    assert "tool output line" in page and "$blob" not in page


def test_verify_reports_an_edited_part_at_its_event(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.append("a", [encode_event(UserMessage.of("hi"))], 0)
        journal.append("b", [encode_event(UserMessage.of("hi")), encode_event(image_message())], 0)
        assert journal.verify().ok
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER blobs_refuse_update")
    conn.execute("UPDATE blobs SET data = CAST(zeroblob(length(data)) AS BLOB)")
    conn.commit()
    conn.close()
    with Journal(path) as journal:  # the open reinstalls the trigger, the edit stays
        report = journal.verify()
        assert not report.ok
        assert (report.first_bad.stream_id, report.first_bad.seq) == ("b", 2)
        assert "edited" in report.first_bad.reason
        assert journal.verify("a").ok
    result = turnlog("verify", "--db", path)
    assert result.returncode == 1
    assert "b" in result.stdout + result.stderr and "2" in result.stdout + result.stderr


def test_verify_reports_a_deleted_part(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal.append("b", [encode_event(image_message())], 0)
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER blobs_refuse_delete")
    conn.execute("DELETE FROM blobs")
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        bad = journal.verify().first_bad
        assert (bad.stream_id, bad.seq) == ("b", 1) and "missing" in bad.reason


def test_blobs_are_guarded_like_events(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        journal.append("b", [encode_event(image_message())], 0)
        for statement in ("UPDATE blobs SET data = x'00'", "DELETE FROM blobs"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                journal._conn.execute(statement)


def test_postgres_dedupes_reads_whole_and_verify_finds_an_edit():
    url = fresh_url()
    with Journal.open(url) as journal:
        for cid in ("a", "b"):
            journal.append(cid, [encode_event(image_message()), encode_event(image_message())], 0)
        assert [decode_event(e.type, e.version, e.payload) for e in journal.read("b")] \
            == [image_message()] * 2
        assert journal.last_event("a").payload == encode_event(image_message()).payload
        assert journal.verify().ok
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 1
        conn.execute("DROP TRIGGER blobs_refuse_update ON blobs")
        conn.execute("UPDATE blobs SET data = '\\x00'::bytea || data")
    with Journal.open(url) as journal:
        bad = journal.verify().first_bad
        assert (bad.stream_id, bad.seq) == ("a", 1) and "edited" in bad.reason


def test_an_old_journal_migrates_keeping_its_inline_parts(tmp_path):
    path = tmp_path / "old.db"
    old = encode_event(image_message())
    write_old_journal(path, 2, [("s", [NewEvent(old.type, old.version, old.payload)], None)])
    with Journal(path, readonly=True) as reader:  # readable as it is
        assert reader.last_event("s").payload == old.payload
        heads = reader.heads()
    with Journal(path) as journal:
        assert journal.heads() == heads  # the chain is untouched: its payload stays inline
        assert blob_rows(journal) == []
        journal.append("s", [encode_event(image_message())], 1)
        assert len(blob_rows(journal)) == 1
        assert [e.payload for e in journal.read("s")] == [old.payload] * 2
        assert journal.verify().ok
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM _turnlog_meta WHERE key = 'schema_version'"
                        ).fetchone() == (str(SCHEMA_VERSION),)
    conn.close()


def test_a_key_spelled_like_a_reference_reads_back_as_it_was(tmp_path):
    digest = "ab" * 32
    payload = json.dumps({"data": {"$blob": digest, "size": 3}, "more": {"$$blob": 1},
                          "big": "lorem " * 1000}, separators=(",", ":"))
    with Journal(tmp_path / "j.db") as journal:
        journal.append("s", [NewEvent("x", 1, payload)], 0)
        assert journal.last_event("s").payload == payload
        assert len(blob_rows(journal)) == 1 and journal.verify().ok


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20),
                      st.binary(min_size=0, max_size=300).map(
                          lambda b: base64.b64encode(b).decode()),
                      st.text(min_size=50, max_size=300))
parts = st.lists(st.one_of(
    st.text(max_size=400).map(lambda t: Text(text=t)),
    st.binary(max_size=400).map(lambda b: Image(data=base64.b64encode(b).decode())),
    st.binary(max_size=400).map(
        lambda b: Image(url="data:image/png;base64," + base64.b64encode(b).decode())),
    st.tuples(st.text(max_size=10), st.text(max_size=400)).map(
        lambda t: ToolResult(call_id=t[0], name="t", content=t[1])),
    st.dictionaries(st.sampled_from(["$blob", "$$blob", "data", "size"]), json_leaf,
                    max_size=4).map(lambda d: Opaque(provider="p", kind="k", data=d)),
), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(parts, st.integers(min_value=0, max_value=300))
def test_any_parts_store_and_read_back_equal(tmp_path_factory, message_parts, threshold):
    event = UserMessage(parts=tuple(message_parts))
    new = encode_event(event)
    stored, found = split(new.payload, threshold)
    assert msgspec.json.decode(stored) is not None  # still JSON
    assert all(len(data) > threshold and hashlib.sha256(data).hexdigest() == digest
               for digest, data in found.items())
    assert join(stored, found.get) == new.payload
    path = Path(tmp_path_factory.mktemp("p")) / "j.db"
    with Journal(path, blob_threshold=threshold) as journal:
        journal.append("s", [new], 0)
        journal.append("t", [new], 0)
        assert [e.payload for e in journal.read("s")] == [new.payload]
        assert decode_event(new.type, new.version, journal.last_event("t").payload) == event
        assert len(blob_rows(journal)) == len(found)
        assert journal.verify().ok


@pytest.mark.parametrize("thresholds", [(4096, 4096), (100, 4096), (4096, 100)])
def test_copy_keeps_every_hash_whatever_the_thresholds(tmp_path, thresholds):
    from turnlog.journal import copy_streams

    old_path = tmp_path / "old.db"
    inline = encode_event(image_message())
    write_old_journal(old_path, 2, [("s", [NewEvent(inline.type, inline.version,
                                                    inline.payload)], None)])
    with Journal(old_path, blob_threshold=thresholds[0]) as source:
        source.append("s", [encode_event(image_message()), encode_event(UserMessage.of("y" * 500))],
                      1)
        source.append("t", [encode_event(image_message())], 0)
        with Journal(tmp_path / "new.db", blob_threshold=thresholds[1]) as target:
            copy_streams(source, target)
            # the old journal is on hash chain version 1, the new one on 2: the copy is the
            # migration, re-chained (docs/erasure-design.md); the same version keeps hashes
            assert (source.chain_version, target.chain_version) == (1, 2)
            assert [(h.stream_id, h.seq) for h in target.heads()] == [
                (h.stream_id, h.seq) for h in source.heads()] and target.verify().ok
            assert [e.payload for e in target.read("s")] == [e.payload for e in source.read("s")]
            assert target.blob_threshold == thresholds[1]
            with Journal(tmp_path / "again.db", blob_threshold=thresholds[0]) as again:
                copy_streams(target, again)  # between journals of one version: every hash
                assert again.heads() == target.heads() and again.verify().ok
            assert len(blob_rows(target)) == len(blob_rows(source))


def test_the_sql_views_read_text_parts_from_blobs(tmp_path):
    from turnlog.engine.audit.views import EXTENSIONS, connect_readonly

    path = tmp_path / "j.db"
    big = "a long tool result line\n" * 300
    with Journal(path, extensions=EXTENSIONS) as journal:
        started, events = every_part_kind(big)
        Conversation.start(journal, started, rest=events)
    conn = connect_readonly(str(path))
    try:
        assert conn.execute("SELECT content FROM tool_calls").fetchall() == [("file" + big,)]
        texts = [t for (t,) in conn.execute("SELECT text FROM messages ORDER BY seq")]
        assert texts == ["look" + big, "answer" + big, "file" + big, "done" + big]
    finally:
        conn.close()


def test_replay_and_swap_run_on_parts_kept_in_blobs(tmp_path):
    from turnlog.engine.loop import run
    from turnlog.engine.providers.scripted import ScriptedProvider
    from turnlog.engine.tools import tool
    from turnlog.replay import replay, swap

    listing = "\n".join(f"line {i}: " + "x" * 40 for i in range(400))

    @tool(effect="read_only")
    def read_file(path: str) -> str:
        """Read a file."""
        return listing

    script = [{"tool_calls": [{"name": "read_file", "arguments": {"path": "/a"}}]},
              {"text": "summary " * 900}]
    with Journal(tmp_path / "j.db") as journal:
        run(journal, "read it " * 800, provider=ScriptedProvider(script), tools=[read_file],
            conversation_id="c")
        assert len(blob_rows(journal)) >= 3  # the prompt, the tool result, the answer
        assert replay(journal, "c").ok
        result = swap(journal, "c", ScriptedProvider(script), new_id="s")
        assert result.conversation_id == "s"
        recorded, swapped = ([decode_event(e.type, e.version, e.payload).content
                              for e in journal.read(cid) if e.type == "tool_completed"]
                             for cid in ("c", "s"))
        assert swapped == recorded and "line 399: " in recorded[0] and len(recorded[0]) > 4096
        assert journal.verify().ok


def test_the_viewers_search_finds_text_inside_a_part(tmp_path):
    from turnlog.engine.audit.queries import ListQuery, Reader

    path = tmp_path / "j.db"
    with Journal(path) as journal:
        started, events = every_part_kind("plain words " * 500 + "needle-in-a-part")
        Conversation.start(journal, started, rest=events)
        small, rest = every_part_kind("tiny")
        Conversation.start(journal, ConversationStarted(
            conversation_id="other", provider="p", model="m"), rest=rest)
    with Reader(str(path)) as reader:
        found = reader.conversations(ListQuery(text="needle-in-a-part"))["rows"]
        assert [row["conversation_id"] for row in found] == ["orig"]
        assert reader.conversations(ListQuery(text="no-such-word"))["rows"] == []


def test_a_data_url_and_base64_of_the_same_image_are_one_part(tmp_path):
    url = Image(url=f"data:image/png;base64,{PNG}")
    with Journal(tmp_path / "j.db") as journal:
        journal.append("s", [encode_event(UserMessage(parts=(url,))),
                             encode_event(image_message())], 0)
        raw = base64.b64decode(PNG)
        assert blob_rows(journal) == [(hashlib.sha256(raw).hexdigest(), len(raw))]
        assert '"enc":"data:image/png;base64"' in payloads(journal)[0]
        assert [decode_event(e.type, e.version, e.payload) for e in journal.read("s")] == [
            UserMessage(parts=(url,)), image_message()]
        assert journal.verify().ok


def test_postgres_views_and_copy_read_parts_whole(tmp_path):
    from turnlog.engine.audit.views import EXTENSIONS, connect_readonly
    from turnlog.journal import copy_streams

    url = fresh_url()
    big = "a long tool result line\n" * 300
    with Journal.open(url, extensions=EXTENSIONS) as journal:
        started, events = every_part_kind(big)
        Conversation.start(journal, started, rest=events)
        with Journal(tmp_path / "copy.db") as target:
            copy_streams(journal, target)
            assert target.heads() == journal.heads() and target.verify().ok
            assert lineage_events(target, "orig")[1:] == events
    conn = connect_readonly(url)
    try:
        assert conn.execute("SELECT content FROM tool_calls").fetchall() == [("file" + big,)]
        texts = [t for (t,) in conn.execute("SELECT text FROM messages ORDER BY seq")]
        assert texts == ["look" + big, "answer" + big, "file" + big, "done" + big]
    finally:
        conn.close()
