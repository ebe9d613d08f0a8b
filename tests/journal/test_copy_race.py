"""A stream edited and rehashed while ``copy`` reads it is refused with nothing of it written
(the events are checked against the target's own chain and the head verified first)."""

from __future__ import annotations

import msgspec
import pytest

from turnlog.journal import CorruptEventError, Journal, NewEvent, copy_streams
from turnlog.journal._rows import chain_rows


def _forged_reader(source, forge_seq, rehash_tail):
    real_read = source.read

    def read(sid, from_seq=1, *args, **kwargs):
        events = list(real_read(sid, from_seq, *args, **kwargs))
        i = next(i for i, e in enumerate(events) if e.seq == forge_seq)
        end = len(events) if rehash_tail else i + 1
        new = [NewEvent(e.type, e.version, e.payload, recorded_at=e.recorded_at) for e in events[i:end]]
        new[0] = NewEvent(new[0].type, new[0].version, '{"n": "FORGED"}', recorded_at=new[0].recorded_at)
        rows = chain_rows(events[i].prev_hash, sid, events[i].seq - 1, new, "")
        for k, row in enumerate(rows):
            events[i + k] = msgspec.structs.replace(events[i + k], payload=row[5], hash=row[7], prev_hash=row[6])
        return iter(events)

    return read


@pytest.mark.parametrize("rehash_tail", [False, True])
def test_a_stream_edited_while_copied_is_refused_unwritten(tmp_path, monkeypatch, rehash_tail):
    with Journal(tmp_path / "src.db") as source:
        source.append("s", [NewEvent("note", 1, f'{{"n": {n}}}') for n in range(4)], 0)
        monkeypatch.setattr("turnlog.journal._copy._BATCH", 2)
        monkeypatch.setattr(source, "read", _forged_reader(source, 2, rehash_tail))
        with Journal(tmp_path / "dst.db") as target:
            with pytest.raises(CorruptEventError, match="'s'"):
                copy_streams(source, target)
            assert target.last_seq("s") == 0 and target.verify().ok
