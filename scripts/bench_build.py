#!/usr/bin/env python
"""Cost of a full taxonomy build of ToolRet (1,839 services) with the scripted engine: rounds and prompt tokens;
then the cost of a cached rebuild after 1% of the services changed.

The scripted engine (`a2x_local.testing.WordPolicy`) answers every call deterministically, and prompt tokens are
counted with a real Qwen tokenizer (quicktok), so the numbers are what a Qwen model would be sent. The build
runs through the real runner (DuckDB file, a checkpoint after every round) with the answer cache on, as
`a2x-local build` runs it. Then `--changed-share` of the registry changes through `ingest --sync` (a third of
it rewritten, a third removed, a third new services from data/publicmcp) and the registry is built again: only
prompts that differ from the first build's reach the model (`cached_rebuild`; a deterministic model answers an
unchanged prompt the same way, which is what the cache relies on and what the scripted engine does).
Prints JSON: engine rounds, requests per round, prompt/completion tokens per call type and in total, tree shape,
vocabulary sizes, the targets (at most 30 sequential rounds, fewer than 3 M prompt tokens), and last
``cached_rebuild``. Beside prompt tokens, every call type reports what a prefix-caching engine computes of it
(``computed_tokens_by_call_type``): prompt tokens its cache does not serve, plus decode, under the simulated cache of
scripts/bench_search.py (blocks of 16 tokens, least recently used out, ``--cache-tokens`` 200,000), over the whole
build in the order it sends. With ``--assign-mode both`` the two assignment modes are compared on it.

    .venv/bin/python scripts/bench_build.py                   # default [build] settings (embedding merge)
    .venv/bin/python scripts/bench_build.py --merge stem      # no embedding model needed
    .venv/bin/python scripts/bench_build.py --assign-mode both   # also a per-service build: tokens and placements
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_SERVICES = ROOT / "data" / "toolret" / "services.json"
NEW_SERVICES = ROOT / "data" / "publicmcp" / "services.json"
MAX_ROUNDS = 30
MAX_PROMPT_TOKENS = 3_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_SERVICES.parent,
                        help="folder with services.json (default: data/toolret)")
    parser.add_argument("--services", type=Path, default=None, help="a JSON list of services (instead of --data)")
    parser.add_argument("--merge", choices=("embedding", "stem"), default=None, help="keyword merge method")
    parser.add_argument("--assign-mode", choices=("batched", "per_service", "both"), default=None,
                        help="assignment mode ([build] assign_mode); both: a second build per service, compared")
    parser.add_argument("--changed-share", type=float, default=0.01, help="share of services changed before the "
                        "cached rebuild")
    parser.add_argument("--batch-boundaries", choices=("content", "fixed"), default=None,
                        help="where service batches end (default: [build] batch_boundaries)")
    parser.add_argument("--cache-tokens", type=int, default=None,
                        help="capacity of the simulated prefix cache (default 200,000 tokens)")
    parser.add_argument("--block-tokens", type=int, default=None, help="block size of the simulated cache (16)")
    args = parser.parse_args()
    args.services = args.services or args.data / "services.json"
    modes = ("batched", "per_service") if args.assign_mode == "both" else (args.assign_mode,)
    results = [_build(args, mode, rebuild=k == 0) for k, mode in enumerate(modes)]
    result = results[0]
    later = {key: result.pop(key) for key in ("incremental_update", "cached_rebuild")}
    if len(results) > 1:
        modes_compared = {r["config"]["assign_mode"]: _placements(r) for r in results}
        batched, one = modes_compared["batched"], modes_compared["per_service"]
        result["assign_modes"] = modes_compared | {"per_service_over_batched": {
            key: round(one[key] / max(1, batched[key]), 3)
            for key in ("assign_computed_tokens", "computed_tokens", "assign_prompt_tokens_total", "prompt_tokens")}}
    print(json.dumps(result | later, indent=2))    # cached_rebuild stays the last key


def _placements(result: dict) -> dict:
    """What an assignment mode costs and where it puts services."""
    assign = {label: tokens for label, tokens in result["prompt_tokens_by_call_type"].items()
              if label.startswith("assign")}
    tree = result["tree"]
    computed = result["computed_tokens_by_call_type"]
    return {"assign_prompt_tokens": assign, "assign_calls": {label: result["calls_by_call_type"][label]
                                                             for label in assign},
            "assign_prompt_tokens_total": sum(assign.values()),
            "assign_computed_tokens": sum(computed[label]["computed_tokens"] for label in assign if label in computed),
            "assign_completion_tokens": sum(computed[label]["completion_tokens"] for label in assign
                                            if label in computed),
            "prompt_tokens": result["prompt_tokens"], "computed_tokens": result["computed_tokens"],
            "engine_rounds": result["engine_rounds"],
            "mean_leaves_per_service": tree["mean_leaves_per_service"],
            "services_on_several_leaves": tree["services_on_several_leaves"],
            "services_on_internal_nodes": tree["services_on_internal_nodes"], "leaves": tree["leaves"]}


def _build(args: argparse.Namespace, assign_mode: str | None, *, rebuild: bool) -> dict:
    """One full build (and, with ``rebuild``, the update and cached rebuild after a changed export)."""
    from a2x_local.db import connect
    from a2x_local.llm.cache import AnswerCache, CachedEngine
    from a2x_local.llm.tokens import chat_token_ids
    from a2x_local.registry.ingest import ingest
    from a2x_local.registry.store import Registry
    from a2x_local.settings import load_settings
    from a2x_local.taxonomy.config import BuildConfig
    from a2x_local.taxonomy.induction.runner import run_build
    from a2x_local.testing import BLOCK_TOKENS, DEFAULT_CACHE_TOKENS, CacheMeter, PrefixCache, WordPolicy

    overrides = {"keyword_merge": args.merge, "batch_boundaries": args.batch_boundaries, "assign_mode": assign_mode}
    config = BuildConfig.from_settings(load_settings(), **overrides)
    extra: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.duckdb"
        with connect(db) as con:
            ingest(con, [args.services])
            services = Registry(con).all()
        cache = AnswerCache(db)
        meter = CacheMeter(chat_token_ids, PrefixCache(args.cache_tokens or DEFAULT_CACHE_TOKENS,
                                                       args.block_tokens or BLOCK_TOKENS))
        engine = CachedEngine(metered_scripted(WordPolicy(services), meter), cache)
        started = time.perf_counter()
        outcome = run_build(load_settings(db=db), lambda: engine, config=config, model="scripted-word-policy")
        seconds = time.perf_counter() - started
        if rebuild:
            extra["cached_rebuild"], extra["incremental_update"] = cached_rebuild(
                db, Path(folder), services, config, cache, args.changed_share, outcome, overrides)
    report = outcome.report
    usage = report["usage"]
    total = usage["total"]
    rounds = report["rounds"]
    return {
        "services": len(services),
        "engine_rounds": report["engine_rounds"],
        "requests_per_round": report["requests_per_round"],
        "rounds": [{k: r[k] for k in ("level", "step", "requests", "prompt_tokens")} for r in rounds],
        "prompt_tokens_by_call_type": {label: s["prompt_tokens"] for label, s in usage["by_call_type"].items()},
        "calls_by_call_type": {label: s["calls"] for label, s in usage["by_call_type"].items()},
        "prompt_tokens_per_call": {label: round(s["prompt_tokens"] / s["calls"]) for label, s in
                                   usage["by_call_type"].items() if s["calls"]},
        "prompt_tokens": total["prompt_tokens"],
        "completion_tokens": total["completion_tokens"],
        "computed_tokens": meter.total().computed,
        "computed_tokens_by_call_type": {label: cost.to_dict() for label, cost in sorted(meter.by_label.items())},
        "prefix_cache": {"capacity_tokens": meter.cache.capacity_tokens, "block_tokens": meter.cache.block_tokens,
                         "evicted_blocks": meter.cache.evicted},
        "prompt_tokens_per_service": round(total["prompt_tokens"] / len(services), 1),
        "tree": report["tree"],
        "leaves_over_limit": report["leaves_over_limit"][:5],
        "vocabulary": report["vocabulary"],
        "counters": report["counters"],
        "config": {k: config.thresholds()[k] for k in ("leaf_max_services", "max_depth", "max_children",
                                                        "keyword_path_min_services", "assign_batch_size",
                                                        "keyword_merge", "refine_passes", "assign_mode",
                                                        "batch_boundaries")},
        "wall_seconds": round(seconds, 1),
        "targets": {
            "max_rounds": MAX_ROUNDS, "rounds_ok": report["engine_rounds"] <= MAX_ROUNDS,
            "max_prompt_tokens": MAX_PROMPT_TOKENS, "prompt_tokens_ok": total["prompt_tokens"] < MAX_PROMPT_TOKENS,
        },
        "answers_from_cache_within_the_build": total["cached"],
        **extra,
    }


def metered_scripted(rule, meter):
    """The scripted engine, each round also counted by ``meter`` (what a prefix-caching engine computes)."""
    from a2x_local.testing import ScriptedEngine

    class Metered(ScriptedEngine):
        def generate(self, requests):
            results = super().generate(requests)
            meter.observe(requests, results)
            return results

    return Metered(rule)


def changed_export(services: list, share: float, folder: Path) -> tuple[Path, dict[str, int]]:
    """The registry with ``share`` of it changed: a third rewritten, a third removed, a third new (publicmcp)."""
    import random

    count = max(3, round(share * len(services)))
    rng = random.Random(0)
    picked = rng.sample(range(len(services)), 2 * (count // 3) + count % 3)
    rewrite, remove = picked[: count // 3 + count % 3], set(picked[count // 3 + count % 3:])
    rows = [s.to_dict() for k, s in enumerate(services) if k not in remove]
    by_id = {row["id"]: row for row in rows}
    for k in rewrite:
        by_id[services[k].id]["description"] += " It now also accepts a list of inputs in one call."
    fresh = json.loads(NEW_SERVICES.read_text(encoding="utf-8"))
    rows += rng.sample(fresh, count // 3)
    path = folder / "changed.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path, {"rewritten": len(rewrite), "removed": len(remove), "added": count // 3}


def cached_rebuild(db: Path, folder: Path, services: list, config, cache, share: float, full,
                   overrides: dict) -> tuple[dict, dict]:
    """Sync a changed export; place the changes into the built tree (the nightly job's update), then rebuild with
    the same answer cache; compare what each sent with the full build."""
    from a2x_local.db import connect
    from a2x_local.lifecycle import run_update
    from a2x_local.llm.cache import CachedEngine
    from a2x_local.registry import sync
    from a2x_local.registry.store import Registry
    from a2x_local.settings import load_settings
    from a2x_local.taxonomy.induction.runner import run_build
    from a2x_local.testing import ScriptedEngine, WordPolicy

    export, kinds = changed_export(services, share, folder)
    with connect(db) as con:
        report = sync(con, [export], max_remove_share=1.0)
        changed = Registry(con).all()
    full_tokens = full.report["usage"]["total"]["prompt_tokens"]
    engine = CachedEngine(ScriptedEngine(WordPolicy(changed)), cache)
    started = time.perf_counter()
    placed = run_update(load_settings(db=db), load_engine=lambda: engine, model="scripted-word-policy",
                        activate=False, close_engine=False,
                        build_overrides={k: v for k, v in overrides.items() if v is not None})
    used = placed.usage.total()
    update = {
        "placed": len(placed.placements), "removed": len(placed.changes.removed),
        "kept_above_the_leaves": sum(1 for p in placed.placements.values() if p.note),
        "leaves_resplit": len(placed.split), "prompt_tokens": used.prompt_tokens,
        "share_of_full": round(used.prompt_tokens / full_tokens, 4),
        "prompt_tokens_by_call_type": {label: s.prompt_tokens for label, s in placed.usage.by_label.items()},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    started = time.perf_counter()
    outcome = run_build(load_settings(db=db), lambda: engine, config=config, model="scripted-word-policy")
    seconds = time.perf_counter() - started
    sent = outcome.report["usage"]["total"]
    by_type = outcome.report["usage"]["by_call_type"]
    rebuild = {
        "changed_share": share,
        "changes": kinds | {"sync": report.counts()},
        "prompt_tokens": sent["prompt_tokens"],
        "full_build_prompt_tokens": full_tokens,
        "share_of_full": round(sent["prompt_tokens"] / full_tokens, 4),
        "requests_sent": sent["calls"],
        "answers_from_cache": sent["cached"],
        "prompt_tokens_saved": sent["cached_prompt_tokens"],
        "prompt_tokens_sent_by_call_type": {label: s["prompt_tokens"] for label, s in by_type.items()},
        "engine_rounds": outcome.report["engine_rounds"],
        "wall_seconds": round(seconds, 1),
        "engine": "scripted (WordPolicy); a deterministic model at temperature 0 sends the same prompts",
    }
    return rebuild, update


if __name__ == "__main__":
    main()
