"""Benchmark: A2X search cost on ToolRet with an ORACLE decision policy; prints JSON.

The tree is built from the 1,839 ToolRet services by the scripted build engine (taxonomy/scripted_policy.py).
Searches then run through a ScriptedEngine whose rule is an oracle: at each node it selects exactly the children
whose subtree holds a correct tool of the query, and at selection exactly the correct tools offered. Prompt tokens
are counted with the real Qwen tokenizer (what a Qwen model would be sent).

Targets: under 3,500 prompt tokens per query; at most depth + 1 sequential rounds; the search's own overhead
(wall time minus time inside engine.generate) under 5 ms per query.

Usage: .venv/bin/python scripts/bench_search.py [--queries FILE] [--limit N] [--batch-size 64] [--mode get_all]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from a2x_local.db import connect
from a2x_local.evaluation.harness import Evaluation, EvaluationConfig, registry_info
from a2x_local.evaluation.metrics import mean, percentile
from a2x_local.evaluation.queries import load_queries
from a2x_local.evaluation.runner import plan_run
from a2x_local.llm.scripted import ScriptedEngine
from a2x_local.llm.types import Request, Result
from a2x_local.registry import Registry, Service
from a2x_local.registry.ingest import ingest
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.baselines import FullCatalogue
from a2x_local.search.llm.config import llm_search_config
from a2x_local.search.llm.positions import NONE
from a2x_local.search.types import SearchAnswer, SearchMethod, SearchRequest
from a2x_local.settings import load_settings
from a2x_local.taxonomy.config import build_config
from a2x_local.taxonomy.runner import run_build
from a2x_local.taxonomy.scripted_policy import WordPolicy
from a2x_local.taxonomy.types import Tree

DATA = Path(__file__).resolve().parents[1] / "data" / "toolret"
TARGET_PROMPT_TOKENS = 3500
TARGET_OVERHEAD_MS = 5.0


class OracleRule:
    """Selects exactly the branches and services that hold a query's correct tools.

    Like a constrained model, it never answers more positions than the request allows (``max_items``). A request
    carries the query's text, not its id, so the rule looks the correct tools up by text.
    """

    def __init__(self, tree: Tree, correct: Mapping[str, set[str]]) -> None:
        self.tree = tree
        self.correct = correct

    def __call__(self, request: Request) -> str:
        context = request.context
        wanted = self.correct.get(context["query"], set())
        if context["call"] == "descend":
            chosen = [k for k, child in enumerate(context["options"], 1) if self.tree.subtree_services(child) & wanted]
        else:
            chosen = [k for k, service in enumerate(context["options"], 1) if service in wanted]
        return ",".join(map(str, chosen[: context["max_items"]])) or NONE


class TimedEngine(ScriptedEngine):
    """Keeps the seconds spent inside generate(), so the search's own overhead can be told apart."""

    def __init__(self, rule) -> None:
        super().__init__(rule)
        self.generate_seconds = 0.0

    def generate(self, requests: Sequence[Request]) -> list[Result]:
        started = time.perf_counter()
        try:
            return super().generate(requests)
        finally:
            self.generate_seconds += time.perf_counter() - started


class TimedMethod:
    """The method with the seconds spent in its search_batch calls: the search alone, without the harness's files."""

    def __init__(self, method: SearchMethod) -> None:
        self.method = method
        self.name, self.ranked = method.name, method.ranked
        self.seconds = 0.0

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        started = time.perf_counter()
        try:
            return self.method.search_batch(requests)
        finally:
            self.seconds += time.perf_counter() - started


def load_registry(db: Path, path: Path) -> list[Service]:
    """Ingest the services file as `a2x-local ingest` does; the services in file order."""
    with connect(db) as con:
        added = ingest(con, [path]).added
        by_id = Registry(con).get_many(added)
    return [by_id[service_id] for service_id in added]


def build_tree(db: Path, services: list[Service]) -> tuple[Tree, float]:
    settings = load_settings(db=db)
    started = time.perf_counter()
    outcome = run_build(db, build_config(settings, keyword_merge="stem"),
                        lambda: ScriptedEngine(WordPolicy(services)), model="scripted")
    return outcome.tree, time.perf_counter() - started


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"mean": round(mean(values), 1), "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=Path, default=DATA / "services.json")
    parser.add_argument("--queries", type=Path, default=DATA / "queries_dev.json")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mode", default="get_all")
    args = parser.parse_args()

    queries = load_queries(args.queries)[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        services = load_registry(db, args.services)
        tree, build_seconds = build_tree(db, services)
        settings = load_settings(db=db)
        config = llm_search_config(settings)
        engine = TimedEngine(OracleRule(tree, {query.query: set(query.correct) for query in queries}))
        method = TimedMethod(A2XSearch(tree, {s.id: s for s in services}, engine, config))
        depth = tree.stats().depth

        # The evaluation harness batches the queries and scores each answer against its query (by id).
        registry = registry_info(db)
        evaluation_config = EvaluationConfig.defaults(batch_size=args.batch_size)
        plan = plan_run(method="a2x", options={}, mode=args.mode, k=10, queries_file=args.queries,
                        registry=registry, config=evaluation_config, out=Path(tmp) / "run")
        evaluation = Evaluation(plan.out_dir, plan.spec, registry, evaluation_config)
        records = evaluation.run(method, queries)
    wall = method.seconds
    overhead_ms = (wall - engine.generate_seconds) / len(queries) * 1000

    prompt = [r["prompt_tokens"] for r in records]
    total = engine.usage.total()
    full_tokens = FullCatalogue(services, engine, config).prompt_tokens(queries[0].query, args.mode)
    result = {
        "queries": len(queries), "mode": args.mode, "batch_size": args.batch_size, "policy": "oracle",
        "tree": {**tree.stats().to_dict(), "build_seconds": round(build_seconds, 1)},
        "prompt_tokens_per_query": summary(prompt),
        "completion_tokens_per_query": summary([r["completion_tokens"] for r in records]),
        "calls_per_query": summary([r["calls"] for r in records]),
        "rounds_per_query": summary([r["rounds"] for r in records]),
        "candidates_shown_per_query": summary([r["candidates_shown"] for r in records]),
        "engine_calls_per_batch": round(len(engine.batches) / -(-len(queries) // args.batch_size), 2),
        "prompt_tokens_by_call_type": {label: round(stats.prompt_tokens / len(queries), 1)
                                       for label, stats in sorted(engine.usage.by_label.items())},
        "accounting_matches_engine": sum(prompt) == total.prompt_tokens and
        sum(r["calls"] for r in records) == total.calls,
        "oracle_hit": round(mean([float(r["hit"]) for r in records]), 4),
        "oracle_recall": round(mean([r["recall"] for r in records]), 4),
        "overhead_ms_per_query": round(overhead_ms, 3),
        "wall_seconds": round(wall, 2), "engine_seconds": round(engine.generate_seconds, 2),
        "full_catalogue_prompt_tokens": full_tokens,
        "targets": {
            "prompt_tokens_per_query_under": TARGET_PROMPT_TOKENS,
            "prompt_tokens_met": mean(prompt) < TARGET_PROMPT_TOKENS,
            "rounds_at_most": depth + 1,
            "rounds_met": max(r["rounds"] for r in records) <= depth + 1,
            "overhead_ms_under": TARGET_OVERHEAD_MS,
            "overhead_met": overhead_ms < TARGET_OVERHEAD_MS,
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
