#!/usr/bin/env python
"""Embedding models side by side: load time, passages per second, one-query latency, and batch-vs-single agreement.

For each model (aliases of [retrieval.embedding_models], default: all-MiniLM-L6-v2 and multilingual-e5-small) it
embeds the first --passages service texts of each data folder in one batch and one at a time: the two must give
the same vectors (max_abs_diff, min_cosine), since an index is built in batches and queries arrive one by one.
Prints one JSON object per model and language as it goes, then a JSON summary as the last line.

    .venv/bin/python scripts/bench_embedding.py [--data data/toolret data/toolret_zh] [--passages 200] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2x_local.llm import load_embedder, resolve_embedding
from a2x_local.search.retrieval.config import RetrievalConfig

DATA = Path(__file__).resolve().parents[1] / "data"


def texts_of(folder: Path, count: int) -> tuple[list[str], list[str]]:
    services = json.loads((folder / "services.json").read_text(encoding="utf-8"))[:count]
    queries = json.loads((folder / "queries_dev.json").read_text(encoding="utf-8"))[:count]
    return [f"{s['name']}: {s['description']}" for s in services], [q["query"] for q in queries]


def measure(alias: str, folder: Path, count: int, threads: int, config: RetrievalConfig) -> dict[str, object]:
    ref = resolve_embedding(alias, config.embedding_models)
    started = time.perf_counter()
    model = load_embedder(ref, threads=threads)
    load_s = time.perf_counter() - started
    passages, queries = texts_of(folder, count)
    model.encode(passages[:4], query=False, batch_size=64)   # warm-up
    started = time.perf_counter()
    batch = model.encode(passages, query=False, batch_size=64)
    batch_s = time.perf_counter() - started
    single = np.stack([model.encode([text], query=False, batch_size=1)[0] for text in passages])
    latencies = []
    for query in queries[:50]:
        started = time.perf_counter()
        model.encode([query], query=True, batch_size=1)
        latencies.append((time.perf_counter() - started) * 1000)
    cosines = np.sum(batch * single, axis=1)
    return {"model": alias, "backend": ref.backend, "data": folder.name, "passages": len(passages),
            "dimension": int(batch.shape[1]), "load_s": round(load_s, 3),
            "passages_per_s": round(len(passages) / batch_s, 1),
            "query_p50_ms": round(statistics.median(latencies), 2),
            "norm_error": float(np.abs(np.linalg.norm(batch, axis=1) - 1).max()),
            "batch_vs_single_max_abs_diff": float(np.abs(batch - single).max()),
            "batch_vs_single_min_cosine": float(cosines.min())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[DATA / "toolret", DATA / "toolret_zh"])
    parser.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", "multilingual-e5-small"])
    parser.add_argument("--passages", type=int, default=200, help="service texts embedded per model and folder")
    parser.add_argument("--threads", type=int, default=2, help="torch / OpenMP threads")
    args = parser.parse_args()
    config = RetrievalConfig.defaults()
    rows = []
    for alias in args.models:
        for folder in args.data:
            rows.append(measure(alias, folder, args.passages, args.threads, config))
            print(json.dumps(rows[-1]), flush=True)
    worst = max(row["batch_vs_single_max_abs_diff"] for row in rows)
    print(json.dumps({"benchmark": "embedding", "threads": args.threads, "passages": args.passages,
                      "batch_vs_single_max_abs_diff": worst, "results": rows}))


if __name__ == "__main__":
    main()
