"""The build as published: multi-label assignment (batched and per service), full refinement (new categories offered
to every service, prompts shrunk to fit, samples spread), keyword paths with their parent's context, the whole
vocabulary for the designer, and the prompt details (axis first, boundaries in validation, counts in refine, the
leaf's own identity in the cross-domain pick)."""

from __future__ import annotations

import json
from dataclasses import replace

from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import spread
from a2x_local.taxonomy.induction.design import design_requests, vocabulary_text
from a2x_local.taxonomy.induction.keywords import keyword_requests, merge_vocabulary, prefix_map
from a2x_local.taxonomy.induction.refine import refine_requests
from a2x_local.taxonomy.induction.report import build_report
from a2x_local.taxonomy.induction.state import KEYWORDS, REFINE, BuildState, Draft, NodeWork
from a2x_local.taxonomy.types import Tree, TreeNode
from a2x_local.testing import ScriptedEngine, categories_json, category_text
from tests.taxonomy.helpers import Recorder, build, small_config, synthetic
from tests.taxonomy.rules import DomainRule, domain_of

# -- multi-label assignment --------------------------------------------------------------------------------------


def test_assignment_asks_for_every_category_that_fits_and_files_a_service_under_each():
    # Six categories: a service may fit two before it counts as generic.
    services = synthetic(["weather", "travel", "music", "sports", "food", "news"], 8)
    base = DomainRule()

    def rule(request):
        answer = base(request)
        if request.context["step"] == "assign" and "travel_00" in request.context["services"]:
            names = [n.lower() for n in request.context["categories"]]
            k = request.context["services"].index("travel_00") + 1
            both = f"{names.index('travel') + 1},{names.index('weather') + 1}"
            answer = "\n".join(f"{k}: {both}" if line.startswith(f"{k}: ") else line for line in answer.split("\n"))
        return answer

    recorder = Recorder(rule)
    state, _ = build(services, small_config(leaf_max_services=10, cross_domain=False), recorder)
    system = recorder.of("assign")[0].messages[0]["content"]
    assert "every category it fits" in system and "exactly one category" not in system
    tree = state.tree()
    homes = [tree.nodes[c].name for c in tree.root.children if "travel_00" in tree.nodes[c].services]
    assert homes == ["Travel", "Weather"]
    stats = tree.stats()
    assert stats.mean_leaves_per_service == round(49 / 48, 2) and stats.services_on_several_leaves == 1


def test_mean_leaves_per_service_counts_leaf_placements_over_every_service():
    nodes = {"root": TreeNode("root", None, 0, "All", "", children=["root/1", "root/2"], services=["g"]),
             "root/1": TreeNode("root/1", "root", 1, "A", "", services=["a", "b"]),
             "root/2": TreeNode("root/2", "root", 1, "B", "", services=["a", "c"])}
    stats = Tree(nodes=nodes).stats()
    # a on two leaves, b and c on one, g on none (held by the root): 4 placements over 4 services.
    assert stats.mean_leaves_per_service == 1.0 and stats.mean_nodes_per_service == 1.25


def test_per_service_assignment_sends_one_service_per_request_with_a_reasoning_line():
    services = synthetic(["weather", "travel", "music"], 8)
    batched = Recorder(DomainRule())
    single = Recorder(DomainRule())
    config = small_config(leaf_max_services=10, cross_domain=False)
    state_b, engine_b = build(services, config, batched)
    state_s, engine_s = build(services, config.model_copy(update={"assign_mode": "per_service"}), single)
    assert not single.of("assign") and len(single.of("assign_one")) == len(services)
    request = single.of("assign_one")[0]
    assert "Reasoning: " in request.constraint.pattern and request.messages[1]["content"].count(" tool ") == 1
    # Same placements, different cost: the category list is sent once per service instead of once per batch.
    assert {n.name: n.services for n in state_b.tree().walk()} == {n.name: n.services for n in state_s.tree().walk()}
    assert engine_s.usage.by_label["assign_one"].calls == 24 > engine_b.usage.by_label["assign"].calls
    assert engine_s.usage.by_label["assign_one"].prompt_tokens > engine_b.usage.by_label["assign"].prompt_tokens


# -- full refinement ---------------------------------------------------------------------------------------------


class AddsDomain(DomainRule):
    """The first design leaves out "news"; the refine adds it; some weather services also fit news."""

    def __call__(self, request):
        c = request.context
        if c["step"] == "design":
            return categories_json(sorted({domain_of(s) for s in c["services"]} - {"news"}))
        if c["step"] == "refine":
            names = [n.lower() for n in c["categories"]]
            items = [{"source": i, **category_text(n), "keywords": [n]} for i, n in enumerate(names, start=1)]
            items.append({"source": 0, **category_text("news"), "keywords": ["news"]})
            return json.dumps({"dimension": "domain", "categories": items})
        if c["step"] == "assign_new":
            return "\n".join(f"{k}: {'1' if s in ('weather_00', 'weather_01') else 'NONE'}"
                             for k, s in enumerate(c["services"], start=1))
        return super().__call__(request)


def test_services_under_unchanged_categories_are_offered_the_categories_a_refine_adds():
    domains = ["weather", "travel", "music", "sports", "food", "news"]    # six categories: generic above two
    services = synthetic(domains, 8)
    rule = Recorder(AddsDomain())
    state, engine = build(services, small_config(leaf_max_services=10, cross_domain=False), rule)
    offers = rule.of("assign_new")
    assert offers and all(r.context["categories"] == ["News"] for r in offers)
    assert "New categories:\n1. News" in offers[0].messages[1]["content"]
    offered = sorted(s for r in offers for s in r.context["services"])
    assert offered == sorted(s.id for s in services if not s.id.startswith("news"))
    # The offers rode in the same round as the reclassification of the unassigned news services.
    second = [e for e in state.rounds if e["step"] == "assign"][1]
    assert second["requests"] == len([r for r in rule.requests if r.context.get("pass") == 2])
    assert any(r.context["step"] == "assign" for r in rule.requests if r.context.get("pass") == 2)
    tree = state.tree()
    news = next(tree.nodes[c] for c in tree.root.children if tree.nodes[c].name == "News")
    assert set(news.services) == {f"news_{i:02d}" for i in range(8)} | {"weather_00", "weather_01"}
    weather = next(tree.nodes[c] for c in tree.root.children if tree.nodes[c].name == "Weather")
    assert "weather_00" in weather.services                      # kept where it was, and added to News
    assert state.counters["new_category_placements"] == 2
    assert engine.usage.by_label["assign_new"].calls == len(offers)


def _refine_work(problems: int, categories: int = 18) -> tuple[BuildState, NodeWork, dict]:
    long = " It reads, checks and reports many details about the thing in question for the user." * 3
    services = {s.id: replace(s, description=s.description + long)
                for s in synthetic(["thing"], problems + categories)}
    ids = sorted(services)
    state = BuildState.start(ids)
    drafts = [Draft(f"Category {k}", f"Services about topic {k} for users.", f"If the user wants topic {k}.",
                    f"NOT here: other topics (goes to Category {k + 1})", [f"topic_{k}"])
              for k in range(1, categories + 1)]
    work = NodeWork(node_id="root", path="All services", services=ids, status=REFINE, drafts=drafts,
                    dimension="user-facing topic")
    work.assignment = {s: [] for s in ids[:problems]} | {s: [k % categories + 1] for k, s in enumerate(ids[problems:])}
    work.passes = 1
    return state, work, services


def test_refine_samples_spread_over_the_node_and_the_prompt_carries_counts_and_axis():
    state, work, services = _refine_work(problems=120)
    config = BuildConfig.defaults(refine_samples=6)
    [plan] = refine_requests([work], services, config, ScriptedEngine(lambda r: ""), state)
    sample = plan.request.context["unassigned"]
    unassigned = sorted(services)[:120]
    assert sample == [unassigned[i * 20] for i in range(6)] and sample != unassigned[:6]
    user = plan.request.messages[1]["content"]
    assert "Unassigned services (6 of 120 shown)" in user and "120 unassigned" in user
    assert "18 filed under one to" in user and "Classification axis of the current categories: user-facing topic" \
        in user


def test_a_refine_that_does_not_fit_is_shrunk_until_it_does_and_recorded():
    state, work, services = _refine_work(problems=60)
    config = BuildConfig.defaults()
    roomy = ScriptedEngine(lambda r: "")
    [whole] = refine_requests([work], services, config, roomy, BuildState.start([]))
    window = roomy.count_prompt_tokens(whole.request.messages) + whole.request.max_tokens - 300
    engine = ScriptedEngine(lambda r: "", context_window=window)
    [plan] = refine_requests([work], services, config, engine, state)
    context = plan.request.context
    assert (context["samples"], context["description_chars"]) < (config.refine_samples, 151)
    assert engine.count_prompt_tokens(plan.request.messages) + plan.request.max_tokens <= window
    [event] = state.events
    assert (event["step"], event["what"], event["node"]) == ("refine", "shrunk", "root")
    assert event["samples"] == context["samples"]
    # With 18 categories at 8K the worst-case budget (20 categories at every field's bound) could never fit;
    # the realistic estimate does.
    big = ScriptedEngine(lambda r: "", context_window=8192)
    state8, work8, _ = _refine_work(problems=60)
    assert refine_requests([work8], services, config, big, state8)


def test_a_refine_that_cannot_fit_at_all_is_skipped_and_the_build_record_says_so():
    state, work, services = _refine_work(problems=10)
    plans = refine_requests([work], services, BuildConfig.defaults(), ScriptedEngine(lambda r: "",
                                                                                     context_window=900), state)
    assert plans == [] and work.status == "done"
    assert [(e["step"], e["what"]) for e in state.events] == [("refine", "skipped")]
    report = build_report(state, state.tree(), BuildConfig.defaults(), ScriptedEngine(lambda r: "").usage)
    assert report["events"] == state.events and report["counters"]["refine_skipped"] == 1


def test_spread_is_even_and_keeps_everything_when_short():
    assert spread(list("abcdefghij"), 5) == list("acegi") and spread(list("abc"), 5) == list("abc")


# -- keyword path ------------------------------------------------------------------------------------------------


def _child_state(services, size=8):
    ids = sorted(s.id for s in services)
    state = BuildState.start(ids)
    child = TreeNode("root/1", "root", 1, "Finance", "Money services: payments, banking and markets.",
                     boundary="NOT here: shopping (goes to Commerce)", services=ids)
    state.nodes["root"].children = ["root/1"]
    state.nodes["root"].services = []
    state.nodes["root/1"] = child
    work = NodeWork(node_id="root/1", path="All services › Finance", services=ids, mode="keywords", status=KEYWORDS)
    return state, work


def test_keyword_and_design_prompts_below_the_root_carry_the_parents_context():
    services = synthetic(["pay", "bank"], 5)
    by_id = {s.id: s for s in services}
    state, work = _child_state(services)
    config = small_config()
    engine = ScriptedEngine(lambda r: "")
    [plan] = keyword_requests([work], by_id, config, engine, state)
    work.keywords = {s: ["payments"] for s in work.services}
    merge_vocabulary(work, config)
    [design] = design_requests([work], by_id, config, engine, state)
    for request in (plan.request, design.request):
        user = request.messages[1]["content"]
        assert "All services › Finance (10 services)" in user
        assert "Money services: payments, banking and markets." in user
        assert "NOT here: shopping (goes to Commerce)" in user and "within this domain" in user
    root_state = BuildState.start(sorted(by_id))
    root_work = NodeWork(node_id="root", path="All services", services=sorted(by_id), mode="keywords",
                         status=KEYWORDS)
    [root_plan] = keyword_requests([root_work], by_id, config, engine, root_state)
    assert "the whole registry (10 services)" in root_plan.request.messages[1]["content"]
    assert "within this domain" not in root_plan.request.messages[1]["content"]


def test_affix_merging_joins_near_synonyms_and_the_sizes_are_reported():
    mapping = prefix_map({"crypto": 3, "cryptocurrency": 2, "weather": 4, "weather_forecast": 1, "health": 1,
                          "healthcare": 5, "news": 2, "newsletter": 1}, 5)
    assert mapping["cryptocurrency"] == "crypto" and mapping["weather_forecast"] == "weather"
    assert mapping["healthcare"] == "health" and mapping["newsletter"] == "newsletter"   # "news" is too short
    work = NodeWork(node_id="root", path="All", services=list("abcdef"), mode="keywords", status=KEYWORDS)
    work.keywords = {"a": ["crypto"], "b": ["cryptocurrency"], "c": ["weather_forecast"], "d": ["weather"],
                     "e": ["healthcare"], "f": ["health", "weather"]}
    sizes = merge_vocabulary(work, BuildConfig.defaults(keyword_merge="stem"))
    assert (sizes["raw"], sizes["stemmed"], sizes["affixed"], sizes["merged"]) == (6, 6, 3, 3)
    assert dict(map(tuple, work.vocabulary)) == {"weather": 3, "crypto": 2, "health": 2}
    off = NodeWork(node_id="root", path="All", services=["a", "b"], mode="keywords", status=KEYWORDS)
    off.keywords = {"a": ["crypto"], "b": ["cryptocurrency"]}
    assert merge_vocabulary(off, BuildConfig.defaults(keyword_merge="stem", keyword_prefix_merge_min_chars=0)
                            )["merged"] == 2


def test_the_designer_sees_the_whole_vocabulary_with_the_rare_words_bucketed():
    vocabulary = [["weather", 9], ["travel", 7], ["music", 3], ["chess", 1], ["opera", 1], ["golf", 3]]
    text, left_out = vocabulary_text(vocabulary, 2, 10)
    assert left_out == 0
    assert text.split("\n") == ["weather (9)", "travel (7)", "used by 3 services: music, golf",
                                "used by 1 service: chess, opera"]
    text, left_out = vocabulary_text(vocabulary, 2, 1)
    assert left_out == 3 and text.endswith("(3 rarer keywords not shown)")


def test_a_vocabulary_too_big_for_the_window_is_shrunk_and_recorded():
    services = synthetic(["pay"], 4)
    by_id = {s.id: s for s in services}
    state, work = _child_state(services)
    work.vocabulary = [[f"keyword_number_{i}", 1000 - i] for i in range(600)]
    config = small_config(keyword_table_max=300)
    [design] = design_requests([work], by_id, config, ScriptedEngine(lambda r: "", context_window=9000), state)
    assert "rarer keywords not shown" in design.request.messages[1]["content"]
    [event] = state.events
    assert event["what"] == "shrunk" and event["keywords_left_out"] > 0
    full = BuildState.start(sorted(by_id))
    wide = NodeWork(node_id="root", path="All", services=sorted(by_id), mode="keywords", status=KEYWORDS)
    wide.vocabulary = work.vocabulary
    [whole] = design_requests([wide], by_id, config, ScriptedEngine(lambda r: ""), full)
    assert "keyword_number_599" in whole.request.messages[1]["content"] and not full.events


# -- prompt details ----------------------------------------------------------------------------------------------


def test_designs_state_their_axis_first_and_validation_sees_boundaries():
    services = synthetic(["weather", "travel", "music"], 10)
    rule = Recorder(DomainRule())
    build(services, small_config(leaf_max_services=20, cross_domain=False), rule)
    design = rule.of("design")[0]
    schema = design.constraint.schema()
    assert list(schema["properties"]) == ["dimension", "categories"] and "dimension" in schema["required"]
    validate = rule.of("validate")[0].messages[1]["content"]
    assert "(NOT here: services that only mention weather in passing" in validate


def test_the_cross_domain_pick_sees_the_leafs_own_identity_and_is_told_to_be_selective():
    services = synthetic(["weather", "travel", "music"], 12)
    rule = Recorder(DomainRule(cross={"weather": "Travel"}))
    state, _ = build(services, small_config(leaf_max_services=20), rule)
    pick = rule.of("crossdomain_pick")[0]
    name = state.nodes[pick.context["leaf"]].name
    assert f"Services filed under: {name} (Services that help users with {name.lower()}" in pick.messages[1]["content"]
    assert "often none" in pick.messages[0]["content"]
