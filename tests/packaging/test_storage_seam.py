"""Storage stays behind the journal: nothing above journal/ asks which database it is on or
reaches into the journal's private modules (issue 30, item 4).

What differs per database is reached through what the backend provides
(``turnlog.journal.connect_sql``, ``dialect_of``, ``dialect_for``);
what the engine needs from the journal is public in ``turnlog.journal``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The packages above the journal (the journal's own folder may use anything of its own).
ABOVE = ("engine", "replay", "turnlog")
FORBIDDEN = {
    "is_postgres": re.compile(r"\bis_postgres\b"),
    "a private journal module": re.compile(
        r"\b(?:turnlog\.)?journal\._\w+|from\s+turnlog\.journal\s+import\s+_\w+"),
}


def offences(root: Path) -> list[str]:
    """``file:line: what`` for every forbidden use under the packages above the journal."""
    found = []
    for package in ABOVE:
        for path in sorted((root / package).rglob("*.py")):
            if path.is_symlink() or any(p.is_symlink() for p in path.parents
                                         if p != root and root in p.parents):
                continue  # turnlog/journal etc. are links to the journal's own folder
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for what, pattern in FORBIDDEN.items():
                    if pattern.search(line):
                        found.append(f"{path.relative_to(root)}:{number}: {what}")
    return found


def test_nothing_above_the_journal_branches_on_the_backend_or_imports_its_privates():
    assert offences(ROOT) == []


@pytest.mark.parametrize("line", [
    "from turnlog.journal._open import is_postgres",
    "    if is_postgres(url):",
    "from turnlog.journal._copy import copy_streams",
    "import turnlog.journal._pg as pg",
    "from turnlog.journal import _postgres",
])
def test_the_guard_catches_each_form(tmp_path, line):
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "x.py").write_text(f"x = 1\n{line}\n", encoding="utf-8")

    assert offences(tmp_path) and offences(tmp_path)[0].startswith("engine/x.py:2: ")


def test_the_public_names_do_not_trip_the_guard(tmp_path):
    (tmp_path / "replay").mkdir()
    (tmp_path / "replay" / "ok.py").write_text(
        "from turnlog.journal import connect_sql, dialect_of, journal_file\n"
        "from turnlog.journal.errors import JournalError\n", encoding="utf-8")

    assert offences(tmp_path) == []
