"""The server with a real engine: the tiny random model through vLLM answers concurrent a2x searches over HTTP,
their model calls share engine rounds, and every answer parses. (The answers are nonsense: only their flow and
shape are asserted.)"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

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
            return client.post("/v1/search", json={"query": query, "method": "a2x", "mode": "get_all"})

        with ThreadPoolExecutor(max_workers=8) as pool:
            responses = list(pool.map(search, queries))
        metrics = client.get("/metrics").text
    server.close()
    known = set(sample_services())
    for response in responses:
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["tree"] == active and answer["calls"] >= 1 and answer["prompt_tokens"] > 0
        assert {hit["service_id"] for hit in answer["hits"]} <= known
    rounds = float(re.search(r"^a2x_engine_batch_size_count (\S+)$", metrics, re.M).group(1))
    prompts = float(re.search(r"^a2x_engine_batch_size_sum (\S+)$", metrics, re.M).group(1))
    calls = sum(response.json()["calls"] for response in responses)
    assert prompts >= 8 and rounds < prompts, "the searches' model calls never shared an engine round"
    assert calls >= prompts  # retries are counted per search too
