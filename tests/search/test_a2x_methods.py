"""The LLM methods through the method registry and the CLI: tree loading, refusals, --json and --trace."""

from __future__ import annotations

import dataclasses
import json

import pytest

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.registry import Registry
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.baselines import FullCatalogue, RetrieveSelect
from a2x_local.search.methods import make_method, method_spec, register_method, unregister_method
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree, services_for, store_registry_and_tree

WANTED = {"find hotels": {"h1", "h2"}}


def test_the_four_methods_are_registered_with_their_modes():
    for name in ("a2x", "a2x+rescue", "full", "select"):
        spec = method_spec(name)
        assert spec.name == name
        assert spec.modes == ("get_all", "get_important", "get_one")
    # None of them ranks: what they return is a set of chosen services (each method object says so itself).
    assert not any(cls.ranked for cls in (A2XSearch, FullCatalogue, RetrieveSelect))


def test_every_engine_option_is_an_llm_method_option():
    from a2x_local.llm import ENGINE_OPTION_NAMES
    from a2x_local.search.llm.methods import LlmOptions

    assert set(ENGINE_OPTION_NAMES) <= set(LlmOptions.model_fields)


def test_a2x_searches_the_active_tree_from_the_database(db_path):
    build_id = store_registry_and_tree(db_path, sample_tree())
    engine = ScriptedEngine(Oracle(sample_tree(), WANTED))
    method = make_method("a2x", load_settings(db=db_path), db_path, engine=engine, merge_threshold=0,
                         direct_select_below=0)
    answer = method.search_batch([SearchRequest("find hotels")])[0]
    assert answer.ids == ["h1", "h2"] and answer.trace["tree"] == build_id
    assert answer.hits[0].path == ["root", "root/1", "root/1/2"]
    assert method.config.merge_threshold == 0 and not method.ranked


def test_full_runs_from_the_database_without_a_tree(db_path):
    store_registry_and_tree(db_path)
    engine = ScriptedEngine(Oracle(sample_tree(), {"rain": {"w3"}}))
    method = make_method("full", load_settings(db=db_path), db_path, engine=engine)
    assert method.search_batch([SearchRequest("rain")])[0].ids == ["w3"] and not method.ranked


def test_no_active_tree_is_refused(db_path):
    store_registry_and_tree(db_path)
    with pytest.raises(UserError, match="no active tree") as info:
        make_method("a2x", load_settings(db=db_path), db_path, engine=ScriptedEngine(lambda r: "NONE"))
    assert "tree import" in info.value.hint


def test_unknown_options_name_the_method(db_path):
    with pytest.raises(UserError, match=r"a2x.*rrf_k: unknown option"):
        make_method("a2x", load_settings(db=db_path), db_path, rrf_k=3)


def test_a_library_only_option_given_as_text_is_not_settable(db_path, cli):
    """`retriever=` takes a ready pre-filter from a library caller; from `-o` it is refused as not settable (and the
    options listed in the hint are the settable ones only)."""
    with pytest.raises(UserError, match=r"a2x.*retriever: not an option a run can set") as info:
        make_method("a2x", load_settings(db=db_path), db_path, retriever="hybrid")
    assert "retriever" not in info.value.hint and "preset" in info.value.hint
    code, _, err = cli("search", "find hotels", "--method", "select", "-o", "retriever=bm25")
    assert code == 1 and "retriever: not an option a run can set" in err


def test_cli_refusals_exit_1_before_any_model_loads(db_path, cli):
    store_registry_and_tree(db_path)
    code, _, err = cli("search", "find hotels", "--method", "a2x",
                        "--model", "/nonexistent/model")
    assert code == 1 and "no active tree" in err and "hint" in err
    code, out, _ = cli("search", "find hotels", "--method", "a2x+rescue", "--json")
    assert code == 1 and json.loads(out)["message"].startswith("no active tree")


def test_cli_reports_a_model_that_is_not_available(db_path, cli):
    store_registry_and_tree(db_path, sample_tree())
    code, _, err = cli("search", "find hotels", "--method", "a2x",
                        "--model", "no-such-model-alias")
    assert code == 1 and "no-such-model-alias" in err and "hint" in err


def test_cli_mode_must_be_known(db_path, cli):
    code, _, _ = cli("search", "find hotels", "--method", "a2x", "--mode", "get_some")
    assert code == 2


@pytest.fixture
def scripted_a2x():
    """`a2x` with a scripted engine, registered under another name so the CLI path runs without a model."""
    base = method_spec("a2x")

    def factory(settings, db_path, options, progress):
        options.engine = ScriptedEngine(Oracle(sample_tree(), WANTED))
        # The sample tree is so small that direct selection would skip the descent these tests watch.
        walking = settings.with_overrides("search", direct_select_below=0, other_services_child="root")
        return base.factory(walking, db_path, options, progress)

    register_method(dataclasses.replace(base, name="a2x-scripted", factory=factory), replace=True)
    yield "a2x-scripted"
    unregister_method("a2x-scripted")


def test_cli_json_carries_costs_and_the_trace(db_path, cli, scripted_a2x):
    store_registry_and_tree(db_path, sample_tree())
    code, out, _ = cli("search", "find hotels", "--method", scripted_a2x, "--json",
                        "--mode", "get_all", "-o", "merge_threshold=0", "-o", "pack_groups=false")
    assert code == 0
    data = json.loads(out)
    assert [hit["service_id"] for hit in data["hits"]] == ["h1", "h2"]
    assert data["hits"][0]["path"] == ["root", "root/1", "root/1/2"] and data["hits"][0]["name"] == "tool_h1"
    # Two descent calls, then one selection call per unmerged group (Travel, Hotels; the root's own services were
    # an option of their own, pruned) in one round.
    assert data["calls"] == 4 and data["rounds"] == 3 and data["prompt_tokens"] > 0 and data["capped"] == 0
    root = data["trace"]["decisions"][0]
    assert root["selected"] == ["root/1"] and root["pruned"] == ["root/2", "root/3", "root#other"]


def test_cli_trace_prints_the_walk(db_path, cli, scripted_a2x):
    store_registry_and_tree(db_path, sample_tree())
    code, out, _ = cli("search", "find hotels", "--method", scripted_a2x, "--trace")
    assert code == 0
    assert "✓ Travel" in out and "✓ Hotels" in out and "✗ Finance" in out and "✗ Flights" in out
    assert "selection" in out and "h1, h2" in out


def test_cli_empty_query_is_a_user_error(db_path, cli, scripted_a2x):
    store_registry_and_tree(db_path, sample_tree())
    code, _, err = cli("search", "  ", "--method", scripted_a2x)
    assert code == 1 and "empty" in err


def test_an_imported_tree_is_searched_like_a_built_one(db_path, tmp_path, cli, scripted_a2x):
    store_registry_and_tree(db_path)
    file = tmp_path / "taxonomy.json"
    file.write_text(json.dumps(sample_tree().to_nested()), encoding="utf-8")
    code, _, err = cli("tree", "import", file)
    assert code == 0, err
    code, out, _ = cli("search", "find hotels", "--method", scripted_a2x, "--json")
    assert code == 0
    data = json.loads(out)
    assert [hit["service_id"] for hit in data["hits"]] == ["h1", "h2"]
    assert data["hits"][0]["path"] == ["root", "root/1", "root/1/2"]
    # Adding a service makes the imported tree stale, exactly like a built one: it keeps serving, and says so.
    with connect(db_path) as con:
        Registry(con).insert(list(services_for(["new1"]).values()))
    code, _, err = cli("search", "find hotels", "--method", scripted_a2x)
    assert code == 0 and "stale" in err and "3 registry service(s) are not placed" in err  # new1, x1, x2
