"""Plans through the server: `POST /v1/compose` and the MCP tool `compose_plan`, with and without a model."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient
from mcp import Client

from a2x_local.serve.http_api import create_app
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree
from tests.serve.helpers import WANTED, decomposing_oracle, make_server, registry_with_trees

LOOPBACK = "http://127.0.0.1"
TWO_NEEDS = "the h1 thing, then the s2 thing"        # words the sample services' texts hold (bm25)
TREE_NEEDS = "find hotels, then stock prices"        # the oracle's queries (a2x)


def test_without_a_model_the_rules_split_and_each_step_is_searched(db_path) -> None:
    registry_with_trees(db_path)
    server = make_server(db_path)
    try:
        with TestClient(create_app(server.discovery, planning=server.planning), base_url=LOOPBACK) as client:
            plan = client.post("/v1/compose", json={"request": TWO_NEEDS, "method": "bm25", "k": 3}).json()
            assert plan["decomposer"] == "rule" and plan["method"] == "bm25"
            assert [step["task"] for step in plan["steps"]] == ["the h1 thing", "the s2 thing"]   # no connector
            assert [step["query"] for step in plan["steps"]] == ["the h1 thing", "the s2 thing"]
            assert [step["choice"]["id"] for step in plan["steps"]] == ["h1", "s2"]
            assert all(len(step["alternatives"]) <= 2 for step in plan["steps"])
            assert plan["services"] == [step["choice"]["id"] for step in plan["steps"]]
            assert plan["groups"] and plan["calls"] == 0
            for step in plan["steps"]:          # every step says how sure it is, for an agent to ask its user
                assert 0.0 <= step["confidence"] <= 1.0 and isinstance(step["low_confidence"], bool)
            refused = client.post("/v1/compose", json={"request": TWO_NEEDS, "method": "a2x"})
            assert refused.status_code == 503 and refused.json()["error"] == "NoModel"
            for body, code in (({"request": "  "}, "EmptyQuery"), ({"request": TWO_NEEDS, "k": 0}, "BadK"),
                               ({"request": TWO_NEEDS, "method": "compose"}, "UnknownMethod")):
                answer = client.post("/v1/compose", json=body)
                assert answer.status_code == 400 and answer.json()["error"] == code
            metrics = client.get("/metrics").text
            assert 'a2x_searches_total{method="compose",outcome="ok"} 1.0' in metrics
    finally:
        server.close()


def test_with_a_model_the_plan_decomposes_and_searches_the_tree(db_path) -> None:
    registry_with_trees(db_path)
    engine = ScriptedEngine(decomposing_oracle(Oracle(sample_tree(), WANTED)))
    server = make_server(db_path, engine)
    try:
        with TestClient(create_app(server.discovery, planning=server.planning), base_url=LOOPBACK) as client:
            plan = client.post("/v1/compose", json={"request": TREE_NEEDS, "method": "a2x", "sad": False}).json()
    finally:
        server.close()
    assert plan["decomposer"].startswith("model:") and len(plan["steps"]) == 2
    chosen = [step["choice"]["id"] for step in plan["steps"]]
    assert chosen[0] in WANTED["find hotels"] and chosen[1] in WANTED["stock prices"]
    assert plan["calls"] > 0 and plan["prompt_tokens"] > 0
    assert set(engine.usage.by_label) >= {"decompose", "descend"}


def test_the_mcp_tool_lists_and_plans(db_path) -> None:
    registry_with_trees(db_path)
    server = make_server(db_path)

    async def scenario():
        async with Client(server.mcp) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            answer = await client.call_tool("compose_plan", {"request": TWO_NEEDS, "method": "bm25"})
            empty = await client.call_tool("compose_plan", {"request": TWO_NEEDS, "method": "compose"})
            return tools, answer, empty

    try:
        tools, answer, empty = asyncio.run(scenario())
    finally:
        server.close()
    tool = tools["compose_plan"]
    assert tool.annotations.read_only_hint is True and "several services" in tool.description
    plan = answer.structured_content
    assert not answer.is_error and len(plan["steps"]) == 2 and plan["decomposer"] == "rule"
    # Brief: each step's task, choice and alternatives (ids, names, scores), not the scoring signals or the cost.
    assert [step["choice"]["id"] for step in plan["steps"]] == ["h1", "s2"]
    assert "signals" not in plan["steps"][0]["choice"] and "calls" not in plan and "sad" not in plan
    text = answer.content[0].text
    assert text.startswith("Plan for ") and "s1 (group 1): the h1 thing -> tool_h1 (id h1)" in text
    assert empty.is_error and empty.content[0].text.startswith("UnknownMethod: compose makes the plan")
    assert all(isinstance(step["low_confidence"], bool) and step["confidence"] is not None for step in plan["steps"])
    assert "low_confidence" in tool.description
