"""The server with a real engine: the tiny random model through vLLM answers concurrent a2x searches over HTTP,
their model calls share engine rounds, and every answer parses. (The answers are nonsense: only their flow and
shape are asserted.)"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from a2x_local.serve.http_api import create_app
from tests.search.a2x_helpers import sample_services
from tests.serve.helpers import make_server, registry_with_trees
from tests.support.engines import SharedEngine

pytestmark = pytest.mark.engine


def test_concurrent_a2x_searches_share_rounds_of_the_real_engine(db_path, vllm_engine):
    active, _ = registry_with_trees(db_path)
    server = make_server(db_path, SharedEngine(vllm_engine), batch_window_ms=50, engine_window_ms=50)
    queries = [f"find a service for task number {i}" for i in range(8)]
    with TestClient(create_app(server.discovery), base_url="http://127.0.0.1") as client:

        def search(query: str):
            return client.post("/v1/search", json={"query": query, "method": "a2x", "mode": "get_all",
                                                   "detail": "full"})

        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(search, queries))
        metrics = client.get("/metrics").text
    server.close()
    known = set(sample_services())
    for response in responses:
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["tree"] == active and answer["cost"]["calls"] >= 1 and answer["cost"]["prompt_tokens"] > 0
        assert {hit["service_id"] for hit in answer["hits"]} <= known
    rounds = float(re.search(r"^a2x_engine_batch_size_count (\S+)$", metrics, re.M).group(1))
    prompts = float(re.search(r"^a2x_engine_batch_size_sum (\S+)$", metrics, re.M).group(1))
    calls = sum(response.json()["cost"]["calls"] for response in responses)
    assert prompts >= 8 and rounds < prompts, "the searches' model calls never shared an engine round"
    assert calls >= prompts  # retries are counted per search too


def test_over_stdio_the_server_answers_before_the_model_loads_and_a_search_hears_it_load(db_path, tmp_path,
                                                                                           tiny_model_dir):
    """`serve --stdio --model`: initialize and tools/list come back while vLLM still starts; an a2x search waits
    for the model with progress notifications, then answers."""
    import asyncio

    from mcp import Client, StdioServerParameters

    from a2x_local.llm.tiny_model import MAX_POSITIONS
    from tests.serve.helpers import ROOT, cli_command, server_env

    registry_with_trees(db_path)
    env = server_env(tmp_path / "home")
    config = tmp_path / "home" / "engine.toml"
    serve = Path(env["A2X_CONFIG"]).read_text().replace("loading_wait_s = 120.0", "loading_wait_s = 900.0")
    config.write_text(serve + "[engine]\nenforce_eager = true\nmultiprocessing = false\ncpu_kvcache_space_gb = 1\n",
                      encoding="utf-8")
    env = {**env, "A2X_CONFIG": str(config), "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    command, *args = cli_command("serve", "--stdio", "--db", str(db_path), "--model", str(tiny_model_dir),
                                 "--engine", "vllm", "--dtype", "float32", "--max-model-len", str(MAX_POSITIONS))
    heard: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async def scenario():
        async with Client(StdioServerParameters(command=command, args=args, env=env, cwd=str(ROOT)),
                          read_timeout_seconds=900) as client:
            tools = (await client.list_tools()).tools
            answer = await client.call_tool("search_services", {"query": "find hotels", "method": "a2x"},
                                            progress_callback=progress)
            return tools, answer

    tools, answer = asyncio.run(scenario())
    assert len(tools) == 5 and "a2x" in tools[0].input_schema["properties"]["method"]["description"]
    assert not answer.is_error, answer.content[0].text
    assert {hit["service_id"] for hit in answer.structured_content["hits"]} <= set(sample_services())
    assert heard and "loading the model" in heard[0]
