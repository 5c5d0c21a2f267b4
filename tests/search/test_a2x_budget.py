"""A model that decides badly must not run away (issue 31): answers that choose too much of a node, a query's call
and token budget, answers that write on, and a model that chooses by position, each played by a scripted model of
a2x_local/testing; a model that behaves gets exactly what it got before."""

from __future__ import annotations

from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.types import Hit, SearchRequest
from a2x_local.testing import FirstOption, Rambler, ScriptedEngine, SelectEverything
from tests.search.a2x_helpers import Oracle, descent_config, make_tree, sample_services, sample_tree, services_for

# Twelve domains of different sizes (domain k holds k leaves of three services), so "the largest first" is visible;
# the order shown is the stored one, smallest first.
SHAPE: dict[str, tuple[str, list[str]]] = {"root": ("All", [])}
for _k in range(1, 13):
    SHAPE[f"root/{_k}"] = (f"Domain{_k}", [])
    for _leaf in range(1, _k + 1):
        SHAPE[f"root/{_k}/{_leaf}"] = (f"Leaf{_k}x{_leaf}", [f"s{_k}_{_leaf}_{i}" for i in range(3)])
IDS = sorted(s for _, services in SHAPE.values() for s in services)


def _search(rule, config=None, **kwargs):
    tree = make_tree(SHAPE)
    engine = ScriptedEngine(rule)
    return A2XSearch(tree, services_for(IDS), engine, config or descent_config(), **kwargs), engine


class _Ranker:
    """A retriever that ranks the given services first for every query, and counts its calls."""

    name = "fixed"

    def __init__(self, first):
        self.first = list(first)
        self.calls: list[list[str]] = []

    def retrieve(self, queries, k):
        self.calls.append(list(queries))
        return [[Hit(s, 1.0) for s in self.first[:k]] for _ in queries]


def test_an_answer_choosing_everything_keeps_the_largest_children_without_a_ranking():
    method, _ = _search(SelectEverything())
    answer = method.search("anything at all", mode="get_all")
    root = answer.trace["decisions"][0]
    # 12 of 12 chosen: more than half and more than 5, so the 5 largest domains are expanded, the rest dropped.
    assert root["selected"] == ["root/8", "root/9", "root/10", "root/11", "root/12"]
    assert root["overselected"] == [f"root/{k}" for k in range(1, 8)]
    assert set(root["overselected"]) <= set(root["pruned"])
    # Below, Domain8 offers 8 leaves (chosen all: cut to 5); Domain12's 12 likewise: one over-selection per node.
    assert answer.cost.overselected == 6
    assert {d["node"] for d in answer.trace["decisions"] if d["overselected"]} == {"root"} | {
        f"root/{k}" for k in range(8, 13)}
    assert all(h.path[1] in {"root/8", "root/9", "root/10", "root/11", "root/12"} for h in answer.hits)


def test_with_a_ranking_the_children_it_puts_first_are_kept_and_it_is_asked_only_when_needed():
    ranker = _Ranker(["s2_1_0", "s5_3_1", "s1_1_2"])
    method, _ = _search(SelectEverything(), fallback_ranker=lambda: ranker)
    answer = method.search("anything at all", mode="get_all")
    root = answer.trace["decisions"][0]
    # Domains 2, 5 and 1 hold the three ranked services; then the largest of the unranked others (12, 11).
    assert root["selected"] == ["root/1", "root/2", "root/5", "root/11", "root/12"]
    assert len(ranker.calls) == 1 and ranker.calls[0] == ["anything at all"]
    # A model that behaves never makes the ranker run.
    calm = _Ranker([])
    oracle = Oracle(make_tree(SHAPE), {"weather": {"s3_2_1"}})
    method, _ = _search(oracle, fallback_ranker=lambda: calm)
    assert method.search("weather").ids == ["s3_2_1"] and calm.calls == []


def test_a_model_that_behaves_gets_what_it_got_without_the_guards():
    wanted = {"flight and weather": {"f1", "w2"}, "pay a bill": {"p1"}, "stocks": {"s1", "s2", "s3", "s4"}}
    tree, services = sample_tree(), sample_services()
    off = descent_config(overselect_share=1.0, max_calls_per_query=0, max_prompt_tokens_per_query=0)
    requests = [SearchRequest(q, mode=m) for q in wanted for m in ("get_all", "get_one")]
    guarded = A2XSearch(tree, services, ScriptedEngine(Oracle(tree, wanted)), descent_config()).search_batch(requests)
    plain = A2XSearch(tree, services, ScriptedEngine(Oracle(tree, wanted)), off).search_batch(requests)
    for a, b in zip(guarded, plain, strict=True):
        assert a.ids == b.ids and (a.cost.calls, a.cost.prompt_tokens, a.cost.rounds) == \
            (b.cost.calls, b.cost.prompt_tokens, b.cost.rounds)
        assert a.cost.overselected == a.cost.budget_cut == a.cost.truncated == 0


def test_the_call_budget_bounds_a_query_and_says_what_it_left_out():
    unbounded, _ = _search(SelectEverything(), descent_config(max_calls_per_query=0))
    everything = unbounded.search("anything", mode="get_all")
    # root, 5 domains, 5 leaves of each
    assert everything.cost.calls == 1 + 5 + 25 and everything.cost.budget_cut == 0
    method, engine = _search(SelectEverything(), descent_config(max_calls_per_query=8))
    answer = method.search("anything", mode="get_all")
    assert answer.cost.calls == 8 and answer.cost.budget_cut == 2 + 11
    # The descent spends at most half: the root and the three largest kept domains; their 15 leaves' lists then
    # share what is left (4 of them).
    assert engine.usage.by_label["descend"].calls == 4 and engine.usage.by_label["select"].calls == 4
    cut = answer.trace["budget_cut"]
    assert cut["nodes"] and cut["lists"] and set(cut["nodes"]).isdisjoint(answer.trace["visited"])
    assert answer.cost.budget_cut == len(cut["nodes"]) + len(cut["lists"])
    assert answer.ids                                       # what was reached was still selected from


def test_the_token_budget_bounds_a_query():
    method, engine = _search(SelectEverything(), descent_config(max_prompt_tokens_per_query=3000))
    answer = method.search("anything", mode="get_all")
    assert 0 < answer.cost.prompt_tokens <= 3000 and answer.cost.budget_cut > 0
    assert engine.usage.by_label["descend"].prompt_tokens <= 1500


def test_the_token_budget_counts_exactly_where_the_cheap_bound_would_cut():
    from a2x_local.llm import prompt_tokens_bound
    from a2x_local.search.llm.budget import QueryBudget
    from a2x_local.search.types import SearchCost

    method, engine = _search(SelectEverything())
    requests = [method.descender.request("anything", "get_all", f"root/{k}") for k in range(5, 13)]
    exact = sum(engine.count_prompt_tokens(r.messages) for r in requests)
    bounds = sum(prompt_tokens_bound(r.messages) for r in requests)
    assert bounds > 2 * exact                     # bytes, not tokens: the bound alone would cut most of them
    budget = QueryBudget(descent_config(max_prompt_tokens_per_query=exact, max_calls_per_query=0), engine,
                         [SearchCost()])
    assert budget.fits(0, requests, descent=False) == len(requests)
    assert budget.fits(0, requests, descent=True) < len(requests)   # the descent may spend half


def test_a_model_that_writes_on_is_cut_off_counted_and_bounded():
    tree = sample_tree()
    method = A2XSearch(tree, sample_services(), ScriptedEngine(Rambler(Oracle(tree, {"q": {"w1"}}), bounded=False)),
                       descent_config())
    answer = method.search("q", mode="get_all")
    # Every answer ran past its budget: cut off, retried once with a larger budget, cut off again.
    assert answer.cost.truncated == answer.cost.calls > 0 and answer.error is not None
    assert answer.cost.calls <= 2 * 8                         # two attempts per call, a walk of a few nodes


def test_a_model_that_chooses_by_position_is_counted_and_shuffled_options_spread_it():
    queries = [f"request number {n}" for n in range(12)]
    method, _ = _search(FirstOption())
    answers = method.search_batch([SearchRequest(q, mode="get_one") for q in queries])
    assert {tuple(a.ids) for a in answers} == {("s1_1_0",)}       # every walk down the first branch
    assert all(a.cost.first_choices == a.cost.choices > 0 for a in answers)
    assert all(a.cost.uniform_first < a.cost.choices for a in answers)
    shuffled, _ = _search(FirstOption(), descent_config(option_order="shuffled"))
    spread = shuffled.search_batch([SearchRequest(q, mode="get_one") for q in queries])
    assert len({tuple(a.ids) for a in spread}) >= 4
    for answer in spread:
        first = answer.trace["decisions"][0]
        assert first["selected"] == [first["shown"][0]]               # the position maps back to what was shown
        [call] = answer.trace["selection"]
        assert answer.ids == [call["services"][0]]
    # The same query is shown the same order every time (a fixed seed), another query another order.
    again = shuffled.search_batch([SearchRequest(q, mode="get_one") for q in queries])
    assert [a.ids for a in again] == [a.ids for a in spread]


def test_the_trace_shows_what_was_cut_and_why():
    from rich.console import Console

    from a2x_local.cli.trace_view import trace_tree

    method, _ = _search(SelectEverything(), descent_config(max_calls_per_query=8))
    console = Console(width=200, record=True)
    console.print(trace_tree(method.search("anything", mode="get_all")))
    text = console.export_text()
    assert "chose 12 of 12: too many, the first 5 in the query's order expanded" in text
    assert "Domain8: not searched, the query's budget was spent" in text
    assert "11 lists not offered: the query's budget was spent" in text
