"""Fast start and background work: the server answers tools/list, /healthz and the page while the model and the
indexes load; calls that need them wait with progress notifications or say "Loading"; a method rebuilt for a
changed registry is built in the background while the previous one keeps answering."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from mcp import Client
from pydantic import BaseModel, ConfigDict

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry, Service
from a2x_local.search import Hit, MethodSpec, SearchAnswer, SearchMethod, register_method
from a2x_local.search.methods import unregister_method
from a2x_local.serve.http_api import create_app
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree
from tests.serve.helpers import WANTED, make_server, registry_with_trees

LOOPBACK = "http://127.0.0.1"


class SlowEngine:
    """An engine source that blocks until the test opens its gate (a model that takes long to load)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.asked = threading.Event()

    def __call__(self) -> ScriptedEngine:
        self.asked.set()
        assert self.gate.wait(60), "the test never opened the gate"
        return ScriptedEngine(Oracle(sample_tree(), WANTED))


def test_tools_health_and_page_answer_while_the_model_loads_and_a_search_waits_with_progress(db_path):
    registry_with_trees(db_path)
    slow = SlowEngine()
    server = make_server(db_path, slow, ready=False)
    heard: list[tuple[float, str]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append((value, message or ""))

    async def scenario():
        async with Client(server.mcp) as client:
            tools = (await client.list_tools()).tools
            assert slow.asked.wait(30) and not slow.gate.is_set()
            threading.Timer(2.5, slow.gate.set).start()      # the model is ready 2.5 s into the search
            answer = await client.call_tool("search_services", {"query": "find hotels", "method": "a2x"},
                                            progress_callback=progress)
            return tools, answer

    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            health = client.get("/healthz").json()
            page = client.get("/")
            tools, answer = asyncio.run(scenario())
    finally:
        slow.gate.set()
        server.close()
    assert health["status"] == "loading" and "model" in health["loading"] and page.status_code == 200
    assert len(tools) == 5
    assert not answer.is_error and sorted(h["service_id"] for h in answer.structured_content["hits"]) == ["h1", "h2"]
    assert len(heard) >= 2 and "loading the model" in heard[0][1]
    assert [value for value, _ in heard] == sorted(value for value, _ in heard)   # progress only grows


def _built(server, name: str, within_s: float = 120) -> bool:
    """Wait until the server holds a built ``name`` method (a preloaded one, built before the engine is awaited)."""
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        snapshot = server.state.latest
        if snapshot is not None and server.state.methods.cached(name, snapshot) is not None:
            return True
        time.sleep(0.02)
    return False


def test_a_call_that_waits_too_long_is_answered_loading_with_what_loads(db_path):
    registry_with_trees(db_path)
    slow = SlowEngine()
    # bm25 is preloaded (before the model is awaited) and waited for here: its first build, bm25s's import
    # included, can take longer than the 0.5 s a call waits on a loaded machine.
    server = make_server(db_path, slow, ready=False, loading_wait_s=0.5, preload=["bm25"])
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            assert _built(server, "bm25")
            answer = client.post("/v1/search", json={"query": "find hotels", "method": "a2x"})
            ready = client.get("/readyz")
            # What needs no model answers meanwhile.
            browse = client.get("/v1/tree/nodes/root/1")
            retrieval = client.post("/v1/search", json={"query": "the h1 thing", "method": "bm25"})
    finally:
        slow.gate.set()
        server.close()
    assert answer.status_code == 503 and answer.json()["error"] == "Loading"
    assert "loading the model" in answer.json()["message"] and answer.headers["retry-after"] == "5"
    assert ready.status_code == 503 and ready.json()["error"] == "Loading"
    assert browse.status_code == 200 and retrieval.status_code == 200


def test_the_search_stream_reports_progress_then_the_result(db_path):
    registry_with_trees(db_path)
    slow = SlowEngine()
    server = make_server(db_path, slow, ready=False)
    threading.Timer(2.5, slow.gate.set).start()
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client, client.stream(
                "POST", "/v1/search", json={"query": "find hotels", "method": "a2x"},
                headers={"Accept": "application/x-ndjson"}) as response:
            lines = [line for line in response.iter_lines() if line]
    finally:
        slow.gate.set()
        server.close()
    items = [json.loads(line) for line in lines]
    assert all("progress" in item for item in items[:-1]) and len(items) >= 3
    assert "loading the model" in items[0]["message"]
    assert sorted(h["service_id"] for h in items[-1]["result"]["hits"]) == ["h1", "h2"]


# --- a method rebuilt in the background --------------------------------------------------------------------------

class _NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ListAll(SearchMethod):
    """A ranked method answering every service it was built with (so an answer shows which build served)."""

    name = "listall"
    ranked = True

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def search_batch(self, requests):
        return [SearchAnswer(query=r.query, hits=[Hit(i, 1.0) for i in self.ids][: r.k or 10], ranked=True)
                for r in requests]


def gated(free_builds: int):
    """A method whose builds after the first ``free_builds`` count progress, then wait for the test's gate."""
    gate, reached = threading.Event(), threading.Event()
    builds: list[int] = []

    def factory(settings, db_path: Path, options, progress):
        builds.append(1)
        with connect(db_path, mode="read") as con:
            ids = sorted(service.id for service in Registry(con).all())
        if len(builds) > free_builds:
            advance = progress("indexing", len(ids)) if progress else None
            if advance:
                advance(3)
            reached.set()
            assert gate.wait(60), "the test never opened the gate"
        return _ListAll(ids)

    register_method(MethodSpec("listall", "every service (test)", _NoOptions, factory, engine="none",
                               cost="retrieval"), replace=True)
    return gate, reached


def _gated_while_testing(free_builds: int):
    gate, reached = gated(free_builds)
    yield gate, reached
    gate.set()
    unregister_method("listall")


@pytest.fixture
def gated_method():
    yield from _gated_while_testing(free_builds=1)


@pytest.fixture
def gated_first_build():
    yield from _gated_while_testing(free_builds=0)


def test_an_unindexed_registry_answers_what_it_can_and_says_indexing(db_path, gated_first_build):
    registry_with_trees(db_path)
    gate, reached = gated_first_build
    # bm25 is built first; the listall index then takes long (builds run one at a time: they share the process's
    # one database connection).
    server = make_server(db_path, loading_wait_s=0.5, ready=False, preload=["bm25", "listall"])
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            assert reached.wait(60)
            health = client.get("/healthz").json()
            waited = client.post("/v1/search", json={"query": "anything", "method": "listall"})
            browse = client.get("/v1/tree/nodes/root/1")
            other = client.post("/v1/search", json={"query": "the h1 thing", "method": "bm25"})
            gate.set()
            assert server.state.wait_ready(60)
            answered = client.post("/v1/search", json={"query": "anything", "method": "listall"})
    finally:
        server.close()
    assert health["status"] == "loading" and health["loading"]["method:listall"]["done"] == 3
    assert waited.status_code == 503 and waited.json()["error"] == "Loading"
    assert "indexing for the listall method" in waited.json()["message"] and "3 of" in waited.json()["message"]
    assert browse.status_code == 200 and other.status_code == 200 and answered.status_code == 200


def test_a_changed_registry_is_indexed_in_the_background_while_the_old_index_answers(db_path, gated_method):
    registry_with_trees(db_path)
    server = make_server(db_path, rebuild_wait_s=0.0)
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            body = {"query": "anything", "method": "listall", "k": 50}
            before = {h["service_id"] for h in client.post("/v1/search", json=body).json()["hits"]}
            with connect(db_path) as con, transaction(con):   # a one-row sync
                Registry(con).insert([Service("n1", "skill", "tool_n1", "Does the n1 thing.")])
            during = client.post("/v1/search", json=body)
            gate, reached = gated_method
            assert reached.wait(60)
            health = client.get("/healthz").json()
            gate.set()
            assert server.state.wait_ready(60)
            after = {h["service_id"] for h in client.post("/v1/search", json=body).json()["hits"]}
    finally:
        server.close()
    assert during.status_code == 200 and {h["service_id"] for h in during.json()["hits"]} == before
    building = health["loading"]["method:listall"]
    assert "previous one serves" in building["what"] and building["done"] == 3 and building["total"] == len(after)
    assert health["status"] == "loading" and health["services"] == len(before) + 1
    assert after == before | {"n1"}


def test_a_model_that_fails_to_start_is_one_error_and_the_rest_serves(db_path):
    from a2x_local.errors import UserError

    registry_with_trees(db_path)

    def broken():
        raise UserError("model 'tiny' at /models/tiny is not usable: config.json missing", hint="run models check")

    server = make_server(db_path, broken)
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            methods = {m["name"]: m for m in client.get("/v1/methods").json()}
            a2x = client.post("/v1/search", json={"query": "find hotels", "method": "a2x"})
            plan = client.post("/v1/compose", json={"request": "the h1 thing, then the s2 thing", "method": "bm25"})
            health = client.get("/healthz").json()
    finally:
        server.close()
    assert a2x.status_code == 503 and a2x.json()["error"] == "EngineFailed" and "config.json" in a2x.json()["message"]
    assert not methods["a2x"]["available"] and "config.json" in methods["a2x"]["reason"]
    assert methods["compose"]["available"] and plan.status_code == 200 and plan.json()["decomposer"] == "rule"
    assert "config.json" in health["problems"]["model"] and "a2x" not in health["methods"]


def test_serve_on_an_unindexed_registry_listens_at_once_and_says_indexing(db_path, tmp_path):
    """Issue 21, finding 6, in a real `a2x-local serve` process: on a registry never indexed, the port answers while
    the preloaded method's index is built (/healthz says "indexing", the tree is browsable), then the method serves."""
    import subprocess
    import time

    import httpx

    from tests.serve.helpers import ROOT, cli_command, server_env
    from tests.support.servers import bound_port, serving

    registry_with_trees(db_path)
    home = tmp_path / "home"
    env = server_env(home, preload=["hybrid"])
    log_path = home / "server.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(cli_command("serve", "--db", str(db_path), "--port", "0"), env=env,
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{bound_port(process, log_path, 120)}"
    indexing, browsed, deadline = [], [], time.monotonic() + 300
    with serving(process, f"{url}/healthz", log_path, startup_s=120, poll_s=0.05):
        while time.monotonic() < deadline:
            health = httpx.get(f"{url}/healthz", timeout=10).json()
            if health["status"] != "loading":
                break
            building = health["loading"].get("method:hybrid")
            if building is not None:
                indexing.append(building["what"])
                browsed.append(httpx.get(f"{url}/v1/tree/nodes/root", timeout=10).status_code)
            time.sleep(0.05)
        searched = httpx.post(f"{url}/v1/search", json={"query": "find hotels", "method": "hybrid"}, timeout=60)
    assert health["status"] == "ok", health
    # "loading" while its libraries and model load, "indexing" once it embeds the services (issue 33, item 4).
    assert indexing and indexing[-1].startswith("indexing for the hybrid method"), log_path.read_text()[-2000:]
    assert {label.split(" (")[0] for label in indexing} <= {"loading the hybrid method",
                                                           "indexing for the hybrid method"}
    assert set(browsed) == {200}
    assert searched.status_code == 200 and searched.json()["hits"]


# --- a registry indexed beforehand: the cold start of issue 33, item 4 -------------------------------------------

@pytest.fixture(scope="module")
def indexed_registry(tmp_path_factory) -> Path:
    """The sample registry with its trees, indexed by `a2x-local index` (dense and BM25), shared by this module's
    cold-start tests (each server only reads it)."""
    import subprocess

    from tests.serve.helpers import ROOT, cli_command, server_env

    folder = tmp_path_factory.mktemp("indexed")
    db = folder / "registry.duckdb"
    registry_with_trees(db)
    subprocess.run(cli_command("index", "--db", str(db), "--json"), env=server_env(folder / "home"), cwd=ROOT,
                   check=True, capture_output=True, timeout=600)
    return db


class _HeldLoad:
    """`make_method` held at a gate until the test opens it: a load that is surely still running when a search
    comes, however fast the machine."""

    def __init__(self, monkeypatch) -> None:
        import a2x_local.serve.state as state_module

        self.gate, self.reached = threading.Event(), threading.Event()
        real = state_module.make_method

        def held(*args, **kwargs):
            self.reached.set()
            assert self.gate.wait(120), "the test never opened the gate"
            return real(*args, **kwargs)

        monkeypatch.setattr(state_module, "make_method", held)


def test_a_search_that_comes_while_built_indexes_load_waits_hears_loading_and_gets_hits(indexed_registry,
                                                                                         monkeypatch):
    """Deterministic: the preloaded hybrid method's load is held until the search has heard a progress line, so the
    search surely came while it loaded. It waits (within `loading_wait_s`), hears "loading the hybrid method" (its
    indexes are read: never "indexing"), and is answered with hits; its queries are encoded without torch."""
    held = _HeldLoad(monkeypatch)
    server = make_server(indexed_registry, ready=False, preload=["hybrid"], loading_wait_s=60.0)
    try:
        with TestClient(create_app(server.discovery), base_url=LOOPBACK) as client:
            assert held.reached.wait(60)
            lines = []
            with client.stream("POST", "/v1/search", json={"query": "the h1 thing", "method": "hybrid"},
                               headers={"Accept": "application/x-ndjson"}) as answer:
                for line in answer.iter_lines():
                    if line.strip():
                        lines.append(json.loads(line))
                        held.gate.set()            # the search has been heard waiting: the load may go on
            assert server.state.wait_ready(60)
            health = client.get("/healthz").json()
    finally:
        held.gate.set()
        server.close()
    labels = [line["message"] for line in lines if "progress" in line]
    assert labels and all(label.startswith("loading the hybrid method") for label in labels), labels
    assert "result" in lines[-1], lines[-1]
    assert lines[-1]["result"]["hits"][0]["service_id"] == "h1"
    assert health["status"] == "ok" and not health["loading"]
    assert server.state.methods.cached("hybrid", server.state.snapshot).describe()["query_runtime"] == "numpy"


def _maps_torch(pid: int) -> bool:
    """Whether the process has torch's library mapped (Linux)."""
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")


def test_serve_on_an_indexed_registry_answers_its_first_hybrid_search_without_torch(indexed_registry, tmp_path):
    """Issue 33, item 4, in a real `a2x-local serve` process: on a registry indexed beforehand, a hybrid search sent
    as soon as /healthz answers is answered with hits, never `Loading` (a caller that can wait: `loading_wait_s`
    60 s); what it hears while it waits says "loading", never "indexing"; and the server never loads torch (whose
    import made that search wait 8-17 s: docs/serve.md#start-up). The wall time is the benchmark's to measure
    (scripts/bench_serve_start.py --toolret): a test on a shared machine cannot promise seconds."""
    import subprocess
    import sys

    import httpx

    from tests.serve.helpers import ROOT, cli_command, server_env
    from tests.support.servers import bound_port, serving

    home = tmp_path / "home"
    env = server_env(home, preload=["hybrid"], loading_wait_s=60.0)
    log_path = home / "server.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(cli_command("serve", "--db", str(indexed_registry), "--port", "0"), env=env,
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{bound_port(process, log_path, 120)}"
    with serving(process, f"{url}/healthz", log_path, startup_s=120, poll_s=0.05):
        with httpx.Client(timeout=120) as client:
            with client.stream("POST", f"{url}/v1/search", json={"query": "the h1 thing", "method": "hybrid"},
                               headers={"Accept": "application/x-ndjson"}) as answer:
                lines = [json.loads(line) for line in answer.iter_lines() if line.strip()]
            health = client.get(f"{url}/healthz").json()
        torch_loaded = _maps_torch(process.pid) if sys.platform == "linux" else False
    labels = [line["message"] for line in lines if "progress" in line]
    assert "result" in lines[-1], (lines[-1], log_path.read_text()[-2000:])
    assert lines[-1]["result"]["hits"][0]["service_id"] == "h1"
    assert not any("indexing" in label for label in labels), labels
    assert all(label.startswith(("loading the hybrid method", "reading the registry", "searching with hybrid"))
               for label in labels), labels
    assert health["status"] == "ok" and not torch_loaded


def test_over_stdio_the_first_search_while_loading_waits_and_succeeds(indexed_registry, tmp_path):
    """The same cold start over MCP stdio, as a desktop agent's SDK client starts the server: the first
    `search_services` (hybrid) is sent right after `initialize`, when the loading has only begun (it starts with the
    end of the handshake), and it is answered with hits, not an error; what it hears says "loading"."""
    from mcp import Client

    from tests.serve.helpers import server_env, stdio_server

    home = tmp_path / "home"
    params = stdio_server(indexed_registry, home, env=server_env(home, preload=["hybrid"], loading_wait_s=60.0))
    heard: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async def session():
        async with Client(params, read_timeout_seconds=180) as client:
            return await client.call_tool("search_services", {"query": "the h1 thing", "method": "hybrid"},
                                          progress_callback=progress)

    answer = asyncio.run(session())
    assert not answer.is_error, answer.content
    assert answer.structured_content["hits"][0]["service_id"] == "h1"
    assert not any("indexing" in message for message in heard), heard
    assert all(message.startswith(("loading the hybrid method", "reading the registry", "searching with hybrid"))
               for message in heard), heard
