"""What an evaluation says about how the model decided (issue 31): the share of its choices that took the first
option against a choice blind to position, the plain verdict when it chooses by position, and the guards that held
it in check (over-selections, budget cuts, answers cut off), in the summary, report.md and `eval compare-presets`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from a2x_local.evaluation import decision_notes
from a2x_local.evaluation.harness import EvaluationConfig, RegistryInfo, registry_info
from a2x_local.evaluation.presets import compare_presets
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.report import render_report
from a2x_local.evaluation.runner import plan_run, run_evaluation
from a2x_local.evaluation.summary import POSITION_BIAS_EXCESS, POSITION_BIAS_MIN_CHOICES, position_bias
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.settings import load_settings
from a2x_local.testing import FirstOption, ScriptedEngine, SelectEverything
from tests.search.a2x_helpers import Oracle, descent_config, sample_services, sample_tree, store_registry_and_tree

WANTED = {"a flight": ("f1",), "the weather": ("w2",), "pay it": ("p1",), "stock prices": ("s3",),
          "a hotel": ("h2",), "my payments": ("p2",)}
QUERIES = [Query(f"q{k}", text, correct) for k, (text, correct) in enumerate(WANTED.items())] * 1


def _records(choices: int, first: int, uniform: float) -> list[dict]:
    return [{"choices": choices, "first_choices": first, "uniform_first": uniform * choices}]


def test_the_rule_needs_enough_choices_and_a_first_option_far_above_a_blind_choice():
    assert position_bias([{"choices": 0}]) is None                        # a method without model choices
    at_rule = POSITION_BIAS_EXCESS * 0.8 + 0.2                          # blind share 0.2: the threshold share
    assert position_bias(_records(POSITION_BIAS_MIN_CHOICES, round(at_rule * POSITION_BIAS_MIN_CHOICES), 0.2))[
        "by_position"]
    below = position_bias(_records(POSITION_BIAS_MIN_CHOICES, round(at_rule * POSITION_BIAS_MIN_CHOICES) - 1, 0.2))
    assert not below["by_position"] and below["excess"] < POSITION_BIAS_EXCESS - 0.01
    few = position_bias(_records(POSITION_BIAS_MIN_CHOICES - 1, POSITION_BIAS_MIN_CHOICES - 1, 0.2))
    assert few["first_option_share"] == 1.0 and not few["by_position"]
    blind = position_bias(_records(100, 20, 0.2))
    assert blind["excess"] == pytest.approx(0.0) and not blind["by_position"]


def _evaluate(tmp_path: Path, rule, name: str, config=None, copies: int = 4, mode: str = "get_one") -> dict:
    tree = sample_tree()
    method = A2XSearch(tree, sample_services(), ScriptedEngine(rule(tree)), config or descent_config())
    registry = RegistryInfo("sample.duckdb", "f" * 64, frozenset(sample_services()))
    queries_file = tmp_path / "queries.json"
    queries_file.write_text("[]")
    plan = plan_run(method="a2x", options={}, mode=mode, k=10, queries_file=queries_file, registry=registry,
                    config=EvaluationConfig.defaults(batch_size=8), out=tmp_path / name)
    queries = [Query(f"{q.id}-{n}", f"{q.query} ({n})", q.correct) for n in range(copies) for q in QUERIES]
    return run_evaluation(method, queries, plan, registry, EvaluationConfig.defaults(batch_size=8), plots=False)


def test_a_model_that_takes_the_first_option_is_called_out_and_one_that_reads_is_not(tmp_path):
    summary = _evaluate(tmp_path, lambda tree: FirstOption(), "first")
    bias = summary["position_bias"]
    assert bias["first_option_share"] == 1.0 and bias["by_position"] and bias["choices"] >= POSITION_BIAS_MIN_CHOICES
    assert bias["uniform_share"] < 0.5
    report = render_report(summary)
    assert "## Model decisions" in report and "The model is choosing by position, not by meaning" in report
    assert any("choosing by position" in note for note in decision_notes(summary))

    wanted = {f"{q} ({n})": set(c) for q, c in WANTED.items() for n in range(4)}
    read = _evaluate(tmp_path, lambda tree: Oracle(tree, wanted), "oracle")
    assert not read["position_bias"]["by_position"] and read["position_bias"]["excess"] < POSITION_BIAS_EXCESS
    assert "does not choose by position" in render_report(read)


def test_over_selections_and_budget_cuts_reach_the_summary_and_the_report(tmp_path):
    config = descent_config(overselect_keep=1, overselect_share=0.3, max_calls_per_query=2)
    summary = _evaluate(tmp_path, lambda tree: SelectEverything(), "all", config, copies=1, mode="get_all")
    assert summary["overselected_answers"] >= summary["queries_with_overselected_answers"] == len(QUERIES)
    assert summary["budget_cut_requests"] > 0 and summary["queries_over_budget"] > 0
    assert summary["calls_per_query"] <= 2
    report = render_report(summary)
    assert "chose too many of a node's options" in report and "budget" in report
    assert "| choices |" in report


def test_compare_presets_reports_how_the_model_chose_under_each_preset(tmp_path):
    db_path = tmp_path / "r.duckdb"
    store_registry_and_tree(db_path, sample_tree())
    settings = load_settings(db=db_path)
    queries_file = tmp_path / "queries.json"
    queries_file.write_text(json.dumps([{"id": q.id, "query": q.query, "correct_tools": [{"id": c} for c in q.correct]}
                                        for q in QUERIES] * 1))
    engine = ScriptedEngine(FirstOption())
    report = compare_presets(settings, engine, QUERIES * 4, queries_file=queries_file,
                             registry=registry_info(db_path), config=EvaluationConfig.defaults(batch_size=8),
                             out=tmp_path / "presets", presets=["published", "default"], mode="get_one")
    for row in report["presets"]:
        assert row["first_option_share"] == 1.0 and row["by_position"] and row["choices"] > 0
        assert 0 < row["uniform_share"] < 1
        assert row["overselected_answers"] == row["budget_cut_requests"] == row["truncated_answers"] == 0
        assert row["computed_tokens_per_query"] > 0


def test_the_compare_presets_table_marks_a_positional_model_and_names_the_guards(tmp_path, home, use_engine, capsys):
    from a2x_local.cli import run

    db_path = tmp_path / "r.duckdb"
    store_registry_and_tree(db_path, sample_tree())
    queries_file = tmp_path / "queries.json"
    queries_file.write_text(json.dumps([{"id": f"{q.id}-{n}", "query": f"{q.query} {n}",
                                         "correct_tools": [{"id": c} for c in q.correct]}
                                        for n in range(4) for q in QUERIES]))
    use_engine("first-option", lambda config: ScriptedEngine(FirstOption()))
    capsys.readouterr()
    code = run(["eval", "compare-presets", "--engine", "first-option", "--model", "first", "--queries",
                str(queries_file), "--presets", "published,default", "--mode", "get_one", "--out",
                str(tmp_path / "presets"), "--db", str(db_path)])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert "100.0 /" in out and "!" in out and "the model chooses by position, not by meaning, under published," \
        " default" in " ".join(out.split())
    # A preset of one's own with a strict over-selection rule (the sample tree is small enough for direct selection
    # to skip the descent: off), and a model that chooses everything.
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[search_presets.strict]\noverselect_share = 0.3\noverselect_keep = 1\n"
                                      "direct_select_below = 0\n")
    use_engine("everything", lambda config: ScriptedEngine(SelectEverything()))
    code = run(["eval", "compare-presets", "--engine", "everything", "--model", "all", "--queries", str(queries_file),
                "--presets", "strict", "--mode", "get_all", "--out", str(tmp_path / "all"), "--db", str(db_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and re.search(r"strict: (\d+) answers chose too many options", out)
    assert int(re.search(r"strict: (\d+) answers", out).group(1)) >= 24       # at least one per query


def test_a_model_that_always_takes_the_same_later_position_is_called_out(tmp_path):
    """SmolLM2-135M answered "10" to most lists of its size: the first option's share alone would miss it."""
    def second(request) -> str:       # every list of the sample tree offers two or three options
        return "2"

    summary = _evaluate(tmp_path, lambda tree: second, "second")
    bias = summary["position_bias"]
    assert bias["favoured_position"] == 2 and bias["by_position"] and bias["first_option_share"] == 0
    assert bias["favoured_share"] == 1.0 and bias["favoured_blind_share"] < 0.5
    assert "option 2 in 100.0%" in render_report(summary) and "choosing by position" in render_report(summary)


def test_per_position_counts_add_to_the_first_options_and_stay_with_blind_choices(tmp_path):
    records = [{"choices": 10, "first_choices": 1, "uniform_first": 2.5,
                "position_choices": {"1": 1, "2": 3, "4": 6}, "position_blind": {"1": 2.5, "2": 2.5, "3": 2.5,
                                                                                  "4": 2.5}}]
    bias = position_bias(records)
    assert bias["favoured_position"] == 4 and bias["favoured_share"] == pytest.approx(0.6)
    assert bias["excess"] == pytest.approx((0.6 - 0.25) / 0.75) and not bias["by_position"]   # too few choices
