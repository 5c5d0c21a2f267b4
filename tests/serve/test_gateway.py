"""Issue 34's whole loop with the official SDK client against `a2x-local serve` on the sample registry, with two
local MCP servers (one stdio, one streamable HTTP) and a real third-party one from the package index
(`mcp-server-time`): `a2x-local gateway check` registers their tools, a search finds a tool, `call_service` returns
its result, the dynamic mode lists the tool after notifications/tools/list_changed, a denied tool is neither listed
nor callable, every call has its audit row (`a2x-local audit`), and no server process outlives `serve`."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ToolListChangedNotification

from a2x_local.db import connect
from a2x_local.registry import ingest
from tests.gateway.helpers import http_test_server, stdio_server, unique, wait_until_gone
from tests.serve.helpers import running_server, server_env
from tests.serve.helpers import stdio_server as serve_stdio_params
from tests.support.processes import cli_command

ROOT = Path(__file__).resolve().parents[2]
OPS_TOKEN = "ops-token-for-the-test"
TIME_SERVER = shutil.which("mcp-server-time", path=str(Path(__import__("sys").executable).parent))


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture(scope="module")
def gateway_home(tmp_path_factory):
    """The sample registry, a gateway file over the three servers with an `ops` profile, and the tools
    registered by `a2x-local gateway check` (a real command)."""
    assert TIME_SERVER, "mcp-server-time is not installed (requirements.txt pins it)"
    home = tmp_path_factory.mktemp("home")
    db = home / "registry.duckdb"
    with connect(db) as con:
        ingest(con, [ROOT / "data" / "sample"])
    marker = unique("e2e")
    local, web = f"{marker}-local", f"{marker}-web"
    with http_test_server(web) as url:
        gateway = home / "gateway.toml"
        # Long start limits: on a machine under heavy load a Python server takes many seconds to import the SDK.
        gateway.write_text(stdio_server(local) + f'[servers."{web}"]\nurl = "{url}"\nstart_timeout_s = 120\n'
                           'call_timeout_s = 4\n'
                           f'[servers.time]\ncommand = "{TIME_SERVER}"\nargs = ["--local-timezone", "UTC"]\n'
                           'start_timeout_s = 120\n'
                           '[profiles.ops]\ntokens = [{ env = "OPS_TOKEN" }]\n'
                           f'call = ["{local}/*", "{web}/*", "time/*"]\ndeny = ["{local}/die", "time/convert_time"]\n'
                           f'descriptions = {{ "{local}/add" = "Adds two whole numbers (the owner\'s words)." }}\n',
                           encoding="utf-8")
        env = server_env(home) | {"OPS_TOKEN": OPS_TOKEN}
        checked = subprocess.run(cli_command("gateway", "check", "--gateway", str(gateway), "--db", str(db),
                                             "--json"), env=env, cwd=ROOT, capture_output=True, text=True,
                                 timeout=600)
        assert checked.returncode == 0, checked.stderr
        yield {"home": home, "db": db, "gateway": gateway, "local": local, "web": web, "marker": marker,
               "env": env, "check": json.loads(checked.stdout)}
    assert wait_until_gone(marker) == []


def test_gateway_check_registered_every_tool_under_its_server(gateway_home):
    found = {server["server"]: server for server in gateway_home["check"]["servers"]}
    local, web = gateway_home["local"], gateway_home["web"]
    assert all(server["ok"] for server in found.values()), found
    assert set(found["time"]["tools"]) == {"time/get_current_time", "time/convert_time"}
    assert f"{local}/echo" in found[local]["added"] and f"{web}/add" in found[web]["tools"]
    with connect(gateway_home["db"], mode="read") as con:
        row = con.execute("SELECT type, metadata FROM services WHERE id = 'time/get_current_time'").fetchone()
    assert row[0] == "mcp_tool" and json.loads(row[1])["inputSchema"]["required"] == ["timezone"]


async def _over_http(url: str, token: str | None, local: str, web: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120))
    seen: dict = {}
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        seen["tools_before"] = {tool.name for tool in (await client.list_tools()).tools}
        search = await client.call_tool("search_services", {"query": "current time in a timezone", "k": 5,
                                                            "type": "mcp_tool"})
        seen["hits"] = [hit["service_id"] for hit in search.structured_content["hits"]]
        denied_search = await client.call_tool("search_services", {"query": "convert time between timezones",
                                                                   "k": 20, "type": "mcp_tool"})
        seen["convert_hits"] = [hit["service_id"] for hit in denied_search.structured_content["hits"]]
        seen["time"] = await client.call_tool("call_service", {"service_id": "time/get_current_time",
                                                               "arguments": {"timezone": "Asia/Tokyo"}})
        seen["denied_call"] = await client.call_tool("call_service", {"service_id": "time/convert_time",
                                                                      "arguments": {}})
        seen["bad_args"] = await client.call_tool("call_service", {"service_id": "time/get_current_time",
                                                                   "arguments": {"zone": "UTC"}})
        seen["described"] = await client.call_tool("get_service", {"service_id": f"{local}/add"})
        # The streamable-HTTP server through serve: a result, arguments that break its schema, a hanging tool.
        seen["web"] = await client.call_tool("call_service", {"service_id": f"{web}/add",
                                                              "arguments": {"a": 2, "b": 3}})
        seen["web_bad"] = await client.call_tool("call_service", {"service_id": f"{web}/add",
                                                                  "arguments": {"a": "two", "b": 3}})
        if token:
            seen["web_hang"] = await client.call_tool("call_service", {"service_id": f"{web}/hang",
                                                                       "arguments": {}})
            seen["web_after"] = await client.call_tool("call_service", {"service_id": f"{web}/echo",
                                                                        "arguments": {"text": "still"}})
        if token:
            async with client.listen(tools_list_changed=True) as subscription:
                seen["activate"] = await client.call_tool("activate_services", {
                    "service_ids": [f"{local}/add", "time/convert_time", f"{local}/die"]})
                seen["event"] = await asyncio.wait_for(anext(aiter(subscription)), 30)
            seen["tools_after"] = {tool.name: tool for tool in (await client.list_tools()).tools}
            seen["native"] = await client.call_tool("add", {"a": 20, "b": 22})
            await client.call_tool("deactivate_services", {"names": ["add"]})
            seen["tools_last"] = {tool.name for tool in (await client.list_tools()).tools}
    return seen


def test_over_http_search_call_activate_and_deny(gateway_home, monkeypatch):
    local, web = gateway_home["local"], gateway_home["web"]
    monkeypatch.setenv("OPS_TOKEN", OPS_TOKEN)      # the server reads the profile's token from its environment
    with running_server(gateway_home["db"], gateway_home["home"], "--gateway", str(gateway_home["gateway"]),
                        startup_s=180) as url:
        ops = run(_over_http(url, OPS_TOKEN, local, web))
        anonymous = run(_over_http(url, None, local, web))
        raw = httpx.post(f"{url}/v1/services/time/get_current_time/call", json={"arguments": {"timezone": "UTC"}},
                         headers={"Authorization": f"Bearer {OPS_TOKEN}"}, timeout=120)
        wrong = httpx.post(f"{url}/v1/services/time/get_current_time/call", json={"arguments": {}},
                           headers={"Authorization": "Bearer not-a-token"}, timeout=60)
        bearer = {"Authorization": f"Bearer {OPS_TOKEN}"}
        huge = httpx.post(f"{url}/v1/services/time/get_current_time/call", headers=bearer, timeout=60,
                          json={"arguments": {"timezone": "x" * 100_000}})
        shapeless = httpx.post(f"{url}/v1/services/time/get_current_time/call", headers=bearer, timeout=60,
                               json={"arguments": {}, "also": 1})
        # A client that hangs up cancels its call on the server (the tool writes the marker when cancelled).
        marker = gateway_home["home"] / "hung-up.txt"
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}/v1/services/{local}/hang_marked/call", headers=bearer, timeout=3,
                       json={"arguments": {"path": str(marker)}})
        for _ in range(200):
            if marker.exists():
                break
            time.sleep(0.1)
        hung_up = marker.read_text() if marker.exists() else None    # while serve runs (its stop cancels too)
        health = httpx.get(f"{url}/healthz", timeout=30).json()
    assert "call_service" in ops["tools_before"] and "activate_services" in ops["tools_before"]
    assert "time/get_current_time" in ops["hits"]                               # a search finds the tool
    assert "time/convert_time" not in ops["convert_hits"]                        # denied: not listed ...
    assert "time/convert_time" in anonymous["convert_hits"]                      # (the default profile sees it)
    answer = ops["time"]
    assert not answer.is_error and answer.structured_content["timezone"] == "Asia/Tokyo"
    assert ops["denied_call"].is_error and ops["denied_call"].content[0].text.startswith("NotCallable: ")
    assert ops["bad_args"].is_error and "BadArguments: arguments for tool 'get_current_time' of server 'time'" in \
        ops["bad_args"].content[0].text
    assert ops["described"].structured_content["description"] == "Adds two whole numbers (the owner's words)."
    activated = ops["activate"].structured_content
    assert activated["activated"] == {f"{local}/add": "add"} and set(activated["refused"]) == {
        "time/convert_time", f"{local}/die"}                                     # ... nor callable
    assert ops["event"] is not None                                              # list_changed came
    assert "add" in ops["tools_after"] and "convert_time" not in ops["tools_after"]
    assert ops["tools_after"]["add"].description == "Adds two whole numbers (the owner's words)."
    assert ops["native"].structured_content == {"result": 42}
    assert "add" not in ops["tools_last"]
    # The default profile (no token) sees everything and calls nothing.
    assert anonymous["time"].is_error and "profile 'default'" in anonymous["time"].content[0].text
    assert raw.status_code == 200 and raw.json()["structuredContent"]["timezone"] == "UTC"
    assert wrong.status_code == 401 and wrong.json()["error"] == "Unauthorized"
    assert huge.status_code == 413 and shapeless.status_code == 422
    assert hung_up == "cancelled", "the hung-up HTTP call was not cancelled on the server"
    assert not ops["web"].is_error and ops["web"].structured_content == {"result": 5}
    assert ops["web_bad"].is_error and ops["web_bad"].content[0].text.startswith(
        f"BadArguments: arguments for tool 'add' of server '{web}' break its inputSchema: arguments.a: 'two'")
    assert ops["web_hang"].is_error and ops["web_hang"].content[0].text.startswith(
        f"ServerTimeout: server '{web}': tool 'hang' did not answer within 4 s")
    assert not ops["web_after"].is_error and ops["web_after"].content[0].text == f"{web}: still"
    assert anonymous["web"].is_error and anonymous["web"].content[0].text.startswith("NotCallable: ")
    assert set(health["gateway"]["servers"]) == {local, gateway_home["web"], "time"}
    # Every call has its audit row, as `a2x-local audit` shows it.
    listed = subprocess.run(cli_command("audit", "--db", str(gateway_home["db"]), "--json"),
                            env=gateway_home["env"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    by_outcome = {}
    for row in rows:
        by_outcome.setdefault((row["service_id"], row["profile"], row["outcome"], row["via"]), []).append(row)
    assert ("time/get_current_time", "ops", "ok", "call_service") in by_outcome
    assert ("time/get_current_time", "ops", "ok", "http") in by_outcome
    assert ("time/convert_time", "ops", "denied", "call_service") in by_outcome
    assert ("time/get_current_time", "ops", "invalid", "call_service") in by_outcome
    assert (f"{local}/add", "ops", "ok", "tool") in by_outcome
    assert ("time/get_current_time", "default", "denied", "call_service") in by_outcome
    assert (f"{web}/add", "ops", "ok", "call_service") in by_outcome
    assert (f"{web}/add", "ops", "invalid", "call_service") in by_outcome
    assert (f"{web}/hang", "ops", "timeout", "call_service") in by_outcome
    # Refused before the gateway saw them (a token no profile knows, a body over the limit, a shapeless body):
    # audited too, with nothing of the body.
    refused = {key: found for key, found in by_outcome.items() if key[0] == "time/get_current_time" and
               key[3] == "http" and key[2] != "ok"}
    assert set(refused) == {("time/get_current_time", "(none)", "denied", "http"),
                            ("time/get_current_time", "ops", "too_large", "http"),
                            ("time/get_current_time", "ops", "invalid", "http")}, set(refused)
    assert all(row["arguments_sha256"] is None and row["arguments_preview"] is None and
               row["error"].split(":")[0] in ("Unauthorized", "TooLarge", "InvalidRequest")
               for rows_ in refused.values() for row in rows_)
    assert by_outcome[("time/get_current_time", "(none)", "denied", "http")][0]["client"].startswith("token:")
    assert (f"{local}/hang_marked", "ops", "cancelled", "http") in by_outcome
    exported = gateway_home["home"] / "audit.csv"
    csv = subprocess.run(cli_command("audit", "--db", str(gateway_home["db"]), "--outcome", "denied", "--csv",
                                     str(exported)), env=gateway_home["env"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert csv.returncode == 0, csv.stderr
    lines = exported.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("id,called_at,profile,client,via,service_id") and len(lines) >= 3
    assert all(",denied," in line for line in lines[1:])
    assert wait_until_gone(gateway_home["local"]) == [] and wait_until_gone("mcp-server-time --local") == []


def test_over_stdio_a_legacy_client_hears_list_changed(gateway_home):
    local = gateway_home["local"]
    env = server_env(gateway_home["home"]) | {"OPS_TOKEN": OPS_TOKEN, "A2X_CLIENT_TOKEN": OPS_TOKEN}
    params = serve_stdio_params(gateway_home["db"], gateway_home["home"], "--gateway", str(gateway_home["gateway"]),
                                env=env)
    heard = []

    async def on_message(message):
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async def scenario():
        async with Client(params, mode="legacy", read_timeout_seconds=180, message_handler=on_message) as client:
            await client.call_tool("activate_services", {"service_ids": [f"{local}/echo"]})
            for _ in range(100):
                if heard:
                    break
                await asyncio.sleep(0.05)
            tools = {tool.name for tool in (await client.list_tools()).tools}
            echoed = await client.call_tool("echo", {"text": "natively"})
            return tools, echoed

    tools, echoed = run(scenario())
    assert heard, "no notifications/tools/list_changed reached the client"
    assert "echo" in tools and echoed.content[0].text == f"{local}: natively"
    assert wait_until_gone(local) == []
