"""``turnlog view`` over a PostgreSQL journal: the same read API (``engine.audit.queries.Reader``)
gives the same pages as over the SQLite journal it was copied from."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from turnlog.engine.cli import cli
from turnlog.engine.audit.queries import ListQuery, Reader
from turnlog.replay.view import create_app
from tests.pgcluster import fresh_url


@pytest.fixture(scope="module")
def copied(built) -> str:
    """The view tests' journal, copied to PostgreSQL once."""
    url = fresh_url()
    done = CliRunner().invoke(cli, ["copy", str(built[0]), url])
    assert done.exit_code == 0, done.output
    return url


def test_every_reader_answer_is_the_same_on_postgresql(built, copied):
    path, ids = built
    on_sqlite, on_postgres = Reader(str(path)), Reader(copied)
    try:
        # positions differ (copy writes conversation after conversation): no sort by them
        for query in (ListQuery(sort="id"), ListQuery(sort="tokens"),
                      ListQuery(sort="started", text="paris"),
                      ListQuery(sort="id", tool="get_weather", status="completed")):
            assert on_postgres.conversations(query) == on_sqlite.conversations(query), query
        assert on_postgres.choices() == on_sqlite.choices()
        for cid in ids.values():
            sqlite_info, postgres_info = on_sqlite.conversation(cid), on_postgres.conversation(cid)
            # replay reports (``replay --all``) are kept in the SQLite file only
            sqlite_info.pop("replay_runs"), postgres_info.pop("replay_runs")
            assert postgres_info == sqlite_info, cid
            assert on_postgres.timeline(cid) == on_sqlite.timeline(cid), cid
        dashboards = [r.dashboard() for r in (on_sqlite, on_postgres)]
        for d in dashboards:
            d.pop("generated_at"), d.pop("divergences")
        assert dashboards[1] == dashboards[0]
    finally:
        on_sqlite.close()
        on_postgres.close()


def test_the_web_app_serves_a_postgresql_journal(built, copied):
    client = TestClient(create_app(copied), base_url="http://127.0.0.1")
    cid = built[1]["fork"]

    for page in ("/", f"/conversation?id={cid}", "/audit"):
        response = client.get(page)
        assert response.status_code == 200, (page, response.text[:500])
    assert cid in client.get("/").text
