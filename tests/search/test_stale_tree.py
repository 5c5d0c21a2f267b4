"""A stale tree keeps serving: after ingests and removals, `search --method a2x` walks the tree it has, never offers a
service that is gone, and says how many registry services the tree does not place (trace, JSON, warning line)."""

from __future__ import annotations

import pytest

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry
from a2x_local.search.methods import make_method
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree, services_for, store_registry_and_tree

WANTED = {"find hotels": {"h1", "h2"}, "weather please": {"w1"}}


def change_registry(db_path, *, add=(), remove=()) -> None:
    with connect(db_path) as con, transaction(con):
        registry = Registry(con)
        if add:
            registry.insert(list(services_for(add).values()))
        if remove:
            registry.remove(list(remove))


def offered(oracle: Oracle) -> set[str]:
    return {option for request in oracle.seen if request.context["call"] != "descend"
            for option in request.context["options"]}


def test_after_an_ingest_and_a_removal_a2x_still_answers_and_says_so(db_path):
    build_id = store_registry_and_tree(db_path, sample_tree())
    change_registry(db_path, add=["new1", "new2"], remove=["h2"])
    oracle = Oracle(sample_tree(), WANTED)
    method = make_method("a2x", load_settings(db=db_path), db_path, engine=ScriptedEngine(oracle),
                         merge_threshold=0)
    answer = method.search_batch([SearchRequest("find hotels")])[0]
    assert answer.error is None and answer.ids == ["h1"]          # h2 is gone, and was never offered
    assert "h2" not in offered(oracle) and "h1" in offered(oracle)
    stale = answer.trace["stale"]
    assert stale["tree"] == build_id and stale["missing"] == 1
    assert stale["unplaced"] == 4                                  # new1, new2 and the unfiled x1, x2
    assert "stale" in stale["warning"] and "a2x-local build" in stale["warning"]
    assert method.describe()["stale"] == stale


def test_a_current_tree_carries_no_staleness(db_path):
    store_registry_and_tree(db_path, sample_tree())
    method = make_method("a2x", load_settings(db=db_path), db_path,
                         engine=ScriptedEngine(Oracle(sample_tree(), WANTED)))
    answer = method.search_batch([SearchRequest("find hotels")])[0]
    assert "stale" not in answer.trace and method.describe()["stale"] is None


def test_a_changed_description_alone_is_stale_too(db_path):
    store_registry_and_tree(db_path, sample_tree())
    with connect(db_path) as con:
        con.execute("UPDATE services SET description = 'Now does something else.', content_hash = 'changed'"
                    " WHERE id = 'w1'")
    method = make_method("a2x", load_settings(db=db_path), db_path,
                         engine=ScriptedEngine(Oracle(sample_tree(), WANTED)))
    stale = method.search_batch([SearchRequest("weather please")])[0].trace["stale"]
    assert stale["missing"] == 0 and "not placed" in stale["warning"]          # x1, x2 were never placed


@pytest.fixture
def scripted(use_engine):
    """`--engine scripted`: the oracle over the sample tree."""
    use_engine("scripted", lambda config: ScriptedEngine(Oracle(sample_tree(), WANTED)))


@pytest.mark.parametrize("method", ["a2x", "a2x+rescue"])
def test_the_cli_prints_a_warning_and_puts_it_in_the_json(db_path, cli, scripted, method):
    store_registry_and_tree(db_path, sample_tree())
    change_registry(db_path, add=["new1"], remove=["w2"])
    result = cli("search", "find hotels", "--method", method, "--engine", "scripted", "--json",
                 "-o", "merge_threshold=0")
    assert result.code == 0, result.err
    assert result.err.startswith("warning: the active tree") and "stale" in result.err
    data = result.json()
    assert data["warnings"] == [data["trace"]["stale"]["warning"]]
    assert data["trace"]["stale"]["missing"] == 1 and data["trace"]["stale"]["unplaced"] == 3
    assert {hit["service_id"] for hit in data["hits"]} == {"h1", "h2"}


def test_a_query_file_gets_the_warning_once(db_path, cli, scripted, tmp_path):
    store_registry_and_tree(db_path, sample_tree())
    change_registry(db_path, add=["new1"])
    queries = tmp_path / "q.txt"
    queries.write_text("find hotels\nweather please\n", encoding="utf-8")
    result = cli("search", "--queries", queries, "--method", "a2x", "--engine", "scripted", "--json")
    assert result.code == 0, result.err
    assert result.err.count("warning:") == 1 and len(result.json()["warnings"]) == 1
