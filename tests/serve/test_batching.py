"""Searches from many clients coalesced per method: shared batches, bounded size, own time-outs, own errors."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import pytest

from a2x_local.errors import UserError
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest
from a2x_local.serve.batching import SearchBatcher
from a2x_local.serve.errors import TimedOut


class Recorder(SearchMethod):
    """A method that answers each query with a hit named after it, and records every batch it was given."""

    name = "recorder"
    ranked = True

    def __init__(self, *, delay_s: float = 0.0, refuse: str | None = None, hold: threading.Event | None = None):
        self.batches: list[list[str]] = []
        self.delay_s = delay_s
        self.refuse = refuse
        self.hold = hold

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        queries = [request.query for request in requests]
        self.batches.append(queries)
        if self.hold is not None:
            self.hold.wait(10)
        time.sleep(self.delay_s)
        if self.refuse in queries:
            raise UserError(f"cannot answer {self.refuse!r}")
        return [SearchAnswer(query=q, hits=[Hit(f"id-{q}")], ranked=True) for q in queries]


def run(coroutine):
    return asyncio.run(coroutine)


def test_requests_arriving_together_share_one_batch_and_keep_their_answers():
    method = Recorder()
    on_batch: list[tuple[str, int]] = []

    async def scenario():
        batcher = SearchBatcher(window_s=0.2, max_batch=32, concurrency=2,
                                on_batch=lambda m, n: on_batch.append((m, n)))
        answers = await asyncio.gather(*(batcher.search(method, SearchRequest(f"q{i}"), 10) for i in range(6)))
        await batcher.close()
        return answers

    answers = run(scenario())
    assert [a.ids for a in answers] == [[f"id-q{i}"] for i in range(6)]
    assert method.batches == [[f"q{i}" for i in range(6)]] and on_batch == [("recorder", 6)]


def test_a_batch_holds_at_most_max_batch_queries():
    method = Recorder()

    async def scenario():
        batcher = SearchBatcher(window_s=0.2, max_batch=4, concurrency=4)
        await asyncio.gather(*(batcher.search(method, SearchRequest(f"q{i}"), 10) for i in range(10)))
        await batcher.close()

    run(scenario())
    assert sorted(len(batch) for batch in method.batches) == [2, 4, 4]
    assert sorted(q for batch in method.batches for q in batch) == sorted(f"q{i}" for i in range(10))


def test_requests_that_arrive_while_a_batch_runs_form_the_next_batch():
    method = Recorder(delay_s=0.3)

    async def scenario():
        batcher = SearchBatcher(window_s=0.01, max_batch=32, concurrency=1)
        first = asyncio.ensure_future(batcher.search(method, SearchRequest("first"), 10))
        await asyncio.sleep(0.1)  # the first batch is running now
        rest = [batcher.search(method, SearchRequest(f"later{i}"), 10) for i in range(5)]
        await asyncio.gather(first, *rest)
        await batcher.close()

    run(scenario())
    assert method.batches == [["first"], [f"later{i}" for i in range(5)]]


def test_a_request_that_fails_fails_alone():
    method = Recorder(refuse="bad")

    async def scenario():
        batcher = SearchBatcher(window_s=0.2, max_batch=32, concurrency=1)
        outcomes = await asyncio.gather(*(batcher.search(method, SearchRequest(q), 10) for q in ("a", "bad", "c")),
                                        return_exceptions=True)
        await batcher.close()
        return outcomes

    good, bad, other = run(scenario())
    assert good.ids == ["id-a"] and other.ids == ["id-c"]
    assert isinstance(bad, UserError) and "bad" in bad.message
    # The shared batch failed, then each request ran alone.
    assert method.batches[0] == ["a", "bad", "c"] and sorted(method.batches[1:]) == [["a"], ["bad"], ["c"]]


def test_a_slow_search_times_out_without_holding_up_the_others():
    hold = threading.Event()
    slow, quick = Recorder(hold=hold), Recorder()

    async def scenario():
        batcher = SearchBatcher(window_s=0.0, max_batch=32, concurrency=1)
        slow_call = batcher.search(slow, SearchRequest("slow"), 0.3)
        quick_call = batcher.search(quick, SearchRequest("quick"), 10)
        outcomes = await asyncio.gather(slow_call, quick_call, return_exceptions=True)
        hold.set()
        await batcher.close()
        return outcomes

    timed_out, answer = run(scenario())
    assert isinstance(timed_out, TimedOut) and timed_out.status == 504 and "0.3 s" in timed_out.message
    assert answer.ids == ["id-quick"]


def test_a_request_that_times_out_before_its_batch_starts_is_never_sent():
    hold = threading.Event()
    method = Recorder(hold=hold)

    async def scenario():
        batcher = SearchBatcher(window_s=0.0, max_batch=32, concurrency=1)
        first = asyncio.ensure_future(batcher.search(method, SearchRequest("first"), 10))
        await asyncio.sleep(0.05)
        with pytest.raises(TimedOut):
            await batcher.search(method, SearchRequest("waits"), 0.1)
        hold.set()
        await first
        await asyncio.sleep(0.1)
        await batcher.close()

    run(scenario())
    assert method.batches == [["first"]]
