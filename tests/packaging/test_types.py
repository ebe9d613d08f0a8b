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
