"""Engine start-up output goes to a log file in normal CLI use, and stays on the terminal with --verbose."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from a2x_local.llm.startup_log import engine_startup, send_startup_output_to, startup_log_file


@pytest.fixture(autouse=True)
def _restore():
    before = startup_log_file()
    yield
    send_startup_output_to(before)


def test_everything_printed_while_an_engine_starts_lands_in_the_log(tmp_path: Path, capfd) -> None:
    log = tmp_path / "logs" / "engine.log"
    send_startup_output_to(log)
    with engine_startup("model A"):
        os.write(1, b"c-level stdout\n")
        os.write(2, b"c-level stderr\n")
        print("python warning", file=sys.stderr)
    with engine_startup("model B"):
        print("second start", flush=True)
    captured = capfd.readouterr()
    text = log.read_text()
    for line in ("=== starting model A ===", "c-level stdout", "c-level stderr", "python warning",
                 "=== starting model B ===", "second start"):
        assert line in text
    assert "c-level" not in captured.out + captured.err and "second start" not in captured.out
    assert captured.err.count("engine start-up log:") == 1 and str(log) in captured.err   # said once


def test_without_a_log_file_output_stays_where_it_was(capfd) -> None:
    send_startup_output_to(None)
    with engine_startup("model C"):
        os.write(2, b"visible\n")
    assert "visible" in capfd.readouterr().err


def test_the_cli_logs_by_default_and_verbose_shows_it(cli, tmp_path: Path, home: Path) -> None:
    assert cli("stats", "--json").code == 0
    assert startup_log_file() == home.resolve() / "logs" / "engine.log"
    assert cli("--verbose", "stats", "--json").code == 0
    assert startup_log_file() is None
