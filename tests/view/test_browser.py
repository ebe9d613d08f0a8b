"""What a person sees in a real browser: the list, a conversation, a fork, a diff, the audit
charts, live updates, the report opened offline — and a hostile transcript that runs nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from turnlog.engine.loop import Loop
from turnlog.engine.providers.scripted import ScriptedProvider
from turnlog.engine.tools import tool
from turnlog.engine.audit.views import EXTENSIONS
from turnlog.journal import Journal
from turnlog.replay.view import render_report
from turnlog.replay.view.render import href

from .browser import artifacts, chromium, server
from .journal_data import HOSTILE_ID, VISIBLE

_PWNED = "return typeof window.__pwned"
_LIVE_MARKUP = ("return document.querySelectorAll('[onerror], [onmouseover], [onclick], "
                "a[href^=\"javascript:\"]').length")


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return artifacts(tmp_path_factory)


def body(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def click(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.LINK_TEXT, text).click()


def no_alert(driver) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_list_conversation_fork_and_diff_as_a_person_sees_them(db, shots):
    with server(db) as url, chromium() as driver:
        from selenium.webdriver.support.ui import WebDriverWait

        driver.get(url + "/")
        text = body(driver)
        assert "Conversations" in text and "4 conversations" in text and "demo-fork" in text
        # every row's chain is verified once the list is shown (/chains), then filled in
        WebDriverWait(driver, 30).until(lambda d: "verifying" not in body(d)
                                        and "verify " not in body(d))
        assert body(driver).count("verified ✓") == 4, body(driver)
        driver.save_screenshot(str(shots / "1-list.png"))
        # shown again: painted at once from the last look, and each checked again after paint
        driver.get(url + "/")
        WebDriverWait(driver, 30).until(lambda d: not d.find_elements(
            "css selector", ".chain-recheck") and "verified ✓ (" in body(d))
        assert body(driver).count("verified ✓") == 4 and "verify" not in body(driver).replace(
            "verified", ""), body(driver)

        click(driver, "demo")
        text = body(driver)
        assert "Conversation demo" in text and "verified ✓" in text
        assert "What's the weather in Paris and in Atlantis" in text
        assert "tool call get_weather" in text and "tool failed" in text
        assert "refused: duplicate" in text and "completed" in text
        assert "forked as demo-fork at seq 6" in text and "replayed as demo-swap" in text
        driver.save_screenshot(str(shots / "2-conversation.png"))

        click(driver, "demo-fork")
        text = body(driver)
        assert "Conversation demo-fork" in text and "Fork of demo at seq 6" in text
        driver.save_screenshot(str(shots / "3-fork.png"))
        click(driver, "diff with the parent")
        text = body(driver)
        assert "Diff" in text and "A: demo" in text and "B: demo-fork" in text
        driver.save_screenshot(str(shots / "4-diff-fork.png"))

        driver.get(url + href("/conversation", id="demo"))
        from selenium.webdriver.common.by import By

        driver.find_elements(By.CSS_SELECTOR, "ul.links a.diff")[-1].click()
        text = body(driver)
        assert "DIFFERENT" in text and "scripted/other-model" in text
        assert "Checking Paris only." in text
        driver.save_screenshot(str(shots / "5-diff-replay.png"))

        click(driver, "Audit")
        text = body(driver)
        assert "Tool failure rate" in text and "get_weather" in text
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.chart rect")) > 5
        driver.save_screenshot(str(shots / "6-audit.png"))
        assert not severe(driver)


def test_a_hostile_transcript_renders_as_text_and_runs_nothing(db, shots, tmp_path):
    report = tmp_path / "hostile.html"
    report.write_text(render_report(str(db), HOSTILE_ID), encoding="utf-8")
    with server(db) as url, chromium() as driver:
        pages = {"list": url + "/", "conversation": url + href("/conversation", id=HOSTILE_ID),
                 "diff": url + href("/diff", a=HOSTILE_ID, b="demo"), "audit": url + "/audit",
                 "report": report.as_uri()}
        for name, page in pages.items():
            driver.get(page)
            time.sleep(0.3)  # an onerror handler would have fired by now
            assert no_alert(driver), name
            assert driver.execute_script(_PWNED) == "undefined", name
            assert driver.execute_script(_LIVE_MARKUP) == 0, name
            if name != "audit":
                assert HOSTILE_ID in body(driver) or VISIBLE in body(driver), name
            driver.save_screenshot(str(shots / f"hostile-{name}.png"))
        driver.get(pages["conversation"])
        assert VISIBLE in body(driver) and HOSTILE_ID in body(driver)


def test_the_report_opens_offline_and_shows_the_timeline(db, shots, tmp_path):
    report = tmp_path / "demo.html"
    report.write_text(render_report(str(db), "demo"), encoding="utf-8")
    # every request but file:// goes to a dead proxy: the network is off for this browser
    with chromium("--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>") as driver:
        driver.get(report.as_uri())
        text = body(driver)
        assert "turnlog report" in text and "Conversation demo" in text
        assert "What's the weather in Paris and in Atlantis" in text
        assert "tool failed" in text and "refused: duplicate" in text and "verified ✓" in text
        from selenium.webdriver.common.by import By

        # the inline script ran (its CSP hash allowed it) and the inline style applies
        assert driver.execute_script("return document.body.dataset.js") == "on"
        details = driver.find_elements(By.TAG_NAME, "details")
        toggle = driver.find_element(By.ID, "toggle-all")
        assert toggle.is_displayed() == bool(details)
        assert driver.execute_script(
            "return getComputedStyle(document.querySelector('header.top')).display") == "flex"
        assert not severe(driver)
        driver.save_screenshot(str(shots / "7-report-offline.png"))


class _Gate:
    """A tool that waits until the test lets it finish, so a run is caught half-way."""

    def __init__(self) -> None:
        self.release = threading.Event()

        @tool(effect="read_only")
        def slow(n: int) -> dict:
            """Wait for the gate.

            Args:
                n: anything
            """
            self.release.wait(60)
            return {"n": n}

        self.tool = slow


def test_live_pages_follow_appends_from_another_writer(db, shots):
    from selenium.webdriver.support.ui import WebDriverWait

    gate = _Gate()
    script = [{"tool_calls": [{"name": "slow", "arguments": {"n": 1}}]}, {"text": "all done"}]

    def run() -> None:
        with Journal(db, extensions=EXTENSIONS) as journal:
            Loop(journal, ScriptedProvider(script), [gate.tool]).start(
                "go live", conversation_id="live-run")

    with server(db) as url, chromium() as driver:
        driver.get(url + "/")
        WebDriverWait(driver, 30).until(
            lambda d: d.find_element("id", "live-status").is_displayed())
        writer = threading.Thread(target=run)
        writer.start()
        try:
            WebDriverWait(driver, 30).until(lambda d: "live-run" in body(d))
            driver.save_screenshot(str(shots / "8-live-list.png"))
            driver.get(url + href("/conversation", id="live-run"))
            assert "active" in body(driver) and "all done" not in body(driver)
            WebDriverWait(driver, 30).until(
                lambda d: d.find_element("id", "live-status").is_displayed())
            gate.release.set()
            WebDriverWait(driver, 30).until(lambda d: "all done" in body(d))
            assert "completed" in body(driver)
            driver.save_screenshot(str(shots / "9-live-conversation.png"))
        finally:
            gate.release.set()
            writer.join(60)
