"""Every search method's declared facts (engine, modes, cost) hold when the method is built, and a mode a method
does not take is refused with one error code by the CLI, the HTTP API and MCP alike."""

from __future__ import annotations

import asyncio
import re

import pytest
from fastapi.testclient import TestClient
from mcp import Client

from a2x_local.components import register_components
from a2x_local.errors import UserError
from a2x_local.search import MODES, ModeError, make_method, method_names, method_spec
from a2x_local.serve.http_api import create_app
from a2x_local.settings import load_settings
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_tree
from tests.serve.helpers import WANTED, make_server, registry_with_trees

# What the composition root registers (compose's method, the plug-ins), done here in the open: the parametrised
# tests below list every method at collection time.
register_components()

LOOPBACK = "http://127.0.0.1"
TWO_NEEDS = "the h1 thing, then the s2 thing"


class NoEngineHere(UserError):
    """What the patched engine loader raises: a method that asks for an engine without being given one."""


@pytest.fixture
def served_registry(db_path):
    registry_with_trees(db_path)
    return db_path


def test_the_composition_root_registered_compose():
    assert "compose" in method_names() and method_spec("compose").engine == "optional"


@pytest.mark.parametrize("name", method_names())
def test_a_methods_declared_facts_hold_when_it_is_built(name: str, served_registry, use_engine, monkeypatch,
                                                        tmp_path) -> None:
    spec = method_spec(name)
    assert spec.engine in ("none", "optional", "required") and spec.cost in ("retrieval", "llm", "llm-heavy")
    assert spec.cost_note, f"{name}: say the cost in words"
    assert set(spec.modes) <= set(MODES)
    assert (spec.cost == "retrieval") == (spec.engine == "none"), "only methods without a model cost retrieval"
    assert spec.takes_engine == ("engine" in spec.options.model_fields)
    started = use_engine("no-engine", lambda config: (_ for _ in ()).throw(NoEngineHere("this test gives no engine")))
    config = tmp_path / "config.toml"
    config.write_text('[engine]\nname = "no-engine"\n', encoding="utf-8")   # the engine a method starts itself
    monkeypatch.setenv("A2X_CONFIG", str(config))
    settings = load_settings(db=served_registry)
    if spec.needs_engine:
        with pytest.raises(NoEngineHere):
            make_method(name, settings)
        assert len(started) == 1, "a method that needs an engine asked for one"
        started.clear()
        method = make_method(name, settings, engine=ScriptedEngine(Oracle(sample_tree(), WANTED)))
    else:
        method = make_method(name, settings, **spec.engine_free)
        if spec.takes_engine:   # optional: runs without one, and uses one when given
            make_method(name, settings, engine=ScriptedEngine(Oracle(sample_tree(), WANTED)))
    assert started == [], f"{name} started an engine of its own"
    assert method.name == name and callable(method.search_batch)
    for mode in MODES:
        if mode in spec.modes:
            assert spec.check_mode(mode) == mode
        else:
            with pytest.raises(ModeError):
                spec.check_mode(mode)


def _mode_refusals(db_path, cli) -> dict[str, tuple[object, str]]:
    """The same refused mode through each door: (status or exit code, the error's text)."""
    found = {}
    result = cli("search", "x", "-m", "bm25", "--mode", "get_one")
    found["cli flags"] = (result.code, result.err)
    result = cli("search", TWO_NEEDS, "-m", "compose", "-o", "step_method=bm25", "--mode", "get_one", "--json")
    found["cli compose"] = (result.code, result.json()["error"] + " " + result.json()["message"])
    server = make_server(db_path)
    try:
        with TestClient(create_app(server.discovery, planning=server.planning), base_url=LOOPBACK) as client:
            for door, path, body in (("http search", "/v1/search", {"query": "x", "method": "bm25"}),
                                     ("http compose", "/v1/compose", {"request": TWO_NEEDS, "method": "bm25"})):
                answer = client.post(path, json={**body, "mode": "get_one"})
                found[door] = (answer.status_code, answer.json()["error"] + " " + answer.json()["message"])

        async def over_mcp():
            async with Client(server.mcp) as client:
                return await client.call_tool("search_services", {"query": "x", "method": "bm25", "mode": "get_one"})

        refused = asyncio.run(over_mcp())
        found["mcp"] = ("error" if refused.is_error else "answered", refused.content[0].text)
    finally:
        server.close()
    return found


def test_a_refused_mode_is_one_error_with_one_code_everywhere(served_registry, cli) -> None:
    with pytest.raises(ModeError) as caught:
        method_spec("bm25").check_mode("get_one")
    assert caught.value.code == "BadMode" and caught.value.message.endswith("has no modes")
    found = _mode_refusals(served_registry, cli)
    assert found["cli flags"][0] == 2                               # a usage error while the flags are parsed
    assert found["cli compose"][0] == 1                             # found later, by compose's plan: exit 1
    assert found["http search"][0] == found["http compose"][0] == 400
    assert found["mcp"][0] == "error"
    step = caught.value.message.replace("method 'bm25'", "step method 'bm25'")
    for door, (_, text) in found.items():
        flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())    # usage errors come in a wrapped panel
        assert "BadMode" in flat, (door, text)
        assert caught.value.message in flat or step in flat, (door, text)


def test_the_server_offers_what_it_can_run(served_registry) -> None:
    server = make_server(served_registry)          # no model
    try:
        with TestClient(create_app(server.discovery, planning=server.planning), base_url=LOOPBACK) as client:
            infos = {info["name"]: info for info in client.get("/v1/methods").json()}
            unknown = client.post("/v1/search", json={"query": "x", "method": "nope"}).json()
            composed = client.post("/v1/search", json={"query": TWO_NEEDS, "method": "compose", "k": 3,
                                                        "detail": "full"})   # the cost fields: only when asked
            step = client.post("/v1/compose", json={"request": TWO_NEEDS, "method": "nope"}).json()
        offered = server.state.offered()
    finally:
        server.close()
    assert set(infos) == set(method_names())
    for name, info in infos.items():
        spec = method_spec(name)
        assert (info["engine"], info["cost"], info["modes"]) == (spec.engine, spec.cost, list(spec.modes))
        assert info["available"] == (not spec.needs_engine) and info["llm"] == spec.needs_engine
    assert infos["compose"]["available"] and not infos["a2x"]["available"]
    assert offered == [name for name, info in sorted(infos.items()) if info["available"]]
    assert unknown["error"] == "UnknownMethod" and unknown["hint"] == f"choose one of: {', '.join(offered)}"
    assert composed.status_code == 200, composed.text                 # compose runs without a model here
    answer = composed.json()
    assert answer["method"] == "compose" and answer["hits"] and answer["cost"]["calls"] == 0
    assert step["error"] == "UnknownMethod" and "compose" not in step["hint"] and "a2x" not in step["hint"]
    assert step["hint"] == f"choose one of: {', '.join(n for n in offered if n != 'compose')}"


def test_mcp_offers_compose_no_step_of_its_own(served_registry) -> None:
    server = make_server(served_registry)

    async def schemas():
        async with Client(server.mcp) as client:
            return {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}

    try:
        found = asyncio.run(schemas())
    finally:
        server.close()
    step = found["compose_plan"]["properties"]["method"]["description"]
    search = found["search_services"]["properties"]["method"]["description"]
    assert "compose" in search and "compose" not in step and "bm25" in step and "a2x" not in search
