#!/usr/bin/env python
"""Throughput of each engine on the tiny random model at batch sizes 1, 32 and 256: the evidence that batching works.

Prints JSON: per engine and batch size, requests/s and tokens/s (completion and total), plus whether throughput
grows with the batch. Builds the tiny model in a temporary folder; the openai engine gets a local vLLM server
started (and stopped) by this script. Nothing is downloaded.

    .venv/bin/python scripts/bench_engine.py                       # all three engines (~3 minutes on 2 cores)
    .venv/bin/python scripts/bench_engine.py --engines vllm,transformers --sizes 1,32,256
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
for key, value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                   "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "ERROR"}.items():
    os.environ.setdefault(key, value)

from pydantic import BaseModel, Field  # noqa: E402  (after the environment is set)

from a2x_local.llm import JsonConstraint, Request  # noqa: E402

SYSTEM = "You classify services into categories. Answer with the JSON object only."


class Pick(BaseModel):
    """A small bounded answer, like the build's and search's structured answers."""

    category: Literal["billing", "search", "travel"]
    reason: str = Field(max_length=24)
    ids: list[Annotated[int, Field(ge=1, le=99)]] = Field(min_length=1, max_length=3)


def requests_for(n: int) -> list[Request]:
    return [Request([{"role": "system", "content": SYSTEM},
                     {"role": "user", "content": f"Service {i}: " + "books flights and hotels " * (1 + i % 5)}],
                    JsonConstraint(Pick), max_tokens=64, label="bench") for i in range(n)]


def measure(engine, size: int, min_requests: int, repeats: int) -> dict:
    """Best of ``repeats`` timings of rounds of ``size`` requests answering at least ``min_requests`` in all.

    Best-of, because other processes on a shared machine only ever make a run slower.
    """
    engine.generate(requests_for(size))  # warm-up: grammar compilation, first-use allocations
    rounds = max(1, -(-min_requests // size))
    best: dict = {}
    for _ in range(repeats):
        answered = prompt = completion = valid = 0
        batches = [requests_for(size) for _ in range(rounds)]  # built before the clock starts
        started = time.perf_counter()
        for batch in batches:
            results = engine.generate(batch)
            answered += len(results)
            valid += sum(r.ok for r in results)
            prompt += sum(r.prompt_tokens for r in results)
            completion += sum(r.completion_tokens for r in results)
        seconds = time.perf_counter() - started
        if not best or seconds < best["seconds"]:
            best = {"batch_size": size, "requests": answered, "valid": valid, "seconds": round(seconds, 3),
                    "requests_per_s": round(answered / seconds, 2),
                    "completion_tokens_per_s": round(completion / seconds, 1),
                    "total_tokens_per_s": round((prompt + completion) / seconds, 1)}
    return best


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model_dir: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
               "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", "2048", "--structured-outputs-config",
               json.dumps({"backend": "guidance", "disable_any_whitespace": True,
                           "disable_additional_properties": True})]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, f"{url}/v1"
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise RuntimeError("the vLLM server did not start within 300 s")


def make(name: str, model_dir: Path, largest: int):
    from a2x_local.llm.config import EngineConfig, OpenAIConfig, TransformersConfig

    if name == "vllm":
        from a2x_local.llm.vllm_engine import VllmEngine

        return VllmEngine(model_dir, EngineConfig.defaults(dtype="float32", max_model_len=2048, enforce_eager=True,
                                                  cpu_kvcache_space_gb=1)), None
    if name == "transformers":
        from a2x_local.llm.transformers_engine import TransformersEngine

        config = EngineConfig.defaults(name="transformers", dtype="float32", max_model_len=2048,
                              transformers=TransformersConfig.defaults(batch_size=largest))
        return TransformersEngine(model_dir, config), None
    from a2x_local.llm.openai_engine import OpenAIEngine

    process, url = start_server(model_dir)
    return OpenAIEngine(OpenAIConfig.defaults(base_url=url, concurrency=64, timeout_s=300)), process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="vllm,transformers,openai")
    parser.add_argument("--sizes", default="1,32,256")
    parser.add_argument("--min-requests", type=int, default=8,
                        help="answered requests per measurement at least (batch 1 runs this many rounds)")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per batch size; the best is kept")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    from a2x_local.llm.tiny_model import build_tiny_model

    report: dict = {"model": "tiny random Qwen2 (hidden 128, 2 layers, vocab 4096)", "cpu_count": os.cpu_count(),
                    "repeats": args.repeats, "load_average_1m": os.getloadavg()[0],
                    "request": "JSON schema answer (enum, 24-char string, 1-3 ints), max 64 tokens", "engines": {}}
    with tempfile.TemporaryDirectory() as folder:
        model_dir = build_tiny_model(Path(folder) / "tiny")
        for name in args.engines.split(","):
            started = time.perf_counter()
            engine, process = make(name, model_dir, max(sizes))
            start_s = time.perf_counter() - started
            try:
                rows = [measure(engine, size, args.min_requests, args.repeats) for size in sizes]
            finally:
                engine.close()
                if process is not None:
                    process.terminate()
                    process.wait(timeout=30)
            rates = [row["requests_per_s"] for row in rows]
            report["engines"][name] = {"start_s": round(start_s, 1), "results": rows,
                                       "throughput_grows_with_batch": all(a < b for a, b in pairwise(rates))}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
