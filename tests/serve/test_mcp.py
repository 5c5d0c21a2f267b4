"""MCP with the official SDK's client: in-process, over stdio (a subprocess running `a2x-local serve --stdio`) and
over streamable HTTP (a real `a2x-local serve` process, with a bearer token). Answers are lean: compact text for
the model, the structured content beside it, no output schemas, every list paged."""

from __future__ import annotations

import asyncio
import json

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree
from tests.serve.helpers import (
    WANTED,
    make_server,
    registry_with_trees,
    running_server,
    stdio_server,
)

TOOLS = {"browse_category", "compose_plan", "get_service", "list_services", "search_services"}


def run(coroutine):
    return asyncio.run(coroutine)


async def exercise(client: Client) -> dict:
    """List the tools and call each one; what came back."""
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    search = await client.call_tool("search_services", {"query": "the h1 thing", "k": 3})
    browse = await client.call_tool("browse_category", {"node_id": "root/1"})
    service = await client.call_tool("get_service", {"service_id": "f1"})
    missing = await client.call_tool("get_service", {"service_id": "nope"})
    listed = await client.call_tool("list_services", {"limit": 4})
    return {"tools": tools, "search": search, "browse": browse, "service": service, "missing": missing,
            "listed": listed}


def check_answers(found: dict) -> None:
    assert set(found["tools"]) == TOOLS
    for tool in found["tools"].values():
        assert len(tool.description) > 80 and tool.annotations.read_only_hint is True
        assert tool.output_schema is None
    search = found["search"]
    hits = search.structured_content["hits"]
    assert not search.is_error and search.structured_content["ranked"] is True and len(hits) == 3
    assert hits[0]["service_id"] == "h1" and set(hits[0]) >= {"name", "type", "summary", "score", "path"}
    text = search.content[0].text
    assert text.startswith("3 hits for") and "tool_h1" in text and "{" not in text   # not the JSON again
    assert "More: cursor=" in text and search.structured_content["next_cursor"]
    browse = found["browse"].structured_content
    assert browse["name"] == "Travel" and [c["name"] for c in browse["children"]] == ["Flights", "Hotels"]
    assert "Flights (id root/1/1)" in found["browse"].content[0].text
    service = found["service"].structured_content
    assert service["id"] == "f1" and len(service["categories"]) == 2
    assert "Filed under: Travel › Flights; Finance › Stocks" in found["service"].content[0].text
    missing = found["missing"]
    assert missing.is_error and missing.content[0].text.startswith("NoSuchService: no service with id 'nope'")
    listed = found["listed"].structured_content
    assert len(listed["services"]) == 4 and listed["total"] > 4 and listed["next_cursor"]


def test_in_process_tools_resources_and_the_a2x_method(db_path):
    active, _ = registry_with_trees(db_path)
    server = make_server(db_path, ScriptedEngine(Oracle(sample_tree(), WANTED)), max_query_chars=100)

    async def scenario():
        async with Client(server.mcp) as client:
            found = await exercise(client)
            a2x = await client.call_tool("search_services", {"query": "find hotels", "method": "a2x"})
            too_long = await client.call_tool("search_services", {"query": "x" * 101})
            empty = await client.call_tool("search_services", {"query": "  "})
            bad_k = await client.call_tool("search_services", {"query": "x", "k": 0})
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            tree = await client.read_resource("a2x://tree")
            node = await client.read_resource("a2x://tree/nodes/root/3/2")
            return found, a2x, (too_long, empty, bad_k), resources, tree, node

    try:
        found, a2x, refused, resources, tree, node = run(scenario())
    finally:
        server.close()
    check_answers(found)
    schema = found["tools"]["search_services"].input_schema["properties"]["query"]
    assert schema.get("maxLength") == 100
    answer = a2x.structured_content
    assert answer["tree"] == active and sorted(hit["service_id"] for hit in answer["hits"]) == ["h1", "h2"]
    assert "chosen by the model" in a2x.content[0].text and "[Travel › Hotels]" in a2x.content[0].text
    # Limits come back in the server's own words (code: message (hint: ...)), never as a validation dump.
    for result, code in zip(refused, ("QueryTooLong", "EmptyQuery", "BadK"), strict=True):
        text = result.content[0].text
        assert result.is_error and text.startswith(f"{code}: ") and "hint:" in text and "pydantic" not in text
    assert "a2x://tree" in resources
    assert json.loads(tree.contents[0].text)["build_id"] == active
    assert json.loads(node.contents[0].text)["name"] == "Stocks"


def test_over_stdio_from_a_subprocess(db_path, tmp_path):
    registry_with_trees(db_path)
    params = stdio_server(db_path, tmp_path / "home")

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
        # The SDK shows the server's refusal in its own words: what to send.
        with pytest.raises(BaseException) as refused:
            run(scenario("wrong"))
        assert "Unauthorized: the bearer token sent is not this server's" in repr(innermost(refused.value))
        for headers, says in (({"Authorization": "Bearer wrong"}, "not this server's"), ({}, "sent none")):
            raw = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
            body = raw.json()["error"]["data"]
            assert raw.status_code == 401 and body["error"] == "Unauthorized" and says in body["message"]
            assert "Authorization: Bearer TOKEN" in body["hint"] and raw.headers["www-authenticate"].startswith(
                'Bearer realm="a2x-local"')
        api = httpx.get(f"{url}/v1/tree")
        assert api.status_code == 401 and api.json()["error"] == "Unauthorized"


def innermost(error: BaseException) -> BaseException:
    """The first error inside (nested) exception groups: what the SDK raised."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
