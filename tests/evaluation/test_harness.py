"""The harness with scripted methods: exact summaries, resume after a crash, retries, missing tools, reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from a2x_local.errors import UserError
from a2x_local.evaluation.harness import RESULTS_FILE, EvaluationConfig, RegistryInfo
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.report import load_summary
from a2x_local.evaluation.runner import compare_runs, plan_run, run_evaluation
from a2x_local.search.types import Hit, SearchAnswer, SearchCost, SearchMethod, SearchRequest

REGISTRY = RegistryInfo("test.duckdb", "f" * 64, frozenset("abcdefghij"))


class ScriptedMethod(SearchMethod):
    """Answers from a table (query text -> ranked ids); can crash on a given batch or fail given queries."""

    name = "scripted"

    def __init__(self, table: dict[str, list[str]], *, ranked: bool = True, crash_on_batch: int | None = None,
                 failing: Sequence[str] = (), tokens: tuple[int, int] = (0, 0)) -> None:
        self.table = table
        self.ranked = ranked
        self.crash_on_batch = crash_on_batch
        self.failing = set(failing)
        self.tokens = tokens
        self.batches: list[list[str]] = []

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        self.batches.append([r.query for r in requests])
        if self.crash_on_batch is not None and len(self.batches) == self.crash_on_batch:
            raise RuntimeError("engine died")
        answers = []
        for request in requests:
            ids = self.table.get(request.query, [])
            ids = ids[: request.k] if self.ranked and request.k else ids
            answers.append(SearchAnswer(
                request.query, [Hit(i, 1.0 / (n + 1)) for n, i in enumerate(ids)], ranked=self.ranked,
                cost=SearchCost(prompt_tokens=self.tokens[0], completion_tokens=self.tokens[1],
                                calls=2 if self.tokens[0] else 0, candidates_shown=7 if self.tokens[0] else 0),
                seconds=0.01,
                error="model refused" if request.query in self.failing else None))
        return answers


QUERIES = [
    Query("q1", "one", ("a",)),
    Query("q2", "two", ("b", "c")),
    Query("q3", "three", ("d",)),
    Query("q4", "four", ("e", "zz")),       # zz is not in the registry
    Query("q5", "five", ("yy",)),           # nothing of it is in the registry
]
TABLE = {"one": ["a", "b", "c"], "two": ["x", "b", "d"], "three": ["f", "g"], "four": ["e", "a"], "five": ["a"]}


def _plan(tmp_path: Path, config: EvaluationConfig, *, k: int = 2, name: str = "run", method: str = "scripted"):
    queries_file = tmp_path / "queries.json"
    if not queries_file.exists():
        queries_file.write_text("[]")
    return plan_run(method=method, options={}, mode=None, k=k, queries_file=queries_file, registry=REGISTRY,
                    config=config, out=tmp_path / name)


def _config(**kw) -> EvaluationConfig:
    return EvaluationConfig.defaults(batch_size=kw.pop("batch_size", 2), ks=[1, 2, 3], percent_ks=[0.1], **kw)


def test_summary_matches_hand_computation(tmp_path: Path) -> None:
    config = _config()
    method = ScriptedMethod(TABLE)
    summary = run_evaluation(method, QUERIES, _plan(tmp_path, config), REGISTRY, config)
    # q5 has no correct service in the registry: never sent, not scored
    assert all("five" not in batch for batch in method.batches)
    assert summary["queries"]["skipped_no_correct_in_registry"] == ["q5"]
    assert summary["queries"]["scored"] == 4
    assert summary["queries"]["with_missing_tools"] == 2
    assert summary["queries"]["missing_tool_ids"] == ["yy", "zz"]
    # top-2 answers: q1 [a,b] hit r=1 p=1/2; q2 [x,b] hit r=1/2 p=1/2; q3 [f,g] miss;
    # q4 [e,a] hit r=1 (zz is excluded) p=1/2
    assert summary["hit_rate"] == pytest.approx(3 / 4)
    assert summary["recall"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert summary["precision"] == pytest.approx((0.5 + 0.5 + 0 + 0.5) / 4)
    p, r = summary["precision"], summary["recall"]
    assert summary["f1"] == pytest.approx(2 * p * r / (p + r))
    at = summary["ranked"]["at"]
    assert at["1"]["hit"] == pytest.approx(2 / 4)       # q1 a, q4 e
    assert at["3"]["recall"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)  # q2's c is never returned
    assert at["10%"]["k"] == 1                           # 10% of 10 services
    assert summary["ranked"]["mrr"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert summary["latency_s"]["p50"] == pytest.approx(0.01)
    assert summary["label"] == "scripted @2"


def test_strict_policy_counts_missing_tools_as_misses(tmp_path: Path) -> None:
    config = _config(missing_tools="strict")
    method = ScriptedMethod(TABLE)
    summary = run_evaluation(method, QUERIES, _plan(tmp_path, config), REGISTRY, config)
    assert summary["queries"]["scored"] == 5
    assert any("five" in batch for batch in method.batches)
    # q4 now has recall 1/2 (zz missing), q5 is a miss
    assert summary["recall"] == pytest.approx((1 + 0.5 + 0 + 0.5 + 0) / 5)
    assert summary["hit_rate"] == pytest.approx(3 / 5)


def test_resume_after_a_crash_only_runs_the_rest(tmp_path: Path) -> None:
    config = _config()
    plan = _plan(tmp_path, config)
    crashing = ScriptedMethod(TABLE, crash_on_batch=2)
    with pytest.raises(RuntimeError, match="engine died"):
        run_evaluation(crashing, QUERIES, plan, REGISTRY, config)
    lines = (plan.out_dir / RESULTS_FILE).read_text().splitlines()
    # q5 (nothing to find) and the first batch [q1, q2] were saved before the crash
    assert sorted(json.loads(line)["id"] for line in lines) == ["q1", "q2", "q5"]
    assert not (plan.out_dir / "summary.json").exists()

    resumed = ScriptedMethod(TABLE)
    summary = run_evaluation(resumed, QUERIES, plan, REGISTRY, config)
    assert resumed.batches == [["three", "four"]]
    assert summary["resumed_queries"] == 3
    assert summary["queries"]["scored"] == 4
    assert summary["hit_rate"] == pytest.approx(3 / 4)
    assert len((plan.out_dir / RESULTS_FILE).read_text().splitlines()) == 5


def test_torn_last_line_and_errors_are_rerun(tmp_path: Path) -> None:
    config = _config()
    plan = _plan(tmp_path, config)
    run_evaluation(ScriptedMethod(TABLE, failing=["two"]), QUERIES, plan, REGISTRY, config)
    summary = load_summary(plan.out_dir)
    assert summary["queries"]["errors"] == 1
    results = plan.out_dir / RESULTS_FILE
    lines = results.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["id"] != "q3"]
    results.write_text("\n".join(kept) + "\n" + '{"id": "q3", "query": "thr')  # a write cut off by a crash
    again = ScriptedMethod(TABLE)
    summary = run_evaluation(again, QUERIES, plan, REGISTRY, config)
    assert sorted(q for batch in again.batches for q in batch) == ["three", "two"]
    assert summary["queries"]["errors"] == 0
    assert len(results.read_text().splitlines()) == 5


def test_damaged_middle_line_is_an_error(tmp_path: Path) -> None:
    config = _config()
    plan = _plan(tmp_path, config)
    run_evaluation(ScriptedMethod(TABLE), QUERIES, plan, REGISTRY, config)
    results = plan.out_dir / RESULTS_FILE
    lines = results.read_text().splitlines()
    results.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    with pytest.raises(UserError, match="line 2 is not valid JSON"):
        run_evaluation(ScriptedMethod(TABLE), QUERIES, plan, REGISTRY, config)
    summary = run_evaluation(ScriptedMethod(TABLE), QUERIES, plan, REGISTRY, config, fresh=True)
    assert summary["resumed_queries"] == 0


def test_limit_then_full_run_resumes(tmp_path: Path) -> None:
    config = _config()
    plan = _plan(tmp_path, config)
    first = run_evaluation(ScriptedMethod(TABLE), QUERIES, plan, REGISTRY, config, limit=2)
    assert first["queries"]["selected"] == 2
    method = ScriptedMethod(TABLE)
    full = run_evaluation(method, QUERIES, plan, REGISTRY, config)
    assert full["resumed_queries"] == 2
    assert method.batches == [["three", "four"]]


def test_other_settings_in_the_same_folder_are_refused(tmp_path: Path) -> None:
    config = _config()
    run_evaluation(ScriptedMethod(TABLE), QUERIES, _plan(tmp_path, config, k=2), REGISTRY, config)
    with pytest.raises(UserError, match="other settings") as err:
        run_evaluation(ScriptedMethod(TABLE), QUERIES, _plan(tmp_path, config, k=3), REGISTRY, config)
    assert "k" in err.value.message
    assert "--fresh" in err.value.hint


def test_unranked_method_with_model_costs(tmp_path: Path) -> None:
    config = _config()
    method = ScriptedMethod(TABLE, ranked=False, tokens=(1000, 20))
    summary = run_evaluation(method, QUERIES, _plan(tmp_path, config, k=1), REGISTRY, config)
    assert "ranked" not in summary and summary["k"] is None
    # an unranked answer is scored whole, not cut at k: q1 [a,b,c] -> precision 1/3
    records = [json.loads(x) for x in (tmp_path / "run" / RESULTS_FILE).read_text().splitlines()]
    q1 = next(r for r in records if r["id"] == "q1")
    assert q1["returned"] == ["a", "b", "c"] and q1["precision"] == pytest.approx(1 / 3)
    assert summary["prompt_tokens_per_query"] == 1000
    assert summary["tokens_per_query"] == 1020
    assert summary["calls_per_query"] == 2
    assert summary["candidates_shown_per_query"] == 7
    assert not (tmp_path / "run" / "hit_recall_vs_k.png").exists()


def test_batches_are_sent_together(tmp_path: Path) -> None:
    config = _config(batch_size=3)
    method = ScriptedMethod(TABLE)
    run_evaluation(method, QUERIES, _plan(tmp_path, config), REGISTRY, config)
    assert [len(batch) for batch in method.batches] == [3, 1]


def test_report_plots_and_compare(tmp_path: Path) -> None:
    config = _config()
    run_evaluation(ScriptedMethod(TABLE), QUERIES, _plan(tmp_path, config, name="a"), REGISTRY, config)
    llm = ScriptedMethod(TABLE, ranked=False, tokens=(5000, 50))
    run_evaluation(llm, QUERIES, _plan(tmp_path, config, name="b", method="llm"), REGISTRY, config)
    report = (tmp_path / "a" / "report.md").read_text()
    assert "| 75.0 |" in report and "@10% (k=1)" in report and "q5" in report
    assert (tmp_path / "a" / "hit_recall_vs_k.png").read_bytes()[:4] == b"\x89PNG"
    summaries, files = compare_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "cmp")
    assert [s["label"] for s in summaries] == ["scripted @2", "llm"]
    assert sorted(f.name for f in files) == ["compare.md", "hit_vs_k.png", "recall_vs_k.png", "tokens_vs_hit.png"]
    assert all(f.stat().st_size > 0 for f in files)
    assert "| llm | 4 | - | 75.0 |" in (tmp_path / "cmp" / "compare.md").read_text()
    with pytest.raises(UserError, match="not a finished run"):
        (tmp_path / "c").mkdir()
        compare_runs([tmp_path / "c"])
    with pytest.raises(UserError, match="no such run folder"):
        compare_runs([tmp_path / "absent"])


def test_an_llm_query_whose_calls_all_failed_is_counted_as_an_error_and_rerun(tmp_path: Path) -> None:
    from a2x_local.search.llm.a2x import A2XSearch
    from a2x_local.search.llm.config import LlmSearchConfig
    from a2x_local.testing import ScriptedEngine
    from tests.search.a2x_helpers import Oracle, sample_services, sample_tree

    tree, services = sample_tree(), sample_services()
    registry = RegistryInfo("test.duckdb", "f" * 64, frozenset(services))
    queries = [Query("fly", "book a flight", ("f2",)), Query("pay", "pay a bill", ("p1",))]
    config = _config()
    plan = _plan(tmp_path, config, method="a2x")
    broken = A2XSearch(tree, services, ScriptedEngine(lambda request: "not a number"), LlmSearchConfig.defaults())
    summary = run_evaluation(broken, queries, plan, registry, config)
    assert summary["queries"]["errors"] == 2 and summary["hit_rate"] == 0.0
    records = [json.loads(line) for line in (plan.out_dir / RESULTS_FILE).read_text().splitlines()]
    assert all(record["error"] for record in records)
    oracle = Oracle(tree, {"book a flight": {"f2"}, "pay a bill": {"p1"}})
    working = A2XSearch(tree, services, ScriptedEngine(oracle), LlmSearchConfig.defaults())
    summary = run_evaluation(working, queries, plan, registry, config)
    assert {r.context["query"] for r in oracle.seen} == {"book a flight", "pay a bill"}   # both were rerun
    assert summary["queries"]["errors"] == 0 and summary["hit_rate"] == 1.0 and summary["resumed_queries"] == 0
