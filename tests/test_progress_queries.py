"""`search --queries FILE` and `compose --queries FILE` are long work: piped (or with --json) they write progress
lines on stderr like index, build and eval, a line per chunk of queries (`[evaluation] batch_size`), while stdout
keeps only the answers (issue 33, item 3)."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import DATA

SMALL = DATA / "sample_small"


@pytest.fixture
def chunked(cli, tmp_path, monkeypatch):
    """The small sample ingested, a line on every report, and chunks of 5 queries."""
    config = tmp_path / "config.toml"
    config.write_text("[evaluation]\nbatch_size = 5\n", encoding="utf-8")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    monkeypatch.setenv("A2X_PROGRESS_EVERY_S", "0")
    code, _, err = cli("ingest", str(SMALL / "services.json"))
    assert code == 0, err
    return cli


def _lines(err: str, command: str, stage: str = "") -> list[str]:
    """The command's progress lines (of ``stage`` when given: with a line on every report, "working, 0 s" lines
    come between stages too)."""
    return [line for line in err.splitlines() if line.startswith(f"{command}: {stage}")]


def _counts(lines: list[str]) -> list[str]:
    """How far each line says the stage got, once each (the ticker repeats a count while a chunk runs)."""
    counts = [line.split(": ")[2].split(",")[0] for line in lines[1:]]
    return [count for count in dict.fromkeys(counts) if not count.startswith("0/")]


def test_a_file_of_searches_says_how_far_it_got(chunked) -> None:
    code, out, err = chunked("search", "--queries", str(SMALL / "queries.json"), "-m", "bm25", "--json")
    assert code == 0, err
    assert len(json.loads(out)["results"]) == 20                      # stdout: the answers only
    lines = _lines(err, "search", "searching")
    assert lines[0] == "search: searching 20 queries: started (20)", lines
    assert _counts(lines) == ["5/20", "10/20", "15/20", "20/20"] and lines[-1].endswith(", done"), lines


def test_a_file_of_plans_says_how_far_it_got(chunked) -> None:
    code, out, err = chunked("compose", "--queries", str(SMALL / "queries.json"), "-m", "bm25", "--json")
    assert code == 0, err
    assert len(json.loads(out)["plans"]) == 20
    lines = _lines(err, "compose", "planning")
    assert lines[0] == "compose: planning 20 requests: started (20)" and lines[-1].endswith(", done"), lines
    assert _counts(lines) == ["5/20", "10/20", "15/20", "20/20"], lines


def test_one_search_writes_no_progress_lines(chunked) -> None:
    code, _, err = chunked("search", "convert currencies", "-m", "bm25", "--json")
    assert code == 0 and not _lines(err, "search"), err
