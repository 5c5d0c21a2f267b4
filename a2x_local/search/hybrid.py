"""Reciprocal rank fusion: combine rankings by rank alone, so BM25 and cosine scores need no common scale."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

Item = TypeVar("Item", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Item]], k: float = 60.0,
                           weights: Sequence[float] | None = None) -> list[tuple[Item, float]]:
    """Items by fused score ``sum(w / (k + rank))`` (rank 1 = best), best first.

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


def fuse_rows(rankings: Sequence[np.ndarray], size: int, k: float, top: int) -> list[tuple[int, float]]:
    """The same fusion over row numbers ``0..size-1`` with numpy: the search path, where a Python dict over a
    thousand-deep ranking per query would cost more than the BM25 scoring itself. Same scores, same tie order."""
    scores = np.zeros(size, dtype=np.float64)
    first_met = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    offset = 0
    for ranking in rankings:
        rows = np.asarray(ranking, dtype=np.int64)
        positions = np.sort(np.unique(rows, return_index=True)[1])  # first occurrence only, at its own rank
        rows = rows[positions]
        scores[rows] += 1.0 / (k + positions.astype(np.float64) + 1.0)
        first_met[rows] = np.minimum(first_met[rows], offset + positions)
        offset += len(ranking)
    candidates = np.flatnonzero(scores > 0)
    order = np.lexsort((first_met[candidates], -scores[candidates]))[:top]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]
