"""A snapshot of the registry for retrieval, and the dense and BM25 indexes that belong to it.

The database is open only while the snapshot is read; indexes live in files beside it (see ``index.py``), so a
search never holds the registry while it embeds or scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import duckdb

from a2x_local.db import connect
from a2x_local.errors import UserError
from a2x_local.registry import Registry, ScriptProfile, Service, script_profile
from a2x_local.search.methods import ProgressFactory
from a2x_local.search.retrieval.bm25 import Bm25Index
from a2x_local.search.retrieval.config import RetrievalConfig, TextOptions
from a2x_local.search.retrieval.dense import DenseIndex, Embedder
from a2x_local.search.retrieval.index import IndexInfo, IndexStore, content_hash
from a2x_local.search.retrieval.text import service_texts

EMBEDDING_SETTING = "embedding_model"
# The script measure behind an "auto" choice, recorded by `a2x-local index` (see `choose_embedding`).
AUTO_EMBEDDING_SETTING = "embedding_model_auto"
# Hybrid fusion weights tuned for this registry (`a2x-local eval tune`).
FUSION_SETTING = "fusion_weights"


@dataclass
class Corpus:
    """Every service in registry order (by id), and what the registry says about retrieval.

    A snapshot: read once, then shared by every index and method built from it, so the indexed texts and their
    content hash are computed once per text option.
    """

    db_path: Path
    services: list[Service]
    fingerprint: str
    embedding_setting: str | None
    auto_embedding: dict[str, Any] | None = None
    fusion_setting: dict[str, Any] | None = None
    _texts: dict[TextOptions, tuple[list[str], str]] = field(default_factory=dict, init=False, repr=False,
                                                              compare=False)

    @cached_property
    def ids(self) -> list[str]:
        return [service.id for service in self.services]

    @cached_property
    def script_profile(self) -> ScriptProfile:
        """Letters by script over every service's name and description."""
        return script_profile([f"{service.name}\n{service.description}" for service in self.services])

    def texts(self, options: TextOptions) -> list[str]:
        return self._indexed(options)[0]

    def content(self, options: TextOptions) -> str:
        """The content hash of (id, indexed text) for these options: what names an index folder."""
        return self._indexed(options)[1]

    def _indexed(self, options: TextOptions) -> tuple[list[str], str]:
        if options not in self._texts:
            texts = service_texts(self.services, options)
            self._texts[options] = (texts, content_hash(self.ids, texts))
        return self._texts[options]


def read_corpus(con: duckdb.DuckDBPyConnection, db_path: Path) -> Corpus:
    """The snapshot from an open connection (so a caller can read more in the same one); an empty registry is a
    user error (nothing to search)."""
    registry = Registry(con)
    services = registry.all()
    if not services:
        raise UserError(f"{db_path}: the registry is empty, there is nothing to index or search",
                        hint="load services first: a2x-local ingest PATH")
    setting = registry.get_setting(EMBEDDING_SETTING)
    auto, fusion = registry.get_setting(AUTO_EMBEDDING_SETTING), registry.get_setting(FUSION_SETTING)
    return Corpus(db_path, services, registry.fingerprint(), setting if isinstance(setting, str) else None,
                  auto if isinstance(auto, dict) else None, fusion if isinstance(fusion, dict) else None)


def load_corpus(db_path: Path, *, lock_timeout_s: float | None = None) -> Corpus:
    """Read the registry once; an empty registry is a user error (nothing to index or search)."""
    with connect(db_path, lock_timeout_s=lock_timeout_s, mode="read") as con:
        return read_corpus(con, db_path)


@dataclass(frozen=True)
class EmbeddingChoice:
    """The embedding model of a registry, where that choice came from, and why."""

    spec: str
    source: Literal["flag", "registry", "configuration", "auto"]
    reason: str
    multilingual: bool | None = None      # for "auto": whether the script measure asked for a multilingual model
    profile: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """What `a2x-local index` stores for an automatic choice: the decision, not the model, so a changed
        `multilingual_embedding_model` applies without re-measuring."""
        return {"multilingual": self.multilingual, "reason": self.reason, **(self.profile or {})}

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.spec, "source": self.source, "reason": self.reason}


def _is_auto(config: RetrievalConfig) -> bool:
    return config.embedding_model.strip().lower() == "auto"


def measure_embedding(corpus: Corpus, config: RetrievalConfig) -> EmbeddingChoice:
    """The "auto" choice from the registry's text: the multilingual model when more than `non_latin_threshold` of
    its letters are outside the Latin script."""
    profile = corpus.script_profile
    share = profile.non_latin_share
    multilingual = share > config.non_latin_threshold
    spec = config.multilingual_embedding_model if multilingual else config.latin_embedding_model
    relation = ">" if multilingual else "<="
    reason = (f"{share:.0%} of the registry's letters are non-Latin ({relation} {config.non_latin_threshold:.0%}), "
              f"main language {profile.language}")
    return EmbeddingChoice(spec, "auto", reason, multilingual, profile.to_dict())


def choose_embedding(corpus: Corpus, config: RetrievalConfig, override: str | None = None, *,
                     remeasure: bool = False) -> EmbeddingChoice:
    """The model to embed with: a flag, else the registry's own setting, else `[retrieval] embedding_model`; when
    that is "auto", the choice `a2x-local index` recorded (``remeasure``: measure again), else a fresh measure."""
    if override:
        return EmbeddingChoice(override, "flag", "--embedding-model")
    if corpus.embedding_setting:
        return EmbeddingChoice(corpus.embedding_setting, "registry", "set by a2x-local index --embedding-model")
    if not _is_auto(config):
        return EmbeddingChoice(config.embedding_model, "configuration", "[retrieval] embedding_model")
    recorded = corpus.auto_embedding
    if not remeasure and recorded and isinstance(recorded.get("multilingual"), bool):
        multilingual = recorded["multilingual"]
        spec = config.multilingual_embedding_model if multilingual else config.latin_embedding_model
        return EmbeddingChoice(spec, "auto", str(recorded.get("reason", "recorded by a2x-local index")),
                               multilingual, {k: v for k, v in recorded.items() if k not in ("multilingual", "reason")})
    return measure_embedding(corpus, config)


def embedding_model(corpus: Corpus, config: RetrievalConfig, override: str | None = None) -> str:
    """The spec of the model to embed with (see `choose_embedding`)."""
    return choose_embedding(corpus, config, override).spec


def _noop(_: int) -> None:
    return None


def ensure_dense(corpus: Corpus, config: RetrievalConfig, *, model: str | None = None, force: bool = False,
                 progress: ProgressFactory | None = None) -> tuple[Embedder, DenseIndex, IndexInfo]:
    """The dense index for this registry, text options and model, built if missing or stale."""
    embedder = Embedder(embedding_model(corpus, config, model), config)
    options = config.text_options()
    texts = corpus.texts(options)
    ids = corpus.ids
    approximate = len(ids) > config.approximate_above
    variant = {
        "model": embedder.ref.key, "model_signature": embedder.signature,
        "passage_prefix": embedder.ref.alias.passage_prefix, "text": options.key(),
        "index": f"hnsw:{config.hnsw_m}:{config.hnsw_ef_construction}" if approximate else "flat",
    }

    def build(folder: Path) -> None:
        advance = progress(f"embedding {len(texts)} services", len(texts)) if progress else None
        vectors = embedder.encode_passages(texts, progress=advance or _noop)
        DenseIndex.build(vectors, ids, config).save(folder)

    index, info = IndexStore(corpus.db_path).load_or_build(
        "dense", variant, ids, corpus.content(options), build,
        lambda folder: DenseIndex.load(folder, ids, config), force=force)
    return embedder, index, info


def ensure_bm25(corpus: Corpus, config: RetrievalConfig, *, force: bool = False) -> tuple[Bm25Index, IndexInfo]:
    """The BM25 index for this registry and text options, built if missing or stale."""
    options = config.text_options()
    texts = corpus.texts(options)
    ids = corpus.ids
    variant = {
        "text": options.key(), "method": config.bm25_method, "k1": config.bm25_k1, "b": config.bm25_b,
        "stopwords": config.bm25_stopwords, "stemmer": config.bm25_stemmer,
        "split_identifiers": config.split_identifiers, "cjk_bigrams": config.cjk_bigrams,
    }

    def build(folder: Path) -> None:
        Bm25Index.build(texts, ids, config).save(folder)

    return IndexStore(corpus.db_path).load_or_build(
        "bm25", variant, ids, corpus.content(options), build,
        lambda folder: Bm25Index.load(folder, ids, config), force=force)
