"""The registry browser page in a real headless browser (Debian's chromium, driven through chromedriver): the tree
expands and collapses with sizes, a search lists services, a click shows a service's details, and a token-guarded
server asks for the token. Set A2X_SCREENSHOT_DIR to keep the screenshot (docs/serve-page.png is one)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.search.a2x_helpers import make_tree
from tests.serve.helpers import running_server, store_tree
from tests.support.registries import make_registry

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)")

SHAPE = {
    "root": ("All services", []),
    "root/1": ("Travel", []),
    "root/1/1": ("Flights and hotels", ["flights", "hotels"]),
    "root/1/2": ("Eating out", ["restaurants"]),
    "root/2": ("Money", ["currency", "stocks"]),
    "root/3": ("Communication", ["email", "calendar", "translate"]),
    "root/4": ("Information", ["weather", "news"]),
}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,860"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    selenium = pytest.importorskip("selenium", reason="the page test drives chromium with selenium")
    from selenium.webdriver.chrome.service import Service

    options = selenium.webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    # An explicit driver path: selenium's own driver manager (which would download one) never runs.
    driver = selenium.webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def page_registry(db_path: Path) -> int:
    make_registry(db_path)
    return store_tree(db_path, make_tree(SHAPE), activate=True)


def wait_for(driver, css: str, timeout: float = 30):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(expected_conditions.visibility_of_element_located((By.CSS_SELECTOR,
                                                                                                   css)))


def test_tree_search_and_details_in_a_real_browser(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    build_id = page_registry(db_path)
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/")
        wait_for(browser, "body[data-ready='1']")
        assert f"tree {build_id}" in browser.find_element(By.ID, "tree-info").text
        travel = wait_for(browser, "li[data-node='root/1']")
        assert travel.find_element(By.CLASS_NAME, "size").text == "3"
        rows = [r.text.split("\n") for r in browser.find_elements(By.CSS_SELECTOR, "#tree > li > .node-row")]
        assert [r[1] for r in rows] == ["Travel", "Money", "Communication", "Information"]

        # Expand, collapse, expand again; then one level deeper to the services.
        row = travel.find_element(By.CLASS_NAME, "node-row")
        row.click()
        wait_for(browser, "li[data-node='root/1/1']")
        assert travel.get_attribute("aria-expanded") == "true"
        row.click()
        WebDriverWait(browser, 10).until(lambda d: travel.get_attribute("aria-expanded") == "false")
        assert not browser.find_element(By.CSS_SELECTOR, "li[data-node='root/1/1']").is_displayed()
        row.click()
        browser.find_element(By.CSS_SELECTOR, "li[data-node='root/1/1'] > .node-row").click()
        wait_for(browser, "a[data-service='hotels']").click()
        details = wait_for(browser, "#details[data-service='hotels']")
        assert "bookHotel" in details.text and "Travel › Flights and hotels" in details.text

        # Search with a chosen method; only the methods this server can run are offered (no model: no a2x, but
        # compose, which decomposes by the rules without one).
        methods = Select(browser.find_element(By.ID, "method"))
        assert {o.text for o in methods.options} == {"bm25", "compose", "dense", "hybrid"}
        methods.select_by_visible_text("bm25")
        browser.find_element(By.ID, "query").send_keys("weather forecast for a city")
        browser.find_element(By.ID, "search-button").click()
        first = wait_for(browser, "#results li[data-service]")
        assert first.get_attribute("data-service") == "weather"
        assert "results with bm25" in browser.find_element(By.ID, "message").text
        first.click()
        wait_for(browser, "#details[data-service='weather']")
        browser.find_element(By.CSS_SELECTOR, "li[data-node='root/4'] > .node-row").click()
        wait_for(browser, "a[data-service='news']")

        shot = tmp_path / "serve-page.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        if os.environ.get("A2X_SCREENSHOT_DIR"):
            shutil.copy(shot, Path(os.environ["A2X_SCREENSHOT_DIR"]) / "serve-page.png")


def test_the_page_asks_for_the_token_of_a_guarded_server(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By

    page_registry(db_path)
    with running_server(db_path, tmp_path / "home", "--token", "s3cret") as url:
        browser.get(url + "/")
        wait_for(browser, "#token-form").find_element(By.ID, "token").send_keys("s3cret\n")
        wait_for(browser, "body[data-ready='1']")
        assert wait_for(browser, "li[data-node='root/2']").find_element(By.CLASS_NAME, "size").text == "2"
