"""A changed gateway file or registry reaches a stdio client at once, with the official MCP SDK client against
`a2x-local serve --stdio`: the client's profile is found again for every request (a narrowed profile refuses the
next call, a revoked token every request but the handshake, audited), and a tool that stops standing (removed from
the registry, or no longer allowed) leaves tools/list with notifications/tools/list_changed sent unasked."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ToolListChangedNotification

from a2x_local.db import connect, transaction
from a2x_local.gateway import AuditFilter, query_audit
from a2x_local.registry import Registry
from tests.gateway.helpers import stdio_server, tool, unique, wait_until_gone
from tests.serve.helpers import registry_with_trees, server_env
from tests.serve.helpers import stdio_server as serve_stdio_params

OPS = "ops-token-for-the-reload-test"
ECHO = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ADD = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
HEARD_WAIT_S = 60     # the server checks every second; a loaded machine may take a while to get to it


def _file(server: str, call: str, token: str = '{ env = "OPS_TOKEN" }') -> str:
    return stdio_server(server) + f'[profiles.ops]\ntokens = [{token}]\ncall = [{call}]\n'


async def _heard_more(heard: list, than: int) -> bool:
    deadline = time.monotonic() + HEARD_WAIT_S
    while len(heard) <= than and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return len(heard) > than


def test_a_stdio_client_follows_the_gateway_file_and_the_registry(db_path, tmp_path):
    registry_with_trees(db_path)
    name = unique("reload")
    with connect(db_path) as con, transaction(con):
        Registry(con).insert([tool(name, "echo", ECHO), tool(name, "add", ADD)])
    gateway = tmp_path / "gateway.toml"
    gateway.write_text(_file(name, f'"{name}/*"'), encoding="utf-8")
    home = tmp_path / "home"
    env = server_env(home) | {"OPS_TOKEN": OPS, "A2X_CLIENT_TOKEN": OPS}
    params = serve_stdio_params(db_path, home, "--gateway", str(gateway), env=env)
    heard: list = []

    async def on_message(message):
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async def tool_names(client) -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    async def scenario() -> dict:
        seen: dict = {}
        async with Client(params, mode="legacy", read_timeout_seconds=180, message_handler=on_message) as client:
            seen["first"] = await client.call_tool("call_service", {"service_id": f"{name}/echo",
                                                                    "arguments": {"text": "one"}})
            await client.call_tool("activate_services", {"service_ids": [f"{name}/echo", f"{name}/add"]})
            seen["activated"] = await _heard_more(heard, 0) and await tool_names(client)
            with connect(db_path) as con, transaction(con):      # the tool leaves the registry
                Registry(con).remove([f"{name}/add"])
            count = len(heard)
            seen["removal_heard"] = await _heard_more(heard, count)
            seen["after_removal"] = await tool_names(client)
            seen["removed_call"] = await client.call_tool("add", {"a": 1, "b": 2})    # by its old name
            gateway.write_text(_file(name, f'"{name}/add", "{name}/nothing-else"'), encoding="utf-8")   # narrowed
            count = len(heard)
            seen["narrowed_heard"] = await _heard_more(heard, count)
            seen["after_narrowing"] = await tool_names(client)
            seen["narrowed_call"] = await client.call_tool("call_service", {"service_id": f"{name}/echo",
                                                                            "arguments": {"text": "two"}})
            other = hashlib.sha256(b"another client's token").hexdigest()
            gateway.write_text(_file(name, f'"{name}/*"', f'{{ sha256 = "{other}" }}'), encoding="utf-8")   # revoked
            with pytest.raises(MCPError) as revoked_call:
                await client.call_tool("call_service", {"service_id": f"{name}/echo", "arguments": {"text": "3"}})
            seen["revoked_call"] = revoked_call.value
            with pytest.raises(MCPError) as revoked_list:
                await client.list_tools()
            seen["revoked_list"] = revoked_list.value
        return seen

    seen = asyncio.run(scenario())
    assert not seen["first"].is_error and seen["first"].content[0].text == f"{name}: one"
    assert seen["activated"] and {"echo", "add"} <= seen["activated"]
    assert seen["removal_heard"], "no list_changed after the registry dropped an activated tool"
    assert "add" not in seen["after_removal"] and "echo" in seen["after_removal"]
    gone = seen["removed_call"]      # still a clear error naming the server, not the SDK's "Unknown tool"
    assert gone.is_error and gone.content[0].text.startswith("NoSuchService: ") and f"server '{name}'" in \
        gone.content[0].text
    assert seen["narrowed_heard"], "no list_changed after the gateway file dropped an activated tool"
    assert "echo" not in seen["after_narrowing"]
    narrowed = seen["narrowed_call"]
    assert narrowed.is_error and narrowed.content[0].text.startswith("NotCallable: ") and "profile 'ops'" in \
        narrowed.content[0].text
    for refused in (seen["revoked_call"], seen["revoked_list"]):
        assert refused.error.message.startswith("Unauthorized: the token in $A2X_CLIENT_TOKEN is no longer bound")
    assert wait_until_gone(name) == []
    with connect(db_path, mode="read") as con:
        rows = query_audit(con, AuditFilter(service=f"{name}/echo"), db_path)
    outcomes = [(row["profile"], row["outcome"]) for row in rows]
    assert ("ops", "ok") in outcomes and ("ops", "denied") in outcomes
    revoked = [row for row in rows if row["profile"] == "(none)"]
    assert revoked and revoked[0]["outcome"] == "denied" and revoked[0]["via"] == "call_service"
    assert revoked[0]["error"].startswith("Unauthorized: ") and revoked[0]["arguments_preview"] is None
