"""Parameters as JSON Schema on the server's side (issue 33, item 8): `GET /v1/services/{id}` and MCP `get_service`
give `parameters_schema`, and every search hit, over HTTP and MCP, says whether one exists (`has_schema`; the MCP
text marks it), so an agent can rule a candidate out without another call."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from a2x_local.db import connect
from a2x_local.registry import ingest
from a2x_local.serve.http_api import create_app
from tests.serve.helpers import make_server
from tests.support.paths import DATA

LOOPBACK = "http://127.0.0.1"
TOOLRET = "apigen_tool_1719"                        # a ToolRet parameter map, normalised at read time
TOOLRET_SCHEMA = {"type": "object", "required": [], "properties": {"symbols": {
    "description": "Comma-separated list of stock symbols for which to retrieve real-time quotes.", "type": "string"}}}
MCP_TOOL = "webtools_food/GET_ingredient_information"  # an MCP inputSchema, as it is
SKILL = "skill/pdf"                                    # a skill takes no parameters


@pytest.fixture
def server(db_path):
    with connect(db_path) as con:
        ingest(con, [DATA / "sample" / "toolret_tools.json", DATA / "sample" / "mcp_tools" / "webtools_food.json",
                     DATA / "sample" / "skills"])
    served = make_server(db_path, preload=["bm25"])
    yield served
    served.close()


def _has_schema(hits: list[dict]) -> dict[str, bool]:
    return {hit["service_id"]: hit["has_schema"] for hit in hits}


def test_http_gives_the_schema_of_a_service_and_says_on_each_hit_whether_there_is_one(server) -> None:
    with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
        toolret = client.get(f"/v1/services/{TOOLRET}").json()
        tool = client.get(f"/v1/services/{MCP_TOOL}").json()
        skill = client.get(f"/v1/services/{SKILL}").json()
        stock = client.post("/v1/search", json={"query": "real-time stock quotes", "method": "bm25", "k": 3}).json()
        pdf = client.get("/v1/search", params={"query": "extract text from pdf files", "method": "bm25"}).json()
    assert toolret["parameters_schema"] == TOOLRET_SCHEMA
    assert "inputSchema" in toolret["metadata"]                   # the original, as ingested
    assert tool["parameters_schema"]["properties"]["ingredient_id"]["type"] == "string"
    assert skill.get("parameters_schema") is None
    assert _has_schema(stock["hits"])[TOOLRET] is True
    assert _has_schema(pdf["hits"])[SKILL] is False
    assert all(isinstance(hit["has_schema"], bool) for hit in stock["hits"] + pdf["hits"])


def test_mcp_get_service_gives_the_schema_and_search_hits_say_whether_there_is_one(server) -> None:
    async def session():
        async with Client(server.mcp) as client:
            return (await client.call_tool("get_service", {"service_id": TOOLRET}),
                    await client.call_tool("get_service", {"service_id": SKILL}),
                    await client.call_tool("search_services", {"query": "real-time stock quotes", "method": "bm25",
                                                               "k": 3}),
                    await client.call_tool("search_services", {"query": "extract text from pdf files",
                                                               "method": "bm25", "k": 3}))

    toolret, skill, stock, pdf = asyncio.run(session())
    assert not any(answer.is_error for answer in (toolret, skill, stock, pdf))
    assert toolret.structured_content["parameters_schema"] == TOOLRET_SCHEMA
    assert "Parameters (JSON Schema)" in toolret.content[0].text and '"symbols"' in toolret.content[0].text
    assert skill.structured_content.get("parameters_schema") is None
    assert "Parameters (JSON Schema)" not in skill.content[0].text
    assert _has_schema(stock.structured_content["hits"])[TOOLRET] is True
    assert _has_schema(pdf.structured_content["hits"])[SKILL] is False
    # The text the model reads says it too: "(generic, id apigen_tool_1719, schema)", and no mark on the skill.
    assert f"id {TOOLRET}, schema)" in stock.content[0].text
    skill_line = next(line for line in pdf.content[0].text.splitlines() if f"id {SKILL}" in line)
    assert "schema" not in skill_line
