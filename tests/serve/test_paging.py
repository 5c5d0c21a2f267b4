"""Paging (`limit`, `cursor` -> `next_cursor`) and filters (type, source) on every list the server returns: search
hits, a category's children and services, the service listing; every answer bounded."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from a2x_local.registry import Service
from a2x_local.serve.http_api import create_app
from tests.search.a2x_helpers import make_tree
from tests.serve.helpers import make_server, store_tree
from tests.support.registries import make_registry

TYPES = ("mcp_tool", "skill", "a2a")
# 30 services "tool number N" of three types from two sources; a wide root (12 categories) with 18 of them filed
# at the root itself, the rest in the categories.
SERVICES = [Service(f"svc{n:02d}", TYPES[n % 3], f"tool_{n:02d}", f"Does task number {n} with a tool.",
                    source=f"/data/{'skills' if n % 3 == 1 else 'tools'}/file{n % 2}.json") for n in range(30)]
WIDE = {"root": ("All services", [f"svc{n:02d}" for n in range(18)]),
        **{f"root/{c}": (f"Category {c:02d}", [f"svc{18 + c - 1:02d}"]) for c in range(1, 13)}}


@pytest.fixture
def client(db_path):
    make_registry(db_path, SERVICES)
    store_tree(db_path, make_tree(WIDE), activate=True)
    server = make_server(db_path, max_page=50, page_size=5)
    with TestClient(create_app(server.discovery), base_url="http://127.0.0.1") as test_client:
        yield test_client
    server.close()


def flat(pages_: list[list]) -> list:
    return [entry for page in pages_ for entry in page]


def pages(client, path: str, key: str, **params) -> list[list]:
    """Every page of a list, following next_cursor."""
    found, cursor = [], None
    for _ in range(50):
        answer = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})}).json()
        found.append(answer[key])
        cursor = answer.get("next_cursor")
        if not cursor:
            return found
    raise AssertionError("paging never ended")


def test_a_wide_category_is_paged_children_and_services_alike(client):
    first = client.get("/v1/tree/nodes/root", params={"limit": 4}).json()
    assert len(first["children"]) == 4 and first["children_total"] == 12
    assert len(first["services"]) == 4 and first["services_total"] == 18 and first["next_cursor"]
    services = [[s["id"] for s in page] for page in pages(client, "/v1/tree/nodes/root", "services", limit=4)]
    children = [[c["id"] for c in page] for page in pages(client, "/v1/tree/nodes/root", "children", limit=4)]
    assert flat(services) == [f"svc{n:02d}" for n in range(18)] and len(services) == 5
    assert len(flat(children)) == 12 and children[3:] == [[], []]      # children end first; services go on
    # The default page comes from [serve] page_size, and /v1/tree pages the root the same way.
    tree = client.get("/v1/tree").json()
    assert len(tree["root"]["children"]) == 5 and len(tree["root"]["services"]) == 5 and tree["root"]["next_cursor"]


def test_the_service_listing_pages_and_filters_without_a_redirect(client):
    plain = client.get("/v1/services", follow_redirects=False)
    assert plain.status_code == 200 and plain.json()["total"] == 30 and len(plain.json()["services"]) == 5
    listed = flat(pages(client, "/v1/services", "services", limit=7))
    assert [s["id"] for s in listed] == [s.id for s in SERVICES]
    skills = flat(pages(client, "/v1/services", "services", type="skill", limit=3))
    assert {s["type"] for s in skills} == {"skill"} and len(skills) == 10
    from_skills_folder = client.get("/v1/services", params={"source": "/skills/", "limit": 50}).json()
    assert from_skills_folder["total"] == 10 and {s["type"] for s in from_skills_folder["services"]} == {"skill"}
    both = client.get("/v1/services", params={"source": "file0", "type": "mcp_tool", "limit": 50}).json()
    assert [s["id"] for s in both["services"]] == [s.id for s in SERVICES if s.type == "mcp_tool" and
                                                  s.source.endswith("file0.json")]
    empty_id = client.get("/v1/services/")
    assert empty_id.status_code == 404 and "GET /v1/services" in empty_id.json()["hint"]


def test_search_pages_continue_the_ranking_and_filters_keep_the_page_full(client):
    whole = client.post("/v1/search", json={"query": "task number tool", "k": 12}).json()
    first = client.post("/v1/search", json={"query": "task number tool", "k": 6}).json()
    second = client.post("/v1/search", json={"query": "task number tool", "k": 6,
                                             "cursor": first["next_cursor"]}).json()
    assert [h["service_id"] for h in first["hits"] + second["hits"]] == [h["service_id"] for h in whole["hits"]]
    # A filter that few hits pass still fills the page (the search goes deeper), and only those pass.
    a2a = client.post("/v1/search", json={"query": "task number tool", "k": 6, "type": "a2a"}).json()
    assert len(a2a["hits"]) == 6 and {h["type"] for h in a2a["hits"]} == {"a2a"}
    rest = client.post("/v1/search", json={"query": "task number tool", "k": 6, "type": "a2a",
                                           "cursor": a2a["next_cursor"]}).json()
    assert len(rest["hits"]) == 4 and "next_cursor" not in rest
    assert not {h["service_id"] for h in a2a["hits"]} & {h["service_id"] for h in rest["hits"]}
    # A root-filed service's hit says so: its path is the root alone and its category is empty.
    hit = next(h for h in whole["hits"] if h["service_id"] == "svc00")
    assert hit["path"] == ["root"] and hit["category"] == ""


@pytest.mark.parametrize(("path", "params", "code"), [
    ("/v1/services", {"cursor": "not-a-cursor"}, "BadCursor"),
    ("/v1/services", {"limit": 51}, "BadLimit"),
    ("/v1/services", {"limit": 0}, "BadLimit"),
    ("/v1/services", {"type": "tool"}, "BadType"),
    ("/v1/tree/nodes/root", {"limit": 1000}, "BadLimit"),
])
def test_bad_paging_and_filters_are_refused_in_one_error(client, path, params, code):
    answer = client.get(path, params=params)
    assert answer.status_code == 400 and answer.json()["error"] == code and answer.json()["hint"]


def test_a_cursor_of_another_request_is_refused(client):
    cursor = client.get("/v1/services", params={"type": "skill", "limit": 2}).json()["next_cursor"]
    other = client.get("/v1/services", params={"type": "a2a", "cursor": cursor})
    assert other.status_code == 400 and other.json()["error"] == "BadCursor"
    node_cursor = client.get("/v1/tree/nodes/root", params={"limit": 2}).json()["next_cursor"]
    wrong_node = client.get("/v1/tree/nodes/root/1", params={"cursor": node_cursor})
    assert wrong_node.status_code == 400 and "another request" in wrong_node.json()["message"]


def test_an_llm_answer_is_paged_from_one_search(db_path):
    from a2x_local.testing import ScriptedEngine
    from tests.search.a2x_helpers import Oracle, sample_tree
    from tests.serve.helpers import WANTED, registry_with_trees

    registry_with_trees(db_path)
    engine = ScriptedEngine(Oracle(sample_tree(), WANTED))
    server = make_server(db_path, engine)
    try:
        with TestClient(create_app(server.discovery), base_url="http://127.0.0.1") as client:
            body = {"query": "find hotels", "method": "a2x", "k": 1}
            first = client.post("/v1/search", json=body).json()
            calls = engine.usage.total().calls
            second = client.post("/v1/search", json={**body, "cursor": first["next_cursor"]}).json()
    finally:
        server.close()
    assert first["ranked"] is False and len(first["hits"]) == 1 and len(second["hits"]) == 1
    assert {first["hits"][0]["service_id"], second["hits"][0]["service_id"]} == {"h1", "h2"}
    assert "next_cursor" not in second and engine.usage.total().calls == calls > 0   # the next page: no model call
