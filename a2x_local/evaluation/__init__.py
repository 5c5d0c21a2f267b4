"""Evaluation: score any search method on a benchmark query file, resumably, and compare runs."""

from a2x_local.evaluation.harness import EvaluationConfig, RegistryInfo, RunSpec, evaluation_config, registry_info
from a2x_local.evaluation.metrics import QueryScore, score_query
from a2x_local.evaluation.queries import Query, load_queries, load_query_texts
from a2x_local.evaluation.runner import RunPlan, compare_runs, plan_run, run_evaluation

__all__ = [
    "EvaluationConfig",
    "Query",
    "QueryScore",
    "RegistryInfo",
    "RunPlan",
    "RunSpec",
    "compare_runs",
    "evaluation_config",
    "load_queries",
    "load_query_texts",
    "plan_run",
    "registry_info",
    "run_evaluation",
    "score_query",
]
