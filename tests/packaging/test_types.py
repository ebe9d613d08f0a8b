"""The type checker as part of the suite (CI runs only the tests): ``python -m mypy`` with the
project's ``[tool.mypy]`` (strict on the journal and the engine's core) reports no error."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_configured_packages_type_check_strictly():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True and "turnlog.journal" in config["packages"]

    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


def test_the_journal_shows_type_checkers_exactly_the_names_it_exports():
    """``turnlog.journal`` exports lazily; its ``if TYPE_CHECKING:`` imports are the same table."""
    import ast

    import turnlog.journal

    tree = ast.parse((ROOT / "journal" / "__init__.py").read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If)
               and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    seen = {(f".{node.module}" if node.level else node.module): {a.name for a in node.names}
            for node in block.body if isinstance(node, ast.ImportFrom)}

    assert seen == {module: set(names) for module, names in turnlog.journal._EXPORTS.items()}
