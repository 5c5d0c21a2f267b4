"""A search that finds nothing is an ordinary answer: "no services found" and exit 0 in every method and output
form (a table once crashed computing its widths from no rows: "'int' object is not iterable", exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import a2x_local.cli.search_cmds as search_cmds
from a2x_local.search import NONE, SearchAnswer
from a2x_local.testing import ScriptedEngine
from tests.support.registries import SERVICES

NOTHING = "zzzqqqxxyy"
NO_HITS = "no services found"
NOTHING_ENGINE = ["--engine", "nothing", "--model", "nothing"]   # a model that selects nothing, asked anything


@pytest.fixture
def nothing_engine(use_engine):
    use_engine("nothing", lambda config: ScriptedEngine(lambda request: NONE))


@pytest.fixture
def with_tree(registry_db: Path, cli, tmp_path: Path) -> Path:
    """The registry with an imported one-level tree, for the A2X descent."""
    tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "Every service.", "children": [
        {"name": "Travel", "description": "Trips.", "services": ["flights", "hotels"]},
        {"name": "Other", "description": "The rest.",
         "services": [s.id for s in SERVICES if s.id not in ("flights", "hotels")]}]}}
    path = tmp_path / "tree.json"
    path.write_text(json.dumps(tree), encoding="utf-8")
    assert cli("tree", "import", path).code == 0
    return registry_db


def assert_no_hits(cli, *args: str) -> None:
    shown = cli("search", *args)
    assert shown.code == 0, shown.err
    assert NO_HITS in shown.out and "error" not in shown.err, shown.out + shown.err
    data = cli("search", *args, "--json")
    assert data.code == 0, data.err
    assert data.json()["hits"] == [] and data.json()["query"] == NOTHING and data.err == ""


def test_bm25_finds_no_word_of_the_query(registry_db, cli):
    assert_no_hits(cli, NOTHING, "-m", "bm25")
    assert_no_hits(cli, NOTHING, "-m", "bm25", "--trace")
    traced = cli("search", NOTHING, "-m", "bm25", "--trace").out
    assert "no trace: this method makes no model decisions" in traced and "?, -" not in traced, traced


def test_a_file_of_queries_with_one_that_finds_nothing(registry_db, cli, tmp_path: Path):
    queries = tmp_path / "q.txt"
    queries.write_text(f"{NOTHING}\nweather forecast\n", encoding="utf-8")
    shown = cli("search", "--queries", queries, "-m", "bm25")
    assert shown.code == 0 and shown.out.count(NO_HITS) == 1 and "weather" in shown.out, shown.out + shown.err
    results = cli("search", "--queries", queries, "-m", "bm25", "--json").json()["results"]
    assert [len(r["hits"]) > 0 for r in results] == [False, True]


@pytest.mark.parametrize("method", ["full", "select"])
def test_a_model_that_selects_nothing_from_the_catalogue(registry_db, cli, nothing_engine, method: str):
    assert_no_hits(cli, NOTHING, "-m", method, *NOTHING_ENGINE, "--mode", "get_all")


def test_an_a2x_descent_that_selects_nothing(with_tree, cli, nothing_engine):
    assert_no_hits(cli, NOTHING, "-m", "a2x", *NOTHING_ENGINE, "--mode", "get_all", "-o", "direct_select_below=0")
    assert_no_hits(cli, NOTHING, "-m", "a2x", *NOTHING_ENGINE, "--mode", "get_all", "-o", "direct_select_below=0",
                   "--trace")


@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_ranked_methods_that_return_nothing(registry_db, cli, monkeypatch, method: str):
    """Dense and hybrid rank every service, so nothing comes back only from an empty answer: played here by the
    real method with its hits taken away."""
    make = search_cmds.make_method

    class Empty:
        def __init__(self, inner) -> None:
            self.inner = inner

        def search_batch(self, requests):
            return [SearchAnswer(query=a.query, hits=[], ranked=a.ranked, seconds=a.seconds)
                    for a in self.inner.search_batch(requests)]

    monkeypatch.setattr(search_cmds, "make_method", lambda *args, **kwargs: Empty(make(*args, **kwargs)))
    assert_no_hits(cli, NOTHING, "-m", method)
