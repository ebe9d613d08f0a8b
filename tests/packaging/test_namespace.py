"""turnlog installs one top-level package: a user's own engine.py, journal.py or replay.py
never shadows it, and the wheel holds nothing else at the top of site-packages."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_project_with_its_own_engine_journal_and_replay_modules_imports_turnlog(tmp_path):
    for name in ("engine", "journal", "replay"):
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py was imported')\n")
    code = ("import turnlog, turnlog.engine.cli, turnlog.replay.cli, turnlog.journal\n"
            "j = turnlog.Journal('j.db')\n"
            "r = turnlog.Loop(j, turnlog.ScriptedProvider([{'text': 'hi'}]), []).start('x')\n"
            "assert r.completed and j.verify().ok\n"
            "print(turnlog.engine.__name__, turnlog.journal.__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["turnlog.engine", "turnlog.journal"]


def test_the_wheel_installs_only_the_turnlog_package(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    [wheel] = tmp_path.glob("turnlog-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"turnlog"}
    for module in ("turnlog/engine/loop/loop.py", "turnlog/journal/_journal.py", "turnlog/replay/driver.py",
                   "turnlog/engine/audit/prices.py", "turnlog/replay/view/templates/base.html"):
        assert module in names, module
    assert not any("/tests/" in name or name.startswith("tests/") for name in names)


def test_turnlog_replay_is_the_package_and_runs_a_replay_when_called(tmp_path):
    code = ("import turnlog\n"
            "import turnlog.replay.cli as cli\n"  # the 'import a.b.c as m' form reaches the package
            "from turnlog import replay\n"
            "assert replay is turnlog.replay and replay.__name__ == 'turnlog.replay'\n"
            "assert cli.__name__ == 'turnlog.replay.cli'\n"
            "j = turnlog.Journal('j.db')\n"
            "turnlog.Loop(j, turnlog.ScriptedProvider([{'text': 'hi'}]), []).start('x', conversation_id='c')\n"
            "result = replay(j, 'c')\n"
            "assert result.ok and result.checked == 5 and replay.replay(j, 'c') == result\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
