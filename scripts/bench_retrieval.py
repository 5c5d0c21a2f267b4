#!/usr/bin/env python
"""Retrieval speed on ToolRet: index build seconds for its 1,839 services and per-query latency per method.

Prints JSON. Latency is one query per search_batch call (what an agent waits for), after a warm-up query, with
torch and FAISS on --threads threads (two cores: the CI machine). Target: hybrid p50 under 25 ms per query.
cpu_p50_ms is the process CPU time per query: with --threads 1 it is what the query costs on an idle core, a number
that other work on a shared machine does not inflate (wall-clock latency there can be several times higher).

    .venv/bin/python scripts/bench_retrieval.py [--data data/toolret] [--queries 300] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2x_local.db import connect
from a2x_local.evaluation.metrics import percentile
from a2x_local.evaluation.queries import load_queries
from a2x_local.registry.ingest import ingest
from a2x_local.search.methods import make_method
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import ensure_bm25, ensure_dense, load_corpus
from a2x_local.search.types import SearchRequest
from a2x_local.settings import load_settings

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data" / "toolret"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with services.json, queries_dev.json")
    parser.add_argument("--queries", type=int, default=300, help="queries timed per method")
    parser.add_argument("--threads", type=int, default=2, help="torch / FAISS threads")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    queries = [q.query for q in load_queries(args.data / "queries_dev.json")][: args.queries]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        with connect(db) as con:
            ingest(con, [args.data / "services.json"])
        # [retrieval] threads: the embedder sets torch's threads and each retriever FAISS's (the model loads
        # offline by itself, see dense._force_offline).
        settings = load_settings(db=db).with_overrides("retrieval", threads=args.threads)
        config = RetrievalConfig.from_settings(settings)
        corpus = load_corpus(db)
        ensure_dense(corpus, config)  # loads the model, so the build timing below is the build alone
        started = time.perf_counter()
        _, _, dense_info = ensure_dense(corpus, config, force=True)
        dense_seconds = time.perf_counter() - started
        started = time.perf_counter()
        ensure_bm25(corpus, config, force=True)
        bm25_seconds = time.perf_counter() - started

        latency = {}
        for name in ("dense", "bm25", "hybrid"):
            method = make_method(name, settings, db)
            method.search_batch([SearchRequest("warm up", k=args.k)])
            times, cpu = [], []
            for query in queries:
                started, started_cpu = time.perf_counter(), time.process_time()
                method.search_batch([SearchRequest(query, k=args.k)])
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            started = time.perf_counter()
            method.search_batch([SearchRequest(query, k=args.k) for query in queries])
            batch = (time.perf_counter() - started) / len(queries)
            latency[name] = {"p50_ms": round(1000 * percentile(times, 50), 2),
                             "p90_ms": round(1000 * percentile(times, 90), 2),
                             "cpu_p50_ms": round(1000 * percentile(cpu, 50), 2),
                             "batched_ms_per_query": round(1000 * batch, 2)}
    print(json.dumps({
        "services": len(corpus.services),
        "queries_timed": len(queries),
        "threads": args.threads,
        "index_build_seconds": {"dense": round(dense_seconds, 2), "bm25": round(bm25_seconds, 2),
                                "dense_index": dense_info.variant["index"]},
        "latency": latency,
        "target": {"hybrid_p50_ms_below": 25, "met": latency["hybrid"]["p50_ms"] < 25},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
