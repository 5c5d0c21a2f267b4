"""Search modes as published and no silent cuts: per-mode descent and selection instructions, get_all without a
cap, caps that ask for the most relevant first and are counted, category lines as built."""

from __future__ import annotations

import re
from pathlib import Path

from a2x_local.evaluation.harness import EvaluationConfig, RegistryInfo
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.report import render_report
from a2x_local.evaluation.runner import plan_run, run_evaluation
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.types import SearchRequest
from a2x_local.taxonomy.types import Tree, TreeNode
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, descent_config, make_tree, sample_services, sample_tree, services_for

# Twelve categories with three services each; a query wants one service from each of the last eight.
WIDE = {"root": ("All", [])} | {f"root/{k}": (f"Cat{k}", [f"s{k}a", f"s{k}b", f"s{k}c"]) for k in range(1, 13)}
WANTED = {"everything late": {f"s{k}a" for k in range(5, 13)}}


def _wide(config: LlmSearchConfig):
    tree = make_tree(WIDE)
    oracle = Oracle(tree, WANTED)
    engine = ScriptedEngine(oracle)
    ids = {s for _, services in WIDE.values() for s in services}
    return A2XSearch(tree, services_for(ids), engine, config), oracle


def test_get_all_takes_every_chosen_child_and_service_without_a_cap():
    # Only the answer caps are watched here: the over-selection guard (test_a2x_budget.py) is off.
    method, oracle = _wide(descent_config(overselect_share=1.0))
    answer = method.search("everything late", mode="get_all")
    root = answer.trace["decisions"][0]
    assert len(root["selected"]) == 8 and not root["capped"]
    assert set(answer.ids) == WANTED["everything late"] and answer.cost.capped == 0
    # The regex allows every position, and no prompt mentions a cap.
    descend = oracle.seen[0]
    assert re.fullmatch(descend.constraint.pattern, ",".join(str(k) for k in range(1, 13)))
    assert "at most" not in descend.messages[0]["content"]


def test_a_cap_asks_for_the_most_relevant_first_and_every_capped_answer_is_counted():
    method, oracle = _wide(descent_config(max_children_selected=3, max_services_selected=1,
                                                    merge_threshold=100, group_lists="merged"))
    answer = method.search("everything late", mode="get_all")
    descend = oracle.seen[0]
    assert "at most 3 numbers, the most relevant first" in descend.messages[0]["content"]
    assert not re.fullmatch(descend.constraint.pattern, "1,2,3,4")
    root = answer.trace["decisions"][0]
    assert len(root["selected"]) == 3 and root["capped"]
    [selection] = answer.trace["selection"]
    assert selection["capped"] and len(selection["selected"]) == 1
    # One capped descent answer and one capped selection answer: counted in the answer and visible in the trace.
    assert answer.cost.capped == 2 and len(answer.ids) == 1


def test_a_cap_the_list_does_not_reach_is_no_cap():
    method, oracle = _wide(descent_config(max_children_selected=50))
    answer = method.search("everything late")
    assert "at most" not in oracle.seen[0].messages[0]["content"] and answer.cost.capped == 0


def test_get_important_descends_for_recall_and_selects_strictly():
    tree = sample_tree()
    oracle = Oracle(tree, {"q": {"h1"}})
    method = A2XSearch(tree, sample_services(), ScriptedEngine(oracle), descent_config())
    method.search_batch([SearchRequest("q", mode="get_important"), SearchRequest("q", mode="get_all")])
    system = {(r.context["call"], r.context["mode"]): r.messages[0]["content"] for r in oracle.seen}
    assert "any part of the request could require it" in system["descend", "get_important"]
    assert "clearly needs" in system["select", "get_important"]
    assert "When in doubt, include" in system["descend", "get_all"] and "When in doubt" in system["select", "get_all"]
    assert "When in doubt" not in system["select", "get_important"]
    # The query always comes last, after the list the queries share.
    assert all(r.messages[-1]["content"].rstrip().endswith("Request: q") for r in oracle.seen)


def test_category_lines_show_descriptions_as_built_and_any_boundary_wording():
    text = "Services that " + "help with travel plans, " * 7 + "end."
    nodes = {"root": TreeNode("root", None, 0, "All", "All", children=["root/1", "root/2"]),
             "root/1": TreeNode("root/1", "root", 1, "Travel", text[:199], boundary="Includes trips; excludes maps.",
                                services=["f1"]),
             "root/2": TreeNode("root/2", "root", 1, "Weather", "Forecasts", boundary="NOT here: climate",
                                services=["w1"])}
    tree = Tree(nodes=nodes, registry_fingerprint="fp")
    oracle = Oracle(tree, {"q": {"f1"}})
    config = descent_config(category_lines="full", boundary_min_overlap=0.0)
    method = A2XSearch(tree, sample_services(), ScriptedEngine(oracle), config)
    method.search("q", mode="get_one")
    listing = oracle.seen[0].messages[1]["content"]
    assert text[:199].strip() in listing and "…" not in listing
    assert "(boundary: Includes trips; excludes maps.)" in listing and "(NOT here: climate)" in listing


def test_capped_answers_reach_the_evaluation_summary_and_report(tmp_path: Path):
    method, _ = _wide(descent_config(max_children_selected=2))
    registry = RegistryInfo("wide.duckdb", "f" * 64, frozenset(s for _, ss in WIDE.values() for s in ss))
    config = EvaluationConfig.defaults(batch_size=4)
    queries_file = tmp_path / "queries.json"
    queries_file.write_text("[]")
    plan = plan_run(method="a2x", options={}, mode=None, k=10, queries_file=queries_file, registry=registry,
                    config=config, out=tmp_path / "run")
    queries = [Query("q1", "everything late", tuple(sorted(WANTED["everything late"]))),
               Query("q2", "nothing", ("s1a",))]
    summary = run_evaluation(method, queries, plan, registry, config)
    assert summary["capped_answers"] == 1 and summary["queries_with_capped_answers"] == 1
    assert "1 model answers in 1 queries filled a cap" in render_report(summary)
