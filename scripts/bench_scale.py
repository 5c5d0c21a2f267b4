#!/usr/bin/env python
"""Scale: synthetic registries of 10^4–10^6 services built from the real data in data/, and what each size costs.

For each size: ingest (seconds, peak RSS, DuckDB file size); the BM25 index (build seconds, RSS, query p50); the
dense index the project picks at that size (build seconds, memory, query p50, recall@10 against exact search);
hybrid query p50; `a2x-local serve` start-up time and RSS; and for the build sizes (default 10^4 and 10^5) a full
taxonomy build with the scripted engine (rounds, prompt tokens, peak RSS, wall time), projected to the largest
size from the measured curve (a projection, labelled so). Each stage runs in its own process, so each peak RSS is
that stage's own.

The services are real ones recombined: each synthetic service takes a real service's name and sentences from
it and up to two others of the same language (English from ToolRet and publicMCP, Chinese from ToolRet-zh, at
`--chinese-share`), so lengths, vocabulary and languages vary as in the real data. Embedding a million texts on two
cores would take hours, so service vectors are synthesised the same way: each service's vector is the normalised
mix of its sources' real all-MiniLM-L6-v2 vectors plus noise (the embedding model's real throughput is measured
and reported apart). Recall is measured with the real dev queries' embeddings against exact search over the same
vectors; `--vectors uniform` uses random unit vectors instead (the worst case for any approximate index).

    .venv/bin/python scripts/bench_scale.py --sizes 10000,100000,1000000     # the full run (≤ 60 min, 2 cores)
    .venv/bin/python scripts/bench_scale.py --sizes 2000,20000 --build-sizes 2000 --plot ''   # a quick check

Prints JSON, `sizes` last; `--plot` writes the log-log curves (default docs/scale_curves.png).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

POOLS = {"en": [ROOT / "data" / "toolret" / "services.json", ROOT / "data" / "publicmcp" / "services.json"],
         "zh": [ROOT / "data" / "toolret_zh" / "services.json"]}
QUERY_FILES = [ROOT / "data" / "toolret" / "queries_dev.json", ROOT / "data" / "toolret_zh" / "queries_dev.json"]
FILE_SERVICES = 200_000
TYPES = ("generic", "mcp_tool", "mcp_server", "a2a", "skill")
TARGETS = {"ingest_s": 90, "hybrid_p50_ms": 50, "serve_rss_mb": 6144, "dense_recall_at_10": 0.98,
           "build_rounds": 30, "build_rss_mb": 8192}


# -- the synthetic registry ------------------------------------------------------------------------------------


def load_pool() -> list[dict]:
    """The real services the synthetic ones are made of, each with its language."""
    pool = []
    for language, files in POOLS.items():
        for path in files:
            for row in json.loads(path.read_text(encoding="utf-8")):
                if row.get("description"):
                    pool.append({"name": row["name"], "description": row["description"], "language": language,
                                 "inputSchema": (row.get("metadata") or {}).get("inputSchema")})
    return pool


def sentences(text: str) -> list[str]:
    """Rough sentence split for English and Chinese punctuation (enough to recombine descriptions)."""
    parts, current = [], ""
    for char in text:
        current += char
        if char in ".!?。！？" and len(current.strip()) > 1:
            parts.append(current.strip())
            current = ""
    if current.strip():
        parts.append(current.strip())
    return parts or [text]


class Recipes:
    """Which real services service ``i`` is made of, and with which weights: the same for its text and its vector."""

    def __init__(self, pool: list[dict], chinese_share: float, seed: int) -> None:
        self.by_language = {lang: [k for k, p in enumerate(pool) if p["language"] == lang] for lang in POOLS}
        self.chinese_share = chinese_share
        self.seed = seed

    def of(self, i: int) -> tuple[list[int], list[float], random.Random]:
        rng = random.Random(self.seed * 1_000_003 + i)
        language = "zh" if rng.random() < self.chinese_share else "en"
        members = self.by_language[language]
        sources = [rng.choice(members) for _ in range(rng.choice((1, 2, 2, 3)))]
        weights = [1.0] + [rng.uniform(0.2, 0.6) for _ in sources[1:]]
        return sources, weights, rng


def synthetic_service(i: int, pool: list[dict], recipes: Recipes) -> dict:
    sources, _, rng = recipes.of(i)
    base = pool[sources[0]]
    parts = sentences(base["description"])[: rng.choice((1, 2, 3, 6))]
    for other in sources[1:]:
        parts.append(rng.choice(sentences(pool[other]["description"])))
    joiner = "" if base["language"] == "zh" else " "
    metadata = {"inputSchema": base["inputSchema"]} if base["inputSchema"] and rng.random() < 0.5 else {}
    return {"id": f"syn/{i:07d}", "type": rng.choice(TYPES), "name": f"{base['name']} {i % 997}",
            "description": joiner.join(parts), "metadata": metadata}


def write_registry(folder: Path, size: int, pool: list[dict], recipes: Recipes) -> None:
    """JSON Lines files of at most `FILE_SERVICES` services each (ingest reads a folder of them; one file of a
    million services would pass `[registry] max_file_bytes`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, size, FILE_SERVICES):
        with (folder / f"services-{start // FILE_SERVICES:03d}.jsonl").open("w", encoding="utf-8") as out:
            for i in range(start, min(size, start + FILE_SERVICES)):
                out.write(json.dumps(synthetic_service(i, pool, recipes), ensure_ascii=False) + "\n")


def synthetic_vectors(count: int, pool_vectors, recipes: Recipes, mode: str, noise: float):
    """Row i is service ``syn/i``'s vector: the normalised weighted mix of its sources' real vectors plus noise
    (``mode`` "mixed"), or a random unit vector ("uniform")."""
    import numpy as np

    dimension = pool_vectors.shape[1]
    rng = np.random.default_rng(recipes.seed)
    if mode == "uniform":
        vectors = rng.standard_normal((count, dimension), dtype=np.float32)
    else:
        vectors = np.zeros((count, dimension), dtype=np.float32)
        for i in range(count):
            sources, weights, _ = recipes.of(i)
            vectors[i] = np.dot(np.asarray(weights, dtype=np.float32), pool_vectors[sources])
        vectors += rng.standard_normal((count, dimension), dtype=np.float32) * (noise / math.sqrt(dimension))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


# -- stages (each in its own process: its peak RSS is its own) ---------------------------------------------------


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_stage(name: str, args: argparse.Namespace, **values: object) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--stage", name, "--work", str(args.work),
               "--threads", str(args.threads), "--vectors", args.vectors, "--noise", str(args.noise),
               "--chinese-share", str(args.chinese_share), "--seed", str(args.seed)]
    for key, value in values.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"stage {name} failed ({done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def stage_pool(args: argparse.Namespace) -> dict:
    """Embed the real pool and the dev queries (kept in a reused --work folder: the same model gives the same
    vectors), and measure the embedding model's throughput on 1,000 pool texts every run."""
    import numpy as np

    from a2x_local.evaluation.queries import load_queries
    from a2x_local.search.retrieval.config import RetrievalConfig
    from a2x_local.search.retrieval.dense import Embedder
    from a2x_local.settings import load_settings

    config = RetrievalConfig.from_settings(load_settings()).model_copy(update={"threads": args.threads})
    embedder = Embedder(config.latin_embedding_model, config)
    pool = load_pool()
    texts = [f"{p['name']}: {p['description']}" for p in pool]
    embedder.encode_passages(texts[:64])      # loads the model: the timing below is the embedding alone
    sample = texts[:: max(1, len(texts) // 1000)][:1000]
    started = time.perf_counter()
    embedder.encode_passages(sample)
    seconds = time.perf_counter() - started
    if not (args.work / "pool.npy").is_file():
        queries = [q.query for path in QUERY_FILES for q in load_queries(path)]
        np.save(args.work / "pool.npy", embedder.encode_passages(texts))
        np.save(args.work / "queries.npy", embedder.encode_queries(queries))
        (args.work / "queries.json").write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    return {"pool_services": len(texts), "embedding_passages_per_s": round(len(sample) / seconds, 1),
            "embedding_model": config.latin_embedding_model, "threads": args.threads,
            "load_average_1m": round(os.getloadavg()[0], 2)}


def stage_ingest(args: argparse.Namespace) -> dict:
    from a2x_local.db import connect
    from a2x_local.registry.ingest import ingest

    started = time.perf_counter()
    with connect(args.db) as con:
        report = ingest(con, [args.source])
    return {"ingest_s": round(time.perf_counter() - started, 2), "ingest_rss_mb": peak_rss_mb(),
            "added": len(report.added), "db_mb": round(args.db.stat().st_size / 2**20, 1)}


def _settings(args: argparse.Namespace):
    from a2x_local.settings import load_settings

    return load_settings(db=args.db).with_overrides("retrieval", threads=args.threads)


def _queries(args: argparse.Namespace, count: int) -> list[str]:
    queries = json.loads((args.work / "queries.json").read_text(encoding="utf-8"))
    return queries[::max(1, len(queries) // count)][:count]


def _timed(call, items) -> list[float]:
    """Wall seconds per call; the CPU seconds of each call go to `_CPU_TIMES` (on a machine shared with other work
    the wall time grows with the load and the CPU time does not: with one thread it is what an idle core takes)."""
    times = []
    _CPU_TIMES.clear()
    for item in items:
        started, cpu = time.perf_counter(), time.process_time()
        call(item)
        times.append(time.perf_counter() - started)
        _CPU_TIMES.append(time.process_time() - cpu)
    return times


_CPU_TIMES: list[float] = []


def _cpu_p50_ms() -> float:
    from a2x_local.evaluation.metrics import percentile

    return round(1000 * percentile(_CPU_TIMES, 50), 3)


def stage_bm25(args: argparse.Namespace) -> dict:
    from a2x_local.evaluation.metrics import percentile
    from a2x_local.search.retrieval.config import RetrievalConfig
    from a2x_local.search.retrieval.corpus import ensure_bm25, load_corpus

    settings = _settings(args)
    started = time.perf_counter()
    corpus = load_corpus(args.db)
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    index, _ = ensure_bm25(corpus, RetrievalConfig.from_settings(settings), force=True)
    build_s = time.perf_counter() - started
    times = _timed(lambda q: index.search([q], 10), _queries(args, args.queries))
    return {"registry_read_s": round(read_s, 2), "bm25_build_s": round(build_s, 2), "bm25_rss_mb": peak_rss_mb(),
            "bm25_p50_ms": round(1000 * percentile(times, 50), 2), "bm25_p50_cpu_ms": _cpu_p50_ms()}


def _patch_passages(args: argparse.Namespace, count: int):
    """The service vectors: synthesised (see the module docstring), standing in for the embedding model's."""
    import numpy as np

    from a2x_local.search.retrieval.dense import Embedder

    recipes = Recipes(load_pool(), args.chinese_share, args.seed)
    vectors = synthetic_vectors(count, np.load(args.work / "pool.npy"), recipes, args.vectors, args.noise)
    Embedder.encode_passages = lambda self, texts, progress=None: vectors[: len(texts)]
    return vectors


def exact_top(vectors, queries, k: int):
    """The true top ``k`` rows per query by inner product, in blocks (no second copy of a million vectors)."""
    import numpy as np

    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(vectors), 100_000):
        scores = queries @ vectors[start:start + 100_000].T
        rows = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k] if scores.shape[1] > k else \
            np.tile(np.arange(scores.shape[1]), (len(queries), 1))
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, rows, axis=1)], axis=1)
        merged_rows = np.concatenate([best_rows, rows + start], axis=1)
        keep = np.argsort(-merged_scores, axis=1, kind="stable")[:, :k]
        best_scores = np.take_along_axis(merged_scores, keep, axis=1)
        best_rows = np.take_along_axis(merged_rows, keep, axis=1)
    return best_rows


def stage_dense(args: argparse.Namespace) -> dict:
    import numpy as np

    from a2x_local.evaluation.metrics import percentile
    from a2x_local.search.retrieval.config import RetrievalConfig
    from a2x_local.search.retrieval.corpus import ensure_dense, load_corpus
    from a2x_local.search.retrieval.dense import choose_index

    settings = _settings(args)
    config = RetrievalConfig.from_settings(settings)
    corpus = load_corpus(args.db)
    vectors = _patch_passages(args, len(corpus.ids))
    started = time.perf_counter()
    _, index, _ = ensure_dense(corpus, config, force=True)
    build_s = time.perf_counter() - started
    queries = np.load(args.work / "queries.npy")
    queries = queries[:: max(1, len(queries) // args.queries)][: args.queries]
    if args.vectors == "uniform":
        queries = np.random.default_rng(1).standard_normal(queries.shape, dtype=np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    truth = exact_top(vectors, queries, 10)
    _, found = index.search(queries, 10)
    recall = float(np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth, found, strict=True)]))
    times = _timed(lambda q: index.search(q[None, :], 10), queries)
    choice = choose_index(len(corpus.ids), config, vectors.shape[1])
    return {"dense_index": choice.kind, "dense_index_params": choice.params, "dense_build_s": round(build_s, 2),
            "dense_index_mb": round(index.memory_bytes / 2**20, 1),
            "dense_p50_ms": round(1000 * percentile(times, 50), 3), "dense_p50_cpu_ms": _cpu_p50_ms(),
            "dense_recall_at_10": round(recall, 4), "dense_rss_mb": peak_rss_mb(), "vectors": args.vectors}


def stage_hybrid(args: argparse.Namespace) -> dict:
    from a2x_local.evaluation.metrics import percentile
    from a2x_local.search.methods import make_method
    from a2x_local.search.types import SearchRequest

    started = time.perf_counter()
    method = make_method("hybrid", _settings(args), args.db)
    load_s = time.perf_counter() - started
    method.search_batch([SearchRequest("warm up", k=10)])
    times = _timed(lambda q: method.search_batch([SearchRequest(q, k=10)]), _queries(args, args.queries))
    folder = args.db.with_name(args.db.name + ".indexes")
    indexes_mb = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    return {"indexes_mb": round(indexes_mb, 1), "hybrid_load_s": round(load_s, 2),
            "hybrid_p50_ms": round(1000 * percentile(times, 50), 2), "hybrid_p50_cpu_ms": _cpu_p50_ms(),
            "hybrid_p90_ms": round(1000 * percentile(times, 90), 2), "hybrid_rss_mb": peak_rss_mb()}


def stage_serve(args: argparse.Namespace) -> dict:
    """`a2x-local serve` on a free loopback port with hybrid preloaded: seconds until /healthz answers ready, and
    its RSS after one search."""
    import psutil

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = args.work / "serve.toml"
    config.write_text(f'[serve]\npreload = ["hybrid"]\n[retrieval]\nthreads = {args.threads}\n', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "A2X_CONFIG": str(config)}
    started = time.perf_counter()
    command = [str(Path(sys.executable).with_name("a2x-local")), "serve", "--db", str(args.db), "--host",
               "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        ready = None
        for _ in range(int(args.serve_wait_s / 0.5)):
            if server.poll() is not None:
                raise SystemExit(f"serve exited: {server.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        ready = time.perf_counter() - started
                        break
            except OSError:
                pass
            time.sleep(0.5)
        if ready is None:
            raise SystemExit("serve did not become ready")
        body = json.dumps({"query": "convert 100 dollars to euros", "method": "hybrid", "k": 10}).encode()
        request = urllib.request.Request(f"{base}/v1/search", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=args.serve_wait_s) as answer:
            hits = len(json.loads(answer.read())["hits"])
        process = psutil.Process(server.pid)
        rss = process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {"serve_start_s": round(ready, 2), "serve_rss_mb": round(rss / 2**20, 1), "serve_hits": hits}


def stage_build(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)       # the keyword merge embeds the vocabulary
    from a2x_local.db import connect
    from a2x_local.llm.cache import AnswerCache, CachedEngine
    from a2x_local.registry.store import Registry
    from a2x_local.settings import load_settings
    from a2x_local.taxonomy.induction.runner import run_build
    from a2x_local.testing import ScriptedEngine, WordPolicy

    with connect(args.db) as con:
        services = Registry(con).all()
    engine = CachedEngine(ScriptedEngine(WordPolicy(services)), AnswerCache(args.db))
    started = time.perf_counter()
    outcome = run_build(load_settings(db=args.db), lambda: engine, model="scripted-word-policy")
    total = outcome.report["usage"]["total"]
    tree = outcome.report["tree"]
    return {"build_rounds": outcome.report["engine_rounds"], "build_prompt_tokens": total["prompt_tokens"],
            "build_completion_tokens": total["completion_tokens"], "build_requests": total["calls"],
            "build_rss_mb": peak_rss_mb(), "build_wall_s": round(time.perf_counter() - started, 1),
            "build_tree": {k: tree[k] for k in ("depth", "leaves", "internal_nodes", "mean_leaves_per_service")}}


STAGES = {"pool": stage_pool, "ingest": stage_ingest, "bm25": stage_bm25, "dense": stage_dense,
          "hybrid": stage_hybrid, "serve": stage_serve, "build": stage_build}


# -- the run ---------------------------------------------------------------------------------------------------


def power_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(a, b) of y = a·n^b through the measured points (least squares in log-log)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(y, 1e-9)) for _, y in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 1.0
    return math.exp(mean_y - b * mean_x), b


def projection(results: dict[int, dict], target: int) -> dict:
    keys = ("build_prompt_tokens", "build_completion_tokens", "build_requests", "build_wall_s", "build_rss_mb")
    built = {n: r for n, r in results.items() if "build_prompt_tokens" in r}
    if len(built) < 2:
        return {}
    out = {"services": target, "note": "PROJECTED from the measured build sizes (power law in log-log), not measured"}
    for key in keys:
        a, b = power_fit([(n, float(r[key])) for n, r in built.items()])
        out[key] = round(a * target ** b, 1)
        out[f"{key}_exponent"] = round(b, 3)
    out["build_rounds"] = max(r["build_rounds"] for r in built.values())
    out["build_rounds_note"] = "rounds depend on depth and refine passes, not size: the largest measured count"
    return out


def plot(results: dict[int, dict], path: Path, projected: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    panels = [("seconds", ["ingest_s", "bm25_build_s", "dense_build_s", "serve_start_s", "build_wall_s"]),
              ("MB", ["ingest_rss_mb", "bm25_rss_mb", "dense_index_mb", "serve_rss_mb", "build_rss_mb", "db_mb"]),
              ("ms per query", ["bm25_p50_ms", "dense_p50_ms", "hybrid_p50_ms"])]
    figure, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    for axis, (unit, keys) in zip(axes, panels, strict=False):
        for key in keys:
            points = [(n, results[n][key]) for n in sizes if key in results[n]]
            if points:
                axis.plot(*zip(*points, strict=True), marker="o", label=key)
        axis.set(xscale="log", yscale="log", xlabel="services", ylabel=unit)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    axis = axes[3]
    points = [(n, results[n]["build_prompt_tokens"]) for n in sizes if "build_prompt_tokens" in results[n]]
    if points:
        axis.plot(*zip(*points, strict=True), marker="o", label="build prompt tokens (measured)")
    if projected:
        last = points[-1]
        axis.plot([last[0], projected["services"]], [last[1], projected["build_prompt_tokens"]], "--",
                  marker="x", label="projected")
    axis.set(xscale="log", yscale="log", xlabel="services", ylabel="prompt tokens")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.suptitle("a2x-local at scale (scripts/bench_scale.py)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def targets(results: dict[int, dict]) -> dict:
    largest = max(results)
    top = results[largest]
    checks = {f"{key}_at_{largest}": (top.get(key), limit) for key in ("ingest_s", "hybrid_p50_ms", "serve_rss_mb")
              for limit in [TARGETS[key]]}
    checks[f"dense_recall_at_10_at_{largest}"] = (top.get("dense_recall_at_10"), TARGETS["dense_recall_at_10"])
    out = {}
    for name, (value, limit) in checks.items():
        ok = value is not None and (value >= limit if "recall" in name else value < limit)
        out[name] = {"value": value, "target": limit, "met": ok}
    for n, result in results.items():
        if "build_rounds" in result:
            out[f"build_rounds_at_{n}"] = {"value": result["build_rounds"], "target": TARGETS["build_rounds"],
                                           "met": result["build_rounds"] <= TARGETS["build_rounds"]}
            out[f"build_rss_mb_at_{n}"] = {"value": result["build_rss_mb"], "target": TARGETS["build_rss_mb"],
                                           "met": result["build_rss_mb"] < TARGETS["build_rss_mb"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="registry sizes, comma-separated")
    parser.add_argument("--build-sizes", default="10000,100000", help="sizes that also get a scripted build")
    parser.add_argument("--queries", type=int, default=200, help="queries timed per index")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch / FAISS threads (1: on a shared machine a second thread waits on the others)")
    parser.add_argument("--vectors", choices=("mixed", "uniform"), default="mixed")
    parser.add_argument("--noise", type=float, default=0.5, help="noise added to the mixed vectors (norm)")
    parser.add_argument("--chinese-share", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip", default="", help="stages to leave out, comma-separated: bm25,dense,hybrid,serve")
    parser.add_argument("--serve-wait-s", type=float, default=900)
    parser.add_argument("--plot", default=str(ROOT / "docs" / "scale_curves.png"), help="'' for no plot")
    parser.add_argument("--work", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--stage", choices=sorted(STAGES), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        result = STAGES[args.stage](args)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        # CPU seconds, besides wall seconds: on a machine shared with other work, wall time grows with the load
        # and CPU time does not (for the single-threaded stages it is what an idle core would take).
        print(json.dumps(result | {f"{args.stage}_cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}))
        return
    sizes = sorted(int(s) for s in args.sizes.split(","))
    build_sizes = {int(s) for s in args.build_sizes.split(",") if s}
    keep = args.work is not None
    args.work = args.work or Path(tempfile.mkdtemp(prefix="a2x-scale-"))
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load = [os.getloadavg()[0]]
    try:
        pool = run_stage("pool", args)
        pool_rows, recipes = load_pool(), Recipes(load_pool(), args.chinese_share, args.seed)
        results: dict[int, dict] = {}
        for size in sizes:
            folder = args.work / f"n{size}"
            folder.mkdir(exist_ok=True)
            source, db = folder / "services", folder / "registry.duckdb"
            began = time.perf_counter()
            write_registry(source, size, pool_rows, recipes)
            result: dict = {"services": size, "synthesis_s": round(time.perf_counter() - began, 1),
                            "source_mb": round(sum(f.stat().st_size for f in source.iterdir()) / 2**20, 1)}
            result |= run_stage("ingest", args, db=db, source=source)
            shutil.rmtree(source)
            skip = set(args.skip.split(","))
            for stage in ("bm25", "dense", "hybrid"):
                if stage not in skip:
                    result |= run_stage(stage, args, db=db)
                    load.append(os.getloadavg()[0])
            if "serve" not in skip:
                result |= run_stage("serve", args, db=db, serve_wait_s=args.serve_wait_s)
            if size in build_sizes:
                result |= run_stage("build", args, db=db)
            result["stage_load_average"] = round(os.getloadavg()[0], 2)
            results[size] = result
            shutil.rmtree(folder, ignore_errors=True)
            print(json.dumps(result), file=sys.stderr, flush=True)
        projected = projection(results, max(max(sizes), 1_000_000))
        if args.plot:
            plot(results, Path(args.plot), projected)
    finally:
        if not keep:
            shutil.rmtree(args.work, ignore_errors=True)
    print(json.dumps({
        "wall_s": round(time.perf_counter() - started, 1),
        "load_average_1m": {"min": round(min(load), 2), "max": round(max(load), 2)}, "cpus": os.cpu_count(),
        "embedding": pool, "vectors": args.vectors, "targets": targets(results), "build_projection": projected,
        "sizes": {str(n): r for n, r in results.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
