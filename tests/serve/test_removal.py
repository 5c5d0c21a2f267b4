"""A removed service stops being served within seconds, whatever index work is still running (issue 32, finding
11). Before: while a method was rebuilt for an earlier change, the build held the server's database lock, so the
snapshot was not reloaded: `/healthz`, listings, lookups and searches served every removed service until the
unrelated build finished (~45 s for an embedding of 1,985 services)."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry, Service
from a2x_local.search.methods import unregister_method
from a2x_local.serve.http_api import create_app
from tests.serve.helpers import make_server, registry_with_trees
from tests.serve.test_loading import LOOPBACK, gated

REMOVED = ["h1", "s2", "w3"]


def test_a_removal_reaches_every_answer_while_an_index_is_being_rebuilt(db_path):
    registry_with_trees(db_path)
    gate, reached = gated(free_builds=1)      # the first build is free; the rebuild for change 1 waits at the gate
    server = make_server(db_path, rebuild_wait_s=0.0)
    body = {"query": "anything", "method": "listall", "k": 50}
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            before = {h["service_id"] for h in client.post("/v1/search", json=body).json()["hits"]}
            cursor = client.get("/v1/services", params={"limit": 1}).json()["next_cursor"]
            assert set(REMOVED) <= before and cursor
            with connect(db_path) as con, transaction(con):     # change 1: one service added
                Registry(con).insert([Service("n1", "skill", "tool_n1", "Does the n1 thing.")])
            client.post("/v1/search", json=body)                # ... which starts the rebuild
            assert reached.wait(60)                              # the rebuild now runs (held at the gate)
            with connect(db_path) as con, transaction(con):     # change 2: three services removed
                assert Registry(con).remove(REMOVED) == len(REMOVED)
            removed_at = time.monotonic()
            while True:
                health = client.get("/healthz").json()
                if health["services"] == len(before) + 1 - len(REMOVED) or time.monotonic() - removed_at > 10:
                    break
                time.sleep(0.1)
            seen_after_s = time.monotonic() - removed_at
            print(f"the removal reached /healthz {seen_after_s:.2f} s after it was committed")
            listed = client.get("/v1/services", params={"limit": 200}).json()
            looked_up = client.get(f"/v1/services/{REMOVED[0]}")
            searched = client.post("/v1/search", json=body)
            paged = client.get("/v1/services", params={"limit": 1, "cursor": cursor})
            building = client.get("/healthz").json()["loading"]
    finally:
        gate.set()
        server.close()
        unregister_method("listall")
    assert "method:listall" in building, building       # the rebuild was still running throughout
    assert seen_after_s < 5, f"/healthz still counted the removed services {seen_after_s:.1f} s after the removal"
    assert health["services"] == len(before) + 1 - len(REMOVED)
    listed_ids = {s["id"] for s in listed["services"]}
    assert not listed_ids & set(REMOVED) and listed["total"] == len(before) + 1 - len(REMOVED)
    assert looked_up.status_code == 404
    assert searched.status_code == 200
    hits = {h["service_id"] for h in searched.json()["hits"]}
    assert hits and not hits & set(REMOVED), hits          # the previous index answers, without the removed ones
    assert paged.status_code == 400 or not {s["id"] for s in paged.json()["services"]} & set(REMOVED)
