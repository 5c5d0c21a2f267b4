"""Tuning a registry's hybrid fusion weights on labelled queries (`a2x-local eval tune`).

The queries are split in two by a hash of their ids (stable whatever the file order): the weights are chosen on
one part and reported on the other, so the gain shown is not just the search fitting its own test. The grid runs
from BM25 alone (dense weight 0) to dense alone (BM25 weight 0), so on the tuning part the chosen weights are never
below the better single method; ties go to the weights closest to the configured ones. Both rankings are computed
once per query and fused for every grid point with the same function the hybrid search uses.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from a2x_local.db import connect, transaction
from a2x_local.errors import UserError
from a2x_local.registry import Registry
from a2x_local.search.methods import ProgressFactory
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import FUSION_SETTING, load_corpus
from a2x_local.search.retrieval.fusion import fuse_rows
from a2x_local.search.retrieval.methods import hybrid_retriever
from a2x_local.search.retrieval.retrievers import HybridRetriever, cross_script_weights
from a2x_local.search.retrieval.weights import fusion_weights
from a2x_local.settings import Settings

DENSE_SHARES = tuple(round(0.1 * step, 1) for step in range(11))   # dense weight; BM25 gets 1 - it
RRF_KS = (5.0, 10.0, 20.0, 30.0, 60.0, 100.0)


@dataclass(frozen=True)
class LabelledQuery:
    id: str
    text: str
    correct: frozenset[str]


@dataclass(frozen=True)
class Ranked:
    """One part's queries as the fusion sees them: both rankings, the correct rows, and which are cross-script."""

    rankings: list[tuple[np.ndarray, np.ndarray]]
    correct: list[np.ndarray]
    cross: list[bool]


@dataclass
class TuneReport:
    """What `a2x-local eval tune` found: the chosen weights, how they and the alternatives score on both parts."""

    db: str
    metric: str
    queries: dict[str, int]
    chosen: dict[str, float]
    rows: list[dict[str, Any]] = field(default_factory=list)   # label, weights, tune and held-out scores
    stored: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"db": self.db, "metric": self.metric, "queries": self.queries, "chosen": self.chosen,
                "rows": self.rows, "stored": self.stored, "seconds": round(self.seconds, 2)}


def held_out(query_id: str, share: float) -> bool:
    """Whether a query belongs to the held-out part (a hash of its id, so the split is stable)."""
    bucket = int.from_bytes(hashlib.sha256(query_id.encode()).digest()[:4], "big") / 2**32
    return bucket < share


def _scores(ranked: Ranked, size: int, weights: tuple[float, float], factor: float, rrf_k: float,
            k: int) -> np.ndarray:
    """Per query (hit@k, recall@k) of the fused ranking; BM25's weight times ``factor`` for cross-script queries,
    as the hybrid search does."""
    out = np.zeros((len(ranked.rankings), 2))
    for i, ((dense, bm25), wanted, cross) in enumerate(zip(ranked.rankings, ranked.correct, ranked.cross,
                                                           strict=True)):
        fused = fuse_rows([dense, bm25], size, rrf_k, k, cross_script_weights(weights, cross, factor))
        top = np.fromiter((row for row, _ in fused), dtype=np.int64)
        found = np.isin(wanted, top).sum()
        out[i] = (found > 0, found / len(wanted))
    return out


def tune_fusion(settings: Settings, queries: Sequence[LabelledQuery], *, k: int = 10, held_out_share: float = 0.5,
                store: bool = True, embedding_model: str | None = None, queries_name: str = "",
                progress: ProgressFactory | None = None) -> TuneReport:
    """Choose the hybrid fusion weights of the registry at ``settings.db_path`` by hit@k (recall@k breaks ties) on
    the tuning part of ``queries``, report them beside the defaults and the single methods, and store them in the
    registry (``store``) for the embedding model in use."""
    started = time.perf_counter()
    if not 0 < held_out_share < 1:
        raise UserError(f"the held-out share must be between 0 and 1, not {held_out_share}",
                        hint="give --held-out a share such as 0.5")
    config = RetrievalConfig.from_settings(settings)
    corpus = load_corpus(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    retriever = hybrid_retriever(corpus, config, embedding_model=embedding_model, progress=progress)
    rows_of = {service_id: row for row, service_id in enumerate(retriever.dense.index.ids)}
    usable = [q for q in queries if any(c in rows_of for c in q.correct)]
    if not usable:
        raise UserError("none of the queries names a service of this registry",
                        hint="tune with the query file that belongs to the registry (its correct_tools ids)")
    parts = {"tune": [q for q in usable if not held_out(q.id, held_out_share)],
             "held_out": [q for q in usable if held_out(q.id, held_out_share)]}
    if not parts["tune"] or not parts["held_out"]:
        raise UserError(f"{len(usable)} usable queries are too few to split for tuning", hint="give more queries")
    ranked = _rank(retriever, parts, rows_of, progress)
    size = len(rows_of)

    factor = config.cross_script_bm25_factor

    def evaluate(part: str, weights: tuple[float, float], rrf_k: float) -> np.ndarray:
        return _scores(ranked[part], size, weights, factor, rrf_k, k).mean(axis=0) * 100

    configured = fusion_weights(config, None, "")     # the [retrieval] values: the baseline and the tie-break
    default_share = configured.dense_weight / (configured.dense_weight + configured.bm25_weight)
    grid = [(share, rrf_k) for share in DENSE_SHARES for rrf_k in RRF_KS]
    advance = progress(f"fusion weights on {len(parts['tune'])} queries", len(grid)) if progress else None
    results = []
    for share, rrf_k in grid:
        hit, recall = evaluate("tune", (share, 1 - share), rrf_k)
        distance = abs(share - default_share) + abs(np.log(rrf_k / configured.rrf_k))
        results.append((round(hit, 6), round(recall, 6), -distance, share, rrf_k))
        if advance:
            advance(1)
    _, _, _, best_share, best_k = max(results)
    chosen = {"dense_weight": best_share, "bm25_weight": round(1 - best_share, 1), "rrf_k": best_k}
    candidates = [("chosen", (best_share, 1 - best_share), best_k),
                  ("configured", (configured.dense_weight, configured.bm25_weight),
                   configured.rrf_k),
                  ("dense alone", (1.0, 0.0), configured.rrf_k), ("bm25 alone", (0.0, 1.0), configured.rrf_k)]
    table = []
    for label, weights, rrf_k in candidates:
        tune_hit, tune_recall = evaluate("tune", weights, rrf_k)
        held_hit, held_recall = evaluate("held_out", weights, rrf_k)
        table.append({"label": label, "dense_weight": weights[0], "bm25_weight": weights[1], "rrf_k": rrf_k,
                      f"tune_hit@{k}": round(tune_hit, 2), f"tune_recall@{k}": round(tune_recall, 2),
                      f"held_out_hit@{k}": round(held_hit, 2), f"held_out_recall@{k}": round(held_recall, 2)})
    counts = {"given": len(queries), "usable": len(usable), "tune": len(parts["tune"]),
              "held_out": len(parts["held_out"])}
    if store:
        record = {**chosen, "model": retriever.dense.embedder.identity,
                  "embedding_model": retriever.dense.embedder.spec, "queries": queries_name or "(queries)",
                  "metric": f"hit@{k}", "split": counts, "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "held_out": table[0]}
        with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as con, transaction(con):
            Registry(con).set_setting(FUSION_SETTING, record)
    return TuneReport(str(settings.db_path), f"hit@{k}", counts, chosen, table, store, time.perf_counter() - started)


def _rank(retriever: HybridRetriever, parts: dict[str, list[LabelledQuery]], rows_of: dict[str, int],
          progress: ProgressFactory | None) -> dict[str, Ranked]:
    """Both rankings of every query, once, as deep as the hybrid search fuses them."""
    depth = retriever.depth(1)
    out = {}
    for part, items in parts.items():
        advance = progress(f"ranking the {part.replace('_', '-')} queries", len(items)) if progress else None
        rankings = []
        for start in range(0, len(items), 64):
            batch = items[start:start + 64]
            rankings += retriever.rankings([q.text for q in batch], depth)
            if advance:
                advance(len(batch))
        correct = [np.array(sorted(rows_of[c] for c in q.correct if c in rows_of), dtype=np.int64) for q in items]
        out[part] = Ranked(rankings, correct, retriever.cross_script([q.text for q in items]))
    return out


def clear_fusion(settings: Settings) -> bool:
    """Remove the registry's tuned weights (back to `[retrieval]`); whether there were any."""
    with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as con, transaction(con):
        registry = Registry(con)
        had = registry.get_setting(FUSION_SETTING) is not None
        if had:
            registry.set_setting(FUSION_SETTING, None)   # read back as "no tuned weights"
    return had

