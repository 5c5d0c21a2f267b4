"""The simulated navigator behind `scripts/bench_search.py --policy noisy`: an oracle at error rate 0, seeded
drops and additions above it, answers within what each request allows."""

from __future__ import annotations

import pytest

from a2x_local.llm.scripted import ScriptedEngine
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.simulated import SimulatedNavigator
from a2x_local.search.types import SearchRequest
from tests.search.a2x_helpers import make_tree, sample_services, sample_tree, services_for

CORRECT = {"book a flight and check the rain": {"f2", "w1"}, "pay a bill": {"p1"}, "anything": {"g1"},
           "hotel tonight": {"h1", "h2"}}


def _search(error_rate: float, seed: int = 0, queries=CORRECT, mode: str = "get_all"):
    tree = sample_tree()
    rule = SimulatedNavigator(tree, queries, error_rate=error_rate, seed=seed)
    method = A2XSearch(tree, sample_services(), ScriptedEngine(rule), LlmSearchConfig.defaults())
    return method.search_batch([SearchRequest(q, mode=mode) for q in queries]), rule


def test_at_error_rate_zero_it_is_an_oracle():
    answers, rule = _search(0.0)
    assert [set(a.ids) for a in answers] == list(CORRECT.values())
    assert rule.dropped == rule.added == 0 and rule.decisions > len(CORRECT)
    one, _ = _search(0.0, mode="get_one")
    assert all(len(a.ids) == 1 and a.ids[0] in CORRECT[a.query] for a in one)


def test_at_error_rate_one_every_correct_item_is_dropped_and_a_wrong_one_added():
    answers, rule = _search(1.0)
    assert all(not set(a.ids) & CORRECT[a.query] for a in answers)
    assert rule.added == rule.decisions and rule.dropped > 0
    # Descent still goes somewhere: into the one wrong category it chose.
    assert all(len(d["selected"]) == 1 for a in answers for d in a.trace["decisions"])


def test_the_draws_are_seeded_per_decision_and_independent_of_batching():
    first, _ = _search(0.3, seed=7)
    again, _ = _search(0.3, seed=7)
    assert [(a.ids, a.trace) for a in first] == [(a.ids, a.trace) for a in again]
    alone = [_search(0.3, seed=7, queries={q: c})[0][0] for q, c in CORRECT.items()]
    assert [a.ids for a in alone] == [a.ids for a in first]
    others = [_search(0.3, seed=s)[0] for s in range(1, 6)]
    assert any([a.ids for a in other] != [a.ids for a in first] for other in others)


def test_drop_and_add_rates_match_the_error_rate():
    shape = {"root": ("All", [])} | {f"root/{k}": (f"C{k}", [f"s{k}"]) for k in range(1, 41)}
    tree = make_tree(shape)
    queries = {f"q{i}": {f"s{k}" for k in range(1 + i % 5, 41, 5)} for i in range(50)}   # 8 correct of 40 each
    rule = SimulatedNavigator(tree, queries, error_rate=0.2, seed=1)
    method = A2XSearch(tree, services_for({f"s{k}" for k in range(1, 41)}), ScriptedEngine(rule),
                       LlmSearchConfig.defaults(merge_threshold=100))
    method.search_batch([SearchRequest(q) for q in queries])
    # 50 descents offering 8 correct categories each, then 50 selections offering the correct services reached.
    assert rule.decisions == 100 and 400 < rule.correct_seen < 800
    assert 0.12 < rule.added / rule.decisions < 0.28
    assert 0.15 < rule.dropped / rule.correct_seen < 0.25


def test_a_wrong_error_rate_is_refused():
    with pytest.raises(ValueError, match="probability"):
        SimulatedNavigator(sample_tree(), CORRECT, error_rate=1.5)
