#!/usr/bin/env python
"""Cost of a full taxonomy build of ToolRet (1,839 services) with the scripted engine: rounds and prompt tokens.

The scripted engine (`taxonomy/scripted_policy.py`) answers every call deterministically, and prompt tokens are
counted with a real Qwen tokenizer (quicktok), so the numbers are what a Qwen model would be sent. The build
runs through the real runner (DuckDB file, a checkpoint after every round). Prints JSON: engine rounds,
requests per round, prompt/completion tokens per call type and in total, tree shape, vocabulary sizes, and the
targets (at most 30 sequential rounds, fewer than 3 M prompt tokens).

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
MAX_ROUNDS = 30
MAX_PROMPT_TOKENS = 3_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=Path, default=DEFAULT_SERVICES, help="JSON list of services")
    parser.add_argument("--merge", choices=("embedding", "stem"), default=None, help="keyword merge method")
    parser.add_argument("--assign-mode", choices=("batched", "per_service", "both"), default=None,
                        help="assignment mode ([build] assign_mode); both: a second build per service, compared")
    args = parser.parse_args()
    modes = ("batched", "per_service") if args.assign_mode == "both" else (args.assign_mode,)
    results = [_build(args, mode) for mode in modes]
    result = results[0]
    if len(results) > 1:
        result["assign_modes"] = {r["config"]["assign_mode"]: _placements(r) for r in results}
    print(json.dumps(result, indent=2))


def _placements(result: dict) -> dict:
    """What an assignment mode costs and where it puts services."""
    assign = {label: tokens for label, tokens in result["prompt_tokens_by_call_type"].items()
              if label.startswith("assign")}
    tree = result["tree"]
    return {"assign_prompt_tokens": assign, "assign_calls": {label: result["calls_by_call_type"][label]
                                                             for label in assign},
            "prompt_tokens": result["prompt_tokens"], "engine_rounds": result["engine_rounds"],
            "mean_leaves_per_service": tree["mean_leaves_per_service"],
            "services_on_several_leaves": tree["services_on_several_leaves"],
            "services_on_internal_nodes": tree["services_on_internal_nodes"], "leaves": tree["leaves"]}


def _build(args: argparse.Namespace, assign_mode: str | None) -> dict:

    from a2x_local.db import connect
    from a2x_local.llm.scripted import ScriptedEngine
    from a2x_local.registry.ingest import ingest
    from a2x_local.registry.store import Registry
    from a2x_local.settings import load_settings
    from a2x_local.taxonomy.config import build_config
    from a2x_local.taxonomy.runner import run_build
    from a2x_local.taxonomy.scripted_policy import WordPolicy

    config = build_config(load_settings(), keyword_merge=args.merge, assign_mode=assign_mode)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.duckdb"
        with connect(db) as con:
            ingest(con, [args.services])
            services = Registry(con).all()
        engine = ScriptedEngine(WordPolicy(services))
        started = time.perf_counter()
        outcome = run_build(db, config, lambda: engine, model="scripted-word-policy")
        seconds = time.perf_counter() - started
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
        "prompt_tokens_per_service": round(total["prompt_tokens"] / len(services), 1),
        "tree": report["tree"],
        "leaves_over_limit": report["leaves_over_limit"][:5],
        "vocabulary": report["vocabulary"],
        "counters": report["counters"],
        "config": {k: config.thresholds()[k] for k in ("leaf_max_services", "max_depth", "max_children",
                                                        "keyword_path_min_services", "assign_batch_size",
                                                        "keyword_merge", "refine_passes", "assign_mode")},
        "wall_seconds": round(seconds, 1),
        "targets": {
            "max_rounds": MAX_ROUNDS, "rounds_ok": report["engine_rounds"] <= MAX_ROUNDS,
            "max_prompt_tokens": MAX_PROMPT_TOKENS, "prompt_tokens_ok": total["prompt_tokens"] < MAX_PROMPT_TOKENS,
        },
    }


if __name__ == "__main__":
    main()
