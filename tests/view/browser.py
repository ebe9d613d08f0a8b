"""Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by Selenium, and a real
``turnlog view`` server for it. A missing browser is a test failure with the install command."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..cli.conftest import TURNLOG, env

CHROMIUM = os.environ.get("TURNLOG_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TURNLOG_CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage", "--window-size=1280,1600")


def require_browser() -> None:
    """Fail (never skip) when the browser or its driver is missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"the browser tests need {', '.join(missing)}: {INSTALL}", pytrace=False)


@contextmanager
def chromium(*extra: str) -> Iterator:
    """A headless Chromium with a fresh profile, closed afterwards."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="turnlog-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, *extra, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextmanager
def server(db: Path) -> Iterator[str]:
    """``turnlog view --db DB --port 0`` in a subprocess; yields its base URL."""
    proc = subprocess.Popen([*TURNLOG, "view", "--db", str(db), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("serving on "):
            raise AssertionError(f"turnlog view did not start: {line!r} {proc.stderr.read()}")
        yield line.removeprefix("serving on ")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: ``$TURNLOG_ARTIFACTS`` (CI keeps it), else a pytest temp dir."""
    where = os.environ.get("TURNLOG_ARTIFACTS")
    path = Path(where) if where else tmp_path_factory.getbasetemp() / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
