"""A PostgreSQL connection lost while an append commits: the error says it may have committed."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from turnlog.journal import Journal, JournalConnectionError, NewEvent
from tests.pgcluster import fresh_url

_SLOW_COMMIT = [
    "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN PERFORM pg_sleep(5); RETURN NULL; END $$",
    "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON events "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()",
]


def _kill_the_commit(url: str, done: threading.Event) -> None:
    """Terminate the backend that sleeps inside COMMIT (the deferred trigger)."""
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not done.is_set():
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid()").fetchall()
            if killed:
                return
            time.sleep(0.05)


def test_a_connection_lost_during_commit_says_the_append_may_have_committed():
    url = fresh_url()
    with Journal.open(url) as journal:
        journal.append("s", [NewEvent("x", 1, "{}")] * 2, 0)
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in _SLOW_COMMIT:
                conn.execute(statement)
        done = threading.Event()
        killer = threading.Thread(target=_kill_the_commit, args=(url, done))
        killer.start()
        try:
            with pytest.raises(JournalConnectionError) as info:
                journal.append("s", [NewEvent("x", 1, "{}")], 2)
        finally:
            done.set()
            killer.join()
        message = str(info.value)
        assert "may have committed" in message
        assert "stream 's' ends at seq 3 if it committed, at seq 2 if not" in message
        assert journal.last_seq("s") == 2  # the server rolled it back: the check tells


def test_a_connection_lost_before_commit_is_not_called_a_possible_commit():
    url = fresh_url()
    with Journal.open(url) as journal:
        journal.append("s", [NewEvent("x", 1, "{}")], 0)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$")
            conn.execute("CREATE TRIGGER slow_insert BEFORE INSERT ON events "
                         "FOR EACH ROW EXECUTE FUNCTION slow_insert()")
        done = threading.Event()
        killer = threading.Thread(target=_kill_the_commit, args=(url, done))
        killer.start()
        try:
            with pytest.raises(JournalConnectionError) as info:
                journal.append("s", [NewEvent("x", 1, "{}")], 1)
        finally:
            done.set()
            killer.join()
        assert "may have committed" not in str(info.value)
