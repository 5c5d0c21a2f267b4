"""Dense retrieval: a local embedding model and a FAISS inner-product index over normalised vectors.

Vectors are normalised, so inner product is cosine similarity. The index is exact (IndexFlatIP) up to
`approximate_above` services and approximate above it: IVF-PQ with a re-scoring of the candidates by default (or
HNSW), chosen by what was measured (docs/scale.md#which-dense-index): IVF-PQ trains and fills a million vectors in
under a minute of one core where HNSW needs about ten times as long, and holds them in half of HNSW's memory, at
recall@10 ≥ 0.98 against exact search. On a machine with faiss-gpu and a GPU, exact indexes move to the GPU.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from a2x_local.errors import UserError
from a2x_local.llm import EmbeddingModel, load_embedder, load_query_embedder, resolve_embedding
from a2x_local.search.retrieval.config import RetrievalConfig

QUERIES_KEPT = 4096   # query vectors an embedder keeps: compose encodes a step for its search and its scoring


class Embedder:
    """Encodes queries and service texts into normalised float32 vectors with one embedding model (an alias from
    `[retrieval.embedding_models]` or a sentence-transformers folder), the model's prefixes applied. The most
    recent query vectors are kept (a step text is searched, probed and scored: encoded once).

    Queries go through the model's light runtime when it has one (`load_query_embedder`: the built-in MiniLM in
    NumPy), so a search on indexes built beforehand never imports torch; service texts through the full one."""

    def __init__(self, spec: str, config: RetrievalConfig) -> None:
        self.spec = spec
        self.ref = resolve_embedding(spec, config.embedding_models)
        self.path = self.ref.location
        self.config = config
        self._signature: str | None = None
        self._model: EmbeddingModel | None = None
        self._query_model: EmbeddingModel | None = None
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
    def query_model(self) -> EmbeddingModel:
        """What encodes queries: the light runtime when the model has one, else the full model."""
        if self._query_model is None:
            self._query_model = load_query_embedder(self.ref, threads=self.config.threads) or self.model
        return self._query_model

    @property
    def query_runtime(self) -> str:
        """Which runtime encodes queries ("numpy" or the model's backend), for describe()."""
        return self.query_model.runtime

    @property
    def dimension(self) -> int:
        return self.query_model.dimension

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        queries = list(queries)
        with self._lock:
            kept = {text: self._queries[text] for text in queries if text in self._queries}
        fresh = [text for text in dict.fromkeys(queries) if text not in kept]
        if fresh:
            vectors = self.query_model.encode(fresh, query=True, batch_size=self.config.embed_batch_size)
            kept.update(zip(fresh, vectors, strict=True))
        with self._lock:
            for text in queries:
                self._queries[text] = kept[text]
                self._queries.move_to_end(text)
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        if not queries:
            return self.query_model.encode([], query=True, batch_size=self.config.embed_batch_size)
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


# Product quantization trains 256 centroids per sub-vector: fewer vectors than this cannot train it well.
IVFPQ_MIN_SERVICES = 10000


@dataclass(frozen=True)
class IndexChoice:
    """Which FAISS index a registry of ``services`` vectors gets, with its parameters and why."""

    kind: Literal["flat", "hnsw", "ivfpq"]
    reason: str
    params: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What names the index's build settings (part of the index folder's variant)."""
        return ":".join([self.kind, *(f"{k}={v}" for k, v in sorted(self.params.items()))])

    def to_dict(self) -> dict[str, object]:
        return {"index": self.kind, "reason": self.reason, **self.params}


def ivf_lists(services: int) -> int:
    """About 2·√N inverted lists, a power of two (faiss's rule of thumb is 4–16·√N; fewer lists train faster and
    keep every list long enough for the re-scoring to find the true neighbours at the default nprobe)."""
    return max(16, 1 << round(math.log2(max(1.0, 2 * math.sqrt(services)))))


def choose_index(services: int, config: RetrievalConfig, dimension: int | None = None) -> IndexChoice:
    """`[retrieval] dense_index`, or with "auto" exact up to `approximate_above` services and `approximate_index`
    above; the approximate kinds carry their build parameters."""
    if config.dense_index != "auto":
        kind, reason = config.dense_index, "set by [retrieval] dense_index"
    elif services > config.approximate_above:
        kind, reason = config.approximate_index, (f"auto: {services:,} services > approximate_above"
                                                  f" {config.approximate_above:,}")
    else:
        kind, reason = "flat", f"auto: {services:,} services <= approximate_above {config.approximate_above:,}"
    if kind == "hnsw":
        return IndexChoice("hnsw", reason, {"m": config.hnsw_m, "ef_construction": config.hnsw_ef_construction})
    if kind == "ivfpq" and services < IVFPQ_MIN_SERVICES:
        return IndexChoice("flat", f"{reason}; exact all the same: IVF-PQ needs at least {IVFPQ_MIN_SERVICES:,}"
                                   " vectors to train its codebooks")
    if kind == "ivfpq":
        lists = config.ivf_lists or ivf_lists(services)
        pq = config.pq_bytes
        if dimension and dimension % pq:
            pq = math.gcd(dimension, pq)     # PQ splits the vector into pq_bytes equal parts
        return IndexChoice("ivfpq", reason, {"lists": lists, "pq_bytes": pq})
    return IndexChoice("flat", reason)


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

    @property
    def memory_bytes(self) -> int:
        """What the index holds in memory (its serialised size: codes, lists, graph or vectors)."""
        import faiss

        return int(faiss.serialize_index(self._cpu_index()).size)

    @classmethod
    def build(cls, vectors: np.ndarray, ids: list[str], config: RetrievalConfig,
              choice: IndexChoice | None = None) -> DenseIndex:
        import faiss

        dimension = vectors.shape[1]
        choice = choice or choose_index(len(ids), config, dimension)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if choice.kind == "hnsw":
            index = faiss.IndexHNSWFlat(dimension, choice.params["m"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = choice.params["ef_construction"]
        elif choice.kind == "ivfpq":
            index = _ivfpq(vectors, choice.params)
        else:
            index = faiss.IndexFlatIP(dimension)
        if not index.is_trained:
            index.train(_training_sample(vectors, choice.params.get("lists", 1)))
        for start in range(0, len(vectors), _ADD_CHUNK):    # adding in parts bounds FAISS's temporary buffers
            index.add(vectors[start:start + _ADD_CHUNK])
        return cls(index, ids).prepared(config)

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
        """Search-time settings: HNSW breadth, IVF lists searched and re-scored candidates, and the GPU copy of an
        exact index when one is available."""
        import faiss

        if isinstance(self.index, faiss.IndexHNSW):
            self.index.hnsw.efSearch = config.hnsw_ef_search
        elif isinstance(self.index, faiss.IndexRefine):
            faiss.extract_index_ivf(self.index).nprobe = config.ivf_nprobe
            self.index.k_factor = float(config.rerank_factor)
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


# Vectors added to a FAISS index per call, and sampled to train IVF centroids and PQ codebooks.
_ADD_CHUNK = 65536
_TRAIN_PER_LIST = 40            # faiss warns below 39 training points per list
_TRAIN_MIN = 20000


def _ivfpq(vectors: np.ndarray, params: dict[str, int]) -> object:
    """IVF lists of product-quantized codes, whose candidates are re-scored with half-precision copies of the vectors:
    the codes find candidates in little memory, the re-scoring puts them in exact order. Half precision, not 8-bit
    scalar codes: on the scale benchmark's million vectors 8-bit re-scoring stopped at 0.97 recall@10 against exact
    search (close neighbours swap places), half precision re-scores as the float vectors do (docs/scale.md)."""
    import faiss

    dimension = vectors.shape[1]
    lists = min(params["lists"], max(1, len(vectors) // _TRAIN_PER_LIST))
    quantizer = faiss.IndexFlatIP(dimension)
    ivf = faiss.IndexIVFPQ(quantizer, dimension, lists, params["pq_bytes"], 8, faiss.METRIC_INNER_PRODUCT)
    ivf.cp.niter = 10               # k-means iterations: the lists only route; the re-scoring sets the order
    ivf.pq.cp.niter = 10            # the codes only pick candidates: coarse codebooks are enough
    refine = faiss.IndexRefine(ivf, faiss.IndexScalarQuantizer(dimension, faiss.ScalarQuantizer.QT_fp16,
                                                                faiss.METRIC_INNER_PRODUCT))
    refine.own_fields = True
    ivf.this.disown()
    quantizer.this.disown()
    ivf.own_fields = True
    return refine


def _training_sample(vectors: np.ndarray, lists: int) -> np.ndarray:
    """A fixed, evenly spaced sample (deterministic: the same registry trains the same index)."""
    size = min(len(vectors), max(_TRAIN_MIN, lists * _TRAIN_PER_LIST))
    if size >= len(vectors):
        return vectors
    return np.ascontiguousarray(vectors[np.linspace(0, len(vectors) - 1, size).astype(np.int64)])
