"""``--db`` and ``TURNLOG_DB`` take a PostgreSQL URL as well as a path: the journal commands
run on it (the engine's view commands: ``test_postgres_engine.py``)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from turnlog.engine.cli import cli
from tests.pgcluster import fresh_url


def test_demo_then_verify_and_heads_on_a_postgresql_url():
    url = fresh_url()
    runner = CliRunner()

    demo = runner.invoke(cli, ["demo", "--db", url, "--json"])
    assert demo.exit_code == 0, demo.output
    cid = json.loads(demo.output)["conversation_id"]

    verify = runner.invoke(cli, ["verify", "--json"], env={"TURNLOG_DB": url})
    assert verify.exit_code == 0, verify.output
    report = json.loads(verify.output)
    assert report["ok"] and report["checked_events"] > 0

    heads = runner.invoke(cli, ["heads", "--db", url, "--json"])
    assert heads.exit_code == 0, heads.output
    assert [h["conversation_id"] for h in json.loads(heads.output)] == [cid]


def test_an_unknown_url_scheme_is_bad_usage():
    result = CliRunner().invoke(cli, ["verify", "--db", "mysql://host/db"])

    assert result.exit_code == 2
    assert "unknown journal URL scheme 'mysql'" in result.output


def test_copy_sqlite_to_postgresql_keeps_heads_and_is_idempotent(tmp_path):
    db, url = str(tmp_path / "j.db"), fresh_url()
    runner = CliRunner()
    assert runner.invoke(cli, ["demo", "--db", db]).exit_code == 0

    first = runner.invoke(cli, ["copy", db, url, "--json"])
    again = runner.invoke(cli, ["copy", db, url, "--json"])

    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["copied"] and json.loads(again.output)["copied"] == []
    heads = [runner.invoke(cli, ["heads", "--db", where]).output for where in (db, url)]
    assert heads[0] == heads[1]
    assert runner.invoke(cli, ["verify", "--db", url]).exit_code == 0
