"""The LLM search methods as registry entries: `a2x`, `a2x+rescue`, `full` and `select`.

Each factory reads what it needs from the registry database (the active tree, which keeps serving when stale; the
services), then gets its engine, and only then builds its retrieval pre-filter: a missing tree fails before a model
loads, and a missing or incomplete model (the engine's check of its files) fails in a second, before the embedding
model and the indexes load (the optional libraries they need are checked first of all).
Library callers that run several methods (evaluation, a server) pass one running engine as ``engine=``, and may pass
a ready pre-filter as ``retriever=``; the CLI passes a model.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from a2x_local.db import connect
from a2x_local.extras import check, installed
from a2x_local.llm import ENGINE_OPTION_NAMES, Engine, EngineName, EngineOptions, make_engine
from a2x_local.overrides import overrides_of
from a2x_local.registry import Service
from a2x_local.search.llm.a2x import A2XSearch
from a2x_local.search.llm.baselines import FullCatalogue, RetrieveSelect
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.search.llm.staleness import Staleness, serving_tree
from a2x_local.search.methods import MethodSpec, ProgressFactory
from a2x_local.search.retrieval.config import RetrievalConfig
from a2x_local.search.retrieval.corpus import Corpus, read_corpus
from a2x_local.search.retrieval.methods import BM25_NEEDS, DENSE_NEEDS, hybrid_retriever
from a2x_local.search.types import MODES, Retriever
from a2x_local.settings import Settings
from a2x_local.taxonomy import Tree, load_active_tree

# The `[search]` keys a run may change, typed and bounded by the table's own fields (search/llm/config.py).
_SEARCH = overrides_of(LlmSearchConfig)
_RETRIEVAL = overrides_of(RetrievalConfig)


class LlmOptions(EngineOptions):
    """Options every LLM method takes: the engine options (or a running engine), and the `[search]` keys worth
    changing per run."""

    model_config = ConfigDict(extra="forbid", frozen=False, arbitrary_types_allowed=True)

    engine: Engine | EngineName | None = Field(None, description="a running engine, or the engine kind to start")
    preset: _SEARCH.preset = None
    merge_threshold: _SEARCH.merge_threshold = None
    group_cap: _SEARCH.group_cap = None
    max_services_selected: _SEARCH.max_services_selected = None
    max_children_selected: _SEARCH.max_children_selected = None
    service_description_chars: _SEARCH.service_description_chars = None
    category_description_chars: _SEARCH.category_description_chars = None
    service_lines: _SEARCH.service_lines = None
    language_line: _SEARCH.language_line = None


class RetrievalOptions(BaseModel):
    """The hybrid pre-filter's own options (None = the `[retrieval]` configuration), or a ready pre-filter."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedding_model: _RETRIEVAL.embedding_model = None
    text: _RETRIEVAL.text = None
    # A caller that holds a retriever over this registry already (a test's, with a fixed ranking) hands it over,
    # as `engine` takes a running engine; never part of the search settings a run records.
    retriever: Retriever | None = Field(None, exclude=True, description="a ready retriever over this registry, "
                                        "used instead of building the hybrid pre-filter")


class A2XOptions(LlmOptions, RetrievalOptions):
    """The descent's own levers; the retrieval options serve pre-ranking (and the rescue)."""

    category_lines: _SEARCH.category_lines = None
    direct_select_below: _SEARCH.direct_select_below = None
    prerank_min: _SEARCH.prerank_min = None
    prerank_share: _SEARCH.prerank_share = None
    pack_groups: _SEARCH.pack_groups = None
    group_lists: _SEARCH.group_lists = None
    option_order: _SEARCH.option_order = None
    overselect_share: _SEARCH.overselect_share = None
    overselect_keep: _SEARCH.overselect_keep = None
    max_calls_per_query: _SEARCH.max_calls_per_query = None
    max_prompt_tokens_per_query: _SEARCH.max_prompt_tokens_per_query = None


class SelectOptions(LlmOptions, RetrievalOptions):
    select_top_k: _SEARCH.select_top_k = None


class RescueOptions(A2XOptions):
    rescue_top_k: _SEARCH.rescue_top_k = None


_RETRIEVAL_KEYS = ("embedding_model", "text")


def search_config(settings: Settings, options: BaseModel) -> LlmSearchConfig:
    """`[search]` with the options that name its keys."""
    values = options.model_dump(exclude_none=True, exclude={*ENGINE_OPTION_NAMES, *_RETRIEVAL_KEYS})
    return LlmSearchConfig.from_settings(settings, **values)


def engine_for(settings: Settings, options: LlmOptions) -> Engine:
    """The engine given, or one started from the options, already checked as engine options are (an unknown or
    missing model is a UserError)."""
    if isinstance(options.engine, Engine):
        return options.engine
    return make_engine(settings, options)


def load_corpus_and_tree(settings: Settings, db_path: Path, *, tree: bool) -> tuple[Tree | None, Corpus]:
    """The registry's services and, when asked, its active tree (refused when there is none), read together."""
    with connect(db_path, lock_timeout_s=settings.lock_timeout_s, mode="read") as con:
        corpus = read_corpus(con, db_path)
        active = load_active_tree(con) if tree else None
    return active, corpus


def _serving(tree: Tree | None, corpus: Corpus) -> tuple[Tree, Staleness | None]:
    """A stale tree keeps serving, without the services that are gone (see staleness.py)."""
    assert tree is not None
    return serving_tree(tree, set(corpus.ids), corpus.fingerprint)


def _retriever(settings: Settings, corpus: Corpus, options: RetrievalOptions,
               progress: ProgressFactory | None) -> Retriever:
    """The retriever given, else the hybrid pre-filter over the corpus already read (its indexes built on the way
    when missing or stale)."""
    if options.retriever is not None:
        return options.retriever
    config = RetrievalConfig.from_settings(settings, text=options.text)
    return hybrid_retriever(corpus, config, embedding_model=options.embedding_model, progress=progress)


def _a2x(settings: Settings, db_path: Path, options: A2XOptions, progress: ProgressFactory | None) -> A2XSearch:
    config = search_config(settings, options)
    if config.prerank_min:
        check(*DENSE_NEEDS, *BM25_NEEDS, feature="a2x pre-ranking ([search] prerank_min; 0 turns it off)")
    active, corpus = load_corpus_and_tree(settings, db_path, tree=True)
    tree, stale = _serving(active, corpus)
    engine = engine_for(settings, options)
    ranker = _retriever(settings, corpus, options, progress) if config.prerank_min else None
    # A model that chooses too much, or spends a query's budget, keeps what the hybrid ranking puts first: the
    # retriever is made on first need (where the [retrieval] extra is installed), never for a model that behaves.
    fallback = None
    if ranker is None and all(installed(module) for module in (*DENSE_NEEDS, *BM25_NEEDS)):
        def fallback() -> Retriever:
            return _retriever(settings, corpus, options, progress)
    return A2XSearch(tree, _by_id(corpus), engine, config, ranker=ranker, stale=stale, fallback_ranker=fallback)


def _rescue(settings: Settings, db_path: Path, options: RescueOptions,
            progress: ProgressFactory | None) -> A2XSearch:
    config = search_config(settings, options)
    check(*DENSE_NEEDS, *BM25_NEEDS, feature="a2x+rescue (its hybrid retrieval)")
    active, corpus = load_corpus_and_tree(settings, db_path, tree=True)
    tree, stale = _serving(active, corpus)
    engine = engine_for(settings, options)
    retriever = _retriever(settings, corpus, options, progress)
    return A2XSearch(tree, _by_id(corpus), engine, config, rescue=retriever, ranker=retriever, stale=stale)


def _full(settings: Settings, db_path: Path, options: LlmOptions,
          _progress: ProgressFactory | None) -> FullCatalogue:
    config = search_config(settings, options)
    _, corpus = load_corpus_and_tree(settings, db_path, tree=False)
    return FullCatalogue(corpus.services, engine_for(settings, options), config)


def _select(settings: Settings, db_path: Path, options: SelectOptions,
            progress: ProgressFactory | None) -> RetrieveSelect:
    config = search_config(settings, options)
    check(*DENSE_NEEDS, *BM25_NEEDS, feature="select (its hybrid retrieval)")
    _, corpus = load_corpus_and_tree(settings, db_path, tree=False)
    engine = engine_for(settings, options)
    retriever = _retriever(settings, corpus, options, progress)
    return RetrieveSelect(corpus.services, retriever, engine, config)


def _by_id(corpus: Corpus) -> dict[str, Service]:
    return {service.id: service for service in corpus.services}


A2X_SPEC = MethodSpec("a2x", "LLM descent over the active tree, then selection (A2X)", A2XOptions, _a2x,
                      engine="required", modes=MODES, cost="llm", tree=True,
                      cost_note="a few short prompts per query: one per tree level, then the selection")
RESCUE_SPEC = MethodSpec("a2x+rescue", "A2X plus the hybrid top-k as one more candidate group", RescueOptions,
                         _rescue, engine="required", modes=MODES, cost="llm", tree=True,
                         cost_note="A2X's prompts plus one selection over the hybrid top-k")
FULL_SPEC = MethodSpec("full", "the whole catalogue in one prompt; the model picks", LlmOptions, _full,
                       engine="required", modes=MODES, cost="llm-heavy",
                       cost_note="one prompt holding every service (about 40K tokens per query on ToolRet's "
                                 "1,839 services), split into parts when it exceeds the context window")
SELECT_SPEC = MethodSpec("select", "hybrid top-k handed to the model for selection", SelectOptions, _select,
                         engine="required", modes=MODES, cost="llm",
                         cost_note="one prompt of the hybrid top-k (select_top_k) per query")
