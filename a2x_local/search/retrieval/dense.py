"""Dense retrieval: a local embedding model and a FAISS inner-product index over normalised vectors.

Vectors are normalised, so inner product is cosine similarity. The index is exact (IndexFlatIP) up to a
configurable registry size and HNSW above it; on a machine with faiss-gpu and a GPU, exact indexes move to the GPU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from a2x_local.errors import UserError
from a2x_local.llm import EmbeddingModel, load_embedder, resolve_embedding
from a2x_local.search.retrieval.config import RetrievalConfig

QUERIES_KEPT = 4096   # query vectors an embedder keeps: compose encodes a step for its search and its scoring


class Embedder:
    """Encodes queries and service texts into normalised float32 vectors with one embedding model (an alias from
    `[retrieval.embedding_models]` or a sentence-transformers folder), the model's prefixes applied. The most
    recent query vectors are kept (a step text is searched, probed and scored: encoded once)."""

    def __init__(self, spec: str, config: RetrievalConfig) -> None:
        self.spec = spec
        self.ref = resolve_embedding(spec, config.embedding_models)
        self.path = self.ref.location
        self.config = config
        self._signature: str | None = None
        self._model: EmbeddingModel | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def signature(self) -> str:
        if self._signature is None:
            self._signature = self.ref.signature
        return self._signature

    @property
    def identity(self) -> str:
        """Which weights these are (folder, variant, file signature): what tuned fusion weights are tied to."""
        return f"{self.ref.key}|{self.signature}"

    @property
    def model(self) -> EmbeddingModel:
        """The loaded model. Device and thread count are decided once, on first use, not on every encode; with
        `threads` set, the backend uses that many CPU threads from then on (0 leaves the library's choice)."""
        if self._model is None:
            self._model = load_embedder(self.ref, threads=self.config.threads)
        return self._model

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        queries = list(queries)
        with self._lock:
            kept = {text: self._queries[text] for text in queries if text in self._queries}
        fresh = [text for text in dict.fromkeys(queries) if text not in kept]
        if fresh:
            vectors = self.model.encode(fresh, query=True, batch_size=self.config.embed_batch_size)
            kept.update(zip(fresh, vectors, strict=True))
        with self._lock:
            for text in queries:
                self._queries[text] = kept[text]
                self._queries.move_to_end(text)
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        if not queries:
            return self.model.encode([], query=True, batch_size=self.config.embed_batch_size)
        return np.stack([kept[text] for text in queries])

    def encode_passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Service vectors; ``progress(n)`` is told after each chunk of n texts."""
        texts = list(texts)
        batch = self.config.embed_batch_size
        if progress is None:
            return self.model.encode(texts, query=False, batch_size=batch)
        chunk = batch * 8
        parts = []
        for start in range(0, len(texts), chunk):
            parts.append(self.model.encode(texts[start:start + chunk], query=False, batch_size=batch))
            progress(len(parts[-1]))
        return np.concatenate(parts) if parts else np.zeros((0, self.dimension), np.float32)


def gpu_available() -> bool:
    import faiss

    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


class DenseIndex:
    """A FAISS inner-product index whose row i is service ``ids[i]``."""

    FILE = "vectors.faiss"

    def __init__(self, index: Any, ids: list[str]) -> None:
        self.index = index
        self.ids = ids

    @property
    def kind(self) -> str:
        return type(self.index).__name__

    @classmethod
    def build(cls, vectors: np.ndarray, ids: list[str], config: RetrievalConfig) -> DenseIndex:
        import faiss

        dimension = vectors.shape[1]
        if len(ids) > config.approximate_above:
            index = faiss.IndexHNSWFlat(dimension, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = config.hnsw_ef_construction
        else:
            index = faiss.IndexFlatIP(dimension)
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        return cls(index, ids)

    def save(self, folder: Path) -> None:
        import faiss

        faiss.write_index(self._cpu_index(), str(folder / self.FILE))

    @classmethod
    def load(cls, folder: Path, ids: list[str], config: RetrievalConfig) -> DenseIndex:
        import faiss

        index = faiss.read_index(str(folder / cls.FILE))
        if index.ntotal != len(ids):
            raise UserError(f"{folder}: index holds {index.ntotal} vectors for {len(ids)} services",
                            hint="run `a2x-local index --force` to rebuild it")
        return cls(index, ids).prepared(config)

    def prepared(self, config: RetrievalConfig) -> DenseIndex:
        """Search-time settings: HNSW breadth, and the GPU copy of an exact index when one is available."""
        import faiss

        if isinstance(self.index, faiss.IndexHNSW):
            self.index.hnsw.efSearch = config.hnsw_ef_search
        elif config.gpu == "auto" and gpu_available():
            self._gpu_resources = faiss.StandardGpuResources()
            self.index = faiss.index_cpu_to_gpu(self._gpu_resources, 0, self.index)
        return self

    def _cpu_index(self) -> Any:
        import faiss

        if hasattr(faiss, "index_gpu_to_cpu") and "Gpu" in self.kind:
            return faiss.index_gpu_to_cpu(self.index)
        return self.index

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows) of the top ``k`` per query; rows of missing results are -1."""
        k = max(1, min(k, len(self.ids)))
        if "Gpu" in self.kind:
            k = min(k, 2048)  # FAISS GPU indexes answer at most 2,048 neighbours per query
        return self.index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), k)
