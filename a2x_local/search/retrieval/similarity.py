"""Cosine similarity between texts and given services, in the registry's dense index space.

Compose needs the published relevance of a step and a candidate (SkillWeaver Eq. 4: the bi-encoder's cosine), for
candidates found by any step method, and a measure of how far that cosine stands out: a cosine of 0.45 is strong
for all-MiniLM-L6-v2 and weak for multilingual-e5, whose cosines all sit near 0.8. ``background`` gives each text's
mean and spread of cosines over a fixed sample of the registry, so a caller can read a cosine as standard
deviations above what an unrelated service scores. Vectors come from the dense index (the same text and model as
dense search); an index that cannot give its vectors back (a GPU copy) has its rows encoded again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from a2x_local.search.methods import ProgressFactory
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import Corpus, ensure_dense, load_corpus
from a2x_local.search.retrieval.dense import DenseIndex, Embedder
from a2x_local.settings import Settings

BACKGROUND_SAMPLE = 4096   # services whose cosines make a text's background (all of a smaller registry)
_SEED = 20240917


@dataclass(frozen=True)
class Background:
    """A text's cosines over the registry sample: what an unrelated service scores, and how much that varies."""

    mean: float
    std: float

    def z(self, cosine: float) -> float:
        """Standard deviations above the background (0 when the background does not vary)."""
        return (cosine - self.mean) / self.std if self.std > 1e-9 else 0.0


class DenseSimilarity:
    """Cosines of texts with services of one registry, one embedding model and one indexed text."""

    def __init__(self, corpus: Corpus, config: RetrievalConfig, embedder: Embedder, index: DenseIndex) -> None:
        self.corpus = corpus
        self.config = config
        self.embedder = embedder
        self.index = index
        self.rows = {service_id: row for row, service_id in enumerate(index.ids)}
        self._vectors: dict[int, np.ndarray] = {}
        self._sample: np.ndarray | None = None

    @property
    def model(self) -> str:
        return self.embedder.spec

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors (normalised, the model's query prefix applied); the embedder keeps the recent ones, so a
        step searched, probed and scored is encoded once."""
        return self.embedder.encode_queries(list(texts)) if texts else np.zeros((0, 1), np.float32)

    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        """Service vectors of index rows, read back from the index (kept for later calls)."""
        missing = [row for row in dict.fromkeys(rows) if row not in self._vectors]
        if missing:
            for row, vector in zip(missing, self._read(missing), strict=True):
                self._vectors[row] = vector
        if not rows:
            return np.zeros((0, self.embedder.dimension), np.float32)
        return np.stack([self._vectors[row] for row in rows])

    def _read(self, rows: Sequence[int]) -> np.ndarray:
        index: Any = self.index.index
        try:
            return np.stack([np.asarray(index.reconstruct(int(row)), dtype=np.float32) for row in rows])
        except RuntimeError:   # an index kind that keeps no vectors to give back: encode those services again
            texts = self.corpus.texts(self.config.text_options())
            return self.embedder.encode_passages([texts[row] for row in rows])

    def cosines(self, texts: Sequence[str], ids: Sequence[Sequence[str]]) -> list[list[float | None]]:
        """The cosine of ``texts[i]`` with each service of ``ids[i]`` (None for an id the registry lacks)."""
        queries = self.encode(texts)
        result: list[list[float | None]] = []
        for vector, wanted in zip(queries, ids, strict=True):
            rows = [self.rows.get(service_id) for service_id in wanted]
            known = [row for row in rows if row is not None]
            scores = iter((self.vectors(known) @ vector).tolist()) if known else iter(())
            result.append([None if row is None else float(next(scores)) for row in rows])
        return result

    def alike(self, texts: Sequence[str]) -> list[list[float]]:
        """The cosine of every pair of ``texts`` (query side both)."""
        vectors = self.encode(texts)
        return (vectors @ vectors.T).tolist()

    @property
    def size(self) -> int:
        return len(self.index.ids)

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Service-side vectors of texts that are not in the registry (the model's passage prefix applied)."""
        return self.embedder.encode_passages(list(texts))

    def background(self, texts: Sequence[str], extra: np.ndarray | None = None) -> list[Background]:
        """Each text's mean and standard deviation of cosines over a fixed sample of the registry, and over
        ``extra`` service vectors (a small registry's own services are too few to make a background)."""
        if not texts:
            return []
        sample = self._background_rows()
        if extra is not None and len(extra):
            sample = np.concatenate([sample, extra.astype(np.float32)])
        scores = self.encode(texts) @ sample.T
        return [Background(float(row.mean()), float(row.std())) for row in scores]

    def _background_rows(self) -> np.ndarray:
        if self._sample is None:
            size = len(self.index.ids)
            rows = list(range(size)) if size <= BACKGROUND_SAMPLE else sorted(
                np.random.default_rng(_SEED).choice(size, BACKGROUND_SAMPLE, replace=False).tolist())
            self._sample = self.vectors(rows)
        return self._sample

    def top(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """The ``k`` services of highest cosine per text, best first."""
        if not texts:
            return []
        scores, rows = self.index.search(self.encode(texts), k)
        ids = self.index.ids
        return [[(ids[int(row)], float(score)) for row, score in zip(found, values, strict=True) if row >= 0]
                for found, values in zip(rows, scores, strict=True)]


def open_similarity(settings: Settings, db_path: Path, *, method: object = None,
                    progress: ProgressFactory | None = None) -> DenseSimilarity:
    """The dense similarity of the registry at ``db_path``: the embedder and index of ``method`` when it is a dense
    or hybrid search method (no second copy), else the registry's dense index (built when missing or stale)."""
    from a2x_local.search.retrieval.retrievers import DenseRetriever, HybridRetriever

    dense = method.dense if isinstance(method, HybridRetriever) else method
    if isinstance(dense, DenseRetriever):
        return DenseSimilarity(dense.corpus, dense.config, dense.embedder, dense.index)
    from a2x_local.extras import check
    from a2x_local.search.retrieval.config import RetrievalConfig
    from a2x_local.search.retrieval.methods import DENSE_NEEDS

    check(*DENSE_NEEDS, feature="compose's similarity")
    config = RetrievalConfig.from_settings(settings)
    corpus = load_corpus(db_path, lock_timeout_s=settings.lock_timeout_s)
    embedder, index, _ = ensure_dense(corpus, config, progress=progress)
    return DenseSimilarity(corpus, config, embedder, index)


def keyword_tokenizer(settings: Settings) -> Callable[[Sequence[str]], list[list[str]]]:
    """The words BM25 indexes a text by (identifiers split, stop words dropped, stemmed; CJK as character pairs),
    for callers that compare texts by their words (compose's keyword co-occurrence)."""
    from a2x_local.extras import check
    from a2x_local.search.retrieval.bm25 import Bm25Tokenizer
    from a2x_local.search.retrieval.config import RetrievalConfig
    from a2x_local.search.retrieval.methods import BM25_NEEDS

    check(*BM25_NEEDS, feature="compose's keyword compatibility")
    return Bm25Tokenizer(RetrievalConfig.from_settings(settings)).tokenize
