"""BM25: identifier splitting, stemming, stop words, CJK pairs, rankings on the small registry, save and load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from a2x_local.errors import UserError
from a2x_local.search.retrieval.bm25 import Bm25Index, Bm25Tokenizer, split_identifiers, top_rows
from a2x_local.search.retrieval.config import RetrievalConfig, TextOptions
from a2x_local.search.retrieval.text import service_texts
from tests.support.registries import SERVICES


def test_split_identifiers() -> None:
    assert split_identifiers("getWeatherForecast") == "get Weather Forecast"
    assert split_identifiers("stock_code") == "stock code"
    assert split_identifiers("parseHTTPResponse_v2") == "parse HTTP Response v2"
    assert split_identifiers("plain words") == "plain words"


def test_tokenizer_splits_stems_and_drops_stop_words() -> None:
    tokens = Bm25Tokenizer(RetrievalConfig.defaults()).tokenize(["getWeatherForecasts for the cities"])[0]
    assert tokens == ["get", "weather", "forecast", "citi"]
    raw = Bm25Tokenizer(RetrievalConfig.defaults(split_identifiers=False, bm25_stemmer="none", bm25_stopwords="none"))
    assert raw.tokenize(["getWeatherForecasts for the cities"])[0] == ["getweatherforecasts", "for", "the", "cities"]


def test_cjk_text_becomes_character_pairs() -> None:
    tokenizer = Bm25Tokenizer(RetrievalConfig.defaults())
    assert tokenizer.words("查询天气 API") == ["查询", "询天", "天气", "api"]
    assert tokenizer.words("银") == ["银"]
    whole = Bm25Tokenizer(RetrievalConfig.defaults(cjk_bigrams=False))
    assert whole.words("查询天气 API") == ["查询天气", "api"]


def test_unknown_stemmer_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown stemmer"):
        Bm25Tokenizer(RetrievalConfig.defaults(bm25_stemmer="klingon"))


def _index(config: RetrievalConfig | None = None) -> Bm25Index:
    config = config or RetrievalConfig.defaults()
    return Bm25Index.build(service_texts(SERVICES, TextOptions()), [s.id for s in SERVICES], config)


def test_rankings_on_the_small_registry() -> None:
    index = _index()
    ids = index.ids
    results = index.search(["convert currencies", "weather forecast", "send emails", "qwertyuiop"], k=3)
    assert ids[results[0][0][0]] == "currency"          # "currencies" stems to the identifier's "currency"
    assert ids[results[1][0][0]] == "weather"           # found through the split identifier and the description
    assert ids[results[2][0][0]] == "email"
    assert results[3] == []                             # no shared word: nothing, rather than arbitrary services
    # only services sharing a word are returned, best first
    scores = [score for _, score in results[1]]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_identifier_splitting_is_what_finds_the_tool() -> None:
    query = ["restaurants near me"]
    split = _index().search(query, k=1)
    assert _index().ids[split[0][0][0]] == "restaurants"
    services = [s.__class__(s.id, s.type, s.name, "", s.metadata) for s in SERVICES]  # names only
    names_only = service_texts(services, TextOptions())
    unsplit = Bm25Index.build(names_only, [s.id for s in SERVICES], RetrievalConfig.defaults(split_identifiers=False))
    assert unsplit.search(query, k=1) == [[]]           # "findRestaurants" is one unknown word without splitting
    resplit = Bm25Index.build(names_only, [s.id for s in SERVICES], RetrievalConfig.defaults())
    assert resplit.ids[resplit.search(query, k=1)[0][0][0]] == "restaurants"


def test_save_and_load_give_the_same_scores(tmp_path: Path) -> None:
    index = _index()
    index.save(tmp_path)
    loaded = Bm25Index.load(tmp_path, index.ids, RetrievalConfig.defaults())
    queries = ["book a hotel room", "stock price"]
    assert np.allclose(index.scores(queries), loaded.scores(queries))
    with pytest.raises(UserError, match="10 documents for 3 services") as err:
        Bm25Index.load(tmp_path, index.ids[:3], RetrievalConfig.defaults())
    assert "--force" in err.value.hint


def test_empty_documents_are_indexed_but_never_found() -> None:
    index = Bm25Index.build(["", "weather today"], ["empty", "w"], RetrievalConfig.defaults())
    assert index.search(["weather"], k=5) == [[(1, pytest.approx(index.scores(["weather"])[0][1]))]]
    assert index.search([""], k=5) == [[]]


def test_top_rows_is_deterministic_under_ties() -> None:
    scores = np.array([0.0, 2.0, 1.0, 2.0, 2.0, 0.5], dtype=np.float32)
    assert top_rows(scores, 2) == [(1, 2.0), (3, 2.0)]
    assert top_rows(scores, 10) == [(1, 2.0), (3, 2.0), (4, 2.0), (2, 1.0), (5, 0.5)]
    assert top_rows(np.zeros(4, dtype=np.float32), 3) == []
