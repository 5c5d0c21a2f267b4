"""Evaluation: score any search method on a benchmark query file, resumably, and compare runs.
Everything else in this package is private to it."""

from a2x_local.evaluation.harness import EvaluationConfig, registry_info
from a2x_local.evaluation.presets import PRESETS, compare_presets
from a2x_local.evaluation.queries import load_queries, load_query_texts
from a2x_local.evaluation.report import COMPARE_COLUMNS, comparability, compare_row, decision_notes, pct
from a2x_local.evaluation.runner import check_plots, compare_runs, describe_method, plan_run, run_evaluation

__all__ = [
    "COMPARE_COLUMNS",
    "PRESETS",
    "EvaluationConfig",
    "check_plots",
    "comparability",
    "compare_presets",
    "compare_row",
    "compare_runs",
    "decision_notes",
    "describe_method",
    "load_queries",
    "load_query_texts",
    "pct",
    "plan_run",
    "registry_info",
    "run_evaluation",
]
