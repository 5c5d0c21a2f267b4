"""The method registry: retrievers by name, typed options, batch answers, and room for methods added later."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from a2x_local.errors import UserError
from a2x_local.search.methods import (
    MethodSpec,
    make_method,
    make_retriever,
    method_names,
    parse_option_pairs,
    register_method,
    unregister_method,
)
from a2x_local.search.types import SearchAnswer, SearchCost, SearchRequest
from a2x_local.settings import Settings
from tests.support.processes import python_command, tree_env

# Each query shares words with its service (for BM25) and means the same (for dense).
QUERIES = {"weather forecast for Berlin tomorrow": "weather", "convert 100 dollars to euros, which currency rate":
           "currency", "search flights from Rome to Oslo": "flights", "translate this letter into the German language":
           "translate"}


@pytest.mark.parametrize("name", ["dense", "bm25", "hybrid"])
def test_each_retriever_finds_the_obvious_service(settings: Settings, name: str) -> None:
    method = make_method(name, settings)
    assert method.name == name and method.ranked
    requests = [SearchRequest(q, k=3) for q in QUERIES]
    answers = method.search_batch(requests)
    assert [a.query for a in answers] == list(QUERIES)
    for answer, expected in zip(answers, QUERIES.values(), strict=True):
        assert isinstance(answer, SearchAnswer) and answer.ranked
        assert answer.ids[0] == expected, (name, answer.query, answer.ids)
        assert len(answer.ids) <= 3 and len(set(answer.ids)) == len(answer.ids)
        scores = [hit.score for hit in answer.hits]
        assert scores == sorted(scores, reverse=True)
        assert answer.cost.calls == 0 and answer.cost.prompt_tokens == 0 and answer.seconds > 0


def test_hybrid_is_the_fusion_of_the_two_rankings(settings: Settings) -> None:
    hybrid = make_retriever("hybrid", settings)
    query = ["find me somewhere to eat sushi"]
    dense = [h.service_id for h in make_retriever("dense", settings).retrieve(query, 10)[0]]
    bm25 = [h.service_id for h in make_retriever("bm25", settings).retrieve(query, 10)[0]]
    fused = hybrid.retrieve(query, 10)[0]
    for hit in fused:
        expected = sum(1 / (60 + ranking.index(hit.service_id) + 1) for ranking in (dense, bm25)
                       if hit.service_id in ranking)
        assert hit.score == pytest.approx(expected)
    assert {h.service_id for h in fused} == set(dense) | set(bm25)


def test_requests_keep_their_own_k_and_default(settings: Settings) -> None:
    method = make_method("bm25", settings, text="description")
    answers = method.search_batch([SearchRequest("hotel room city dates", k=1), SearchRequest("hotel city")])
    assert len(answers[0].hits) == 1
    assert 1 < len(answers[1].hits) <= 10
    assert method.search_batch([]) == []


def test_options_are_validated(settings: Settings) -> None:
    with pytest.raises(UserError, match="unknown search method 'nope'") as err:
        make_method("nope", settings)
    assert "hybrid" in err.value.hint
    with pytest.raises(UserError, match="fusion_depth: unknown option") as err:
        make_method("dense", settings, fusion_depth=5)
    assert "embedding_model" in err.value.hint
    with pytest.raises(UserError, match="method 'hybrid': rrf_k"):
        make_method("hybrid", settings, rrf_k="zero")
    with pytest.raises(UserError, match="text"):
        make_method("bm25", settings, text="everything")
    # strings from -o KEY=VALUE are converted by the options model
    assert make_method("hybrid", settings, **parse_option_pairs(["rrf-k=5", "fusion_depth=3"])).config.rrf_k == 5
    with pytest.raises(UserError, match="KEY=VALUE"):
        parse_option_pairs(["rrf_k"])


def test_a_later_method_plugs_in(settings: Settings) -> None:
    class EchoOptions(BaseModel):
        model_config = ConfigDict(extra="forbid")
        model: str | None = None

    class Echo:
        name, ranked = "echo", False

        def __init__(self, model: str | None) -> None:
            self.model = model

        def search_batch(self, requests):
            return [SearchAnswer(r.query, [], ranked=False, cost=SearchCost(calls=1)) for r in requests]

    spec = MethodSpec("echo", "test method", EchoOptions, lambda s, db, opts, progress: Echo(opts.model),
                      engine="none", cost="llm", modes=("get_all",))
    register_method(spec)
    try:
        assert "echo" in method_names()
        method = make_method("echo", settings, model="tiny")
        assert method.model == "tiny" and method.search_batch([SearchRequest("q")])[0].cost.calls == 1
        with pytest.raises(ValueError):
            register_method(spec)
        with pytest.raises(UserError, match="not a retriever"):
            make_retriever("echo", settings)
    finally:
        unregister_method("echo")


_LAZY = """
import json, sys
from a2x_local.search import method_names, method_spec
module = "a2x_local.search.llm.methods"
listed = "a2x" in method_names() and module not in sys.modules
spec = method_spec("a2x")
print(json.dumps([listed, module in sys.modules, spec is sys.modules[module].A2X_SPEC]))
"""


def test_a_method_of_the_stage_is_imported_on_first_use():
    """Listing the methods (`--help`) imports none of their modules; asking for one imports its module and gives
    the spec that module holds (in a fresh interpreter, where nothing imported it before)."""
    done = subprocess.run(python_command(_LAZY), capture_output=True, text=True, timeout=120, env=tree_env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [True, True, True]


def test_empty_registry(tmp_path: Path, settings: Settings) -> None:
    with pytest.raises(UserError, match="registry is empty"):
        make_method("bm25", settings, tmp_path / "empty.duckdb")


@pytest.mark.parametrize("name", ["bm25", "hybrid"])
@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_refused_by_the_retrievers_too(settings: Settings, name: str, query: str) -> None:
    method = make_method(name, settings)
    with pytest.raises(UserError, match=r"the query is empty \(query 2 of 2\)") as err:
        method.search_batch([SearchRequest("weather in Rome"), SearchRequest(query)])
    assert err.value.code == "EmptyQuery"
