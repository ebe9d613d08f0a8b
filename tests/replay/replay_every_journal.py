"""Opt-in pytest plugin: after each test, replay every journal the test left in its tmp_path.

    PYTHONPATH=. python -m pytest -p tests.replay.replay_every_journal tests/engine tests/replay

The terminal summary lists each conversation that diverged. Expected ones:
conversations written by hand (fake digests), by test helpers other than
the loop, or checked after a test changed a rule on purpose.
"""

from __future__ import annotations

import glob
from typing import Any

import pytest

from turnlog.journal import Journal, TurnlogError
from turnlog.replay.reports import replay_all

_RESULTS: list[tuple[str, str, str]] = []


@pytest.fixture(autouse=True)
def _replay_every_journal(request: Any, tmp_path: Any):
    yield
    for path in glob.glob(str(tmp_path / "**" / "*.db"), recursive=True):
        try:
            with Journal(path) as journal:
                report = replay_all(journal, record=False)
        except TurnlogError as exc:  # not a journal, or corrupt on purpose
            _RESULTS.append(("unreadable", request.node.nodeid, f"{path}: {exc}"))
            continue
        for r in report.results:
            state = "skipped" if r.skipped else "ok" if r.ok else "diverged"
            why = "" if r.ok else str(r.divergence)
            _RESULTS.append((state, request.node.nodeid, f"{r.conversation_id} {why}"))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    counts: dict[str, int] = {}
    for state, _, _ in _RESULTS:
        counts[state] = counts.get(state, 0) + 1
    terminalreporter.section("replay of every journal")
    terminalreporter.write_line(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    for state, node, what in _RESULTS:
        if state == "diverged":
            terminalreporter.write_line(f"{node}: {what}"[:240])
