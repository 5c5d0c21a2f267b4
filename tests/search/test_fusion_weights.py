"""Weighted fusion: the weights' effect on fuse_rows, where a hybrid search takes its weights from, and the tuning
helper (`a2x-local eval tune`) that chooses and stores them per registry."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.registry import Registry
from a2x_local.search import LabelledQuery, clear_fusion, make_method, tune_fusion
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import FUSION_SETTING
from a2x_local.search.retrieval.fusion import fuse_rows
from a2x_local.search.retrieval.tuning import held_out
from a2x_local.search.retrieval.weights import fusion_weights
from tests.search.test_hybrid import reciprocal_rank_fusion

# Hand-written queries for the ten-service registry (tests/support/registries.py), two wordings per service.
QUERIES = [
    ("q1", "will it rain in Berlin tomorrow", {"weather"}), ("q2", "weather forecast for Rome", {"weather"}),
    ("q3", "how many euros is 100 dollars", {"currency"}), ("q4", "exchange rate of the yen", {"currency"}),
    ("q5", "I need a room for two nights", {"hotels"}), ("q6", "book a hotel in Paris", {"hotels"}),
    ("q7", "send an email to Bob", {"email"}), ("q8", "write a mail to my boss", {"email"}),
    ("q9", "latest news headlines", {"news"}), ("q10", "what happened in the world today", {"news"}),
    ("q11", "a flight to Madrid", {"flights"}), ("q12", "plane tickets for next week", {"flights"}),
]


def _labelled() -> list[LabelledQuery]:
    return [LabelledQuery(qid, text, frozenset(correct)) for qid, text, correct in QUERIES]


def test_weights_scale_each_ranking() -> None:
    first, second = np.array([4, 2, 0]), np.array([1, 2, 3])
    assert [row for row, _ in fuse_rows([first, second], 5, 60, 5, (1.0, 0.0))] == [4, 2, 0]   # first alone
    assert [row for row, _ in fuse_rows([first, second], 5, 60, 5, (0.0, 1.0))] == [1, 2, 3]   # second alone
    rng = np.random.default_rng(3)
    for _ in range(30):
        size = int(rng.integers(2, 30))
        rankings = [rng.permutation(size)[: int(rng.integers(1, size + 1))] for _ in range(2)]
        weights = [float(w) for w in rng.uniform(0.05, 3, 2)]
        reference = reciprocal_rank_fusion([r.tolist() for r in rankings], k=20, weights=weights)
        fused = fuse_rows(rankings, size, 20, size, weights)
        assert [row for row, _ in fused] == [row for row, _ in reference]
        assert [s for _, s in fused] == pytest.approx([s for _, s in reference])
    with pytest.raises(ValueError, match="weights"):
        fuse_rows([first, second], 5, 60, 5, (1.0,))


def test_where_the_weights_come_from() -> None:
    config = RetrievalConfig.defaults(dense_weight=0.7)
    assert fusion_weights(config, None, "m1").to_dict() == {"dense_weight": 0.7, "bm25_weight": 1.0, "rrf_k": 60.0,
                                                            "source": "configuration"}
    stored = {"dense_weight": 0.2, "bm25_weight": 0.8, "rrf_k": 10, "model": "m1", "queries": "dev.json"}
    tuned = fusion_weights(config, stored, "m1")
    assert (tuned.dense_weight, tuned.bm25_weight, tuned.rrf_k, tuned.source) == (0.2, 0.8, 10.0, "registry")
    assert "dev.json" in tuned.note
    other = fusion_weights(config, stored, "m2")      # tuned with another embedding model: not used
    assert (other.dense_weight, other.source) == (0.7, "configuration") and "another embedding model" in other.note
    given = fusion_weights(config, stored, "m1", given=["dense_weight"])    # an option wins over the registry
    assert (given.dense_weight, given.bm25_weight) == (0.7, 0.8)
    broken = {**stored, "rrf_k": -1}
    assert fusion_weights(config, broken, "m1").source == "configuration"


def test_the_split_is_stable_and_near_the_share() -> None:
    ids = [f"query-{i}" for i in range(2000)]
    assert [held_out(i, 0.5) for i in ids] == [held_out(i, 0.5) for i in ids]
    assert 900 < sum(held_out(i, 0.5) for i in ids) < 1100
    assert sum(held_out(i, 0.2) for i in ids) < sum(held_out(i, 0.5) for i in ids)


def test_tuning_chooses_stores_and_the_hybrid_search_uses_it(settings) -> None:
    report = tune_fusion(settings, _labelled(), k=1, queries_name="hand.json")
    rows = {row["label"]: row for row in report.rows}
    assert set(rows) == {"chosen", "configured", "dense alone", "bm25 alone"}
    best_single = max(rows["dense alone"]["tune_hit@1"], rows["bm25 alone"]["tune_hit@1"])
    assert rows["chosen"]["tune_hit@1"] >= max(best_single, rows["configured"]["tune_hit@1"])
    assert report.queries["tune"] + report.queries["held_out"] == report.queries["usable"] == len(QUERIES)
    assert report.stored and report.chosen["dense_weight"] + report.chosen["bm25_weight"] == pytest.approx(1.0)
    with connect(settings.db_path) as con:
        record = Registry(con).get_setting(FUSION_SETTING)
    assert record["queries"] == "hand.json" and record["metric"] == "hit@1"
    assert {key: record[key] for key in report.chosen} == report.chosen

    hybrid = make_method("hybrid", settings, settings.db_path)
    assert hybrid.describe()["fusion"]["source"] == "registry"
    assert hybrid.weights.values() == {key: float(value) for key, value in report.chosen.items()}
    flagged = make_method("hybrid", settings, settings.db_path, dense_weight=2.5)
    assert flagged.weights.dense_weight == 2.5 and flagged.weights.bm25_weight == report.chosen["bm25_weight"]
    bm25 = report.chosen["bm25_weight"]
    assert flagged.query_weights(["weather", "天气"]) == [(2.5, bm25), (2.5, bm25 * 0.25)]   # a Chinese query

    assert clear_fusion(settings) and not clear_fusion(settings)
    assert make_method("hybrid", settings, settings.db_path).describe()["fusion"]["source"] == "configuration"


def test_tuning_refuses_what_it_cannot_split(settings) -> None:
    with pytest.raises(UserError, match="none of the queries"):
        tune_fusion(settings, [LabelledQuery("x", "anything", frozenset({"not-here"}))])
    with pytest.raises(UserError, match="too few"):
        tune_fusion(settings, _labelled()[:1])
    with pytest.raises(UserError, match="between 0 and 1"):
        tune_fusion(settings, _labelled(), held_out_share=1.0)


def test_eval_tune_command(registry_db: Path, cli, tmp_path: Path) -> None:
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps([{"id": qid, "query": text, "correct_tools": [{"id": c} for c in correct]}
                                   for qid, text, correct in QUERIES]))
    code, out, err = cli("eval", "tune", "--queries", queries, "--k", "1", "--dry-run", "--json")
    assert code == 0, err
    assert not json.loads(out)["stored"]
    with connect(registry_db) as con:
        assert Registry(con).get_setting(FUSION_SETTING) is None
    code, out, _ = cli("eval", "tune", "-q", queries, "-k", "1")
    assert code == 0 and "chosen:" in out and "stored in the registry" in out
    code, out, _ = cli("eval", "tune", "--clear")
    assert code == 0 and "removed" in out
    code, _, err = cli("eval", "tune")
    assert code == 2 and "--queries" in err
