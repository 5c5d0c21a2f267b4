"""Benchmark: `a2x-local serve` under concurrent clients on loopback; prints JSON (last line).

Sets up a registry of ToolRet services, an A2X tree built by the scripted WordPolicy (so the descent has levels),
and the tiny random Qwen2 model through vLLM; starts `a2x-local serve --model TINY` as its own process; then, for
each method (hybrid, a2x) and each number of concurrent clients (1, 8, 32), every client sends its bounded share
of ToolRet dev queries one after another. Reported per run: requests, requests/s, p50/p99 latency, errors, and the
mean batch: for a2x the prompts per engine round (from the server's /metrics: concurrent searches share rounds),
for hybrid the queries per retrieval batch; and the CPU seconds the server and this load generator used (they
share the machine's cores). The model's answers are random (valid positions), so the work per
search is realistic in size, not in what it finds.

Target: a2x requests/s at 32 clients at least 3x that at 1 client, with 0 errors.

Usage: .venv/bin/python scripts/bench_serve.py [--services 1839] [--clients 1,8,32] [--methods hybrid,a2x]
       [--llm-requests-per-client 10] [--retrieval-requests-per-client 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from a2x_local.db import connect
from a2x_local.evaluation.metrics import percentile
from a2x_local.evaluation.queries import load_queries
from a2x_local.llm.tiny_model import MAX_POSITIONS, build_tiny_model
from a2x_local.registry import Registry
from a2x_local.registry.ingest import ingest
from a2x_local.settings import load_settings
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import ScriptedEngine, WordPolicy

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "toolret"
TARGET_SPEEDUP = 3.0
SERVER_CONFIG = """\
[serve]
preload = ["hybrid", "a2x"]
request_timeout_s = 600
[engine]
enforce_eager = true
multiprocessing = false
cpu_kvcache_space_gb = 2
"""


def make_registry(folder: Path, limit: int, data: Path = DATA) -> tuple[Path, dict]:
    """The first ``limit`` services of ``data`` ingested, and a scripted-policy tree over them (active)."""
    services_file = folder / "services.json"
    services_file.write_text(json.dumps(json.loads((data / "services.json").read_text())[:limit]), encoding="utf-8")
    db = folder / "bench.duckdb"
    with connect(db) as con:
        added = ingest(con, [services_file]).added
        by_id = Registry(con).get_many(added)
    services = [by_id[service_id] for service_id in added]
    started = time.perf_counter()
    settings = load_settings(db=db)
    outcome = run_build(settings, lambda: ScriptedEngine(WordPolicy(services)),
                        config=BuildConfig.from_settings(settings, keyword_merge="stem"), model="scripted")
    return db, {**outcome.tree.stats().to_dict(), "build_seconds": round(time.perf_counter() - started, 1)}


def stop(process: subprocess.Popen) -> None:
    """SIGTERM (the server drains its requests), then SIGKILL after a minute."""
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db: Path, model: Path, home: Path, port: int, log: Path, serve_options: list[str]) -> subprocess.Popen:
    home.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"{key.strip()} = {value.strip()}\n" for key, _, value in (o.partition("=") for o in serve_options))
    (home / "bench.toml").write_text(SERVER_CONFIG.replace("[serve]\n", "[serve]\n" + extra), encoding="utf-8")
    env = {**os.environ, "A2X_HOME": str(home), "A2X_CONFIG": str(home / "bench.toml"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", "from a2x_local.cli import main; main()", "serve", "--db", str(db),
               "--port", str(port), "--model", str(model), "--engine", "vllm", "--dtype", "float32",
               "--max-model-len", str(MAX_POSITIONS)]
    return subprocess.Popen(command, env=env, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait_ready(process: subprocess.Popen, url: str, log: Path, timeout_s: float = 900) -> dict:
    """The server's /readyz answer, once it is ready (the registry read, the model started, the preloaded methods
    built: /healthz answers at once, while all that still loads in the background).

    The tests' `tests.support.servers.serving` does the same wait, but scripts do not import the test tree: its
    helpers fail through pytest, and a benchmark must run (and end with one plain message) without it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            response = httpx.get(f"{url}/readyz", timeout=5)
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(1)
    raise SystemExit(f"the server was not ready within {timeout_s} s")


_SAMPLE = re.compile(r'^(a2x_(?:engine|search)_batch_size_(?:sum|count))(\{method="([^"]*)"\})? ([0-9.e+]+)$')


def batch_totals(url: str) -> dict[str, float]:
    """Sums and counts of the batch-size histograms, e.g. {'engine_sum': ..., 'search_count:a2x': ...}."""
    totals: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            name, _, method, value = match.groups()
            kind = "engine" if "engine" in name else "search"
            key = f"{kind}_{name.rsplit('_', 1)[1]}" + (f":{method}" if method else "")
            totals[key] = float(value)
    return totals


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), to see who used the machine during a run."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def mean_batch(before: dict[str, float], after: dict[str, float], kind: str, method: str | None = None) -> float:
    suffix = f":{method}" if method else ""
    count = after.get(f"{kind}_count{suffix}", 0) - before.get(f"{kind}_count{suffix}", 0)
    total = after.get(f"{kind}_sum{suffix}", 0) - before.get(f"{kind}_sum{suffix}", 0)
    return round(total / count, 2) if count else 0.0


async def load(url: str, method: str, queries: list[str], clients: int, per_client: int) -> dict:
    """``clients`` concurrent clients, each sending ``per_client`` searches one after another."""
    latencies: list[float] = []
    errors: list[str] = []

    async def client(number: int, http: httpx.AsyncClient) -> None:
        for i in range(per_client):
            query = queries[(number * per_client + i) % len(queries)]
            started = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/search", json={"query": query, "method": method, "k": 10})
                if response.status_code != 200:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
                    continue
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)

    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(900), limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(number, http) for number in range(clients)))
        wall = time.perf_counter() - started
    milliseconds = [seconds * 1000 for seconds in latencies]
    return {"requests": clients * per_client, "seconds": round(wall, 2),
            "requests_per_s": round(len(latencies) / wall, 3) if wall else 0.0,
            "p50_ms": round(percentile(milliseconds, 50), 1) if milliseconds else None,
            "p99_ms": round(percentile(milliseconds, 99), 1) if milliseconds else None,
            "errors": len(errors), "error_examples": errors[:3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--services", type=int, default=1839, help="ToolRet services in the registry")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--methods", default="hybrid,a2x")
    parser.add_argument("--llm-requests-per-client", type=int, default=10)
    parser.add_argument("--retrieval-requests-per-client", type=int, default=20)
    parser.add_argument("--keep", type=Path, default=None, help="keep the server log here")
    parser.add_argument("--data", type=Path, default=DATA, help="folder with services.json and queries_dev.json")
    parser.add_argument("--serve-option", action="append", default=[], metavar="KEY=TOML",
                        help="a [serve] setting for the server, e.g. llm_batch_concurrency=8 (repeatable)")
    args = parser.parse_args()
    clients = [int(n) for n in args.clients.split(",")]
    queries = [query.query.strip() for query in load_queries(args.data / "queries_dev.json")]

    with tempfile.TemporaryDirectory(prefix="a2x-bench-serve-") as tmp:
        folder = Path(tmp)
        db, tree = make_registry(folder, args.services, args.data)
        model = build_tiny_model(folder / "tiny-qwen2")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = folder / "server.log"
        started = time.perf_counter()
        process = start_server(db, model, folder / "home", port, log, args.serve_option)
        runs = []
        try:
            health = wait_ready(process, url, log)
            startup = round(time.perf_counter() - started, 1)
            for method in args.methods.split(","):
                llm = method not in ("hybrid", "dense", "bm25")
                per_client = args.llm_requests_per_client if llm else args.retrieval_requests_per_client
                asyncio.run(load(url, method, queries[-8:], 2, 1))  # warm-up: grammars compiled, caches filled
                for count in clients:
                    before = batch_totals(url)
                    server_cpu, client_cpu = cpu_seconds(process.pid), client_cpu_seconds()
                    result = asyncio.run(load(url, method, queries, count, per_client))
                    server_cpu, client_cpu = cpu_seconds(process.pid) - server_cpu, client_cpu_seconds() - client_cpu
                    after = batch_totals(url)
                    engine_batch = mean_batch(before, after, "engine")
                    search_batch = mean_batch(before, after, "search", method)
                    runs.append({"method": method, "clients": count, **result,
                                 "mean_batch": engine_batch if llm else search_batch,
                                 "mean_search_batch": search_batch, "mean_engine_batch": engine_batch,
                                 "server_cpu_s": round(server_cpu, 2), "client_cpu_s": round(client_cpu, 2),
                                 "requests_per_server_cpu_s": round(result["requests"] / server_cpu, 2)
                                 if server_cpu else None})
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        finally:
            stop(process)
            if args.keep:
                args.keep.write_text(log.read_text())

    speedup = cpu_speedup = None
    a2x = {run["clients"]: run for run in runs if run["method"] == "a2x"}
    if a2x.get(1) and a2x.get(max(clients)) and a2x[1]["requests_per_s"]:
        speedup = round(a2x[max(clients)]["requests_per_s"] / a2x[1]["requests_per_s"], 2)
        # The same per CPU-second of the server: what batching saves, whatever else runs on the machine.
        if a2x[1]["requests_per_server_cpu_s"] and a2x[max(clients)]["requests_per_server_cpu_s"]:
            cpu_speedup = round(a2x[max(clients)]["requests_per_server_cpu_s"]
                                / a2x[1]["requests_per_server_cpu_s"], 2)
    result = {"services": args.services, "serve_options": args.serve_option, "tree": tree,
              "server_startup_s": startup, "engine": health["engine"], "runs": runs,
              "targets": {"a2x_speedup_at_most_clients": speedup,
                          "a2x_speedup_per_server_cpu_second": cpu_speedup, "speedup_at_least": TARGET_SPEEDUP,
                          "speedup_met": speedup is not None and speedup >= TARGET_SPEEDUP,
                          "errors": sum(run["errors"] for run in runs),
                          "errors_met": all(run["errors"] == 0 for run in runs)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
