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
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from a2x_local.db import connect
from a2x_local.llm import ScriptedEngine
from a2x_local.llm.types import Request, Result
from a2x_local.registry import Registry, Service
from a2x_local.search.a2x import A2XSearch
from a2x_local.search.baselines import FullCatalogue
from a2x_local.search.llm_config import llm_search_config
from a2x_local.search.positions import NONE
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings
from a2x_local.taxonomy.config import build_config
from a2x_local.taxonomy.runner import run_build
from a2x_local.taxonomy.scripted_policy import WordPolicy
from a2x_local.taxonomy.types import Tree

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "toolret"
TARGET_PROMPT_TOKENS = 3500
TARGET_OVERHEAD_MS = 5.0


class OracleRule:
    """Selects exactly the branches and services that hold a query's correct tools.

    Like a constrained model, it never answers more positions than the request allows (``max_items``).
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


def load_services(path: Path) -> list[Service]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [Service(r["id"], r.get("type", "generic"), r["name"], r["description"], r.get("metadata") or {})
            for r in raw]


def build_tree(db: Path, services: list[Service]) -> tuple[Tree, float]:
    with connect(db) as con:
        Registry(con).insert(services)
    settings = load_settings(db=db)
    started = time.perf_counter()
    outcome = run_build(db, build_config(settings, keyword_merge="stem"),
                        lambda: ScriptedEngine(WordPolicy(services)), model="scripted")
    return outcome.tree, time.perf_counter() - started


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"mean": round(statistics.fmean(ordered), 1), "p50": ordered[len(ordered) // 2],
            "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], "max": ordered[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=Path, default=DATA / "services.json")
    parser.add_argument("--queries", type=Path, default=DATA / "queries_dev.json")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mode", default="get_all")
    args = parser.parse_args()

    services = load_services(args.services)
    queries = json.loads(args.queries.read_text(encoding="utf-8"))[: args.limit]
    correct = {q["query"]: {t["id"] for t in q["correct_tools"]} for q in queries}
    with tempfile.TemporaryDirectory() as tmp:
        tree, build_seconds = build_tree(Path(tmp) / "bench.duckdb", services)
        config = llm_search_config(load_settings(db=Path(tmp) / "bench.duckdb"))
    by_id = {s.id: s for s in services}
    engine = TimedEngine(OracleRule(tree, correct))
    method = A2XSearch(tree, by_id, engine, config)
    depth = tree.stats().depth

    answers = []
    started = time.perf_counter()
    for start in range(0, len(queries), args.batch_size):
        batch = queries[start:start + args.batch_size]
        answers.extend(method.search_batch([SearchRequest(q["query"], mode=args.mode) for q in batch]))
    wall = time.perf_counter() - started
    overhead_ms = (wall - engine.generate_seconds) / len(queries) * 1000

    hits = recall = 0.0
    for query, answer in zip(queries, answers, strict=True):
        found = correct[query["query"]] & set(answer.ids)
        hits += bool(found)
        recall += len(found) / len(correct[query["query"]])
    prompt = [a.prompt_tokens for a in answers]
    total = engine.usage.total()
    full_tokens = FullCatalogue(services, engine, config).prompt_tokens(queries[0]["query"], args.mode)
    result = {
        "queries": len(queries), "mode": args.mode, "batch_size": args.batch_size, "policy": "oracle",
        "tree": {**tree.stats().to_dict(), "build_seconds": round(build_seconds, 1)},
        "prompt_tokens_per_query": summary(prompt),
        "completion_tokens_per_query": summary([a.completion_tokens for a in answers]),
        "calls_per_query": summary([a.calls for a in answers]),
        "rounds_per_query": summary([a.rounds for a in answers]),
        "candidates_shown_per_query": summary([a.candidates_shown for a in answers]),
        "engine_calls_per_batch": round(len(engine.batches) / -(-len(queries) // args.batch_size), 2),
        "prompt_tokens_by_call_type": {label: round(stats.prompt_tokens / len(queries), 1)
                                       for label, stats in sorted(engine.usage.by_label.items())},
        "accounting_matches_engine": sum(prompt) == total.prompt_tokens and
        sum(a.calls for a in answers) == total.calls,
        "oracle_hit": round(hits / len(queries), 4), "oracle_recall": round(recall / len(queries), 4),
        "overhead_ms_per_query": round(overhead_ms, 3),
        "wall_seconds": round(wall, 2), "engine_seconds": round(engine.generate_seconds, 2),
        "full_catalogue_prompt_tokens": full_tokens,
        "targets": {
            "prompt_tokens_per_query_under": TARGET_PROMPT_TOKENS,
            "prompt_tokens_met": statistics.fmean(prompt) < TARGET_PROMPT_TOKENS,
            "rounds_at_most": depth + 1,
            "rounds_met": max(a.rounds for a in answers) <= depth + 1,
            "overhead_ms_under": TARGET_OVERHEAD_MS,
            "overhead_met": overhead_ms < TARGET_OVERHEAD_MS,
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
