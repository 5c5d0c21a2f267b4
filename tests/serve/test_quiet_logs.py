"""Libraries that turn on their own debug logging stay quiet on the server's stderr unless --verbose (issue 21,
finding 10: bm25s wrote a DEBUG line per index built through the handler the MCP SDK puts on the root logger)."""

from __future__ import annotations

import logging

import httpx

from a2x_local.cli.app import quiet_libraries
from tests.serve.helpers import registry_with_trees, running_server


def test_a_server_does_not_print_library_debug_lines(db_path, tmp_path):
    registry_with_trees(db_path)
    home = tmp_path / "home"
    with running_server(db_path, home) as url:
        found = httpx.post(f"{url}/v1/search", json={"query": "the h1 thing", "method": "bm25"}, timeout=120)
        assert found.status_code == 200 and found.json()["hits"]
    log = "".join(path.read_text(encoding="utf-8") for path in home.glob("server-*.log"))
    assert "a2x-local serving" in log                     # the log was captured
    assert "Building index" not in log and "DEBUG" not in log, log[-2000:]


def test_verbose_lets_them_through():
    logger = logging.getLogger("bm25s")
    record = logger.makeRecord("bm25s", logging.DEBUG, __file__, 1, "Building index from tokens", (), None)
    try:
        quiet_libraries(verbose=False)
        quiet_libraries(verbose=False)                     # idempotent: one filter
        assert not logger.filter(record) and len(logger.filters) == 1
        quiet_libraries(verbose=True)
        assert logger.filter(record)
    finally:
        quiet_libraries(verbose=False)
