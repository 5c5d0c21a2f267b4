"""Rounds streamed through an engine in bounded chunks: order, accounting as one round, retries, the cache."""

from __future__ import annotations

import pickle

from a2x_local.llm import Request, Usage
from a2x_local.llm.cache import AnswerCache, CachedEngine
from a2x_local.llm.replicas import WireJson, slices, wire
from a2x_local.llm.types import JsonConstraint, RegexConstraint
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.schemas import design_model
from a2x_local.testing import ScriptedEngine


def _requests(count: int) -> list[Request]:
    return [Request([{"role": "user", "content": f"question {i}"}], RegexConstraint(r"\d+"), label="t",
                    context={"i": i}) for i in range(count)]


def _echo(request: Request) -> str:
    return str(request.context["i"])


def test_a_stream_answers_in_order_in_chunks_and_counts_one_round() -> None:
    engine = ScriptedEngine(_echo)
    made: list[int] = []

    def lazily():
        for request in _requests(10):
            made.append(request.context["i"])
            yield request

    answers = []
    for result in engine.stream(lazily(), chunk=4):
        answers.append(result.value)
        assert len(made) <= len(answers) + 4 - 1 + 1    # never more than one chunk made ahead of the answers
    assert answers == [str(i) for i in range(10)]
    assert engine.batches == [4, 4, 2]
    assert engine.usage.rounds == 1 and engine.usage.by_label["t"].calls == 10


def test_a_stream_with_retries_counts_the_retry_round_once() -> None:
    seen: set[int] = set()

    def flaky(request: Request) -> str:   # every even question answers invalid the first time
        i = request.context["i"]
        if i % 2 == 0 and i not in seen:
            seen.add(i)
            return "no"
        return str(i)

    engine = ScriptedEngine(flaky)
    results = list(engine.stream(_requests(9), chunk=3))
    assert all(r.ok for r in results) and [r.value for r in results] == [str(i) for i in range(9)]
    assert engine.usage.rounds == 2             # the same as one generate() of all nine: a round and its retry
    whole = ScriptedEngine(flaky)
    seen.clear()
    whole.generate(_requests(9))
    assert whole.usage.rounds == 2
    assert engine.usage.by_label["t"].retries == whole.usage.by_label["t"].retries == 5


def test_usage_one_round_nests_and_counts_plain_rounds_outside() -> None:
    usage = Usage()
    with usage.one_round():
        usage.count_round(1)
        with usage.one_round():
            usage.count_round(1)
        usage.count_round(1)
    assert usage.rounds == 1
    usage.count_round(2)
    assert usage.rounds == 2


def test_a_cached_engine_streams_and_stores_every_chunk(tmp_path, registry_db) -> None:
    engine = CachedEngine(ScriptedEngine(_echo), AnswerCache(registry_db))
    assert [r.value for r in engine.stream(_requests(7), chunk=3)] == [str(i) for i in range(7)]
    again = CachedEngine(ScriptedEngine(_echo), AnswerCache(registry_db))
    assert all(r.cached for r in again.stream(_requests(7), chunk=5))
    assert again.usage.by_label["t"].cached == 7 and again.usage.rounds == 0


def test_requests_travel_to_replicas_with_their_schema_and_context() -> None:
    model = design_model(BuildConfig.defaults(), 2, 5)
    request = Request([{"role": "user", "content": "design"}], JsonConstraint(model), max_tokens=99, label="d",
                      context={"node": "root"})
    sent = pickle.loads(pickle.dumps(wire(request)))
    assert isinstance(sent.constraint, WireJson) and isinstance(sent.constraint, JsonConstraint)
    assert sent.constraint.schema() == model.model_json_schema()
    assert (sent.messages, sent.max_tokens, sent.label, dict(sent.context)) == (
        request.messages, 99, "d", {"node": "root"})
    plain = _requests(1)[0]
    assert wire(plain).constraint == plain.constraint


def test_slices_cover_every_request_once_in_order() -> None:
    for count, parts in ((10, 3), (3, 8), (1, 1), (100, 16)):
        cut = slices(count, parts)
        assert [i for part in cut for i in part] == list(range(count))
        assert len(cut) == min(count, parts) and all(len(part) for part in cut)
    assert slices(0, 4) == []
