"""Benchmark: A2X search on ToolRet with a SIMULATED navigator instead of a model; prints JSON (last line).

THIS IS A SIMULATION. No language model answers: a scripted rule that knows each query's correct services makes
the search's decisions. `--policy oracle` decides perfectly; `--policy noisy --error-rate E` makes every category
or service decision drop each correct item with probability E and add one wrong item with probability E (seeded).
The hit and recall it reports measure the search's structure (modes, answer caps, multi-label placement, rescue)
under imperfect decisions, not the quality of any model. Prompt tokens are counted with the real Qwen tokenizer,
so costs are what a Qwen model would be sent.

The tree is built from the services by the scripted build (taxonomy/scripted_policy.py), or imported with
`--tree PATH` (a JSON tree as `tree export` writes it, or a tree of the published A2X implementation: its folder
or taxonomy.json with class.json beside it).

Variants, each run over every query at every error rate: a2x get_all, get_important and get_one, a2x+rescue
(get_all, the hybrid top-k as one more group), and get_all with the former answer caps (5 categories, 20 services).
With `--policy oracle`, the default get_all run is also checked against the cost targets: under 3,500 prompt tokens
per query, at most depth + 1 rounds, the search's own overhead under 5 ms per query.

Usage: .venv/bin/python scripts/bench_search.py [--policy noisy] [--error-rate 0,0.05,0.1,0.2] [--seed 0]
       [--tree PATH] [--services FILE] [--queries FILE] [--variants get_all,get_one] [--limit N] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2x_local.db import connect
from a2x_local.evaluation.harness import Evaluation, EvaluationConfig, registry_info
from a2x_local.evaluation.metrics import mean, percentile
from a2x_local.evaluation.queries import load_queries
from a2x_local.evaluation.runner import plan_run
from a2x_local.llm.scripted import ScriptedEngine
from a2x_local.llm.types import Request, Result
from a2x_local.registry import Registry, Service
from a2x_local.registry.ingest import ingest
from a2x_local.search import make_method
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.baselines import FullCatalogue
from a2x_local.search.llm.config import llm_search_config
from a2x_local.search.llm.simulated import SimulatedNavigator
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest
from a2x_local.settings import load_settings
from a2x_local.taxonomy import import_tree, read_tree_file
from a2x_local.taxonomy.config import build_config
from a2x_local.taxonomy.runner import run_build
from a2x_local.taxonomy.scripted_policy import WordPolicy
from a2x_local.taxonomy.types import Tree

DATA = Path(__file__).resolve().parents[1] / "data" / "toolret"
TARGET_PROMPT_TOKENS = 3500
TARGET_OVERHEAD_MS = 5.0
SIMULATION = ("simulation: no language model answered; a scripted navigator that knows the correct services made"
              " every decision (oracle, or with seeded errors at the given rate). Hit and recall measure the search's"
              " structure under such decisions, not a model.")
# name -> (mode, [search] overrides, rescue)
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "get_all": ("get_all", {}, False),
    "get_important": ("get_important", {}, False),
    "get_one": ("get_one", {}, False),
    "a2x+rescue": ("get_all", {}, True),
    "get_all_capped": ("get_all", {"max_children_selected": 5, "max_services_selected": 20}, False),
}


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


class CachedRetriever:
    """The rescue's hybrid retrieval, computed once per query for every variant and error rate."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self.name = getattr(retriever, "name", "hybrid")
        self.cache: dict[tuple[str, int], list[Hit]] = {}

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        todo = [q for q in dict.fromkeys(queries) if (q, k) not in self.cache]
        if todo:
            for query, hits in zip(todo, self.retriever.retrieve(todo, k), strict=True):
                self.cache[(query, k)] = hits
        return [self.cache[(q, k)] for q in queries]


def load_registry(db: Path, path: Path) -> list[Service]:
    """Ingest the services file as `a2x-local ingest` does; the services in file order."""
    with connect(db) as con:
        added = ingest(con, [path]).added
        by_id = Registry(con).get_many(added)
    return [by_id[service_id] for service_id in added]


def get_tree(db: Path, services: list[Service], path: Path | None) -> tuple[Tree, dict[str, Any]]:
    """The imported tree at ``path`` (service ids the registry lacks dropped), or the scripted build's tree."""
    if path is not None:
        tree, warnings = import_tree(read_tree_file(path), {s.id for s in services}, source=str(path),
                                     allow_missing=True)
        return tree, {"source": str(path), "warnings": warnings}
    settings = load_settings(db=db)
    started = time.perf_counter()
    outcome = run_build(db, build_config(settings, keyword_merge="stem"),
                        lambda: ScriptedEngine(WordPolicy(services)), model="scripted")
    return outcome.tree, {"source": "scripted build (WordPolicy)",
                          "build_seconds": round(time.perf_counter() - started, 1)}


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"mean": round(mean(values), 1), "p50": round(percentile(values, 50), 1),
            "p95": round(percentile(values, 95), 1), "max": max(values)}


def run_variant(name: str, error_rate: float, args: argparse.Namespace, context: dict[str, Any]) -> dict[str, Any]:
    """One variant at one error rate over every query, scored by the evaluation harness."""
    mode, overrides, rescue = VARIANTS[name]
    tree, services, queries = context["tree"], context["services"], context["queries"]
    rule = SimulatedNavigator(tree, {q.query: set(q.correct) for q in queries}, error_rate=error_rate,
                              seed=args.seed)
    engine = TimedEngine(rule)
    config = llm_search_config(context["settings"], **overrides)
    search = A2XSearch(tree, {s.id: s for s in services}, engine, config,
                       rescue=context["retriever"] if rescue else None)
    method = TimedMethod(search)
    evaluation_config = EvaluationConfig.defaults(batch_size=args.batch_size)
    plan = plan_run(method=search.name, options={"variant": name, "error_rate": error_rate}, mode=mode, k=10,
                    queries_file=args.queries, registry=context["registry"], config=evaluation_config,
                    out=context["folder"] / f"{name}-{error_rate}")
    records = Evaluation(plan.out_dir, plan.spec, context["registry"], evaluation_config).run(method, queries)
    scored = [r for r in records if r["scored"]]
    prompt = [r["prompt_tokens"] for r in records]
    total = engine.usage.total()
    return {
        "variant": name, "mode": mode, "rescue": rescue, "error_rate": error_rate,
        "hit": round(mean([float(r["hit"]) for r in scored]), 4),
        "recall": round(mean([r["recall"] for r in scored]), 4),
        "returned_per_query": round(mean([len(r["returned"]) for r in records]), 2),
        "prompt_tokens_per_query": summary(prompt),
        "completion_tokens_per_query": round(mean([r["completion_tokens"] for r in records]), 1),
        "calls_per_query": round(mean([r["calls"] for r in records]), 2),
        "rounds_per_query": summary([r["rounds"] for r in records]),
        "capped_answers_per_query": round(mean([r.get("capped", 0) for r in records]), 3),
        "decisions": rule.decisions, "dropped": rule.dropped, "added": rule.added,
        "prompt_tokens_by_call_type": {label: round(stats.prompt_tokens / len(queries), 1)
                                       for label, stats in sorted(engine.usage.by_label.items())},
        "accounting_matches_engine": sum(prompt) == total.prompt_tokens
        and sum(r["calls"] for r in records) == total.calls,
        "overhead_ms_per_query": round((method.seconds - engine.generate_seconds) / len(queries) * 1000, 3),
    }


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table (hit / recall / prompt tokens per query, one row per variant)."""
    rates = sorted({r["error_rate"] for r in results})
    lines = ["| variant | " + " | ".join(f"E = {e:g}: hit · recall · prompt tok" for e in rates) + " |",
             "|---|" + "---|" * len(rates)]
    for name in dict.fromkeys(r["variant"] for r in results):
        cells = []
        for rate in rates:
            r = next(x for x in results if x["variant"] == name and x["error_rate"] == rate)
            tokens = r["prompt_tokens_per_query"]["mean"]
            cells.append(f"{r['hit'] * 100:.1f} · {r['recall'] * 100:.1f} · {tokens:,.0f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=Path, default=DATA / "services.json")
    parser.add_argument("--queries", type=Path, default=DATA / "queries_dev.json")
    parser.add_argument("--tree", type=Path, default=None, help="an imported tree instead of the scripted build's")
    parser.add_argument("--policy", choices=("oracle", "noisy"), default="oracle")
    parser.add_argument("--error-rate", default="0,0.05,0.1,0.2",
                        help="comma-separated error rates of the noisy policy (oracle: 0 only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    rates = [0.0] if args.policy == "oracle" else [float(e) for e in args.error_rate.split(",")]
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")

    queries = load_queries(args.queries)[: args.limit]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        services = load_registry(db, args.services)
        tree, tree_info = get_tree(db, services, args.tree)
        settings = load_settings(db=db)
        retriever = None
        if any(VARIANTS[v][2] for v in variants):
            retriever = CachedRetriever(make_method("hybrid", settings, db))
        context = {"tree": tree, "services": services, "queries": queries, "settings": settings,
                   "retriever": retriever, "registry": registry_info(db), "folder": Path(tmp)}
        results = [run_variant(name, rate, args, context) for rate in rates for name in variants]
        config = llm_search_config(settings)
        full_tokens = FullCatalogue(services, ScriptedEngine(lambda r: ""), config).prompt_tokens(queries[0].query)
    depth = tree.stats().depth
    result: dict[str, Any] = {
        "simulation": SIMULATION, "policy": args.policy, "error_rates": rates, "seed": args.seed,
        "queries": len(queries), "batch_size": args.batch_size,
        "tree": {**tree.stats().to_dict(), **tree_info},
        "full_catalogue_prompt_tokens": full_tokens, "results": results,
    }
    baseline = next((r for r in results if r["variant"] == "get_all" and r["error_rate"] == 0.0), None)
    if args.policy == "oracle" and baseline is not None:
        mean_prompt = baseline["prompt_tokens_per_query"]["mean"]
        result["targets"] = {
            "prompt_tokens_per_query_under": TARGET_PROMPT_TOKENS, "prompt_tokens_met": mean_prompt
            < TARGET_PROMPT_TOKENS, "rounds_at_most": depth + 1,
            "rounds_met": baseline["rounds_per_query"]["max"] <= depth + 1,
            "overhead_ms_under": TARGET_OVERHEAD_MS,
            "overhead_met": baseline["overhead_ms_per_query"] < TARGET_OVERHEAD_MS,
        }
    print(f"SIMULATION ({args.policy}, seed {args.seed}): {SIMULATION}\n")
    print(table(results) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
