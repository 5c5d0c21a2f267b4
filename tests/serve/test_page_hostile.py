"""The page against hostile service text (issue 21, finding 8), in a real headless chromium: an id holding ``../``
fetches that service and no other URL, and a right-to-left override in a name is shown as ``<U+202E>`` instead of
turning "safe-tool…gnp.exe" into "safe-toolexe.png"."""

from __future__ import annotations

import pytest

from a2x_local.registry import Service
from tests.search.a2x_helpers import make_tree
from tests.serve.helpers import running_server, store_tree
from tests.serve.test_page import CHROMEDRIVER, CHROMIUM, browser, wait_for  # noqa: F401  (browser: a fixture)
from tests.support.registries import make_registry

pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="needs Debian's chromium and chromium-driver")

TRAVERSAL = "tools/../../../v1/tree"
DISGUISED = "safe-tool\u202egnp.exe"


def test_hostile_ids_and_names_in_a_real_browser(db_path, tmp_path, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    make_registry(db_path, [Service(TRAVERSAL, "generic", "Path walker", "Walks paths in a file system."),
                            Service("disguise", "generic", DISGUISED, "Converts images to the PNG format.")])
    store_tree(db_path, make_tree({"root": ("All", [TRAVERSAL, "disguise"])}), activate=True)
    with running_server(db_path, tmp_path / "home") as url:
        browser.get(url + "/")
        wait_for(browser, "body[data-ready='1']")
        browser.find_element(By.ID, "query").send_keys("walks paths in a file system")
        browser.find_element(By.ID, "search-button").click()
        wait_for(browser, f"#results li[data-service='{TRAVERSAL}']").click()
        details = wait_for(browser, "#details[data-service]")
        assert details.get_attribute("data-service") == TRAVERSAL
        assert "Path walker" in details.text and "Walks paths" in details.text

        browser.find_element(By.ID, "query").clear()
        browser.find_element(By.ID, "query").send_keys("converts images to png")
        browser.find_element(By.ID, "search-button").click()
        hit = wait_for(browser, "#results li[data-service='disguise']")
        assert "safe-tool<U+202E>gnp.exe" in hit.text and "\u202e" not in hit.text
        hit.click()
        details = wait_for(browser, "#details[data-service='disguise']")
        assert "safe-tool<U+202E>gnp.exe" in details.text and "\u202e" not in details.text
