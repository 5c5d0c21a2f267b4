"""What an agent pays for the server, over stdio with the official SDK client on the sample registry (data/sample):
the tool list fits in 6,000 characters, a k=10 search answer in 2,000 characters of text, and browsing the root
pages its services 20 at a time. (How fast it starts is measured by scripts/bench_serve_start.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client

from a2x_local.db import connect
from a2x_local.registry import Registry, ingest
from tests.search.a2x_helpers import make_tree
from tests.serve.helpers import ROOT, stdio_server, store_tree

TOOLS_LIST_MAX_CHARS = 6000
SEARCH_TEXT_MAX_CHARS = 2000


def sample_registry(db_path: Path) -> None:
    """The sample registry, with a tree filing each type of service in its own category and the ToolRet tools
    (type generic) at the root, as a build files services that fit no category."""
    with connect(db_path) as con:
        ingest(con, [ROOT / "data" / "sample"])
        services = Registry(con).all()
    kinds = sorted({s.type for s in services} - {"generic"})
    shape = {"root": ("All services", [s.id for s in services if s.type == "generic"])}
    for number, kind in enumerate(kinds, start=1):
        shape[f"root/{number}"] = (kind.replace("_", " ").title(), [s.id for s in services if s.type == kind])
    store_tree(db_path, make_tree(shape), activate=True)


def test_the_tool_list_a_search_and_a_browse_fit_an_agents_budget(db_path, tmp_path):
    sample_registry(db_path)
    params = stdio_server(db_path, tmp_path / "home")

    async def scenario():
        async with Client(params, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            search = await client.call_tool("search_services", {"query": "convert 100 USD to EUR", "k": 10})
            first = await client.call_tool("browse_category", {"node_id": "root", "limit": 20})
            second = await client.call_tool("browse_category", {
                "node_id": "root", "limit": 20, "cursor": first.structured_content["next_cursor"]})
            return tools, search, first, second

    tools, search, first, second = asyncio.run(scenario())
    listed = tools.model_dump_json(by_alias=True, exclude_none=True)
    assert len(listed) <= TOOLS_LIST_MAX_CHARS, len(listed)
    text = search.content[0].text
    assert not search.is_error and len(search.structured_content["hits"]) == 10
    assert len(text) <= SEARCH_TEXT_MAX_CHARS, (len(text), text)
    page1 = [s["id"] for s in first.structured_content["services"]]
    page2 = [s["id"] for s in second.structured_content["services"]]
    assert len(page1) == 20 and len(page2) == 20 and not set(page1) & set(page2)
    assert first.structured_content["services_total"] > 40 and second.structured_content["next_cursor"]
