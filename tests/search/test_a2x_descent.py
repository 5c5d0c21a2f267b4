"""Recursive descent with a scripted engine over a hand-made tree: what is visited, pruned, and shown."""

from __future__ import annotations

import re

from a2x_local.search.llm.descent import Descender
from a2x_local.search.llm.rounds import RoundRunner
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, descent_config, make_tree, sample_tree


def _descend(tree, oracle, queries, config=None):
    engine = ScriptedEngine(oracle)
    runner = RoundRunner(engine, len(queries))
    walks = Descender(tree, engine, config or descent_config()).descend(queries, runner)
    return walks, engine, runner


def test_descent_follows_the_selections():
    tree = sample_tree()
    walks, _, _ = _descend(tree, Oracle(tree, {"fly": {"f2"}}), [("fly", "get_all")])
    walk = walks[0]
    assert walk.visited == ["root", "root/1", "root/1/1"]
    root, travel = walk.decisions
    # The root's own services are one more option ("other services here"), pruned like any child.
    assert (root.node, root.selected, root.pruned) == ("root", ["root/1"], ["root/2", "root/3", "root#other"])
    assert (travel.selected, travel.pruned) == (["root/1/1"], ["root/1/2"])
    assert not root.fallback


def test_none_prunes_only_that_subtree_and_internal_services_are_candidates():
    tree = sample_tree()
    oracle = Oracle(tree, {"q": {"h1", "p2"}}, none_at=[("q", "root/1")])
    walks, _, _ = _descend(tree, oracle, [("q", "get_all")])
    walk = walks[0]
    assert walk.visited == ["root", "root/1", "root/3", "root/3/1"]
    travel = next(d for d in walk.decisions if d.node == "root/1")
    assert travel.selected == [] and travel.pruned == ["root/1/1", "root/1/2"] and travel.answer == "NONE"
    reached = dict(walk.reached(tree))
    # Travel's own services join the candidates although its children were pruned; the root's own (g1) were an
    # option of their own, and pruned.
    assert reached == {"root/1": ["t0"], "root/3/1": ["p1", "p2"]}


def test_nothing_chosen_at_the_root_falls_back_to_the_largest_child():
    tree = sample_tree()
    oracle = Oracle(tree, {"q": {"w1"}}, none_at=[("q", "root")])
    walks, _, _ = _descend(tree, oracle, [("q", "get_all")])
    root = walks[0].decisions[0]
    # Finance holds 7 distinct services (p1 p2 s1-s4 f1), Travel 6, Weather 4.
    assert root.fallback and root.selected == ["root/3"]
    assert root.pruned == ["root/1", "root/2", "root#other"]
    # The fallback child is then walked like any other (here the oracle finds nothing in it).
    assert walks[0].visited == ["root", "root/3"]


def test_an_invalid_root_answer_also_falls_back_and_keeps_the_error():
    tree = sample_tree()

    def rule(request):
        return "garbage"

    walks, engine, _ = _descend(tree, rule, [("q", "get_all")])
    root = walks[0].decisions[0]
    assert root.fallback and root.error and root.answer is None
    finance = walks[0].decisions[1]
    # Below the root a failed answer prunes like NONE (no fallback), and is recorded.
    assert finance.node == "root/3" and finance.error and not finance.fallback and finance.selected == []
    assert engine.usage.total().failures == 2


def test_children_are_numbered_in_stored_order_and_answers_are_bounded():
    shape = {"root": ("All", [])} | {f"root/{k}": (f"Cat{k}", [f"s{k}"]) for k in range(1, 13)}
    tree = make_tree(shape)
    oracle = Oracle(tree, {"q": {"s10"}})
    walks, _, _ = _descend(tree, oracle, [("q", "get_all")])
    assert walks[0].visited == ["root", "root/10"]
    request = oracle.seen[0]
    listing = request.messages[1]["content"]
    numbers = [int(m) for m in re.findall(r"^(\d+)\. ", listing, flags=re.M)]
    assert numbers == list(range(1, 13))
    assert "10. Cat10:" in listing and "2. Cat2:" in listing
    pattern = request.constraint.pattern
    assert re.fullmatch(pattern, "12") and re.fullmatch(pattern, "1,12") and re.fullmatch(pattern, "NONE")
    assert not re.fullmatch(pattern, "13") and not re.fullmatch(pattern, "0")


def test_boundaries_are_shown_only_in_get_one_and_the_query_comes_last():
    tree = sample_tree()
    oracle = Oracle(tree, {"a": {"w1"}, "b": {"w1"}, "c": {"p1"}})
    # Every boundary (overlap 0): the sample tree's categories share too few services to be confused.
    _descend(tree, oracle, [("a", "get_all"), ("b", "get_one"), ("c", "get_all")],
             descent_config(boundary_min_overlap=0.0))
    by_query = {r.context["query"]: r for r in oracle.seen if r.context["node"] == "root"}
    assert "NOT here" not in by_query["a"].messages[1]["content"]
    assert "NOT here: anything but weather" in by_query["b"].messages[1]["content"]
    for request in by_query.values():
        assert request.messages[1]["content"].rstrip().endswith(f"Request: {request.context['query']}")
    # Same mode, same node: identical system prompt and list, so an engine's prefix cache serves them once;
    # only the request at the very end differs.
    a, c = by_query["a"].messages, by_query["c"].messages
    assert a[0] == c[0]
    assert a[1]["content"].removesuffix("Request: a") == c[1]["content"].removesuffix("Request: c")
    assert a[1]["content"] != c[1]["content"]
    # Another mode: another system prompt (and, in get_one, the boundaries in the list).
    assert by_query["a"].messages[0] != by_query["b"].messages[0]


def test_each_level_of_every_query_is_one_engine_call():
    tree = sample_tree()
    wanted = {"fly": {"f1"}, "rain": {"w2"}, "pay": {"p1", "h2"}}
    walks, engine, runner = _descend(tree, Oracle(tree, wanted), [(q, "get_all") for q in wanted])
    # Level 0: three roots; level 1: Travel and Finance (fly: f1 is filed under both), Travel and Finance (pay);
    # level 2: leaves only, no call.
    assert engine.batches == [3, 4]
    assert [ledger.rounds for ledger in runner.ledgers] == [2, 1, 2]
    assert walks[1].visited == ["root", "root/2"]
