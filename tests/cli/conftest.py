"""Running ``turnlog`` as a user does: the installed console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).parent / "turnlog"
#: The command line that starts turnlog: the console script, else ``python -m engine.cli``.
TURNLOG = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "turnlog.engine.cli"]


def env(**extra: str) -> dict[str, str]:
    """The environment a user's shell has (no TURNLOG_DB, no colour forced)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")}
    base.update(extra)
    return base


def turnlog(*args: object, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess:
    """Run ``turnlog ARGS...`` and return its exit code, stdout and stderr."""
    return subprocess.run([*TURNLOG, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env(**extra), timeout=300)


def write_script(path: Path, *turns: dict) -> Path:
    """A scripted provider's script file."""
    path.write_text(json.dumps({"turns": list(turns)}), encoding="utf-8")
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "j.db"
