"""``turnlog proxy`` as a user runs it: the installed console script in a subprocess."""

from __future__ import annotations

import signal
import subprocess

from tests.cli.conftest import TURNLOG, env, turnlog
from tests.providerkit import script_three_turns

from .clients import run_anthropic, run_openai
from .test_record import TYPES, conversations


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*TURNLOG, "proxy", "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env())
    line = proc.stdout.readline().strip()
    assert line.startswith("proxy on http://127.0.0.1:"), (line, proc.stderr.read())
    return proc, line.removeprefix("proxy on ")


def _stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


def test_the_command_records_a_client_then_replays_it_with_the_upstream_gone(
        fake_api, tmp_path):
    db = tmp_path / "agents.db"
    script_three_turns(fake_api, "openai")
    script_three_turns(fake_api, "anthropic")
    proc, url = _start("--db", str(db), "--upstream", f"openai={fake_api.base_url('openai')}",
                       "--upstream", f"anthropic={fake_api.base_url('anthropic')}")
    try:
        assert run_openai(url + "/v1") == run_anthropic(url, stream=True) == \
            "Paris is sunny and 2 + 3 = 5."
    finally:
        code, err = _stop(proc)
    assert code == 130, err  # Ctrl-C, as for every command; what was answered is recorded
    found = conversations(db)
    assert len(found) == 2 and all([e.type for e in events] == TYPES for events in found.values())
    assert turnlog("verify", "--db", db).returncode == 0
    for conv_id in found:  # the loop replays what the proxy recorded
        replayed = turnlog("replay", conv_id, "--db", db)
        assert replayed.returncode == 0 and "replayed identically" in replayed.stdout
    fake_api.stop()
    proc, url = _start("--db", str(db), "--replay")
    try:
        assert run_anthropic(url) == "Paris is sunny and 2 + 3 = 5."
    finally:
        _stop(proc)
    assert len(conversations(db)) == 2  # replay writes nothing


def test_bad_flags_are_refused_with_what_was_wrong(tmp_path):
    bad = turnlog("proxy", "--upstream", "mistral=http://x", "--db", tmp_path / "j.db")
    assert bad.returncode == 2
    assert "--upstream 'mistral=http://x': expected WIRE=URL with WIRE one of anthropic, gemini, openai" in bad.stderr
    lonely = turnlog("proxy", "--ignore", "user", "--db", tmp_path / "j.db")
    half = turnlog("proxy", "--to", "anthropic", "--db", tmp_path / "j.db")
    assert half.returncode == 2 and "--to and --model go together" in half.stderr
    assert lonely.returncode == 2 and "--ignore applies to --replay only" in lonely.stderr
    missing = turnlog("proxy", "--replay", "--db", tmp_path / "none.db")
    assert missing.returncode == 2 and "no journal at" in missing.stderr
    assert not (tmp_path / "j.db").exists() and not (tmp_path / "none.db").exists()
