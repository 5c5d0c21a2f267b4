"""Reciprocal rank fusion against hand-computed scores, and the search path's numpy fusion against it."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np
import pytest

from a2x_local.search.retrieval.fusion import fuse_rows

Item = TypeVar("Item", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Item]], k: float = 60.0,
                           weights: Sequence[float] | None = None) -> list[tuple[Item, float]]:
    """The plain-Python definition fuse_rows implements (with weights): items by fused score ``sum(w / (k + rank))``
    (rank 1 = best), best first.

    Ties keep the order in which items were first met (the first ranking first), so results are deterministic.
    An item missing from a ranking gets nothing from it.
    """
    if k <= 0:
        raise ValueError("the fusion constant k must be positive")
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[Item, float] = {}
    for index, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[index]
        seen: set[Item] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:  # a duplicate in one ranking must not count twice
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: position for position, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))


def test_fusion_scores_and_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)
    expected = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62}
    assert [item for item, _ in fused] == ["a", "c", "b"]
    for item, score in fused:
        assert score == pytest.approx(expected[item])


def test_small_k_favours_the_top_of_each_ranking() -> None:
    # k = 1: an item second in both lists (1/3 + 1/3 = 0.667) beats the two first places (1/2 each)
    rankings = [["a", "m"], ["b", "m"]]
    assert [item for item, _ in reciprocal_rank_fusion(rankings, k=1)] == ["m", "a", "b"]
    # the tie between a and b follows first appearance (the first ranking first)
    assert [item for item, _ in reciprocal_rank_fusion(rankings, k=1000)][1:] == ["a", "b"]


def test_duplicates_weights_and_bad_arguments() -> None:
    once = dict(reciprocal_rank_fusion([["a", "a", "b"]], k=60))
    assert once["a"] == pytest.approx(1 / 61)
    assert once["b"] == pytest.approx(1 / 63)  # b keeps its rank 3 in that list
    weighted = dict(reciprocal_rank_fusion([["a"], ["b"]], k=60, weights=[2.0, 1.0]))
    assert weighted["a"] == pytest.approx(2 / 61) and weighted["b"] == pytest.approx(1 / 61)
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=0)
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])


def test_numpy_fusion_matches_the_reference() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        size = int(rng.integers(1, 40))
        first = rng.permutation(size)[: int(rng.integers(0, size + 1))]
        second = rng.integers(0, size, size=int(rng.integers(0, size + 1)))  # may repeat rows
        k = float(rng.choice([1, 60, 1000]))
        top = int(rng.integers(1, size + 2))
        reference = reciprocal_rank_fusion([first.tolist(), second.tolist()], k=k)[:top]
        fast = fuse_rows([first, second], size, k, top)
        assert [row for row, _ in fast] == [row for row, _ in reference]
        assert [score for _, score in fast] == pytest.approx([score for _, score in reference])
    # ties: equal scores keep first-met order (first ranking first)
    assert [row for row, _ in fuse_rows([np.array([3]), np.array([1])], 5, 60, 5)] == [3, 1]
