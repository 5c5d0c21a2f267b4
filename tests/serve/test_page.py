"""The registry browser page in a real headless browser (Debian's chromium, driven through chromedriver): the tree
expands and collapses with sizes, a search lists services (filtered by type), a click shows a service's details
(a root-filed one as filed at the root), a plan shows its steps with their services and alternatives, deep links
open a search, a plan or a service, every new search or error clears what was on screen, the limits come from the
server, and the page works 400 px wide. Set A2X_SCREENSHOT_DIR to keep the screenshots (docs/serve-page*.png)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.search.a2x_helpers import make_tree
from tests.serve.helpers import running_server, store_tree
from tests.support.registries import SERVICES, make_registry

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium chromium-driver)")

SHAPE = {
    "root": ("All services", ["news"]),
    "root/1": ("Travel", []),
    "root/1/1": ("Flights and hotels", ["flights", "hotels"]),
    "root/1/2": ("Eating out", ["restaurants"]),
    "root/2": ("Money", ["currency", "stocks"]),
    "root/3": ("Communication", ["email", "calendar", "translate"]),
    "root/4": ("Information", ["weather"]),
}
TYPES = {"email": "mcp_tool", "calendar": "mcp_tool", "translate": "skill", "weather": "a2a"}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,900"]


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
    make_registry(db_path, [dataclasses.replace(s, type=TYPES.get(s.id, s.type)) for s in SERVICES])
    return store_tree(db_path, make_tree(SHAPE), activate=True)


def wait_for(driver, css: str, timeout: float = 30):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(expected_conditions.visibility_of_element_located((By.CSS_SELECTOR,
                                                                                                   css)))


def until(driver, condition, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition())


def screenshot(driver, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    if os.environ.get("A2X_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["A2X_SCREENSHOT_DIR"]) / name)


def test_tree_search_details_and_cleared_state_in_a_real_browser(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    build_id = page_registry(db_path)
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/")
        wait_for(browser, "body[data-ready='1']")
        assert f"tree {build_id}" in browser.find_element(By.ID, "tree-info").text
        travel = wait_for(browser, "li[data-node='root/1']")
        assert travel.find_element(By.CLASS_NAME, "size").text == "3"
        rows = [r.text.split("\n") for r in browser.find_elements(By.CSS_SELECTOR, "#tree > li > .node-row")]
        assert [r[1] for r in rows] == ["Travel", "Money", "Communication", "Information"]
        # The limits come from the server.
        assert browser.find_element(By.ID, "k").get_attribute("max") == "100"
        assert browser.find_element(By.ID, "query").get_attribute("maxlength") == "4000"

        # Expand, collapse, expand again; then one level deeper to the services.
        row = travel.find_element(By.CLASS_NAME, "node-row")
        row.click()
        wait_for(browser, "li[data-node='root/1/1']")
        assert travel.get_attribute("aria-expanded") == "true"
        row.click()
        until(browser, lambda: travel.get_attribute("aria-expanded") == "false")
        assert not browser.find_element(By.CSS_SELECTOR, "li[data-node='root/1/1']").is_displayed()
        row.click()
        browser.find_element(By.CSS_SELECTOR, "li[data-node='root/1/1'] > .node-row").click()
        wait_for(browser, "a[data-service='hotels']").click()
        details = wait_for(browser, "#details[data-service='hotels']")
        assert "bookHotel" in details.text and "Travel › Flights and hotels" in details.text
        assert "#/service/hotels" in browser.current_url

        # A service filed at the root says so.
        wait_for(browser, "#tree > li > a[data-service='news']").click()
        assert "Filed under: the root (All services)" in wait_for(browser, "#details[data-service='news']").text

        # Search: only the methods this server can search with are offered (compose plans, with its own button).
        methods = Select(browser.find_element(By.ID, "method"))
        assert {o.text for o in methods.options} == {"bm25", "dense", "hybrid"}
        methods.select_by_visible_text("bm25")
        browser.find_element(By.ID, "query").send_keys("weather forecast for a city")
        browser.find_element(By.ID, "search-button").click()
        first = wait_for(browser, "#results li[data-service]")
        assert first.get_attribute("data-service") == "weather"
        assert "results with bm25" in browser.find_element(By.ID, "message").text
        # The new search cleared the details that were on screen.
        assert not browser.find_element(By.ID, "details").is_displayed()
        first.click()
        wait_for(browser, "#details[data-service='weather']")
        screenshot(browser, tmp_path, "serve-page.png")

        # The type filter keeps only services of that type.
        Select(browser.find_element(By.ID, "type")).select_by_value("mcp_tool")
        browser.find_element(By.ID, "query").clear()
        browser.find_element(By.ID, "query").send_keys("send an email message or create a calendar event for a city")
        browser.find_element(By.ID, "search-button").click()
        until(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#results li[data-service]") and
              not browser.find_element(By.ID, "details").is_displayed())
        found = {li.get_attribute("data-service") for li in
                 browser.find_elements(By.CSS_SELECTOR, "#results li[data-service]")}
        assert found == {"email", "calendar"}

        # An error clears the results and says what went wrong.
        browser.get(url + "/#/search?q=" + "x" * 4001)
        message = wait_for(browser, "#message .error")
        assert "4,000" in message.text and not browser.find_elements(By.CSS_SELECTOR, "#results li")


def test_plans_and_deep_links_in_a_real_browser(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page_registry(db_path)
    with running_server(db_path, tmp_path / "home") as url:
        # A deep link to a service.
        browser.get(url + "/#/service/hotels")
        assert "bookHotel" in wait_for(browser, "#details[data-service='hotels']").text

        # A deep link to a search runs it.
        browser.get(url + "/#/search?q=" + quote("convert money to another currency") + "&method=bm25&k=3")
        first = wait_for(browser, "#results li[data-service]")
        assert first.get_attribute("data-service") == "currency"
        assert browser.find_element(By.ID, "k").get_attribute("value") == "3"

        # The plan view: request -> steps, each with its service and alternatives.
        request = "find a hotel room in Lyon, then tell my team with sendEmail"
        browser.find_element(By.ID, "query").clear()
        browser.find_element(By.ID, "query").send_keys(request)
        Select(browser.find_element(By.ID, "method")).select_by_value("hybrid")   # k stays 3, from the link
        browser.find_element(By.ID, "plan-button").click()
        plan = wait_for(browser, "#plan li.step")
        assert plan is not None and "#/plan?q=" in browser.current_url
        steps = browser.find_elements(By.CSS_SELECTOR, "#plan li.step")
        assert len(steps) == 2 and not browser.find_elements(By.CSS_SELECTOR, "#results li")
        chosen = [step.find_element(By.CSS_SELECTOR, ".choice a").get_attribute("data-service") for step in steps]
        assert chosen == ["hotels", "email"]
        # the second step names its service: the page says so, and only there
        assert [bool(step.find_elements(By.CSS_SELECTOR, ".badge.named")) for step in steps] == [False, True]
        assert all(step.find_elements(By.CSS_SELECTOR, ".alternatives a") for step in steps)
        assert "Plan: " + request in browser.find_element(By.ID, "plan").text
        # The steps are searched with the method and k on the controls (hybrid, and 3 from the search link above).
        assert "searched with hybrid" in browser.find_element(By.ID, "plan").text
        assert "method=hybrid" in browser.current_url and "k=3" in browser.current_url
        assert all(len(step.find_elements(By.CSS_SELECTOR, ".alternatives a")) <= 2 for step in steps)
        screenshot(browser, tmp_path, "serve-page-plan.png")
        # A plan's service opens its details.
        steps[0].find_element(By.CSS_SELECTOR, ".choice a").click()
        wait_for(browser, "#details[data-service='hotels']")

        # The same plan by its link, in a fresh page.
        link = browser.current_url
        browser.get(url + "/#/plan?q=" + quote(request))
        assert len(wait_for(browser, "#plan").find_elements(By.CSS_SELECTOR, "li.step")) == 2
        assert link


def test_the_page_is_usable_400_px_wide(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By

    page_registry(db_path)
    browser.set_window_size(400, 860)
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/#/search?q=" + quote("weather forecast") + "&method=bm25")
        wait_for(browser, "#results li[data-service]")
        width = browser.execute_script("return document.documentElement.clientWidth")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width
        for element_id in ("query", "method", "type", "k", "search-button", "plan-button"):
            box = browser.find_element(By.ID, element_id).rect
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (element_id, box, width)
        screenshot(browser, tmp_path, "serve-page-narrow.png")


def test_the_page_asks_for_the_token_of_a_guarded_server(db_path, tmp_path, browser):
    from selenium.webdriver.common.by import By

    page_registry(db_path)
    with running_server(db_path, tmp_path / "home", "--token", "s3cret") as url:
        browser.get(url + "/")
        wait_for(browser, "#token-form").find_element(By.ID, "token").send_keys("s3cret\n")
        wait_for(browser, "body[data-ready='1']")
        assert wait_for(browser, "li[data-node='root/2']").find_element(By.CLASS_NAME, "size").text == "2"


def test_deep_links_say_what_they_run_and_leave_nothing_of_the_previous_one(db_path, tmp_path, browser):
    """Issue 33, item 10 (and issue 32, finding 14): an unknown method or type in a link is an error naming the
    valid ones (not a silent default), a link without `k` or `method` runs the defaults (not the previous link's),
    a link without a query clears the previous error, and a service link whose %-encoding is broken says so."""
    from selenium.webdriver.common.by import By

    page_registry(db_path)
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/#/search?q=" + quote("convert money to another currency") + "&method=hybrid&k=3")
        wait_for(browser, "#results li[data-service]")
        assert browser.find_element(By.ID, "k").get_attribute("value") == "3"
        message = browser.find_element(By.ID, "message")

        def go(hash_: str) -> None:
            browser.execute_script("location.hash = arguments[0];", hash_)

        # Without method and k: the server's defaults (bm25 and 10 in the tests' [serve]), not hybrid and 3.
        go("#/search?q=" + quote("weather forecast"))
        until(browser, lambda: "with bm25" in message.text)
        assert browser.find_element(By.ID, "k").get_attribute("value") == "10"
        assert browser.find_element(By.ID, "method").get_attribute("value") == "bm25"

        go("#/search?q=" + quote("weather forecast") + "&method=nosuch")
        until(browser, lambda: "unknown search method 'nosuch'" in message.text)
        assert "bm25" in message.text and "hybrid" in message.text
        assert not browser.find_elements(By.CSS_SELECTOR, "#results li")

        go("#/search?q=")
        until(browser, lambda: message.text == "")

        # An unknown type (the audit after issue 32): it was dropped and every type searched; now an error naming
        # the types this registry holds, and nothing runs.
        go("#/search?q=" + quote("weather forecast") + "&method=bm25")
        wait_for(browser, "#results li[data-service]")
        go("#/search?q=" + quote("weather forecast") + "&method=bm25&type=nosuch")
        until(browser, lambda: "unknown service type 'nosuch'" in message.text)
        assert "mcp_tool" in message.text and "skill" in message.text and "a2a" in message.text, message.text
        assert not browser.find_elements(By.CSS_SELECTOR, "#results li")

        go("#/search?q=" + quote("weather forecast") + "&method=bm25&type=a2a")     # a type it holds: searched
        until(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#results li[data-service]"))
        assert browser.find_element(By.ID, "type").get_attribute("value") == "a2a"
        assert "unknown" not in message.text
        shown = [item.get_attribute("data-service") for item in
                 browser.find_elements(By.CSS_SELECTOR, "#results li[data-service]")]
        assert shown == ["weather"], shown

        go("#/search?q=")
        until(browser, lambda: message.text == "")

        go("#/service/%E0%A4%A")
        until(browser, lambda: "not valid percent-encoding" in message.text)
        assert "%E0%A4%A" in message.text


def test_links_the_page_cannot_run_as_written_are_errors_naming_what_exists(db_path, tmp_path, browser):
    """Issue 32, fourth round: a k out of bounds was changed without a word (`k=-5` ran with 1; `0`, `abc` and an
    empty k with 10; `1e9` with max_k); unknown pages (`#/nosuch`, `#/SEARCH`, `#search`, `#/search/`) showed
    nothing; an unknown parameter, or `type` on a plan, was dropped; `#/service/%2E%2E` fetched /v1/ (the browser
    resolves a `..` step, encoded or not) and showed a bare "Not Found". Each is now an error, and nothing runs."""
    from selenium.webdriver.common.by import By

    page_registry(db_path)
    query = quote("weather forecast")
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/#/search?q=" + query + "&method=bm25&k=3")
        wait_for(browser, "#results li[data-service]")
        message = browser.find_element(By.ID, "message")

        def shows(hash_: str, *said: str) -> None:
            browser.execute_script("location.hash = '#/search?q=';")       # a clean page between the cases
            until(browser, lambda: message.text == "")
            browser.execute_script("location.hash = arguments[0];", hash_)
            until(browser, lambda: bool(browser.find_elements(By.CSS_SELECTOR, "#message .error")))
            assert all(text in message.text for text in said), (hash_, message.text)
            assert not browser.find_elements(By.CSS_SELECTOR, "#results li, #plan li"), hash_

        for k in ("-5", "0", "abc", "", "1e9", "101", "2.5"):
            shows(f"#/search?q={query}&k={quote(k)}", "k in this link must be a whole number from 1 to 100",
                  f"it is '{k}'")
        shows(f"#/plan?q={query}&k=0", "from 1 to 100")
        # The names of every JavaScript object's own properties too (fifth round, F10: the page looked its pages up
        # in an object, found Object.prototype's members, and threw "allowed.includes is not a function").
        for page in ("/nosuch", "/SEARCH", "search", "/search/", "constructor", "__proto__", "toString",
                     "hasOwnProperty", "valueOf"):
            shows(f"#{page}?q={query}", f"unknown page '#{page}'", "#/search?q=", "#/plan?q=", "#/service/ID")
        shows("#constructor", "unknown page '#constructor'")
        shows(f"#/search?q={query}&mode=nosuch", "unknown parameter 'mode' in this #/search link",
              "q, method, type and k")
        shows(f"#/plan?q={query}&type=a2a", "unknown parameter 'type' in this #/plan link", "q, method and k")
        shows(f"#/search?q={query}&k=3&k=4", "'k' is given twice")
        for step in ("%2E%2E", "%2e", ".."):
            shows("#/service/" + step, "is not a service id: no id is '.' or '..'")
        shows("#/service/", "this link names no service")

        browser.execute_script("location.hash = arguments[0];", f"#/search?q={query}&method=bm25&k=100")
        until(browser, lambda: bool(browser.find_elements(By.CSS_SELECTOR, "#results li[data-service]")))
        assert "error" not in message.get_attribute("innerHTML")
        # straight after a search (no clean page between): the error replaces its results (F10: they stayed)
        browser.execute_script("location.hash = arguments[0];", "#toString?q=stocks")
        until(browser, lambda: bool(browser.find_elements(By.CSS_SELECTOR, "#message .error")))
        assert "unknown page '#toString'" in message.text
        assert not browser.find_elements(By.CSS_SELECTOR, "#results li, #plan li")
