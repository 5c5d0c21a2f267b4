"""In-group pre-ranking: groups best first by a retriever's ranking, the rest held back for one more round (only for
queries that chose nothing) or named after the described few; one retrieval per batch; the method factory needs
retrieval, and ranks with it, only when pre-ranking is on."""

from __future__ import annotations

import pytest

from a2x_local.errors import UserError
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig, prerank_shown
from a2x_local.search.llm.grouping import RESCUE_KEY, Group
from a2x_local.search.llm.prerank import prerank, rank_positions
from a2x_local.search.methods import make_method
from a2x_local.search.types import Hit, SearchRequest
from a2x_local.settings import load_settings
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import (
    Oracle,
    descent_config,
    make_tree,
    sample_tree,
    services_for,
    store_registry_and_tree,
)


class RankedRetriever:
    """Ranks by a fixed order per query (the rest of the registry unranked); counts its calls."""

    name = "ranked"

    def __init__(self, order: dict[str, list[str]]) -> None:
        self.order = order
        self.calls: list[tuple[int, int]] = []

    def retrieve(self, queries, k):
        self.calls.append((len(queries), k))
        return [[Hit(s, 1.0 / (i + 1)) for i, s in enumerate(self.order.get(q, [])[:k])] for q in queries]


def _config(**values) -> LlmSearchConfig:
    return descent_config(**{"merge_threshold": 100, "prerank_share": 0.0, **values})


def test_the_shown_share_adapts_to_the_group_size():
    config = descent_config(prerank_min=5, prerank_share=0.25)
    assert [prerank_shown(config, n) for n in (3, 5, 12, 20, 40)] == [3, 5, 5, 5, 10]
    assert prerank_shown(descent_config(prerank_min=0), 40) == 40


def test_groups_are_ordered_by_the_ranking_and_cut_after_the_best():
    groups = [Group("root/1", ["a", "b", "c", "d", "e"]), Group(RESCUE_KEY, ["x", "y", "z"])]
    positions = rank_positions([Hit("d", 0.9), Hit("b", 0.8), Hit("z", 0.7)])
    held = prerank(groups, positions, _config(prerank_min=2, prerank_rest="round"))
    assert (held[0].services, held[0].held, held[0].brief) == (["d", "b"], ["a", "c", "e"], 0)
    assert held[1].services == ["x", "y", "z"] and not held[1].held     # retrieval's own top-k stays whole
    named = prerank(groups, positions, _config(prerank_min=2, prerank_rest="names"))
    assert (named[0].services, named[0].held, named[0].brief) == (["d", "b", "a", "c", "e"], [], 3)
    assert prerank(groups, positions, _config(prerank_min=5))[0].services == ["a", "b", "c", "d", "e"]


def _ten_leaf_tree():
    # One leaf of 10 services under the root: every query reaches them as one group.
    return make_tree({"root": ("All", []), "root/1": ("Tools", [f"s{k}" for k in range(10)]),
                      "root/2": ("Other", ["o1"])})


def _search(wanted, order, **config):
    tree = _ten_leaf_tree()
    oracle = Oracle(tree, wanted)
    engine = ScriptedEngine(oracle)
    retriever = RankedRetriever(order)
    method = A2XSearch(tree, services_for([f"s{k}" for k in range(10)] + ["o1"]), engine, _config(**config),
                       ranker=retriever)
    answers = method.search_batch([SearchRequest(q) for q in wanted])
    return answers, engine, oracle, retriever


def test_the_rest_is_offered_in_one_more_round_only_to_queries_that_chose_nothing():
    wanted = {"ranked well": {"s7"}, "ranked badly": {"s2"}}
    order = {"ranked well": ["s7", "s1", "s0"], "ranked badly": ["s9", "s8", "s7"]}
    answers, engine, _, retriever = _search(wanted, order, prerank_min=3, prerank_rest="round")
    well, badly = answers
    assert well.ids == ["s7"] and badly.ids == ["s2"]
    assert [(g["call"], g["services"], g["held_back"]) for g in well.trace["selection"]] == [
        ("select", ["s7", "s1", "s0"], 7)]
    assert [(g["call"], g["services"]) for g in badly.trace["selection"]] == [
        ("select", ["s9", "s8", "s7"]), ("select_rest", ["s0", "s1", "s2", "s3", "s4", "s5", "s6"])]
    # The extra round is counted: its call, its tokens, its round, the candidates it showed.
    assert engine.usage.by_label["select_rest"].calls == 1 and badly.cost.rounds == well.cost.rounds + 1
    assert badly.cost.calls == well.cost.calls + 1
    assert badly.cost.candidates_shown == 10 and well.cost.candidates_shown == 3
    assert sum(a.cost.prompt_tokens for a in answers) == engine.usage.total().prompt_tokens
    # One retrieval call for the whole batch.
    assert retriever.calls == [(2, descent_config().prerank_depth)]


def test_the_rest_by_name_stays_in_the_same_prompt_and_can_be_chosen():
    wanted = {"ranked badly": {"s2"}}
    answers, engine, oracle, _ = _search(wanted, {"ranked badly": ["s9", "s8", "s7"]}, prerank_min=3,
                                         prerank_rest="names")
    assert answers[0].ids == ["s2"] and "select_rest" not in engine.usage.by_label
    listing = next(r for r in oracle.seen if r.context["call"] == "select").messages[1]["content"]
    lines = [line for line in listing.splitlines() if line[:1].isdigit()]
    assert lines[:3] == ["1. tool_s9: Does the s9 thing.", "2. tool_s8: Does the s8 thing.",
                         "3. tool_s7: Does the s7 thing."]
    assert lines[3:] == [f"{k}. tool_s{s}" for k, s in zip(range(4, 11), range(7), strict=False)]
    assert answers[0].trace["selection"][0]["by_name"] == 7


def test_get_one_takes_the_rest_then_falls_back_as_before():
    tree = _ten_leaf_tree()
    services = services_for([f"s{k}" for k in range(10)] + ["o1"])
    order = {"fly": ["s9", "s8"]}
    config = _config(prerank_min=2, prerank_rest="round")
    found = A2XSearch(tree, services, ScriptedEngine(Oracle(tree, {"fly": {"s3"}})), config,
                      ranker=RankedRetriever(order)).search("fly", mode="get_one")
    assert found.ids == ["s3"] and [g["call"] for g in found.trace["selection"]] == ["select", "select_rest"]
    oracle = Oracle(tree, {"fly": {"s3"}}, one_none=True)
    fallback = A2XSearch(tree, services, ScriptedEngine(oracle), config,
                         ranker=RankedRetriever(order)).search("fly", mode="get_one")
    calls = [(g["call"], g["mode"], len(g["services"])) for g in fallback.trace["selection"]]
    # Nothing picked from the shown two nor from the rest: get_important over everything offered, one round later.
    assert calls == [("select", "get_one", 2), ("select_rest", "get_one", 8), ("select_fallback", "get_important", 2),
                     ("select_fallback", "get_important", 8)]
    assert fallback.ids == ["s3"] and fallback.cost.rounds == found.cost.rounds + 1


def test_without_a_ranker_or_with_pre_ranking_off_groups_are_shown_whole():
    tree = sample_tree()
    services = services_for(sorted(tree.service_ids()))
    off = A2XSearch(tree, services, ScriptedEngine(lambda r: "1"), _config(prerank_min=0),
                    ranker=RankedRetriever({}))
    assert off.ranker is None and off.describe()["prerank"] is False
    none = A2XSearch(tree, services, ScriptedEngine(lambda r: "1"), _config(prerank_min=2))
    assert none.ranker is None
    answer = none.search("hotel tonight")
    assert all(g["held_back"] == 0 and g["by_name"] == 0 for g in answer.trace["selection"])


def test_rescue_and_pre_ranking_share_one_retrieval():
    tree = _ten_leaf_tree()
    retriever = RankedRetriever({"q": ["o1", "s5", "s4"]})
    method = A2XSearch(tree, services_for([f"s{k}" for k in range(10)] + ["o1"]),
                       ScriptedEngine(Oracle(tree, {"q": {"s4"}})),
                       _config(prerank_min=2, prerank_rest="round", rescue_top_k=1),
                       rescue=retriever, ranker=retriever)
    answer = method.search("q")
    assert retriever.calls == [(1, descent_config().prerank_depth)]
    groups = {g["key"]: g for g in answer.trace["selection"]}
    assert groups[RESCUE_KEY]["services"] == ["o1"] and groups["root/1"]["services"] == ["s5", "s4"]
    assert answer.ids == ["s4"]


def test_the_a2x_method_needs_retrieval_only_when_pre_ranking_is_on(db_path, monkeypatch):
    store_registry_and_tree(db_path, sample_tree())
    settings = load_settings(db=db_path)
    engine = ScriptedEngine(lambda r: "NONE")
    monkeypatch.setattr("a2x_local.extras.installed", lambda module: module not in {"bm25s", "faiss"})
    method = make_method("a2x", settings, db_path, engine=engine, prerank_min=0)
    assert method.ranker is None
    with pytest.raises(UserError, match="a2x pre-ranking") as info:
        make_method("a2x", settings, db_path, engine=engine, prerank_min=5)
    assert "retrieval" in info.value.hint


def test_the_a2x_method_ranks_with_its_pre_filter_when_pre_ranking_is_on(db_path):
    store_registry_and_tree(db_path, sample_tree())
    settings, ranked = load_settings(db=db_path), RankedRetriever({})
    method = make_method("a2x", settings, db_path, engine=ScriptedEngine(lambda r: "1"), retriever=ranked,
                         prerank_min=3, prerank_share="0.5")
    assert method.ranker is ranked and method.config.prerank_share == 0.5
    assert make_method("a2x", settings, db_path, engine=ScriptedEngine(lambda r: "1"), retriever=ranked,
                       prerank_min=0).ranker is None
    rescue = make_method("a2x+rescue", settings, db_path, engine=ScriptedEngine(lambda r: "1"), retriever=ranked,
                         prerank_min=3)
    assert rescue.ranker is rescue.rescue is ranked
    assert "retriever" not in method.describe()["config"]         # a run's recorded settings hold no object
