"""Weighted reciprocal rank fusion: combine rankings by rank alone, so BM25 and cosine scores need no common scale,
with one weight per ranking so a registry can lean on the ranking that works for it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fuse_rows(rankings: Sequence[np.ndarray], size: int, k: float, top: int,
              weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """The top ``top`` rows of ``0..size-1`` by fused score ``sum(weight / (k + rank))`` (rank 1 = best; weights
    default to 1), best first.

    Ties keep the order in which rows were first met (the first ranking first); a row repeated in one ranking
    counts once, at its first rank; a row missing from a ranking gets nothing from it, and a ranking of weight 0
    adds nothing (not even its rows), so weights (1, 0) give the first ranking unchanged. Numpy, because a Python
    dict over a thousand-deep ranking per query would cost more than the BM25 scoring itself.
    """
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores = np.zeros(size, dtype=np.float64)
    first_met = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    offset = 0
    for ranking, weight in zip(rankings, weights, strict=True):
        if weight <= 0:
            continue
        rows = np.asarray(ranking, dtype=np.int64)
        positions = np.sort(np.unique(rows, return_index=True)[1])  # first occurrence only, at its own rank
        rows = rows[positions]
        scores[rows] += weight / (k + positions.astype(np.float64) + 1.0)
        first_met[rows] = np.minimum(first_met[rows], offset + positions)
        offset += len(ranking)
    candidates = np.flatnonzero(scores > 0)
    order = np.lexsort((first_met[candidates], -scores[candidates]))[:top]
    return [(int(candidates[i]), float(scores[candidates[i]])) for i in order]
