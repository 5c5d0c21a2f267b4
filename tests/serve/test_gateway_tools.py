"""The gateway's MCP tools in-process (the SDK's client on the server object): call_service with progress, and the
dynamic mode's rules: names never shadow the server's own tools, a cap per client, deactivation, and a tool removed
from the registry mid-session leaving tools/list and answering with its server named."""

from __future__ import annotations

import asyncio

from mcp import Client

from a2x_local.components import register_components
from a2x_local.db import connect
from a2x_local.registry import Registry
from a2x_local.serve.server import build_server
from a2x_local.settings import load_settings
from tests.gateway.helpers import stdio_server, tool, unique, wait_until_gone
from tests.serve.helpers import registry_with_trees, serve_config

ECHO = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def test_call_service_and_the_dynamic_mode_in_process(db_path, tmp_path):
    registry_with_trees(db_path)
    name = unique("inproc")
    tools = [tool(name, "echo", ECHO), tool(name, "count_steps"), tool(name, "add"),
             tool(name, "search_services")]     # a tool named like one of the server's own
    with connect(db_path) as con:
        Registry(con).insert(tools)
    gateway = tmp_path / "gateway.toml"
    gateway.write_text(stdio_server(name) + '[profiles.default]\ncall = ["*"]\n', encoding="utf-8")
    settings = load_settings(db=db_path).with_overrides("gateway", max_activated=2)
    register_components()
    server = build_server(settings, serve_config(), gateway_file=gateway)
    server.start_loading()
    assert server.state.wait_ready(120)
    heard = []

    async def progress(value, total, message):
        heard.append(message)

    async def scenario():
        async with Client(server.mcp) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            called = await client.call_tool("call_service", {"service_id": f"{name}/count_steps",
                                                             "arguments": {"steps": 2}}, progress_callback=progress)
            activated = await client.call_tool("activate_services", {"service_ids": [
                f"{name}/echo", f"{name}/search_services", f"{name}/count_steps", f"{name}/add"]})
            with_two = {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("echo", {"text": "hi"})
            watcher = asyncio.ensure_future(server.calling.watch(every_s=0.2))   # as the HTTP app's start runs it
            async with client.listen(tools_list_changed=True) as subscription:
                with connect(db_path) as con:       # the tool leaves the registry while it is active
                    Registry(con).remove([f"{name}/echo"])
                # ... and the listen stream hears it unasked
                event = await asyncio.wait_for(anext(aiter(subscription)), 60)
            watcher.cancel()
            after_removal = {t.name for t in (await client.list_tools()).tools}
            gone = await client.call_tool("echo", {"text": "hi"})
            removed = await client.call_tool("deactivate_services", {"names": ["count_steps", "nothing"]})
            last = {t.name for t in (await client.list_tools()).tools}
            return listed, called, activated, with_two, echoed, after_removal, gone, removed, last, event

    try:
        listed, called, activated, with_two, echoed, after_removal, gone, removed, last, event = asyncio.run(
            scenario())
    finally:
        server.close()
    assert {"call_service", "activate_services", "deactivate_services", "search_services"} <= listed
    assert called.content[0].text == "counted 2" and heard == ["step 1 of 2", "step 2 of 2"]
    outcome = activated.structured_content
    assert outcome["activated"] == {f"{name}/echo": "echo", f"{name}/count_steps": "count_steps"}
    assert outcome["refused"][f"{name}/search_services"].startswith("NameTaken: its name 'search_services'")
    assert outcome["refused"][f"{name}/add"].startswith("TooManyActive: 2 tools are active already")
    assert {"echo", "count_steps"} <= with_two and echoed.content[0].text == f"{name}: hi"
    assert event is not None and "echo" not in after_removal and "count_steps" in after_removal
    assert gone.is_error and gone.content[0].text.startswith("NoSuchService: ") and f"server '{name}'" in \
        gone.content[0].text
    assert removed.structured_content["removed"] == ["count_steps"] and "count_steps" not in last
    assert wait_until_gone(name) == []
