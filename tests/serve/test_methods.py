"""One source of method facts: every method /v1/methods lists as available answers a search, every other one is
refused with one error code saying why and what would enable it, with and without a model, with and without a
tree; compose is the plan tool, never a step method."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from a2x_local.serve.http_api import create_app
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import sample_tree, store_registry_and_tree
from tests.serve.helpers import decomposing_oracle, make_server, registry_with_trees
from tests.support.registries import make_registry

LOOPBACK = "http://127.0.0.1"


def walk(client: TestClient) -> dict[str, tuple[bool, int, str | None]]:
    """For every listed method: (listed available, search status, error code)."""
    found = {}
    for info in client.get("/v1/methods").json():
        answer = client.post("/v1/search", json={"query": "find hotels", "method": info["name"]})
        found[info["name"]] = (info["available"], answer.status_code,
                               answer.json().get("error") if answer.status_code != 200 else None)
        if not info["available"]:
            assert info["reason"] and answer.json()["message"] in info["reason"]
        assert info["cost"] in ("retrieval", "llm", "llm-heavy") and info["cost_note"]
    return found


@pytest.mark.parametrize("with_model", [False, True], ids=["no-model", "model"])
def test_every_listed_method_runs_and_every_other_says_why(db_path, with_model):
    registry_with_trees(db_path)
    server = make_server(db_path, ScriptedEngine(decomposing_oracle()) if with_model else None)
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            found = walk(client)
            refused = client.post("/v1/search", json={"query": "x", "method": "nope"}).json()
    finally:
        server.close()
    for name, (available, status, code) in found.items():
        if available:
            assert status == 200, (name, code)
        else:
            assert (status, code) == (503, "NoModel"), name
    llm = {"a2x", "a2x+rescue", "full", "select"}
    assert {name for name, (available, _, _) in found.items() if available} == (
        set(found) if with_model else set(found) - llm)
    assert found["compose"][0] is True    # compose runs without a model too (the rule decomposer)
    # The unknown-method hint names only what this server can run.
    offered = set(refused["hint"].removeprefix("choose one of: ").split(", "))
    assert offered == {name for name, (available, _, _) in found.items() if available}


def test_tree_methods_on_a_registry_without_a_tree_say_so(db_path):
    make_registry(db_path)
    server = make_server(db_path, ScriptedEngine(decomposing_oracle()))
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            found = walk(client)
    finally:
        server.close()
    assert found["a2x"] == (False, 503, "NoTree") and found["a2x+rescue"] == (False, 503, "NoTree")
    assert all(status == 200 for name, (available, status, _) in found.items() if available)


def test_compose_is_the_plan_tool_and_never_a_step_method(db_path):
    store_registry_and_tree(db_path, sample_tree())
    server = make_server(db_path, ScriptedEngine(decomposing_oracle()))

    async def scenario():
        async with Client(server.mcp) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    try:
        tools = asyncio.run(scenario())
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            methods = {m["name"]: m for m in client.get("/v1/methods").json()}
            step = client.post("/v1/compose", json={"request": "find hotels, then stock prices", "method": "compose"})
    finally:
        server.close()
    assert methods["compose"]["use"] == "plan" and methods["a2x"]["use"] == "search"
    search = tools["search_services"]
    listed = search.input_schema["properties"]["method"]["description"]
    assert "compose_plan" in search.description
    assert "full: one very long LLM prompt" in listed                 # the cost class, from the spec
    assert "compose: the services of a multi-step plan as one ranking (compose_plan gives the plan)" in listed
    plan_methods = tools["compose_plan"].input_schema["properties"]["method"]
    assert "compose" not in json.dumps(plan_methods)
    assert step.status_code == 400 and step.json()["error"] == "UnknownMethod"
    assert "compose" not in step.json()["hint"].removeprefix("pick a step method: ").split(", ")
