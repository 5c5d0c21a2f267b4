"""A service a profile may not see is absent from every answer that client gets, not only from searches: the MCP tools
browse_category, list_services, get_service and compose_plan (mcp_tools.py), and the HTTP routes behind them
(http_api.py). The default profile, on the same server, still sees it: what hides it is the profile."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient
from mcp import Client

from a2x_local.components import register_components
from a2x_local.serve.access import CALLER
from a2x_local.serve.http_api import create_app
from a2x_local.serve.server import build_server
from a2x_local.settings import load_settings
from tests.serve.helpers import registry_with_trees, serve_config

LOOPBACK = "http://127.0.0.1"
READER = "reader-token-for-the-test"
HIDDEN = "h1"                                     # filed under root/1/2 (Hotels) with h2
TWO_NEEDS = "the h1 thing, then the s2 thing"     # words of h1's and s2's descriptions (bm25)


def _server(db_path, tmp_path, monkeypatch):
    registry_with_trees(db_path)
    gateway = tmp_path / "gateway.toml"
    gateway.write_text(f'[profiles.reader]\ntokens = [{{ env = "READER_TOKEN" }}]\ndeny = ["{HIDDEN}"]\n',
                       encoding="utf-8")
    monkeypatch.setenv("READER_TOKEN", READER)
    settings = load_settings(db=db_path).with_overrides("search", direct_select_below=0,
                                                        other_services_child="root")
    register_components()
    server = build_server(settings, serve_config(), gateway_file=gateway)
    server.start_loading()
    assert server.state.wait_ready(120), server.state.loading.to_dict()
    return server


def _plan_ids(plan: dict) -> set[str]:
    ids = set(plan.get("services", []))
    for step in plan["steps"]:
        ids |= {c["id"] for c in ([step["choice"]] if step.get("choice") else []) + step.get("alternatives", [])}
    return ids


def test_the_http_routes_hide_a_denied_service(db_path, tmp_path, monkeypatch):
    server = _server(db_path, tmp_path, monkeypatch)
    seen: dict[str, dict] = {}
    try:
        with TestClient(create_app(server.discovery, planning=server.planning, calling=server.calling),
                        base_url=LOOPBACK) as client:
            for who, headers in (("reader", {"Authorization": f"Bearer {READER}"}), ("default", {})):
                listed = client.get("/v1/services", params={"limit": 100}, headers=headers).json()
                node = client.get("/v1/tree/nodes/root/1/2", headers=headers).json()
                one = client.get(f"/v1/services/{HIDDEN}", headers=headers)
                plan = client.post("/v1/compose", json={"request": TWO_NEEDS, "method": "bm25", "k": 3},
                                   headers=headers).json()
                found = client.post("/v1/search", json={"query": "the h1 thing", "method": "bm25", "k": 10},
                                    headers=headers).json()
                seen[who] = {"listed": {s["id"] for s in listed["services"]},
                             "node": {s["id"] for s in node["services"]}, "one": one.status_code,
                             "plan": _plan_ids(plan), "hits": {h["service_id"] for h in found["hits"]}}
    finally:
        server.close()
    reader, default = seen["reader"], seen["default"]
    assert HIDDEN not in reader["listed"] and "h2" in reader["listed"]
    assert reader["node"] == {"h2"} and reader["one"] == 404
    assert HIDDEN not in reader["plan"] and "s2" in reader["plan"]
    assert HIDDEN not in reader["hits"]
    assert HIDDEN in default["listed"] and default["node"] == {"h1", "h2"} and default["one"] == 200
    assert HIDDEN in default["plan"] and HIDDEN in default["hits"]


def test_the_mcp_tools_hide_a_denied_service(db_path, tmp_path, monkeypatch):
    server = _server(db_path, tmp_path, monkeypatch)

    async def answers(token: str | None) -> dict:
        # The guard (HTTP) or the stdio client's middleware sets the caller; in-process the test does.
        CALLER.set(server.calling.gateway.caller(token, anonymous="test"))
        async with Client(server.mcp) as client:
            listed = await client.call_tool("list_services", {"limit": 100})
            node = await client.call_tool("browse_category", {"node_id": "root/1/2"})
            one = await client.call_tool("get_service", {"service_id": HIDDEN})
            plan = await client.call_tool("compose_plan", {"request": TWO_NEEDS, "method": "bm25", "k": 3,
                                                           "detail": "full"})
        return {"listed": {s["id"] for s in listed.structured_content["services"]},
                "node": {s["id"] for s in node.structured_content["services"]}, "one": one,
                "plan": _plan_ids(plan.structured_content), "plan_text": plan.content[0].text}

    try:
        reader = asyncio.run(answers(READER))
        default = asyncio.run(answers(None))
    finally:
        server.close()
    assert HIDDEN not in reader["listed"] and "h2" in reader["listed"]
    assert reader["node"] == {"h2"}
    assert reader["one"].is_error and reader["one"].content[0].text.startswith("NoSuchService: ")
    assert HIDDEN not in reader["plan"] and "s2" in reader["plan"] and f"[{HIDDEN}]" not in reader["plan_text"]
    assert HIDDEN in default["listed"] and default["node"] == {"h1", "h2"} and not default["one"].is_error
    assert HIDDEN in default["plan"]
