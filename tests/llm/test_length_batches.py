"""Length-planned embedding batches: every text once, bounded batches, bounded padding."""

from __future__ import annotations

import random

import pytest

from a2x_local.llm.length_batches import length_batches


def check_plan(lengths: list[int], max_batch: int, slack: float) -> list[list[int]]:
    batches = length_batches(lengths, max_batch, slack)
    flat = [index for batch in batches for index in batch]
    assert sorted(flat) == list(range(len(lengths)))                       # every text exactly once
    assert all(1 <= len(batch) <= max_batch for batch in batches)
    for batch in batches:
        sizes = [max(1, lengths[i]) for i in batch]
        if len(batch) > 1:                                                 # a lone text cannot be split further
            assert len(batch) * max(sizes) <= slack * sum(sizes) + 1e-9
    longest = [max(lengths[i] for i in batch) for batch in batches]
    assert longest == sorted(longest)                                      # shortest texts first
    return batches


def test_random_plans_keep_every_text_and_bound_the_padding() -> None:
    rng = random.Random(7)
    for _ in range(300):
        lengths = [rng.choice([rng.randint(0, 40), rng.randint(40, 600)]) for _ in range(rng.randint(0, 90))]
        check_plan(lengths, rng.randint(1, 70), rng.choice([1.0, 1.25, 2.0, 8.0]))


def test_mixed_queries_are_cut_where_padding_would_dominate() -> None:
    # 31 short queries and one very long one (what 32 concurrent ToolRet queries look like): the long one is
    # encoded on its own instead of padding the others to its length.
    lengths = [30] * 31 + [256]
    batches = check_plan(lengths, 64, 1.25)
    assert batches == [list(range(31)), [31]]


def test_equal_lengths_fill_whole_batches() -> None:
    assert check_plan([12] * 10, 4, 1.25) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert length_batches([], 8) == []


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        length_batches([3], 0)
    with pytest.raises(ValueError, match="slack"):
        length_batches([3], 4, 0.5)
