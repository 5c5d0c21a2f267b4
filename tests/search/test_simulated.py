"""The simulated navigators of `scripts/bench_search.py`: the noisy one (an oracle at error rate 0, seeded drops
and additions above it, answers within what each request allows) and the reader (it answers by what the lines say)."""

from __future__ import annotations

import numpy as np
import pytest

from a2x_local.llm.types import Request
from a2x_local.registry.types import Service
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.types import SearchRequest
from a2x_local.testing import ReaderNavigator, ScriptedEngine, SimulatedNavigator, listed_lines
from tests.search.a2x_helpers import descent_config, make_tree, sample_services, sample_tree, services_for

CORRECT = {"book a flight and check the rain": {"f2", "w1"}, "pay a bill": {"p1"}, "anything": {"g1"},
           "hotel tonight": {"h1", "h2"}}


def _search(error_rate: float, seed: int = 0, queries=CORRECT, mode: str = "get_all"):
    tree = sample_tree()
    rule = SimulatedNavigator(tree, queries, error_rate=error_rate, seed=seed)
    method = A2XSearch(tree, sample_services(), ScriptedEngine(rule), descent_config())
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
                       descent_config(merge_threshold=100, group_lists="merged"))
    method.search_batch([SearchRequest(q) for q in queries])
    # 50 descents offering 8 correct categories each, then 50 selections offering the correct services reached.
    assert rule.decisions == 100 and 400 < rule.correct_seen < 800
    # A wrong item can be added to each descent (32 wrong categories), and to a selection only when its descent
    # added one (then the wrong category's service is offered): about 0.2 * 50 + 0.2 * 10 = 12 of 100 decisions.
    assert 0.05 < rule.added / rule.decisions < 0.22
    assert 0.15 < rule.dropped / rule.correct_seen < 0.25


def test_a_wrong_error_rate_is_refused():
    with pytest.raises(ValueError, match="probability"):
        SimulatedNavigator(sample_tree(), CORRECT, error_rate=1.5)


def test_a_dropped_item_stays_dropped_however_the_list_is_ordered_or_cut():
    # The drop draw belongs to the item, not to the list: the same service in a reordered or shorter selection
    # list is dropped (or kept) alike, so two search settings differ only by their structure.
    tree = make_tree({"root": ("All", [f"s{k}" for k in range(1, 9)])})
    queries = {f"q{i}": {f"s{1 + i % 8}", f"s{1 + (i + 3) % 8}"} for i in range(40)}
    rule = SimulatedNavigator(tree, queries, error_rate=0.5, seed=3)
    kept = {}
    for order in (["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"], ["s8", "s6", "s4", "s2", "s1", "s3", "s5", "s7"]):
        for query, correct in queries.items():
            options = [s for s in order if s in correct or s in {"s2", "s5"}]
            request = Request(messages=[], constraint=None, max_tokens=20,
                              context={"call": "select", "query": query, "group": "root", "options": options,
                                       "max_items": len(options)})
            answer = rule(request)
            chosen = {options[int(k) - 1] for k in answer.split(",")} if answer != "NONE" else set()
            kept.setdefault(query, []).append(chosen & correct)
    assert all(first == second for first, second in kept.values())
    assert 0 < sum(len(first) for first, _ in kept.values()) < 80


def test_listed_lines_are_the_numbered_options_of_a_prompt():
    text = "Category: top\nSub-categories:\n1. Travel: trips\n2. Weather: rain\n\nRequest: 1. do this"
    assert listed_lines(text, 2) == ["Travel: trips", "Weather: rain"]
    with pytest.raises(ValueError, match="3 numbered"):
        listed_lines(text, 3)


VOCABULARY = ["flight", "hotel", "rain"]


def encode(texts):
    """A toy embedding: one dimension per word of the vocabulary, and a small constant one."""
    rows = np.array([[float(word in text.lower()) for word in VOCABULARY] + [0.1] for text in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_reader_chooses_the_lines_most_like_the_request():

    shape = {"root": ("All", []), "root/1": ("Hotel bookings", ["h1", "h2"]), "root/2": ("Flight tickets", ["f1"]),
             "root/3": ("Rain alerts", ["w1"])}
    services = {"h1": Service("h1", "generic", "book_room", "Books a hotel room."),
                "h2": Service("h2", "generic", "cancel", "Cancels a flight."),
                "f1": Service("f1", "generic", "fly", "Buys a flight."), "w1": Service("w1", "generic", "w", "Rain.")}
    config = descent_config(merge_threshold=0)
    answer = A2XSearch(make_tree(shape), services, ScriptedEngine(ReaderNavigator(encode)), config).search(
        "a hotel for tonight")
    assert answer.trace["decisions"][0]["selected"] == ["root/1"] and answer.ids == ["h1"]
    # Lines that lose the words a request matches lose the reader: it cannot tell the categories apart and takes
    # the first three (all equally far), which the oracle, never reading, would not show.
    blind = {node: (f"Group {k}", members) for k, (node, (_, members)) in enumerate(shape.items())}
    lost = A2XSearch(make_tree(blind), services, ScriptedEngine(ReaderNavigator(encode)), config).search(
        "a hotel for tonight")
    assert lost.trace["decisions"][0]["selected"] == ["root/1", "root/2", "root/3"]


def test_with_a_floor_the_reader_answers_none_for_a_list_that_holds_nothing_like_the_request():
    shape = {"root": ("All", []), "root/1": ("Hotel bookings", ["h1"]), "root/2": ("Flight tickets", ["f1"])}
    services = {"h1": Service("h1", "generic", "book_room", "Books a hotel room."),
                "f1": Service("f1", "generic", "fly", "Buys a flight.")}
    # Both categories are entered (descent never uses the floor); each list is asked on its own.
    config = LlmSearchConfig.defaults(preset="published", group_lists="per_node", max_children_selected=0)
    always = ReaderNavigator(encode, margin=1.0)
    floored = ReaderNavigator(encode, margin=1.0, floor=0.5)
    request = "a hotel room or a flight"
    assert set(A2XSearch(make_tree(shape), services, ScriptedEngine(always), config).search(request).ids) == {
        "h1", "f1"}
    # Without a floor the reader takes something from every list; with one, only what is like the request.
    alone = A2XSearch(make_tree(shape), services, ScriptedEngine(floored), config).search("a hotel room")
    assert alone.ids == ["h1"]
    selections = alone.trace["selection"]
    assert len(selections) == 2 and [call["answer"] for call in selections] == ["1", "NONE"]
