"""The HTTP API through FastAPI's TestClient: answers, the Python API's fields, limits and errors as JSON."""

from __future__ import annotations

import dataclasses
import re

import pytest
from fastapi.testclient import TestClient

from a2x_local.search.types import Hit, SearchCost
from a2x_local.serve.http_api import create_app
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_services, sample_tree
from tests.serve.helpers import WANTED, make_server, registry_with_trees

LOOPBACK = "http://127.0.0.1"


@pytest.fixture
def served(db_path):
    """A server over the sample registry and tree, with an oracle model; (server, client, active tree id)."""
    active, _ = registry_with_trees(db_path)
    server = make_server(db_path, ScriptedEngine(Oracle(sample_tree(), WANTED)), max_k=20, max_query_chars=200,
                         max_requests_per_call=3, max_body_bytes=4096)
    with TestClient(create_app(server.discovery, mcp=server.mcp), base_url=LOOPBACK) as client:
        yield server, client, active
    server.close()


def test_search_answers_are_lean_and_carry_the_cost_only_when_asked(served):
    _, client, active = served
    answer = client.post("/v1/search", json={"query": "the w1 thing", "k": 3}).json()
    assert answer["method"] == "bm25" and answer["ranked"] is True and len(answer["hits"]) == 3
    assert set(answer) <= {"method", "query", "ranked", "hits", "next_cursor"}, set(answer)
    for hit in answer["hits"]:
        assert hit["name"].startswith("tool_") and hit["type"] and hit["summary"] and hit["score"] is not None
    # Retrieval hits carry where the active tree files the service (the weather services: Weather › Forecast).
    weather = next(hit for hit in answer["hits"] if hit["service_id"] == "w1")
    assert weather["path"][0] == "root" and weather["category"].startswith("Weather")
    full = client.post("/v1/search", json={"query": "the w1 thing", "k": 3, "detail": "full"}).json()
    cost_fields = {f.name for f in dataclasses.fields(SearchCost)} | {"seconds"}
    assert set(full["cost"]) == cost_fields and full["hits"] == answer["hits"]
    hit_fields = {f.name for f in dataclasses.fields(Hit)}
    assert all(hit_fields <= set(hit) for hit in full["hits"])
    assert active


def test_a2x_searches_the_active_tree_with_the_model(served):
    _, client, active = served
    answer = client.post("/v1/search", json={"query": "find hotels", "method": "a2x", "detail": "full"}).json()
    assert answer["tree"] == active and answer["ranked"] is False
    assert sorted(hit["service_id"] for hit in answer["hits"]) == ["h1", "h2"]
    assert answer["hits"][0]["path"] == ["root", "root/1", "root/1/2"]
    assert answer["hits"][0]["category"] == "Travel › Hotels" and "score" not in answer["hits"][0]
    assert answer["cost"]["calls"] > 0 and answer["cost"]["prompt_tokens"] > 0 and answer["trace"]["tree"] == active
    by_get = client.get("/v1/search", params={"query": "find hotels", "method": "a2x", "mode": "get_one"}).json()
    assert by_get["mode"] == "get_one" and len(by_get["hits"]) == 1 and "trace" not in by_get


def test_several_searches_in_one_call_and_its_limit(served):
    _, client, _ = served
    body = {"requests": [{"query": "find hotels", "method": "a2x"}, {"query": "stock prices", "method": "a2x"}]}
    results = client.post("/v1/search/batch", json=body).json()["results"]
    assert [sorted(h["service_id"] for h in r["hits"]) for r in results] == [["h1", "h2"], ["s1", "s2"]]
    too_many = client.post("/v1/search/batch", json={"requests": [{"query": "x"}] * 4})
    assert too_many.status_code == 400 and too_many.json()["error"] == "BatchTooLarge"


def test_a_service_with_everything_stored_and_where_it_is_filed(served):
    _, client, _ = served
    service = client.get("/v1/services/f1").json()
    assert service["name"] == "tool_f1" and service["description"] == "Does the f1 thing."
    assert [[c["name"] for c in path] for path in service["categories"]] == [["Travel", "Flights"],
                                                                           ["Finance", "Stocks"]]
    missing = client.get("/v1/services/nope")
    assert missing.status_code == 404 and missing.json()["error"] == "NoSuchService"


def test_the_tree_and_its_nodes(served):
    _, client, active = served
    tree = client.get("/v1/tree").json()
    assert tree["build_id"] == active and tree["stale"] is False and tree["stats"]["depth"] == 2
    assert [(c["id"], c["name"], c["size"]) for c in tree["root"]["children"]] == [
        ("root/1", "Travel", 6), ("root/2", "Weather", 4), ("root/3", "Finance", 7)]
    assert [s["id"] for s in tree["root"]["services"]] == ["g1"] and tree["root"]["children_total"] == 3
    node = client.get("/v1/tree/nodes/root/1/2").json()
    assert node["name"] == "Hotels" and [p["name"] for p in node["path"]] == ["All services", "Travel"]
    assert [s["id"] for s in node["services"]] == ["h1", "h2"] and node["children"] == []
    assert client.get("/v1/tree/nodes/root/9").status_code == 404


def test_methods_say_which_need_a_model(served):
    _, client, _ = served
    methods = {m["name"]: m for m in client.get("/v1/methods").json()}
    assert methods["a2x"]["llm"] and methods["a2x"]["available"] and methods["a2x"]["modes"]
    assert not methods["bm25"]["llm"] and methods["bm25"]["default"]


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"query": "   "}, 400, "EmptyQuery"),
    ({"query": "x" * 201}, 400, "QueryTooLong"),
    ({"query": "x", "k": 21}, 400, "BadK"),
    ({"query": "x", "k": 0}, 400, "BadK"),
    ({"query": "x", "method": "nope"}, 400, "UnknownMethod"),
    ({"query": "x", "method": "bm25", "mode": "get_one"}, 400, "BadMode"),
    ({"query": "x", "method": "a2x", "mode": "get_some"}, 400, "BadMode"),
    ({"query": 3}, 422, "InvalidRequest"),
    ({"quer": "x"}, 422, "InvalidRequest"),
])
def test_bad_searches_get_a_json_4xx(served, body, status, code):
    _, client, _ = served
    response = client.post("/v1/search", json=body)
    assert response.status_code == status and response.json()["error"] == code
    assert response.json()["message"] and "Traceback" not in response.text


def test_limits_and_read_only(served):
    _, client, _ = served
    big = client.post("/v1/search", content=b'{"query": "' + b"x" * 5000 + b'"}',
                      headers={"content-type": "application/json"})
    assert big.status_code == 413 and big.json()["error"] == "TooLarge"
    for verb in ("put", "delete", "patch"):
        response = getattr(client, verb)("/v1/tree")
        assert response.status_code == 405 and response.json()["error"] == "MethodNotAllowed"
    unknown = client.get("/v1/nothing")
    assert unknown.status_code == 404 and unknown.json()["error"] == "NotFound"


def test_a_crash_is_logged_and_the_client_hears_no_more(served, monkeypatch, caplog):
    server, _, _ = served

    def broken(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(server.discovery, "tree", broken)
    # As a real client sees it: Starlette re-raises a crash after answering, for the server's log.
    with TestClient(create_app(server.discovery), base_url=LOOPBACK, raise_server_exceptions=False) as client:
        response = client.get("/v1/tree")
    assert response.status_code == 500 and response.json()["error"] == "InternalError"
    assert "secret" not in response.text and "Traceback" not in response.text
    assert any(record.exc_info and "secret" in str(record.exc_info[1]) for record in caplog.records)


def test_a_failed_model_call_fails_only_its_own_request(db_path):
    registry_with_trees(db_path)
    oracle = Oracle(sample_tree(), WANTED)

    def rule(request):  # every model answer for one query is invalid (and stays so on the retry)
        return "not a position" if request.context["query"] == "broken" else oracle(request)

    server = make_server(db_path, ScriptedEngine(rule), batch_window_ms=200)
    with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
        body = {"requests": [{"query": "find hotels", "method": "a2x"}, {"query": "broken", "method": "a2x"}]}
        good, bad = client.post("/v1/search/batch", json=body).json()["results"]
        alone = client.post("/v1/search", json={"query": "broken", "method": "a2x"})
        metrics = client.get("/metrics").text
    server.close()
    assert sorted(h["service_id"] for h in good["hits"]) == ["h1", "h2"] and "error" not in good
    assert bad["hits"] == [] and "failed" in bad["error"]
    assert alone.status_code == 502 and alone.json()["error"] == "ModelCallFailed"
    assert 'a2x_searches_total{method="a2x",outcome="error"} 2.0' in metrics


def test_metrics_count_requests_tokens_and_batches(served):
    _, client, _ = served
    client.post("/v1/search", json={"query": "find hotels", "method": "a2x"})
    client.get("/v1/tree")
    text = client.get("/metrics").text
    assert 'a2x_requests_total{route="/v1/search",status="200"} 1.0' in text
    assert 'a2x_request_seconds_bucket{le="+Inf",route="/v1/tree"} 1.0' in text
    assert 'a2x_model_tokens_total{call_type="descend",kind="prompt"}' in text
    assert "a2x_engine_batch_size_count" in text and 'a2x_search_batch_size_count{method="a2x"} 1.0' in text
    assert f"a2x_registry_services {float(len(sample_services()))}" in text


def test_openapi_has_the_error_schema_and_the_bearer_scheme_and_docs_are_served_offline(served):
    _, client, _ = served
    schema = client.get("/openapi.json").json()
    assert {"/v1/search", "/v1/search/batch", "/v1/services", "/v1/services/{service_id}", "/v1/tree",
            "/v1/tree/nodes/{node_id}", "/healthz", "/readyz", "/metrics"} <= set(schema["paths"])
    search = schema["paths"]["/v1/search"]["post"]
    error = search["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/ErrorBody") and {"error", "message", "hint"} <= set(
        schema["components"]["schemas"]["ErrorBody"]["properties"])
    assert search["security"] == [{"bearer": []}]
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": schema["components"]["securitySchemes"]["bearer"][
            "description"]}
    assert "security" not in schema["paths"]["/healthz"]["get"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "cdn" not in docs.text.lower()
    # Every file the docs page loads comes from this server.
    for url in re.findall(r'(?:src|href)="(/[^"]+)"', docs.text):
        assert client.get(url).status_code == 200, url
    assert client.head("/healthz").status_code == 200


def test_healthz_says_what_is_served(served):
    _, client, active = served
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["services"] == len(sample_services()) and health["tree"] == active
    assert health["engine"]["engine"] == "scripted" and "a2x" in health["methods"]


def test_llm_methods_without_a_model_are_refused_with_how_to_start_one(db_path):
    registry_with_trees(db_path)
    server = make_server(db_path)
    with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
        response = client.post("/v1/search", json={"query": "find hotels", "method": "a2x"})
        methods = {m["name"]: m["available"] for m in client.get("/v1/methods").json()}
    server.close()
    assert response.status_code == 503 and response.json()["error"] == "NoModel"
    assert "--model" in response.json()["hint"] and methods["a2x"] is False and methods["bm25"] is True


def test_the_favicon_is_served_not_a_404(served):
    """Issue 33, item 10: browsers ask for /favicon.ico; it is the page's icon (no token needed, as for the page)."""
    _, client, _ = served
    icon = client.get("/favicon.ico")
    linked = client.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.content.startswith(b"<svg") and icon.content == linked.content
    assert 'rel="icon"' in client.get("/").text
