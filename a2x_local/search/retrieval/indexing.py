"""`a2x-local index` as one call: store the registry's embedding model (when asked) or record the automatic choice,
then bring the dense and BM25 indexes up to date. Searches do the same lazily; this is for doing it ahead, with a
report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from a2x_local.db import connect, transaction
from a2x_local.extras import check
from a2x_local.llm import resolve_embedding
from a2x_local.registry import Registry
from a2x_local.search.methods import ProgressFactory
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import (
    AUTO_EMBEDDING_SETTING,
    EMBEDDING_SETTING,
    EmbeddingChoice,
    choose_embedding,
    ensure_bm25,
    ensure_dense,
    load_corpus,
)
from a2x_local.search.retrieval.dense import choose_index
from a2x_local.search.retrieval.index import IndexInfo, index_root
from a2x_local.search.retrieval.methods import BM25_NEEDS, DENSE_NEEDS
from a2x_local.settings import Settings

# `--embedding-model` values that clear the registry's own setting (back to the configuration, "auto" by default).
CLEARING = frozenset({"default", "auto"})


@dataclass
class IndexReport:
    """What `a2x-local index` did: the registry, the model and text used, and each index built or found current."""

    db: str
    services: int
    folder: str
    embedding: EmbeddingChoice
    text: str
    indexes: list[IndexInfo]

    @property
    def embedding_model(self) -> str:
        return self.embedding.spec

    @property
    def notice(self) -> str:
        """One line on the model and why it was chosen."""
        return f"embedding model: {self.embedding.spec} ({self.embedding.source}: {self.embedding.reason})"

    def to_dict(self) -> dict[str, Any]:
        return {"db": self.db, "services": self.services, "folder": self.folder,
                "embedding_model": self.embedding.spec, "embedding_choice": self.embedding.to_dict(),
                "text": self.text, "indexes": [info.to_dict() for info in self.indexes]}


def _model_setting(spec: str, config: RetrievalConfig) -> str | None:
    """What to store for ``--embedding-model``: an alias name, an absolute folder path, or None ("default",
    "auto": follow the configuration). Resolving first means an unusable model fails before anything is stored."""
    if spec.strip().lower() in CLEARING:
        return None
    return resolve_embedding(spec, config.embedding_models).stored


def build_indexes(settings: Settings, *, embedding_model_spec: str | None = None, text: str | None = None,
                  params: bool | None = None, only: Literal["dense", "bm25"] | None = None, force: bool = False,
                  progress: ProgressFactory | None = None) -> IndexReport:
    """Set the registry's embedding model (``embedding_model_spec``; "default"/"auto" clear it) or, with none set
    and `[retrieval] embedding_model = "auto"`, measure the registry's scripts and record the choice; then build
    the indexes that are missing or stale (``force``: all of them)."""
    needs = {"dense": DENSE_NEEDS, "bm25": BM25_NEEDS, None: DENSE_NEEDS + BM25_NEEDS}[only]
    check(*needs, feature="a2x-local index")
    config = RetrievalConfig.from_settings(settings, text=text, text_params=params)
    if embedding_model_spec is not None:
        value = _model_setting(embedding_model_spec, config)
        with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as con, transaction(con):
            Registry(con).set_setting(EMBEDDING_SETTING, value)
    corpus = load_corpus(settings.db_path, lock_timeout_s=settings.lock_timeout_s)
    choice = choose_embedding(corpus, config, remeasure=True)
    if choice.source == "auto":
        with connect(settings.db_path, lock_timeout_s=settings.lock_timeout_s) as con, transaction(con):
            Registry(con).set_setting(AUTO_EMBEDDING_SETTING, choice.record())
        corpus.auto_embedding = choice.record()
    infos = []
    if only in (None, "dense"):
        infos.append(ensure_dense(corpus, config, model=choice.spec, force=force, progress=progress)[2])
    if only in (None, "bm25"):
        # One step, but tens of seconds on thousands of services: a stage a log shows starting and ending.
        tick = progress("BM25 index", 1) if progress else None
        infos.append(ensure_bm25(corpus, config, force=force)[1])
        if tick:
            tick(1)
    return IndexReport(str(settings.db_path), len(corpus.services), str(index_root(corpus.db_path)), choice,
                       config.text_options().key(), infos)


def dense_index_choice(settings: Settings, services: int) -> dict[str, Any]:
    """The FAISS index a registry of ``services`` gets under these settings, and why (what `a2x-local stats`
    shows): exact, or the approximate index above `[retrieval] approximate_above`."""
    return choose_index(services, RetrievalConfig.from_settings(settings)).to_dict()
