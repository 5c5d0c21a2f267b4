"""The keyword path's vocabulary: normalisation, stemming, embedding synonyms, sizes reported at each stage."""

from __future__ import annotations

from a2x_local.llm.types import Result
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import Planned
from a2x_local.taxonomy.induction.keywords import apply_keywords, merge_vocabulary, normalise, synonym_map
from a2x_local.taxonomy.induction.state import DESIGN, KEYWORDS, BuildState, NodeWork


def work_with(keywords: dict[str, list[str]]) -> NodeWork:
    work = NodeWork(node_id="root", path="All", services=sorted(keywords), mode="keywords", status=KEYWORDS)
    work.keywords = {k: list(v) for k, v in keywords.items()}
    return work


def test_normalise_to_lower_snake_case():
    assert normalise("Stock-Market ") == "stock_market"
    assert normalise("__weather__") == "weather" and normalise("!!") == ""


def test_answers_are_parsed_per_service_and_failures_counted():
    state = BuildState.start(["a", "b"])
    work = work_with({})
    plan = Planned(request=None, node="root", items=("a", "b"))          # type: ignore[arg-type]
    apply_keywords(work, plan, Result("1: weather, weather_\n2: stocks", "1: weather, weather_\n2: stocks",
                                      1, 1, "stop", 0.0), state)
    assert work.keywords == {"a": ["weather"], "b": ["stocks"]}
    apply_keywords(work, plan, Result("", None, 1, 1, "invalid", 0.0, error="bad"), state)
    assert state.counters["keywords_failed_services"] == 2


def test_stemming_merges_inflections_and_counts_services_per_keyword():
    work = work_with({"a": ["payments", "bank"], "b": ["payment"], "c": ["payment", "paying"], "d": ["banks"]})
    sizes = merge_vocabulary(work, BuildConfig.defaults(keyword_merge="stem"))
    assert sizes["raw"] == 5 and sizes["stemmed"] == 3 and sizes["merged"] == 3
    assert work.vocabulary[0] == ["payment", 3]
    assert work.keywords["a"] == ["payment", "bank"] and work.keywords["d"] == ["bank"]
    assert work.status == DESIGN


def test_embedding_merge_joins_synonyms_under_the_most_frequent_word():
    mapping = synonym_map(["movie", "weather", "film", "stocks", "stock_market"], 0.8)
    assert mapping["film"] == "movie" and mapping["stock_market"] == "stocks"
    assert mapping["weather"] == "weather" and mapping["movie"] == "movie"
    work = work_with({"a": ["movie"], "b": ["movie"], "c": ["film"], "d": ["weather"]})
    sizes = merge_vocabulary(work, BuildConfig.defaults(keyword_merge="embedding"))
    assert (sizes["raw"], sizes["stemmed"], sizes["merged"]) == (3, 3, 2)
    assert work.vocabulary == [["movie", 3], ["weather", 1]]
