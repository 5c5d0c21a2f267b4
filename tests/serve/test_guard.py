"""Safe defaults: loopback unless a token (or --insecure) is given; bearer tokens; loopback Host names only."""

from __future__ import annotations

import subprocess

import pytest
from fastapi.testclient import TestClient

from a2x_local.errors import UserError
from a2x_local.serve.guard import check_bind, is_loopback
from a2x_local.serve.http_api import create_app
from tests.serve.helpers import make_server, registry_with_trees


@pytest.mark.parametrize(("host", "token", "insecure", "allowed"), [
    ("127.0.0.1", None, False, True), ("localhost", None, False, True), ("::1", None, False, True),
    ("0.0.0.0", None, False, False), ("192.168.1.5", None, False, False),
    ("0.0.0.0", "t", False, True), ("0.0.0.0", None, True, True),
])
def test_only_loopback_binds_without_a_token(host, token, insecure, allowed):
    if allowed:
        check_bind(host, token, insecure)
    else:
        with pytest.raises(UserError, match="refusing to listen") as info:
            check_bind(host, token, insecure)
        assert "--token" in info.value.hint and "--insecure" in info.value.hint


def test_loopback_names():
    assert is_loopback("127.0.0.2") and is_loopback("[::1]") and not is_loopback("example.com")


@pytest.fixture
def server(db_path):
    registry_with_trees(db_path)
    server = make_server(db_path)
    yield server
    server.close()


def test_a_token_guards_the_api_and_mcp_but_not_the_page(server):
    app = create_app(server.discovery, token="s3cret", loopback_only=False, mcp=server.mcp)
    with TestClient(app, base_url="http://10.0.0.7:8765") as client:
        refused = client.get("/v1/tree")
        wrong = client.get("/v1/tree", headers={"Authorization": "Bearer s3cre"})
        right = client.get("/v1/tree", headers={"Authorization": "Bearer s3cret"})
        metrics = client.get("/metrics")
        mcp = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        page, script, health = client.get("/"), client.get("/static/app.js"), client.get("/healthz")
    assert refused.status_code == 401 and refused.json()["error"] == "Unauthorized"
    assert refused.headers["www-authenticate"] == 'Bearer realm="a2x-local"'
    assert wrong.status_code == 401 and metrics.status_code == 401 and mcp.status_code == 401
    assert right.status_code == 200 and right.json()["root"]["name"] == "All services"
    assert page.status_code == 200 and "<title>a2x-local" in page.text and script.status_code == 200
    assert health.status_code == 200


def test_a_loopback_server_refuses_other_host_names(server):
    app = create_app(server.discovery)
    with TestClient(app, base_url="http://attacker.example:8765") as client:
        rebound = client.get("/v1/tree")
    with TestClient(app, base_url="http://localhost:8765") as client:
        local = client.get("/v1/tree")
    assert rebound.status_code == 400 and rebound.json()["error"] == "BadHost"
    assert local.status_code == 200


def test_serve_refuses_an_open_bind_before_loading_anything(db_path, cli):
    registry_with_trees(db_path)
    code, _, err = cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert code == 1 and "refusing to listen on 0.0.0.0" in err and "--token" in err


def test_serve_without_a_registry_says_how_to_make_one(db_path, cli):
    code, _, err = cli("serve", "--port", "0")
    assert code == 1 and "no registry database" in err and "ingest" in err and not db_path.exists()


MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("host", ["127.0.0.2", "::1"])
def test_mcp_answers_on_the_loopback_address_the_server_is_bound_to(server, host):
    """Issue 21, finding 9: `serve --host 127.0.0.2` answered /v1 but 421 on every /mcp request (the SDK's own host
    check knows only 127.0.0.1, localhost and ::1)."""
    app = create_app(server.discovery, mcp=server.mcp, host=host)
    name = f"[{host}]" if ":" in host else host
    with TestClient(app, base_url=f"http://{name}:8765") as client:
        listed = client.post("/mcp", json=MCP_LIST, headers=MCP_HEADERS)
        foreign = client.post("/mcp", json=MCP_LIST, headers={**MCP_HEADERS, "Origin": "http://evil.example"})
    assert listed.status_code == 200, listed.text
    assert "search_services" in listed.text
    assert foreign.status_code == 403        # DNS-rebinding protection still on


def test_serve_on_127_0_0_2_serves_mcp_too(db_path, tmp_path):
    import httpx

    from tests.serve.helpers import ROOT, cli_command, server_env
    from tests.support.servers import bound_port, serving

    registry_with_trees(db_path)
    home = tmp_path / "home"
    log = tmp_path / "server.log"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(cli_command("serve", "--db", str(db_path), "--host", "127.0.0.2", "--port", "0"),
                                   env=server_env(home), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.2:{bound_port(process, log, 120)}"
    with serving(process, f"{url}/healthz", log, 120):
        api = httpx.get(f"{url}/v1/tree", timeout=30)
        mcp = httpx.post(f"{url}/mcp", json=MCP_LIST, headers=MCP_HEADERS, timeout=60)
    assert api.status_code == 200
    assert mcp.status_code == 200, mcp.text
    assert "search_services" in mcp.text
