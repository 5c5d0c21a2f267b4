"""`eval compare-presets`: the a2x method under several `[search]` presets, on the same queries with the same
engine, side by side. The A/B a user with a GPU runs to see what the lean presentation costs in hit on their model
(the simulated navigators of scripts/bench_search.py cannot say that for a real model).

Cost is counted twice: the prompt tokens sent (what a provider bills), and what the engine computed (the prompt
tokens its prefix cache did not serve, as the engine reports them, plus decode: what a local engine pays). Each
preset starts from a cold prefix cache where the engine can drop it (vLLM); a remote server keeps its cache, so
presets measured later may find the shared instructions cached already (the table says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from a2x_local.evaluation.harness import EvaluationConfig, RegistryInfo
from a2x_local.evaluation.queries import Query
from a2x_local.evaluation.runner import describe_method, plan_run, run_evaluation
from a2x_local.llm import Engine
from a2x_local.search import ProgressFactory, make_method, method_options
from a2x_local.settings import Settings

PRESETS = ("published", "default", "lean")
METHOD = "a2x"


def compare_presets(settings: Settings, engine: Engine, queries: Sequence[Query], *, queries_file: Path,
                    registry: RegistryInfo, config: EvaluationConfig, out: Path, presets: Sequence[str] = PRESETS,
                    mode: str | None = None, limit: int | None = None, options: dict[str, Any] | None = None,
                    progress: ProgressFactory | None = None) -> dict[str, Any]:
    """Evaluate a2x once per preset (fresh runs in ``out/<preset>``) and return one row per preset."""
    rows = []
    for name in presets:
        cold = engine.reset_prefix_cache()
        before = engine.usage.snapshot()
        typed = method_options(METHOD, {**(options or {}), "engine": engine, "preset": name})
        method = make_method(METHOD, settings, settings.db_path, progress=progress, options=typed)
        plan = plan_run(method=METHOD, options={**(options or {}), "preset": name}, mode=mode, k=10,
                        queries_file=queries_file, registry=registry, config=config, out=out / name,
                        method_info=describe_method(method, METHOD))
        total = min(limit, len(queries)) if limit else len(queries)
        advance: Callable[[int], None] | None = progress(f"{METHOD} · {name}", total) if progress else None
        summary = run_evaluation(method, queries, plan, registry, config, limit=limit, fresh=True, progress=advance,
                                 plots=False)
        rows.append(preset_row(name, summary, engine.usage.since(before).total(), cold=cold))
    return {"method": METHOD, "mode": mode, "queries": str(queries_file), "engine": engine.describe(),
            "presets": rows}


def preset_row(name: str, summary: dict[str, Any], used: Any, *, cold: bool) -> dict[str, Any]:
    """One preset's scores and costs per answered query; ``used`` is the engine's usage during its run."""
    answered = max(1, summary["queries"]["answered"])
    cached = used.prefix_cached_tokens
    bias = summary.get("position_bias") or {}
    return {
        "preset": name, "hit": summary["hit_rate"], "recall": summary["recall"],
        "scored": summary["queries"]["scored"], "errors": summary["queries"]["errors"],
        "prompt_tokens_per_query": used.prompt_tokens / answered,
        "cached_prompt_tokens_per_query": cached / answered,
        "computed_tokens_per_query": (used.prompt_tokens - cached + used.completion_tokens) / answered,
        "completion_tokens_per_query": used.completion_tokens / answered,
        "calls_per_query": used.calls / answered, "cold_cache": cold, "run_dir": summary["run_dir"],
        # How the model chose (the first option's share against a blind choice's) and what held it in check.
        "choices": bias.get("choices", 0), "first_option_share": bias.get("first_option_share"),
        "uniform_share": bias.get("uniform_share"), "favoured_position": bias.get("favoured_position"),
        "favoured_share": bias.get("favoured_share"), "by_position": bool(bias.get("by_position")),
        "overselected_answers": summary.get("overselected_answers", 0),
        "budget_cut_requests": summary.get("budget_cut_requests", 0),
        "truncated_answers": summary.get("truncated_answers", 0),
    }
