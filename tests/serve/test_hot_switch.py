"""Hot tree switch: a newly activated tree is served from the next request on, requests in flight finish on the
tree they started with, and the registry file stays writable by other processes while the server runs."""

from __future__ import annotations

import threading

import httpx
from fastapi.testclient import TestClient

from a2x_local.db import connect, transaction
from a2x_local.search.llm.positions import NONE
from a2x_local.serve.http_api import create_app
from a2x_local.taxonomy import store
from a2x_local.testing import ScriptedEngine
from tests.serve.helpers import WANTED, make_server, registry_with_trees, running_server


class GatedRule:
    """Every category on the way down, then the wanted services; the first call waits until the test opens the
    gate, so a search is held in flight while the tree is switched."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, request) -> str:
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        context = request.context
        if context["call"] == "descend":
            return ",".join(str(k) for k in range(1, len(context["options"]) + 1)) or NONE
        wanted = WANTED.get(context["query"], set())
        return ",".join(str(k) for k, sid in enumerate(context["options"], 1) if sid in wanted) or NONE


def activate(db_path, build_id: int) -> None:
    with connect(db_path) as con, transaction(con):
        store.activate(con, build_id)


def test_the_next_request_uses_the_new_tree_and_the_one_in_flight_keeps_its_own(db_path):
    first, second = registry_with_trees(db_path)
    rule = GatedRule()
    server = make_server(db_path, ScriptedEngine(rule))
    answers: dict[str, dict] = {}
    with TestClient(create_app(server.discovery), base_url="http://127.0.0.1") as client:

        def in_flight() -> None:
            answers["old"] = client.post("/v1/search", json={"query": "find hotels", "method": "a2x"}).json()

        worker = threading.Thread(target=in_flight)
        worker.start()
        assert rule.entered.wait(30)
        activate(db_path, second)          # while the search waits for its first model answer
        rule.gate.set()
        worker.join(timeout=60)
        answers["new"] = client.post("/v1/search", json={"query": "find hotels", "method": "a2x"}).json()
        tree = client.get("/v1/tree").json()
        health = client.get("/healthz").json()
    server.close()
    old, new = answers["old"], answers["new"]
    assert old["tree"] == first and {h["service_id"]: h["path"] for h in old["hits"]} == {
        "h1": ["root", "root/1", "root/1/2"], "h2": ["root", "root/1", "root/1/2"]}
    assert new["tree"] == second and {h["service_id"]: h["path"] for h in new["hits"]} == {
        "h1": ["root", "root/1"], "h2": ["root", "root/1"]}
    assert tree["build_id"] == second and tree["root"]["children"][0]["name"] == "Trips"
    assert health["tree"] == second and health["generation"] == 1


def test_a_writer_can_take_the_file_while_the_server_runs(db_path, tmp_path, cli):
    first, second = registry_with_trees(db_path)
    with running_server(db_path, tmp_path / "home") as url:
        assert httpx.get(f"{url}/v1/tree").json()["build_id"] == first
        # Another process (here: this one) writes while the server runs: the server holds no connection.
        code, _, err = cli("tree", "activate", str(second))
        assert code == 0, err
        assert httpx.get(f"{url}/v1/tree").json()["build_id"] == second
        # A writer that keeps the file open (a nightly build between checkpoints) does not stop the answers:
        # the server keeps its snapshot until the file is free again.
        with connect(db_path) as con:
            with transaction(con):
                store.activate(con, first)
            held = httpx.get(f"{url}/v1/tree", timeout=30)
            assert held.status_code == 200 and held.json()["build_id"] == second
        assert httpx.get(f"{url}/v1/tree").json()["build_id"] == first
        assert httpx.get(f"{url}/healthz").json()["generation"] == 2
