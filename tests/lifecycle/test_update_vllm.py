"""Plumbing: incremental placement by a real model (the tiny random model on vLLM), through the answer cache.

The random model's choices are noise; what is checked is that every descent request is constrained, parsed and
applied, the version is stored, and a repeated placement is answered from the cache without reaching the model.
"""

from __future__ import annotations

import pytest

from a2x_local.db import connect, transaction
from a2x_local.lifecycle import run_update
from a2x_local.llm.cache import AnswerCache, CachedEngine
from a2x_local.registry import Registry
from a2x_local.settings import load_settings
from a2x_local.taxonomy import get_build, load_tree
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import ScriptedEngine
from tests.lifecycle.world import World, service, services, world_config
from tests.support.registries import make_registry

pytestmark = pytest.mark.engine


def test_placement_with_the_tiny_model_on_vllm(db_path, home, vllm_engine):
    make_registry(db_path, services({"weather": ["rain", "snow"], "travel": ["flight"], "music": ["jazz"]}, 3))
    run_build(load_settings(db=db_path), lambda: ScriptedEngine(World()), config=world_config(), model="scripted")
    new = [service("weather", "hail", i) for i in range(3)] + [service("music", "rock", 0)]
    with connect(db_path) as con, transaction(con):
        Registry(con).insert(new)
    settings = load_settings(db=db_path)
    engine = CachedEngine(vllm_engine, AnswerCache(db_path))
    before = vllm_engine.usage.snapshot()
    outcome = run_update(settings, load_engine=lambda: engine, model="tiny-qwen2", resplit=False, activate=False,
                         close_engine=False)
    used = vllm_engine.usage.since(before)
    descend = used.by_label["descend"]
    assert descend.calls >= len(new) and descend.prompt_tokens > 0 and descend.failures < descend.calls
    assert set(outcome.placements) == {s.id for s in new}
    with connect(db_path) as con:
        stored = load_tree(con, outcome.build_id)
        record = get_build(con, outcome.build_id)
    for placement in outcome.placements.values():
        assert placement.nodes and all(placement.service in stored.node(n).services for n in placement.nodes)
    assert stored.service_ids() == {s.id for s in [*services({"weather": ["rain", "snow"], "travel": ["flight"],
                                                              "music": ["jazz"]}, 3), *new]}
    assert record.engine_settings["engine"] == "vllm" and record.engine_settings["answer_cache"]

    # The same placement again (from the same tree): every descent answer comes from the cache.
    again_before = vllm_engine.usage.snapshot()
    again = run_update(settings, load_engine=lambda: engine, model="tiny-qwen2", resplit=False, activate=False,
                       base_id=record.parent_id, close_engine=False)
    sent = vllm_engine.usage.since(again_before).by_label.get("descend")
    assert sent is not None and sent.calls == 0 and sent.cached >= len(new)
    assert {s: p.nodes for s, p in again.placements.items()} == {s: p.nodes for s, p in outcome.placements.items()}
