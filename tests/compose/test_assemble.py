"""Composition by hand-computed scores: compatibility from what services carry, choices, edges, groups, rankings."""

from __future__ import annotations

import math

import pytest

from a2x_local.compose.assemble import Retrieved, Scoring, assemble, confidence_shares, merged_ranking, similarity
from a2x_local.compose.compatibility import SIGNALS, KeywordWeights, profiles, signals, tree_categories
from a2x_local.compose.relevance import Confidence, Evidence
from a2x_local.compose.types import Step
from a2x_local.registry import Service
from tests.search.a2x_helpers import make_tree


def _tool(service_id: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (), server: str | None = None,
          source: str | None = None) -> Service:
    metadata: dict = {"inputSchema": {"type": "object", "properties": {name: {"type": "string"} for name in inputs}}}
    if outputs:
        metadata["outputSchema"] = {"type": "object", "properties": {name: {"type": "string"} for name in outputs}}
    if server:
        metadata["server"] = server
    return Service(service_id, "mcp_tool", service_id, f"{service_id} tool", metadata, source=source)


def test_signals_come_only_from_what_both_services_carry() -> None:
    tree = make_tree({"root": ("All", []), "root/1": ("Travel", []), "root/1/1": ("Flights", ["search"]),
                      "root/1/2": ("Booking", ["book"]), "root/2": ("Weather", ["weather"])})
    found, _ = profiles([_tool("search", ("origin", "date"), ("flight_id", "price"), server="air"),
                         _tool("book", ("flightId", "passenger"), server="air"),
                         _tool("weather", ("city",), server="meteo"), Service("bare", "generic", "bare", "x")], tree)
    assert found["book"].inputs == {"flightid", "passenger"}            # cases and separators meet
    assert signals(found["search"], found["book"]) == {
        "io": 0.5,            # flight_id feeds one of book's two inputs
        "params": 0.0,
        "origin": 1.0,        # the same server
        "category": pytest.approx(1 / 3),   # {travel, flights} vs {travel, booking}
    }
    assert signals(found["search"], found["weather"]) == {"io": 0.0, "params": 0.0, "origin": 0.0, "category": 0.0}
    assert signals(found["search"], found["bare"]) == {}
    assert signals(found["search"], found["book"], enabled=("io", "category")) == {
        "io": 0.5, "category": pytest.approx(1 / 3)}
    assert tree_categories(tree)["search"] == {"root/1", "root/1/1"}


def test_sources_count_only_when_the_registry_has_several() -> None:
    one, _ = profiles([_tool("a", source="x.json"), _tool("b", source="x.json")], None)
    assert one["a"].origin is None
    two, _ = profiles([_tool("a", source="x.json"), _tool("b", source="y.json")], None)
    assert two["a"].origin == "source:x.json" and signals(two["a"], two["b"]) == {"origin": 0.0}


SERVICES = [_tool("search", ("origin",), ("flight_id",), server="air"),
            _tool("lookup", ("flight_id", "airline"), server="x"),
            _tool("book", ("flight_id",), server="air"), _tool("hotel", ("city",), server="inn"),
            Service("bare", "generic", "Bare", "no metadata")]
PROFILES, _ = profiles(SERVICES, None)
ALL_SIGNALS = Scoring(alpha=0.5, signals=SIGNALS)
NAMES = {s.id: s.name for s in SERVICES}


def test_compatibility_can_overturn_rank_and_alpha_one_cannot() -> None:
    steps = [Step(id="s1", task="find a flight"), Step(id="s2", task="book it", depends_on=["s1"])]
    retrieved = [Retrieved(["search"], [0.9]), Retrieved(["lookup", "book", "bare"], [0.5, 0.4, 0.3])]
    plan = assemble(steps, ["find a flight", "book it"], retrieved, candidates=3, names=NAMES, profiles=PROFILES,
                    scoring=ALL_SIGNALS)
    second = plan.steps[1]
    # lookup: sim 1, io 1/2, params 0, origin 0 -> compat 1/6 -> 0.5 + 1/12; book: sim 2/3, io 1, params 0,
    # origin 1 -> compat 2/3 -> 2/3; bare carries nothing: scored with the others' mean compatibility, 5/12
    assert second.choice.id == "book" and second.choice.score == pytest.approx(2 / 3)
    assert [(c.id, c.score) for c in second.alternatives] == [
        ("lookup", pytest.approx(0.5 + 1 / 12)), ("bare", pytest.approx(0.5 / 3 + 0.5 * 5 / 12))]
    assert second.alternatives[0].signals == {"io": 0.5, "origin": 0.0, "params": 0.0}
    assert second.alternatives[1].compatibility is None
    assert plan.services == ["search", "book"]
    by_rank = assemble(steps, ["find a flight", "book it"], retrieved, candidates=3, names=NAMES,
                       profiles=PROFILES, scoring=Scoring(alpha=1.0, signals=SIGNALS))
    assert by_rank.steps[1].choice.id == "lookup"


def test_edges_groups_and_io_dependencies() -> None:
    steps = [Step(id="s1", task="find a flight"), Step(id="s2", task="find a hotel"),
             Step(id="s3", task="book the flight")]
    retrieved = [Retrieved(["search"], [None]), Retrieved(["hotel"], [None]), Retrieved(["book"], [None])]
    plan = assemble(steps, [s.task for s in steps], retrieved, candidates=2, names=NAMES, profiles=PROFILES)
    # no depends_on at all, but search's output flight_id feeds book: an io edge puts book after search
    assert [(e.source, e.target, e.reason, e.fields) for e in plan.edges] == [("s1", "s3", "io", ["flight_id"])]
    assert plan.groups == [["s1", "s2"], ["s3"]]
    assert [(s.id, s.group, s.depends_on) for s in plan.steps] == [("s1", 1, []), ("s2", 1, []), ("s3", 2, ["s1"])]


def test_a_step_without_results_has_no_choice_and_keeps_its_error() -> None:
    steps = [Step(id="s1", task="a"), Step(id="s2", task="b")]
    plan = assemble(steps, ["a", "b"], [Retrieved(["hotel"], [1.0]), Retrieved([], [], "engine down")],
                    candidates=2, names=NAMES, profiles=PROFILES)
    assert plan.steps[1].choice is None and plan.steps[1].error == "engine down"
    assert plan.services == ["hotel"]


def test_ranked_answer_puts_choices_first_then_takes_steps_in_turn() -> None:
    assert merged_ranking(["c", "x"], [["a", "c", "d"], ["x", "a", "e", "f"]], 10) == ["c", "x", "a", "d", "e", "f"]
    assert merged_ranking(["c", "x"], [["a", "c", "d"], ["x", "a", "e", "f"]], 3) == ["c", "x", "a"]
    assert [similarity(rank, 4) for rank in (1, 2, 4)] == [1.0, 0.75, 0.25]


def test_io_needs_types_that_meet() -> None:
    def typed(service_id: str, inputs: dict, outputs: dict) -> Service:
        return Service(service_id, "mcp_tool", service_id, "x", {
            "inputSchema": {"type": "object", "properties": {k: {"type": v} for k, v in inputs.items()}},
            "outputSchema": {"type": "object", "properties": {k: {"type": v} for k, v in outputs.items()}}})

    found, _ = profiles([typed("quote", {}, {"price": "number", "tags": "array"}),
                         typed("buy", {"price": "integer", "tags": "object", "note": "string"}, {})], None)
    assert signals(found["quote"], found["buy"], enabled=("io",)) == {"io": pytest.approx(1 / 3)}   # price only


def test_keyword_overlap_weighs_rare_words_more() -> None:
    weights = KeywordWeights.of([frozenset({"get", "weather"}), frozenset({"get", "forecast", "weather"}),
                                 frozenset({"get", "email"}), frozenset({"get", "stock"})])
    rare = weights.overlap(frozenset({"get", "weather"}), frozenset({"weather", "forecast"}))
    common = weights.overlap(frozenset({"get", "email"}), frozenset({"get", "stock"}))
    assert 0 < common < rare < 1 and weights.overlap(frozenset({"a"}), frozenset({"b"})) == 0.0


def test_eq4_uses_the_cosine_and_a_confidence_flags_weak_steps() -> None:
    steps = [Step(id="s1", task="find a flight"), Step(id="s2", task="book a hotel")]
    retrieved = [Retrieved(["search", "lookup"], [0.9, 0.8]), Retrieved(["hotel", "book"], [0.5, 0.4])]
    evidence = [[Evidence(0.62, 7.0), Evidence(0.70, 7.9)], [Evidence(0.21, 1.2), Evidence(0.20, 1.1)]]
    plan = assemble(steps, [s.task for s in steps], retrieved, candidates=2, names=NAMES, profiles=PROFILES,
                    scoring=Scoring(alpha=1.0, confidence=Confidence(z=4.0, scale=1.0, threshold=0.5)),
                    evidence=evidence)
    first, second = plan.steps
    assert first.choice.id == "lookup" and first.choice.similarity == pytest.approx(0.70)   # cosine beats rank
    assert first.confidence == pytest.approx(1 / (1 + math.exp(-3.9)), abs=1e-4) and not first.low_confidence
    assert second.low_confidence and second.confidence < 0.1 and second.alternatives[0].id == "book"


def test_a_reranked_order_takes_the_cosines_in_its_own_order() -> None:
    steps = [Step(id="s1", task="find a flight")]
    retrieved = [Retrieved(["search", "lookup", "hotel"], [0.9, 0.8, 0.7])]
    evidence = [[Evidence(0.7, 6.0), Evidence(0.6, 5.0), Evidence(0.5, 4.0)]]
    plan = assemble(steps, ["find a flight"], retrieved, candidates=3, names=NAMES, profiles=PROFILES,
                    evidence=evidence, orders=[["hotel", "search", "lookup"]])
    step = plan.steps[0]
    assert step.choice.id == "hotel" and step.choice.similarity == pytest.approx(0.7)
    assert [(c.id, c.similarity) for c in step.alternatives] == [("search", pytest.approx(0.6)),
                                                                  ("lookup", pytest.approx(0.5))]
    assert step.choice.cosine == pytest.approx(0.5)     # its own cosine is still reported


def test_shares_give_places_by_highest_averages_and_skip_what_is_listed() -> None:
    rankings = [["a", "b", "c"], ["x", "a", "y", "z"]]
    # after the choices a, x: shares 1 and 3 -> y (3/1), z (3/2), b (1/1 beats 3/3 on the earlier list), ...
    assert merged_ranking(["a", "x"], rankings, 10, shares=[1.0, 3.0]) == ["a", "x", "y", "z", "b", "c"]
    assert merged_ranking(["a", "x"], rankings, 4, shares=[1.0, 3.0]) == ["a", "x", "y", "z"]
    with pytest.raises(ValueError, match="positive share"):
        merged_ranking([], rankings, 3, shares=[1.0])


def test_confidence_shares_favour_unsure_steps_and_need_every_confidence() -> None:
    steps = assemble([Step(id="s1", task="a"), Step(id="s2", task="b")], ["a", "b"],
                     [Retrieved(["hotel"], [1.0]), Retrieved(["search"], [1.0])], candidates=1, names=NAMES,
                     profiles=PROFILES, evidence=[[Evidence(0.9, 9.0)], [Evidence(0.2, 1.0)]]).steps
    shares = confidence_shares(steps, whole=True, floor=0.1)
    assert shares[0] == pytest.approx(0.1) and 0.9 < shares[1] < 1.0 and shares[2] == 1.0   # the whole request
    bare = assemble([Step(id="s1", task="a")], ["a"], [Retrieved(["hotel"], [1.0])], candidates=1, names=NAMES,
                    profiles=PROFILES).steps
    assert confidence_shares(bare, whole=False, floor=0.1) is None     # no dense model: turns


def test_an_earlier_steps_own_candidates_earn_no_compatibility_with_its_choice() -> None:
    steps = [Step(id="s1", task="find a flight"), Step(id="s2", task="then something else")]
    # book shares search's server (origin 1.0) but the first step found it for its own job: a substitute
    retrieved = [Retrieved(["search", "book"], [0.9, 0.8]), Retrieved(["hotel", "book"], [0.5, 0.5])]
    credited = assemble(steps, [s.task for s in steps], retrieved, candidates=2, names=NAMES, profiles=PROFILES,
                        scoring=Scoring(alpha=0.5, signals=("origin",))).steps[1]
    # book: 0.5 x 1/2 (rank 2 of 2) + 0.5 x 1.0 (same server) = 0.75 against hotel's 0.5 x 1 + 0.5 x 0
    assert credited.choice.id == "book" and credited.choice.score == pytest.approx(0.75)
    scoring = Scoring(alpha=0.5, signals=("origin",), credit_substitutes=False)
    second = assemble(steps, [s.task for s in steps], retrieved, candidates=2, names=NAMES, profiles=PROFILES,
                      scoring=scoring).steps[1]
    # uncredited, book takes the others' mean compatibility (hotel's 0): 0.25, and hotel is chosen
    assert second.choice.id == "hotel" and second.alternatives[0].id == "book"
    assert second.alternatives[0].compatibility is None and second.alternatives[0].score == pytest.approx(0.25)
