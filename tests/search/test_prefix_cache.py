"""The simulated persistent prefix cache (block-level, LRU, bounded) that the benchmarks count computed tokens with,
and the meter that applies it to a stream of engine rounds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from a2x_local.llm.tokens import chat_token_ids
from a2x_local.llm.types import RegexConstraint, Request
from a2x_local.testing import CacheMeter, ComputedTokens, PrefixCache, ScriptedEngine


def test_only_whole_blocks_of_a_shared_prefix_are_served_and_never_the_last_token():
    cache = PrefixCache(capacity_tokens=1000, block_tokens=4)
    assert cache.cached(list(range(10))) == 0                       # cold: nothing served, two blocks stored
    assert cache.cached([*range(10), 99, 98]) == 8                  # the two whole blocks; the partial one is not
    assert cache.cached([*range(6), 50, 51, 52, 53]) == 4           # the first block only: the second differs
    # A prompt identical to a cached one still computes its last token: 8 tokens fully cached serve only 4.
    assert cache.cached(list(range(8))) == 4
    assert cache.cached(list(range(3))) == 0                        # shorter than a block


def test_a_block_matches_only_after_the_same_earlier_blocks():
    cache = PrefixCache(capacity_tokens=1000, block_tokens=2)
    cache.cached([1, 2, 3, 4, 5])
    # The block (3, 4) is cached, but after (1, 2); behind another first block it is a different block.
    assert cache.cached([9, 9, 3, 4, 5]) == 0
    assert cache.cached([1, 2, 3, 4, 7]) == 4


def test_least_recently_used_blocks_are_evicted_a_prompts_tail_first():
    cache = PrefixCache(capacity_tokens=8, block_tokens=2)           # four blocks
    cache.cached([1, 1, 2, 2, 3, 3, 0])                              # blocks A B C (and a partial one, not kept)
    cache.cached([7, 7, 0])                                          # block D: four held
    assert cache.held_tokens == 8 and cache.evicted == 0
    cache.cached([8, 8, 0])                                          # block E evicts the least recent: C, A's tail
    assert cache.evicted == 1
    assert cache.cached([1, 1, 2, 2, 3, 3, 0]) == 4                  # A and B still served; C was evicted
    assert cache.capacity_tokens == 8


def test_a_zero_capacity_cache_serves_nothing_and_bad_sizes_are_refused():
    cache = PrefixCache(capacity_tokens=0, block_tokens=2)
    cache.cached([1, 2, 3, 4, 5])
    assert cache.cached([1, 2, 3, 4, 5]) == 0
    with pytest.raises(ValueError, match="block size"):
        PrefixCache(block_tokens=0)


def _request(system: str, query: str, label: str) -> Request:
    return Request([{"role": "system", "content": system}, {"role": "user", "content": f"Request: {query}"}],
                   RegexConstraint("[0-9]+"), max_tokens=4, label=label, context={"query": query})


def test_the_meter_sums_what_the_engine_computes_per_query_and_call_type():
    engine = ScriptedEngine(lambda request: "1")
    meter = CacheMeter(chat_token_ids, PrefixCache(), owner=lambda request: request.context["query"])
    shared = "You pick categories for a user's request. " * 20      # far longer than a block
    rounds = [[_request(shared, "weather in Paris", "descend"), _request(shared, "book a flight", "descend")],
              [_request(shared, "weather in Paris", "descend"), _request("Other instructions.", "book a flight",
                                                                         "select")]]
    for requests in rounds:
        meter.observe(requests, engine.generate(requests))
    paris, flight = meter.by_owner["weather in Paris"], meter.by_owner["book a flight"]
    # The second prompt of the first round shares the instructions; the third repeats the first whole.
    assert paris.cached > 0 and flight.cached > 0 and paris.calls == 2 and flight.calls == 2
    first = len(chat_token_ids(rounds[0][0].messages))
    assert paris.prompt == 2 * first and paris.cached >= first - 16
    total = meter.total()
    assert total.prompt == engine.usage.total().prompt_tokens and total.calls == 4
    assert total.computed == total.prompt - total.cached + total.completion
    assert set(meter.by_label) == {"descend", "select"} and meter.by_label["select"].cached == 0


def test_a_retried_request_is_seen_twice_and_an_unsent_one_not_at_all():
    meter = CacheMeter(lambda messages: list(range(40)), PrefixCache(block_tokens=8))
    request = _request("s", "q", "select")
    retried = SimpleNamespace(attempts=2, prompt_tokens=80, completion_tokens=3)
    unsent = SimpleNamespace(attempts=0, prompt_tokens=0, completion_tokens=0)
    assert meter.observe([request, request], [retried, unsent]) == [32, 0]
    cost = meter.by_label["select"]
    assert (cost.prompt, cost.cached, cost.completion) == (80, 32, 3) and cost.computed == 51
    assert ComputedTokens(10, 4, 2).to_dict()["computed_tokens"] == 8
