"""Completeness in every summary (COMP at each cut-off, one vs several correct services) and the decomposition
numbers of methods that decompose, computed by hand."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from a2x_local.evaluation.composition import category_recall
from a2x_local.evaluation.harness import EvaluationConfig, RegistryInfo
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.report import compare_row, render_report
from a2x_local.evaluation.runner import plan_run, run_evaluation
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest

REGISTRY = RegistryInfo("test.duckdb", "f" * 64, frozenset("abcdefghij"))
QUERIES = [
    Query("q1", "one", ("a",)),
    Query("q2", "two", ("b", "c"), steps=(("b",), ("c",))),
    Query("q3", "three", ("d", "e", "f"), steps=(("d",), ("e", "f"))),
]
RANKINGS = {"one": ["x", "a", "y"], "two": ["b", "c", "x"], "three": ["d", "x", "e"]}
# What a decomposing method reports per query: steps, the plan's services, each step's ranking.
COMPOSED = {"one": {"steps": 1, "services": ["x"], "step_rankings": [["x", "a", "y"]]},
            "two": {"steps": 2, "services": ["b", "c"], "step_rankings": [["b", "x"], ["c"]]},
            "three": {"steps": 1, "services": ["d"], "step_rankings": [["d", "x", "e"]]}}


class Decomposing(SearchMethod):
    name = "decomposing"
    ranked = True

    def __init__(self, composed: bool) -> None:
        self.composed = composed

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        return [SearchAnswer(r.query, [Hit(i) for i in RANKINGS[r.query][: r.k]], ranked=True,
                             trace={"compose": {**COMPOSED[r.query], "sad_applied": False, "sad_copy_rejected": 0}}
                             if self.composed else None) for r in requests]


def _run(tmp_path: Path, composed: bool) -> dict:
    config = EvaluationConfig.defaults(batch_size=8, ks=[1, 3], percent_ks=[])
    queries_file = tmp_path / "queries.json"
    queries_file.write_text("[]")
    plan = plan_run(method="decomposing", options={}, mode=None, k=3, queries_file=queries_file, registry=REGISTRY,
                    config=config, out=tmp_path / ("c" if composed else "f"))
    return run_evaluation(Decomposing(composed), QUERIES, plan, REGISTRY, config, plots=False)


def test_comp_sits_beside_hit_and_recall_and_by_size(tmp_path: Path) -> None:
    summary = _run(tmp_path, composed=False)
    # top 3: q1 has a (complete); q2 has b, c (complete); q3 has d, e of d, e, f (not complete)
    assert summary["comp"] == pytest.approx(2 / 3)
    at = summary["ranked"]["at"]
    assert at["1"]["comp"] == pytest.approx(0.0)       # q1's a is at 2; q2 needs two
    assert at["3"]["comp"] == pytest.approx(2 / 3)
    single, multi = summary["by_size"]["single"], summary["by_size"]["multi"]
    assert (single["queries"], multi["queries"]) == (1, 2)
    assert single["at"]["1"] == {"k": 1, "hit": 0.0, "recall": 0.0, "comp": 0.0}
    assert multi["at"]["3"]["comp"] == pytest.approx(0.5)
    assert multi["at"]["3"]["recall"] == pytest.approx((1 + 2 / 3) / 2)
    assert multi["at"]["1"]["hit"] == pytest.approx(1.0)
    assert "decomposition" not in summary                # the method does not decompose
    assert compare_row(summary)["multi comp@10"] == "-"  # no cut-off at 10 in this run
    report = render_report(summary)
    assert "## By correct-set size" in report and "| two or more | 2 |" in report


def test_decomposition_against_reference_steps(tmp_path: Path) -> None:
    summary = _run(tmp_path, composed=True)
    block = summary["decomposition"]
    assert block["steps_per_query"] == pytest.approx(4 / 3)
    assert block["steps_per_query_by_size"] == {"single": 1.0, "multi": 1.5}
    # the plan's own services: q1 [x] miss; q2 [b, c] complete; q3 [d] 1 of 3
    assert block["plan"]["hit"] == pytest.approx(2 / 3)
    assert block["plan"]["comp"] == pytest.approx(1 / 3)
    assert block["plan"]["recall"] == pytest.approx((0 + 1 + 1 / 3) / 3)
    reference = block["reference"]
    # q2: 2 steps for 2 (DA); q3: 1 for 2 (DA±1 only)
    assert (reference["queries"], reference["da"], reference["da_pm1"]) == (2, 0.5, 1.0)
    # reference steps b, c, d, (e|f): b@1 yes, c@1 yes, d@1 yes, e at 3 of q3's only step
    assert reference["steps_scored"] == 4
    assert reference["step_hit"]["1"] == pytest.approx(3 / 4)
    assert reference["step_hit"]["5"] == pytest.approx(1.0)
    # CatR by position: q2 step 1 [b, x] recalls b, step 2 [c] recalls c; q3 step 1 [d, x, e] recalls d, and its
    # second reference step (e|f) has no predicted step 2: missed, though e is in step 1's top 10
    assert reference["catr"] == {"1": pytest.approx(3 / 4), "10": pytest.approx(3 / 4)}
    report = render_report(summary)
    assert "## Decomposition" in report and "DA 50.0, DA±1 100.0" in report and "CatR @1 75.0" in report


def test_category_recall_reads_categories_when_given() -> None:
    rankings = [["x", "b"], ["y"]]
    reference = [("a",), ("c",), ("d",)]
    assert category_recall(rankings, reference) == {1: [0.0, 0.0, 0.0], 10: [0.0, 0.0, 0.0]}
    kinds = {"a": frozenset({"travel"}), "b": frozenset({"travel"}), "x": frozenset({"food"}),
             "c": frozenset({"money"}), "y": frozenset({"money", "food"})}
    assert category_recall(rankings, reference, categories=kinds) == {1: [0.0, 1.0], 10: [1.0, 1.0]}   # d: none
