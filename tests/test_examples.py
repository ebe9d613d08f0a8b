"""Every example in ``examples/`` runs as a user runs it and checks its own outcome."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from turnlog.journal import Journal

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))

#: A line each example prints when its run went as it says.
EXPECTED = {
    "first_run.py": "journal verifies: True",
    "approval.py": "after the decision: completed, paid [20.0]",
    "async_parallel.py": "20 conversations, 20 completed",
    "replay_fork_diff.py": "answer '6'",
    "import_swap.py": "answer 'Sunny and 18 degrees.'",
}


def test_every_example_has_an_expectation_and_a_readme_line():
    assert sorted(p.name for p in SCRIPTS) == sorted(EXPECTED)
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert all(f"examples/{name}" in readme for name in EXPECTED)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_example_runs_and_leaves_a_journal_that_verifies(script, tmp_path):
    db = tmp_path / "example.db"
    done = subprocess.run([sys.executable, str(script), str(db)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert EXPECTED[script.name] in done.stdout
    with Journal(db, readonly=True) as journal:
        assert journal.verify().ok
        assert list(journal.streams())
