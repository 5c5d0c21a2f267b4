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
    # Only the rows the rankings hold are scored (not an array of the whole registry per query: at a million
    # services that is 16 MB written and scanned for a thousand candidates).
    parts_rows, parts_scores, parts_met = [], [], []
    offset = 0
    for ranking, weight in zip(rankings, weights, strict=True):
        if weight <= 0:
            continue
        rows = np.asarray(ranking, dtype=np.int64)
        positions = np.sort(np.unique(rows, return_index=True)[1])  # first occurrence only, at its own rank
        parts_rows.append(rows[positions])
        parts_scores.append(weight / (k + positions.astype(np.float64) + 1.0))
        parts_met.append(offset + positions)
        offset += len(ranking)
    if not parts_rows:
        return []
    rows = np.concatenate(parts_rows)
    if rows.size and (rows.min() < 0 or rows.max() >= size):
        raise IndexError(f"a ranked row is outside 0..{size - 1}")
    candidates, inverse = np.unique(rows, return_inverse=True)
    scores = np.bincount(inverse, weights=np.concatenate(parts_scores), minlength=len(candidates))
    first_met = np.full(len(candidates), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_met, inverse, np.concatenate(parts_met))
    keep = scores > 0
    candidates, scores, first_met = candidates[keep], scores[keep], first_met[keep]
    order = np.lexsort((first_met, -scores))[:top]
    return [(int(candidates[i]), float(scores[i])) for i in order]
