"""The board in a real browser: Debian's headless Chromium driven by Selenium. Screenshots
land in artefacts/board/ (ignored by git) for a person to look at in review."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.board.conftest import board_server, cli
from workq.domain.authority import Authority
from workq.services.handle import Queue
from workq.services.queue import blocking, claims, dependencies, issues, notes

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
ARTEFACTS = Path(__file__).resolve().parents[2] / "artefacts" / "board"
WAIT = 60.0

MISSING = CHROMIUM is None or CHROMEDRIVER is None
if MISSING and os.environ.get("WORKQ_REQUIRE_BROWSER"):  # CI installed them: must be there
    raise RuntimeError("chromium or chromedriver is missing, and WORKQ_REQUIRE_BROWSER is set")
pytestmark = pytest.mark.skipif(
    MISSING, reason="needs Debian's chromium and chromium-driver (.ci/run installs them)"
)

if CHROMIUM and CHROMEDRIVER:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1400,900")
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTEFACTS / f"{name}.png"))


def until(driver: webdriver.Chrome, test: object) -> None:
    WebDriverWait(driver, WAIT).until(test)  # type: ignore[arg-type]


def test_a_new_issue_appears_live(db: Path, q: Queue, browser: webdriver.Chrome) -> None:
    first = issues.create(q, title="Write the release notes", labels=["docs"]).number
    held = issues.create(q, title="Fix the flaky test", priority="urgent").number
    waits = issues.create(q, title="Ship 1.0").number
    stuck = issues.create(q, title="Renew the certificate", issue_type="chore").number
    claims.claim(q, held, Authority.of({"agent-1"}))
    dependencies.depend(q, blocker=first, blocked=waits)
    blocking.block(
        q, stuck, "needs the admin password", by=Authority.overriding("admin", who="admin")
    )
    with board_server(db) as url:
        browser.get(f"{url}/")
        until(browser, lambda d: d.find_element(By.ID, "live").text.startswith("live"))
        cli(db, "create", "Arrives without a reload", "--priority", "high")
        until(
            browser, lambda d: "Arrives without a reload" in d.find_element(By.ID, "col-ready").text
        )
        assert "Fix the flaky test" in browser.find_element(By.ID, "col-in_progress").text
        assert "needs the admin password" in browser.find_element(By.ID, "col-blocked").text
        shot(browser, "board")
        assert browser.get_log("browser") == []  # no script error, no refused resource
        # Keys: "/" to the search box, "j" to the first card.
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("/")
        assert browser.switch_to.active_element.get_attribute("id") == "search"
        browser.switch_to.active_element.send_keys("\ue00c")  # Escape does nothing harmful
        browser.execute_script("document.activeElement.blur()")
        body.send_keys("j")
        first_card = browser.find_element(By.CSS_SELECTOR, ".card > a")
        assert browser.switch_to.active_element == first_card
        assert (first_card.get_attribute("href") or "").endswith("/issues/5")  # high: first
        # Phone width: one column, nothing wider than the screen.
        browser.set_window_size(390, 844)
        browser.get(f"{url}/")
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= browser.execute_script("return window.innerWidth")
        shot(browser, "board-phone")


def test_unblock_with_the_token_and_refused_without(
    db: Path, q: Queue, browser: webdriver.Chrome
) -> None:
    number = issues.create(q, title="Waiting for a person", description="Needs **you**.").number
    blocking.block(q, number, "asks a question", by=Authority.overriding("admin", who="admin"))
    with board_server(db, "--token", "let-me-in") as url:
        browser.get(f"{url}/issues/{number}")
        assert "needs its token" in browser.find_element(By.TAG_NAME, "h1").text
        browser.find_element(By.NAME, "token").send_keys("let-me-in")
        browser.find_element(By.CSS_SELECTOR, "form button").click()
        until(browser, lambda d: d.find_elements(By.ID, "col-ready"))
        browser.get(f"{url}/issues/{number}")
        browser.execute_script("localStorage.setItem('workq-board-name', 'alice')")
        browser.find_element(By.ID, "unblock").click()
        until(browser, lambda d: "Unblocked issue" in d.find_element(By.ID, "result").text)
        assert not issues.get(q, number).is_blocked
        shot(browser, "unblocked")
        # The same page, its cookie gone: the board refuses, the issue stays blocked.
        blocking.block(q, number, "blocked again", by=Authority.overriding("admin", who="admin"))
        # The page redraws itself on that change: click only once it has.
        until(browser, lambda d: "blocked again" in d.find_element(By.ID, "main").text)
        browser.delete_all_cookies()
        until(browser, lambda d: d.find_elements(By.ID, "unblock"))
        browser.find_element(By.ID, "unblock").click()
        until(browser, lambda d: "FORBIDDEN" in d.find_element(By.ID, "result").text)
        assert issues.get(q, number).is_blocked
        shot(browser, "refused")
    history = [(e.kind, e.actor) for e in notes.history(q, number)]
    assert ("unblocked", "board:alice") in history
