#!/usr/bin/env python
"""Cost of a full taxonomy build of ToolRet (1,839 services) with the scripted engine: rounds and prompt tokens.

The scripted engine (`taxonomy/scripted_policy.py`) answers every call deterministically, and prompt tokens are
counted with a real Qwen tokenizer (quicktok), so the numbers are what a Qwen model would be sent. The build
runs through the real runner (DuckDB file, a checkpoint after every round). Prints JSON: engine rounds,
requests per round, prompt/completion tokens per call type and in total, tree shape, vocabulary sizes, and the
targets (at most 30 sequential rounds, fewer than 3 M prompt tokens).

    .venv/bin/python scripts/bench_build.py                   # default [build] settings (embedding merge)
    .venv/bin/python scripts/bench_build.py --merge stem      # no embedding model needed
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
    args = parser.parse_args()

    from a2x_local.db import connect
    from a2x_local.llm.scripted import ScriptedEngine
    from a2x_local.registry.ingest import ingest
    from a2x_local.registry.store import Registry
    from a2x_local.settings import load_settings
    from a2x_local.taxonomy.config import build_config
    from a2x_local.taxonomy.runner import run_build
    from a2x_local.taxonomy.scripted_policy import WordPolicy

    config = build_config(load_settings(), keyword_merge=args.merge)
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
    print(json.dumps({
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
                                                        "keyword_merge", "refine_passes")},
        "wall_seconds": round(seconds, 1),
        "targets": {
            "max_rounds": MAX_ROUNDS, "rounds_ok": report["engine_rounds"] <= MAX_ROUNDS,
            "max_prompt_tokens": MAX_PROMPT_TOKENS, "prompt_tokens_ok": total["prompt_tokens"] < MAX_PROMPT_TOKENS,
        },
    }, indent=2))


if __name__ == "__main__":
    main()
