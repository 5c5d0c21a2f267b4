"""Retrieve-then-select: the retriever's top-k is the one group the model selects from."""

from __future__ import annotations

from a2x_local.search.llm.baselines import RetrieveSelect
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.types import Hit, SearchRequest
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_services, sample_tree


class _Ranking:
    name = "ranking"

    def __init__(self, by_query):
        self.by_query = by_query
        self.calls = []

    def retrieve(self, queries, k):
        self.calls.append((list(queries), k))
        return [[Hit(i, 1.0 / (r + 1)) for r, i in enumerate(self.by_query.get(q, [])[:k])] for q in queries]


def _select(wanted, ranking, **config):
    oracle = Oracle(sample_tree(), wanted)
    engine = ScriptedEngine(oracle)
    retriever = _Ranking(ranking)
    method = RetrieveSelect(list(sample_services().values()), retriever, engine, LlmSearchConfig.defaults(**config))
    return method, engine, oracle, retriever


def test_the_model_selects_among_the_retrieved_top_k_in_rank_order():
    ranking = {"q1": ["w3", "f1", "w1", "h2", "p1"], "q2": ["p2", "p1"]}
    method, engine, oracle, retriever = _select({"q1": {"w1", "w3", "p1"}, "q2": {"p1"}}, ranking, select_top_k=4)
    answers = method.search_batch([SearchRequest("q1"), SearchRequest("q2")])
    assert retriever.calls == [(["q1", "q2"], 4)]
    # p1 is correct for q1 but ranked 5th, outside the top 4: the model never sees it.
    assert [a.ids for a in answers] == [["w3", "w1"], ["p1"]]
    assert oracle.seen[0].context["options"] == ["w3", "f1", "w1", "h2"]
    assert [a.cost.candidates_shown for a in answers] == [4, 2]
    assert answers[0].trace["retrieved"] == ["w3", "f1", "w1", "h2"]
    assert engine.batches == [2]
    assert sum(a.cost.calls for a in answers) == engine.usage.total().calls == 2


def test_a_query_with_nothing_retrieved_costs_no_call():
    method, engine, _, _ = _select({"q": {"w1"}, "other": {"w1"}}, {"other": ["w1"]})
    answer = method.search_batch([SearchRequest("q"), SearchRequest("other")])
    assert answer[0].ids == [] and answer[0].cost.calls == 0 and answer[1].ids == ["w1"]
    assert engine.batches == [1]


def test_a_large_top_k_is_split_by_the_group_cap():
    ids = list(sample_services())
    method, engine, _, _ = _select({"q": {ids[-1], ids[0]}}, {"q": ids}, select_top_k=len(ids), group_cap=10)
    answer = method.search_batch([SearchRequest("q")])[0]
    assert sorted(answer.ids) == sorted([ids[0], ids[-1]])
    assert engine.batches == [2] and answer.cost.rounds == 1 and answer.cost.candidates_shown == len(ids)


def test_a_failed_selection_is_an_error_and_nothing_retrieved_is_not():
    retriever = _Ranking({"q": ["w1", "w2"]})
    method = RetrieveSelect(list(sample_services().values()), retriever, ScriptedEngine(lambda r: "not a number"),
                            LlmSearchConfig.defaults())
    failed, empty = method.search_batch([SearchRequest("q"), SearchRequest("nothing")])
    assert failed.ids == [] and failed.error is not None and "selection calls failed" in failed.error
    assert empty.cost.calls == 0 and empty.error is None
