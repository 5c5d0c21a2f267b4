"""Retrieval metrics (ALGORITHM.md §6): per query, then macro-averaged over queries.

hit = at least one correct service returned; recall = |correct ∩ returned| / |correct|; precision =
|correct ∩ returned| / |returned| (0 for an empty answer); F1 from the *averaged* precision and recall; comp =
the whole correct set returned (COMP@k in COLT, "comprehensiveness" in ToolRet). A service returned twice counts
once (answers are de-duplicated, first occurrence kept, before anything is scored).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def dedupe(ids: Iterable[str]) -> list[str]:
    """Ids in first-seen order without repeats."""
    return list(dict.fromkeys(ids))


def _correct_set(correct: Collection[str]) -> set[str]:
    wanted = set(correct)
    if not wanted:
        raise ValueError("a query needs at least one correct service to be scored")
    return wanted


@dataclass(frozen=True)
class QueryScore:
    hit: bool
    recall: float
    precision: float
    found: int       # correct services returned
    returned: int    # distinct services returned
    correct: int     # distinct correct services

    @property
    def complete(self) -> bool:
        """Every correct service was returned."""
        return self.found == self.correct


def score_query(returned: Sequence[str], correct: Collection[str]) -> QueryScore:
    """Hit, recall and precision of one answer."""
    wanted = _correct_set(correct)
    answer = dedupe(returned)
    found = sum(1 for service_id in answer if service_id in wanted)
    precision = found / len(answer) if answer else 0.0
    return QueryScore(found > 0, found / len(wanted), precision, found, len(answer), len(wanted))


@dataclass(frozen=True)
class RankedScore:
    """One ranking against one query's correct services, de-duplicated and matched once; every cut-off and
    ranked metric is then read from the ranks of the correct services it found."""

    ranks: tuple[int, ...]   # 1-based ranks of the correct services in the de-duplicated ranking, ascending
    correct: int             # how many correct services the query has

    @classmethod
    def of(cls, ranking: Iterable[str], correct: Collection[str]) -> RankedScore:
        wanted = _correct_set(correct)
        ranks = tuple(rank for rank, service_id in enumerate(dedupe(ranking), start=1) if service_id in wanted)
        return cls(ranks, len(wanted))

    def hit(self, k: int) -> float:
        return float(bool(self.ranks) and self.ranks[0] <= k)

    def recall(self, k: int) -> float:
        return bisect.bisect_right(self.ranks, k) / self.correct

    def complete(self, k: int) -> float:
        """COMP@k: 1 when every correct service is in the top k."""
        return float(len(self.ranks) == self.correct and self.ranks[-1] <= k)

    def reciprocal_rank(self) -> float:
        """1 / rank of the first correct service (rank 1 = best); 0 when none is in the ranking."""
        return 1.0 / self.ranks[0] if self.ranks else 0.0

    def ndcg(self, k: int = 10) -> float:
        """Binary-relevance nDCG: sum of 1/log2(rank+1) over correct services in the top k, over the best
        possible."""
        gains = sum(1.0 / math.log2(rank + 1) for rank in self.ranks if rank <= k)
        ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(self.correct, k) + 1))
        return gains / ideal


def hit_at_k(ranking: Sequence[str], correct: Collection[str], k: int) -> float:
    return RankedScore.of(ranking, correct).hit(k)


def recall_at_k(ranking: Sequence[str], correct: Collection[str], k: int) -> float:
    return RankedScore.of(ranking, correct).recall(k)


def complete_at_k(ranking: Sequence[str], correct: Collection[str], k: int) -> float:
    return RankedScore.of(ranking, correct).complete(k)


def reciprocal_rank(ranking: Sequence[str], correct: Collection[str]) -> float:
    """1 / rank of the first correct service (rank 1 = best); 0 when none is in the ranking."""
    return RankedScore.of(ranking, correct).reciprocal_rank()


def ndcg_at_k(ranking: Sequence[str], correct: Collection[str], k: int = 10) -> float:
    """Binary-relevance nDCG: sum of 1/log2(rank+1) over correct services in the top k, over the best possible."""
    return RankedScore.of(ranking, correct).ndcg(k)


def f1(precision: float, recall: float) -> float:
    """Harmonic mean of averaged precision and recall (0 when both are 0)."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def percent_k(share: float, registry_size: int) -> int:
    """k for "top share of the registry": rounded up, at least 1 (1% of 1,839 services -> 19)."""
    return max(1, math.ceil(share * registry_size - 1e-9))


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default); 0 for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else 0.0
