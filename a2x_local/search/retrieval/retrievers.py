"""The retrieval baselines as search methods: dense, BM25 and their weighted reciprocal rank fusion.

Each is also a *retriever*: ``retrieve(queries, k)`` returns ranked hits for a batch of queries, which is what the
LLM methods use as a pre-filter (hybrid top-k handed to a model for selection).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from a2x_local.registry import script_profile
from a2x_local.search.retrieval.bm25 import Bm25Index
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import Corpus
from a2x_local.search.retrieval.dense import DenseIndex, Embedder
from a2x_local.search.retrieval.fusion import fuse_rows
from a2x_local.search.retrieval.weights import FusionWeights
from a2x_local.search.types import Hit, SearchAnswer, SearchMethod, SearchRequest, check_queries


class RetrieverMethod(SearchMethod):
    """Shared search_batch for the retrievers: one retrieve() call answers the whole batch."""

    name = "retriever"
    ranked = True

    def __init__(self, corpus: Corpus, config: RetrievalConfig) -> None:
        self.corpus = corpus
        self.config = config
        if config.threads:
            import faiss

            faiss.omp_set_num_threads(config.threads)

    @property
    def size(self) -> int:
        return len(self.corpus.services)

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        raise NotImplementedError

    def search_batch(self, requests: Sequence[SearchRequest]) -> list[SearchAnswer]:
        if not requests:
            return []
        check_queries([request.query for request in requests])
        started = time.perf_counter()
        ks = [request.k or self.config.default_k for request in requests]
        hits = self.retrieve([request.query for request in requests], max(ks))
        # Latency per query is the batch's time shared out: one batch call answered them all.
        seconds = (time.perf_counter() - started) / len(requests)
        return [SearchAnswer(query=request.query, hits=found[:k], ranked=True, seconds=seconds)
                for request, found, k in zip(requests, hits, ks, strict=True)]

    def describe(self) -> dict[str, object]:
        return {"method": self.name, "services": self.size, "text": self.config.text_options().key()}

    def warm_up(self) -> None:
        """One query: the first pays the tokenizer's and BLAS's start (0.06-0.15 s against 0.014-0.05 s for the
        next ones on 2,014 services), which a server's first client then does not."""
        self.retrieve(["warm-up query"], 1)


class DenseRetriever(RetrieverMethod):
    """Cosine similarity between the query and each service text (sentence-transformers + FAISS)."""

    name = "dense"

    def __init__(self, corpus: Corpus, config: RetrievalConfig, embedder: Embedder, index: DenseIndex,
                 variant: dict[str, object] | None = None) -> None:
        super().__init__(corpus, config)
        self.embedder = embedder
        self.index = index
        self.variant = variant or {}
        self.embedder.query_model  # noqa: B018  (load now, so the first search's latency is the search alone)

    def ranking(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        scores, rows = self.index.search(self.embedder.encode_queries(queries), k)
        return [[(int(row), float(score)) for row, score in zip(row_ids, row_scores, strict=True) if row >= 0]
                for row_ids, row_scores in zip(rows, scores, strict=True)]

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        ids = self.index.ids
        return [[Hit(ids[row], score) for row, score in ranked] for ranked in self.ranking(queries, k)]

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "model": str(self.embedder.path), "index": self.index.kind,
                "dense": self.variant, "query_prefix": self.embedder.ref.alias.query_prefix,
                "query_runtime": self.embedder.query_runtime}


class Bm25Retriever(RetrieverMethod):
    """BM25 over stemmed words; services sharing no word with the query are not returned."""

    name = "bm25"

    def __init__(self, corpus: Corpus, config: RetrievalConfig, index: Bm25Index,
                 variant: dict[str, object] | None = None) -> None:
        super().__init__(corpus, config)
        self.index = index
        self.variant = variant or {}

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        ids = self.index.ids
        return [[Hit(ids[row], score) for row, score in ranked] for ranked in self.index.search(queries, k)]

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "bm25": self.variant}


def cross_script_weights(weights: tuple[float, float], cross: bool, factor: float) -> tuple[float, float]:
    """(dense, BM25) weights for one query: BM25's multiplied by ``factor`` (`cross_script_bm25_factor`) for a query
    in another script than the registry, since BM25 can match only the few words the two share."""
    return (weights[0], weights[1] * factor) if cross else weights


class HybridRetriever(RetrieverMethod):
    """Weighted reciprocal rank fusion of the dense and BM25 rankings."""

    name = "hybrid"

    def __init__(self, corpus: Corpus, config: RetrievalConfig, dense: DenseRetriever, bm25: Bm25Retriever,
                 weights: FusionWeights) -> None:
        super().__init__(corpus, config)
        self.dense = dense
        self.bm25 = bm25
        self.weights = weights

    def depth(self, k: int) -> int:
        """How far down each ranking enters the fusion: the configured depth (0 = all), never less than k."""
        depth = self.config.fusion_depth or self.size
        return min(self.size, max(depth, k))

    def rankings(self, queries: Sequence[str], depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(dense rows, BM25 rows) per query, best first, ``depth`` deep: what the fusion combines."""
        _, dense_rows = self.dense.index.search(self.dense.embedder.encode_queries(queries), depth)
        lexical = self.bm25.index.search(queries, depth)
        return [(dense_ranking[dense_ranking >= 0], np.array([row for row, _ in bm25_ranking], dtype=np.int64))
                for dense_ranking, bm25_ranking in zip(dense_rows, lexical, strict=True)]

    def cross_script(self, queries: Sequence[str]) -> list[bool]:
        """Whether each query is written in another script than the registry (an English query to a Chinese one)."""
        registry = self.corpus.script_profile
        return [not script_profile([query]).shares_script_with(registry) for query in queries]

    def query_weights(self, queries: Sequence[str]) -> list[tuple[float, float]]:
        """(dense, BM25) weight per query (`cross_script_weights` of the search's weights)."""
        weights = (self.weights.dense_weight, self.weights.bm25_weight)
        factor = self.config.cross_script_bm25_factor
        return [cross_script_weights(weights, cross, factor) for cross in self.cross_script(queries)]

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        ids = self.dense.index.ids  # row i of both indexes is this service (the corpus's order)
        results = []
        for (dense_rows, bm25_rows), weights in zip(self.rankings(queries, self.depth(k)),
                                                    self.query_weights(queries), strict=True):
            fused = fuse_rows([dense_rows, bm25_rows], len(ids), self.weights.rrf_k, k, weights)
            results.append([Hit(ids[row], score) for row, score in fused])
        return results

    def describe(self) -> dict[str, object]:
        return {**self.dense.describe(), "bm25": self.bm25.variant, "method": self.name,
                "fusion": self.weights.to_dict(), "fusion_depth": self.config.fusion_depth,
                "cross_script_bm25_factor": self.config.cross_script_bm25_factor}
