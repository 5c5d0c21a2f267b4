"""The full-catalogue baseline: one prompt with every service, bounded positions, over-context detection."""

from __future__ import annotations

import re

import pytest

from a2x_local.search.llm.baselines import FullCatalogue
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.selection import ContextWindowError
from a2x_local.search.types import SearchRequest
from a2x_local.testing import ScriptedEngine
from tests.search.a2x_helpers import Oracle, sample_services, sample_tree


def _full(wanted, *, window=32768, **oracle_kwargs):
    oracle = Oracle(sample_tree(), wanted, **oracle_kwargs)
    engine = ScriptedEngine(oracle, context_window=window)
    services = list(sample_services().values())
    return FullCatalogue(services, engine, LlmSearchConfig.defaults()), engine, oracle, services


def test_every_service_in_one_prompt_and_the_answer_maps_back_to_ids():
    method, engine, oracle, services = _full({"q1": {"w2", "x1"}, "q2": {"p1"}})
    answers = method.search_batch([SearchRequest("q1"), SearchRequest("q2")])
    assert [a.ids for a in answers] == [["w2", "x1"], ["p1"]]
    assert engine.batches == [2]
    request = oracle.seen[0]
    assert request.context["options"] == [s.id for s in services]
    assert request.messages[1]["content"].count("\n") >= len(services)
    assert re.fullmatch(request.constraint.pattern, str(len(services)))
    assert not re.fullmatch(request.constraint.pattern, str(len(services) + 1))
    assert all(a.cost.candidates_shown == len(services) and a.cost.calls == 1 and a.cost.rounds == 1 for a in answers)
    assert sum(a.cost.prompt_tokens for a in answers) == engine.usage.total().prompt_tokens
    assert answers[0].cost.prompt_tokens == method.prompt_tokens("q1")


def test_get_one_falls_back_when_nothing_is_picked():
    method, _, _, _ = _full({"q": {"h2", "w3"}}, one_none=True)
    answer = method.search_batch([SearchRequest("q", mode="get_one")])[0]
    assert answer.ids == ["h2"] and answer.cost.rounds == 2
    assert [c["call"] for c in answer.trace["selection"]] == ["full", "full_fallback"]


def test_a_catalogue_larger_than_the_context_window_is_reported_not_truncated():
    method, engine, _, services = _full({"q": {"w2"}}, window=120)
    with pytest.raises(ContextWindowError) as info:
        method.search_batch([SearchRequest("q")])
    message = info.value.message
    assert f"{len(services)} services need" in message and "context window of 120 tokens" in message
    assert "prompt tokens" in message and info.value.hint and info.value.exit_code == 1
    assert engine.batches == []


def test_a_failed_catalogue_call_is_an_error_not_a_miss():
    services = list(sample_services().values())
    method = FullCatalogue(services, ScriptedEngine(lambda request: "not a number"), LlmSearchConfig.defaults())
    answer = method.search_batch([SearchRequest("q")])[0]
    assert answer.ids == [] and answer.error is not None and "selection calls failed" in answer.error
    method, _, _, _ = _full({})
    assert method.search_batch([SearchRequest("q")])[0].error is None   # NONE is a valid answer
