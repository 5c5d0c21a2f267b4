"""MCP with the official SDK's client: in-process, over stdio (a subprocess running `a2x-local serve --stdio`) and
over streamable HTTP (a real `a2x-local serve` process, with a bearer token)."""

from __future__ import annotations

import asyncio
import json

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree
from tests.serve.helpers import (
    ROOT,
    WANTED,
    cli_command,
    make_server,
    registry_with_trees,
    running_server,
    server_env,
)

TOOLS = {"browse_category", "compose_plan", "get_service", "search_services"}


def run(coroutine):
    return asyncio.run(coroutine)


async def exercise(client: Client) -> dict:
    """List the tools and call each one; what came back."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    search = await client.call_tool("search_services", {"query": "the h1 thing", "k": 3})
    browse = await client.call_tool("browse_category", {"node_id": "root/1"})
    service = await client.call_tool("get_service", {"service_id": "f1"})
    missing = await client.call_tool("get_service", {"service_id": "nope"})
    return {"tools": tools, "search": search, "browse": browse, "service": service, "missing": missing}


def check_answers(found: dict) -> None:
    assert set(found["tools"]) == TOOLS
    for tool in found["tools"].values():
        assert len(tool.description) > 150 and tool.annotations.read_only_hint is True and tool.output_schema
    search = found["search"].structured_content
    assert not found["search"].is_error and search["ranked"] is True and 1 <= len(search["hits"]) <= 3
    browse = found["browse"].structured_content
    assert browse["name"] == "Travel" and [c["name"] for c in browse["children"]] == ["Flights", "Hotels"]
    service = found["service"].structured_content
    assert service["id"] == "f1" and len(service["categories"]) == 2
    assert found["missing"].is_error and "no service with id 'nope'" in found["missing"].content[0].text


def test_in_process_tools_resources_and_the_a2x_method(db_path):
    active, _ = registry_with_trees(db_path)
    server = make_server(db_path, ScriptedEngine(Oracle(sample_tree(), WANTED)), max_query_chars=100)

    async def scenario():
        async with Client(server.mcp) as client:
            found = await exercise(client)
            a2x = await client.call_tool("search_services", {"query": "find hotels", "method": "a2x"})
            too_long = await client.call_tool("search_services", {"query": "x" * 101})
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            tree = await client.read_resource("a2x://tree")
            node = await client.read_resource("a2x://tree/nodes/root/3/2")
            return found, a2x, too_long, resources, tree, node

    try:
        found, a2x, too_long, resources, tree, node = run(scenario())
    finally:
        server.close()
    check_answers(found)
    schema = found["tools"]["search_services"].input_schema["properties"]["query"]
    assert schema.get("maxLength") == 100 or any(part.get("maxLength") == 100 for part in schema.get("anyOf", []))
    answer = a2x.structured_content
    assert answer["tree"] == active and sorted(hit["service_id"] for hit in answer["hits"]) == ["h1", "h2"]
    assert too_long.is_error
    assert "a2x://tree" in resources
    assert json.loads(tree.contents[0].text)["build_id"] == active
    assert json.loads(node.contents[0].text)["name"] == "Stocks"


def test_over_stdio_from_a_subprocess(db_path, tmp_path):
    registry_with_trees(db_path)
    command, *args = cli_command("serve", "--stdio", "--db", str(db_path))
    params = StdioServerParameters(command=command, args=args, env=server_env(tmp_path / "home"), cwd=str(ROOT))

    async def scenario():
        async with Client(params, read_timeout_seconds=120) as client:
            return await exercise(client)

    check_answers(run(scenario()))


def test_over_streamable_http_with_a_token(db_path, tmp_path):
    registry_with_trees(db_path)
    with running_server(db_path, tmp_path / "home", "--token", "s3cret") as url:

        async def scenario(token: str | None):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
            async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                return await exercise(client)

        check_answers(run(scenario("s3cret")))
        with pytest.raises(Exception):  # noqa: B017  (the SDK reports the refusal in its own error types)
            run(scenario("wrong"))
        raw = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Authorization": "Bearer wrong"})
        assert raw.status_code == 401 and raw.json()["error"] == "Unauthorized"
