"""The construction algorithm with deterministic scripted engines: invariants, batching, every rule of §2."""

from __future__ import annotations

import re

import pytest

from a2x_local.taxonomy.induction.builder import BuildAborted
from a2x_local.taxonomy.induction.calls import chunks
from a2x_local.taxonomy.induction.report import build_report
from a2x_local.taxonomy.types import child_id
from a2x_local.testing import WordPolicy
from tests.taxonomy.helpers import Recorder, build, small_config, synthetic
from tests.taxonomy.rules import DomainRule, categories_json


@pytest.fixture(scope="module")
def word_build(toolret_subset):
    config = small_config()
    recorder = Recorder(WordPolicy(toolret_subset))
    state, engine = build(toolret_subset, config, recorder)
    return state, engine, recorder, config, toolret_subset


def test_every_service_is_reachable_from_the_root(word_build):
    state, _engine, _recorder, _config, services = word_build
    assert state.tree().service_ids() == {s.id for s in services}


def test_tree_shape_respects_the_thresholds(word_build):
    state, engine, _recorder, config, _services = word_build
    tree = state.tree()
    assert tree.stats().depth == config.max_depth       # deep enough to exercise every level
    for node in tree.walk():
        assert len(node.children) <= config.max_children
        if node.is_leaf and node.depth < config.max_depth:
            assert len(node.services) <= config.leaf_max_services, node.id
    # The report lists exactly the leaves over the limit (all at depth D, by the loop above), largest first.
    oversized = [n for n in tree.leaves() if len(n.services) > config.leaf_max_services]
    listed = build_report(state, tree, config, engine.usage)["leaves_over_limit"]
    assert sorted((e["node"], e["depth"], e["services"]) for e in listed) == sorted(
        (n.id, n.depth, len(n.services)) for n in oversized)
    assert [e["services"] for e in listed] == sorted((e["services"] for e in listed), reverse=True)
    stats = tree.stats()
    assert stats.leaf_size_max == max(len(n.services) for n in tree.leaves())
    assert len(tree.nodes[stats.largest_leaf].services) == stats.leaf_size_max


def test_ids_come_from_code_and_are_unique(word_build):
    state, *_ = word_build
    tree = state.tree()
    ids = [node.id for node in tree.walk()]
    assert len(ids) == len(set(ids)) == len(tree.nodes)
    for node in tree.walk():
        for position, child in enumerate(node.children, start=1):
            assert child == child_id(node.id, position)
            assert tree.nodes[child].parent == node.id and tree.nodes[child].depth == node.depth + 1


def test_one_engine_call_per_step_per_level(word_build):
    state, engine, _recorder, config, _services = word_build
    # Every engine round is one generate call over all nodes of the level (no retries were needed here).
    assert engine.usage.rounds == len(engine.batches) == len(state.rounds)
    per_level: dict[tuple[int, str], int] = {}
    for entry in state.rounds:
        per_level[(entry["level"], entry["step"])] = per_level.get((entry["level"], entry["step"]), 0) + 1
    for (level, step), count in per_level.items():
        limit = {"assign": config.refine_passes, "refine": config.refine_passes - 1,
                 "validate": config.root_validation_rounds, "redesign": config.root_validation_rounds}.get(step, 1)
        assert count <= limit, (level, step, count)
    designs = [e for e in state.rounds if e["step"] == "design"]
    assert any(e["requests"] > 1 for e in designs)   # several nodes designed in one round


def test_keyword_path_runs_in_one_round_and_reports_vocabulary(word_build):
    state, _engine, recorder, config, services = word_build
    keyword_rounds = [e for e in state.rounds if e["step"] == "keywords"]
    assert len(keyword_rounds) == 1
    batches = chunks(sorted(s.id for s in services), config.keyword_batch_size, config.batch_boundaries)
    assert keyword_rounds[0]["requests"] == len(batches) >= -(-len(services) // config.keyword_batch_size)
    vocab = state.vocabulary[0]
    assert vocab["node"] == "root" and vocab["raw"] >= vocab["stemmed"] >= vocab["merged"] > 0
    design = recorder.of("design")[0]
    assert design.context["mode"] == "keywords" and design.label == "design_keywords"


def test_classification_shows_name_and_description_in_numeric_order(word_build):
    _state, _engine, recorder, _config, services = word_build
    by_id = {s.id: s for s in services}
    request = next(r for r in recorder.of("assign") if len(r.context["services"]) >= 10)
    user = request.messages[-1]["content"]
    first = by_id[request.context["services"][0]]
    assert first.name in user and first.description.split()[0] in user
    numbers = [int(m) for m in re.findall(r"^(\d+)\. ", user.split("Services (name: description):")[1], re.M)]
    assert numbers == list(range(1, len(request.context["services"]) + 1))   # 1..10, never 1, 10, 2
    # Shared instructions first, node context next, the items last.
    assert user.index("Categories:") < user.index("Services (name: description):")
    others = [r for r in recorder.of("assign") if r.context["node"] == request.context["node"]]
    assert len({r.messages[0]["content"] for r in recorder.of("assign")}) == 1
    prefix = user.split("Services (name: description):")[0]
    assert all(r.messages[-1]["content"].startswith(prefix) for r in others if r.context["pass"] ==
               request.context["pass"])


def test_cross_domain_places_only_into_leaves_of_the_target_domain(word_build):
    state, _engine, recorder, _config, _services = word_build
    tree = state.tree()
    places = recorder.of("crossdomain_place")
    assert places and state.counters.get("cross_domain_added", 0) > 0
    for request in places:
        domain = request.context["domain"]
        assert tree.nodes[domain].parent == tree.root_id
        for leaf in request.context["leaves"]:
            assert tree.path(leaf)[1] == domain
    for request in recorder.of("crossdomain_pick"):
        assert request.context["domain"] not in request.context["domains"]


def test_leaves_grown_by_the_cross_domain_pass_are_split_again():
    services = synthetic(["weather", "travel"], 12)
    rule = Recorder(DomainRule(cross={"travel": "Weather"}))      # every travel service also serves weather
    config = small_config(leaf_max_services=14, max_depth=2)
    state, _ = build(services, config, rule)
    tree = state.tree()
    weather = next(n for n in tree.children("root") if n.name == "Weather")
    assert state.counters["cross_domain_added"] == 12 and state.counters["leaves_resplit_after_cross_domain"] == 1
    assert [c.name for c in tree.children(weather.id)] == ["Travel", "Weather"]     # split again at depth 1
    assert all(len(leaf.services) <= config.leaf_max_services for leaf in tree.leaves())
    placed = rule.of("crossdomain_place")
    assert {r.context["domain"] for r in placed} == {weather.id}
    assert rule.of("design")[-1].context["node"] == weather.id          # the re-split ran after the pass
    assert rule.requests.index(rule.of("design")[-1]) > rule.requests.index(placed[-1])


def test_tiny_categories_are_deleted_and_their_services_kept():
    services = synthetic(["weather", "travel", "music"], 10) + synthetic(["chess"], 2)
    config = small_config(leaf_max_services=20, cross_domain=False)
    state, _ = build(services, config, DomainRule())
    tree = state.tree()
    assert [tree.nodes[c].name for c in tree.root.children] == ["Music", "Travel", "Weather"]
    assert set(tree.root.services) == {"chess_00", "chess_01"}      # moved up to the parent
    assert tree.service_ids() == {s.id for s in services}
    assert state.counters["tiny_categories_deleted"] == 1 and state.counters["services_moved_up"] == 2


def test_generic_and_unassigned_stay_on_the_node_and_refine_stops_after_three_passes():
    services = synthetic(["weather", "travel", "music", "sports"], 8)
    rule = Recorder(DomainRule(generic=["weather_00"], unassigned=["music_03"]))
    config = small_config(leaf_max_services=10, cross_domain=False)
    state, _ = build(services, config, rule)
    tree = state.tree()
    assert set(tree.root.services) == {"weather_00", "music_03"}
    assert "weather_00" not in tree.nodes[tree.root.children[3]].services
    assign_passes = {r.context["pass"] for r in rule.of("assign")}
    assert assign_passes == {1, 2, 3}
    assert len(rule.of("refine")) == 2                   # a refine between passes, none after the last
    # After an unchanged refine only the problem services are classified again.
    later = [s for r in rule.of("assign") if r.context["pass"] > 1 for s in r.context["services"]]
    assert sorted(later) == sorted(["weather_00", "music_03"] * 2)
    assert state.counters["generic_on_node"] == 1 and state.counters["unassigned_on_node"] == 1


def test_refine_reclassifies_members_of_changed_categories():
    services = synthetic(["weather", "travel", "music"], 6)
    rule = Recorder(DomainRule(unassigned=["music_00"], refine_change=["travel"]))
    config = small_config(leaf_max_services=10, cross_domain=False, refine_passes=2)
    build(services, config, rule)
    second = sorted(s for r in rule.of("assign") if r.context["pass"] == 2 for s in r.context["services"])
    assert second == sorted(["music_00"] + [f"travel_{i:02d}" for i in range(6)])


def test_root_validation_redesigns_flagged_categories_at_most_twice():
    services = synthetic(["weather", "travel", "misc"], 10)
    rule = Recorder(DomainRule(flag=["misc"], redesign=["misc"]))   # the redesign keeps the flagged name
    config = small_config(leaf_max_services=20, cross_domain=False)
    state, _ = build(services, config, rule)
    assert len(rule.of("validate")) == 2 and len(rule.of("redesign")) == 2
    assert state.counters["redesign_accepted"] == 2
    redesign = rule.of("redesign")[0]
    assert redesign.context["kept"] == ["Travel", "Weather"] and redesign.context["flagged"] == ["Misc"]


def test_a_redesign_with_fewer_than_three_categories_is_rejected():
    services = synthetic(["weather", "misc"], 10)
    rule = Recorder(DomainRule(flag=["misc"], redesign=["gadgets"]))
    config = small_config(leaf_max_services=15, cross_domain=False, root_validation_rounds=1)
    state, _ = build(services, config, rule)
    assert state.counters["redesign_rejected"] == 1
    assert [state.nodes[c].name for c in state.nodes["root"].children] == ["Misc", "Weather"]


def test_design_with_more_than_n_categories_is_refused_by_the_schema():
    services = synthetic([f"d{i}x" for i in range(6)], 5)
    config = small_config(leaf_max_services=10, max_children=4, cross_domain=False)

    def rule(request):
        if request.context["step"] == "design":
            return categories_json([f"d{i}x" for i in range(6)])      # six categories, N = 4
        return DomainRule()(request)

    with pytest.raises(BuildAborted, match="design answers stayed invalid"):
        build(services, config, rule)
    state, engine = build(services, config.model_copy(update={"max_failed_fraction": 1.0}), rule)
    assert not state.nodes["root"].children and state.counters["design_failed_nodes"] == 1
    assert engine.usage.by_label["design_descriptions"].failures == 1


def test_an_assignment_that_stays_invalid_leaves_its_services_on_the_node():
    services = synthetic(["weather", "travel", "music"], 12)
    base = DomainRule()

    def rule(request):
        if request.context["step"] == "assign" and "music_00" in request.context["services"]:
            return "not the format"
        return base(request)

    config = small_config(leaf_max_services=20, cross_domain=False, max_failed_fraction=0.5)
    state, engine = build(services, config, rule)
    assert "music_00" in state.nodes["root"].services
    assert state.counters["assign_failed_services"] >= 1
    assert engine.usage.by_label["assign"].failures >= 1 and engine.usage.by_label["assign"].retries >= 1
    assert state.tree().service_ids() == {s.id for s in services}


def test_design_prompt_too_long_for_the_window_takes_the_keyword_path(toolret_subset):
    config = small_config(keyword_path_min_services=10_000, cross_domain=False, max_depth=1)
    state, _ = build(toolret_subset, config, WordPolicy(toolret_subset), context_window=6000)
    assert state.counters["design_keyword_fallbacks"] == 1
    assert [e["step"] for e in state.rounds][:2] == ["keywords", "design"]


def test_a_registry_not_above_the_leaf_threshold_is_one_node():
    services = synthetic(["weather"], 5)
    state, engine = build(services, small_config(), DomainRule())
    assert state.tree().root.is_leaf and len(state.tree().root.services) == 5
    assert engine.usage.rounds == 0
